//! The one interface from the L4 core to virtualization.
//!
//! The core knows that some threads are vCPUs (`Tcb::vcpu` is an index, `NO_VCPU` for
//! native threads) and that a fault IPC may be a virtualization fault; everything a vCPU
//! means beyond that lives in `crate::virt`, which implements [`Virtualization`]. The
//! core calls virtualization only through the functions below, each from one place:
//!
//! | hook                     | called from                                   |
//! |--------------------------|-----------------------------------------------|
//! | [`create_vcpu`]          | `thread::create_vcpu` (ThreadControl)         |
//! | [`delete_vcpu`]          | `thread::delete`                              |
//! | [`fault_reply`]          | `ipc::transfer` (reply to a `VirtFault` IPC)  |
//! | [`fault_delivered`]      | `ipc::transfer` (a `VirtFault` message sent)  |
//! | [`host_mapping_revoked`] | `space::revoke_node`                          |
//! | [`guest_tid_evicted`]    | `space::grant_tid` (the TID pool ran dry)     |
//! | [`vcpu_control`], [`trace_control`] | `syscall::dispatch`                |
//! | [`release_fpu`]          | `fpu::take` (a native thread takes the FPU)   |
//!
//! Dependency rule: `api` never names `crate::virt`; the implementation is bound once, by
//! the crate root's `Virtualization` type (the way Pistachio's build binds a glue header to
//! one implementation). Static dispatch: every hook inlines as a direct call.

use super::Kernel;
use kestrel_abi::{KError, MsgTag, ThreadId, Utcb, REG_MRS};

/// What virtualization provides to the core.
pub trait Virtualization {
    /// Its state, kept in `Kernel::vm` (so one `&mut Kernel` reaches everything).
    type State;
    /// The state at boot.
    const INIT: Self::State;
    /// Makes the freshly installed thread slot `i` a vCPU.
    fn create_vcpu(k: &mut Kernel, i: usize) -> Result<(), KError>;
    /// Releases the vCPU of thread slot `i`, which is being deleted.
    fn delete_vcpu(k: &mut Kernel, i: usize);
    /// Applies the VMM's reply (`regs` = MR0..MR6 from registers, `sender` = the
    /// replier's UTCB: message registers and FP transfer area) to vCPU thread `d`; false
    /// if the reply stops it.
    fn fault_reply(
        k: &mut Kernel,
        d: usize,
        tag: MsgTag,
        regs: &[u32; REG_MRS],
        sender: &Utcb,
    ) -> bool;
    /// The fault message of vCPU thread `s` was delivered to `d` (its message registers
    /// are copied): deliver what rides outside them (the FP transfer area).
    fn fault_delivered(k: &mut Kernel, s: usize, d: usize);
    /// A mapping of a VM space was revoked: translations derived from it must go.
    fn host_mapping_revoked(k: &mut Kernel);
    /// The hardware TID `tid` of guest owner `owner` (`kcore::pid::guest_owner`) was
    /// taken for another owner: forget it (the core flushes its TLB entries).
    fn guest_tid_evicted(k: &mut Kernel, owner: u16, tid: u8);
    /// The `VcpuControl` system call of thread `cur`.
    fn vcpu_control(k: &mut Kernel, cur: usize, args: &[u32; 5]) -> Result<(), KError>;
    /// The `TraceControl` system call of thread `cur`.
    fn trace_control(k: &mut Kernel, cur: usize, op: u32, who: ThreadId) -> Result<(), KError>;
    /// A native thread takes the FPU: save a vCPU's registers from it, if one owns it.
    fn release_fpu(k: &mut Kernel);
}

/// The state type of the bound implementation.
pub type VmState = <crate::Virtualization as Virtualization>::State;
/// [`Virtualization::INIT`] of the bound implementation.
pub const VM_INIT: VmState = <crate::Virtualization as Virtualization>::INIT;

#[inline(always)]
pub fn create_vcpu(k: &mut Kernel, i: usize) -> Result<(), KError> {
    <crate::Virtualization as Virtualization>::create_vcpu(k, i)
}

#[inline(always)]
pub fn delete_vcpu(k: &mut Kernel, i: usize) {
    <crate::Virtualization as Virtualization>::delete_vcpu(k, i)
}

#[inline(always)]
pub fn fault_reply(
    k: &mut Kernel,
    d: usize,
    tag: MsgTag,
    regs: &[u32; REG_MRS],
    sender: &Utcb,
) -> bool {
    <crate::Virtualization as Virtualization>::fault_reply(k, d, tag, regs, sender)
}

#[inline(always)]
pub fn fault_delivered(k: &mut Kernel, s: usize, d: usize) {
    <crate::Virtualization as Virtualization>::fault_delivered(k, s, d)
}

#[inline(always)]
pub fn host_mapping_revoked(k: &mut Kernel) {
    <crate::Virtualization as Virtualization>::host_mapping_revoked(k)
}

#[inline(always)]
pub fn vcpu_control(k: &mut Kernel, cur: usize, args: &[u32; 5]) -> Result<(), KError> {
    <crate::Virtualization as Virtualization>::vcpu_control(k, cur, args)
}

#[inline(always)]
pub fn trace_control(k: &mut Kernel, cur: usize, op: u32, who: ThreadId) -> Result<(), KError> {
    <crate::Virtualization as Virtualization>::trace_control(k, cur, op, who)
}

#[inline(always)]
pub fn guest_tid_evicted(k: &mut Kernel, owner: u16, tid: u8) {
    <crate::Virtualization as Virtualization>::guest_tid_evicted(k, owner, tid)
}

#[inline(always)]
pub fn release_fpu(k: &mut Kernel) {
    <crate::Virtualization as Virtualization>::release_fpu(k)
}
