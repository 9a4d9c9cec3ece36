//! libFuzzer entry point of target `archive` (see `kestrel_fuzz::archive`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::archive::run(data));
