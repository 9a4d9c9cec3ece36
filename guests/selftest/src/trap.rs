//! The one trap handler behind all 16 vectors, and how tests tell it what to expect.
//!
//! Every interrupt is first acknowledged at its source (timer status bits, UART1 and UIC,
//! debug status), so a stray asynchronous interrupt cannot repeat forever, then recorded
//! ([`Trap`]: vector, SRR0/1 of its class, ESR, DEAR, r3..r6, a source-specific word and the
//! MSR the interrupt gave the handler),
//! then resumed according to the [`Action`] the running test armed for that vector:
//! - [`Action::Skip`]: return past the interrupted instruction (synchronous faults in
//!   supervisor probes);
//! - [`Action::Return`]: return to the interrupted instruction (asynchronous interrupts,
//!   and `sc`, whose SRR0 already points past it);
//! - [`Action::Exit`]: end a [`boot::enter`](crate::boot::enter) excursion (problem-state
//!   code, or a jump to an address that faults);
//! - nothing armed: the interrupt is unexpected. It is remembered for the FAIL line and
//!   the test is abandoned (resumed at the harness's catch point in supervisor state).
//!
//! Records live in atomics, so tests read what handlers wrote without `unsafe`; the core is
//! single-threaded, and the handler is the only writer while a test waits.

use crate::cpu::{self, msr, spr, tsr, uic, vector};
use crate::uart;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Registers saved by the vector entry code (layout shared with `boot.rs`).
#[repr(C)]
pub struct Frame {
    pub gpr: [u32; 32],
    pub cr: u32,
    pub lr: u32,
    pub ctr: u32,
    pub xer: u32,
    /// SRR0, CSRR0 or MCSRR0, by interrupt class.
    pub srr0: u32,
    /// SRR1, CSRR1 or MCSRR1, by interrupt class.
    pub srr1: u32,
    pub esr: u32,
    pub dear: u32,
    /// The MSR the handler started with (what the interrupt itself set).
    pub msr: u32,
}
const _: () = assert!(core::mem::size_of::<Frame>() == 164);

/// What the handler does after recording an interrupt.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Action {
    Unexpected = 0,
    Skip = 1,
    Return = 2,
    Exit = 3,
}

/// One recorded interrupt.
#[derive(Clone, Copy, Default)]
pub struct Trap {
    pub vector: u32,
    pub srr0: u32,
    pub srr1: u32,
    pub esr: u32,
    pub dear: u32,
    /// r3..r6 of the interrupted code.
    pub gpr: [u32; 4],
    /// UIC masked status for external/critical input, DBSR for debug, else 0.
    pub extra: u32,
    /// The MSR the interrupt established for its handler.
    pub handler_msr: u32,
}

const MAX_RECORDS: usize = 8;
const WORDS: usize = 11;
static RECORDS: [[AtomicU32; WORDS]; MAX_RECORDS] =
    [const { [const { AtomicU32::new(0) }; WORDS] }; MAX_RECORDS];
static COUNT: AtomicU32 = AtomicU32::new(0);
static ACTIONS: [AtomicU32; 16] = [const { AtomicU32::new(0) }; 16];
/// The first unexpected interrupt of the running test: (valid, vector, srr0, esr, dear).
static UNEXPECTED: [AtomicU32; 5] = [const { AtomicU32::new(0) }; 5];
/// Unexpected interrupts over the whole run; too many means the machine is wedged.
static UNEXPECTED_TOTAL: AtomicU32 = AtomicU32::new(0);
/// Whether a test is running inside `boot::catch` (so an abort has somewhere to go).
static IN_TEST: AtomicU32 = AtomicU32::new(0);

/// Forgets all records and armed actions (before each test).
pub fn reset() {
    COUNT.store(0, Relaxed);
    for a in &ACTIONS {
        a.store(Action::Unexpected as u32, Relaxed);
    }
    for w in &UNEXPECTED {
        w.store(0, Relaxed);
    }
}

pub fn set_in_test(on: bool) {
    IN_TEST.store(on as u32, Relaxed);
}

/// Forgets the records (not the armed actions).
pub fn forget() {
    COUNT.store(0, Relaxed);
}

/// Arms `action` for `vector` for the rest of the running test.
pub fn expect(vector: u32, action: Action) {
    ACTIONS[vector as usize].store(action as u32, Relaxed);
}

/// Disarms `vector` again: from now on it is unexpected.
pub fn disarm(vector: u32) {
    expect(vector, Action::Unexpected);
}

/// Interrupts taken since the test started (records beyond the eighth are counted only).
pub fn count() -> u32 {
    COUNT.load(Relaxed)
}

/// Record `i` (0-based), or an all-zero record if there is none.
pub fn get(i: u32) -> Trap {
    if i >= count() || i as usize >= MAX_RECORDS {
        return Trap::default();
    }
    let r = &RECORDS[i as usize];
    let w = |k: usize| r[k].load(Relaxed);
    Trap {
        vector: w(0),
        srr0: w(1),
        srr1: w(2),
        esr: w(3),
        dear: w(4),
        gpr: [w(5), w(6), w(7), w(8)],
        extra: w(9),
        handler_msr: w(10),
    }
}

/// The only record, which must be of `vector`.
pub fn only(vector: u32) -> Result<Trap, &'static str> {
    crate::check::eq("number of interrupts taken", count(), 1)?;
    let t = get(0);
    crate::check::eq("interrupt vector", t.vector, vector)?;
    Ok(t)
}

/// The first unexpected interrupt of the running test: (vector, srr0, esr, dear).
pub fn unexpected() -> Option<(u32, u32, u32, u32)> {
    let w = |k: usize| UNEXPECTED[k].load(Relaxed);
    (w(0) != 0).then(|| (w(1), w(2), w(3), w(4)))
}

/// Silences the source of an interrupt; returns the source-specific record word.
fn acknowledge(vec: u32) -> u32 {
    match vec {
        vector::DECREMENTER => {
            cpu::mtspr::<{ spr::TSR }>(tsr::DIS);
            0
        }
        vector::FIT => {
            cpu::mtspr::<{ spr::TSR }>(tsr::FIS);
            0
        }
        vector::WATCHDOG => {
            cpu::mtspr::<{ spr::TSR }>(tsr::WIS | tsr::ENW);
            0
        }
        vector::EXTERNAL | vector::CRITICAL => {
            let pending = cpu::mfdcr::<{ uic::MSR }>();
            uart::set_uart1_ier(0);
            cpu::mtdcr::<{ uic::SR }>(pending);
            pending
        }
        vector::DEBUG => {
            let status = cpu::mfspr::<{ spr::DBSR }>();
            cpu::mtspr::<{ spr::DBCR0 }>(0);
            // All ones: DBSR is write-1-to-clear. (QEMU 7.2 clears with `DBSR & -value`
            // instead of `& !value`, which also works out for all ones.)
            cpu::mtspr::<{ spr::DBSR }>(0xFFFF_FFFF);
            status
        }
        _ => 0,
    }
}

fn record(vec: u32, frame: &Frame, extra: u32) {
    let n = COUNT.load(Relaxed);
    if (n as usize) < MAX_RECORDS {
        let r = &RECORDS[n as usize];
        let words = [
            vec,
            frame.srr0,
            frame.srr1,
            frame.esr,
            frame.dear,
            frame.gpr[3],
            frame.gpr[4],
            frame.gpr[5],
            frame.gpr[6],
            extra,
            frame.msr,
        ];
        for (slot, w) in r.iter().zip(words) {
            slot.store(w, Relaxed);
        }
    }
    COUNT.store(n + 1, Relaxed);
}

extern "C" {
    static st_catch_abort: u8;
    static st_enter_exit: u8;
}

/// Entered from every vector (boot.rs) with the class's frame and the IVOR number.
#[no_mangle]
extern "C" fn selftest_trap(frame: *mut Frame, vec: u32) {
    // SAFETY: the entry code passes its class's static frame; nothing else touches that
    // frame until this handler returns (handlers of one class do not nest).
    let frame = unsafe { &mut *frame };
    let extra = acknowledge(vec);
    record(vec, frame, extra);
    if vec == vector::DEBUG {
        // Return with debug interrupts off, or the next instruction would trap again.
        frame.srr1 &= !msr::DE;
    }
    let action = ACTIONS.get(vec as usize).map_or(0, |a| a.load(Relaxed));
    match action {
        a if a == Action::Skip as u32 => frame.srr0 = frame.srr0.wrapping_add(4),
        a if a == Action::Return as u32 => {}
        a if a == Action::Exit as u32 => {
            frame.srr0 = (&raw const st_enter_exit) as u32;
            frame.srr1 = msr::KERNEL;
        }
        _ => {
            if UNEXPECTED[0].load(Relaxed) == 0 {
                let words = [1, vec, frame.srr0, frame.esr, frame.dear];
                for (slot, w) in UNEXPECTED.iter().zip(words) {
                    slot.store(w, Relaxed);
                }
            }
            let total = UNEXPECTED_TOTAL.load(Relaxed) + 1;
            UNEXPECTED_TOTAL.store(total, Relaxed);
            if IN_TEST.load(Relaxed) == 0 || total > 64 {
                let why = if total > 64 {
                    "too many unexpected interrupts"
                } else {
                    "outside a test"
                };
                crate::println!(
                    "selftest: FATAL unexpected {} interrupt (IVOR{}) at {:#010x}: {}",
                    vector::name(vec),
                    vec,
                    frame.srr0,
                    why
                );
                cpu::system_reset();
            }
            frame.srr0 = (&raw const st_catch_abort) as u32;
            frame.srr1 = msr::KERNEL;
        }
    }
}
