//! libFuzzer entry point of target `guestcpu` (see `kestrel_fuzz::guestcpu`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::guestcpu::run(data));
