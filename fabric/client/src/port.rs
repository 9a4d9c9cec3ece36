//! [`Port`]: the engine's calls as one trait, so the SPI and MPI layers run unchanged over
//! the fabric service (`service::Native`, on the target) and over an in-process engine
//! (`kestrel_fabric::Fabric`, in host tests and in a VMM that embeds it).
//!
//! Besides the engine's calls, a port gives the client its own view of its DMA window
//! ([`Port::mem_read`], [`Port::mem_write`]: offsets inside the endpoint's window), where
//! the SPI layer keeps FIFOs, descriptors and buffers.

use kestrel_fabric::{EpId, Fabric, FabricError, Link, Memory};

/// The engine's calls, on endpoint numbers.
pub trait Port {
    type Error: core::fmt::Debug;
    fn dma_read(&mut self, ep: u8, offset: u32) -> Result<u32, Self::Error>;
    fn dma_write(&mut self, ep: u8, offset: u32, value: u32) -> Result<(), Self::Error>;
    fn dcr_read(&mut self, ep: u8, dcr: u32) -> Result<u32, Self::Error>;
    fn dcr_write(&mut self, ep: u8, dcr: u32, value: u32) -> Result<(), Self::Error>;
    fn tree_inject(
        &mut self,
        ep: u8,
        vc: usize,
        header: u32,
        payload: &[u8; 256],
    ) -> Result<(), Self::Error>;
    fn tree_receive(
        &mut self,
        ep: u8,
        vc: usize,
        payload: &mut [u8; 256],
    ) -> Result<Option<u32>, Self::Error>;
    fn tree_status(&mut self, ep: u8, vc: usize) -> Result<u32, Self::Error>;
    fn frame_send(&mut self, ep: u8, frame: &[u8]) -> Result<(), Self::Error>;
    fn frame_receive(&mut self, ep: u8, buf: &mut [u8]) -> Result<Option<usize>, Self::Error>;
    /// The caller's endpoints whose lines or frame queue changed (bit k = endpoint k).
    fn take_changed(&mut self) -> Result<u32, Self::Error>;
    /// Reads the client's own window of endpoint `ep` at `offset`.
    fn mem_read(&mut self, ep: u8, offset: u32, buf: &mut [u8]) -> Result<(), Self::Error>;
    /// Writes the client's own window of endpoint `ep` at `offset`.
    fn mem_write(&mut self, ep: u8, offset: u32, data: &[u8]) -> Result<(), Self::Error>;
}

/// What an in-process engine port refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    Fabric(FabricError),
    /// The window access is outside the endpoint's window.
    Memory,
}

impl<M: Memory, L: Link> Port for Fabric<M, L> {
    type Error = EngineError;
    fn dma_read(&mut self, ep: u8, offset: u32) -> Result<u32, EngineError> {
        Fabric::dma_read(self, EpId(ep), offset).map_err(EngineError::Fabric)
    }
    fn dma_write(&mut self, ep: u8, offset: u32, value: u32) -> Result<(), EngineError> {
        Fabric::dma_write(self, EpId(ep), offset, value).map_err(EngineError::Fabric)
    }
    fn dcr_read(&mut self, ep: u8, dcr: u32) -> Result<u32, EngineError> {
        Fabric::dcr_read(self, EpId(ep), dcr).map_err(EngineError::Fabric)
    }
    fn dcr_write(&mut self, ep: u8, dcr: u32, value: u32) -> Result<(), EngineError> {
        Fabric::dcr_write(self, EpId(ep), dcr, value).map_err(EngineError::Fabric)
    }
    fn tree_inject(
        &mut self,
        ep: u8,
        vc: usize,
        header: u32,
        payload: &[u8; 256],
    ) -> Result<(), EngineError> {
        Fabric::tree_inject(self, EpId(ep), vc, header, payload).map_err(EngineError::Fabric)
    }
    fn tree_receive(
        &mut self,
        ep: u8,
        vc: usize,
        payload: &mut [u8; 256],
    ) -> Result<Option<u32>, EngineError> {
        Ok(Fabric::tree_receive(self, EpId(ep), vc, payload))
    }
    fn tree_status(&mut self, ep: u8, vc: usize) -> Result<u32, EngineError> {
        Ok(Fabric::tree_status(self, EpId(ep), vc))
    }
    fn frame_send(&mut self, ep: u8, frame: &[u8]) -> Result<(), EngineError> {
        Fabric::frame_send(self, EpId(ep), frame).map_err(EngineError::Fabric)
    }
    fn frame_receive(&mut self, ep: u8, buf: &mut [u8]) -> Result<Option<usize>, EngineError> {
        Ok(Fabric::frame_receive(self, EpId(ep), buf))
    }
    fn take_changed(&mut self) -> Result<u32, EngineError> {
        Ok(Fabric::take_changed(self))
    }
    fn mem_read(&mut self, ep: u8, offset: u32, buf: &mut [u8]) -> Result<(), EngineError> {
        self.memory_mut()
            .read(EpId(ep), u64::from(offset), buf)
            .map_err(|_| EngineError::Memory)
    }
    fn mem_write(&mut self, ep: u8, offset: u32, data: &[u8]) -> Result<(), EngineError> {
        self.memory_mut()
            .write(EpId(ep), u64::from(offset), data)
            .map_err(|_| EngineError::Memory)
    }
}
