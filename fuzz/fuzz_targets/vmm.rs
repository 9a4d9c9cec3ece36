//! libFuzzer entry point of target `vmm` (see `kestrel_fuzz::vmm`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::vmm::run(data));
