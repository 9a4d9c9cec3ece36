//! A job of `n` ranks as threads over one engine (`kestrel_fabric::shared::Shared`), each
//! running a [`Face`]: what the C face's host tests share.

use kestrel_mpi_c::face::Face;
use std::sync::{Arc, Mutex};

/// The window every rank gets: the smallest the SPI layout takes, so rendezvous moves many
/// chunks.
pub const WINDOW: u64 = 0x10000;

pub use kestrel_fabric::shared::Shared;

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
    let (shared, eps) = Shared::with_endpoints(n, WINDOW);
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
