//! libFuzzer entry point of target `vtlb` (see `kestrel_fuzz::vtlb`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::vtlb::run(data));
