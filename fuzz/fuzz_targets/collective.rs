//! libFuzzer entry point of target `collective` (see `kestrel_fuzz::collective`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::collective::run(data));
