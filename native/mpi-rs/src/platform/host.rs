//! The host platform (feature `host`, which brings `std`): a job of `n` ranks as `n`
//! threads over one fabric engine (`kestrel_fabric::Fabric`), each endpoint with its own
//! window, as the MPI core's own host tests run. [`run`] starts the job; inside it
//! [`crate::initialize`] works as on Kestrel.
//!
//! A fatal error panics its thread with the error's line (and prints it on stderr); a rank
//! that sees another end the job panics with a line starting `ended:`. [`run`] returns every
//! rank's result or panic message.

use super::{abort_seen, Job};
use crate::environment::Universe;
use kestrel_fabric::coll::PAYLOAD;
use kestrel_fabric::{
    Coords, Diagnostic, EpId, Fabric as Engine, FabricApi, FabricError, Grant, Stats, VecMemory,
    IRQ_WORDS,
};
use std::cell::{Cell, RefCell};
use std::string::{String, ToString};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::vec::Vec;

/// One rank's view of the shared engine: every call locks it.
pub struct Fabric {
    engine: Arc<Mutex<Engine<VecMemory>>>,
    ep: EpId,
}

impl Fabric {
    fn f(&self) -> MutexGuard<'_, Engine<VecMemory>> {
        self.engine
            .lock()
            .expect("a rank panicked with the engine locked")
    }
}

impl FabricApi for Fabric {
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
        p: &[u8; PAYLOAD],
    ) -> Result<(), FabricError> {
        self.f().tree_inject(ep, vc, h, p)
    }
    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        p: &mut [u8; PAYLOAD],
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

/// How [`run`] sets a job up.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Each endpoint's window in bytes (rendezvous stages are its upper part, ADR 0035).
    pub window: u64,
    /// A blocking call with no progress for this long ends the job (the core's deadlock
    /// report).
    pub deadlock_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: 4 << 20,
            deadlock_ms: 30_000,
        }
    }
}

thread_local! {
    /// The rank this thread is, until [`crate::initialize`] takes it.
    static PENDING: RefCell<Option<Job<Fabric>>> = const { RefCell::new(None) };
    /// Whether this thread (rank) has called [`crate::initialize`].
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

/// [`crate::initialize`] on the host: this thread's rank, once.
pub(crate) fn launch() -> Option<Universe> {
    if STARTED.with(|s| s.replace(true)) {
        return None;
    }
    let job = PENDING.with(|p| p.borrow_mut().take())?;
    crate::initialize_with(job)
}

/// Runs `body` as every rank of an `n`-rank job, one thread each (16 MiB stacks); `body`
/// calls [`crate::initialize`] itself. Returns each rank's result in rank order, or the
/// message its thread panicked with (a fatal MPI error's line, `ended: ...` for a rank that
/// another ended, or an assertion of `body`).
pub fn run<T: Send + 'static>(
    n: u32,
    opts: Options,
    body: impl Fn() -> T + Send + Sync + 'static,
) -> Vec<Result<T, String>> {
    spawn(n, opts, move |engine, ep, bus, rank| {
        let job = Job {
            fabric: Fabric { engine, ep },
            ep,
            bus,
            rank,
            size: n,
            env: kestrel_mpi::Env {
                wait,
                now_ns,
                deadlock_ns: opts.deadlock_ms * 1_000_000,
            },
            fatal,
            ended,
        };
        PENDING.with(|p| *p.borrow_mut() = Some(job));
        body()
    })
}

/// Runs `body` on the MPI core alone (no face, no start-up barrier) as every rank of an
/// `n`-rank job, one thread each: for tests of the core as the face meets it
/// (`tests/core_races.rs`). A blocking call with no progress for the deadlock timeout
/// returns the core's `Error::Deadlock`.
pub fn run_core<T: Send + 'static>(
    n: u32,
    opts: Options,
    body: impl Fn(&mut kestrel_mpi::Mpi<Fabric>) -> T + Send + Sync + 'static,
) -> Vec<Result<T, String>> {
    spawn(n, opts, move |engine, ep, bus, rank| {
        let env = kestrel_mpi::Env {
            wait,
            now_ns,
            deadlock_ns: opts.deadlock_ms * 1_000_000,
        };
        let fabric = Fabric { engine, ep };
        let mut m = kestrel_mpi::Mpi::init(fabric, ep, bus, rank, n, env)
            .unwrap_or_else(|e| panic!("rank {rank}: MPI_Init: {e}"));
        body(&mut m)
    })
}

/// An engine with `n` endpoints and a thread per rank running `rank(engine, ep, bus, rank)`.
fn spawn<T: Send + 'static>(
    n: u32,
    opts: Options,
    rank: impl Fn(Arc<Mutex<Engine<VecMemory>>>, EpId, u64, u32) -> T + Send + Sync + 'static,
) -> Vec<Result<T, String>> {
    let mut engine = Engine::new(VecMemory::new());
    let mut eps = Vec::new();
    for _ in 0..n {
        let (ep, base) = engine
            .attach(opts.window)
            .expect("an endpoint for each rank");
        engine.grant(ep, Grant::ALL).expect("grant");
        engine.memory_mut().set_window(ep, opts.window as usize);
        eps.push((ep, base));
    }
    let engine = Arc::new(Mutex::new(engine));
    let body = Arc::new(rank);
    let threads: Vec<_> = eps
        .into_iter()
        .enumerate()
        .map(|(r, (ep, bus))| {
            let engine = engine.clone();
            let body = body.clone();
            std::thread::Builder::new()
                .name(std::format!("rank {r}"))
                .stack_size(16 << 20)
                .spawn(move || {
                    let mine = engine.clone();
                    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        body(mine, ep, bus, r as u32)
                    }));
                    res.unwrap_or_else(|e| {
                        // Any panic (a failed assertion too) ends the whole job at once,
                        // as a fatal MPI error does, rather than at the others' deadlock
                        // timeout. A poisoned engine cannot be told; the others then end
                        // at their next engine call.
                        if !engine.is_poisoned() {
                            let mut f = Fabric { engine, ep };
                            super::signal_abort(&mut f, ep, r as u32, 1);
                        }
                        std::panic::resume_unwind(e)
                    })
                })
                .expect("a thread for each rank")
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().map_err(|e| panic_message(&*e)))
        .collect()
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = e.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "a panic without a message".to_string()
    }
}

fn wait(f: &mut Fabric) {
    std::thread::yield_now();
    let ep = f.ep;
    if let Some(from) = abort_seen(f, ep) {
        ended(f, ep, from);
    }
}

fn ended(f: &mut Fabric, ep: EpId, from: u32) -> ! {
    f.detach(ep);
    std::panic::panic_any(std::format!("ended: rank {from} ended the job"))
}

fn fatal(line: &str, _code: i32) -> ! {
    std::eprintln!("{line}");
    std::panic::panic_any(line.to_string())
}

/// Nanoseconds since the first call in this process.
pub fn now_ns() -> u64 {
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}
