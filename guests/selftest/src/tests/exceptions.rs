//! Synchronous exceptions a VMM must inject into its guest: program (illegal, privileged,
//! trap), system call, instruction and data TLB misses, data and instruction storage,
//! alignment, FP unavailable and debug. Each check compares the vector, SRR0, the MSR bits
//! saved in SRR1 and, where the architecture defines them, ESR and DEAR.

use super::{fill_pages, map_user, marker, peek, poke, scratch, PAGE_A, USER_DATA_PAGE};
use crate::boot::enter;
use crate::check::{eq, skip, TestResult};
use crate::cpu::tlb::{self, size, S4K, SR, SX, UR, UX, V};
use crate::cpu::{self, dbcr0, dbsr, esr, msr, spr, vector};
use crate::label;
use crate::snippets::{self, call, load, store, USER_DATA_VA};
use crate::trap::{self, Action};
use crate::user;

/// An address nothing maps.
const UNMAPPED: u32 = 0x3800_0000;
/// For single-page mappings.
const VA_PAGE: u32 = 0x3000_0000;
/// A word of the problem-state data page.
const USER_WORD: u32 = 0x20;

/// The all-zero word: program interrupt, ESR[PIL], SRR0 = the word.
pub fn program_illegal() -> TestResult {
    trap::expect(vector::PROGRAM, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(0);
    snippets::illegal();
    let t = trap::only(vector::PROGRAM)?;
    eq("ESR", t.esr, esr::PIL)?;
    eq("SRR0", t.srr0, label!(st_illegal_insn))?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::KERNEL)
}

/// mfmsr in problem state: program interrupt, ESR[PPR], SRR0 = the mfmsr, SRR1[PR] = 1.
pub fn program_privileged_mfmsr() -> TestResult {
    map_user();
    trap::expect(vector::PROGRAM, Action::Exit);
    enter(user!(u_p_mfmsr), msr::USER, 0, 0);
    let t = trap::only(vector::PROGRAM)?;
    eq("ESR", t.esr, esr::PPR)?;
    eq("SRR0", t.srr0, user!(u_p_mfmsr))?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::USER)
}

/// Every privileged instruction a guest kernel uses raises ESR[PPR] in problem state, at
/// its own address. (r3 = 0 and r4 = the user data page, so nothing harmful would happen
/// if one were wrongly executed; CSRR0/MCSRR0 point at an unmapped address so a wrongly
/// executed rfci/rfmci faults instead of running on.)
pub fn program_privileged_all() -> TestResult {
    map_user();
    cpu::mtspr::<{ spr::CSRR0 }>(UNMAPPED);
    cpu::mtspr::<{ spr::CSRR1 }>(msr::KERNEL);
    cpu::mtspr::<{ spr::MCSRR0 }>(UNMAPPED);
    cpu::mtspr::<{ spr::MCSRR1 }>(msr::KERNEL);
    trap::expect(vector::PROGRAM, Action::Exit);
    let cases: [(u32, &'static str); 26] = [
        (user!(u_p_mfmsr), "mfmsr in problem state"),
        (user!(u_p_mtmsr), "mtmsr in problem state"),
        (user!(u_p_wrtee), "wrtee in problem state"),
        (user!(u_p_wrteei), "wrteei in problem state"),
        (user!(u_p_mfsrr0), "mfspr SRR0 in problem state"),
        (user!(u_p_mtsrr0), "mtspr SRR0 in problem state"),
        (user!(u_p_mfsprg0), "mfspr SPRG0 in problem state"),
        (user!(u_p_mtsprg4), "mtspr SPRG4 in problem state"),
        (user!(u_p_mtpid), "mtspr PID in problem state"),
        (user!(u_p_mfpvr), "mfspr PVR in problem state"),
        (user!(u_p_mfdec), "mfspr DEC in problem state"),
        (user!(u_p_mttbl), "mtspr TBL in problem state"),
        (user!(u_p_mfesr), "mfspr ESR in problem state"),
        (user!(u_p_mfmmucr), "mfspr MMUCR in problem state"),
        (user!(u_p_mfdcr), "mfdcr in problem state"),
        (user!(u_p_mtdcr), "mtdcr in problem state"),
        (user!(u_p_tlbwe), "tlbwe in problem state"),
        (user!(u_p_tlbre), "tlbre in problem state"),
        (user!(u_p_tlbsx), "tlbsx in problem state"),
        (user!(u_p_tlbsync), "tlbsync in problem state"),
        (user!(u_p_rfi), "rfi in problem state"),
        (user!(u_p_rfci), "rfci in problem state"),
        (user!(u_p_rfmci), "rfmci in problem state"),
        (user!(u_p_iccci), "iccci in problem state"),
        (user!(u_p_dccci), "dccci in problem state"),
        (user!(u_p_dcbi), "dcbi in problem state"),
    ];
    for (pc, what) in cases {
        trap::forget();
        enter(pc, msr::USER, 0, USER_DATA_VA);
        let t = trap::get(0);
        eq(what, trap::count(), 1)?;
        eq(what, t.vector, vector::PROGRAM)?;
        eq(what, t.esr, esr::PPR)?;
        eq(what, t.srr0, pc)?;
        eq(what, t.srr1 & msr::PR, msr::PR)?;
    }
    Ok(())
}

/// tw and twi with TO = 31 trap (ESR[PTR], SRR0 = the trap); untrue conditions do not.
pub fn program_trap() -> TestResult {
    trap::expect(vector::PROGRAM, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(0);
    snippets::trap();
    let t = trap::only(vector::PROGRAM)?;
    eq("ESR of tw", t.esr, esr::PTR)?;
    eq("SRR0 of tw", t.srr0, label!(st_trap_insn))?;
    eq("SRR1 of tw", t.srr1 & msr::CHECKED, msr::KERNEL)?;
    trap::forget();
    snippets::twi(5);
    let t = trap::only(vector::PROGRAM)?;
    eq("ESR of twi", t.esr, esr::PTR)?;
    eq("SRR0 of twi", t.srr0, label!(st_twi_insn))?;
    trap::forget();
    snippets::tw_untaken(5);
    eq(
        "interrupts from tw/twi with false conditions",
        trap::count(),
        0,
    )
}

/// sc in supervisor state: system call, SRR0 = the instruction after sc, SRR1[PR] = 0.
pub fn syscall_supervisor() -> TestResult {
    trap::expect(vector::SYSCALL, Action::Return);
    snippets::sc();
    let t = trap::only(vector::SYSCALL)?;
    eq("SRR0", t.srr0, label!(st_sc_next))?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::KERNEL)
}

/// A supervisor jump to an unmapped address: instruction TLB miss with SRR0 = the address.
/// (QEMU also writes DEAR and ESR here; the architecture does not, so they are not checked.)
pub fn itlb_miss_supervisor() -> TestResult {
    trap::expect(vector::ITLB_MISS, Action::Exit);
    enter(UNMAPPED, msr::KERNEL, 0, 0);
    let t = trap::only(vector::ITLB_MISS)?;
    eq("SRR0", t.srr0, UNMAPPED)?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::KERNEL)
}

/// The same from problem state: SRR1[PR] = 1.
pub fn itlb_miss_user() -> TestResult {
    map_user();
    trap::expect(vector::ITLB_MISS, Action::Exit);
    enter(user!(u_jump), msr::USER, 0, UNMAPPED + 0x40);
    let t = trap::only(vector::ITLB_MISS)?;
    eq("SRR0", t.srr0, UNMAPPED + 0x40)?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::USER)
}

/// A load from an unmapped address: data TLB miss, DEAR = the address, ESR[ST] = 0.
pub fn dtlb_miss_load() -> TestResult {
    trap::expect(vector::DTLB_MISS, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(esr::ST);
    cpu::mtspr::<{ spr::DEAR }>(0);
    load(UNMAPPED + 0x10);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR", t.dear, UNMAPPED + 0x10)?;
    eq("ESR", t.esr, 0)?;
    eq("SRR0", t.srr0, label!(st_load_insn))?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::KERNEL)
}

/// A store to an unmapped address: data TLB miss, DEAR = the address, ESR = ST.
pub fn dtlb_miss_store() -> TestResult {
    trap::expect(vector::DTLB_MISS, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(0);
    store(UNMAPPED + 0x24, 1);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR", t.dear, UNMAPPED + 0x24)?;
    eq("ESR", t.esr, esr::ST)?;
    eq("SRR0", t.srr0, label!(st_store_insn))
}

/// A store to a page without SW: data storage interrupt, ESR[ST], DEAR; memory unchanged.
pub fn dsi_store_read_only() -> TestResult {
    fill_pages();
    tlb::map(50, 0, VA_PAGE | V | size(S4K), scratch(PAGE_A), SR);
    eq(
        "load from the read-only page",
        load(VA_PAGE + 8),
        marker(PAGE_A, 8),
    )?;
    trap::expect(vector::DSI, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(0);
    store(VA_PAGE + 8, 0x1234);
    let t = trap::only(vector::DSI)?;
    eq("ESR", t.esr, esr::ST)?;
    eq("DEAR", t.dear, VA_PAGE + 8)?;
    eq("SRR0", t.srr0, label!(st_store_insn))?;
    eq(
        "memory behind the refused store",
        peek(scratch(PAGE_A) + 8),
        marker(PAGE_A, 8),
    )
}

/// Problem-state loads and stores to a supervisor-only page raise DSI (ESR 0 / ST) with
/// SRR1[PR] = 1; the user data page works.
pub fn dsi_user_supervisor_page() -> TestResult {
    map_user();
    fill_pages();
    poke(scratch(USER_DATA_PAGE) + USER_WORD, 0x600D);
    trap::expect(vector::SYSCALL, Action::Exit);
    let got = enter(user!(u_load), msr::USER, 0, USER_DATA_VA + USER_WORD);
    eq("problem-state load from the user page", got, 0x600D)?;
    trap::forget();
    trap::expect(vector::DSI, Action::Exit);
    let kernel = scratch(PAGE_A) + 0x10;
    cpu::mtspr::<{ spr::ESR }>(esr::ST);
    enter(user!(u_load), msr::USER, 0, kernel);
    let t = trap::only(vector::DSI)?;
    eq("ESR of the load", t.esr, 0)?;
    eq("DEAR of the load", t.dear, kernel)?;
    eq("SRR0 of the load", t.srr0, user!(u_load_insn))?;
    eq("SRR1 of the load", t.srr1 & msr::CHECKED, msr::USER)?;
    trap::forget();
    enter(user!(u_store), msr::USER, 0xBAD, kernel);
    let t = trap::only(vector::DSI)?;
    eq("ESR of the store", t.esr, esr::ST)?;
    eq("DEAR of the store", t.dear, kernel)?;
    eq("SRR0 of the store", t.srr0, user!(u_store_insn))?;
    eq(
        "memory behind the refused store",
        peek(kernel),
        marker(PAGE_A, 0x10),
    )
}

/// Fetching from a page without SX (supervisor) or UX (problem state): instruction storage
/// interrupt, SRR0 = the address, ESR = 0. The same page with SX runs.
pub fn isi_no_execute() -> TestResult {
    let page_a = label!(__page_a);
    tlb::map(51, 0, VA_PAGE | V | size(S4K), page_a, SR | UR | UX);
    trap::expect(vector::ISI, Action::Exit);
    cpu::mtspr::<{ spr::ESR }>(esr::ST);
    enter(VA_PAGE, msr::KERNEL, 0, 0);
    let t = trap::only(vector::ISI)?;
    eq("SRR0 (supervisor)", t.srr0, VA_PAGE)?;
    eq("ESR (supervisor)", t.esr, 0)?;
    eq("SRR1 (supervisor)", t.srr1 & msr::CHECKED, msr::KERNEL)?;

    map_user();
    tlb::map(51, 0, VA_PAGE | V | size(S4K), page_a, SR | SX | UR);
    trap::forget();
    enter(user!(u_jump), msr::USER, 0, VA_PAGE);
    let t = trap::only(vector::ISI)?;
    eq("SRR0 (problem state)", t.srr0, VA_PAGE)?;
    eq("SRR1 (problem state)", t.srr1 & msr::CHECKED, msr::USER)?;

    trap::forget();
    trap::disarm(vector::ISI);
    eq("call through the executable alias", call(VA_PAGE), 0xA)
}

/// lwarx from an address that is not word aligned: alignment interrupt with DEAR = the
/// address and ESR = 0. QEMU raises alignment for nothing else the 440 does: not for dcbz to
/// caching-inhibited or write-through storage, not for unaligned lwz/stw (the 440 handles
/// those in hardware too), and not for an unaligned stwcx. without a reservation (QEMU
/// fails the stwcx. before any access), so only lwarx is tested.
pub fn alignment_lwarx() -> TestResult {
    let c = scratch(2);
    poke(c, 77);
    // stwcx. may fail whenever the reservation is lost, for example to a timer interrupt
    // taken between the pair (under a hypervisor that happens; QEMU drops reservations on
    // interrupts): retry as real code does. Natively the first attempt succeeds.
    for _ in 0..100 {
        eq("aligned lwarx", snippets::lwarx(c), 77)?;
        snippets::stwcx(c, 78);
        if peek(c) == 78 {
            break;
        }
    }
    eq("interrupts from aligned lwarx/stwcx.", trap::count(), 0)?;
    trap::expect(vector::ALIGNMENT, Action::Skip);
    cpu::mtspr::<{ spr::ESR }>(0);
    cpu::mtspr::<{ spr::DEAR }>(0);
    snippets::lwarx(c + 2);
    let t = trap::only(vector::ALIGNMENT)?;
    eq("DEAR of lwarx", t.dear, c + 2)?;
    eq("ESR of lwarx", t.esr, 0)?;
    eq("SRR0 of lwarx", t.srr0, label!(st_lwarx_insn))?;
    eq("SRR1 of lwarx", t.srr1 & msr::CHECKED, msr::KERNEL)?;
    eq("memory after the aligned lwarx/stwcx. pair", peek(c), 78)
}

/// An FP instruction with MSR[FP] = 0: FP unavailable, SRR0 = the instruction; with
/// MSR[FP] = 1 it runs.
pub fn fp_unavailable() -> TestResult {
    trap::expect(vector::FP_UNAVAILABLE, Action::Skip);
    snippets::fmr();
    let t = trap::only(vector::FP_UNAVAILABLE)?;
    eq("SRR0", t.srr0, label!(st_fmr_insn))?;
    eq("SRR1", t.srr1 & msr::CHECKED, msr::KERNEL)?;
    cpu::mtmsr(msr::KERNEL | msr::FP);
    snippets::fmr();
    cpu::mtmsr(msr::KERNEL);
    eq("interrupts from fmr with MSR[FP] = 1", trap::count(), 1)
}

/// DBCR0[IDM, ICMP] with MSR[DE] = 1: a debug interrupt (critical class: CSRR0/1) after
/// the first instruction completes, with DBSR[ICMP] set. The handler clears DBCR0 and
/// returns with DE off.
pub fn debug_single_step() -> TestResult {
    cpu::mtspr::<{ spr::DBSR }>(0xFFFF_FFFF);
    cpu::mtspr::<{ spr::DBCR0 }>(dbcr0::IDM | dbcr0::ICMP);
    trap::expect(vector::DEBUG, Action::Return);
    snippets::debug_step();
    cpu::mtspr::<{ spr::DBCR0 }>(0);
    let t = trap::only(vector::DEBUG)?;
    eq(
        "CSRR0 (the instruction after the first one completed)",
        t.srr0,
        label!(st_debug_first),
    )?;
    eq("CSRR1[DE]", t.srr1 & msr::DE, msr::DE)?;
    eq("DBSR[ICMP]", t.extra & dbsr::ICMP, dbsr::ICMP)?;
    eq(
        "MSR on entry to the debug handler (DE, CE cleared)",
        t.handler_msr,
        msr::ME,
    )
}

/// Machine checks cannot be raised on QEMU's bamboo: nothing drives the 440's machine-check
/// input (QEMU raises it only for some 6xx/970 hardware inputs) and accesses to unassigned
/// physical addresses do not fault. rfmci is tested in rfmci_return.
pub fn machine_check() -> TestResult {
    skip("no machine-check source on QEMU bamboo (no MCP input, unassigned accesses do not fault)")
}
