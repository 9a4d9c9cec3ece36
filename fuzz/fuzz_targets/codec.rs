//! libFuzzer entry point of target `codec` (see `kestrel_fuzz::codec`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::codec::run(data));
