//! The engine shared by ranks on threads (every [`FabricApi`] call locks it), and a job of
//! `n` ranks each running a [`Face`] over it: what the C face's host tests share.

use kestrel_fabric::{
    Coords, Diagnostic, EpId, Fabric, FabricApi, FabricError, Stats, VecMemory, IRQ_WORDS,
};
use kestrel_mpi_c::face::Face;
use std::sync::{Arc, Mutex};

/// The window every rank gets: the smallest the SPI layout takes, so rendezvous moves many
/// chunks.
pub const WINDOW: u64 = 0x10000;

#[derive(Clone)]
pub struct Shared(Arc<Mutex<Fabric<VecMemory>>>);

impl Shared {
    fn f(&self) -> std::sync::MutexGuard<'_, Fabric<VecMemory>> {
        self.0
            .lock()
            .expect("a rank panicked with the engine locked")
    }
}

impl FabricApi for Shared {
    type Error = FabricError;
    type Window = u64;
    fn attach(&mut self, w: u64) -> Result<(EpId, u64), FabricError> {
        self.f().attach(w)
    }
    fn detach(&mut self, ep: EpId) {
        self.f().detach(ep)
    }
    fn window(&self, ep: EpId) -> Option<(u64, u64)> {
        self.f().window(ep)
    }
    fn coords(&self, ep: EpId) -> Coords {
        self.f().coords(ep)
    }
    fn node_address(&self, ep: EpId) -> u32 {
        self.f().node_address(ep)
    }
    fn dma_read(&mut self, ep: EpId, o: u32) -> Result<u32, FabricError> {
        self.f().dma_read(ep, o)
    }
    fn dma_write(&mut self, ep: EpId, o: u32, v: u32) -> Result<(), FabricError> {
        self.f().dma_write(ep, o, v)
    }
    fn dcr_read(&mut self, ep: EpId, d: u32) -> Result<u32, FabricError> {
        self.f().dcr_read(ep, d)
    }
    fn dcr_write(&mut self, ep: EpId, d: u32, v: u32) -> Result<(), FabricError> {
        self.f().dcr_write(ep, d, v)
    }
    fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        h: u32,
        p: &[u8; 256],
    ) -> Result<(), FabricError> {
        self.f().tree_inject(ep, vc, h, p)
    }
    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        p: &mut [u8; 256],
    ) -> Result<Option<u32>, FabricError> {
        self.f().tree_receive(ep, vc, p)
    }
    fn tree_status(&self, ep: EpId, vc: usize) -> u32 {
        self.f().tree_status(ep, vc)
    }
    fn frame_send(&mut self, ep: EpId, fr: &[u8]) -> Result<(), FabricError> {
        self.f().frame_send(ep, fr)
    }
    fn frame_receive(&mut self, ep: EpId, b: &mut [u8]) -> Result<Option<usize>, FabricError> {
        self.f().frame_receive(ep, b)
    }
    fn frames_queued(&self, ep: EpId) -> usize {
        self.f().frames_queued(ep)
    }
    fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS] {
        self.f().irq_lines(ep)
    }
    fn take_changed(&mut self) -> Result<u32, FabricError> {
        self.f().take_changed()
    }
    fn stats(&self, ep: EpId) -> Stats {
        self.f().stats(ep)
    }
    fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic> {
        self.f().take_diagnostic(ep)
    }
    fn mem_read(&mut self, ep: EpId, o: u32, b: &mut [u8]) -> Result<(), FabricError> {
        self.f().mem_read(ep, o, b)
    }
    fn mem_write(&mut self, ep: EpId, o: u32, d: &[u8]) -> Result<(), FabricError> {
        self.f().mem_write(ep, o, d)
    }
}

fn wait(_: &mut Shared) {
    std::thread::yield_now();
}

fn now_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

/// One job at a time in this test binary: eight rank threads per job are plenty for a 2-core
/// host, and jobs side by side made each one's timing (and so the MPI core's intermittent
/// deadlock, see `Face::start`) depend on the others.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// Runs `body` as every rank of an `n`-rank job, one thread each, each with its own [`Face`]
/// (a blocking call that sees no progress for `deadlock_ms` fails), and returns the results
/// in rank order.
pub fn job<T: Send + 'static>(
    n: u32,
    deadlock_ms: u64,
    body: impl Fn(&mut Face<Shared>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = Fabric::new(VecMemory::new());
    let mut eps = Vec::new();
    for _ in 0..n {
        let (ep, base) = f.attach(WINDOW).unwrap();
        f.grant(ep, kestrel_fabric::Grant::ALL).unwrap();
        f.memory_mut().set_window(ep, WINDOW as usize);
        eps.push((ep, base));
    }
    let shared = Shared(Arc::new(Mutex::new(f)));
    let body = Arc::new(body);
    let hs: Vec<_> = eps
        .into_iter()
        .enumerate()
        .map(|(r, (ep, base))| {
            let s = shared.clone();
            let body = body.clone();
            std::thread::Builder::new()
                .stack_size(16 << 20)
                .spawn(move || {
                    let env = kestrel_mpi::Env {
                        wait: wait as fn(&mut Shared),
                        now_ns,
                        deadlock_ns: deadlock_ms * 1_000_000,
                    };
                    let m =
                        kestrel_mpi::Mpi::init(s, ep, base, r as u32, n, env).expect("MPI_Init");
                    body(&mut Face::start(m).expect("MPI_Init's end"))
                })
                .unwrap()
        })
        .collect();
    hs.into_iter()
        .map(|h| h.join().expect("a rank panicked"))
        .collect()
}
