//! libFuzzer entry point of target `uic` (see `kestrel_fuzz::uic`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::uic::run(data));
