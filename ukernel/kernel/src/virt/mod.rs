//! Virtualization (paper §3): vCPU threads, in-kernel emulation of the hot privileged
//! instructions, the virtual TLB, exception injection, virtualization-fault IPC to the
//! VMM, and the trace points.
//!
//! A vCPU is an ordinary thread whose frame runs with MSR[PR,IS,DS] = 1: the guest's
//! kernel and user both run in problem state in translation space 1, which no native
//! task uses. Its general registers and pc live in the thread's frame like any
//! thread's; everything else the guest sees (its MSR, shadow SPRs, its TLB) lives in a
//! [`Vcpu`]. Hardware TLB entries of guests share the refillable TLB entries with native
//! refills and are tagged with a hardware TID per (vCPU, guest PID, guest mode) from the
//! kernel's one TID pool (`mmu`, docs/adr/0024-tagged-shadow-tlb.md).
//!
//! Dependency rules (docs/adr/0010-kernel-layering.md): `virt` uses `api` (threads,
//! spaces, fault IPC) and `arch`, never `glue`; the L4 core reaches it only through
//! [`Virt`]'s implementation of `api::hooks::Virtualization`, and `glue` calls its trap
//! entry points (`emulate::{enter, guest_trap, leave}`, `fast::program`), `on_switch`,
//! `on_native` and `set_current`.
//!
//! The guest CPU's semantics (what a privileged instruction does to the vCPU's state, and
//! which effects on the machine follow) are the pure crate `kestrel_guestcpu`; the files
//! here apply those effects to the hardware. They form layers, each using only the ones
//! above it in this list (`ukernel/kcore/tests/virt_layers.rs` checks that their imports
//! have no cycle):
//!
//! 1. `vcpu`: the vCPU record, exit accounting, guest time and timers, the real registers
//!    that follow the guest's (real MSR, write-through SPRs), the running vCPU.
//! 2. `mmu`: the shadow TLB (TIDs, fills, flushes), the guest's TLB instructions, the
//!    kernel's reads of guest memory.
//! 3. `pv`: the paravirtual interface (hypercalls, the magic page).
//! 4. `inject`: guest interrupts and the hardware side of MSR changes.
//! 5. `fault`: virtualization-fault IPC and the VMM's reply, reflected guest faults,
//!    guest-physical misses.
//! 6. `split`: data accesses under split translation spaces, performed in software.
//! 7. `emulate`, `fast`, `control`: the trap handler and full emulator, the fast tiers of
//!    the program interrupt, the VMM's `VcpuControl`/`TraceControl`.
//! 8. this file: the module list, the hooks for the L4 core, vCPU creation and deletion,
//!    world switches.

pub mod control;
pub mod emulate;
pub mod fast;
pub mod fault;
pub mod inject;
pub mod mmu;
pub mod pv;
pub mod split;
pub mod vcpu;

pub use vcpu::{
    set_current, sync_frame_msr, vcpu_of, Insn, Vcpu, VmState, GUEST_MSR_MASK, NO_VCPU, NVCPUS,
    VCPU_MSR,
};

use crate::api::{frame_of, hooks::Virtualization, Kernel};
use crate::arch::spr;
use kestrel_abi::{xfer, MsgTag, Utcb, REG_MRS};
use vcpu::{leave_guest_time, merge, set_timebase, TRACE_RETIRED};

/// The implementation of the core's [`Virtualization`] interface.
pub struct Virt;

impl Virtualization for Virt {
    type State = VmState;
    const INIT: VmState = VmState {
        vcpus: [Vcpu::EMPTY; NVCPUS],
        tb_vcpu: NO_VCPU,
        fp_owner: NO_VCPU,
    };

    fn create_vcpu(k: &mut Kernel, i: usize) -> Result<(), kestrel_abi::KError> {
        create(k, i)
    }

    fn delete_vcpu(k: &mut Kernel, i: usize) {
        destroy(k, i)
    }

    #[inline(always)]
    fn fault_reply(
        k: &mut Kernel,
        d: usize,
        tag: MsgTag,
        regs: &[u32; REG_MRS],
        sender: &Utcb,
    ) -> bool {
        fault::apply_reply(k, d, tag, regs, sender)
    }

    fn fault_delivered(k: &mut Kernel, s: usize, d: usize) {
        let Some(vi) = vcpu_of(k, s) else { return };
        if k.vm.vcpus[vi].fault_mask & xfer::FPRS != 0 {
            crate::api::thread::utcb(k, d).fp = k.vm.vcpus[vi].fpr;
        }
    }

    fn host_mapping_revoked(k: &mut Kernel) {
        mmu::flush_shadow(k);
    }

    fn guest_tid_evicted(k: &mut Kernel, owner: u16, tid: u8) {
        mmu::guest_tid_evicted(k, owner, tid);
    }

    fn vcpu_control(
        k: &mut Kernel,
        cur: usize,
        args: &[u32; 5],
    ) -> Result<(), kestrel_abi::KError> {
        control::sys_vcpu_control(k, cur, args)
    }

    fn trace_control(
        k: &mut Kernel,
        cur: usize,
        op: u32,
        who: kestrel_abi::ThreadId,
    ) -> Result<(), kestrel_abi::KError> {
        control::sys_trace_control(k, cur, op, who)
    }

    fn release_fpu(k: &mut Kernel) {
        emulate::release_fpu(k);
    }
}

/// Makes thread slot `i` a vCPU (called by ThreadControl on creation).
pub fn create(k: &mut Kernel, i: usize) -> Result<(), kestrel_abi::KError> {
    let vi =
        k.vm.vcpus
            .iter()
            .position(|v| !v.live)
            .ok_or(kestrel_abi::KError::OutOfMemory)?;
    for (tp, c) in k.vm.vcpus[vi].trace.iter().enumerate() {
        // SAFETY: single CPU; only the kernel touches the counters.
        unsafe { merge(&mut (*core::ptr::addr_of_mut!(TRACE_RETIRED))[tp], c) };
    }
    k.vm.vcpus[vi] = Vcpu::EMPTY;
    k.vm.vcpus[vi].live = true;
    k.vm.vcpus[vi].run_tb = crate::arch::spr::read::<{ ppc440::spr::TBL_R }>();
    k.vm.vcpus[vi].thread = i;
    k.threads[i].vcpu = vi as u8;
    let v = &k.vm.vcpus[vi] as *const Vcpu as u32;
    let f = frame_of(k, i);
    f.regs.msr = VCPU_MSR;
    f.vcpu = v;
    Ok(())
}

/// Releases the vCPU of thread slot `i` (thread deletion).
pub fn destroy(k: &mut Kernel, i: usize) {
    if let Some(vi) = vcpu_of(k, i) {
        mmu::release_tids(k, vi);
        if k.vm.tb_vcpu == vi as u8 {
            leave_guest_time(k);
        }
        if k.vm.fp_owner == vi as u8 {
            k.vm.fp_owner = NO_VCPU;
        }
        k.vm.vcpus[vi].live = false;
        k.threads[i].vcpu = NO_VCPU;
        frame_of(k, i).vcpu = 0;
        set_current(None);
    }
}

/// Called when switching to thread `i`: loads the guest's view of the user-readable
/// SPRs and the hardware PID of its guest PID and mode (a world switch flushes nothing:
/// every vCPU's entries carry their own TIDs).
pub fn on_switch(k: &mut Kernel, vi: usize) {
    if k.vm.tb_vcpu != vi as u8 {
        leave_guest_time(k);
        let off = k.vm.vcpus[vi].tb_offset;
        if off != 0 {
            set_timebase(spr::timebase().wrapping_add(off as u64));
        }
        k.vm.tb_vcpu = vi as u8;
    }
    vcpu::load_guest_registers(k, vi);
    spr::write::<{ ppc440::spr::PID }>(mmu::current_hw_pid(&k.vm.vcpus[vi]));
    pv::pv_out(k, vi);
}

/// Leaving all vCPUs (a native thread runs): host time, no guest debug events.
#[inline(always)]
pub fn on_native(k: &mut Kernel) {
    if k.vm.tb_vcpu != NO_VCPU {
        leave_guest(k);
    }
}

#[inline(never)]
fn leave_guest(k: &mut Kernel) {
    leave_guest_time(k);
    spr::write::<{ ppc440::spr::DBCR0 }>(0);
}
