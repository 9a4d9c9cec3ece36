//! Scheduling: round robin between equal priorities, strict priority order, and
//! yielding with ThreadSwitch.

use crate::children::{fair_spinner, ticket, yielder, ORDER, YIELD_LEN, YIELD_LOG, YIELD_ROUNDS};
use crate::common::{call_failed, expect_kerror, note, report_from, timebase_hz, TestResult};
use crate::threads::{Thread, CHILD_PRIORITY};
use core::sync::atomic::Ordering::Relaxed;
use kestrel_abi::{KError, DEFAULT_TIMESLICE_US, MAX_PRIORITY};
use kestrel_user::sys;

/// Below the root, so the root's receives preempt the helpers.
const LOW: u32 = CHILD_PRIORITY - 10;

/// Two threads of equal priority that never block share the processor: after
/// 50 ms each has had at least a quarter of it.
pub fn round_robin_is_fair() -> TestResult {
    let window_us = 50_000u64;
    let deadline = sys::timebase() + timebase_hz()? * window_us / 1_000_000;
    let a = Thread::local(fair_spinner, deadline as u32, LOW)?;
    let b = Thread::local(fair_spinner, deadline as u32, LOW)?;
    let ca = report_from(a.id())?.mr(1) as u64;
    let cb = report_from(b.id())?.mr(1) as u64;
    let total = ca + cb;
    ensure!(
        total > 0 && ca * 4 >= total && cb * 4 >= total,
        "the processor was not shared fairly",
        "counts {ca} and {cb}"
    );
    Ok(())
}

/// The higher-priority thread runs first, whatever the creation order; Schedule
/// changes a priority and checks its arguments.
pub fn priority_order() -> TestResult {
    ORDER.store(0, Relaxed);
    let low = Thread::local(ticket, 0, LOW - 20)?;
    let high = Thread::local(ticket, 0, LOW - 20)?;
    sys::schedule(high.id(), LOW - 10, DEFAULT_TIMESLICE_US)
        .map_err(|e| call_failed("Schedule", e))?;
    let first = report_from(high.id())?.mr(1);
    let second = report_from(low.id())?.mr(1);
    ensure!(
        first == 0 && second == 1,
        "the lower priority ran first",
        "high got ticket {first}, low {second}"
    );
    expect_kerror(
        "Schedule beyond the highest priority",
        sys::schedule(low.id(), MAX_PRIORITY + 1, 0),
        &[KError::InvalidScheduler],
    )?;
    let gone = Thread::reserve()?;
    expect_kerror(
        "Schedule of no thread",
        sys::schedule(gone.id(), LOW, 0),
        &[KError::InvalidThread],
    )
}

/// ThreadSwitch(nil) hands the processor to the next thread of the same priority:
/// two yielding threads alternate strictly.
pub fn thread_switch_alternates() -> TestResult {
    YIELD_LEN.store(0, Relaxed);
    let a = Thread::local(yielder, 1, LOW)?;
    let b = Thread::local(yielder, 2, LOW)?;
    report_from(a.id())?;
    report_from(b.id())?;
    let n = (YIELD_LEN.load(Relaxed) as usize).min(YIELD_LOG.len());
    let log: [u32; 8] = core::array::from_fn(|i| YIELD_LOG[i].load(Relaxed));
    let alternates = n == 2 * YIELD_ROUNDS as usize && log[..n].windows(2).all(|w| w[0] != w[1]);
    if !alternates {
        note(format_args!("run order {:?}", &log[..n]));
    }
    ensure!(alternates, "the yielding threads did not alternate");
    Ok(())
}
