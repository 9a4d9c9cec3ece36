//! Counts per system call and per result, shared by the fuzzing thread (which counts) and
//! the first thread (which prints them). One processor: relaxed atomics are enough.
//!
//! Rows are the system calls of `kestrel_abi::Syscall` by number, then [`OUT_OF_RANGE`]
//! (numbers the kernel does not have) and [`ROOT_REQ`] (requests to the root task). Columns
//! are results: [`OK`], the `KError` codes by number, then the IPC errors, then the root
//! task's refusals, and a column for each kind of answer that fits no code.

use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::{root::RootError, IpcError, KError, Syscall};
use kestrel_user::console::Console;

/// Syscall numbers 0..=11 (`Syscall::TraceControl` is the last).
pub const NSYSCALLS: usize = Syscall::TraceControl as usize + 1;
pub const OUT_OF_RANGE: usize = NSYSCALLS;
pub const ROOT_REQ: usize = NSYSCALLS + 1;
pub const ROWS: usize = NSYSCALLS + 2;

pub const OK: usize = 0;
/// `KError` n is column n (1..=[`KERR_LAST`]).
pub const KERR_LAST: usize = kerr_last();
/// A status that is no `KError`.
pub const BAD_STATUS: usize = KERR_LAST + 1;
/// `IpcError` n is column `IPC_BASE + n`.
pub const IPC_BASE: usize = BAD_STATUS;
pub const IPC_LAST: usize = IPC_BASE + ipc_last();
/// An IPC error word that decodes to no `IpcError`.
pub const BAD_IPC: usize = IPC_LAST + 1;
/// `RootError` n is column `ROOT_BASE + n`.
pub const ROOT_BASE: usize = BAD_IPC;
pub const ROOT_LAST: usize = ROOT_BASE + root_last();
/// A reply from the root that is neither OK nor a refusal.
pub const BAD_ROOT: usize = ROOT_LAST + 1;
pub const COLS: usize = BAD_ROOT + 1;

// The last codes of the ABI's (dense) error enums, so a new code gets a column of its own.
const fn kerr_last() -> usize {
    let mut n = 1;
    while KError::from_raw(n + 1).is_some() {
        n += 1;
    }
    n as usize
}
const fn ipc_last() -> usize {
    let mut n = 1;
    while IpcError::decode((n + 1) << 1).is_some() {
        n += 1;
    }
    n as usize
}
const fn root_last() -> usize {
    let mut n = 1;
    while RootError::from_raw(n + 1).is_some() {
        n += 1;
    }
    n as usize
}

static TABLE: [[AtomicU32; COLS]; ROWS] = [const { [const { AtomicU32::new(0) }; COLS] }; ROWS];
/// Calls made so far (the watchdog's progress measure).
pub static CALLS: AtomicU32 = AtomicU32::new(0);
/// Oracle violations (wrong results) so far.
pub static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
/// Times the watchdog had to wake the fuzzing thread.
pub static RESCUES: AtomicU32 = AtomicU32::new(0);

pub fn count(row: usize, col: usize) {
    TABLE[row][col].fetch_add(1, Relaxed);
    CALLS.fetch_add(1, Relaxed);
}

/// The column of a non-IPC status word (r3).
pub fn status_col(r3: u32) -> usize {
    match KError::from_raw(r3) {
        _ if r3 == 0 => OK,
        Some(e) => e as usize,
        None => BAD_STATUS,
    }
}

/// The column of an IPC error word (r4) when the tag says the IPC failed.
pub fn ipc_col(r4: u32) -> usize {
    match IpcError::decode(r4) {
        Some((e, _)) => IPC_BASE + e as usize,
        None => BAD_IPC,
    }
}

pub fn row_name(row: usize) -> &'static str {
    const NAMES: [&str; ROWS] = [
        "Ipc",
        "ThreadControl",
        "ExchangeRegisters",
        "ThreadSwitch",
        "Schedule",
        "Unmap",
        "SpaceControl",
        "InterruptControl",
        "KernelInfo",
        "KDebug",
        "VcpuControl",
        "TraceControl",
        "OutOfRange",
        "RootRequest",
    ];
    NAMES[row]
}

/// Writes the name of result column `col` (the ABI enums' own names).
fn write_col(c: &mut Console, col: usize) {
    let _ = match col {
        OK => write!(c, "ok"),
        1..=KERR_LAST => match KError::from_raw(col as u32) {
            Some(e) => write!(c, "{e:?}"),
            None => write!(c, "kerror{col}"),
        },
        c2 if c2 > IPC_BASE && c2 <= IPC_LAST => {
            match IpcError::decode(((col - IPC_BASE) as u32) << 1) {
                Some((e, _)) => write!(c, "{e:?}"),
                None => write!(c, "ipc{col}"),
            }
        }
        c2 if c2 > ROOT_BASE && c2 <= ROOT_LAST => {
            match RootError::from_raw((col - ROOT_BASE) as u32) {
                Some(e) => write!(c, "{e:?}"),
                None => write!(c, "root{col}"),
            }
        }
        BAD_STATUS => write!(c, "bad-status"),
        BAD_IPC => write!(c, "bad-ipc-error"),
        _ => write!(c, "bad-root-reply"),
    };
}

fn row_total(row: usize) -> u32 {
    TABLE[row].iter().map(|c| c.load(Relaxed)).sum()
}

/// One line: the calls per system call (`sysfuzz: counts Ipc=.. ...`).
pub fn print_counts() {
    let mut c = Console::new();
    let _ = write!(c, "sysfuzz: counts");
    for row in 0..ROWS {
        let _ = write!(c, " {}={}", row_name(row), row_total(row));
    }
    let _ = writeln!(c);
}

/// One line: the calls per result over all system calls (`sysfuzz: results ok=.. ...`).
pub fn print_results() {
    let mut c = Console::new();
    let _ = write!(c, "sysfuzz: results");
    for col in 0..COLS {
        let n: u32 = TABLE.iter().map(|row| row[col].load(Relaxed)).sum();
        if n != 0 {
            let _ = write!(c, " ");
            write_col(&mut c, col);
            let _ = write!(c, "={n}");
        }
    }
    let _ = writeln!(c);
}

/// The whole table, one line per system call with its non-zero results.
pub fn print_table() {
    for (r, row) in TABLE.iter().enumerate() {
        let mut c = Console::new();
        let _ = write!(c, "sysfuzz: table {} {}:", row_name(r), row_total(r));
        for (col, cell) in row.iter().enumerate() {
            let n = cell.load(Relaxed);
            if n != 0 {
                let _ = write!(c, " ");
                write_col(&mut c, col);
                let _ = write!(c, "={n}");
            }
        }
        let _ = writeln!(c);
    }
}
