//! [`Shared`] (feature `std`): one engine shared by threads, every [`FabricApi`] call taking
//! its lock. How host tests and the host platforms of the MPI faces run a job of ranks as
//! threads of one process, each rank with its own endpoint, as ranks on Kestrel share the
//! fabric service.

extern crate std;

use crate::{
    Coords, Diagnostic, EpId, Fabric, FabricApi, FabricError, Grant, Stats, VecMemory, IRQ_WORDS,
};
use alloc::vec::Vec;
use std::sync::{Arc, Mutex, MutexGuard};

/// A handle on the shared engine (clones share it).
#[derive(Clone)]
pub struct Shared(pub Arc<Mutex<Fabric<VecMemory>>>);

impl Shared {
    /// An engine with `n` endpoints, each granted everything and given a zeroed window of
    /// `window` bytes; returns it and each endpoint with its window's bus base.
    pub fn with_endpoints(n: u32, window: u64) -> (Shared, Vec<(EpId, u64)>) {
        let mut f = Fabric::new(VecMemory::new());
        let mut eps = Vec::new();
        for _ in 0..n {
            let (ep, base) = f.attach(window).expect("an endpoint for each rank");
            f.grant(ep, Grant::ALL)
                .expect("a grant for an attached endpoint");
            f.memory_mut().set_window(ep, window as usize);
            eps.push((ep, base));
        }
        (Shared(Arc::new(Mutex::new(f))), eps)
    }

    /// The engine, locked.
    pub fn lock(&self) -> MutexGuard<'_, Fabric<VecMemory>> {
        self.0
            .lock()
            .expect("a rank panicked with the engine locked")
    }
}

impl FabricApi for Shared {
    type Error = FabricError;
    type Window = u64;
    fn attach(&mut self, w: u64) -> Result<(EpId, u64), FabricError> {
        self.lock().attach(w)
    }
    fn detach(&mut self, ep: EpId) {
        self.lock().detach(ep)
    }
    fn window(&self, ep: EpId) -> Option<(u64, u64)> {
        self.lock().window(ep)
    }
    fn coords(&self, ep: EpId) -> Coords {
        self.lock().coords(ep)
    }
    fn node_address(&self, ep: EpId) -> u32 {
        self.lock().node_address(ep)
    }
    fn dma_read(&mut self, ep: EpId, o: u32) -> Result<u32, FabricError> {
        self.lock().dma_read(ep, o)
    }
    fn dma_write(&mut self, ep: EpId, o: u32, v: u32) -> Result<(), FabricError> {
        self.lock().dma_write(ep, o, v)
    }
    fn dcr_read(&mut self, ep: EpId, d: u32) -> Result<u32, FabricError> {
        self.lock().dcr_read(ep, d)
    }
    fn dcr_write(&mut self, ep: EpId, d: u32, v: u32) -> Result<(), FabricError> {
        self.lock().dcr_write(ep, d, v)
    }
    fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        h: u32,
        p: &[u8; 256],
    ) -> Result<(), FabricError> {
        self.lock().tree_inject(ep, vc, h, p)
    }
    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        p: &mut [u8; 256],
    ) -> Result<Option<u32>, FabricError> {
        self.lock().tree_receive(ep, vc, p)
    }
    fn tree_status(&self, ep: EpId, vc: usize) -> u32 {
        self.lock().tree_status(ep, vc)
    }
    fn frame_send(&mut self, ep: EpId, fr: &[u8]) -> Result<(), FabricError> {
        self.lock().frame_send(ep, fr)
    }
    fn frame_receive(&mut self, ep: EpId, b: &mut [u8]) -> Result<Option<usize>, FabricError> {
        self.lock().frame_receive(ep, b)
    }
    fn frames_queued(&self, ep: EpId) -> usize {
        self.lock().frames_queued(ep)
    }
    fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS] {
        self.lock().irq_lines(ep)
    }
    fn take_changed(&mut self) -> Result<u32, FabricError> {
        self.lock().take_changed()
    }
    fn stats(&self, ep: EpId) -> Stats {
        self.lock().stats(ep)
    }
    fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic> {
        self.lock().take_diagnostic(ep)
    }
    fn mem_read(&mut self, ep: EpId, o: u32, b: &mut [u8]) -> Result<(), FabricError> {
        self.lock().mem_read(ep, o, b)
    }
    fn mem_write(&mut self, ep: EpId, o: u32, d: &[u8]) -> Result<(), FabricError> {
        self.lock().mem_write(ep, o, d)
    }
    /// Each window is a `Vec` of this process that never moves: memory inside it is the
    /// window, as a Kestrel program's heap kept in its window is (host tests of zero-copy).
    fn window_offset_of(&self, ep: EpId, addr: usize, len: usize) -> Option<u32> {
        let f = self.lock();
        let w = f.memory().window(ep);
        let off = addr.checked_sub(w.as_ptr() as usize)?;
        (off.checked_add(len)? <= w.len()).then_some(u32::try_from(off).ok()?)
    }
}
