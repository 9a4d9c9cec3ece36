//! `kestrel-fabric-client`: how native programs and the VMM use the fabric service
//! (`kestrel-fabric`, `docs/adr/0020-fabric-service.md`).
//!
//! - [`proto`]: the service's IPC protocol (requests, replies, events, the shared page and
//!   the service's address-space layout), host-tested and fuzzed;
//! - `service` (PowerPC 440 only): the protocol stubs, [`service::Service`], one call per
//!   engine method.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod proto;
#[cfg(target_arch = "powerpc")]
pub mod service;
