//! `kestrel-fabric-client`: how native programs and the VMM use the fabric service
//! (`kestrel-fabric`, `docs/adr/0020-fabric-service.md`).
//!
//! - [`proto`]: the service's IPC protocol (requests, replies, events, the shared page and
//!   the service's address-space layout), host-tested and fuzzed;
//! - [`spi`]: an SPI-like layer: a DMA group's FIFOs and counter in the client's window,
//!   descriptors, memory-FIFO messages in bgnet's torus framing, reassembly, direct put,
//!   collective headers;
//! - [`mpi`]: an MPI-like layer: ranks, send/recv, barrier, allreduce on the collective ALU;
//! - [`net`]: the tiny network peer of `kestrel-echo` (ARP, ping, UDP echo) and bgnet's
//!   collective framing;
//! - `service` (PowerPC 440 only): `service::Service`, the client: the fabric's calls
//!   (`kestrel_fabric::FabricApi`) as one IPC call each.
//!
//! The layers are generic over `kestrel_fabric::FabricApi` and host-tested against the real
//! engine (`tests/`).
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod mpi;
pub mod net;
pub mod proto;
#[cfg(target_arch = "powerpc")]
pub mod service;
pub mod spi;
