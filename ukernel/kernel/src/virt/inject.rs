//! Guest interrupts: the entry into one (`kestrel_guestcpu::msr::interrupt`'s semantics,
//! applied here), the hardware side of every guest MSR change, and the delivery of the
//! virtual interrupts that are pending when the kernel returns to the guest.

use super::mmu;
use super::pv;
use super::vcpu::{sync_frame_msr, update_dec};
use crate::api::Kernel;
use crate::arch::{spr, TrapFrame};
use kestrel_abi::TracePoint;
use kestrel_guestcpu::msr::{self as gmsr, MsrWrite};

/// Injects exception `vector` into the guest: saves pc/MSR in the save/restore pair of
/// the vector's class (Book E "Interrupt Classes"), updates the guest MSR as the
/// hardware would, and continues at IVPR | IVORn.
pub fn inject(k: &mut Kernel, vi: usize, f: &mut TrapFrame, vector: u32, pc: u32) {
    let v = &mut k.vm.vcpus[vi];
    // An interrupt drops the reservation, as on the hardware (split's single-stepping).
    v.resv = 0;
    v.step = 0;
    let (target, w) = gmsr::interrupt(&mut v.s, vector, pc);
    f.regs.ip = target;
    apply_msr(k, vi, w, f);
}

/// The guest MSR changed (`w`, already in the state): load the hardware TID of the guest's
/// PID in its new mode, drop the vCPU's shadow entries when its translation space
/// changes, and recompute the real MSR.
pub fn apply_msr(k: &mut Kernel, vi: usize, w: MsrWrite, f: &mut TrapFrame) {
    if w.privilege_changed() {
        spr::write::<{ ppc440::spr::PID }>(mmu::current_hw_pid(&k.vm.vcpus[vi]));
    }
    if w.space_changed() {
        mmu::flush_vcpu(k, vi);
    }
    sync_frame_msr(k, vi, f);
}

/// Delivers the pending virtual interrupt the guest can take now, if any
/// (`kestrel_guestcpu::msr::deliverable`), unless the guest's patched code is in a
/// critical section (pv.rs); returns the injection's trace point.
pub fn deliver_pending(k: &mut Kernel, vi: usize, f: &mut TrapFrame) -> Option<TracePoint> {
    update_dec(k, vi);
    if pv::in_critical(k, vi, f) {
        // The guest's patched code is between its magic-page loads and stores.
        return None;
    }
    let (vector, tp) = gmsr::deliverable(&k.vm.vcpus[vi].s)?;
    let pc = f.regs.ip;
    inject(k, vi, f, vector, pc);
    Some(tp)
}
