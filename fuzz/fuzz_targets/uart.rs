//! libFuzzer entry point of target `uart` (see `kestrel_fuzz::uart`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::uart::run(data));
