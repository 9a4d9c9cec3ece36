//! The kernel entry points: every exception, interrupt and system call arrives in
//! `kestrel_trap` (or `kestrel_program` / the system-call path, which try their fast
//! paths first) with the interrupted state saved in a [`TrapFrame`], and is dispatched
//! once, by vector, in [`dispatch`].
//!
//! User-mode exceptions become TLB refills, page-fault IPCs to the pager, or
//! exception IPCs to the exception handler; a thread with neither is stopped with one
//! console line. Any exception taken in supervisor mode other than the idle loop's
//! timer and external interrupts is a kernel bug: we print a register dump and stop
//! the machine.

use super::switch::switch_to;
use crate::api::{ipc, kernel, sched, space, syscall, thread, thread::FaultWait, Kernel, IDLE};
use crate::arch::{esr, msr, spr, tsr, vector, TrapFrame};
use crate::platform::{self, IrqController};
use crate::virt::{self, Insn};
use kestrel_abi::{label, ExceptionClass, MsgTag, Rights, TracePoint, USER_BASE, USER_END};

#[no_mangle]
extern "C" fn kestrel_trap(frame: *mut TrapFrame, vec: u32) -> *mut TrapFrame {
    // SAFETY: the entry code passes the frame it has just filled; only read here.
    let native_user = unsafe { (*frame).regs.msr } & (msr::PR | msr::IS | msr::DS) == msr::PR;
    // Tested inline: a vCPU's misses (translation space 1), which guests take by the
    // million, pay three instructions for it, not a call.
    if native_user
        && (vec == vector::DTLB_MISS || vec == vector::ITLB_MISS)
        && tlb_miss_fast(frame, vec)
    {
        return frame;
    }
    // SAFETY: the entry code passes the frame it has just filled.
    unsafe { dispatch(frame, vec, Insn::Unknown) }
}

/// The TLB-miss fast path (for a miss in user mode, translation space 0, which the caller
/// checked): a native thread's miss on a page its space has present (the
/// common case: the 440's 64-entry TLB holds only a few pages of each of the spaces an
/// IPC round trip touches) is refilled and the thread resumed, without the general
/// dispatcher's vCPU checks and scheduler pass. Anything else (a vCPU, a fault, sigma0's
/// on-demand mappings, an address outside user space) returns false, having changed
/// nothing, and takes the general path, which reads DEAR and ESR again.
#[inline(never)]
fn tlb_miss_fast(frame: *mut TrapFrame, vec: u32) -> bool {
    let k = kernel();
    let cur = k.current;
    if k.threads[cur].vcpu != thread::NO_VCPU {
        return false;
    }
    let (va, access) = if vec == vector::DTLB_MISS {
        let write = spr::read::<{ ppc440::spr::ESR }>() & esr::ST != 0;
        (
            spr::read::<{ ppc440::spr::DEAR }>(),
            if write { Rights::W } else { Rights::R },
        )
    } else {
        // SAFETY: as above.
        (unsafe { (*frame).regs.ip }, Rights::X)
    };
    if !(USER_BASE..USER_END).contains(&va) {
        return false;
    }
    let sid = k.threads[cur].space;
    space::refill_present(k, sid, va, access)
}

/// Program interrupts have their own entry: most are a guest kernel's privileged
/// instructions, which the emulation fast path handles without the general dispatcher.
/// What it fetched goes along to the general path.
#[no_mangle]
extern "C" fn kestrel_program(frame: *mut TrapFrame, vec: u32) -> *mut TrapFrame {
    // SAFETY: the entry code passes the frame it has just filled; the fast path has not
    // touched it when it falls back here.
    virt::fast::program(frame, |insn| unsafe { dispatch(frame, vec, insn) })
}

/// The general kernel entry: each vector is handled in one place. Host events (the
/// decrementer tick, external interrupts) are the same whoever was interrupted; every
/// other vector is a guest exception for a vCPU (`virt`) and a native thread's system
/// call or fault otherwise. Also the system-call slow path (the IPC fast path's
/// fallback). Not inlined, so the fast paths' callers stay small.
///
/// # Safety
///
/// `frame` must point to the [`TrapFrame`] the entry code has just filled for this kernel
/// entry, valid and not otherwise referenced until the exit path restores it.
#[inline(never)]
pub unsafe fn dispatch(frame: *mut TrapFrame, vec: u32, insn: Insn) -> *mut TrapFrame {
    let k = kernel();
    // SAFETY: the caller guarantees (# Safety) that `frame` is this entry's frame, valid
    // and unreferenced elsewhere until the exit path restores it.
    let f = unsafe { &mut *frame };
    let from_user = f.regs.msr & msr::PR != 0;
    if !from_user {
        if k.current == IDLE && (vec == vector::DECREMENTER || vec == vector::EXTERNAL) {
            k.threads[IDLE].frame = frame as usize;
        } else {
            fatal(f, vec, "exception in kernel mode");
        }
    }
    let cur = k.current;
    // Only user mode runs vCPUs.
    let vcpu = if from_user {
        virt::vcpu_of(k, cur)
    } else {
        None
    };
    if from_user {
        // The saved MSR is whatever the interrupt put in SRRn[1]; QEMU adds stray bits
        // (MSR[WE] among them) on program interrupts. User threads always resume with
        // their canonical MSR.
        match vcpu {
            Some(vi) => {
                virt::sync_frame_msr(k, vi, f);
                // Host events interrupting the guest are exits of their own classes;
                // guest exceptions name theirs in `guest_trap`.
                let tp = match vec {
                    vector::DECREMENTER => TracePoint::HostTick,
                    vector::EXTERNAL => TracePoint::HostIrq,
                    _ => TracePoint::KernelInternal,
                };
                virt::emulate::enter(k, vi, tp);
            }
            None => f.regs.msr = msr::USER | crate::api::fpu::msr_fp(k, cur),
        }
    }
    let hint = match vec {
        vector::DECREMENTER => {
            spr::write::<{ ppc440::spr::TSR }>(tsr::DIS);
            sched::tick(k)
        }
        vector::EXTERNAL => {
            let mut hint = None;
            let pic = platform::irq_controller();
            while let Some(line) = pic.pending() {
                ipc::raise_irq(k, line, &mut hint);
            }
            hint
        }
        _ => match vcpu {
            Some(vi) => virt::emulate::guest_trap(k, cur, vi, vec, f, insn),
            None => native_trap(k, cur, vec, f),
        },
    };
    if let Some(vi) = vcpu {
        virt::emulate::leave(k, cur, vi, f);
        // The common case: the vCPU simply continues. Its PID and SPRGs are already
        // live (emulation writes them through), so skip the switch.
        if hint.is_none() && k.current == cur && sched::keeps_cpu(k, cur) {
            return frame;
        }
        let next = sched::pick_next(k, hint);
        if next == cur {
            return frame;
        }
        return switch_to(k, next);
    }
    let next = sched::pick_next(k, hint);
    switch_to(k, next)
}

/// A native thread's system call or exception (vector `vec`).
#[inline(always)]
fn native_trap(k: &mut Kernel, cur: usize, vec: u32, f: &mut TrapFrame) -> Option<usize> {
    match vec {
        vector::SYSCALL => syscall::dispatch(k, cur),
        vector::DTLB_MISS | vector::DSI => {
            let ea = spr::read::<{ ppc440::spr::DEAR }>();
            let esr = spr::read::<{ ppc440::spr::ESR }>();
            f.esr = esr;
            f.dear = ea;
            let access = if esr & esr::ST != 0 {
                Rights::W
            } else {
                Rights::R
            };
            if (USER_BASE..USER_END).contains(&ea) {
                page_fault(k, cur, ea, access)
            } else {
                exception(k, cur, ExceptionClass::DataStorage, esr, ea)
            }
        }
        vector::ITLB_MISS | vector::ISI => {
            let ip = f.regs.ip;
            if (USER_BASE..USER_END).contains(&ip) {
                page_fault(k, cur, ip, Rights::X)
            } else {
                exception(
                    k,
                    cur,
                    ExceptionClass::InstructionStorage,
                    spr::read::<{ ppc440::spr::ESR }>(),
                    ip,
                )
            }
        }
        vector::PROGRAM => {
            if emulate_mfpvr(k, cur, f) {
                return None;
            }
            exception(
                k,
                cur,
                ExceptionClass::Program,
                spr::read::<{ ppc440::spr::ESR }>(),
                0,
            )
        }
        vector::ALIGNMENT => exception(
            k,
            cur,
            ExceptionClass::Alignment,
            spr::read::<{ ppc440::spr::ESR }>(),
            spr::read::<{ ppc440::spr::DEAR }>(),
        ),
        vector::FP_UNAVAILABLE => {
            // Native threads get the FPU, switched lazily (`api::fpu`).
            crate::api::fpu::take(k, cur);
            None
        }
        vector::AP_UNAVAILABLE => exception(k, cur, ExceptionClass::ApUnavailable, 0, 0),
        vector::DEBUG => exception(k, cur, ExceptionClass::Debug, 0, 0),
        vector::MACHINE_CHECK => exception(
            k,
            cur,
            ExceptionClass::MachineCheck,
            spr::read::<{ ppc440::spr::MCSR }>(),
            0,
        ),
        vector::FIT | vector::WATCHDOG | vector::CRITICAL => {
            // Never enabled by the kernel; acknowledge and carry on.
            spr::write::<{ ppc440::spr::TSR }>(tsr::FIS | tsr::WIS | tsr::ENW);
            crate::kprintln!(
                "kestrel: unexpected {} interrupt ignored",
                vector::name(vec)
            );
            None
        }
        _ => fatal(f, vec, "unknown vector"),
    }
}

/// `mfspr rD,PVR` in user mode: emulated for every native thread, as Linux does for its
/// processes (glibc for PowerPC reads the PVR to pick its string and memory routines).
fn emulate_mfpvr(k: &mut Kernel, cur: usize, f: &mut TrapFrame) -> bool {
    const MFPVR: u32 = ppc440::encode::mfspr(0, ppc440::spr::PVR);
    const RT: u32 = 0x1f << 21;
    let sid = k.threads[cur].space;
    let insn = space::translate(k, sid, f.regs.ip, Rights::X)
        .and_then(|p| crate::arch::read_phys_u32(p, k.mem.ram_end));
    match insn {
        Some(w) if w & !RT == MFPVR => {
            f.regs.gpr[((w & RT) >> 21) as usize] = spr::read::<{ ppc440::spr::PVR }>();
            f.regs.ip += 4;
            true
        }
        _ => false,
    }
}

/// A user access to `ea` missed in the TLB or lacked rights.
fn page_fault(k: &mut Kernel, cur: usize, ea: u32, access: Rights) -> Option<usize> {
    let sid = k.threads[cur].space;
    if space::refill(k, sid, ea, access) {
        return None;
    }
    let ip = crate::api::frame_of(k, cur).regs.ip;
    let pager = k.threads[cur].pager;
    let tag = MsgTag::new(
        label::PAGEFAULT | access.0 as u16,
        kestrel_abi::pf::WORDS,
        0,
    );
    match ipc::fault_ipc(
        k,
        cur,
        FaultWait::PageFault,
        pager,
        [tag.0, ea, ip, 0, 0, 0, 0],
    ) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            let kind = match access {
                Rights::W => "write",
                Rights::X => "execute",
                _ => "read",
            };
            thread::stop(
                k,
                cur,
                format_args!(
                    "page fault ({kind}) at {ea:#010x}, ip {ip:#010x}, no pager to resolve it"
                ),
            );
            None
        }
    }
}

/// A user exception other than a page fault.
fn exception(
    k: &mut Kernel,
    cur: usize,
    class: ExceptionClass,
    esr: u32,
    dear: u32,
) -> Option<usize> {
    let (ip, sp) = {
        let f = crate::api::frame_of(k, cur);
        (f.regs.ip, f.regs.gpr[1])
    };
    let sid = k.threads[cur].space;
    let insn = space::translate(k, sid, ip, Rights::X)
        .and_then(|p| crate::arch::read_phys_u32(p, k.mem.ram_end))
        .unwrap_or(0);
    let handler = k.threads[cur].exc_handler;
    let tag = MsgTag::new(label::EXCEPTION, kestrel_abi::exc::WORDS, 0);
    match ipc::fault_ipc(
        k,
        cur,
        FaultWait::Exception,
        handler,
        [tag.0, ip, sp, class as u32, esr, dear, insn],
    ) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            thread::stop(
                k,
                cur,
                format_args!("{} at ip {ip:#010x} (insn {insn:#010x}, esr {esr:#x}, dear {dear:#x}), no exception handler", class.as_str()),
            );
            None
        }
    }
}

/// Prints a register dump and stops the machine.
pub fn fatal(f: &TrapFrame, vec: u32, why: &str) -> ! {
    crate::kprintln!(
        "KERNEL PANIC: {} ({} interrupt, vector {})",
        why,
        vector::name(vec),
        vec
    );
    crate::kprintln!(
        "  ip {:#010x} msr {:#010x} lr {:#010x} ctr {:#010x} cr {:#010x} xer {:#010x}",
        f.regs.ip,
        f.regs.msr,
        f.regs.lr,
        f.regs.ctr,
        f.regs.cr,
        f.regs.xer
    );
    crate::kprintln!(
        "  esr {:#010x} dear {:#010x} mcsr {:#010x}",
        spr::read::<{ ppc440::spr::ESR }>(),
        spr::read::<{ ppc440::spr::DEAR }>(),
        spr::read::<{ ppc440::spr::MCSR }>()
    );
    for row in 0..8 {
        let g = &f.regs.gpr[row * 4..row * 4 + 4];
        crate::kprintln!(
            "  r{:<2} {:#010x} {:#010x} {:#010x} {:#010x}",
            row * 4,
            g[0],
            g[1],
            g[2],
            g[3]
        );
    }
    crate::platform::shutdown(2)
}
