//! Priorities (issue 9, finding 2; `docs/adr/0013-priorities.md`): only a thread's scheduler
//! (a thread of the scheduler's space, or the root space) sets its priority, never above
//! the ceiling of the thread's space nor, for a delegated scheduler, above its own; a thread
//! that spins at the highest priority it can have starves nobody above it.

use crate::children::send_tag;
use crate::common::{call_failed, expect_kerror, note, report_from, TestResult};
use crate::pager::PAGER;
use crate::puppet::{self, greedy_main, op};
use crate::threads::{entry, Thread, CHILD_PRIORITY};
use kestrel_abi::{
    tcflags, KError, ThreadId, DEFAULT_TIMESLICE_US, MAX_DELEGATED_TIMESLICE_US, MAX_PRIORITY,
};
use kestrel_user::{rt, sys};

/// The ceiling of the test spaces: below the root (and the pager at 200), like a native
/// program's beside the root task.
const CEILING: u32 = CHILD_PRIORITY - 10;

/// A new space's first thread, or the kernel's refusal as a test failure.
fn space(
    entry: u32,
    prio: u32,
    scheduler: ThreadId,
    ceiling: Option<u32>,
) -> Result<Thread, &'static str> {
    Thread::space_with(entry, 0, prio, scheduler, ceiling).map_err(|e| match e {
        Ok(k) => call_failed("ThreadControl (create with a ceiling)", k),
        Err(why) => why,
    })
}

/// The kernel's answer to creating a new space's thread (no thread is left behind).
fn create_result(prio: u32, scheduler: ThreadId, ceiling: Option<u32>) -> Result<(), KError> {
    match Thread::space_with(puppet::entry(), 0, prio, scheduler, ceiling) {
        Ok(_) => Ok(()),
        Err(Ok(e)) => Err(e),
        Err(Err(why)) => {
            note(format_args!(
                "creating the thread failed outside the kernel: {why}"
            ));
            Err(KError::InvalidParam)
        }
    }
}

fn expect_code(what: &'static str, code: u32, want: Option<KError>) -> TestResult {
    let want_code = want.map_or(0, |e| e as u32);
    if code != want_code {
        note(format_args!("{what}: status {code}, expected {want:?}"));
        return Err(what);
    }
    Ok(())
}

/// The finding: `Schedule(self, 255)` from a child space fails (its scheduler is the
/// root), and so does scheduling its sibling or the root.
pub fn child_cannot_raise_itself() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    let sibling = Thread::in_space_of(&p, puppet::entry(), 0)?;
    let no = Some(KError::NotScheduler);
    let code = puppet::schedule(p.id(), p.id(), MAX_PRIORITY, 0)?;
    expect_code("Schedule(self, 255) from a child space", code, no)?;
    let code = puppet::schedule(p.id(), p.id(), 1, 0)?;
    expect_code("Schedule(self, 1) from a child space", code, no)?;
    let code = puppet::schedule(p.id(), sibling.id(), MAX_PRIORITY, 0)?;
    expect_code("Schedule of a sibling in the same space", code, no)?;
    let code = puppet::schedule(p.id(), ThreadId::ROOT, 0, 0)?;
    expect_code("Schedule of the root from a child space", code, no)
}

/// The root, as scheduler, sets priorities up to the space's ceiling and not above; a
/// thread is never created, added or moved above its space's ceiling.
pub fn ceiling_bounds_the_scheduler() -> TestResult {
    expect_kerror(
        "create with a priority above the new space's ceiling",
        create_result(CEILING + 1, ThreadId::NIL, Some(CEILING)),
        &[KError::AboveCeiling],
    )?;
    expect_kerror(
        "create with a ceiling above the highest priority",
        create_result(1, ThreadId::NIL, Some(MAX_PRIORITY + 1)),
        &[KError::InvalidScheduler],
    )?;
    let t = space(puppet::entry(), CEILING - 10, ThreadId::NIL, Some(CEILING))?;
    sys::schedule(t.id(), CEILING, 0).map_err(|e| call_failed("Schedule up to the ceiling", e))?;
    expect_kerror(
        "Schedule one above the ceiling",
        sys::schedule(t.id(), CEILING + 1, 0),
        &[KError::AboveCeiling],
    )?;
    expect_kerror(
        "Schedule to 255 in a space with a lower ceiling",
        sys::schedule(t.id(), MAX_PRIORITY, 0),
        &[KError::AboveCeiling],
    )?;
    // A further thread of the space above the ceiling; ThreadControl moving one above it.
    let more = Thread::reserve()?;
    let n = more.id().number();
    expect_kerror(
        "a further thread above the space's ceiling",
        sys::thread_control(more.id(), t.id(), CEILING + 1, PAGER, rt::utcb_addr_for(n)),
        &[KError::AboveCeiling],
    )?;
    expect_kerror(
        "ThreadControl raising a thread above its space's ceiling",
        sys::thread_control(t.id(), t.id(), CEILING + 1, PAGER, 0),
        &[KError::AboveCeiling],
    )?;
    // The thread still answers: nothing above was half done.
    puppet::command(t.id(), op::ECHO, &[1]).map(|_| ())
}

/// Delegation: a thread in a child space named as another space's scheduler sets that
/// space's priorities, within that space's ceiling and its own, with timeslices no longer
/// than `MAX_DELEGATED_TIMESLICE_US`; nobody else outside the root space can.
pub fn delegation() -> TestResult {
    let own = CEILING - 10;
    let a = space(puppet::entry(), own - 10, ThreadId::NIL, Some(own))?;
    // A space scheduled by `a` inherits `a`'s ceiling, and cannot get a higher one.
    let b = space(puppet::entry(), 40, a.id(), None)?;
    expect_kerror(
        "a delegated space with a ceiling above its scheduler's",
        create_result(40, a.id(), Some(own + 1)),
        &[KError::AboveCeiling],
    )?;
    expect_kerror(
        "a thread whose scheduler does not exist",
        create_result(40, Thread::reserve()?.id(), None),
        &[KError::InvalidThread],
    )?;
    let code = puppet::schedule(a.id(), b.id(), own, 0)?;
    expect_code("the delegated scheduler up to the ceiling", code, None)?;
    let code = puppet::schedule(a.id(), b.id(), own + 1, 0)?;
    expect_code(
        "the delegated scheduler above the ceiling",
        code,
        Some(KError::AboveCeiling),
    )?;
    let code = puppet::schedule(a.id(), b.id(), 30, MAX_DELEGATED_TIMESLICE_US + 1)?;
    expect_code(
        "the delegated scheduler with a long timeslice",
        code,
        Some(KError::InvalidScheduler),
    )?;
    let code = puppet::schedule(a.id(), b.id(), 30, DEFAULT_TIMESLICE_US)?;
    expect_code(
        "the delegated scheduler with the default timeslice",
        code,
        None,
    )?;
    // Neither the scheduled thread itself nor a stranger may.
    let stranger = Thread::space(puppet::entry(), 0)?;
    let code = puppet::schedule(stranger.id(), b.id(), 30, 0)?;
    expect_code(
        "a stranger schedules a delegated thread",
        code,
        Some(KError::NotScheduler),
    )?;
    let code = puppet::schedule(b.id(), b.id(), 30, 0)?;
    expect_code(
        "a delegated thread schedules itself",
        code,
        Some(KError::NotScheduler),
    )?;
    // The root raises b's ceiling above a's: a is still bound by its own ceiling.
    let raised = CHILD_PRIORITY + 20;
    sys::thread_control_all(
        b.id(),
        b.id(),
        40,
        PAGER,
        0,
        tcflags::CEILING,
        ThreadId::NIL,
        raised,
    )
    .map_err(|e| call_failed("ThreadControl raising a space's ceiling", e))?;
    let code = puppet::schedule(a.id(), b.id(), own + 1, 0)?;
    expect_code(
        "the delegated scheduler above its own ceiling",
        code,
        Some(KError::AboveCeiling),
    )?;
    sys::schedule(b.id(), raised, 0)
        .map_err(|e| call_failed("the root up to a raised ceiling", e))?;
    // Lowered again (b is lowered with it), and still scheduled by a.
    sys::thread_control_all(
        b.id(),
        b.id(),
        20,
        PAGER,
        0,
        tcflags::CEILING,
        ThreadId::NIL,
        20,
    )
    .map_err(|e| call_failed("ThreadControl lowering a space's ceiling", e))?;
    let code = puppet::schedule(a.id(), b.id(), 21, 0)?;
    expect_code(
        "the delegated scheduler above a lowered ceiling",
        code,
        Some(KError::AboveCeiling),
    )?;
    let code = puppet::schedule(a.id(), b.id(), 20, 0)?;
    expect_code("the delegated scheduler at a lowered ceiling", code, None)
}

/// A thread that spins at the highest priority it may have (its space's ceiling) after
/// trying 255 starves nobody: the root and the pager (above it) go on, a thread of another
/// space above it answers, and a sibling at its own priority still gets the processor.
pub fn spinner_starves_nobody() -> TestResult {
    let g = space(entry(greedy_main), CEILING, ThreadId::NIL, Some(CEILING))?;
    let code = report_from(g.id())?.mr(1);
    expect_code(
        "the spinner's Schedule(self, 255)",
        code,
        Some(KError::NotScheduler),
    )?;
    // It spins now. A new space above it: the pager (200) serves its code and stack.
    let p = Thread::space(puppet::entry(), 0)?;
    let echoed = puppet::command(p.id(), op::ECHO, &[41])?.mr(1);
    ensure!(
        echoed == 42,
        "the higher-priority puppet answered wrongly",
        "MR1 {echoed}"
    );
    // A sibling at the spinner's priority gets the processor when the spinner's slice ends
    // (round robin): it reports within the bounded wait. (No time window: under a loaded
    // host QEMU's time base can pass a whole window before the sibling's first turn.)
    let s = Thread::local(send_tag, 7, CEILING)?;
    let tag = report_from(s.id())?.mr(1);
    ensure!(
        tag == 7,
        "the sibling at the spinner's priority reported wrongly",
        "tag {tag}"
    );
    Ok(())
}
