//! Trap-and-emulate for vCPUs: the kernel-side handler of every guest trap, and the
//! emulation of the hot privileged instructions (mfmsr, mtmsr, wrtee, wrteei, rfi,
//! rfci, rfmci, mfspr/mtspr of the shadow SPRs, tlbwe, tlbre, tlbsx, tlbsync, iccci,
//! dccci, dcbi). Everything else becomes a virtualization fault IPC to the VMM.
//!
//! Instruction fields follow Book E (MSB-0): opcode 0:5, RS/RT 6:10, RA 11:15,
//! RB 16:20, extended opcode 21:30, Rc 31; the SPR/DCR number is the 10-bit field
//! 11:20 with its two halves swapped.

use super::{
    Insn, deliver_pending, inject, mmu, set_guest_mode, set_timebase, sync_frame_msr, trace, update_dec, virt_fault, Class,
    GUEST_MSR_MASK, NO_VCPU,
};
use crate::arch::{esr, msr, spr, timer, vector, TrapFrame};
use crate::api::Kernel;
use kestrel_abi::{TracePoint, VirtFault};
use kestrel_vtlb::Access;

/// Guest TCR/TSR bits (PPC440 UM §8), re-exported for the virtual timer.
pub const TCR_DIE: u32 = timer::TCR_DIE;
pub const TCR_ARE: u32 = timer::TCR_ARE;
pub const TSR_DIS: u32 = timer::TSR_DIS;
pub const TSR_FIS: u32 = timer::TSR_FIS;
pub const TSR_WIS: u32 = timer::TSR_WIS;
pub const TSR_ENW: u32 = timer::TSR_ENW;
/// TCR[FIE] (bit 8) and TCR[WIE] (bit 4).
pub const TCR_FIE: u32 = 1 << (31 - 8);
pub const TCR_WIE: u32 = 1 << (31 - 4);
/// DBCR0[RST] (bits 2:3): a guest reset request.
const DBCR0_RST: u32 = 0x3000_0000;
/// DBCR0[IDM] (bit 1) and DBCR0[ICMP] (bit 4): the debug events the kernel passes
/// through to hardware for a guest (instruction-completion single step).
const DBCR0_IDM: u32 = 1 << (31 - 1);
const DBCR0_ICMP: u32 = 1 << (31 - 4);
pub const DBCR0_EVENTS: u32 = DBCR0_IDM | DBCR0_ICMP;
/// DBSR[ICMP] (bit 4).
const DBSR_ICMP: u32 = 1 << (31 - 4);

/// Called first on every kernel entry from vCPU thread `cur`, before any host event is
/// handled: the guest's USPRG0 is a real user register while it runs.
#[inline(always)]
pub fn enter(k: &mut Kernel, vi: usize) {
    k.vm.vcpus[vi].s.usprg0 = spr::read::<{ spr::USPRG0 }>();
}

/// Handles a guest exception of vCPU thread `cur` (vector `vec`, frame `f`): every vector
/// but the host's own events (decrementer, external interrupt), which `glue::trap`
/// handles once for all threads. `insn` is the guest instruction if the program
/// interrupt's fast tier already fetched it.
pub fn guest_trap(k: &mut Kernel, cur: usize, vi: usize, vec: u32, f: &mut TrapFrame, insn: Insn) -> Option<usize> {
    let t0 = spr::timebase();
    let mut tp = None;
    let hint = match vec {
        vector::SYSCALL => {
            // `sc` in the guest: reflect the system call into the guest kernel.
            let pc = f.regs.ip;
            inject(k, vi, f, 8, Class::NonCritical, pc);
            tp = Some(TracePoint::ExceptSyscall);
            None
        }
        vector::PROGRAM => {
            let e = spr::read::<{ spr::ESR }>();
            if e & esr::PPR != 0 {
                let (h, t) = privileged(k, cur, vi, f, insn);
                tp = t;
                h
            } else {
                // Illegal instruction or trap: the guest's own business.
                k.vm.vcpus[vi].s.esr = e;
                let pc = f.regs.ip;
                inject(k, vi, f, 6, Class::NonCritical, pc);
                tp = Some(TracePoint::ExceptReflect);
                None
            }
        }
        vector::DTLB_MISS | vector::DSI => {
            let ea = spr::read::<{ spr::DEAR }>();
            let e = spr::read::<{ spr::ESR }>();
            let access = if e & esr::ST != 0 { Access::Write } else { Access::Read };
            mmu::tlb_fault(k, cur, vi, f, ea, access, e)
        }
        vector::ITLB_MISS | vector::ISI => {
            let ea = f.regs.ip;
            mmu::tlb_fault(k, cur, vi, f, ea, Access::Execute, 0)
        }
        vector::ALIGNMENT => {
            // QEMU's 440 sets DEAR but leaves ESR alone on alignment interrupts.
            k.vm.vcpus[vi].s.dear = spr::read::<{ spr::DEAR }>();
            let pc = f.regs.ip;
            inject(k, vi, f, 5, Class::NonCritical, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::FP_UNAVAILABLE if k.vm.vcpus[vi].s.msr & msr::FP != 0 => {
            // The guest enabled its FPU: hand it the real one (lazily switched).
            take_fpu(k, vi);
            sync_frame_msr(k, vi, f);
            None
        }
        vector::FP_UNAVAILABLE | vector::AP_UNAVAILABLE => {
            let pc = f.regs.ip;
            inject(k, vi, f, vec as usize, Class::NonCritical, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::DEBUG => {
            // A hardware debug event the guest asked for (see DBCR0_EVENTS).
            let dbsr = spr::read::<{ spr::DBSR }>();
            spr::write::<{ spr::DBSR }>(dbsr);
            k.vm.vcpus[vi].s.dbsr |= dbsr & DBSR_ICMP;
            let pc = f.regs.ip;
            inject(k, vi, f, 15, Class::Critical, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        _ => {
            let pc = f.regs.ip;
            let insn = mmu::guest_read_u32(k, vi, pc, true).unwrap_or(0);
            virt_fault(k, cur, vi, VirtFault::Halt, insn, vec as u64)
        }
    };
    if let Some(tp) = tp {
        let cost = spr::timebase().saturating_sub(t0).min(u32::MAX as u64) as u32;
        trace(k, vi, tp, cost);
    }
    hint
}

/// Called last on every kernel entry from vCPU thread `cur`, after the guest exception
/// or host event was handled: delivers the virtual interrupts the guest can now take,
/// if the vCPU is still the one to resume.
#[inline(always)]
pub fn leave(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) {
    if k.current == cur && k.threads[cur].runnable() {
        if let Some(tp) = deliver_pending(k, vi, f) {
            trace(k, vi, tp, 0);
        }
    }
}

fn rs(insn: u32) -> usize {
    ((insn >> 21) & 31) as usize
}
fn ra(insn: u32) -> usize {
    ((insn >> 16) & 31) as usize
}
fn rb(insn: u32) -> usize {
    ((insn >> 11) & 31) as usize
}
/// The swapped 10-bit SPR/DCR field.
fn sprn(insn: u32) -> u32 {
    ((insn >> 16) & 31) | (((insn >> 11) & 31) << 5)
}

/// A privileged-instruction program exception: emulate or send to the VMM.
fn privileged(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame, insn: Insn) -> (Option<usize>, Option<TracePoint>) {
    let pc = f.regs.ip;
    if k.vm.vcpus[vi].s.msr & msr::PR != 0 {
        // A privileged instruction in guest user mode: the guest kernel's business.
        k.vm.vcpus[vi].s.esr = esr::PPR;
        inject(k, vi, f, 6, Class::NonCritical, pc);
        return (None, Some(TracePoint::ExceptReflect));
    }
    let insn = match insn {
        Insn::Fetched(i) => Some(i),
        Insn::Unreadable => None,
        Insn::Unknown => mmu::guest_fetch(k, vi, pc),
    };
    let Some(insn) = insn else {
        return (virt_fault(k, cur, vi, VirtFault::Instruction, 0, 0), Some(TracePoint::SyscallIpc));
    };
    let op = insn >> 26;
    let xo = (insn >> 1) & 0x3ff;
    let next = pc.wrapping_add(4);
    let tp = match (op, xo) {
        (31, 83) => {
            // mfmsr
            f.regs.gpr[rs(insn)] = k.vm.vcpus[vi].s.msr;
            TracePoint::EmulMfmsr
        }
        (31, 146) => {
            // mtmsr
            let v = f.regs.gpr[rs(insn)];
            if !set_msr(k, cur, vi, f, v, next) {
                return (virt_fault(k, cur, vi, VirtFault::Idle, insn, 0), Some(TracePoint::GuestIdle));
            }
            return (None, Some(TracePoint::EmulMtmsr));
        }
        (31, 131) => {
            // wrtee
            let s = &mut k.vm.vcpus[vi].s;
            s.msr = (s.msr & !msr::EE) | (f.regs.gpr[rs(insn)] & msr::EE);
            TracePoint::EmulWrtee
        }
        (31, 163) => {
            // wrteei: E is bit 16.
            let s = &mut k.vm.vcpus[vi].s;
            s.msr = (s.msr & !msr::EE) | if insn & 0x8000 != 0 { msr::EE } else { 0 };
            TracePoint::EmulWrteei
        }
        (31, 339) => {
            // mfspr
            match read_spr(k, vi, sprn(insn)) {
                Some(v) => f.regs.gpr[rs(insn)] = v,
                None => return (virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0), Some(TracePoint::SyscallIpc)),
            }
            TracePoint::EmulMfspr
        }
        (31, 467) => {
            // mtspr
            let v = f.regs.gpr[rs(insn)];
            match write_spr(k, vi, sprn(insn), v) {
                SprWrite::Done => sync_frame_msr(k, vi, f),
                SprWrite::Unknown => {
                    return (virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0), Some(TracePoint::SyscallIpc))
                }
                SprWrite::Reset => {
                    return (virt_fault(k, cur, vi, VirtFault::Halt, insn, 0), Some(TracePoint::SyscallIpc))
                }
            }
            TracePoint::EmulMtspr
        }
        (31, 978) => {
            // tlbwe RS,RA,WS
            let (index, word, value) = (f.regs.gpr[ra(insn)], rb(insn) as u32, f.regs.gpr[rs(insn)]);
            if mmu::guest_tlbwe(k, vi, index, word, value).is_err() {
                return reflect_illegal(k, vi, f);
            }
            TracePoint::EmulTlbwe
        }
        (31, 946) => {
            // tlbre RT,RA,WS
            let (index, word) = (f.regs.gpr[ra(insn)], rb(insn) as u32);
            let mmucr = k.vm.vcpus[vi].s.mmucr;
            match k.vm.vcpus[vi].tlb.tlbre(index, word, mmucr) {
                Ok((v, new_mmucr)) => {
                    f.regs.gpr[rs(insn)] = v;
                    if let Some(m) = new_mmucr {
                        k.vm.vcpus[vi].s.mmucr = m;
                    }
                }
                Err(_) => return reflect_illegal(k, vi, f),
            }
            TracePoint::EmulTlbre
        }
        (31, 914) => {
            // tlbsx[.] RT,RA,RB
            let ea = if ra(insn) == 0 { 0 } else { f.regs.gpr[ra(insn)] }.wrapping_add(f.regs.gpr[rb(insn)]);
            let hit = k.vm.vcpus[vi].tlb.tlbsx(ea, k.vm.vcpus[vi].s.mmucr);
            if let Some(i) = hit {
                f.regs.gpr[rs(insn)] = i;
            }
            if insn & 1 != 0 {
                // CR0 = LT GT EQ SO: EQ set on a hit, SO copied from XER[SO].
                let so = (f.regs.xer >> 31) & 1;
                let cr0 = if hit.is_some() { 0b0010 } else { 0 } | so;
                f.regs.cr = (f.regs.cr & 0x0fff_ffff) | (cr0 << 28);
            }
            TracePoint::EmulTlbsx
        }
        (31, 566) | (31, 454) | (31, 966) | (31, 470) => {
            // tlbsync, dccci, iccci, dcbi: no guest-visible effect under emulation
            // (the emulated TLB is coherent, QEMU has no caches to model).
            TracePoint::EmulCacheTlbOp
        }
        (19, 50) => {
            // rfi
            let (pc, m) = (k.vm.vcpus[vi].s.srr0, k.vm.vcpus[vi].s.srr1);
            if !set_msr(k, cur, vi, f, m, pc) {
                return (virt_fault(k, cur, vi, VirtFault::Idle, insn, 0), Some(TracePoint::GuestIdle));
            }
            return (None, Some(TracePoint::EmulRfi));
        }
        (19, 51) | (19, 38) => {
            // rfci / rfmci
            let (pc, m) = if xo == 51 {
                (k.vm.vcpus[vi].s.csrr0, k.vm.vcpus[vi].s.csrr1)
            } else {
                (k.vm.vcpus[vi].s.mcsrr0, k.vm.vcpus[vi].s.mcsrr1)
            };
            if !set_msr(k, cur, vi, f, m, pc) {
                return (virt_fault(k, cur, vi, VirtFault::Idle, insn, 0), Some(TracePoint::GuestIdle));
            }
            return (None, Some(TracePoint::EmulRfciMci));
        }
        _ => return (virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0), Some(TracePoint::SyscallIpc)),
    };
    f.regs.ip = next;
    (None, Some(tp))
}

/// An emulated instruction with invalid operands: the guest gets an illegal-instruction
/// program exception, as on hardware.
fn reflect_illegal(k: &mut Kernel, vi: usize, f: &mut TrapFrame) -> (Option<usize>, Option<TracePoint>) {
    k.vm.vcpus[vi].s.esr = esr::PIL;
    let pc = f.regs.ip;
    inject(k, vi, f, 6, Class::NonCritical, pc);
    (None, Some(TracePoint::ExceptReflect))
}

/// Installs a new guest MSR and continues at `pc`. Returns false if the guest asked to
/// wait (MSR[WE]) with nothing pending, which the VMM handles.
fn set_msr(k: &mut Kernel, _cur: usize, vi: usize, f: &mut TrapFrame, value: u32, pc: u32) -> bool {
    let old = k.vm.vcpus[vi].s.msr;
    k.vm.vcpus[vi].s.msr = value & GUEST_MSR_MASK & !msr::WE;
    set_guest_mode(k, vi, old, f);
    f.regs.ip = pc;
    if value & msr::WE != 0 {
        update_dec(k, vi);
        let s = &k.vm.vcpus[vi].s;
        let pending = s.irq_line != 0 || (s.tsr & TSR_DIS != 0 && s.tcr & TCR_DIE != 0);
        return pending;
    }
    true
}

/// Reads a shadow SPR; `None` for SPRs the kernel does not emulate.
fn read_spr(k: &mut Kernel, vi: usize, n: u32) -> Option<u32> {
    update_dec(k, vi);
    let v = &k.vm.vcpus[vi];
    let s = &v.s;
    Some(match n {
        26 => s.srr0,
        27 => s.srr1,
        58 => s.csrr0,
        59 => s.csrr1,
        570 => s.mcsrr0,
        571 => s.mcsrr1,
        572 => s.mcsr,
        272..=279 => s.sprg[(n - 272) as usize],
        256 => s.usprg0,
        62 => s.esr,
        61 => s.dear,
        63 => s.ivpr,
        400..=415 => s.ivor[(n - 400) as usize],
        48 => s.pid,
        946 => s.mmucr,
        22 => {
            if v.dec_deadline != 0 {
                v.dec_deadline.saturating_sub(spr::timebase()) as u32
            } else {
                s.dec
            }
        }
        54 => s.decar,
        340 => s.tcr,
        336 => s.tsr,
        308 => s.dbcr0,
        309 => s.dbcr1,
        310 => s.dbcr2,
        304 => s.dbsr,
        947 => s.ccr0,
        888 => s.ccr1,
        287 => spr::read::<{ spr::PVR }>(),
        286 => 0, // PIR: uniprocessor guests are CPU 0
        312..=315 => s.iac[(n - 312) as usize],
        316 | 317 => s.dac[(n - 316) as usize],
        318 | 319 => s.dvc[(n - 318) as usize],
        268 => spr::read::<{ spr::TBL_R }>(),
        269 => spr::read::<{ spr::TBU_R }>(),
        _ => return None,
    })
}

enum SprWrite {
    Done,
    Unknown,
    Reset,
}

/// mtspr SPRG0-7 (`n` in 272..=279): the shadow copy; SPRG4-7 are user-readable, so
/// they also go to the real registers, which the guest reads without trapping.
pub(super) fn write_sprg(s: &mut kestrel_abi::VcpuState, n: u32, val: u32) {
    s.sprg[(n - 272) as usize & 7] = val;
    match n {
        276 => spr::write::<{ spr::SPRG4W }>(val),
        277 => spr::write::<{ spr::SPRG4W + 1 }>(val),
        278 => spr::write::<{ spr::SPRG4W + 2 }>(val),
        279 => spr::write::<{ spr::SPRG4W + 3 }>(val),
        _ => {}
    }
}

/// mtspr PID: a guest address-space switch drops every shadow entry but the guest's
/// global (TID 0) ones that stay its first match (Linux with KUAP does this around
/// every kernel entry and user access).
pub(super) fn write_pid(k: &mut Kernel, vi: usize, val: u32) {
    let s = &mut k.vm.vcpus[vi].s;
    if s.pid != val & 0xff {
        s.pid = val & 0xff;
        mmu::guest_pid_switch(k, vi);
    }
}

/// Writes a shadow SPR.
fn write_spr(k: &mut Kernel, vi: usize, n: u32, val: u32) -> SprWrite {
    update_dec(k, vi);
    let v = &mut k.vm.vcpus[vi];
    let s = &mut v.s;
    match n {
        26 => s.srr0 = val,
        27 => s.srr1 = val,
        58 => s.csrr0 = val,
        59 => s.csrr1 = val,
        570 => s.mcsrr0 = val,
        571 => s.mcsrr1 = val,
        572 => s.mcsr &= !val,
        272..=279 => write_sprg(s, n, val),
        62 => s.esr = val,
        61 => s.dear = val,
        63 => s.ivpr = val & 0xffff_0000,
        400..=415 => s.ivor[(n - 400) as usize] = val & 0xfff0,
        48 => write_pid(k, vi, val),
        946 => s.mmucr = val,
        22 => {
            s.dec = val;
            v.dec_deadline = if val == 0 { 0 } else { spr::timebase() + val as u64 };
        }
        54 => s.decar = val,
        340 => s.tcr = val,
        336 => s.tsr &= !val,
        308 => {
            if val & DBCR0_RST != 0 {
                return SprWrite::Reset;
            }
            s.dbcr0 = val;
            let events = if val & DBCR0_ICMP != 0 { val & DBCR0_EVENTS } else { 0 };
            spr::write::<{ spr::DBCR0 }>(events);
        }
        312..=315 => s.iac[(n - 312) as usize] = val,
        316 | 317 => s.dac[(n - 316) as usize] = val,
        318 | 319 => s.dvc[(n - 318) as usize] = val,
        309 => s.dbcr1 = val,
        310 => s.dbcr2 = val,
        304 => s.dbsr &= !val,
        947 => s.ccr0 = val,
        888 => s.ccr1 = val,
        // Timebase writes: the guest reads the timebase without trapping, so the real
        // one is written and the difference kept as this vCPU's offset, which is taken
        // out again whenever anything else runs (see `virt::on_switch`).
        284 | 285 => {
            let before = spr::timebase();
            let after = if n == 284 {
                (before & !0xffff_ffff) | val as u64
            } else {
                ((val as u64) << 32) | (before & 0xffff_ffff)
            };
            set_timebase(after);
            v.tb_offset = v.tb_offset.wrapping_add(after.wrapping_sub(before) as i64);
            // Deadlines of the virtual decrementer are in guest time: shift them along.
            if v.dec_deadline != 0 {
                v.dec_deadline = v.dec_deadline.wrapping_add(after.wrapping_sub(before));
            }
            k.vm.tb_vcpu = vi as u8;
        }
        _ => return SprWrite::Unknown,
    }
    SprWrite::Done
}

/// Gives vCPU `vi` the real FPU, saving the previous owner's registers.
fn take_fpu(k: &mut Kernel, vi: usize) {
    if k.vm.fp_owner == vi as u8 {
        return;
    }
    if k.vm.fp_owner != NO_VCPU {
        let prev = k.vm.fp_owner as usize;
        crate::arch::fpu::save(&mut k.vm.vcpus[prev].fpr);
        // The previous owner's frame must trap on its next FP instruction.
        let t = k.vm.vcpus[prev].thread;
        crate::api::frame_of(k, t).regs.msr &= !msr::FP;
    }
    crate::arch::fpu::load(&k.vm.vcpus[vi].fpr);
    k.vm.fp_owner = vi as u8;
}
