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
//! entry points (`emulate::{enter, guest_trap, leave}`, `fast::program`) and `on_switch`.

pub mod control;
pub mod emulate;
pub mod fast;
pub mod mmu;
pub mod pv;
pub mod split;

use crate::api::{frame_of, hooks::Virtualization, ipc, thread, thread::FaultWait, Kernel};
use crate::arch::{msr, spr, tcr, tsr, vector, TrapFrame};
use core::mem::{offset_of, size_of};
use kestrel_abi::{
    xfer, FaultReply, Inject, MsgTag, TraceCounter, TracePoint, Utcb, VcpuState, VirtFault,
    VirtFaultMsg, XferRegs, XferTlb, NUM_FAULT_CLASSES, NUM_TRACEPOINTS, REG_MRS,
};
use kestrel_vtlb::GuestTlb;
use ppc440::ivor::{self, Class};

/// The guest instruction of a trap, as far as the kernel has read it: fetched once per
/// trap (by the program interrupt's fast tier, or by the emulator) and passed along.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Insn {
    /// Not read yet.
    Unknown,
    Fetched(u32),
    /// The fetch failed (no guest or host translation).
    Unreadable,
}

/// vCPUs the kernel supports at once.
pub const NVCPUS: usize = 8;
/// No vCPU (value of `Tcb::vcpu` for native threads, and of the owner fields below).
pub use crate::api::thread::NO_VCPU;

/// Guest MSR bits the kernel keeps (Book E MSR; everything else reads as 0).
pub const GUEST_MSR_MASK: u32 = ppc440::msr::IMPLEMENTED;

/// The real MSR a vCPU runs with.
pub const VCPU_MSR: u32 = msr::PR | msr::EE | msr::ME | msr::IS | msr::DS;

/// Virtualization's state inside the kernel (`Kernel::vm`).
#[repr(C)]
pub struct VmState {
    /// vCPU records; `Tcb::vcpu` indexes them.
    pub vcpus: [Vcpu; NVCPUS],
    /// The vCPU whose timebase view is loaded (NO_VCPU: host time). The IPC fast path
    /// reads it (`glue::fastpath`).
    pub tb_vcpu: u8,
    /// The vCPU whose floating-point registers are in the FPU (NO_VCPU: none).
    pub fp_owner: u8,
}

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
        apply_reply(k, d, tag, regs, sender)
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
}

/// `repr(C)`: the assembly fast path (`fast.rs`) reads fields at fixed offsets.
#[repr(C)]
pub struct Vcpu {
    pub live: bool,
    /// TCB slot of the vCPU thread.
    pub thread: usize,
    /// The guest's architectural state except GPRs/pc (those live in the frame).
    pub s: VcpuState,
    pub tlb: GuestTlb,
    pub masks: [u32; NUM_FAULT_CLASSES],
    /// Timebase value at which the virtual DEC reaches zero (0: stopped).
    pub dec_deadline: u64,
    /// One-entry cache for the kernel's own instruction fetches: guest page (with
    /// the PID and MSR[IS] it was looked up under) → host page. Cleared whenever the
    /// shadow is flushed or the guest TLB is written.
    /// Guest page | 1 (0: empty) and the host page it maps to.
    pub fetch_page: u32,
    pub fetch_host: u32,
    /// Guest timebase at the last fixed-interval / watchdog check.
    pub timer_tb: u64,
    /// Guest timebase minus host timebase (the guest wrote TBL/TBU).
    pub tb_offset: i64,
    /// Exit accounting (docs/adr/0023-exit-accounting.md), all in this vCPU's time base
    /// (the one loaded whenever it runs; low words): the time of the last return to the
    /// guest (start of the current GUEST_RUN), the kernel-entry time of the exit in
    /// progress, and where that exit's counter is (byte offset of `trace[tp]` in `Vcpu`,
    /// 0: no exit in progress). The return to the guest (`arch::entry`'s exit path,
    /// `__guest_resume`, or the assembly fast path) records the exit and starts the
    /// next GUEST_RUN; a guest time-base write in the exit moves `exit_tb` along.
    pub run_tb: u32,
    pub exit_tb: u32,
    pub exit_at: u32,
    /// The guest's floating-point registers and FPSCR while it does not own the FPU.
    pub fpr: [u64; 33],
    /// Mask, effective address and instruction of the pending virtualization fault
    /// (for injections the reply asks for).
    pub fault_mask: u32,
    pub fault_ea: u32,
    pub fault_insn: u32,
    pub trace: [TraceCounter; NUM_TRACEPOINTS],
    /// The reservation of a `lwarx` the kernel emulated (`split`): its effective address
    /// | 1, or 0; and the instructions left to single-step looking for its `stwcx.` (0:
    /// not stepping). Both go when the guest takes an interrupt. The stepping itself
    /// (DBCR0 events, MSR[DE] in the frame) is set once by `split`; an exit that rewrites
    /// either (a thread switch, an MSR or SPR change) ends it early, which costs the
    /// guest one failed `stwcx.` and a retry, and keeps these hot paths unchanged.
    pub resv: u32,
    pub step: u8,
    /// Whether the page in the fetch cache translates alike under every guest PID
    /// (`GuestTlb::global_for_page`): then a guest PID write keeps the cache.
    pub fetch_global: bool,
    /// The hardware TIDs of the current guest PID in guest kernel mode (`[0]`) and user
    /// mode (`[1]`), 0 while none is allocated: what the PID register holds while the
    /// guest runs in that mode (the assembly fast path loads them on `rfi`/`mtmsr`).
    /// Kept equal to `tids` for `s.pid` by `mmu`.
    pub hw_tid: [u32; 2],
    /// Hardware TID of every (guest PID, mode) (`mmu::tid_key`), 0: none allocated.
    pub tids: [u8; 512],
    /// The paravirtual interface (`pv.rs`).
    pub pv: pv::Pv,
}

impl Vcpu {
    pub const EMPTY: Vcpu = Vcpu {
        live: false,
        thread: 0,
        s: VCPU_STATE_ZERO,
        tlb: GuestTlb::new(),
        masks: [xfer::DEFAULT; NUM_FAULT_CLASSES],
        dec_deadline: 0,
        fetch_page: 0,
        fetch_host: 0,
        timer_tb: 0,
        tb_offset: 0,
        run_tb: 0,
        exit_tb: 0,
        exit_at: 0,
        fpr: [0; 33],
        fault_mask: 0,
        fault_ea: 0,
        fault_insn: 0,
        trace: [TRACE_ZERO; NUM_TRACEPOINTS],
        resv: 0,
        step: 0,
        fetch_global: false,
        hw_tid: [0; 2],
        tids: [0; 512],
        pv: pv::Pv::OFF,
    };
}

const TRACE_ZERO: TraceCounter = TraceCounter::ZERO;
const VCPU_STATE_ZERO: VcpuState = VcpuState {
    gpr: [0; 32],
    cr: 0,
    lr: 0,
    ctr: 0,
    xer: 0,
    pc: 0,
    msr: 0,
    srr0: 0,
    srr1: 0,
    csrr0: 0,
    csrr1: 0,
    mcsrr0: 0,
    mcsrr1: 0,
    sprg: [0; 8],
    usprg0: 0,
    esr: 0,
    dear: 0,
    mcsr: 0,
    ivpr: 0,
    ivor: [0; 16],
    pid: 0,
    mmucr: 0,
    dec: 0,
    decar: 0,
    tcr: 0,
    tsr: 0,
    dbcr0: 0,
    dbcr1: 0,
    dbcr2: 0,
    dbsr: 0,
    ccr0: 0,
    ccr1: 0,
    irq_line: 0,
    crit_line: 0,
    iac: [0; 4],
    dac: [0; 2],
    dvc: [0; 2],
};

/// Counters of vCPU slots that were reused, so the all-VMs view never loses exits.
pub static mut TRACE_RETIRED: [TraceCounter; NUM_TRACEPOINTS] = [TRACE_ZERO; NUM_TRACEPOINTS];

/// Adds `b` into `a` (for the all-VMs view).
pub fn merge(a: &mut TraceCounter, b: &TraceCounter) {
    a.merge(b)
}

/// Byte offset of trace point `tp`'s counter in `Vcpu` (never 0: `Vcpu::exit_at`'s
/// "no exit" value).
pub const fn trace_at(tp: TracePoint) -> u32 {
    (offset_of!(Vcpu, trace) + tp as usize * size_of::<TraceCounter>()) as u32
}
const _: () = assert!(offset_of!(Vcpu, trace) > 0);

/// Starts the accounting of a kernel entry from vCPU `vi`'s guest: the time since the
/// last return to the guest is GUEST_RUN, and the exit (of class `tp` until
/// [`exit_class`] says otherwise) runs from the entry's first instructions
/// (`arch::entry_tb`) to the next return to this guest. Called once per entry.
#[inline(always)]
pub fn exit_begin(k: &mut Kernel, vi: usize, tp: TracePoint) {
    let t0 = crate::arch::entry_tb();
    let v = &mut k.vm.vcpus[vi];
    v.trace[TracePoint::GuestRun as usize].add(t0.wrapping_sub(v.run_tb));
    v.exit_tb = t0;
    v.exit_at = trace_at(tp);
}

/// Sets the class of vCPU `vi`'s exit in progress.
#[inline(always)]
pub fn exit_class(k: &mut Kernel, vi: usize, tp: TracePoint) {
    k.vm.vcpus[vi].exit_at = trace_at(tp);
}

/// An interrupt is injected at the end of vCPU `vi`'s exit in progress, from time `t`
/// on: the exit so far is recorded under its class, and the rest of it (the delivery
/// and the return to the guest) is the injection `tp`'s cost. Each tick of the exit
/// is counted once.
pub fn exit_split(k: &mut Kernel, vi: usize, t: u32, tp: TracePoint) {
    let v = &mut k.vm.vcpus[vi];
    if v.exit_at != 0 {
        let i = (v.exit_at as usize - offset_of!(Vcpu, trace)) / size_of::<TraceCounter>();
        v.trace[i].add(t.wrapping_sub(v.exit_tb));
    }
    v.exit_tb = t;
    v.exit_at = trace_at(tp);
}

/// The vCPU index of thread slot `i`, if it is one.
pub fn vcpu_of(k: &Kernel, i: usize) -> Option<usize> {
    let v = k.threads.get(i)?.vcpu;
    if v == NO_VCPU {
        None
    } else {
        Some(v as usize)
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
        fast::set_current(None);
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
    let s = &k.vm.vcpus[vi].s;
    spr::write::<{ ppc440::spr::DBCR0 }>(guest_dbcr0_events(s));
    spr::write::<{ ppc440::spr::PID }>(mmu::current_hw_pid(&k.vm.vcpus[vi]));
    spr::write::<{ ppc440::spr::SPRG4 }>(s.sprg[4]);
    spr::write::<{ ppc440::spr::SPRG5 }>(s.sprg[5]);
    spr::write::<{ ppc440::spr::SPRG6 }>(s.sprg[6]);
    spr::write::<{ ppc440::spr::SPRG7 }>(s.sprg[7]);
    spr::write::<{ ppc440::spr::USPRG0 }>(s.usprg0);
    pv::pv_out(k, vi);
}

/// The kernel's clock: host time-base ticks, whichever vCPU's guest time the hardware time
/// base holds (`VmState::tb_vcpu`). A guest's TBL/TBU write moves the hardware time base
/// and that vCPU's `tb_offset` by the same amount, so this clock does not jump with it
/// (docs/adr/0014-diagnostics-and-time.md). It only loses the few ticks each
/// `set_timebase` takes, and never goes back. (Exit costs are differences on the running
/// vCPU's own time base, which is loaded whenever it runs; a guest time-base write in an
/// exit moves that exit's start along, `Vcpu::exit_tb`.)
#[inline(always)]
pub fn host_time(k: &Kernel) -> u64 {
    let tb = spr::timebase();
    match k.vm.tb_vcpu {
        NO_VCPU => tb,
        v => tb.wrapping_sub(k.vm.vcpus[v as usize].tb_offset as u64),
    }
}

/// vCPU `vi`'s guest time (what its time base reads now), whatever time is loaded: the
/// virtual timers' deadlines are in it.
#[inline(always)]
pub fn guest_time(k: &Kernel, vi: usize) -> u64 {
    if k.vm.tb_vcpu == vi as u8 {
        return spr::timebase();
    }
    host_time(k).wrapping_add(k.vm.vcpus[vi].tb_offset as u64)
}

/// Writes the 64-bit timebase (TBL first with 0 so no carry can slip in).
pub fn set_timebase(v: u64) {
    spr::write::<{ ppc440::spr::TBL_W }>(0);
    spr::write::<{ ppc440::spr::TBU_W }>((v >> 32) as u32);
    spr::write::<{ ppc440::spr::TBL_W }>(v as u32);
}

/// Switching from guest time (a vCPU whose guest wrote its timebase) back to host time.
pub fn leave_guest_time(k: &mut Kernel) {
    if k.vm.tb_vcpu == NO_VCPU {
        return;
    }
    let off = k.vm.vcpus[k.vm.tb_vcpu as usize].tb_offset;
    if off != 0 {
        set_timebase(spr::timebase().wrapping_sub(off as u64));
    }
    k.vm.tb_vcpu = NO_VCPU;
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

/// Injects exception `vector` into the guest: saves pc/MSR in the save/restore pair of
/// the vector's class (Book E "Interrupt Classes"), updates the guest MSR as the
/// hardware would, and continues at IVPR | IVORn.
pub fn inject(k: &mut Kernel, vi: usize, f: &mut TrapFrame, vector: u32, pc: u32) {
    let v = &mut k.vm.vcpus[vi];
    // An interrupt drops the reservation, as on the hardware (split's single-stepping).
    v.resv = 0;
    v.step = 0;
    let old = v.s.msr;
    let mut clear = msr::WE | msr::EE | msr::PR | msr::FP | msr::IS | msr::DS | msr::FE0 | msr::FE1;
    match ivor::class(vector) {
        Class::NonCritical => {
            v.s.srr0 = pc;
            v.s.srr1 = old;
        }
        Class::Critical => {
            v.s.csrr0 = pc;
            v.s.csrr1 = old;
            clear |= msr::CE | msr::DE;
        }
        Class::MachineCheck => {
            v.s.mcsrr0 = pc;
            v.s.mcsrr1 = old;
            clear |= msr::CE | msr::DE | msr::ME;
        }
    }
    v.s.msr = old & !clear;
    f.regs.ip = (v.s.ivpr & ppc440::ivor::PREFIX.mask())
        | (v.s.ivor[vector as usize & 15] & ppc440::ivor::OFFSET.mask());
    set_guest_mode(k, vi, old, f);
}

/// The guest MSR changed from `old`: load the hardware TID of the guest's PID in its new
/// mode, drop the vCPU's shadow entries when its translation space changes.
pub fn set_guest_mode(k: &mut Kernel, vi: usize, old: u32, f: &mut TrapFrame) {
    let new = k.vm.vcpus[vi].s.msr;
    if (old ^ new) & msr::PR != 0 {
        spr::write::<{ ppc440::spr::PID }>(mmu::current_hw_pid(&k.vm.vcpus[vi]));
    }
    if (old ^ new) & (msr::IS | msr::DS) != 0 {
        mmu::flush_vcpu(k, vi);
    }
    sync_frame_msr(k, vi, f);
}

/// The real MSR of a vCPU: always problem state in translation space 1, plus the
/// guest's FP (only while it owns the FPU) and DE (only while it asked for hardware
/// debug events, which the kernel then routes back to the guest).
#[inline(always)]
pub fn sync_frame_msr(k: &Kernel, vi: usize, f: &mut TrapFrame) {
    let s = &k.vm.vcpus[vi].s;
    let mut m = VCPU_MSR;
    if s.msr & msr::FP != 0 && k.vm.fp_owner == vi as u8 {
        m |= msr::FP;
    }
    if guest_debug_events(s) {
        m |= msr::DE;
    }
    f.regs.msr = m;
}

/// Whether the guest asked for the hardware debug events the kernel passes through.
#[inline(always)]
pub fn guest_debug_events(s: &VcpuState) -> bool {
    s.msr & msr::DE != 0 && s.dbcr0 & emulate::DBCR0_EVENTS == emulate::DBCR0_EVENTS
}

/// The real DBCR0 for the guest's own debug settings (what `on_switch` loads).
pub fn guest_dbcr0_events(s: &VcpuState) -> u32 {
    s.dbcr0 & emulate::DBCR0_EVENTS
}

/// Delivers pending virtual interrupts the guest can take now.
pub fn deliver_pending(k: &mut Kernel, vi: usize, f: &mut TrapFrame) -> Option<TracePoint> {
    update_dec(k, vi);
    if pv::in_critical(k, vi, f) {
        // The guest's patched code is between its magic-page loads and stores.
        return None;
    }
    let s = &k.vm.vcpus[vi].s;
    if s.tsr & tsr::WIS != 0 && s.tcr & tcr::WIE != 0 && s.msr & msr::CE != 0 {
        let pc = f.regs.ip;
        inject(k, vi, f, vector::WATCHDOG, pc);
        return Some(TracePoint::ExceptFitWdt);
    }
    let s = &k.vm.vcpus[vi].s;
    if s.crit_line != 0 && s.msr & msr::CE != 0 {
        let pc = f.regs.ip;
        inject(k, vi, f, vector::CRITICAL, pc);
        return Some(TracePoint::ExceptExternal);
    }
    let s = &k.vm.vcpus[vi].s;
    if s.msr & msr::EE == 0 {
        return None;
    }
    if s.irq_line != 0 {
        let pc = f.regs.ip;
        inject(k, vi, f, vector::EXTERNAL, pc);
        return Some(TracePoint::ExceptExternal);
    }
    let s = &k.vm.vcpus[vi].s;
    if s.tsr & tsr::DIS != 0 && s.tcr & tcr::DIE != 0 {
        let pc = f.regs.ip;
        inject(k, vi, f, vector::DECREMENTER, pc);
        return Some(TracePoint::ExceptDecr);
    }
    let s = &k.vm.vcpus[vi].s;
    if s.tsr & tsr::FIS != 0 && s.tcr & tcr::FIE != 0 {
        let pc = f.regs.ip;
        inject(k, vi, f, vector::FIT, pc);
        return Some(TracePoint::ExceptFitWdt);
    }
    None
}

/// Advances the virtual decrementer to "now": sets TSR[DIS] when it reached zero and
/// reloads it from DECAR with TCR[ARE].
pub fn update_dec(k: &mut Kernel, vi: usize) {
    let now = guest_time(k, vi);
    update_fit_watchdog(&mut k.vm.vcpus[vi], now);
    let v = &mut k.vm.vcpus[vi];
    let deadline = v.dec_deadline;
    if deadline == 0 {
        return;
    }
    if now < deadline {
        return;
    }
    v.s.tsr |= tsr::DIS;
    if v.s.tcr & tcr::ARE != 0 && v.s.decar != 0 {
        let period = v.s.decar as u64;
        let missed = (now - deadline) / period + 1;
        v.dec_deadline = deadline + missed * period;
    } else {
        // A decrementer without auto-reload stops at 0.
        v.dec_deadline = 0;
        v.s.dec = 0;
    }
}

/// Rising edges of timebase bit `bit` (counted from the least significant) up to `tb`.
fn rises(tb: u64, bit: u32) -> u64 {
    (tb + (1 << bit)) >> (bit + 1)
}

/// The fixed-interval timer and the watchdog (PPC440 UM §8.5-8.6): events on rising
/// edges of a timebase bit chosen by TCR[FP] (2^13/17/21/25 ticks) and TCR[WP]
/// (2^17/21/25/29 ticks). They are only looked at when the guest traps or the kernel
/// ticks (1 ms), so several events may coalesce into one, as with a late interrupt.
fn update_fit_watchdog(v: &mut Vcpu, now: u64) {
    let last = v.timer_tb;
    v.timer_tb = now;
    if now <= last || last == 0 {
        return;
    }
    let s = &mut v.s;
    // The timers only run while the guest enabled their interrupt (or, for the watchdog,
    // a reset): QEMU's bamboo never sets these status bits, and guests written against
    // it (like our selftest) expect TSR to stay clear otherwise.
    let fp = tcr::FP.get(s.tcr);
    if s.tcr & tcr::FIE != 0 && rises(now, 13 + 4 * fp) > rises(last, 13 + 4 * fp) {
        s.tsr |= tsr::FIS;
    }
    if s.tcr & (tcr::WIE | tcr::WRC.mask()) == 0 {
        return;
    }
    let wp = tcr::WP.get(s.tcr);
    let steps = rises(now, 17 + 4 * wp) - rises(last, 17 + 4 * wp);
    for _ in 0..steps.min(3) {
        if s.tsr & tsr::ENW == 0 {
            s.tsr |= tsr::ENW;
        } else if s.tsr & tsr::WIS == 0 {
            s.tsr |= tsr::WIS;
        } else {
            // Third expiry: TSR[WRS] = TCR[WRC]; a non-zero WRC resets (not modelled
            // beyond the status bits: the VMM sees no reset request).
            s.tsr |= tsr::WRS.put(tcr::WRC.get(s.tcr));
        }
    }
}

/// Sends a virtualization fault for the current vCPU thread `cur` to its VMM; `gpa` is
/// the full guest-physical address of an `Mmio` access (else 0).
pub fn virt_fault(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    class: VirtFault,
    insn: u32,
    gpa: u64,
) -> Option<usize> {
    let msg = fault_message(k, cur, vi, class, insn, gpa);
    let handler = k.threads[cur].exc_handler;
    match ipc::fault_ipc(k, cur, FaultWait::VirtFault, handler, msg) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            let pc = msg[1];
            thread::stop(k, cur, format_args!("vCPU fault ({class:?}, insn {insn:#010x}, pc {pc:#010x}) and no VMM to handle it"));
            None
        }
    }
}

/// The transfer mask a fault of `class` for instruction `insn` is sent with.
#[inline(always)]
fn fault_mask(k: &Kernel, vi: usize, class: VirtFault, insn: u32) -> u32 {
    let mut mask = k.vm.vcpus[vi].masks[class as usize];
    if class == VirtFault::Mmio && is_fp_load_store(insn) {
        // The VMM needs the FP register the access reads or writes.
        mask |= xfer::FPRS;
    }
    mask
}

/// Records the pending fault (mask, instruction, effective address), writes the long
/// parts of the message into the vCPU's own (kernel-only) UTCB, and returns MR0..MR6.
/// (`glue::fastpath`'s `__vfault_dcr` does the same for the short form of an
/// `Instruction` fault.)
#[inline(always)]
fn fault_message(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    class: VirtFault,
    insn: u32,
    gpa: u64,
) -> [u32; 7] {
    let mask = fault_mask(k, vi, class, insn);
    if mask & xfer::FPRS != 0 && k.vm.fp_owner == vi as u8 {
        // The real FPU holds the guest's registers: `Vcpu::fpr` must be current for
        // the delivery (`fault_delivered`).
        crate::arch::fpu::save(&mut k.vm.vcpus[vi].fpr);
    }
    k.vm.vcpus[vi].fault_mask = mask;
    k.vm.vcpus[vi].fault_insn = insn;
    k.vm.vcpus[vi].fault_ea = spr::read::<{ ppc440::spr::DEAR }>();
    let (pc, rs_value) = {
        let f = frame_of(k, cur);
        (f.regs.ip, f.regs.gpr[((insn >> 21) & 31) as usize])
    };
    if mask != 0 {
        // Long parts of the message go through the vCPU's own (kernel-only) UTCB.
        let u = thread::utcb(k, cur);
        let f = frame_of(k, cur);
        let regs = XferRegs {
            gpr: f.regs.gpr,
            special: [f.regs.cr, f.regs.lr, f.regs.ctr, f.regs.xer],
        };
        regs.encode(mask, &mut u.mr);
        if mask & xfer::TLB != 0 {
            let v = &k.vm.vcpus[vi];
            let ts = v.s.msr & msr::IS != 0;
            let tlb_index = v
                .tlb
                .lookup(pc, v.s.pid as u8, ts)
                .map_or(u32::MAX, |(i, _)| i);
            XferTlb {
                pid: v.s.pid,
                mmucr: v.s.mmucr,
                tlb_index,
            }
            .encode(&mut u.mr);
        }
    }
    let m = VirtFaultMsg {
        class,
        pc,
        insn,
        gpa,
        msr: k.vm.vcpus[vi].s.msr,
        mask,
        rs_value,
    };
    let (tag, mr) = m.encode();
    [tag.0, mr[0], mr[1], mr[2], mr[3], mr[4], mr[5]]
}

/// Applies the VMM's reply to a virtualization fault of vCPU thread `d`.
/// `regs` are the reply's MR0..MR6 (sent in registers), `long` the sender's UTCB
/// message registers (MR7 and up).
pub fn apply_reply(k: &mut Kernel, d: usize, tag: MsgTag, regs: &[u32; 7], sender: &Utcb) -> bool {
    let long = &sender.mr;
    let Some(vi) = vcpu_of(k, d) else { return true };
    let mask = k.vm.vcpus[vi].fault_mask;
    let mr = [regs[1], regs[2], regs[3], regs[4], regs[5], regs[6]];
    let r = FaultReply::decode(tag, &mr);
    let f = frame_of(k, d);
    if let Some(pc) = r.pc {
        f.regs.ip = pc;
    }
    if r.regs {
        if let Some(g) = XferRegs::decode_gprs(mask, tag.untyped(), long) {
            f.regs.gpr = *g;
        }
        if let Some(s) = XferRegs::decode_special(mask, tag.untyped(), long) {
            [f.regs.cr, f.regs.lr, f.regs.ctr, f.regs.xer] = s;
        }
    }
    if let Some((i, v)) = r.set_gpr {
        f.regs.gpr[i as usize] = v;
    }
    if r.fprs && mask & xfer::FPRS != 0 {
        k.vm.vcpus[vi].fpr = sender.fp;
        if k.vm.fp_owner == vi as u8 {
            crate::arch::fpu::load(&k.vm.vcpus[vi].fpr);
        }
    }
    if let Some(level) = r.irq {
        k.vm.vcpus[vi].s.irq_line = level as u32;
    }
    if let Some(level) = r.crit {
        k.vm.vcpus[vi].s.crit_line = level as u32;
    }
    let f = frame_of(k, d);
    let pc = f.regs.ip;
    match r.inject {
        Some(Inject::Dsi) => {
            // As the hardware would report it: the effective address, ESR[ST] for stores.
            let v = &mut k.vm.vcpus[vi];
            v.s.dear = v.fault_ea;
            v.s.esr = if ppc440::decode::writes_memory(v.fault_insn) {
                crate::arch::esr::ST
            } else {
                0
            };
            inject(k, vi, f, vector::DSI, pc);
        }
        Some(Inject::Program) => {
            k.vm.vcpus[vi].s.esr = crate::arch::esr::PIL;
            inject(k, vi, f, vector::PROGRAM, pc);
        }
        Some(Inject::MachineCheck) => inject(k, vi, f, vector::MACHINE_CHECK, pc),
        None => {}
    }
    !r.stop
}

/// Whether `insn` is an FP load or store (primary opcodes 48-55, or opcode 31 decoded).
#[inline]
fn is_fp_load_store(insn: u32) -> bool {
    match insn >> 26 {
        48..=55 => true,
        31 => {
            matches!(ppc440::decode::decode(insn), ppc440::decode::Insn::LoadStore(ls) if ls.is_fp())
        }
        _ => false,
    }
}
