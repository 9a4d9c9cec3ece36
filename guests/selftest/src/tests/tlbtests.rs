//! The software-managed TLB (PPC440 UM §5): tlbwe/tlbre/tlbsx, translation by size, TID
//! and translation space, invalidation, and the cache and synchronization instructions.

use super::{fill_pages, marker, peek, poke, scratch, PAGE_A, PAGE_B};
use crate::check::{ensure, eq, skip, TestResult};
use crate::cpu::tlb::{
    self, size, G, I, M, S16M, S4K, SR, SW, SX, TS, U0, U1, U2, U3, UR, UW, UX, V, W,
};
use crate::cpu::{self, msr, spr, vector};
use crate::label;
use crate::snippets::{self, call, call_is, load, store};
use crate::trap::{self, Action};
use core::arch::asm;
use kestrel_ppc440::tlb::{word0, PageSize};

/// 1 GiB aligned, so every page size can map it.
const VA: u32 = 0x4000_0000;
/// For single 4 KiB pages.
const VA_PAGE: u32 = 0x3000_0000;
const RW: u32 = SR | SW;

fn w0(ea: u32, code: u32) -> u32 {
    ea | V | size(code)
}

/// All three words and the TID read back as written, for valid and invalid entries; a
/// word 1 or word 2 write changes only that word (and not the TID).
pub fn read_write_words() -> TestResult {
    let cases: [(u32, u8, u32, u32, u32); 4] = [
        (
            5,
            0x42,
            0x4000_0000 | V | TS | size(S4K),
            0x1234_5003,
            U0 | U1 | U2 | U3 | W | G | UX | UR | SR,
        ),
        (
            6,
            0x00,
            0x4000_0400 | V | size(0),
            0x0000_0400,
            I | M | SX | SW | SR,
        ),
        (
            7,
            0xFF,
            0x5000_0000 | V | size(9),
            0x1000_0000 | 0xF,
            U0 | U2 | M | UW | SX,
        ),
        (8, 0x01, 0x6000_0000 | size(2), 0x0001_0000, 0),
    ];
    for &(i, tid, a, b, c) in &cases {
        tlb::write_raw(i, tid, a, b, c);
    }
    cpu::mtspr::<{ spr::MMUCR }>(0);
    for &(i, tid, a, b, c) in &cases {
        let (ra, rb, rc, rtid) = tlb::read(i);
        eq("tlbre word 0", ra, a)?;
        eq("tlbre word 1", rb, b)?;
        eq("tlbre word 2", rc, c)?;
        eq("TID (MMUCR[STID] after tlbre)", rtid as u32, tid as u32)?;
    }
    tlb::set_search(0x99, false);
    tlb::write_word(5, 1, 0x0ABC_D000);
    tlb::write_word(5, 2, SR | UR);
    let (ra, rb, rc, rtid) = tlb::read(5);
    eq("word 0 after writing words 1 and 2", ra, cases[0].2)?;
    eq("word 1 after writing it alone", rb, 0x0ABC_D000)?;
    eq("word 2 after writing it alone", rc, SR | UR)?;
    eq("TID after writing words 1 and 2", rtid as u32, 0x42)
}

/// tlbsx finds the entry covering an EA (rA + rB), sets CR0[EQ] on a hit, clears it on a
/// miss; the non-record form returns the same index.
pub fn tlbsx_index_and_cr0() -> TestResult {
    tlb::map(9, 0, w0(VA, S4K), scratch(PAGE_A), RW);
    tlb::map(17, 0, w0(VA + 0x1_0000, 3), 0, RW);
    tlb::set_search(0, false);
    let (i, hit) = tlb::sx_dot(VA + 0x123);
    ensure(hit, "tlbsx. of a mapped EA left CR0[EQ] clear")?;
    eq("tlbsx. index", i, 9)?;
    let (i, hit) = tlb::sx_dot_indexed(VA, 0xFFC);
    ensure(hit, "tlbsx. rA,rB of a mapped EA left CR0[EQ] clear")?;
    eq("tlbsx. rA,rB index", i, 9)?;
    let (i, hit) = tlb::sx_dot(VA + 0x1_8000);
    ensure(hit, "tlbsx. inside a 64 KiB page left CR0[EQ] clear")?;
    eq("tlbsx. index of the 64 KiB page", i, 17)?;
    let (_, hit) = tlb::sx_dot(VA + 0x1000);
    ensure(!hit, "tlbsx. of an unmapped EA set CR0[EQ]")?;
    eq("tlbsx (no record form) index", tlb::sx(VA + 4), 9)
}

/// tlbsx matches TID 0 entries for any MMUCR[STID], other entries only for their TID.
pub fn tlbsx_tid() -> TestResult {
    let (x, y) = (VA, VA + 0x1000);
    tlb::map(10, 7, w0(x, S4K), scratch(PAGE_A), RW);
    tlb::map(11, 0, w0(x, S4K), scratch(PAGE_B), RW);
    tlb::map(12, 0x22, w0(y, S4K), scratch(PAGE_B), RW);
    eq(
        "tlbsx X with STID 7",
        tlb::search(x, 7, false).unwrap_or(99),
        10,
    )?;
    eq(
        "tlbsx X with STID 8 (finds the global entry)",
        tlb::search(x, 8, false).unwrap_or(99),
        11,
    )?;
    eq(
        "tlbsx X with STID 0",
        tlb::search(x, 0, false).unwrap_or(99),
        11,
    )?;
    eq(
        "tlbsx Y with STID 0x22",
        tlb::search(y, 0x22, false).unwrap_or(99),
        12,
    )?;
    ensure(
        tlb::search(y, 0x23, false).is_none(),
        "tlbsx Y with STID 0x23 found an entry",
    )?;
    ensure(
        tlb::search(y, 0, false).is_none(),
        "tlbsx Y with STID 0 found an entry",
    )
}

/// tlbsx searches the translation space MMUCR[STS] names.
pub fn tlbsx_ts() -> TestResult {
    tlb::map(13, 0, w0(VA, S4K) | TS, scratch(PAGE_A), RW);
    tlb::map(14, 0, w0(VA, S4K), scratch(PAGE_B), RW);
    eq(
        "tlbsx with STS = 1",
        tlb::search(VA, 0, true).unwrap_or(99),
        13,
    )?;
    match tlb::search(VA, 0, false) {
        Some(14) => Ok(()),
        // QEMU 7.2's helper_440_tlbsx passes only MMUCR[STID] to its search; STS is ignored,
        // so the space-1 entry (lower index) is found. Not a failure of the code under test.
        Some(13) => skip("tlbsx with STS = 0 found the TS = 1 entry: QEMU 7.2 ignores MMUCR[STS]"),
        Some(i) => eq("tlbsx with STS = 0", i, 14),
        None => Err("tlbsx with STS = 0 found nothing"),
    }
}

/// With two valid entries for one EA, the lower index translates (QEMU's and Kestrel's
/// rule; silicon leaves multiple hits undefined) and tlbsx reports it.
pub fn first_match() -> TestResult {
    fill_pages();
    tlb::map(20, 0, w0(VA, S4K), scratch(PAGE_A), RW);
    tlb::map(21, 0, w0(VA, S4K), scratch(PAGE_B), RW);
    eq(
        "load through two matching entries",
        load(VA + 8),
        marker(PAGE_A, 8),
    )?;
    eq(
        "tlbsx with two matching entries",
        tlb::search(VA, 0, false).unwrap_or(99),
        20,
    )?;
    tlb::invalidate(20);
    eq(
        "load after invalidating the first entry",
        load(VA + 8),
        marker(PAGE_B, 8),
    )?;
    eq(
        "tlbsx after invalidating the first entry",
        tlb::search(VA, 0, false).unwrap_or(99),
        21,
    )
}

/// The probe word for page-size tests, at the start of scratch page 4 (so that the 1 KiB
/// frame holding it is 4 KiB aligned too).
fn probe() -> u32 {
    scratch(4) + 0x10
}

/// Every page size the 440 implements maps VA onto the aligned frame holding the probe
/// word: stores through the mapping reach it, stores to it are seen through the mapping.
pub fn page_sizes() -> TestResult {
    for size in PageSize::ALL {
        let (code, bytes) = (size.code() as u32, size.bytes());
        let base = probe() & !(bytes - 1);
        let ea = VA + (probe() - base);
        tlb::map(30, 0, w0(VA, code), base, RW);
        eq(
            "SIZE field read back",
            word0::SIZE.get(tlb::read(30).0),
            code,
        )?;
        let v = 0x5A5A_0000 | code;
        store(ea, v);
        eq(
            "word stored through the mapping, read 1:1",
            peek(probe()),
            v,
        )?;
        poke(probe(), !v);
        eq("word stored 1:1, read through the mapping", load(ea), !v)?;
    }
    Ok(())
}

/// Each page ends where its size says: the last word of the page (where it is RAM) reads
/// the right frame, the first address past it misses (data TLB miss with DEAR = EA).
pub fn page_extent() -> TestResult {
    trap::expect(vector::DTLB_MISS, Action::Skip);
    for size in PageSize::ALL {
        let (code, bytes) = (size.code() as u32, size.bytes());
        let base = probe() & !(bytes - 1);
        tlb::map(31, 0, w0(VA, code), base, SR);
        if base + bytes <= 16 << 20 {
            eq(
                "last word of the page",
                load(VA + bytes - 4),
                peek(base + bytes - 4),
            )?;
        }
        trap::forget();
        load(VA.wrapping_add(bytes));
        if code == 0 && trap::count() == 0 {
            // QEMU's softmmu caches translations in 4 KiB units (TARGET_PAGE_SIZE) and
            // reports every 440 page as 4 KiB to it, so a 1 KiB page is seen 4 KiB wide.
            continue;
        }
        let t = trap::only(vector::DTLB_MISS)?;
        eq(
            "DEAR of the miss past the page",
            t.dear,
            VA.wrapping_add(bytes),
        )?;
    }
    trap::forget();
    load(VA - 4);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR of the miss below the page", t.dear, VA - 4)
}

/// Translation matches TID 0 for every PID and other TIDs only for that PID.
pub fn pid_translation() -> TestResult {
    fill_pages();
    tlb::map(40, 5, w0(VA, S4K), scratch(PAGE_A), RW);
    tlb::map(41, 0, w0(VA + 0x1000, S4K), scratch(PAGE_B), RW);
    trap::expect(vector::DTLB_MISS, Action::Skip);
    cpu::mtspr::<{ spr::PID }>(5);
    let private = load(VA);
    let global = load(VA + 0x1000);
    cpu::mtspr::<{ spr::PID }>(0);
    eq("interrupts with PID 5", trap::count(), 0)?;
    eq("TID 5 entry with PID 5", private, marker(PAGE_A, 0))?;
    eq("TID 0 entry with PID 5", global, marker(PAGE_B, 0))?;
    cpu::mtspr::<{ spr::PID }>(6);
    load(VA + 4);
    let global = load(VA + 0x1004);
    cpu::mtspr::<{ spr::PID }>(0);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR of the TID 5 page with PID 6", t.dear, VA + 4)?;
    eq("TID 0 entry with PID 6", global, marker(PAGE_B, 4))?;
    trap::forget();
    load(VA + 8);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR of the TID 5 page with PID 0", t.dear, VA + 8)
}

/// Data accesses with MSR[DS] = 1 use TS = 1 entries only.
pub fn ts1_data() -> TestResult {
    fill_pages();
    tlb::map(42, 0, w0(VA_PAGE, S4K) | TS, scratch(PAGE_A), RW);
    tlb::map(43, 0, w0(VA_PAGE, S4K), scratch(PAGE_B), RW);
    eq(
        "load with MSR[DS] = 1",
        snippets::load_ds(VA_PAGE + 4),
        marker(PAGE_A, 4),
    )?;
    eq(
        "load with MSR[DS] = 0",
        load(VA_PAGE + 4),
        marker(PAGE_B, 4),
    )?;
    tlb::invalidate(42);
    trap::expect(vector::DTLB_MISS, Action::Skip);
    snippets::load_ds(VA_PAGE + 4);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("SRR0 of the miss", t.srr0, label!(st_load_ds_insn))?;
    eq(
        "SRR1[DS,IS] of the miss",
        t.srr1 & (msr::DS | msr::IS),
        msr::DS,
    )?;
    eq(
        "MSR on entry to the handler (DS cleared)",
        t.handler_msr,
        msr::ME,
    )?;
    eq("DEAR of the miss", t.dear, VA_PAGE + 4)
}

/// Instruction fetches with MSR[IS] = 1 use TS = 1 entries only.
pub fn ts1_instruction() -> TestResult {
    // The code itself, 1:1 in space 1 too.
    tlb::map(44, 0, w0(0, S16M) | TS, 0, SX | SR);
    tlb::map(45, 0, w0(VA_PAGE, S4K) | TS, label!(__page_a), SX | SR);
    tlb::map(46, 0, w0(VA_PAGE, S4K), label!(__page_b), SX | SR);
    eq(
        "call with MSR[IS] = 1 (TS = 1 entry)",
        call_is(VA_PAGE),
        0xA,
    )?;
    eq("call with MSR[IS] = 0 (TS = 0 entry)", call(VA_PAGE), 0xB)?;
    eq("call 1:1 with MSR[IS] = 1", call_is(label!(st_page_b)), 0xB)
}

/// An invalidated entry no longer translates or matches tlbsx.
pub fn invalidate() -> TestResult {
    fill_pages();
    tlb::map(47, 0, w0(VA_PAGE, S4K), scratch(PAGE_A), RW);
    eq("load before invalidation", load(VA_PAGE), marker(PAGE_A, 0))?;
    tlb::invalidate(47);
    eq("word 0 V after invalidation", tlb::read(47).0 & V, 0)?;
    ensure(
        tlb::search(VA_PAGE, 0, false).is_none(),
        "tlbsx found an invalidated entry",
    )?;
    trap::expect(vector::DTLB_MISS, Action::Skip);
    load(VA_PAGE);
    let t = trap::only(vector::DTLB_MISS)?;
    eq("DEAR of the load after invalidation", t.dear, VA_PAGE)
}

/// Code runs through an alias mapping, and rewriting the entry switches the code seen.
pub fn execute_alias() -> TestResult {
    tlb::map(48, 0, w0(VA_PAGE, S4K), label!(__page_a), SX | SR);
    eq("call through the alias of page A", call(VA_PAGE), 0xA)?;
    tlb::map(48, 0, w0(VA_PAGE, S4K), label!(__page_b), SX | SR);
    eq(
        "call through the same alias remapped to page B",
        call(VA_PAGE),
        0xB,
    )
}

/// dcbz zeroes exactly one 32-byte line; dcbst, dcbf, dcbt, dcbtst, icbi, dcbi (on a line
/// already written back), iccci, dccci, msync, mbar, isync and tlbsync complete without an
/// interrupt and leave memory alone. (On silicon, dccci would discard dirty lines
/// everywhere; the selftest targets QEMU and Kestrel, where it is a no-op.)
pub fn cache_and_sync_ops() -> TestResult {
    let c = scratch(2);
    for off in (0..96).step_by(4) {
        poke(c + off, 0xFFFF_FFFF);
    }
    let line = c + 32;
    // SAFETY: every operand is a line of scratch page 2, mapped 1:1 read/write; the cache
    // operations change no memory except dcbz's line.
    unsafe {
        asm!("dcbz 0, {a}", a = in(reg) line, options(nostack, preserves_flags));
        asm!(
            "dcbst 0, {a}", "dcbf 0, {a}", "dcbt 0, {a}", "dcbtst 0, {a}", "icbi 0, {a}",
            "dcbst 0, {a}", "msync", "dcbi 0, {a}",
            "iccci 0, {a}", "dccci 0, {a}", "msync", "mbar", "isync", "tlbsync", "isync",
            a = in(reg) line, options(nostack, preserves_flags)
        );
    }
    eq(
        "interrupts from cache and sync instructions",
        trap::count(),
        0,
    )?;
    for off in (0..96).step_by(4) {
        let want = if (32..64).contains(&off) {
            0
        } else {
            0xFFFF_FFFF
        };
        eq("memory after dcbz of the middle line", peek(c + off), want)?;
    }
    Ok(())
}
