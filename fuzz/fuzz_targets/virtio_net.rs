//! libFuzzer entry point of target `virtio_net` (see `kestrel_fuzz::virtio_net`); built by scripts/fuzz.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kestrel_fuzz::virtio_net::run(data));
