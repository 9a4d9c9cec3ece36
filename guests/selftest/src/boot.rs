//! Boot, exception vectors and the two control-transfer primitives the harness is built on.
//!
//! Boot (`_start`) follows Linux's `head_44x.S`: it assumes only that the code it runs on is
//! mapped 1:1 by some TLB entry in translation space 0 with TID 0 (QEMU's boot entries 0/1
//! natively, an ePAPR-style single entry under Kestrel's VMM). It finds that entry with
//! `tlbsx` on its own PC, maps 0..256 MiB 1:1 in translation space 1 in another entry, `rfi`s
//! into space 1, invalidates every other entry (the boot entry included), writes its own
//! pinned entries in space 0 (RAM 0..256 MiB at 63, the UART page at 62), `rfi`s back and
//! drops the temporary entry. No two valid entries ever match the same address in the same
//! space, which the architecture leaves undefined.
//!
//! Vectors: IVPR = start of the image; IVORn = 32 * n. Every stub saves r1 in a scratch SPRG
//! and branches to its class's common code, which saves all registers into the class's static
//! [`Frame`](crate::trap::Frame), calls `selftest_trap(frame, vector)` on the class's own
//! stack, restores the (possibly edited) frame and returns with the class's return
//! instruction (Book E §7.1; PPC440 UM §6):
//! - non-critical: SRR0/1, `rfi`, scratch SPRG0;
//! - critical (critical input, watchdog, debug): CSRR0/1, `rfci`, scratch SPRG2;
//! - machine check: MCSRR0/1, `rfmci`, scratch SPRG1.
//!
//! Separate frames, stacks and scratch registers per class let a critical interrupt arrive
//! inside a non-critical handler. Interrupted code may run with any r1 (problem-state code
//! has no stack), since handlers never use it.
//!
//! `st_catch(f, ctx)` calls `f(ctx)` and returns 0, or 1 when the trap handler aborted the
//! test by resuming at `st_catch_abort`. `st_enter(pc, msr, a0, a1)` `rfi`s to `pc` with
//! `msr` (r3 = a0, r4 = a1) and returns when the trap handler resumes at `st_enter_exit`,
//! with the r3 the interrupted code had. Both save the non-volatile registers (r13..r31 and
//! CR2..CR4) and the stack pointer, so they can be left from any depth.

use crate::cpu::tlb::{tlbwe, G, I, IO_ENTRY, RAM_ENTRY, S256M, S4K, SR, SW, SX, TS, V};
use crate::cpu::{spr, tlb};
use core::arch::global_asm;
use core::sync::atomic::AtomicU32;

/// Word 0 of the 256 MiB 1:1 RAM mapping (EPN 0), like Linux's pinned entry. It covers
/// the device tree QEMU passes at 24 MiB; nothing beyond the image is touched otherwise.
const RAM_W0: u32 = V | tlb::size(S256M);
/// Word 2 of the RAM mapping: supervisor read/write/execute, write-back, not guarded.
const RAM_W2: u32 = SX | SW | SR;
/// Word 0/1 of the UART page (0xEF600000, ERPN 0) and its word 2: guarded, caching inhibited.
const IO_W0_LOW: u32 = V | tlb::size(S4K);
const IO_W2: u32 = I | G | SW | SR;

/// One 32-byte interrupt vector entry (IVORn = 32 * n): saves r1 in the class's scratch SPRG,
/// points r1 at the class's frame, saves r3 there, puts the vector number in r3 and branches
/// to the class's common entry.
macro_rules! vector_entry {
    ($n:literal, $scratch:literal, $frame:literal, $common:literal) => {
        concat!(
            "    .balign 32\n",
            "    mtspr ",
            $scratch,
            ", 1\n",
            "    lis 1, ",
            $frame,
            "@ha\n",
            "    addi 1, 1, ",
            $frame,
            "@l\n",
            "    stw 3, 12(1)\n",
            "    li 3, ",
            $n,
            "\n",
            "    b ",
            $common,
            "\n",
        )
    };
}

/// Common entry of one interrupt class: saves everything into the class's frame and calls
/// the handler on the class's stack. Frame layout (see `trap::Frame`): r0..r31 at 0..128,
/// CR 128, LR 132, CTR 136, XER 140, xSRR0 144, xSRR1 148, ESR 152, DEAR 156, MSR on
/// entry 160.
macro_rules! entry {
    ($name:literal, $scratch:literal, $frame:literal, $stack:literal, $srr0:literal, $srr1:literal) => {
        concat!(
            $name,
            ":\n",
            "    stw 0, 0(1)\n",
            "    stw 2, 8(1)\n",
            "    stmw 4, 16(1)\n",
            "    mfspr 4, ",
            $scratch,
            "\n",
            "    stw 4, 4(1)\n",
            "    mfcr 4\n",
            "    stw 4, 128(1)\n",
            "    mflr 4\n",
            "    stw 4, 132(1)\n",
            "    mfctr 4\n",
            "    stw 4, 136(1)\n",
            "    mfxer 4\n",
            "    stw 4, 140(1)\n",
            "    mfspr 4, ",
            $srr0,
            "\n",
            "    stw 4, 144(1)\n",
            "    mfspr 4, ",
            $srr1,
            "\n",
            "    stw 4, 148(1)\n",
            "    mfspr 4, {esr}\n",
            "    stw 4, 152(1)\n",
            "    mfspr 4, {dear}\n",
            "    stw 4, 156(1)\n",
            "    mfmsr 4\n",
            "    stw 4, 160(1)\n",
            "    mr 4, 3\n",
            "    mr 3, 1\n",
            "    lis 1, ",
            $stack,
            "@ha\n",
            "    addi 1, 1, ",
            $stack,
            "@l\n",
            "    li 0, 0\n",
            "    stwu 0, -16(1)\n",
            "    bl selftest_trap\n",
            "    lis 1, ",
            $frame,
            "@ha\n",
            "    addi 1, 1, ",
            $frame,
            "@l\n",
        )
    };
}

/// Restores the frame at r1 and returns through `srr0`/`srr1` with `rfi`.
macro_rules! exit {
    ($srr0:literal, $srr1:literal, $rfi:literal) => {
        concat!(
            "    lwz 4, 144(1)\n",
            "    mtspr ",
            $srr0,
            ", 4\n",
            "    lwz 4, 148(1)\n",
            "    mtspr ",
            $srr1,
            ", 4\n",
            "    lwz 4, 128(1)\n",
            "    mtcr 4\n",
            "    lwz 4, 132(1)\n",
            "    mtlr 4\n",
            "    lwz 4, 136(1)\n",
            "    mtctr 4\n",
            "    lwz 4, 140(1)\n",
            "    mtxer 4\n",
            "    lwz 0, 0(1)\n",
            "    lwz 2, 8(1)\n",
            "    lmw 3, 12(1)\n",
            "    lwz 1, 4(1)\n",
            "    ",
            $rfi,
            "\n",
        )
    };
}

/// The exit of the critical and machine-check classes: `rfci`/`rfmci`, or, when the
/// `selftest.no-rfci` option is set, SRR0/1 = CSRR0/1 (MCSRR0/1) and `rfi` (see
/// `SELFTEST_NO_RFCI`).
macro_rules! exit_or_rfi {
    ($srr0:literal, $srr1:literal, $rfi:literal) => {
        concat!(
            "    lis 4, SELFTEST_NO_RFCI@ha\n",
            "    lwz 4, SELFTEST_NO_RFCI@l(4)\n",
            "    cmpwi 4, 0\n",
            "    bne 9f\n",
            exit!($srr0, $srr1, $rfi),
            "9:\n",
            exit!("{srr0}", "{srr1}", "rfi"),
        )
    };
}

/// Set by the `selftest.no-rfci` boot option: the critical and machine-check classes return
/// with `rfi` instead of `rfci`/`rfmci`, and the rfci/rfmci tests skip. QEMU 7.2.22 aborts
/// ("Raised interrupt while not in I/O function") on every rfci and rfmci under `-icount`:
/// `do_rfi` raises CPU_INTERRUPT_EXITTB, and unlike `rfi` their translations never call
/// `gen_icount_io_start`. Nothing else changes; the option exists only for native runs
/// under `-icount`.
#[no_mangle]
pub static SELFTEST_NO_RFCI: AtomicU32 = AtomicU32::new(0);

global_asm!(
    "    .section .text.vectors, \"ax\"",
    "    .global __vectors_start",
    "__vectors_start:",
    vector_entry!("0", "{sprg2}", "__crit_frame", "__crit_common"),
    vector_entry!("1", "{sprg1}", "__mc_frame", "__mc_common"),
    vector_entry!("2", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("3", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("4", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("5", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("6", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("7", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("8", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("9", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("10", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("11", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("12", "{sprg2}", "__crit_frame", "__crit_common"),
    vector_entry!("13", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("14", "{sprg0}", "__nc_frame", "__nc_common"),
    vector_entry!("15", "{sprg2}", "__crit_frame", "__crit_common"),
    "    .balign 32",
    entry!("__nc_common", "{sprg0}", "__nc_frame", "__nc_stack_top", "{srr0}", "{srr1}"),
    exit!("{srr0}", "{srr1}", "rfi"),
    entry!("__crit_common", "{sprg2}", "__crit_frame", "__crit_stack_top", "{csrr0}", "{csrr1}"),
    exit_or_rfi!("{csrr0}", "{csrr1}", "rfci"),
    entry!("__mc_common", "{sprg1}", "__mc_frame", "__mc_stack_top", "{mcsrr0}", "{mcsrr1}"),
    exit_or_rfi!("{mcsrr0}", "{mcsrr1}", "rfmci"),
    "",
    "    .section .text.boot, \"ax\"",
    "    .global _start",
    "_start:",
    // Search in space 0 for TID 0; PID 0.
    "    li 0, 0",
    "    mtspr {mmucr}, 0",
    "    mtspr {pid}, 0",
    "    bl 1f",
    "1:  mflr 20",
    "    tlbsx 23, 0, 20",
    // Temporary entry T = 59, or 58 if we run from 59: 0..256 MiB 1:1 in space 1.
    "    li 24, 59",
    "    cmpw 23, 24",
    "    bne 2f",
    "    li 24, 58",
    "2:  li 4, {tmp_w0}",
    "    li 5, 0",
    "    li 6, {ram_w2}",
    "    .long {we_4_24_0}",
    "    .long {we_5_24_1}",
    "    .long {we_6_24_2}",
    "    isync",
    "    lis 7, __boot_ts1@ha",
    "    addi 7, 7, __boot_ts1@l",
    "    mtspr {srr0}, 7",
    "    li 8, {is_ds}",
    "    mtspr {srr1}, 8",
    "    rfi",
    "__boot_ts1:",
    // Invalidate every entry but T.
    "    li 9, 0",
    "    li 10, 0",
    "3:  cmpw 9, 24",
    "    beq 4f",
    "    .long {we_10_9_0}",
    "4:  addi 9, 9, 1",
    "    cmpwi 9, {tlb_entries}",
    "    blt 3b",
    "    isync",
    // Pinned entries in space 0.
    "    li 9, {ram_entry}",
    "    li 4, {ram_w0}",
    "    li 5, 0",
    "    li 6, {ram_w2}",
    "    .long {we_4_9_0}",
    "    .long {we_5_9_1}",
    "    .long {we_6_9_2}",
    "    li 9, {io_entry}",
    "    lis 4, 0xEF60",
    "    ori 4, 4, {io_w0_low}",
    "    lis 5, 0xEF60",
    "    li 6, {io_w2}",
    "    .long {we_4_9_0}",
    "    .long {we_5_9_1}",
    "    .long {we_6_9_2}",
    "    isync",
    "    lis 7, __boot_ts0@ha",
    "    addi 7, 7, __boot_ts0@l",
    "    mtspr {srr0}, 7",
    "    li 8, {msr_kernel}",
    "    mtspr {srr1}, 8",
    "    rfi",
    "__boot_ts0:",
    "    li 10, 0",
    "    .long {we_10_24_0}",
    "    isync",
    // Clear .bss (scratch pages, statics, stacks), then run selftest_main(r3 = the FDT).
    "    lis 4, __bss_start@ha",
    "    addi 4, 4, __bss_start@l",
    "    lis 5, __bss_end@ha",
    "    addi 5, 5, __bss_end@l",
    "    li 0, 0",
    "5:  cmplw 4, 5",
    "    bge 6f",
    "    stw 0, 0(4)",
    "    addi 4, 4, 4",
    "    b 5b",
    "6:  lis 1, __stack_top@ha",
    "    addi 1, 1, __stack_top@l",
    "    stwu 0, -16(1)",
    "    bl selftest_main",
    "7:  b 7b",
    "",
    // st_catch(f: r3, ctx: r4) -> 0 | 1
    "    .section .text.harness, \"ax\"",
    "    .global st_catch",
    "st_catch:",
    "    stwu 1, -96(1)",
    "    mflr 0",
    "    stw 0, 100(1)",
    "    stmw 13, 8(1)",
    "    mfcr 0",
    "    stw 0, 84(1)",
    "    lis 5, __catch_sp@ha",
    "    stw 1, __catch_sp@l(5)",
    "    mtctr 3",
    "    mr 3, 4",
    "    bctrl",
    "    li 3, 0",
    "__catch_out:",
    "    lwz 0, 84(1)",
    "    mtcrf 0x38, 0",
    "    lmw 13, 8(1)",
    "    lwz 0, 100(1)",
    "    mtlr 0",
    "    addi 1, 1, 96",
    "    blr",
    "    .global st_catch_abort",
    "st_catch_abort:",
    "    lis 5, __catch_sp@ha",
    "    lwz 1, __catch_sp@l(5)",
    "    li 3, 1",
    "    b __catch_out",
    "",
    // st_enter(pc: r3, msr: r4, a0: r5, a1: r6) -> r3 at the trap that ended it
    "    .global st_enter",
    "st_enter:",
    "    stwu 1, -96(1)",
    "    mflr 0",
    "    stw 0, 100(1)",
    "    stmw 13, 8(1)",
    "    mfcr 0",
    "    stw 0, 84(1)",
    "    lis 7, __enter_sp@ha",
    "    stw 1, __enter_sp@l(7)",
    "    mtspr {srr0}, 3",
    "    mtspr {srr1}, 4",
    "    mr 3, 5",
    "    mr 4, 6",
    "    rfi",
    "    .global st_enter_exit",
    "st_enter_exit:",
    "    lis 5, __enter_sp@ha",
    "    lwz 1, __enter_sp@l(5)",
    "    lwz 0, 84(1)",
    "    mtcrf 0x38, 0",
    "    lmw 13, 8(1)",
    "    lwz 0, 100(1)",
    "    mtlr 0",
    "    addi 1, 1, 96",
    "    blr",
    "",
    "    .section .bss.harness, \"aw\", @nobits",
    "    .balign 16",
    "__catch_sp: .space 4",
    "__enter_sp: .space 4",
    "    .balign 16",
    "    .global __nc_frame",
    "__nc_frame: .space 176",
    "    .global __crit_frame",
    "__crit_frame: .space 176",
    "    .global __mc_frame",
    "__mc_frame: .space 176",
    tmp_w0 = const RAM_W0 | TS,
    ram_w0 = const RAM_W0,
    ram_w2 = const RAM_W2,
    io_w0_low = const IO_W0_LOW,
    io_w2 = const IO_W2,
    ram_entry = const RAM_ENTRY,
    io_entry = const IO_ENTRY,
    is_ds = const crate::cpu::msr::IS | crate::cpu::msr::DS,
    msr_kernel = const crate::cpu::msr::KERNEL,
    we_4_24_0 = const tlbwe(4, 24, 0),
    we_5_24_1 = const tlbwe(5, 24, 1),
    we_6_24_2 = const tlbwe(6, 24, 2),
    we_10_9_0 = const tlbwe(10, 9, 0),
    we_4_9_0 = const tlbwe(4, 9, 0),
    we_5_9_1 = const tlbwe(5, 9, 1),
    we_6_9_2 = const tlbwe(6, 9, 2),
    we_10_24_0 = const tlbwe(10, 24, 0),
    tlb_entries = const kestrel_ppc440::tlb::ENTRIES,
    sprg0 = const spr::SPRG0,
    sprg1 = const spr::SPRG1,
    sprg2 = const spr::SPRG2,
    srr0 = const spr::SRR0,
    srr1 = const spr::SRR1,
    csrr0 = const spr::CSRR0,
    csrr1 = const spr::CSRR1,
    mcsrr0 = const spr::MCSRR0,
    mcsrr1 = const spr::MCSRR1,
    esr = const spr::ESR,
    dear = const spr::DEAR,
    mmucr = const spr::MMUCR,
    pid = const spr::PID,
);

extern "C" {
    fn st_catch(f: extern "C" fn(*mut u8), ctx: *mut u8) -> u32;
    fn st_enter(pc: u32, msr: u32, a0: u32, a1: u32) -> u32;
}

/// Calls `f(ctx)`; returns false if a trap handler aborted it (resumed at `st_catch_abort`).
pub fn catch(f: extern "C" fn(*mut u8), ctx: *mut u8) -> bool {
    // SAFETY: st_catch saves and restores every non-volatile register around the call, and
    // the abort path restores the stack pointer it recorded, so either way it returns to
    // this frame like an ordinary call.
    unsafe { st_catch(f, ctx) == 0 }
}

/// Runs code at `pc` with MSR `msr` (r3 = a0, r4 = a1) until a trap whose armed action is
/// `Exit`; returns the r3 the code had at that trap.
pub fn enter(pc: u32, msr: u32, a0: u32, a1: u32) -> u32 {
    // SAFETY: as for `catch`: the only way back is st_enter_exit, which restores this
    // frame's registers. The caller arms `Exit` for the trap that ends the excursion.
    unsafe { st_enter(pc, msr, a0, a1) }
}
