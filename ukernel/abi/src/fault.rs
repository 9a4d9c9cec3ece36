//! Fault and exception messages the kernel sends on a thread's behalf.
//!
//! The faulting thread blocks as if it had called its pager (page faults) or exception
//! handler (everything else); the reply resumes it. A thread with no pager or handler
//! that faults is stopped, and the kernel prints one line naming it and the cause.

/// Page-fault message: tag `MsgTag::new(label::PAGEFAULT | access, 2, 0)`.
/// The reply carries a map or grant item whose receive window is the faulter's whole
/// space, normally with the hot spot at the fault address.
pub mod pf {
    /// MR1: faulting address.
    pub const ADDR: usize = 1;
    /// MR2: faulting instruction pointer.
    pub const IP: usize = 2;
    pub const WORDS: u32 = 2;
}

/// Exception message: tag `MsgTag::new(label::EXCEPTION, exc::WORDS, 0)`.
/// A reply with at least [`exc::REPLY_WORDS`] untyped words sets IP and SP from
/// MR1/MR2 and resumes the thread; a reply labelled `label::KILL` stops it.
pub mod exc {
    pub const IP: usize = 1;
    pub const SP: usize = 2;
    /// MR3: [`super::ExceptionClass`].
    pub const CLASS: usize = 3;
    /// MR4: ESR at the time of the exception.
    pub const ESR: usize = 4;
    /// MR5: DEAR (data address) where meaningful.
    pub const DEAR: usize = 5;
    /// MR6: the instruction word at IP, or 0 if it could not be read.
    pub const INSN: usize = 6;
    pub const WORDS: u32 = 6;
    pub const REPLY_WORDS: u32 = 2;

    // A Linux system call (class `Syscall`, Linux personality spaces): MR1 = IP after the
    // `sc`, MR2 = SP, MR3 = the class, then these. The reply is different: see
    // `SYSCALL_REPLY_WORDS`.
    /// MR4: r0, the Linux system-call number.
    pub const SC_NR: usize = 4;
    /// MR5..MR10: r3..r8, the arguments.
    pub const SC_ARG0: usize = 5;
    pub const SYSCALL_WORDS: u32 = 10;
    /// A reply to a `Syscall` message with at least this many untyped words sets r3 = MR1
    /// and CR0[SO] = MR2 bit 0 (Linux's error flag: r3 is then a positive errno) and
    /// resumes after the `sc`; label `KILL` stops the thread instead.
    pub const SYSCALL_REPLY_WORDS: u32 = 2;
    /// MR2 of a syscall reply: the call failed (CR0[SO] set, r3 = errno).
    pub const SC_ERROR: u32 = 1;
}

/// Why a thread was sent an exception message (or stopped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExceptionClass {
    /// Illegal or privileged instruction, trap (ESR tells which).
    Program = 1,
    Alignment = 2,
    FpUnavailable = 3,
    ApUnavailable = 4,
    /// `sc` with a number the kernel does not know is reported as a syscall error, not
    /// here; this class is for a debug event.
    Debug = 5,
    /// Instruction fetch from a non-executable or kernel page.
    InstructionStorage = 6,
    /// Data access to a kernel page or other protection violation the pager cannot fix.
    DataStorage = 7,
    MachineCheck = 8,
    /// A Linux system call in a Linux personality space (`spacectl::LINUX`).
    Syscall = 9,
}

impl ExceptionClass {
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            1 => Self::Program,
            2 => Self::Alignment,
            3 => Self::FpUnavailable,
            4 => Self::ApUnavailable,
            5 => Self::Debug,
            6 => Self::InstructionStorage,
            7 => Self::DataStorage,
            8 => Self::MachineCheck,
            9 => Self::Syscall,
            _ => return None,
        })
    }
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Program => "program exception (illegal or privileged instruction)",
            Self::Alignment => "alignment exception",
            Self::FpUnavailable => "floating point unavailable",
            Self::ApUnavailable => "auxiliary processor unavailable",
            Self::Debug => "debug exception",
            Self::InstructionStorage => "instruction storage exception",
            Self::DataStorage => "data storage exception",
            Self::MachineCheck => "machine check",
            Self::Syscall => "Linux system call",
        }
    }
}
