//! The vocabulary every test shares: the result type, bounded waits, message labels,
//! IPC helpers with timeouts, and failure notes.
//!
//! A test returns `Err(reason)` with a short static reason; anything more specific
//! (the error code the kernel returned, the value that was wrong) is printed just
//! before as an indented `ktest:   ` note, so a FAIL line always has its cause above it.

use core::fmt;
use kestrel_abi::{kinfo, IpcError, IpcPhase, KError, MsgTag, ThreadId, Timeout, Timeouts};
use kestrel_user::ipc::{self, IpcErr, Msg};
use kestrel_user::{println, sys};

/// What a test returns: `Err` carries the reason printed after `FAIL name:`.
pub type TestResult = Result<(), &'static str>;

/// How long a test waits for something that should happen (a reply, a report).
pub const WAIT: Timeout = Timeout::from_us(1_000_000);
/// How long a test waits to be sure something does *not* happen (a reply from a
/// thread that should be blocked on a refused page fault).
pub const QUIET: Timeout = Timeout::from_us(30_000);

/// Labels of the messages between the root and its helper threads.
pub mod lbl {
    /// Success reply to a request or command.
    pub const OK: u16 = 0x0001;
    /// A helper thread reporting results to the root (words depend on the helper).
    pub const REPORT: u16 = 0x0200;
    /// The root telling a waiting helper to go on.
    pub const GO: u16 = 0x0201;
    /// A thread resumed by its exception handler reached the landing function.
    pub const LANDED: u16 = 0x0202;
}

/// Fails the current test with `reason`, printing a detail note first if given.
macro_rules! ensure {
    ($cond:expr, $why:expr) => {
        if !$cond {
            return Err($why);
        }
    };
    ($cond:expr, $why:expr, $($detail:tt)+) => {
        if !$cond {
            $crate::common::note(format_args!($($detail)+));
            return Err($why);
        }
    };
}

/// Prints an indented detail line belonging to the test that is running.
pub fn note(args: fmt::Arguments) {
    println!("ktest:   {}", args);
}

/// Notes a failed IPC and returns `what` as the failure reason.
pub fn ipc_failed(what: &'static str, e: IpcErr) -> &'static str {
    note(format_args!(
        "{what}: {:?} in the {:?} phase",
        e.error, e.phase
    ));
    what
}

/// Notes a failed system call and returns `what` as the failure reason.
pub fn call_failed(what: &'static str, e: KError) -> &'static str {
    note(format_args!("{what}: {:?} ({})", e, e.as_str()));
    what
}

/// Checks that an IPC failed with `error` in `phase`.
pub fn expect_ipc_error<T>(
    what: &'static str,
    r: Result<T, IpcErr>,
    error: IpcError,
    phase: IpcPhase,
) -> TestResult {
    match r {
        Err(e) if e.error == error && e.phase == phase => Ok(()),
        Err(e) => {
            note(format_args!(
                "{what}: expected {error:?}/{phase:?}, got {:?}/{:?}",
                e.error, e.phase
            ));
            Err(what)
        }
        Ok(_) => {
            note(format_args!(
                "{what}: expected {error:?}/{phase:?}, but the IPC succeeded"
            ));
            Err(what)
        }
    }
}

/// Checks that a system call failed with one of `allowed`.
pub fn expect_kerror<T>(
    what: &'static str,
    r: Result<T, KError>,
    allowed: &[KError],
) -> TestResult {
    match r {
        Err(e) if allowed.contains(&e) => Ok(()),
        Err(e) => {
            note(format_args!("{what}: expected {allowed:?}, got {e:?}"));
            Err(what)
        }
        Ok(_) => {
            note(format_args!(
                "{what}: expected {allowed:?}, but the call succeeded"
            ));
            Err(what)
        }
    }
}

/// Send `msg` to `to` and wait for its reply, each phase bounded by `t`.
pub fn call_for(to: ThreadId, msg: &Msg, t: Timeout) -> Result<Msg, IpcErr> {
    let (_, reply, r) = ipc::ipc(to, to, Timeouts::new(t, t), msg);
    r.map(|()| reply)
}

/// Receives the next message from `from`, waiting at most [`WAIT`].
pub fn recv_from(from: ThreadId) -> Result<Msg, &'static str> {
    ipc::receive(from, WAIT)
        .map(|(_, m)| m)
        .map_err(|e| ipc_failed("no message from the thread under test", e))
}

/// Like [`recv_from`], but insists on a [`lbl::REPORT`] message.
pub fn report_from(from: ThreadId) -> Result<Msg, &'static str> {
    let m = recv_from(from)?;
    ensure!(
        m.label() == lbl::REPORT,
        "unexpected message instead of a report",
        "label {:#06x}, MR1 {:#x}, MR3 {:#x}",
        m.label(),
        m.mr(1),
        m.mr(3)
    );
    Ok(m)
}

/// A helper thread's report to the root. The helper has nobody to tell if this
/// fails: the root's bounded receive turns that into the test's failure.
pub fn report(words: &[u32]) {
    let _ = ipc::send(ThreadId::ROOT, &Msg::with_words(lbl::REPORT, words), WAIT);
}

/// An IPC outcome as one word for reports: 0 = success, else the [`IpcError`] code.
pub fn ipc_code<T>(r: &Result<T, IpcErr>) -> u32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.error as u32,
    }
}

/// A system-call outcome as one word for reports: 0 = success, else the [`KError`].
pub fn kerr_code<T>(r: &Result<T, KError>) -> u32 {
    match r {
        Ok(_) => 0,
        Err(e) => *e as u32,
    }
}

/// A message with an arbitrary (possibly malformed) tag and no words.
pub fn raw_msg(tag: MsgTag) -> Msg {
    Msg { tag, regs: [0; 6] }
}

/// Names the calling thread (the name shows in kernel messages; failure is harmless).
pub fn set_name(name: &str) {
    let _ = sys::set_name(name);
}

/// Timebase ticks per second (`KernelInfo(CLOCK)`).
pub fn timebase_hz() -> Result<u64, &'static str> {
    let [hz, ..] =
        sys::kernel_info(kinfo::CLOCK).map_err(|e| call_failed("KernelInfo(CLOCK)", e))?;
    ensure!(
        hz != 0,
        "KernelInfo(CLOCK) reports a zero timebase frequency"
    );
    Ok(hz as u64)
}

/// Microseconds between two timebase readings.
pub fn elapsed_us(t0: u64, t1: u64, hz: u64) -> u64 {
    t1.saturating_sub(t0) * 1_000_000 / hz
}
