//! libFuzzer entry point of target `service` (see `kestrel_fuzz::service`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::service::run(data));
