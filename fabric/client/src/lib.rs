//! `kestrel-fabric-client`: the IPC transport to the fabric service (`kestrel-fabric`,
//! `docs/adr/0020-fabric-service.md`), for native programs and the VMM.
//!
//! - `service` (PowerPC 440 only): `service::Service`, the client: the fabric's calls
//!   (`kestrel_fabric::FabricApi`) as the protocol's calls (`kestrel_fabric::proto`, the one
//!   wire codec) over IPC, one per call.
//!
//! The libraries native programs link over this transport live in `native/`: the SPI-like
//! layer (`kestrel-spi`) and the MPI-like layer (`kestrel-mpi`) are generic over
//! `kestrel_fabric::FabricApi` and host-tested against the real engine; the network peer
//! (`kestrel-net`) only builds and parses frames, whatever carries them.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

#[cfg(target_arch = "powerpc")]
pub mod service;
