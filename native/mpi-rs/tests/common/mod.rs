//! What the face's host tests share: jobs of ranks as threads, message patterns, and the
//! reduction oracle (the operations written out once more, independently of the core).
#![allow(dead_code)]

use mpi::platform::host::{self, Options};

/// Ranks in most tests: as many as the issue asks for.
pub const N: u32 = 8;

/// Runs `body` as every rank of an `n`-rank job and returns the ranks' results; any rank
/// that panicked (a fatal MPI error, a failed assertion) fails the test with its message.
pub fn job<T: Send + 'static>(n: u32, body: impl Fn() -> T + Send + Sync + 'static) -> Vec<T> {
    job_with(n, Options::default(), body)
}

pub fn job_with<T: Send + 'static>(
    n: u32,
    opts: Options,
    body: impl Fn() -> T + Send + Sync + 'static,
) -> Vec<T> {
    let out = host::run(n, opts, body);
    // The rank that ended the job first, not the ones it ended.
    let failed = out
        .iter()
        .enumerate()
        .filter_map(|(r, res)| res.as_ref().err().map(|e| (r, e)))
        .min_by_key(|(_, e)| e.starts_with("ended:"));
    if let Some((r, e)) = failed {
        panic!("rank {r} failed: {e}");
    }
    out.into_iter()
        .map(|res| res.unwrap_or_else(|_| unreachable!()))
        .collect()
}

/// `len` bytes of a xorshift stream seeded with `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
