//! libFuzzer entry point of target `torus` (see `kestrel_fuzz::torus`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::torus::run(data));
