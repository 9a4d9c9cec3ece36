//! A job of ranks as threads over one engine ([`Shared`]: every call takes its lock).

pub use kestrel_fabric::shared::Shared;
use std::sync::Arc;

/// Runs `body` as every rank of an `n`-rank job (windows of `window` bytes), one thread
/// each, and returns their results in rank order.
pub fn job<T: Send + 'static>(
    n: u32,
    window: u64,
    deadlock_ms: u64,
    body: impl Fn(&mut kestrel_mpi::Mpi<Shared>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let (shared, eps) = Shared::with_endpoints(n, window);
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
                    let mut m =
                        kestrel_mpi::Mpi::init(s, ep, base, r as u32, n, env).expect("MPI_Init");
                    body(&mut m)
                })
                .unwrap()
        })
        .collect();
    hs.into_iter()
        .map(|h| h.join().expect("a rank panicked"))
        .collect()
}

fn wait(_: &mut Shared) {
    std::thread::yield_now();
}

pub fn now_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}
