//! Short assembly routines whose exact instructions and addresses the tests depend on.
//!
//! Each routine exports a label at the instruction that is expected to trap (`..._insn`) or
//! at the instruction an interrupt must return to (`..._next`), so a test can compare SRR0
//! with it. Three kinds:
//! - supervisor probes (`st_*`), called like functions from the tests;
//! - problem-state snippets (`u_*`) in the one page `.user_text`, entered through
//!   [`boot::enter`](crate::boot::enter) at their alias address in [`USER_VA`]; they end in
//!   `sc` or in the trap under test, and use relative branches only;
//! - two one-page functions, `.page_a` returning 0xA and `.page_b` returning 0xB, that show
//!   which physical page an instruction fetch used.

use crate::cpu::{msr, spr};
use core::arch::global_asm;

/// Where the problem-state code page is mapped (UX only), and the user data page after it.
pub const USER_VA: u32 = 0x1000_0000;
pub const USER_DATA_VA: u32 = 0x1000_1000;

/// The address of an assembly label.
#[macro_export]
macro_rules! label {
    ($name:ident) => {{
        extern "C" {
            static $name: u8;
        }
        (&raw const $name) as u32
    }};
}

/// The alias address of a problem-state snippet.
#[macro_export]
macro_rules! user {
    ($name:ident) => {
        $crate::snippets::USER_VA + ($crate::label!($name) - $crate::label!(__user_start))
    };
}

global_asm!(
    "    .section .text.snippets, \"ax\"",
    // r3 = address -> loaded word (r3 unchanged if the load is skipped)
    "    .global st_load, st_load_insn",
    "st_load:",
    "st_load_insn:",
    "    lwz 3, 0(3)",
    "    blr",
    // r3 = address, r4 = value
    "    .global st_store, st_store_insn",
    "st_store:",
    "st_store_insn:",
    "    stw 4, 0(3)",
    "    blr",
    "    .global st_illegal, st_illegal_insn",
    "st_illegal:",
    "st_illegal_insn:",
    "    .long 0",
    "    blr",
    "    .global st_trap, st_trap_insn",
    "st_trap:",
    "st_trap_insn:",
    "    tw 31, 0, 0",
    "    blr",
    "    .global st_twi, st_twi_insn",
    "st_twi:",
    "st_twi_insn:",
    "    twi 31, 3, 0",
    "    blr",
    // TO = 0b01000 (greater than) with rA == rB, TO = 0b10000 (less than) with a
    // positive r3 and 0: never trap.
    "    .global st_tw_untaken",
    "st_tw_untaken:",
    "    tw 8, 3, 3",
    "    twi 16, 3, 0",
    "    blr",
    "    .global st_sc, st_sc_next",
    "st_sc:",
    "    sc",
    "st_sc_next:",
    "    blr",
    // fmr f0,f0
    "    .global st_fmr, st_fmr_insn",
    "st_fmr:",
    "st_fmr_insn:",
    "    .long 0xFC000090",
    "    blr",
    "    .global st_lwarx, st_lwarx_insn",
    "st_lwarx:",
    "st_lwarx_insn:",
    "    lwarx 3, 0, 3",
    "    blr",
    "    .global st_stwcx, st_stwcx_insn",
    "st_stwcx:",
    "st_stwcx_insn:",
    "    stwcx. 4, 0, 3",
    "    blr",
    // Load r3 = *(r3) with MSR[DS] = 1.
    "    .global st_load_ds, st_load_ds_insn",
    "st_load_ds:",
    "    mfmsr 5",
    "    ori 6, 5, {msr_ds}",
    "    mtmsr 6",
    "    isync",
    "st_load_ds_insn:",
    "    lwz 3, 0(3)",
    "    mtmsr 5",
    "    isync",
    "    blr",
    // Split translation spaces (MSR[IS] != MSR[DS]). Each routine is 64-byte aligned and
    // shorter than 64 bytes, so it lies in one 4 KiB page together with its data word.
    // Store r4 to *(r3) with MSR[DS] = 1.
    "    .balign 64",
    "    .global st_store_ds, st_store_ds_insn",
    "st_store_ds:",
    "    mfmsr 5",
    "    ori 6, 5, {msr_ds}",
    "    mtmsr 6",
    "    isync",
    "st_store_ds_insn:",
    "    stw 4, 0(3)",
    "    mtmsr 5",
    "    isync",
    "    blr",
    // Load r3 = *(r3) with MSR[IS] = 1: every instruction from the isync on is fetched in
    // translation space 1; the load itself is a data access in space 0. The word at
    // st_is_load_data is in the same page.
    "    .balign 64",
    "    .global st_is_load, st_is_load_start, st_is_load_insn, st_is_load_data, st_is_load_end",
    "st_is_load:",
    "st_is_load_start:",
    "    mfmsr 5",
    "    ori 6, 5, {msr_is}",
    "    mtmsr 6",
    "    isync",
    "st_is_load_insn:",
    "    lwz 3, 0(3)",
    "    mtmsr 5",
    "    isync",
    "    blr",
    "st_is_load_data:",
    "    .long 0x15D5A7A0",
    "st_is_load_end:",
    // Store r4 to *(r3) with MSR[IS] = 1 (data in space 0).
    "    .balign 64",
    "    .global st_is_store, st_is_store_start, st_is_store_data, st_is_store_end",
    "st_is_store:",
    "st_is_store_start:",
    "    mfmsr 5",
    "    ori 6, 5, {msr_is}",
    "    mtmsr 6",
    "    isync",
    "    stw 4, 0(3)",
    "    mtmsr 5",
    "    isync",
    "    blr",
    "st_is_store_data:",
    "    .long 0",
    "st_is_store_end:",
    // Load/store forms with MSR[DS] = 1 on a data block in the routine's own page (r3 =
    // the block's EA, r4 = a 48-byte output area in space 0, where r28-r31 are saved too).
    // The 512-byte alignment keeps routine and block in one 4 KiB page.
    "    .balign 512",
    "    .global st_ds_forms, st_ds_forms_data",
    "st_ds_forms:",
    "    stw 28, 32(4)",
    "    stw 29, 36(4)",
    "    stw 30, 40(4)",
    "    stw 31, 44(4)",
    "    addi 10, 3, 32",
    "    mr 11, 3",
    "    mfmsr 5",
    "    ori 6, 5, {msr_ds}",
    "    mtmsr 6",
    "    isync",
    "    lbz 7, 1(3)",
    "    lha 8, 2(3)",
    "    lwbrx 9, 0, 3",
    "    stb 7, 16(3)",
    "    sth 8, 18(3)",
    "    stwu 9, 20(3)",
    "    lmw 28, -20(3)",
    "    dcbz 0, 10",
    "    stmw 30, 64(10)",
    "    mtmsr 5",
    "    isync",
    "    stw 7, 0(4)",
    "    stw 8, 4(4)",
    "    stw 9, 8(4)",
    "    subf 3, 11, 3",
    "    stw 3, 12(4)",
    "    stw 28, 16(4)",
    "    stw 29, 20(4)",
    "    stw 30, 24(4)",
    "    stw 31, 28(4)",
    "    lwz 28, 32(4)",
    "    lwz 29, 36(4)",
    "    lwz 30, 40(4)",
    "    lwz 31, 44(4)",
    "    blr",
    "    .balign 32",
    "st_ds_forms_data:",
    "    .space 128",
    // lwarx/stwcx., string and cache block instructions with MSR[DS] = 1 on a data block in
    // the routine's own page (r3 = the block's EA, r4 = a 40-byte output area in space 0).
    "    .balign 512",
    "    .global st_ds_strings, st_ds_strings_data",
    "st_ds_strings:",
    "    stw 28, 24(4)",
    "    stw 29, 28(4)",
    "    stw 30, 32(4)",
    "    mfmsr 5",
    "    ori 6, 5, {msr_ds}",
    "    mtmsr 6",
    "    isync",
    // The atomic increment as real code writes it: retried while the stwcx. fails (at most
    // 8 times), since any interrupt between lwarx and stwcx. drops the reservation on QEMU,
    // natively and in a VM (where the host's timer may preempt the vCPU).
    "    li 11, 8",
    "    mtctr 11",
    "1:  lwarx 7, 0, 3",
    "    addi 7, 7, 1",
    "    stwcx. 7, 0, 3",
    "    mfcr 8",
    "    beq 2f",
    "    bdnz 1b",
    "2:  stwcx. 7, 0, 3",
    "    mfcr 9",
    "    lswi 28, 3, 10",
    "    addi 10, 3, 32",
    "    stswi 28, 10, 10",
    "    li 11, 6",
    "    mtxer 11",
    "    addi 12, 3, 48",
    // stswx 29, 0, 12 (LLVM does not know the mnemonic).
    "    .long (31 << 26) | (29 << 21) | (0 << 16) | (12 << 11) | (661 << 1)",
    "    dcbst 0, 3",
    "    dcbf 0, 3",
    "    icbi 0, 3",
    "    mtmsr 5",
    "    isync",
    "    stw 7, 0(4)",
    "    stw 8, 4(4)",
    "    stw 9, 8(4)",
    "    stw 28, 12(4)",
    "    stw 29, 16(4)",
    "    stw 30, 20(4)",
    "    lwz 28, 24(4)",
    "    lwz 29, 28(4)",
    "    lwz 30, 32(4)",
    "    blr",
    "    .balign 32",
    "st_ds_strings_data:",
    "    .space 64",
    // Call the function at r3 (returns its r3).
    "    .global st_call",
    "st_call:",
    "    mflr 0",
    "    stwu 1, -16(1)",
    "    stw 0, 20(1)",
    "    mtctr 3",
    "    bctrl",
    "    lwz 0, 20(1)",
    "    addi 1, 1, 16",
    "    mtlr 0",
    "    blr",
    // The same with MSR[IS] = 1 around the call.
    "    .global st_call_is",
    "st_call_is:",
    "    mflr 0",
    "    stwu 1, -16(1)",
    "    stw 0, 20(1)",
    "    mfmsr 5",
    "    stw 5, 8(1)",
    "    ori 6, 5, {msr_is}",
    "    mtctr 3",
    "    mtmsr 6",
    "    isync",
    "    bctrl",
    "    lwz 5, 8(1)",
    "    mtmsr 5",
    "    isync",
    "    lwz 0, 20(1)",
    "    addi 1, 1, 16",
    "    mtlr 0",
    "    blr",
    // rfi / rfci / rfmci to a label with MSR = r3; returns the MSR seen there (then MSR = ME).
    "    .global st_rfi_to, st_rfi_land",
    "st_rfi_to:",
    "    lis 4, st_rfi_land@ha",
    "    addi 4, 4, st_rfi_land@l",
    "    mtspr {srr0}, 4",
    "    mtspr {srr1}, 3",
    "    rfi",
    "st_rfi_land:",
    "    mfmsr 3",
    "    li 4, 0x1000",
    "    mtmsr 4",
    "    isync",
    "    blr",
    "    .global st_rfci_to, st_rfci_land",
    "st_rfci_to:",
    "    lis 4, st_rfci_land@ha",
    "    addi 4, 4, st_rfci_land@l",
    "    mtspr {csrr0}, 4",
    "    mtspr {csrr1}, 3",
    "    rfci",
    "st_rfci_land:",
    "    mfmsr 3",
    "    li 4, 0x1000",
    "    mtmsr 4",
    "    isync",
    "    blr",
    "    .global st_rfmci_to, st_rfmci_land",
    "st_rfmci_to:",
    "    lis 4, st_rfmci_land@ha",
    "    addi 4, 4, st_rfmci_land@l",
    "    mtspr {mcsrr0}, 4",
    "    mtspr {mcsrr1}, 3",
    "    rfmci",
    "st_rfmci_land:",
    "    mfmsr 3",
    "    li 4, 0x1000",
    "    mtmsr 4",
    "    isync",
    "    blr",
    // Open MSR[EE] for one instruction.
    "    .global st_ee_window, st_ee_window_next",
    "st_ee_window:",
    "    wrteei 1",
    "st_ee_window_next:",
    "    nop",
    "    wrteei 0",
    "    blr",
    // Open MSR[CE] for one instruction.
    "    .global st_ce_window, st_ce_window_next",
    "st_ce_window:",
    "    mfmsr 5",
    "    oris 6, 5, {msr_ce_hi}",
    "    mtmsr 6",
    "st_ce_window_next:",
    "    nop",
    "    mtmsr 5",
    "    isync",
    "    blr",
    // Set MSR[DE] and run a few instructions (DBCR0 set up by the caller).
    "    .global st_debug_step, st_debug_first",
    "st_debug_step:",
    "    mfmsr 5",
    "    ori 6, 5, {msr_de}",
    "    mtmsr 6",
    "    isync",
    "st_debug_first:",
    "    nop",
    "    nop",
    "    mtmsr 5",
    "    isync",
    "    blr",
    "",
    "    .section .page_a, \"ax\"",
    "    .global st_page_a",
    "st_page_a:",
    "    li 3, 0xA",
    "    blr",
    "    .section .page_b, \"ax\"",
    "    .global st_page_b",
    "st_page_b:",
    "    li 3, 0xB",
    "    blr",
    "",
    // Problem-state code: r3 = a0, r4 = a1 on entry.
    "    .section .user_text, \"ax\"",
    "    .global u_sc, u_sc_insn",
    "u_sc:",
    "    addi 3, 3, 1",
    "u_sc_insn:",
    "    sc",
    "    b .",
    "    .global u_read_sprg",
    "u_read_sprg:",
    "    mfspr 3, {sprg4r}",
    "    mfspr 4, {sprg5r}",
    "    mfspr 5, {sprg6r}",
    "    mfspr 6, {sprg7r}",
    "    sc",
    "    b .",
    "    .global u_usprg0",
    "u_usprg0:",
    "    mtspr {usprg0}, 3",
    "    li 3, 0",
    "    mfspr 3, {usprg0}",
    "    sc",
    "    b .",
    "    .global u_timebase",
    "u_timebase:",
    "    mfspr 3, {tbu_r}",
    "    mfspr 4, {tbl_r}",
    "    sc",
    "    b .",
    "    .global u_load, u_load_insn",
    "u_load:",
    "u_load_insn:",
    "    lwz 3, 0(4)",
    "    sc",
    "    b .",
    "    .global u_store, u_store_insn",
    "u_store:",
    "u_store_insn:",
    "    stw 3, 0(4)",
    "    sc",
    "    b .",
    "    .global u_jump",
    "u_jump:",
    "    mtctr 4",
    "    bctr",
    "    .global u_trap_resume, u_trap_resume_insn",
    "u_trap_resume:",
    "    li 3, 1",
    "u_trap_resume_insn:",
    "    tw 31, 0, 0",
    "    addi 3, 3, 1",
    "    sc",
    "    b .",
    // One privileged instruction each (r3 = 0, r4 = a harmless address/index), then sc.
    "    .global u_p_mfmsr",
    "u_p_mfmsr: mfmsr 3",
    "    sc",
    "    .global u_p_mtmsr",
    "u_p_mtmsr: mtmsr 3",
    "    sc",
    "    .global u_p_wrtee",
    "u_p_wrtee: wrtee 3",
    "    sc",
    "    .global u_p_wrteei",
    "u_p_wrteei: wrteei 1",
    "    sc",
    "    .global u_p_mfsrr0",
    "u_p_mfsrr0: mfspr 3, {srr0}",
    "    sc",
    "    .global u_p_mtsrr0",
    "u_p_mtsrr0: mtspr {srr0}, 3",
    "    sc",
    "    .global u_p_mfsprg0",
    "u_p_mfsprg0: mfspr 3, {sprg0}",
    "    sc",
    "    .global u_p_mtsprg4",
    "u_p_mtsprg4: mtspr {sprg4}, 3",
    "    sc",
    "    .global u_p_mtpid",
    "u_p_mtpid: mtspr {pid}, 3",
    "    sc",
    "    .global u_p_mfpvr",
    "u_p_mfpvr: mfspr 3, {pvr}",
    "    sc",
    "    .global u_p_mfdec",
    "u_p_mfdec: mfspr 3, {dec}",
    "    sc",
    "    .global u_p_mttbl",
    "u_p_mttbl: mtspr {tbl_w}, 3",
    "    sc",
    "    .global u_p_mfesr",
    "u_p_mfesr: mfspr 3, {esr}",
    "    sc",
    "    .global u_p_mfmmucr",
    "u_p_mfmmucr: mfspr 3, {mmucr}",
    "    sc",
    "    .global u_p_mfdcr",
    "u_p_mfdcr: mfdcr 3, {uic0_msr}",
    "    sc",
    "    .global u_p_mtdcr",
    "u_p_mtdcr: mtdcr {uic0_er}, 3",
    "    sc",
    "    .global u_p_tlbwe",
    "u_p_tlbwe: tlbwe 3, 4, 0",
    "    sc",
    "    .global u_p_tlbre",
    "u_p_tlbre: tlbre 3, 4, 0",
    "    sc",
    "    .global u_p_tlbsx",
    "u_p_tlbsx: tlbsx 3, 0, 4",
    "    sc",
    "    .global u_p_tlbsync",
    "u_p_tlbsync: tlbsync",
    "    sc",
    "    .global u_p_rfi",
    "u_p_rfi: rfi",
    "    sc",
    "    .global u_p_rfci",
    "u_p_rfci: rfci",
    "    sc",
    "    .global u_p_rfmci",
    "u_p_rfmci: rfmci",
    "    sc",
    "    .global u_p_iccci",
    "u_p_iccci: iccci 0, 4",
    "    sc",
    "    .global u_p_dccci",
    "u_p_dccci: dccci 0, 4",
    "    sc",
    "    .global u_p_dcbi",
    "u_p_dcbi: dcbi 0, 4",
    "    sc",
    dec = const spr::DEC,
    srr0 = const spr::SRR0,
    srr1 = const spr::SRR1,
    pid = const spr::PID,
    csrr0 = const spr::CSRR0,
    csrr1 = const spr::CSRR1,
    esr = const spr::ESR,
    usprg0 = const spr::USPRG0,
    sprg4r = const spr::SPRG4R,
    sprg5r = const spr::SPRG5R,
    sprg6r = const spr::SPRG6R,
    sprg7r = const spr::SPRG7R,
    tbl_r = const spr::TBL_R,
    tbu_r = const spr::TBU_R,
    sprg0 = const spr::SPRG0,
    sprg4 = const spr::SPRG4,
    tbl_w = const spr::TBL_W,
    pvr = const spr::PVR,
    mcsrr0 = const spr::MCSRR0,
    mcsrr1 = const spr::MCSRR1,
    mmucr = const spr::MMUCR,
    uic0_msr = const kestrel_ppc440::dcr::UIC0_MSR,
    uic0_er = const kestrel_ppc440::dcr::UIC0_ER,
    msr_ds = const msr::DS,
    msr_is = const msr::IS,
    msr_ce_hi = const msr::CE >> 16,
    msr_de = const msr::DE,
);

extern "C" {
    fn st_load(addr: u32) -> u32;
    fn st_store(addr: u32, value: u32);
    fn st_illegal();
    fn st_trap();
    fn st_twi(a: u32);
    fn st_tw_untaken(a: u32);
    fn st_sc();
    fn st_fmr();
    fn st_lwarx(addr: u32) -> u32;
    fn st_stwcx(addr: u32, value: u32);
    fn st_load_ds(addr: u32) -> u32;
    fn st_store_ds(addr: u32, value: u32);
    fn st_is_load(addr: u32) -> u32;
    fn st_is_store(addr: u32, value: u32);
    fn st_ds_forms(data: u32, out: u32);
    fn st_ds_strings(data: u32, out: u32);
    fn st_call(f: u32) -> u32;
    fn st_call_is(f: u32) -> u32;
    fn st_rfi_to(msr: u32) -> u32;
    fn st_rfci_to(msr: u32) -> u32;
    fn st_rfmci_to(msr: u32) -> u32;
    fn st_ee_window();
    fn st_ce_window();
    fn st_debug_step();
}

// The wrappers below are safe functions: each probe either completes, or traps into a
// handler that the calling test has armed (Skip/Return) or that aborts the test; in every
// case control comes back with the registers the calling convention promises.

macro_rules! wrap {
    ($(#[$m:meta])* $name:ident($($a:ident: $t:ty),*) $(-> $r:ty)? = $sym:ident) => {
        $(#[$m])*
        pub fn $name($($a: $t),*) $(-> $r)? {
            // SAFETY: see the comment above the wrappers; the routine follows the SVR4
            // calling convention and touches only the memory its arguments name.
            unsafe { $sym($($a),*) }
        }
    };
}

wrap!(/// Loads a word (returns `addr` if the load trapped and was skipped).
    load(addr: u32) -> u32 = st_load);
wrap!(/// Stores a word.
    store(addr: u32, value: u32) = st_store);
wrap!(/// Executes the all-zero word (an illegal instruction).
    illegal() = st_illegal);
wrap!(/// `tw 31,0,0`.
    trap() = st_trap);
wrap!(/// `twi 31,r3,0`.
    twi(a: u32) = st_twi);
wrap!(/// `tw 8,r3,r3; twi 16,r3,0`: conditions that never hold for r3 > 0.
    tw_untaken(a: u32) = st_tw_untaken);
wrap!(/// `sc` in supervisor state.
    sc() = st_sc);
wrap!(/// `fmr f0,f0`.
    fmr() = st_fmr);
wrap!(/// `lwarx`.
    lwarx(addr: u32) -> u32 = st_lwarx);
wrap!(/// `stwcx.`.
    stwcx(addr: u32, value: u32) = st_stwcx);
wrap!(/// A load with MSR[DS] = 1.
    load_ds(addr: u32) -> u32 = st_load_ds);
wrap!(/// A store with MSR[DS] = 1.
    store_ds(addr: u32, value: u32) = st_store_ds);
wrap!(/// A load with MSR[IS] = 1 (the routine must be mapped in space 1, see `st_is_load`).
    is_load(addr: u32) -> u32 = st_is_load);
wrap!(/// A store with MSR[IS] = 1 (the routine must be mapped in space 1).
    is_store(addr: u32, value: u32) = st_is_store);
wrap!(/// Load/store forms with MSR[DS] = 1 on `data` (see `st_ds_forms`); results to `out`.
    ds_forms(data: u32, out: u32) = st_ds_forms);
wrap!(/// lwarx/stwcx., string and cache operations with MSR[DS] = 1 (see `st_ds_strings`).
    ds_strings(data: u32, out: u32) = st_ds_strings);
wrap!(/// Calls the code at `f` (which must `blr` with a result in r3).
    call(f: u32) -> u32 = st_call);
wrap!(/// Calls the code at `f` with MSR[IS] = 1.
    call_is(f: u32) -> u32 = st_call_is);
wrap!(/// `rfi` to a label with SRR1 = `msr`; returns the MSR seen there.
    rfi_to(msr: u32) -> u32 = st_rfi_to);
wrap!(/// `rfci` to a label with CSRR1 = `msr`; returns the MSR seen there.
    rfci_to(msr: u32) -> u32 = st_rfci_to);
wrap!(/// `rfmci` to a label with MCSRR1 = `msr`; returns the MSR seen there.
    rfmci_to(msr: u32) -> u32 = st_rfmci_to);
wrap!(/// `wrteei 1; nop; wrteei 0`.
    ee_window() = st_ee_window);
wrap!(/// MSR[CE] = 1 for one `nop`.
    ce_window() = st_ce_window);
wrap!(/// MSR[DE] = 1 for two `nop`s.
    debug_step() = st_debug_step);
