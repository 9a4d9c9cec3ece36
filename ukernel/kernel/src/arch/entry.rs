//! Exception vectors, kernel entry and exit, and the boot entry point.
//!
//! Every interrupt saves the complete user register state into a [`TrapFrame`]:
//! - from user mode (SRRn[PR] = 1) into the frame at the top of the current thread's
//!   kernel stack, whose address the scheduler keeps in SPRG1;
//! - from supervisor mode (the idle loop, or a kernel bug) below the interrupted stack
//!   pointer, so kernel entry is reentrant.
//!
//! It then calls `kestrel_trap(frame, vector)`, which returns the frame to resume
//! (possibly another thread's) and the exit path restores it and returns with
//! rfi / rfci / rfmci according to the interrupt class (Book E §7.1): critical-class
//! interrupts (critical input, watchdog, debug) use CSRR0/1, machine checks MCSRR0/1.
//!
//! Scratch registers: SPRG0 = vector number, SPRG2 = interrupted r1, SPRG3 =
//! interrupted r3; SPRG1 = current thread's frame. The kernel never runs with MSR[CE]
//! or MSR[DE] set, so a critical interrupt cannot hit a non-critical prologue; a
//! machine check inside the kernel is fatal, so clobbering scratch SPRGs there is moot.
//!
//! System calls enter through their own copy of the prologue so the IPC fast path
//! (`glue::fastpath`) runs before the general dispatcher.
//!
//! Multi-word saves use `stmw`/`lmw` (all 32 registers at once, then the two slots the
//! entry borrowed registers for, r1 and r3, from SPRG2/SPRG3); each vector stub is exactly 32 bytes, so
//! IVORn = 32 * n from IVPR = `__vectors_start`.
//!
//! Exit accounting (docs/adr/0023-exit-accounting.md): every stub reads the time base in
//! its second (program stub: fourth) instruction, so an exit's cost starts at the vector itself: the general
//! stubs store it in [`ENTRY_TB`] (read by `virt::vcpu::exit_begin`), the program stub passes
//! it to the emulation fast path in r3 (that stub also stores the general registers in
//! the thread's frame right away, `stmw`). On the way out, a frame that resumes a vCPU
//! (MSR[IS] set: only vCPUs run in translation space 1) goes through `__guest_resume`
//! (`virt::fast`), which records the exit in progress and starts the next GUEST_RUN;
//! native threads pay two instructions for the test.

use core::arch::global_asm;
use kestrel_abi::FrameRegs;

/// A thread's saved user state plus the fault registers captured at entry.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct TrapFrame {
    pub regs: FrameRegs,
    pub esr: u32,
    pub dear: u32,
    pub vector: u32,
    /// Address of the thread's `virt::Vcpu` for a vCPU thread (set when the vCPU is
    /// created), 0 otherwise: the exit path's accounting (`__guest_resume`) reads it.
    pub vcpu: u32,
    _pad: [u32; 2],
}

pub const FRAME_SIZE: usize = 176;
const _: () = assert!(core::mem::size_of::<TrapFrame>() == FRAME_SIZE);

/// Byte offset of a word of the frame's [`FrameRegs`], for the assembly (here, and the
/// fast tier in `virt::fast`): `stmw`/`lmw` move the GPRs from [`F_GPR`] on.
const fn reg(off: usize) -> usize {
    core::mem::offset_of!(TrapFrame, regs) + off
}
pub const F_GPR: usize = reg(core::mem::offset_of!(FrameRegs, gpr));
pub const F_R1: usize = F_GPR + 4;
pub const F_R2: usize = F_GPR + 8;
pub const F_R3: usize = F_GPR + 12;
pub const F_CR: usize = reg(core::mem::offset_of!(FrameRegs, cr));
pub const F_LR: usize = reg(core::mem::offset_of!(FrameRegs, lr));
pub const F_CTR: usize = reg(core::mem::offset_of!(FrameRegs, ctr));
pub const F_XER: usize = reg(core::mem::offset_of!(FrameRegs, xer));
pub const F_IP: usize = reg(core::mem::offset_of!(FrameRegs, ip));
pub const F_MSR: usize = reg(core::mem::offset_of!(FrameRegs, msr));
/// The PowerPC EABI's minimal stack frame (back chain and LR save word, 16-byte aligned):
/// what the assembly pushes before it calls Rust.
pub const ABI_FRAME: usize = 16;
// Displacements of `lwz`/`stw`; the GPRs start the frame (the fast tier indexes them by
// 4 * register number from the frame's address).
const _: () = assert!(F_GPR == 0 && F_MSR < 32768);
/// Offset of [`TrapFrame::vcpu`] (read by the assembly).
pub const FRAME_VCPU: usize = core::mem::offset_of!(TrapFrame, vcpu);

macro_rules! save_restore {
    ($name:literal, $srr0:literal, $srr1:literal, $rfi:literal, $handler:literal) => {
        concat!(
            "    .balign 16\n",
            $name, ":\n",
            "    mtspr {sprg0}, 3\n",
            "    mfcr 3\n",
            "    mfspr 1, ", $srr1, "\n",
            "    andi. 1, 1, {msr_pr}\n",
            "    beq 1f\n",
            "    mfspr 1, {sprg1}\n",
            "    b 2f\n",
            "1:  mfspr 1, {sprg2}\n",
            "    subi 1, 1, {frame_size}\n",
            save_restore!(@body $srr0, $srr1, $rfi, $handler, $name)
        )
    };
    // System calls only come from user mode (the kernel never executes `sc`), so the
    // frame is always the thread's own.
    (user_only $name:literal, $srr0:literal, $srr1:literal, $rfi:literal, $handler:literal) => {
        concat!(
            "    .balign 16\n",
            $name, ":\n",
            "    mtspr {sprg0}, 3\n",
            "    mfcr 3\n",
            "    mfspr 1, {sprg1}\n",
            save_restore!(@body $srr0, $srr1, $rfi, $handler, $name)
        )
    };
    (@body $srr0:literal, $srr1:literal, $rfi:literal, $handler:literal, $name:literal) => {
        concat!(
            "2:  stw 3, {f_cr}(1)\n",
            "    stmw 0, {f_gpr}(1)\n",
            "    mfspr 3, {sprg2}\n",
            "    stw 3, {f_r1}(1)\n",
            "    mfspr 3, {sprg3}\n",
            "    stw 3, {f_r3}(1)\n",
            "    mflr 3\n",
            "    stw 3, {f_lr}(1)\n",
            "    mfctr 3\n",
            "    stw 3, {f_ctr}(1)\n",
            "    mfxer 3\n",
            "    stw 3, {f_xer}(1)\n",
            "    mfspr 3, ", $srr0, "\n",
            "    stw 3, {f_ip}(1)\n",
            "    mfspr 3, ", $srr1, "\n",
            "    stw 3, {f_msr}(1)\n",
            "    mfspr 4, {sprg0}\n",
            "    mr 3, 1\n",
            "    li 0, 0\n",
            "    stwu 0, -{abi_frame}(1)\n",
            "    bl ", $handler, "\n",
            "    .global ", $name, "_exit\n",
            $name, "_exit:\n",
            "    mr 1, 3\n",
            "    lwz 0, {f_ctr}(1)\n",
            "    mtctr 0\n",
            "    lwz 0, {f_xer}(1)\n",
            "    mtxer 0\n",
            "    lwz 0, {f_ip}(1)\n",
            "    mtspr ", $srr0, ", 0\n",
            "    lwz 0, {f_msr}(1)\n",
            "    mtspr ", $srr1, ", 0\n",
            "    andi. 0, 0, {msr_is}\n",
            "    bnel- __guest_resume\n",
            "    lwz 0, {f_lr}(1)\n",
            "    mtlr 0\n",
            "    lwz 0, {f_cr}(1)\n",
            "    mtcr 0\n",
            "    lwz 0, {f_gpr}(1)\n",
            "    lmw 2, {f_r2}(1)\n",
            "    lwz 1, {f_r1}(1)\n",
            "    ", $rfi, "\n",
        )
    };
}

macro_rules! stub {
    ($n:literal, $target:literal) => {
        concat!(
            "    .org __vectors_start + ",
            $n,
            " * {stub_size}\n",
            "    mtspr {sprg2}, 1\n",
            "    mfspr 1, {tbl}\n",
            "    mtspr {sprg3}, 3\n",
            "    lis 3, ENTRY_TB@ha\n",
            "    stw 1, ENTRY_TB@l(3)\n",
            "    li 3, ",
            $n,
            "\n",
            "    b ",
            $target,
            "\n",
        )
    };
}

global_asm!(
    "    .section .text.vectors, \"ax\"",
    "    .balign 16",
    "    .global __vectors_start",
    "__vectors_start:",
    stub!(0, "__crit_entry"),
    stub!(1, "__mcheck_entry"),
    stub!(2, "__noncrit_entry"),
    stub!(3, "__noncrit_entry"),
    stub!(4, "__noncrit_entry"),
    stub!(5, "__noncrit_entry"),
    // The program vector: straight into the emulation fast path with the general
    // registers already in the thread's frame (guest r1 in SPRG2, r3 = time base).
    "    .org __vectors_start + 6 * {stub_size}",
    "    mtspr {sprg2}, 1",
    "    mfspr 1, {sprg1}",
    "    stmw 0, {f_gpr}(1)",
    "    mfspr 3, {tbl}",
    "    b __program_fast",
    stub!(7, "__noncrit_entry"),
    stub!(8, "__syscall_entry"),
    stub!(9, "__noncrit_entry"),
    stub!(10, "__noncrit_entry"),
    stub!(11, "__noncrit_entry"),
    stub!(12, "__crit_entry"),
    stub!(13, "__noncrit_entry"),
    stub!(14, "__noncrit_entry"),
    stub!(15, "__crit_entry"),
    "    .org __vectors_start + 16 * {stub_size}",
    save_restore!("__noncrit_entry", "{srr0}", "{srr1}", "rfi", "kestrel_trap"),
    save_restore!(user_only "__syscall_entry", "{srr0}", "{srr1}", "rfi", "__ipc_fast"),
    save_restore!("__program_entry", "{srr0}", "{srr1}", "rfi", "kestrel_program"),
    save_restore!("__crit_entry", "{csrr0}", "{csrr1}", "rfci", "kestrel_trap"),
    save_restore!("__mcheck_entry", "{mcsrr0}", "{mcsrr1}", "rfmci", "kestrel_trap"),
    "",
    "    .section .text.boot, \"ax\"",
    "    .global _start",
    "_start:",
    "    mr 31, 3",
    "    lis 4, __bss_start@ha",
    "    addi 4, 4, __bss_start@l",
    "    lis 5, __bss_end@ha",
    "    addi 5, 5, __bss_end@l",
    "    li 0, 0",
    "1:  cmplw 4, 5",
    "    bge 2f",
    "    stw 0, 0(4)",
    "    addi 4, 4, 4",
    "    b 1b",
    "2:  lis 1, __boot_stack_top@ha",
    "    addi 1, 1, __boot_stack_top@l",
    "    stwu 0, -{abi_frame}(1)",
    "    mr 3, 31",
    "    bl kestrel_boot",
    "3:  b 3b",
    "",
    "    .section .bss.boot_stack, \"aw\", @nobits",
    "    .balign 16",
    "    .space 16384",
    "__boot_stack_top:",
    "    .space 16",
    sprg0 = const ppc440::spr::SPRG0,
    sprg1 = const ppc440::spr::SPRG1,
    sprg2 = const ppc440::spr::SPRG2,
    sprg3 = const ppc440::spr::SPRG3,
    srr0 = const ppc440::spr::SRR0,
    srr1 = const ppc440::spr::SRR1,
    csrr0 = const ppc440::spr::CSRR0,
    csrr1 = const ppc440::spr::CSRR1,
    mcsrr0 = const ppc440::spr::MCSRR0,
    mcsrr1 = const ppc440::spr::MCSRR1,
    msr_pr = const ppc440::msr::PR,
    msr_is = const ppc440::msr::IS,
    tbl = const ppc440::spr::TBL_R,
    stub_size = const STUB_SIZE,
    frame_size = const FRAME_SIZE,
    f_gpr = const F_GPR,
    f_r1 = const F_R1,
    f_r2 = const F_R2,
    f_r3 = const F_R3,
    f_cr = const F_CR,
    f_lr = const F_LR,
    f_ctr = const F_CTR,
    f_xer = const F_XER,
    f_ip = const F_IP,
    f_msr = const F_MSR,
    abi_frame = const ABI_FRAME,
);

/// Bytes per vector stub (IVORn = STUB_SIZE * n from IVPR).
const STUB_SIZE: u32 = 32;
// The exit path tests MSR[IS] with one `andi.`.
const _: () = assert!(ppc440::msr::IS >> 16 == 0);

/// The time base (low word) read by the vector stub of the latest kernel entry through
/// the general path: the start of that entry's exit window. Written only by the stubs
/// (and by the program fast path when it falls back), interrupts being off in the kernel.
#[no_mangle]
static mut ENTRY_TB: u32 = 0;

/// The time base at the first instructions of the current kernel entry ([`ENTRY_TB`]).
#[inline(always)]
pub fn entry_tb() -> u32 {
    // SAFETY: a plain aligned word only the entry code writes, and never while the
    // kernel runs (interrupts are off in the kernel).
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(ENTRY_TB)) }
}

extern "C" {
    static __vectors_start: u8;
    /// The non-critical exit path: restores `frame` and `rfi`s to it.
    fn __noncrit_entry_exit(frame: *mut TrapFrame) -> !;
}

/// Leaves the kernel for the first time, into the thread whose frame is `frame`.
///
/// # Safety
/// `frame` must be a complete frame of a thread that `glue::switch::switch_to` just made
/// current (SPRG1, PID and SPRG4 set up for it).
pub unsafe fn resume(frame: *mut TrapFrame) -> ! {
    // SAFETY: guaranteed by the caller; the exit path only reads the frame.
    unsafe { __noncrit_entry_exit(frame) }
}

/// Points IVPR and IVOR0..15 at the vector stubs.
pub fn install_vectors() {
    let base = core::ptr::addr_of!(__vectors_start) as u32;
    assert!(
        base & 0xffff == 0,
        "vectors must be 64 KiB aligned for IVPR"
    );
    super::spr::write::<{ ppc440::spr::IVPR }>(base);
    macro_rules! ivor {
        ($($n:literal)*) => { $( super::spr::write::<{ ppc440::spr::IVOR0 + $n }>(STUB_SIZE * $n); )* };
    }
    ivor!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    const _: () = assert!(ppc440::ivor::COUNT == 16);
}
