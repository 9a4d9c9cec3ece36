//! `kestrel-fabric-client`: the IPC transport to the fabric service (`kestrel-fabric`,
//! `docs/adr/0020-fabric-service.md`), for native programs and the VMM.
//!
//! - [`port`]: the engine's calls as one trait, implemented by the in-process engine and by
//!   the service;
//! - `service` (PowerPC 440 only): the protocol's calls (`kestrel_fabric::proto`, the one
//!   wire codec) over IPC: `service::Service`, one call per engine method,
//!   `service::Native`, a native program's port, and `service::RemoteFabric`, the service
//!   with the engine's signatures (the VMM's).
//!
//! The libraries native programs link over this transport live in `native/`: the SPI-like
//! layer (`kestrel-spi`), the MPI-like layer (`kestrel-mpi`) and the network peer
//! (`kestrel-net`).
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod port;
#[cfg(target_arch = "powerpc")]
pub mod service;
