//! Result helpers for tests: a failing check returns a static description, and leaves the
//! values it compared for the harness to print after it.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

pub type TestResult = Result<(), &'static str>;

/// (valid, got, want) of the last failed comparison of the running test.
static DETAIL: [AtomicU32; 3] = [const { AtomicU32::new(0) }; 3];
/// Set when the running test skipped itself.
static SKIPPED: AtomicU32 = AtomicU32::new(0);

/// Forgets the previous test's detail and skip flag.
pub fn reset() {
    DETAIL[0].store(0, Relaxed);
    SKIPPED.store(0, Relaxed);
}

/// Fails with `what` unless `got == want`.
pub fn eq(what: &'static str, got: u32, want: u32) -> TestResult {
    if got == want {
        return Ok(());
    }
    DETAIL[1].store(got, Relaxed);
    DETAIL[2].store(want, Relaxed);
    DETAIL[0].store(1, Relaxed);
    Err(what)
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: &'static str) -> TestResult {
    if cond {
        Ok(())
    } else {
        Err(what)
    }
}

/// Ends the test as skipped (printed as SKIP, counted neither as passed nor as failed).
/// Only for behaviour the platform does not provide, never for a wrong result.
pub fn skip(reason: &'static str) -> TestResult {
    SKIPPED.store(1, Relaxed);
    Err(reason)
}

pub fn skipped() -> bool {
    SKIPPED.load(Relaxed) != 0
}

/// The (got, want) pair of the last failed `eq`, if any.
pub fn detail() -> Option<(u32, u32)> {
    (DETAIL[0].load(Relaxed) != 0).then(|| (DETAIL[1].load(Relaxed), DETAIL[2].load(Relaxed)))
}
