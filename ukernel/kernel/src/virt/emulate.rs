//! Trap-and-emulate for vCPUs: the kernel-side handler of every guest trap, and the
//! emulation of the hot privileged instructions (mfmsr, mtmsr, wrtee, wrteei, rfi,
//! rfci, rfmci, mfspr/mtspr of the shadow SPRs, tlbwe, tlbre, tlbsx, tlbsync, iccci,
//! dccci, dcbi). Everything else becomes a virtualization fault IPC to the VMM, including
//! `mfdcrx`/`mtdcrx`, which the 440x5 raises as illegal instructions.
//!
//! The instructions' semantics are `kestrel_guestcpu`'s (decoding, `mtspr`'s effects, MSR
//! writes); this file applies what they return to the hardware and the kernel's state,
//! and sends the VMM what the kernel does not complete.

use super::fault::{guest_fault, phys_miss, virt_fault};
use super::inject::{apply_msr, deliver_pending, inject};
use super::mmu::{self, VmSpace};
use super::pv::{self, Hypercall};
use super::split;
use super::vcpu::{
    exit_begin, exit_class, exit_split, set_timebase, sync_frame_msr, update_dec, wakeup_pending,
    Insn, NO_VCPU,
};
use crate::api::Kernel;
use crate::arch::{esr, msr, spr, vector, TrapFrame};
use kestrel_abi::{TracePoint, VirtFault};
use kestrel_guestcpu::insn::{self, Privileged};
use kestrel_guestcpu::msr::{self as gmsr, MsrWrite};
use kestrel_guestcpu::spr::{self as gspr, SprEffect, SprExit};
use kestrel_vtlb::{shadow_fill, split_fill, Access, FillResult, SplitFill};
use ppc440::spr::TBL_R;

/// Called first on every kernel entry from vCPU thread `cur` through the general path,
/// before any host event is handled: the guest's USPRG0 is a real user register while
/// it runs, and the exit's accounting starts (`vcpu::exit_begin`; its class is `tp` until
/// the handler names another).
#[inline(always)]
pub fn enter(k: &mut Kernel, vi: usize, tp: TracePoint) {
    k.vm.vcpus[vi].s.usprg0 = spr::read::<{ ppc440::spr::USPRG0 }>();
    exit_begin(k, vi, tp);
    pv::pv_in(k, vi);
}

/// Handles a guest exception of vCPU thread `cur` (vector `vec`, frame `f`): every vector
/// but the host's own events (decrementer, external interrupt), which `glue::trap`
/// handles once for all threads. `insn` is the guest instruction if the program
/// interrupt's fast tier already fetched it.
pub fn guest_trap(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    vec: u32,
    f: &mut TrapFrame,
    insn: Insn,
) -> Option<usize> {
    // The exit's class (its cost runs from the vector to the return to the guest,
    // `vcpu::exit_begin`); paths that leave it `None` set it themselves (`tlb_fault`).
    let mut tp = None;
    let hint = match vec {
        vector::SYSCALL => 'sc: {
            match pv::hypercall(k, vi, f) {
                Some(Hypercall::Done(t)) => {
                    tp = Some(t);
                    break 'sc None;
                }
                Some(Hypercall::Wait) => {
                    tp = Some(TracePoint::GuestIdle);
                    let insn = kestrel_abi::pv::HCALL_INSNS[2];
                    break 'sc virt_fault(k, cur, vi, VirtFault::Idle, insn, 0);
                }
                None => {}
            }
            // `sc` in the guest: reflect the system call into the guest kernel.
            let pc = f.regs.ip;
            inject(k, vi, f, vector::SYSCALL, pc);
            tp = Some(TracePoint::ExceptSyscall);
            None
        }
        vector::PROGRAM => {
            let e = spr::read::<{ ppc440::spr::ESR }>();
            if e & esr::PPR != 0 {
                let (h, t) = privileged(k, cur, vi, f, insn);
                tp = t;
                h
            } else if let Some(word) = indexed_dcr(k, vi, f, e, insn) {
                // mfdcrx/mtdcrx: illegal on QEMU's 440, emulated by the VMM (BG/P's DCRs
                // above 1023 need them).
                let (h, t) = privileged(k, cur, vi, f, Insn::Fetched(word));
                tp = t;
                h
            } else {
                // Illegal instruction or trap: the guest's own business.
                k.vm.vcpus[vi].s.esr = e;
                let pc = f.regs.ip;
                inject(k, vi, f, vector::PROGRAM, pc);
                tp = Some(TracePoint::ExceptReflect);
                None
            }
        }
        vector::DTLB_MISS | vector::DSI => {
            let ea = spr::read::<{ ppc440::spr::DEAR }>();
            let e = spr::read::<{ ppc440::spr::ESR }>();
            let access = if e & esr::ST != 0 {
                Access::Write
            } else {
                Access::Read
            };
            tlb_fault(k, cur, vi, f, ea, access, e)
        }
        vector::ITLB_MISS | vector::ISI => {
            let ea = f.regs.ip;
            tlb_fault(k, cur, vi, f, ea, Access::Execute, 0)
        }
        vector::ALIGNMENT => {
            // QEMU's 440 sets DEAR but leaves ESR alone on alignment interrupts.
            k.vm.vcpus[vi].s.dear = spr::read::<{ ppc440::spr::DEAR }>();
            let pc = f.regs.ip;
            inject(k, vi, f, vector::ALIGNMENT, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::FP_UNAVAILABLE if k.vm.vcpus[vi].s.msr & msr::FP != 0 => {
            // The guest enabled its FPU: hand it the real one (lazily switched).
            take_fpu(k, vi);
            sync_frame_msr(k, vi, f);
            tp = Some(TracePoint::KernelInternal);
            None
        }
        vector::FP_UNAVAILABLE | vector::AP_UNAVAILABLE => {
            let pc = f.regs.ip;
            inject(k, vi, f, vec, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::DEBUG
            if k.vm.vcpus[vi].step != 0 && !gmsr::guest_debug_events(&k.vm.vcpus[vi].s) =>
        {
            // The kernel's own single step after an emulated lwarx (split.rs).
            let dbsr = spr::read::<{ ppc440::spr::DBSR }>();
            spr::write::<{ ppc440::spr::DBSR }>(dbsr);
            tp = Some(TracePoint::KernelInternal);
            split::step(k, cur, vi, f)
        }
        vector::DEBUG => {
            // A hardware debug event the guest asked for (see `gspr::DBCR0_EVENTS`).
            let dbsr = spr::read::<{ ppc440::spr::DBSR }>();
            spr::write::<{ ppc440::spr::DBSR }>(dbsr);
            k.vm.vcpus[vi].s.dbsr |= dbsr & ppc440::dbsr::ICMP;
            let pc = f.regs.ip;
            inject(k, vi, f, vector::DEBUG, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        _ => {
            let pc = f.regs.ip;
            let insn = mmu::guest_read_u32(k, vi, pc, true).unwrap_or(0);
            tp = Some(TracePoint::SyscallIpc);
            virt_fault(k, cur, vi, VirtFault::Halt, insn, vec as u64)
        }
    };
    if let Some(tp) = tp {
        exit_class(k, vi, tp);
    }
    hint
}

/// Called last on every kernel entry from vCPU thread `cur`, after the guest exception
/// or host event was handled: delivers the virtual interrupts the guest can now take,
/// if the vCPU is still the one to resume. An injection is its own trace point, from
/// here to the return to the guest (`virt::exit_split`).
#[inline(always)]
pub fn leave(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) {
    if k.current == cur && k.threads[cur].runnable() {
        let t = spr::read::<{ TBL_R }>();
        if let Some(tp) = deliver_pending(k, vi, f) {
            exit_split(k, vi, t, tp);
        }
    }
    pv::pv_out(k, vi);
}

/// The word of an illegal-instruction program exception (`ESR[PIL]` in `esr`) if it is
/// `mfdcrx` or `mtdcrx` (`kestrel_guestcpu::insn::is_indexed_dcr`): the message's `gpa`
/// carries (RA), the DCR number. Fetches the word only for an illegal instruction (rare).
fn indexed_dcr(k: &mut Kernel, vi: usize, f: &TrapFrame, e: u32, insn: Insn) -> Option<u32> {
    if e & esr::PIL == 0 {
        return None;
    }
    let word = match insn {
        Insn::Fetched(i) => i,
        Insn::Unreadable => return None,
        Insn::Unknown => mmu::guest_fetch(k, vi, f.regs.ip)?,
    };
    insn::is_indexed_dcr(word).then_some(word)
}

/// The scheduling hint and trace point of a privileged instruction's exit.
type Exit = (Option<usize>, Option<TracePoint>);

/// A privileged-instruction program exception: emulate or send to the VMM.
fn privileged(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame, insn: Insn) -> Exit {
    let pc = f.regs.ip;
    if k.vm.vcpus[vi].s.msr & msr::PR != 0 {
        // A privileged instruction in guest user mode: the guest kernel's business.
        k.vm.vcpus[vi].s.esr = esr::PPR;
        inject(k, vi, f, vector::PROGRAM, pc);
        return (None, Some(TracePoint::ExceptReflect));
    }
    let insn = match insn {
        Insn::Fetched(i) => Some(i),
        Insn::Unreadable => None,
        Insn::Unknown => mmu::guest_fetch(k, vi, pc),
    };
    let Some(insn) = insn else {
        return to_vmm(k, cur, vi, VirtFault::Instruction, 0, 0);
    };
    let next = pc.wrapping_add(4);
    let tp = match insn::classify(insn) {
        Privileged::Mfmsr { rt } => {
            f.regs.gpr[rt] = k.vm.vcpus[vi].s.msr;
            TracePoint::EmulMfmsr
        }
        Privileged::Mtmsr { rs } => {
            let w = gmsr::mtmsr(&mut k.vm.vcpus[vi].s, f.regs.gpr[rs]);
            return set_msr(k, cur, vi, f, w, next, insn, TracePoint::EmulMtmsr);
        }
        Privileged::Wrtee { rs } => {
            let _ = gmsr::wrtee(&mut k.vm.vcpus[vi].s, f.regs.gpr[rs]);
            TracePoint::EmulWrtee
        }
        Privileged::Wrteei { e } => {
            let _ = gmsr::wrteei(&mut k.vm.vcpus[vi].s, e);
            TracePoint::EmulWrteei
        }
        Privileged::Mfspr { rt, spr: n } => {
            update_dec(k, vi);
            let v = &k.vm.vcpus[vi];
            match gspr::mfspr(&v.s, v.timers.dec_deadline, n, &RealSprs) {
                Some(value) => f.regs.gpr[rt] = value,
                None => return to_vmm(k, cur, vi, VirtFault::Instruction, insn, 0),
            }
            TracePoint::EmulMfspr
        }
        Privileged::Mtspr { rs, spr: n } => {
            if let Err(e) = mtspr(k, vi, n, f.regs.gpr[rs]) {
                let class = match e {
                    SprExit::Vmm => VirtFault::Instruction,
                    SprExit::Reset => VirtFault::Halt,
                };
                return to_vmm(k, cur, vi, class, insn, 0);
            }
            sync_frame_msr(k, vi, f);
            TracePoint::EmulMtspr
        }
        Privileged::Tlb(_) => match mmu::tlb_insn(k, vi, f, insn) {
            Some(tp) => tp,
            // An invalid word number.
            None => return reflect_illegal(k, vi, f),
        },
        Privileged::NoEffect => TracePoint::EmulCacheTlbOp,
        Privileged::Return(kind) => {
            let (pc, w) = gmsr::return_from(&mut k.vm.vcpus[vi].s, kind);
            let tp = match kind {
                gmsr::Return::Rfi => TracePoint::EmulRfi,
                _ => TracePoint::EmulRfciMci,
            };
            return set_msr(k, cur, vi, f, w, pc, insn, tp);
        }
        Privileged::IndexedDcr { ra } => {
            // The VMM gets the DCR number (RA) with the fault, so neither form needs a
            // register transfer.
            let dcr = f.regs.gpr[ra] as u64;
            return to_vmm(k, cur, vi, VirtFault::Instruction, insn, dcr);
        }
        Privileged::Other => return to_vmm(k, cur, vi, VirtFault::Instruction, insn, 0),
    };
    f.regs.ip = next;
    (None, Some(tp))
}

/// A virtualization fault of `class` for `insn` (`gpa`: see `fault::virt_fault`).
fn to_vmm(k: &mut Kernel, cur: usize, vi: usize, class: VirtFault, insn: u32, gpa: u64) -> Exit {
    (
        virt_fault(k, cur, vi, class, insn, gpa),
        Some(TracePoint::SyscallIpc),
    )
}

/// An emulated instruction with invalid operands: the guest gets an illegal-instruction
/// program exception, as on hardware.
fn reflect_illegal(k: &mut Kernel, vi: usize, f: &mut TrapFrame) -> Exit {
    k.vm.vcpus[vi].s.esr = esr::PIL;
    let pc = f.regs.ip;
    inject(k, vi, f, vector::PROGRAM, pc);
    (None, Some(TracePoint::ExceptReflect))
}

/// A new guest MSR (`w`, already in the state) from `insn`, continuing at `pc`: applied
/// to the hardware; the exit's trace point is `tp`, or the guest waits (MSR[WE] with
/// nothing pending), which the VMM handles.
#[allow(clippy::too_many_arguments)]
fn set_msr(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    f: &mut TrapFrame,
    w: MsrWrite,
    pc: u32,
    insn: u32,
    tp: TracePoint,
) -> Exit {
    apply_msr(k, vi, w, f);
    f.regs.ip = pc;
    if w.wait && !wakeup_pending(k, vi) {
        return (
            virt_fault(k, cur, vi, VirtFault::Idle, insn, 0),
            Some(TracePoint::GuestIdle),
        );
    }
    (None, Some(tp))
}

/// The real SPRs `mfspr` reads (`kestrel_guestcpu::spr::Hardware`).
struct RealSprs;

impl gspr::Hardware for RealSprs {
    fn timebase(&self) -> u64 {
        spr::timebase()
    }
    fn tbl(&self) -> u32 {
        spr::read::<{ TBL_R }>()
    }
    fn tbu(&self) -> u32 {
        spr::read::<{ ppc440::spr::TBU_R }>()
    }
    fn pvr(&self) -> u32 {
        spr::read::<{ ppc440::spr::PVR }>()
    }
}

/// `mtspr` of `val` to SPR `n` by vCPU `vi` (`kestrel_guestcpu::spr::mtspr`), with its
/// effect applied to the hardware and the kernel's state.
fn mtspr(k: &mut Kernel, vi: usize, n: u32, val: u32) -> Result<(), SprExit> {
    update_dec(k, vi);
    let now = spr::timebase();
    match gspr::mtspr(&mut k.vm.vcpus[vi].s, n, val, now)? {
        SprEffect::None => {}
        SprEffect::PidSwitch => mmu::guest_pid_switch(k, vi),
        SprEffect::WriteThrough { spr, value } => super::vcpu::write_through(spr, value),
        SprEffect::Dbcr0(real) => spr::write::<{ ppc440::spr::DBCR0 }>(real),
        SprEffect::DecDeadline(d) => k.vm.vcpus[vi].timers.dec_deadline = d,
        // The guest reads the time base without trapping, so the real one is written and
        // the difference kept as this vCPU's offset, which is taken out again whenever
        // anything else runs (see `virt::on_switch`).
        SprEffect::TbJump { after, delta } => {
            set_timebase(after);
            let v = &mut k.vm.vcpus[vi];
            v.tb_offset = v.tb_offset.wrapping_add(delta as i64);
            // The exit in progress started on the old time base: move its start along,
            // so its cost leaves the jump out.
            v.exit_tb = v.exit_tb.wrapping_add(delta as u32);
            // Deadlines of the virtual decrementer are in guest time: shift them along.
            if v.timers.dec_deadline != 0 {
                v.timers.dec_deadline = v.timers.dec_deadline.wrapping_add(delta);
            }
            k.vm.tb_vcpu = vi as u8;
        }
    }
    Ok(())
}

/// A hardware TLB miss or storage exception of the running vCPU.
pub fn tlb_fault(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    f: &mut TrapFrame,
    ea: u32,
    access: Access,
    esr: u32,
) -> Option<usize> {
    if access != Access::Execute && pv::fill_magic(k, vi, ea) {
        exit_class(k, vi, TracePoint::DtlbMiss);
        return None;
    }
    let (guest_msr, pr, pid) = {
        let s = &k.vm.vcpus[vi].s;
        (s.msr, s.msr & msr::PR != 0, s.pid as u8)
    };
    let (is, ds) = (guest_msr & msr::IS != 0, guest_msr & msr::DS != 0);
    let is_fetch = access == Access::Execute;
    let gmap = VmSpace::of(k, cur);
    let tlb = &k.vm.vcpus[vi].tlb;
    let res = if mmu::is_split(guest_msr) {
        // Fetches and data accesses translate through different guest spaces.
        match split_fill(tlb, &gmap, ea, pid, pr, access, is, ds, f.regs.ip) {
            SplitFill::Fill(r) => Some(r),
            SplitFill::Emulate => None,
        }
    } else {
        Some(shadow_fill(
            tlb,
            &gmap,
            ea,
            pid,
            pr,
            access,
            if is_fetch { is } else { ds },
        ))
    };
    let tp = if is_fetch {
        TracePoint::ItlbMiss
    } else {
        TracePoint::DtlbMiss
    };
    // The exit's class; its cost runs from the vector to the return to the guest.
    exit_class(k, vi, tp);
    match res {
        None => {
            // The data page is the instruction's own page under another translation:
            // perform the access in software (counted as a data TLB miss).
            split::emulate(k, cur, vi, f)
        }
        Some(FillResult::Hit { hw, guest_index }) => {
            // The TID of the guest's PID and mode; allocating one loads the PID register.
            let tid = mmu::guest_hw_pid(k, vi, pid, !pr);
            mmu::install(k, vi, hw.tagged(tid), guest_index);
            None
        }
        Some(FillResult::PhysMiss { gpa }) => phys_miss(k, cur, vi, f, gpa, access),
        Some(other) => {
            guest_fault(k, vi, f, ea, access, esr, other);
            None
        }
    }
}

/// Gives vCPU `vi` the real FPU, saving the previous owner's registers.
fn take_fpu(k: &mut Kernel, vi: usize) {
    if k.vm.fp_owner == vi as u8 {
        return;
    }
    release_fpu(k);
    // A native thread may hold it too (`api::fpu`).
    crate::api::fpu::release(k);
    crate::arch::fpu::load(&k.vm.vcpus[vi].fpr);
    k.vm.fp_owner = vi as u8;
}

/// Saves the owning vCPU's registers (if any) so someone else can load the FPU.
pub fn release_fpu(k: &mut Kernel) {
    if k.vm.fp_owner != NO_VCPU {
        let prev = k.vm.fp_owner as usize;
        crate::arch::fpu::save(&mut k.vm.vcpus[prev].fpr);
        // The previous owner's frame must trap on its next FP instruction.
        let t = k.vm.vcpus[prev].thread;
        crate::api::frame_of(k, t).regs.msr &= !msr::FP;
        k.vm.fp_owner = NO_VCPU;
    }
}
