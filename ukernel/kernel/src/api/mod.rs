//! The kernel's L4 semantics: threads, address spaces, IPC, mapping, scheduling, system
//! calls and interrupts as IPC.
//!
//! Dependency rules (docs/adr/0010-kernel-layering.md): `api` uses `arch` (trap frame,
//! TLB words, SPR access), `platform` only through its interrupt-controller trait and the
//! console, and virtualization only through [`hooks`]. It never names `glue` or `virt`.
//!
//! All kernel state lives in one [`Kernel`] value. The kernel runs on one CPU with
//! interrupts disabled and never blocks inside a system call (an "interrupt model"
//! kernel: a blocked thread's whole state is its saved user frame plus its TCB), so
//! there is never more than one live `&mut Kernel`.

pub mod fpu;
pub mod hooks;
pub mod ipc;
pub mod kmem;
pub mod sched;
pub mod space;
pub mod syscall;
pub mod thread;

use crate::arch::TrapFrame;
use crate::platform::IRQ_LINES;
use kestrel_abi::{FIRST_THREAD_NO, MAX_THREAD_NO};
use kestrel_kcore::{mapdb::MapDb, pid::PidAllocator, readyq::ReadyQueues};
use space::Space;
use thread::Tcb;

/// TCB slots for real threads, plus one for the idle thread.
pub const NTHREADS: usize = (MAX_THREAD_NO - FIRST_THREAD_NO) as usize;
pub const IDLE: usize = NTHREADS;
pub const NTCB: usize = NTHREADS + 1;
/// Address spaces.
pub const NSPACES: usize = 64;
/// Mapping-database nodes: every mapped page in every space needs one.
pub const MAPDB_NODES: usize = 160 * 1024;
/// Per-thread kernel stack size (the user frame sits at its top).
pub const KSTACK_SIZE: usize = 8192;

/// Interrupt line state.
#[derive(Clone, Copy)]
pub struct IrqLine {
    /// Thread-slot index of the handler, or `usize::MAX`.
    pub handler: usize,
    /// Fired and not yet delivered.
    pub pending: bool,
    /// Delivered and not yet acknowledged (line masked).
    pub in_service: bool,
}

/// Board and memory facts fixed at boot.
#[derive(Clone, Copy)]
pub struct MemInfo {
    pub ram_end: u32,
    /// First physical byte the root task may hand out.
    pub free_start: u32,
    pub module: (u32, u32),
    pub tb_hz: u32,
    pub tick_us: u32,
    /// Kernel command line from the device tree's /chosen/bootargs.
    pub bootargs: [u8; kestrel_abi::BOOTARGS_LEN],
    pub bootargs_len: usize,
}

/// Field order matters for the IPC fast path: the small, hot fields come first so
/// their offsets fit in a load's 16-bit displacement from the `Kernel` base.
#[repr(C)]
pub struct Kernel {
    /// Slot index of the running thread (IDLE when none).
    pub current: usize,
    /// Number of interrupt lines fired but not yet delivered (`IrqLine::pending`); the
    /// IPC fast path only tests it for zero.
    pub irq_pending: u32,
    /// Threads with a pending relative timeout (skip the scan when zero).
    pub timeouts_armed: u32,
    /// Decrementer ticks since boot.
    pub ticks: u64,
    pub mem: MemInfo,
    pub rq: ReadyQueues<NTCB>,
    pub threads: [Tcb; NTCB],
    pub irqs: [IrqLine; IRQ_LINES],
    pub kmem: kmem::FramePool,
    pub pids: PidAllocator,
    pub spaces: [Space; NSPACES],
    /// Virtualization's state (vCPU records, shadow TLB), opaque to the core.
    pub vm: hooks::VmState,
    pub mapdb: MapDb<MAPDB_NODES>,
    /// The record of the hardware TLB entries 0..USER_ENTRIES: native refills and guest
    /// shadow entries, one replacement policy (docs/adr/0024-tagged-shadow-tlb.md).
    pub tlb: HwTlb,
    /// Native threads' FPU registers and owner (`fpu`); last: it is large and cold.
    pub native_fpu: fpu::NativeFpu,
}

/// The kernel's record of the refillable hardware TLB entries.
pub type HwTlb = kestrel_vtlb::ShadowTlb<{ crate::arch::tlb::USER_ENTRIES }>;

impl Kernel {
    /// Marks interrupt `line` pending or not, keeping the count `irq_pending` in step.
    #[inline]
    pub fn set_irq_pending(&mut self, line: usize, pending: bool) {
        if self.irqs[line].pending != pending {
            self.irqs[line].pending = pending;
            if pending {
                self.irq_pending += 1;
            } else {
                self.irq_pending -= 1;
            }
        }
    }
}

#[repr(C, align(16))]
pub struct KernelStacks(pub [[u8; KSTACK_SIZE]; NTCB]);

/// Kernel stacks, one per TCB slot; each thread's user frame is at the top of its stack.
static mut KSTACKS: KernelStacks = KernelStacks([[0; KSTACK_SIZE]; NTCB]);

/// Address of the user frame of TCB slot `i`.
pub fn frame_slot(i: usize) -> *mut TrapFrame {
    // SAFETY: only an address inside the static stack array is computed.
    let base = unsafe { core::ptr::addr_of_mut!(KSTACKS.0[i]) } as usize;
    (base + KSTACK_SIZE - crate::arch::FRAME_SIZE) as *mut TrapFrame
}

/// `no_mangle`: the IPC fast path (`fastpath.rs`) addresses it from assembly.
#[no_mangle]
static mut KERNEL: Kernel = Kernel {
    current: IDLE,
    irq_pending: 0,
    timeouts_armed: 0,
    ticks: 0,
    mem: MemInfo {
        ram_end: 0,
        free_start: 0,
        module: (0, 0),
        tb_hz: 0,
        tick_us: 1000,
        bootargs: [0; kestrel_abi::BOOTARGS_LEN],
        bootargs_len: 0,
    },
    rq: ReadyQueues::new(),
    threads: [Tcb::FREE; NTCB],
    irqs: [IrqLine {
        handler: usize::MAX,
        pending: false,
        in_service: false,
    }; IRQ_LINES],
    kmem: kmem::FramePool::empty(),
    pids: PidAllocator::new(),
    spaces: [const { Space::empty() }; NSPACES],
    vm: hooks::VM_INIT,
    mapdb: MapDb::new(),
    tlb: HwTlb::new(),
    native_fpu: fpu::NativeFpu::INIT,
};

/// The kernel state.
///
/// Only `kestrel_trap` and `kestrel_boot` call this, once per kernel entry, and pass
/// the reference down; see the module comment for why it is never aliased.
pub fn kernel() -> &'static mut Kernel {
    // SAFETY: single CPU, kernel entered with interrupts disabled and never re-entered
    // except for fatal exceptions (which only print and stop), so this is the only
    // live mutable reference for the duration of a kernel entry.
    unsafe { &mut *core::ptr::addr_of_mut!(KERNEL) }
}

/// The saved user frame of thread slot `i` (valid while it is not running).
pub fn frame_of(k: &Kernel, i: usize) -> &'static mut TrapFrame {
    // SAFETY: `threads[i].frame` always points into slot i's kernel stack (set at
    // creation and on every entry); the kernel is not re-entered while the reference
    // is used.
    unsafe { &mut *(k.threads[i].frame as *mut TrapFrame) }
}
