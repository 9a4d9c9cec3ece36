//! The emulation fast path: the hottest privileged instructions of a guest kernel
//! (mfmsr, mtmsr, wrtee, wrteei, rfi within one translation space, and mfspr/mtspr of
//! plain shadow registers) handled straight from the program-interrupt entry, before
//! the general dispatcher. Anything with a side effect beyond a register copy (timers,
//! PID, TLB, a possibly pending interrupt) returns `None` and takes the full path in
//! `emulate.rs`, which has the same semantics; this file only has to be fast and
//! obviously equivalent.

use super::{mmu, NO_VCPU, VCPU_MSR};
use crate::arch::{esr, msr, spr, TrapFrame};
use crate::generic::kernel;
use kestrel_abi::TracePoint;

/// MSR bits a fast-path MSR write may not change (they need the full path: a new
/// translation space flushes the shadow TLB; FP/DE change the real MSR).
const SLOW_MSR_BITS: u32 = msr::IS | msr::DS | msr::FP | msr::DE | msr::WE;

#[inline(never)]
pub fn program(frame: *mut TrapFrame) -> Option<*mut TrapFrame> {
    let k = kernel();
    let cur = k.current;
    let vi = k.threads.get(cur)?.vcpu;
    if vi == NO_VCPU {
        return None;
    }
    let vi = vi as usize;
    // SAFETY: the entry path passes the frame it has just filled.
    let f = unsafe { &mut *frame };
    if f.regs.msr & VCPU_MSR != VCPU_MSR || spr::read::<{ spr::ESR }>() & esr::PPR == 0 {
        return None;
    }
    let t0 = spr::read::<{ spr::TBL_R }>();
    let old = k.vcpus[vi].s.msr;
    if old & msr::PR != 0 {
        return None;
    }
    let pc = f.regs.ip;
    let insn = mmu::guest_fetch(k, vi, pc)?;
    let rs = ((insn >> 21) & 31) as usize;
    let (new_msr, next, tp) = match (insn >> 26, (insn >> 1) & 0x3ff) {
        (31, 83) => {
            f.regs.gpr[rs] = old;
            (old, pc + 4, TracePoint::EmulMfmsr)
        }
        (31, 146) => (f.regs.gpr[rs] & super::GUEST_MSR_MASK, pc + 4, TracePoint::EmulMtmsr),
        (31, 131) => ((old & !msr::EE) | (f.regs.gpr[rs] & msr::EE), pc + 4, TracePoint::EmulWrtee),
        (31, 163) => ((old & !msr::EE) | if insn & 0x8000 != 0 { msr::EE } else { 0 }, pc + 4, TracePoint::EmulWrteei),
        (19, 50) => {
            let s = &k.vcpus[vi].s;
            (s.srr1 & super::GUEST_MSR_MASK, s.srr0, TracePoint::EmulRfi)
        }
        (31, 339) => {
            let v = plain_spr(&mut k.vcpus[vi].s, sprn(insn))?;
            f.regs.gpr[rs] = *v;
            (old, pc + 4, TracePoint::EmulMfspr)
        }
        (31, 467) => {
            let val = f.regs.gpr[rs];
            let v = plain_spr(&mut k.vcpus[vi].s, sprn(insn))?;
            *v = val;
            (old, pc + 4, TracePoint::EmulMtspr)
        }
        _ => return None,
    };
    if (new_msr ^ old) & SLOW_MSR_BITS != 0 {
        return None;
    }
    // Enabling interrupts with one possibly pending: let the full path deliver it.
    if new_msr & !old & (msr::EE | msr::CE) != 0 && maybe_pending(&k.vcpus[vi].s, k.vcpus[vi].dec_deadline) {
        return None;
    }
    k.vcpus[vi].s.msr = new_msr;
    if (new_msr ^ old) & msr::PR != 0 {
        spr::write::<{ spr::PID }>(kestrel_vtlb::hw_pid(new_msr & msr::PR != 0) as u32);
    }
    f.regs.ip = next;
    // QEMU leaves stray bits (even MSR[WE]) in SRR1 on program interrupts: resume
    // with the vCPU's real MSR, never with what the interrupt saved.
    super::sync_frame_msr(k, vi, f);
    let cost = spr::read::<{ spr::TBL_R }>().wrapping_sub(t0);
    super::trace(k, vi, tp, cost);
    Some(frame)
}

/// The swapped 10-bit SPR field.
fn sprn(insn: u32) -> u32 {
    ((insn >> 16) & 31) | (((insn >> 11) & 31) << 5)
}

/// Shadow SPRs whose reads and writes are plain copies (no side effects).
fn plain_spr(s: &mut kestrel_abi::VcpuState, n: u32) -> Option<&mut u32> {
    Some(match n {
        26 => &mut s.srr0,
        27 => &mut s.srr1,
        58 => &mut s.csrr0,
        59 => &mut s.csrr1,
        570 => &mut s.mcsrr0,
        571 => &mut s.mcsrr1,
        272..=275 => &mut s.sprg[(n - 272) as usize],
        62 => &mut s.esr,
        61 => &mut s.dear,
        946 => &mut s.mmucr,
        _ => return None,
    })
}

/// Whether an interrupt could become deliverable when the guest enables interrupts.
fn maybe_pending(s: &kestrel_abi::VcpuState, dec_deadline: Option<u64>) -> bool {
    s.irq_line != 0
        || s.crit_line != 0
        || s.tsr & (super::emulate::TSR_DIS | super::emulate::TSR_FIS | super::emulate::TSR_WIS) != 0
        || s.tcr & (super::emulate::TCR_FIE | super::emulate::TCR_WIE) != 0
        || matches!(dec_deadline, Some(d) if d <= spr::timebase())
}
