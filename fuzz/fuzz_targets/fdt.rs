//! libFuzzer entry point of target `fdt` (see `kestrel_fuzz::fdt`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::fdt::run(data));
