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
use kestrel_fabric::{EpId, FabricApi};
use std::cell::{Cell, RefCell};
use std::string::{String, ToString};
use std::sync::{Arc, OnceLock};
use std::vec::Vec;

/// The shared engine as a rank calls it: every call takes its lock.
pub type Fabric = kestrel_fabric::shared::Shared;

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
    /// This thread's (rank's) endpoint, for its waits' look for an abort.
    static MY_EP: Cell<Option<EpId>> = const { Cell::new(None) };
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
            fabric: engine,
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
        let fabric = engine;
        let mut m = kestrel_mpi::Mpi::init(fabric, ep, bus, rank, n, env)
            .unwrap_or_else(|e| panic!("rank {rank}: MPI_Init: {e}"));
        body(&mut m)
    })
}

/// An engine with `n` endpoints and a thread per rank running `rank(engine, ep, bus, rank)`.
fn spawn<T: Send + 'static>(
    n: u32,
    opts: Options,
    rank: impl Fn(Fabric, EpId, u64, u32) -> T + Send + Sync + 'static,
) -> Vec<Result<T, String>> {
    let (engine, eps) = Fabric::with_endpoints(n, opts.window);
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
                    MY_EP.with(|m| m.set(Some(ep)));
                    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        body(mine, ep, bus, r as u32)
                    }));
                    res.unwrap_or_else(|e| {
                        // Any panic (a failed assertion too) ends the whole job at once,
                        // as a fatal MPI error does, rather than at the others' deadlock
                        // timeout. A poisoned engine cannot be told; the others then end
                        // at their next engine call.
                        if !engine.0.is_poisoned() {
                            let mut f = engine;
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
    let Some(ep) = MY_EP.with(Cell::get) else {
        return;
    };
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
