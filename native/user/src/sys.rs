//! Raw system-call wrappers: register conventions are documented in `kestrel_abi`.

use core::arch::asm;
use kestrel_abi::{kdebug, Fpage, FrameRegs, KError, Syscall, ThreadId, Utcb, UTCB_SPR};
use kestrel_ppc440::spr;

/// Registers r3..r12 after a system call.
pub type Regs = [u32; 10];

/// Issues `sc` with r0 = `nr` and r3..r12 = `a`; returns r3..r12.
///
/// With the `linux` feature (code inside a Linux-personality program, ADR 0034) every
/// call but `Ipc` goes as r0 = `kestrel_abi::SYSCALL_BASE` + `nr`: r0 = 1.. are Linux's
/// calls there, reflected to the personality server. `Ipc` stays r0 = 0 in every space.
#[inline(always)]
pub fn syscall(nr: Syscall, a: Regs) -> Regs {
    syscall_raw(number(nr), a)
}

/// The r0 value of call `nr` for this build (see [`syscall`]).
#[inline(always)]
pub const fn number(nr: Syscall) -> u32 {
    if cfg!(feature = "linux") && !matches!(nr, Syscall::Ipc) {
        kestrel_abi::SYSCALL_BASE + nr as u32
    } else {
        nr as u32
    }
}

/// [`syscall`] with any number in r0, also numbers the kernel does not have (the kernel
/// answers those with `KError::NoSyscall`); the syscall fuzzer uses it.
#[inline(always)]
pub fn syscall_raw(nr: u32, a: Regs) -> Regs {
    let mut r = a;
    // SAFETY: `sc` enters the kernel, which validates every argument and only writes
    // r3..r12 back (and r0, declared clobbered); no memory is touched behind Rust's back
    // except the UTCB, which is only accessed through `utcb()`.
    unsafe {
        asm!(
            "sc",
            inout("r0") nr => _,
            inout("r3") r[0], inout("r4") r[1], inout("r5") r[2], inout("r6") r[3],
            inout("r7") r[4], inout("r8") r[5], inout("r9") r[6], inout("r10") r[7],
            inout("r11") r[8], inout("r12") r[9],
            options(nostack)
        );
    }
    r
}

/// The calling thread's UTCB.
#[inline(always)]
pub fn utcb() -> &'static mut Utcb {
    let addr: u32;
    // SAFETY: reading SPRG4 through its user port is allowed in user mode and has no side
    // effects.
    unsafe {
        asm!("mfspr {0}, {spr}", out(reg) addr, spr = const UTCB_SPR, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: the kernel maps a 4 KiB UTCB page, private to this thread, at the address
    // it keeps in SPRG4 for as long as the thread exists. Only this thread touches it.
    unsafe { &mut *(addr as *mut Utcb) }
}

/// The calling thread's id.
pub fn my_id() -> ThreadId {
    ThreadId(utcb().my_global_id)
}

pub fn thread_control(
    dest: ThreadId,
    space: ThreadId,
    priority: u32,
    pager: ThreadId,
    utcb_addr: u32,
) -> Result<(), KError> {
    let r = syscall(
        Syscall::ThreadControl,
        [dest.0, space.0, priority, pager.0, utcb_addr, 0, 0, 0, 0, 0],
    );
    KError::check(r[0])
}

/// `ThreadControl` with flags (r8), e.g. `tcflags::VCPU` to create a vCPU in a new VM space.
pub fn thread_control_flags(
    dest: ThreadId,
    space: ThreadId,
    priority: u32,
    pager: ThreadId,
    utcb_addr: u32,
    flags: u32,
) -> Result<(), KError> {
    let r = syscall(
        Syscall::ThreadControl,
        [
            dest.0, space.0, priority, pager.0, utcb_addr, flags, 0, 0, 0, 0,
        ],
    );
    KError::check(r[0])
}

/// `ThreadControl` with every argument: `flags` (r8), `scheduler` (r9, nil = the caller)
/// and `ceiling` (r10, read with `tcflags::CEILING`); see `docs/adr/0013-priorities.md`.
#[allow(clippy::too_many_arguments)]
pub fn thread_control_all(
    dest: ThreadId,
    space: ThreadId,
    priority: u32,
    pager: ThreadId,
    utcb_addr: u32,
    flags: u32,
    scheduler: ThreadId,
    ceiling: u32,
) -> Result<(), KError> {
    let r = syscall(
        Syscall::ThreadControl,
        [
            dest.0,
            space.0,
            priority,
            pager.0,
            utcb_addr,
            flags,
            scheduler.0,
            ceiling,
            0,
            0,
        ],
    );
    KError::check(r[0])
}

/// `VcpuControl(dest, op, a, b, c)`.
pub fn vcpu_control(dest: ThreadId, op: u32, a: u32, b: u32, c: u32) -> Result<(), KError> {
    let r = syscall(Syscall::VcpuControl, [dest.0, op, a, b, c, 0, 0, 0, 0, 0]);
    KError::check(r[0])
}

/// `TraceControl(op, who)`: `who` = a vCPU or nil for all VMs; READ fills `utcb().trace`.
pub fn trace_control(op: u32, who: ThreadId) -> Result<(), KError> {
    let r = syscall(Syscall::TraceControl, [op, who.0, 0, 0, 0, 0, 0, 0, 0, 0]);
    KError::check(r[0])
}

/// Results of `ExchangeRegisters`: the values before the call.
#[derive(Clone, Copy, Debug)]
pub struct ExRegs {
    pub state: u32,
    pub sp: u32,
    pub ip: u32,
    pub pager: ThreadId,
    pub exc_handler: ThreadId,
}

pub fn exchange_registers(
    dest: ThreadId,
    control: u32,
    sp: u32,
    ip: u32,
    pager: ThreadId,
    exc_handler: ThreadId,
) -> Result<ExRegs, KError> {
    let r = syscall(
        Syscall::ExchangeRegisters,
        [dest.0, control, sp, ip, pager.0, exc_handler.0, 0, 0, 0, 0],
    );
    KError::check(r[0])?;
    Ok(ExRegs {
        state: r[1],
        sp: r[2],
        ip: r[3],
        pager: ThreadId(r[4]),
        exc_handler: ThreadId(r[5]),
    })
}

/// Reads another thread's full user register frame.
pub fn get_frame(dest: ThreadId) -> Result<FrameRegs, KError> {
    exchange_registers(
        dest,
        kestrel_abi::exreg::GET_FRAME,
        0,
        0,
        ThreadId::NIL,
        ThreadId::NIL,
    )?;
    Ok(utcb().frame)
}

/// Replaces another (not running) thread's full user register frame.
pub fn set_frame(dest: ThreadId, frame: &FrameRegs) -> Result<(), KError> {
    utcb().frame = *frame;
    exchange_registers(
        dest,
        kestrel_abi::exreg::SET_FRAME,
        0,
        0,
        ThreadId::NIL,
        ThreadId::NIL,
    )
    .map(|_| ())
}

pub fn thread_switch(dest: ThreadId) {
    syscall(Syscall::ThreadSwitch, [dest.0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
}

pub fn schedule(dest: ThreadId, priority: u32, timeslice_us: u32) -> Result<(), KError> {
    let r = syscall(
        Syscall::Schedule,
        [dest.0, priority, timeslice_us, 0, 0, 0, 0, 0, 0, 0],
    );
    KError::check(r[0])
}

pub fn unmap(fpage: Fpage, flags: u32) -> Result<(), KError> {
    let r = syscall(Syscall::Unmap, [fpage.0, flags, 0, 0, 0, 0, 0, 0, 0, 0]);
    KError::check(r[0])
}

/// Returns r4 (e.g. the PID for `GET_PID`).
pub fn space_control(space: ThreadId, control: u32, arg: u32) -> Result<u32, KError> {
    let r = syscall(
        Syscall::SpaceControl,
        [space.0, control, arg, 0, 0, 0, 0, 0, 0, 0],
    );
    KError::check(r[0]).map(|_| r[1])
}

pub fn interrupt_control(irq: u32, handler: ThreadId, flags: u32) -> Result<(), KError> {
    let r = syscall(
        Syscall::InterruptControl,
        [irq, handler.0, flags, 0, 0, 0, 0, 0, 0, 0],
    );
    KError::check(r[0])
}

/// Returns r4..r7 of `KernelInfo(op)`.
pub fn kernel_info(op: u32) -> Result<[u32; 4], KError> {
    let r = syscall(Syscall::KernelInfo, [op, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    KError::check(r[0]).map(|_| [r[1], r[2], r[3], r[4]])
}

/// Copies the kernel command line (QEMU `-append`) into `buf`; returns its length.
pub fn bootargs(buf: &mut [u8; kestrel_abi::BOOTARGS_LEN]) -> usize {
    let Ok([n, ..]) = kernel_info(kestrel_abi::kinfo::BOOTARGS) else {
        return 0;
    };
    let n = (n as usize).min(buf.len());
    let u = utcb();
    for (i, b) in buf.iter_mut().enumerate().take(n) {
        *b = u.mr[i / 4].to_be_bytes()[i % 4];
    }
    n
}

pub fn kdebug_putc(c: u8) {
    syscall(
        Syscall::KDebug,
        [kdebug::PUTC, c as u32, 0, 0, 0, 0, 0, 0, 0, 0],
    );
}

/// Writes raw bytes given by address; the kernel validates the buffer.
pub fn kdebug_write_raw(addr: u32, len: u32) -> Result<(), KError> {
    let r = syscall(
        Syscall::KDebug,
        [kdebug::WRITE, addr, len, 0, 0, 0, 0, 0, 0, 0],
    );
    KError::check(r[0])
}

pub fn kdebug_write(bytes: &[u8]) -> Result<(), KError> {
    kdebug_write_raw(bytes.as_ptr() as u32, bytes.len() as u32)
}

/// Names the calling thread (kernel messages use the name).
pub fn set_name(name: &str) -> Result<(), KError> {
    set_thread_name(ThreadId::NIL, name)
}

/// Names thread `id` (`ThreadId::NIL`: the caller): one in the caller's space, any for the
/// root task, or a vCPU the caller is the VMM of. The kernel does not fault pages in for
/// debug calls, so the name is copied to the (mapped) stack first.
pub fn set_thread_name(id: ThreadId, name: &str) -> Result<(), KError> {
    let mut buf = [0u8; kestrel_abi::THREAD_NAME_LEN];
    let n = name.len().min(buf.len());
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    let r = syscall(
        Syscall::KDebug,
        [
            kdebug::SET_NAME,
            buf.as_ptr() as u32,
            n as u32,
            id.0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
    );
    KError::check(r[0])
}

/// Stops the machine (root task only). Returns only on error.
pub fn shutdown(code: u32) -> KError {
    let r = syscall(
        Syscall::KDebug,
        [kdebug::SHUTDOWN, code, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    KError::from_raw(r[0]).unwrap_or(KError::InvalidParam)
}

/// Reads the 64-bit timebase directly (user-readable on the 440).
pub fn timebase() -> u64 {
    loop {
        let (hi, lo, hi2): (u32, u32, u32);
        // SAFETY: mfspr of the TBU/TBL read ports is permitted in user mode, no side effects.
        unsafe {
            asm!("mfspr {0}, {tbu}", "mfspr {1}, {tbl}", "mfspr {2}, {tbu}",
                 out(reg) hi, out(reg) lo, out(reg) hi2, tbu = const spr::TBU_R, tbl = const spr::TBL_R,
                 options(nomem, nostack, preserves_flags));
        }
        if hi == hi2 {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
}

/// The time base's frequency in Hz (the kernel's `kinfo::CLOCK`; at least 1 MHz), asked once.
pub fn timebase_hz() -> u32 {
    use core::sync::atomic::{AtomicU32, Ordering};
    static HZ: AtomicU32 = AtomicU32::new(0);
    let hz = HZ.load(Ordering::Relaxed);
    if hz != 0 {
        return hz;
    }
    let hz = kernel_info(kestrel_abi::kinfo::CLOCK)
        .map(|v| v[0])
        .unwrap_or(0)
        .max(1_000_000);
    HZ.store(hz, Ordering::Relaxed);
    hz
}

/// Nanoseconds of time base since the machine started. A multiply by a 32.32 fixed-point
/// factor worked out once, not a 128-bit division on every call: MPI asks on every wait
/// (its deadlock clock and `MPI_Wtime`), and the division cost more than a small message's
/// trip through the fabric. The factor's truncation is below 2^-32 of the value.
pub fn now_ns() -> u64 {
    use core::sync::atomic::{AtomicU32, Ordering};
    // The factor's two halves (no 64-bit atomics here). Every thread that computes it
    // stores the same value, so a read that mixes two threads' stores is still right.
    static HI: AtomicU32 = AtomicU32::new(0);
    static LO: AtomicU32 = AtomicU32::new(0);
    let mut f = u64::from(HI.load(Ordering::Relaxed)) << 32 | u64::from(LO.load(Ordering::Relaxed));
    if f == 0 {
        f = ((1_000_000_000u128 << 32) / u128::from(timebase_hz())) as u64;
        HI.store((f >> 32) as u32, Ordering::Relaxed);
        LO.store(f as u32, Ordering::Relaxed);
    }
    ((u128::from(timebase()) * u128::from(f)) >> 32) as u64
}
