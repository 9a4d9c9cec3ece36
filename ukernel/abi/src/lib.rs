//! Kestrel's kernel ABI: the single definition of everything that crosses the
//! user/kernel boundary.
//!
//! The kernel, the user runtime (`kestrel-user`), native tasks and the VMM (`kestrel-vmm`) all
//! import these definitions; nothing here is defined a second time anywhere else.
//! The layout decisions are explained in `docs/adr/0001-abi.md`.
//!
//! Register convention for `sc` (PowerPC SysV registers, all 32-bit):
//!
//! | register | on entry              | on return                      |
//! |----------|-----------------------|--------------------------------|
//! | r0       | [`Syscall`] number    | clobbered                      |
//! | r3..r5   | arguments             | results (r3 = status or from)  |
//! | r6..r12  | arguments / MR0..MR6  | results / MR0..MR6             |
//!
//! Message registers MR0..MR6 travel in r6..r12; MR7..MR63 live in the thread's UTCB
//! ([`Utcb::mr`], same index). MR0 is always the [`MsgTag`].
#![no_std]
#![forbid(unsafe_code)]

pub mod bootmod;
pub mod fault;
pub mod fpage;
pub mod grants;
pub mod idl;
pub mod ipc;
pub mod layout;
pub mod pv;
pub mod root;
pub mod thread;
pub mod vcpu;

pub use fault::*;
pub use fpage::*;
pub use ipc::*;
pub use layout::*;
pub use thread::*;
pub use vcpu::*;

/// Added to a [`Syscall`] number in r0, it names the same call in every space: in a Linux
/// personality space (`spacectl::LINUX`) it is the only way to name a Kestrel call other
/// than `Ipc` (r0 = 0), because r0 = 1..`SYSCALL_BASE` are Linux's system calls there,
/// reflected to the thread's exception handler (docs/adr/0034-linux-personality.md).
/// Linux ppc32 numbers stay far below it.
pub const SYSCALL_BASE: u32 = 0x4b00;

/// System call numbers, passed in r0 (or [`SYSCALL_BASE`] + number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Syscall {
    /// `Ipc(to, from_spec, timeouts, tag, MR1..)`: send and/or receive (L4 X.2 Ipc).
    Ipc = 0,
    /// `ThreadControl(dest, space_spec, priority, pager, utcb, flags, scheduler, ceiling)`:
    /// create/modify/delete (root only). `scheduler` (r9) nil = the caller; `ceiling` (r10)
    /// counts only with [`tcflags::CEILING`]. See `docs/adr/0013-priorities.md`.
    ThreadControl = 1,
    /// `ExchangeRegisters(dest, control, sp, ip, pager, exc_handler)`.
    ExchangeRegisters = 2,
    /// `ThreadSwitch(dest)`: yield, optionally donating the rest of the slice to `dest`.
    ThreadSwitch = 3,
    /// `Schedule(dest, priority, timeslice_us)`: by `dest`'s scheduler (a thread in its
    /// scheduler's space) or the root space only, up to `dest`'s space's ceiling.
    Schedule = 4,
    /// `Unmap(fpage, flags)`: revoke rights on mappings derived from the caller's.
    Unmap = 5,
    /// `SpaceControl(space_spec, control, utcb_area)` (root only).
    SpaceControl = 6,
    /// `InterruptControl(irq, handler, flags)`: attach/detach an interrupt line (root only).
    InterruptControl = 7,
    /// `KernelInfo(op)`: memory layout and version facts for the root task.
    KernelInfo = 8,
    /// `KDebug(op, a, b)`: console output, thread names, shutdown.
    KDebug = 9,
    /// `VcpuControl(dest, op, a, b)`: vCPU state, transfer masks, virtual interrupts.
    VcpuControl = 10,
    /// `TraceControl(op, space_spec)`: read or reset the VM-exit trace points.
    TraceControl = 11,
}

impl Syscall {
    /// Decodes r0; `None` for a number the kernel does not implement.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Self::Ipc,
            1 => Self::ThreadControl,
            2 => Self::ExchangeRegisters,
            3 => Self::ThreadSwitch,
            4 => Self::Schedule,
            5 => Self::Unmap,
            6 => Self::SpaceControl,
            7 => Self::InterruptControl,
            8 => Self::KernelInfo,
            9 => Self::KDebug,
            10 => Self::VcpuControl,
            11 => Self::TraceControl,
            _ => return None,
        })
    }
}

/// Status codes returned in r3 by every system call other than `Ipc`
/// (which reports [`IpcError`]s in r4). `0` is success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum KError {
    /// The call is reserved to the root task (privileged space).
    NoPrivilege = 1,
    /// The thread id does not name a live thread of the right version.
    InvalidThread = 2,
    /// The space specifier does not name a live address space.
    InvalidSpace = 3,
    /// A priority or timeslice is out of range.
    InvalidScheduler = 4,
    /// An argument is malformed (bad flags, misaligned address, unknown op).
    InvalidParam = 5,
    /// The UTCB location is outside the space's UTCB area or already used.
    UtcbArea = 6,
    /// The kernel ran out of memory for TCBs, page tables or mapping nodes.
    OutOfMemory = 7,
    /// A user buffer is unmapped, lacks the needed rights, or lies in kernel memory.
    InvalidBuffer = 8,
    /// The interrupt line does not exist or is attached to another thread.
    InvalidIrq = 9,
    /// The thread already exists (create) or is busy in a way that forbids the call.
    Busy = 10,
    /// No such system call number.
    NoSyscall = 11,
    /// `Schedule` by a thread that is not the destination's scheduler (nor in its
    /// scheduler's address space, nor in the root space).
    NotScheduler = 12,
    /// The priority is above the ceiling of the destination's address space (or, for a
    /// scheduler outside the root space, above the ceiling of its own), or a new space's
    /// ceiling is above the ceiling of its scheduler's space.
    AboveCeiling = 13,
}

impl KError {
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            1 => Self::NoPrivilege,
            2 => Self::InvalidThread,
            3 => Self::InvalidSpace,
            4 => Self::InvalidScheduler,
            5 => Self::InvalidParam,
            6 => Self::UtcbArea,
            7 => Self::OutOfMemory,
            8 => Self::InvalidBuffer,
            9 => Self::InvalidIrq,
            10 => Self::Busy,
            11 => Self::NoSyscall,
            12 => Self::NotScheduler,
            13 => Self::AboveCeiling,
            _ => return None,
        })
    }

    /// Converts a raw r3 status into a `Result`.
    pub const fn check(raw: u32) -> Result<(), KError> {
        if raw == 0 {
            return Ok(());
        }
        match Self::from_raw(raw) {
            Some(e) => Err(e),
            None => Err(Self::InvalidParam),
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoPrivilege => "operation reserved to the root task",
            Self::InvalidThread => "no such thread (or stale version)",
            Self::InvalidSpace => "no such address space",
            Self::InvalidScheduler => "priority or timeslice out of range",
            Self::InvalidParam => "malformed argument",
            Self::UtcbArea => "UTCB location invalid or in use",
            Self::OutOfMemory => "kernel memory exhausted",
            Self::InvalidBuffer => "user buffer unmapped or not accessible",
            Self::InvalidIrq => "no such interrupt line or already attached",
            Self::Busy => "object exists or is busy",
            Self::NoSyscall => "no such system call",
            Self::NotScheduler => "the caller is not the thread's scheduler",
            Self::AboveCeiling => "priority above the address space's ceiling",
        }
    }
}

/// `KDebug` operations (r3).
pub mod kdebug {
    /// Print the character in r4.
    pub const PUTC: u32 = 0;
    /// Print r5 bytes starting at user address r4 (validated; `InvalidBuffer` if unmapped,
    /// `InvalidParam` if r5 exceeds [`WRITE_MAX`]).
    pub const WRITE: u32 = 1;
    /// Most bytes one `WRITE` prints. The kernel prints them without interruption (a whole
    /// line at a time, so lines never interleave); the bound keeps that time short, so no
    /// caller can hold the processor for long with one call.
    pub const WRITE_MAX: u32 = 256;
    /// Name thread r6 (nil: the calling thread) with r5 bytes at r4 (at most
    /// [`super::THREAD_NAME_LEN`]). Another thread only where ExchangeRegisters may reach
    /// it: the caller's space, any thread for the root task, a VMM's own vCPUs; else
    /// `NoPrivilege`.
    pub const SET_NAME: u32 = 2;
    /// Stop the machine (root only). r4 = exit code printed in the closing line.
    pub const SHUTDOWN: u32 = 3;
    /// Read the timebase: r4 = upper, r5 = lower word.
    pub const TIMEBASE: u32 = 4;
}

/// `KernelInfo` operations (r3); results in r4..r7.
pub mod kinfo {
    /// r4 = first free physical byte, r5 = end of RAM, r6 = sigma0 window base.
    pub const MEMORY: u32 = 0;
    /// r4 = timebase frequency in Hz, r5 = tick period in microseconds.
    pub const CLOCK: u32 = 1;
    /// r4 = ABI version ([`super::ABI_VERSION`]), r5 = max thread number.
    pub const VERSION: u32 = 2;
    /// r4 = physical address of the boot module (root task ELF), r5 = its size.
    pub const BOOT_MODULE: u32 = 3;
    /// The kernel command line (QEMU `-append`): copied into the caller's UTCB message
    /// registers from MR0 on as bytes (at most [`super::BOOTARGS_LEN`]); r4 = length.
    pub const BOOTARGS: u32 = 4;
}

/// Bumped on every incompatible change to this crate.
pub const ABI_VERSION: u32 = 1;

/// Longest kernel command line passed to the root task, in bytes (all the message
/// registers `KernelInfo(BOOTARGS)` fills). The kernel says so at boot when it cuts one.
pub const BOOTARGS_LEN: usize = 256;
const _: () = assert!(BOOTARGS_LEN <= ipc::NUM_MRS * 4);

/// Longest thread name kept by the kernel, in bytes.
pub const THREAD_NAME_LEN: usize = 16;

#[cfg(test)]
mod tests {
    use super::KError;

    /// Every code decodes to the error that encodes to it, with a message; 0 and codes past
    /// the last are no error.
    #[test]
    fn kerror_codes_roundtrip() {
        let (mut n, mut last) = (0, 0);
        for raw in 0..256 {
            if let Some(e) = KError::from_raw(raw) {
                assert_eq!(e as u32, raw);
                assert!(!e.as_str().is_empty());
                assert_eq!(KError::check(raw), Err(e));
                n += 1;
                last = raw;
            }
        }
        assert_eq!(n, last, "codes are 1..=the last, without gaps");
        assert!(last >= KError::AboveCeiling as u32);
        assert_eq!(KError::check(0), Ok(()));
        assert_eq!(KError::from_raw(0), None);
    }
}
