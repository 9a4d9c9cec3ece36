//! The guest's MSR: `mtmsr`, `wrtee`, `wrteei`, the returns from interrupt (`rfi`, `rfci`,
//! `rfmci`), the entry into an interrupt (Book E "Interrupt Classes"), which virtual
//! interrupts are pending or deliverable, and the real MSR a vCPU runs with.
//!
//! Each MSR change returns an [`MsrWrite`] (old and new MSR, whether the guest asked to
//! wait): the kernel loads the PID register when MSR[PR] changes, drops the vCPU's shadow
//! entries when MSR[IS] or MSR[DS] changes, and recomputes the real MSR.

use crate::ppc440::ivor::{self, Class};
use crate::ppc440::{msr, tcr, tsr};
use crate::spr::DBCR0_EVENTS;
use kestrel_abi::{TracePoint, VcpuState};

/// Guest MSR bits the kernel keeps (Book E MSR; everything else reads as 0).
pub const GUEST_MSR_MASK: u32 = msr::IMPLEMENTED;

/// The real MSR a vCPU runs with: problem state in translation space 1, interrupts and
/// machine checks on, plus FP and DE as [`real_msr`] says.
pub const VCPU_MSR: u32 = msr::PR | msr::EE | msr::ME | msr::IS | msr::DS;

/// A change of the guest MSR (already in the state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct MsrWrite {
    pub old: u32,
    pub new: u32,
    /// The guest set MSR[WE]: it waits unless an interrupt is pending
    /// ([`wakeup_pending`]); the stored MSR never has WE.
    pub wait: bool,
}

impl MsrWrite {
    /// Guest kernel <-> user: the PID register gets the TID of the other mode.
    #[inline(always)]
    pub const fn privilege_changed(&self) -> bool {
        (self.old ^ self.new) & msr::PR != 0
    }

    /// MSR[IS] or MSR[DS] changed: the vCPU's shadow entries go.
    #[inline(always)]
    pub const fn space_changed(&self) -> bool {
        (self.old ^ self.new) & (msr::IS | msr::DS) != 0
    }

    /// MSR[EE] or MSR[CE] turned on: an interrupt may be pending ([`maybe_pending`]), which
    /// the kernel delivers before it returns to the guest.
    #[inline(always)]
    pub const fn enables_interrupts(&self) -> bool {
        enables_interrupts(self.old, self.new)
    }
}

/// Whether the MSR change from `old` to `new` turns MSR[EE] or MSR[CE] on.
#[inline(always)]
pub const fn enables_interrupts(old: u32, new: u32) -> bool {
    new & !old & (msr::EE | msr::CE) != 0
}

/// Installs `value` as the guest MSR (masked, WE taken out as a request to wait).
#[inline(always)]
fn install(s: &mut VcpuState, value: u32) -> MsrWrite {
    let old = s.msr;
    s.msr = value & GUEST_MSR_MASK & !msr::WE;
    MsrWrite {
        old,
        new: s.msr,
        wait: value & msr::WE != 0,
    }
}

/// `mtmsr RS` with (RS) = `value`.
#[inline(always)]
pub fn mtmsr(s: &mut VcpuState, value: u32) -> MsrWrite {
    install(s, value)
}

/// `wrtee RS` with (RS) = `value`: MSR[EE] from the same bit of `value`.
#[inline(always)]
pub fn wrtee(s: &mut VcpuState, value: u32) -> MsrWrite {
    let old = s.msr;
    s.msr = with_ee(old, value & msr::EE != 0);
    MsrWrite {
        old,
        new: s.msr,
        wait: false,
    }
}

/// `wrteei E`.
#[inline(always)]
pub fn wrteei(s: &mut VcpuState, e: bool) -> MsrWrite {
    let old = s.msr;
    s.msr = with_ee(old, e);
    MsrWrite {
        old,
        new: s.msr,
        wait: false,
    }
}

/// `msr` with MSR[EE] = `ee`.
#[inline(always)]
pub const fn with_ee(msr: u32, ee: bool) -> u32 {
    (msr & !msr::EE) | if ee { msr::EE } else { 0 }
}

/// The three returns from interrupt, by the save/restore pair they use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Return {
    /// `rfi`: SRR0/SRR1.
    Rfi,
    /// `rfci`: CSRR0/CSRR1.
    Rfci,
    /// `rfmci`: MCSRR0/MCSRR1.
    Rfmci,
}

/// A return from interrupt: the MSR from the pair's second register; returns the pc to
/// continue at (the pair's first register) and the MSR change.
#[inline(always)]
pub fn return_from(s: &mut VcpuState, kind: Return) -> (u32, MsrWrite) {
    let (pc, m) = match kind {
        Return::Rfi => (s.srr0, s.srr1),
        Return::Rfci => (s.csrr0, s.csrr1),
        Return::Rfmci => (s.mcsrr0, s.mcsrr1),
    };
    (pc, install(s, m))
}

/// Takes interrupt `vector` at `pc` (the instruction to return to): saves pc and MSR in the
/// save/restore pair of the vector's class, clears the MSR bits the class clears, and
/// returns where the guest continues (IVPR | IVORn) and the MSR change. (The kernel also
/// drops its reservation, as the hardware's interrupt would.)
#[inline]
pub fn interrupt(s: &mut VcpuState, vector: u32, pc: u32) -> (u32, MsrWrite) {
    let old = s.msr;
    let mut clear = msr::WE | msr::EE | msr::PR | msr::FP | msr::IS | msr::DS | msr::FE0 | msr::FE1;
    match ivor::class(vector) {
        Class::NonCritical => {
            s.srr0 = pc;
            s.srr1 = old;
        }
        Class::Critical => {
            s.csrr0 = pc;
            s.csrr1 = old;
            clear |= msr::CE | msr::DE;
        }
        Class::MachineCheck => {
            s.mcsrr0 = pc;
            s.mcsrr1 = old;
            clear |= msr::CE | msr::DE | msr::ME;
        }
    }
    s.msr = old & !clear;
    let target =
        (s.ivpr & ivor::PREFIX.mask()) | (s.ivor[vector as usize & 15] & ivor::OFFSET.mask());
    (
        target,
        MsrWrite {
            old,
            new: s.msr,
            wait: false,
        },
    )
}

/// The virtual interrupt the guest takes now, if any (timers brought up to date first), in
/// the order of precedence the kernel delivers them, with the trace point its injection
/// is counted under.
#[inline]
pub fn deliverable(s: &VcpuState) -> Option<(u32, TracePoint)> {
    if s.tsr & tsr::WIS != 0 && s.tcr & tcr::WIE != 0 && s.msr & msr::CE != 0 {
        return Some((ivor::WATCHDOG, TracePoint::ExceptFitWdt));
    }
    if s.crit_line != 0 && s.msr & msr::CE != 0 {
        return Some((ivor::CRITICAL, TracePoint::ExceptExternal));
    }
    if s.msr & msr::EE == 0 {
        return None;
    }
    if s.irq_line != 0 {
        return Some((ivor::EXTERNAL, TracePoint::ExceptExternal));
    }
    if s.tsr & tsr::DIS != 0 && s.tcr & tcr::DIE != 0 {
        return Some((ivor::DECREMENTER, TracePoint::ExceptDecr));
    }
    if s.tsr & tsr::FIS != 0 && s.tcr & tcr::FIE != 0 {
        return Some((ivor::FIT, TracePoint::ExceptFitWdt));
    }
    None
}

/// Whether a guest that asks to wait (MSR[WE], the `EV_IDLE` hypercall) has an interrupt
/// pending already, so it need not wait (timers brought up to date first).
#[inline]
pub fn wakeup_pending(s: &VcpuState) -> bool {
    s.irq_line != 0 || (s.tsr & tsr::DIS != 0 && s.tcr & tcr::DIE != 0)
}

/// Whether an asynchronous interrupt is pending, masked or not (the paravirtual page's
/// `int_pending`: the guest's patched code then traps when it enables MSR[EE]).
#[inline]
pub fn interrupt_pending(s: &VcpuState) -> bool {
    s.irq_line != 0
        || s.crit_line != 0
        || (s.tsr & tsr::DIS != 0 && s.tcr & tcr::DIE != 0)
        || (s.tsr & tsr::FIS != 0 && s.tcr & tcr::FIE != 0)
        || (s.tsr & tsr::WIS != 0 && s.tcr & tcr::WIE != 0)
}

/// Whether an interrupt could become deliverable when the guest enables interrupts, with
/// the timers not brought up to date (`now`: the guest's time base): the fast tiers'
/// conservative test, which leaves anything doubtful to the full path.
#[inline(always)]
pub fn maybe_pending(s: &VcpuState, dec_deadline: u64, now: impl FnOnce() -> u64) -> bool {
    s.irq_line != 0
        || s.crit_line != 0
        || s.tsr & (tsr::DIS | tsr::FIS | tsr::WIS) != 0
        || s.tcr & (tcr::FIE | tcr::WIE) != 0
        || (dec_deadline != 0 && dec_deadline <= now())
}

/// Whether the guest asked for the hardware debug events the kernel passes through
/// (MSR[DE] and both of [`DBCR0_EVENTS`]).
#[inline(always)]
pub const fn guest_debug_events(s: &VcpuState) -> bool {
    s.msr & msr::DE != 0 && s.dbcr0 & DBCR0_EVENTS == DBCR0_EVENTS
}

/// The real MSR of a vCPU: [`VCPU_MSR`], plus the guest's FP while it owns the real FPU
/// (`owns_fpu`) and DE while it asked for debug events.
#[inline(always)]
pub const fn real_msr(s: &VcpuState, owns_fpu: bool) -> u32 {
    let mut m = VCPU_MSR;
    if s.msr & msr::FP != 0 && owns_fpu {
        m |= msr::FP;
    }
    if guest_debug_events(s) {
        m |= msr::DE;
    }
    m
}
