//! Thread identifiers and the thread-management call arguments.

/// A global thread id: thread number in bits 31..14, version in bits 13..0 (L4 X.2).
///
/// Numbers below [`FIRST_THREAD_NO`] name interrupt lines ("interrupt threads"): an
/// interrupt IPC arrives *from* `ThreadId::irq(n)` and is acknowledged by sending to it.
/// How many lines exist is a fact of the board, not of the ABI (the kernel rejects lines
/// its interrupt controller lacks with `KError::InvalidIrq`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct ThreadId(pub u32);

/// First thread number available for real threads; the numbers below it are
/// interrupt-thread ids.
pub const FIRST_THREAD_NO: u32 = 64;
/// One past the largest thread number the kernel has TCB slots for.
pub const MAX_THREAD_NO: u32 = FIRST_THREAD_NO + 128;
/// The root task's first thread (sigma0-like owner of physical memory).
pub const ROOT_THREAD_NO: u32 = FIRST_THREAD_NO;

const VERSION_BITS: u32 = 14;
const VERSION_MASK: u32 = (1 << VERSION_BITS) - 1;

impl ThreadId {
    pub const NIL: ThreadId = ThreadId(0);
    /// As a receive specifier: accept from any thread (including interrupts).
    pub const ANY: ThreadId = ThreadId(u32::MAX);
    /// The root task's initial thread.
    pub const ROOT: ThreadId = ThreadId::new(ROOT_THREAD_NO, 1);

    /// Builds an id; `version` must be non-zero (it is masked to 14 bits, 0 becomes 1).
    pub const fn new(number: u32, version: u32) -> Self {
        let v = version & VERSION_MASK;
        let v = if v == 0 { 1 } else { v };
        ThreadId((number << VERSION_BITS) | v)
    }
    /// The interrupt-thread id for line `irq`.
    pub const fn irq(irq: u32) -> Self {
        Self::new(irq, 1)
    }
    pub const fn number(self) -> u32 {
        self.0 >> VERSION_BITS
    }
    pub const fn version(self) -> u32 {
        self.0 & VERSION_MASK
    }
    pub const fn is_nil(self) -> bool {
        self.0 == 0
    }
    pub const fn is_any(self) -> bool {
        self.0 == u32::MAX
    }
    /// True if this names an interrupt line rather than a thread.
    pub const fn is_irq(self) -> bool {
        !self.is_nil() && !self.is_any() && self.number() < FIRST_THREAD_NO
    }
    /// The interrupt line, if this is an interrupt-thread id.
    pub const fn irq_line(self) -> Option<u32> {
        if self.is_irq() {
            Some(self.number())
        } else {
            None
        }
    }
    /// True if the number is in the range of real threads.
    pub const fn is_thread(self) -> bool {
        !self.is_nil()
            && !self.is_any()
            && self.number() >= FIRST_THREAD_NO
            && self.number() < MAX_THREAD_NO
    }
}

impl core::fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.is_nil() {
            write!(f, "nil")
        } else if self.is_any() {
            write!(f, "any")
        } else if self.is_irq() {
            write!(f, "irq{}", self.number())
        } else {
            write!(f, "{}.{}", self.number(), self.version())
        }
    }
}

/// `ExchangeRegisters` control word (r4). Bits may be combined; all reads always happen
/// and return the values from before the call.
pub mod exreg {
    /// Set the user stack pointer from r5.
    pub const SET_SP: u32 = 1 << 0;
    /// Set the user instruction pointer from r6.
    pub const SET_IP: u32 = 1 << 1;
    /// Set the pager from r7.
    pub const SET_PAGER: u32 = 1 << 2;
    /// Set the exception handler from r8.
    pub const SET_EXC_HANDLER: u32 = 1 << 3;
    /// Make an inactive or halted thread runnable.
    pub const START: u32 = 1 << 4;
    /// Halt the thread (it stops before its next user instruction).
    pub const HALT: u32 = 1 << 5;
    /// Abort an ongoing IPC of the thread; it sees `IpcError::Aborted`.
    pub const ABORT_IPC: u32 = 1 << 6;
    /// Copy the thread's full register frame ([`crate::FrameRegs`]) to the caller's UTCB.
    pub const GET_FRAME: u32 = 1 << 7;
    /// Install the full register frame from the caller's UTCB (thread must not be running).
    pub const SET_FRAME: u32 = 1 << 8;
    /// Every defined bit.
    pub const ALL: u32 = (1 << 9) - 1;

    /// State bits returned in r4.
    pub const STATE_HALTED: u32 = 1 << 0;
    pub const STATE_INACTIVE: u32 = 1 << 1;
    pub const STATE_SENDING: u32 = 1 << 2;
    pub const STATE_RECEIVING: u32 = 1 << 3;
    pub const STATE_DEAD: u32 = 1 << 4;
}

/// Priorities: 0 (lowest) ..= [`MAX_PRIORITY`]. The root task starts at [`ROOT_PRIORITY`].
pub const MAX_PRIORITY: u32 = 255;
pub const ROOT_PRIORITY: u32 = 100;
/// Default timeslice given to new threads, in microseconds.
pub const DEFAULT_TIMESLICE_US: u32 = 10_000;
/// Longest timeslice `Schedule` accepts from the root space, in microseconds.
pub const MAX_TIMESLICE_US: u32 = 10_000_000;
/// Longest timeslice `Schedule` accepts from a scheduler outside the root space (a
/// delegated scheduler such as a VMM): no longer than the default, so a thread at the same
/// priority as another program's never holds the processor longer than one default slice.
pub const MAX_DELEGATED_TIMESLICE_US: u32 = DEFAULT_TIMESLICE_US;

/// `InterruptControl` flags (r5).
pub mod irqflags {
    /// Line is edge-triggered (default: level).
    pub const EDGE: u32 = 1 << 0;
    /// Line is active-low / falling-edge (default: active-high / rising-edge).
    pub const ACTIVE_LOW: u32 = 1 << 1;
}

/// `SpaceControl` control word (r4).
pub mod spacectl {
    /// Set the space's UTCB area to the fpage in r5 before any thread of it runs.
    pub const SET_UTCB_AREA: u32 = 1 << 0;
    /// Return the space's hardware PID in r4 (diagnostic).
    pub const GET_PID: u32 = 1 << 1;
    /// Make the space a Linux personality space: `sc` with r0 = 1..`SYSCALL_BASE` becomes an
    /// exception message of class `Syscall` to the thread's exception handler
    /// (`fault::exc::SYSCALL_WORDS`). Not undone.
    pub const LINUX: u32 = 1 << 2;
}

/// `Unmap` flags (r4).
pub mod unmapflags {
    /// Also remove the caller's own mapping ("flush"), not only derived ones.
    pub const FLUSH_OWN: u32 = 1 << 0;
}
