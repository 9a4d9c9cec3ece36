//! libFuzzer entry point of target `fabric` (see `kestrel_fuzz::fabric`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::fabric::run(data));
