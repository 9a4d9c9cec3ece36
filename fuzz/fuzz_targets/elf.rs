//! libFuzzer entry point of target `elf` (see `kestrel_fuzz::elf`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::elf::run(data));
