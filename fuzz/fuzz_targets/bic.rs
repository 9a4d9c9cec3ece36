//! libFuzzer entry point of target `bic` (see `kestrel_fuzz::bic`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::bic::run(data));
