//! A vCPU's kernel-side record ([`Vcpu`], [`VmState`]) and what every other file of `virt`
//! needs of it: the exit accounting (docs/adr/0023-exit-accounting.md), the guest's time
//! base and timers, the real MSR and the real registers that follow the guest's
//! (write-through SPRs, DBCR0), and which vCPU the assembly tier serves.
//!
//! The bottom of `virt`'s layering (see `virt/mod.rs`): it uses no other file of `virt`.
//! The guest CPU's semantics are `kestrel_guestcpu`'s; this file applies their effects to
//! the hardware.

use crate::api::Kernel;
use crate::arch::{spr, TrapFrame};
use core::mem::{offset_of, size_of};
use kestrel_abi::{xfer, TraceCounter, TracePoint, VcpuState, NUM_FAULT_CLASSES, NUM_TRACEPOINTS};
use kestrel_guestcpu::spr::SprEffect;
use kestrel_guestcpu::timer::Timers;
use kestrel_vtlb::GuestTlb;

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
pub use kestrel_guestcpu::msr::GUEST_MSR_MASK;
/// The real MSR a vCPU runs with.
pub use kestrel_guestcpu::msr::VCPU_MSR;

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

/// The paravirtual state of one vCPU (`Vcpu::pv`; the interface itself is `pv.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Pv {
    /// The VMM turned the interface on (`vcpuctl::SET_PV`).
    pub on: bool,
    /// The guest mapped the magic page (`HC_PPC_MAP_MAGIC_PAGE`) at `ea`.
    pub mapped: bool,
    /// The page has been in the guest's TLB since it was mapped: it is synchronised at
    /// every kernel entry and exit.
    pub live: bool,
    /// Page-aligned effective address of the magic page.
    pub ea: u32,
}

impl Pv {
    pub const OFF: Pv = Pv {
        on: false,
        mapped: false,
        live: false,
        ea: 0,
    };
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
    /// The virtual decrementer's deadline and the fixed-interval / watchdog check time,
    /// on the guest's time base (`kestrel_guestcpu::timer`).
    pub timers: Timers,
    /// One-entry cache for the kernel's own instruction fetches: guest page (with
    /// the PID and MSR[IS] it was looked up under) → host page. Cleared whenever the
    /// shadow is flushed or the guest TLB is written.
    /// Guest page | 1 (0: empty) and the host page it maps to.
    pub fetch_page: u32,
    pub fetch_host: u32,
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
    pub pv: Pv,
}

impl Vcpu {
    pub const EMPTY: Vcpu = Vcpu {
        live: false,
        thread: 0,
        s: VCPU_STATE_ZERO,
        tlb: GuestTlb::new(),
        masks: [xfer::DEFAULT; NUM_FAULT_CLASSES],
        timers: Timers {
            dec_deadline: 0,
            timer_tb: 0,
        },
        fetch_page: 0,
        fetch_host: 0,
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
        pv: Pv::OFF,
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

/// Brings vCPU `vi`'s timers up to its guest time (`kestrel_guestcpu::timer::update`).
pub fn update_dec(k: &mut Kernel, vi: usize) {
    let now = guest_time(k, vi);
    let v = &mut k.vm.vcpus[vi];
    kestrel_guestcpu::timer::update(&mut v.s, &mut v.timers, now);
}

/// Whether a guest that asks to wait (MSR[WE], the `EV_IDLE` hypercall) has an interrupt
/// pending already, so it need not wait (`kestrel_guestcpu::msr::wakeup_pending`, after
/// the timers are brought up to date).
pub fn wakeup_pending(k: &mut Kernel, vi: usize) -> bool {
    update_dec(k, vi);
    kestrel_guestcpu::msr::wakeup_pending(&k.vm.vcpus[vi].s)
}

/// The real MSR of a vCPU into its frame (`kestrel_guestcpu::msr::real_msr`: problem state
/// in translation space 1, plus the guest's FP while it owns the FPU and DE while it asked
/// for debug events).
#[inline(always)]
pub fn sync_frame_msr(k: &Kernel, vi: usize, f: &mut TrapFrame) {
    let s = &k.vm.vcpus[vi].s;
    f.regs.msr = kestrel_guestcpu::msr::real_msr(s, k.vm.fp_owner == vi as u8);
}

/// Whether the guest asked for the hardware debug events the kernel passes through.
#[inline(always)]
pub fn guest_debug_events(s: &VcpuState) -> bool {
    kestrel_guestcpu::msr::guest_debug_events(s)
}

/// Loads the real registers an [`SprEffect::WriteThrough`] names (SPRG4-7, USPRG0: the
/// guest reads them without trapping).
#[inline(always)]
pub fn write_through(spr: u32, value: u32) {
    use ppc440::spr::{SPRG4, SPRG5, SPRG6, SPRG7, USPRG0};
    match spr {
        SPRG4 => spr::write::<{ SPRG4 }>(value),
        SPRG5 => spr::write::<{ SPRG5 }>(value),
        SPRG6 => spr::write::<{ SPRG6 }>(value),
        SPRG7 => spr::write::<{ SPRG7 }>(value),
        USPRG0 => spr::write::<{ USPRG0 }>(value),
        _ => {}
    }
}

/// Writes guest SPRG `n` (SPRG4-7) outside `mtspr` (the paravirtual page's sync): the
/// shadow and the real register.
#[inline(always)]
pub fn write_sprg_through(s: &mut VcpuState, n: u32, value: u32) {
    if let SprEffect::WriteThrough { spr, value } =
        kestrel_guestcpu::spr::write_through(s, n, value)
    {
        write_through(spr, value);
    }
}

/// Loads the real registers that follow vCPU `vi`'s guest state while it runs: DBCR0's
/// debug events, and the write-through SPRs (`virt::on_switch`).
pub fn load_guest_registers(k: &Kernel, vi: usize) {
    let s = &k.vm.vcpus[vi].s;
    spr::write::<{ ppc440::spr::DBCR0 }>(kestrel_guestcpu::spr::dbcr0_events(s));
    spr::write::<{ ppc440::spr::SPRG4 }>(s.sprg[4]);
    spr::write::<{ ppc440::spr::SPRG5 }>(s.sprg[5]);
    spr::write::<{ ppc440::spr::SPRG6 }>(s.sprg[6]);
    spr::write::<{ ppc440::spr::SPRG7 }>(s.sprg[7]);
    spr::write::<{ ppc440::spr::USPRG0 }>(s.usprg0);
}

/// Address of the running vCPU's `Vcpu`, or 0 when a native thread runs; read by
/// `__program_fast` and `__guest_resume` (`fast.rs`).
#[no_mangle]
static mut FAST_VCPU: usize = 0;

/// Address of the running vCPU's `Vcpu` whatever its magic page, as `set_current` last
/// recorded it: `__program_fast` emulates the TLB instructions of a vCPU in translation
/// space 1 through it when `FAST_VCPU` is 0 (a live magic page). Only `set_current`
/// writes it; the IPC fast path, which switches to non-live vCPUs and to native threads
/// only, sets `FAST_VCPU` alone, and its stale value is then never read (`FAST_VCPU` is
/// non-zero, or the thread runs in translation space 0).
#[no_mangle]
static mut TLB_VCPU: usize = 0;

/// Records which vCPU runs (called on every switch, and when a vCPU's magic page goes
/// live: such a vCPU takes the full path, pv.rs).
#[inline(always)]
pub fn set_current(v: Option<&Vcpu>) {
    let tlb = v.map_or(0, |v| v as *const Vcpu as usize);
    let a = v
        .filter(|v| !v.pv.live)
        .map_or(0, |v| v as *const Vcpu as usize);
    // SAFETY: single CPU, interrupts off in the kernel; only the scheduler (and pv.rs)
    // write them, and only the assembly tier (`fast.rs`, interrupts off) reads them.
    unsafe {
        *core::ptr::addr_of_mut!(FAST_VCPU) = a;
        *core::ptr::addr_of_mut!(TLB_VCPU) = tlb;
    }
}
