//! libFuzzer entry point of target `decode` (see `kestrel_fuzz::decode`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::decode::run(data));
