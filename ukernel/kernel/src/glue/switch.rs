//! The context switch: makes a thread current and loads its hardware context (the frame
//! pointer the entry code saves into, the PID, the UTCB pointer, and for a vCPU the
//! guest's view of the user-visible SPRs and its timebase).
//!
//! Each kernel exit path calls one of these once, after `api::sched::pick_next`.

use crate::api::{space, thread::NO_VCPU, Kernel, IDLE};
use crate::arch::{spr, TrapFrame};
use crate::virt;

/// Makes `next` the current thread and returns the frame to resume.
#[inline(always)]
pub fn switch_to(k: &mut Kernel, next: usize) -> *mut TrapFrame {
    k.current = next;
    if next != IDLE {
        spr::write::<{ ppc440::spr::SPRG1 }>(k.threads[next].frame as u32);
        let vcpu = k.threads[next].vcpu;
        if vcpu != NO_VCPU {
            virt::on_switch(k, vcpu as usize);
            virt::set_current(Some(&k.vm.vcpus[vcpu as usize]));
        } else {
            virt::set_current(None);
            virt::on_native(k);
            let sid = k.threads[next].space;
            let pid = space::ensure_pid(k, sid);
            spr::write::<{ ppc440::spr::PID }>(pid as u32);
            spr::write::<{ ppc440::spr::SPRG4 }>(k.threads[next].utcb_va);
        }
    }
    k.threads[next].frame as *mut TrapFrame
}

/// [`switch_to`] for a thread known to be native (the IPC fast path: vCPUs never
/// take it, and it never wakes one).
#[inline(always)]
pub fn switch_to_native(k: &mut Kernel, next: usize) -> *mut TrapFrame {
    k.current = next;
    virt::on_native(k);
    virt::set_current(None);
    spr::write::<{ ppc440::spr::SPRG1 }>(k.threads[next].frame as u32);
    let sid = k.threads[next].space;
    let pid = space::ensure_pid(k, sid);
    spr::write::<{ ppc440::spr::PID }>(pid as u32);
    spr::write::<{ ppc440::spr::SPRG4 }>(k.threads[next].utcb_va);
    k.threads[next].frame as *mut TrapFrame
}
