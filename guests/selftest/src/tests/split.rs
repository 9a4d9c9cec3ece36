//! Split translation spaces, MSR[IS] != MSR[DS] (issue 9, finding 1): instruction fetches
//! translate through the TS = IS entries, data accesses through the TS = DS entries, even
//! when both map the same effective address, down to the same 4 KiB page as the code.
//!
//! The layout is the reproducer: the RAM entry maps EA 0..16 MiB (and more) to
//! physical 0..16 MiB in space 0; entry [`TS1_ENTRY`] maps EA 0..16 MiB in space 1 to
//! physical 16..32 MiB (supervisor read/write/execute). The image lies below 16 MiB, so
//! every address of it has a space-1 twin [`TWIN`] bytes higher in physical memory, which
//! the tests write through the 1:1 mapping to tell the two apart.

use super::{fill_pages, marker, peek, poke, scratch, PAGE_A};
use crate::check::{eq, TestResult};
use crate::cpu::tlb::{self, size, S16M, SR, SW, SX, TS, V};
use crate::label;
use crate::snippets;
use core::arch::asm;

/// The guest TLB entry that maps space 1.
const TS1_ENTRY: u32 = 0;
/// Space 1 maps EA `a` (below 16 MiB) to physical `a + TWIN`.
const TWIN: u32 = 16 << 20;

/// Installs the space-1 entry EA 0..16 MiB → physical 16..32 MiB.
fn map_ts1() {
    tlb::map(TS1_ENTRY, 0, V | TS | size(S16M), TWIN, SR | SW | SX);
}

/// Copies `[from, to)` of the image to its space-1 twin and makes it fetchable there.
fn copy_to_twin(from: u32, to: u32) {
    for a in (from..to).step_by(4) {
        poke(a + TWIN, peek(a));
    }
    let mut line = from & !31;
    while line < to {
        // SAFETY: the twin lies in RAM mapped 1:1 (the RAM entry covers 256 MiB); cache
        // block operations change no data.
        unsafe {
            asm!("dcbst 0, {a}", "msync", "icbi 0, {a}", a = in(reg) line + TWIN,
                 options(nostack, preserves_flags));
        }
        line += 32;
    }
    // SAFETY: a context synchronization, no memory effect.
    unsafe { asm!("isync", options(nostack, preserves_flags)) };
}

/// IS = 0, DS = 1: a load from the code's own 4 KiB page (the load instruction itself)
/// and from another page both return the space-1 data.
pub fn ds_load() -> TestResult {
    map_ts1();
    let code = label!(st_load_ds_insn);
    poke(code + TWIN, 0x5EC0_0001);
    eq(
        "load with MSR[DS] = 1 from the code's own page",
        snippets::load_ds(code),
        0x5EC0_0001,
    )?;
    let other = scratch(PAGE_A) + 0x40;
    poke(other + TWIN, 0x5EC0_0002);
    eq(
        "load with MSR[DS] = 1 from another page",
        snippets::load_ds(other),
        0x5EC0_0002,
    )?;
    eq(
        "the same load once more (entries filled before)",
        snippets::load_ds(code),
        0x5EC0_0001,
    )
}

/// IS = 0, DS = 1: a store into the code's own page and one into another page reach the
/// space-1 twins and leave the space-0 memory (the code itself) alone.
pub fn ds_store() -> TestResult {
    fill_pages();
    map_ts1();
    let code = label!(st_store_ds_insn);
    let insn = peek(code);
    poke(code + TWIN, 0);
    snippets::store_ds(code, 0x5EC0_0003);
    eq(
        "space-1 twin of the code page after the store",
        peek(code + TWIN),
        0x5EC0_0003,
    )?;
    eq("the store instruction itself (space 0)", peek(code), insn)?;
    let other = scratch(PAGE_A) + 0x80;
    poke(other + TWIN, 0);
    snippets::store_ds(other, 0x5EC0_0004);
    eq(
        "space-1 twin of another page after the store",
        peek(other + TWIN),
        0x5EC0_0004,
    )?;
    eq(
        "space-0 word of that page",
        peek(other),
        marker(PAGE_A, 0x80),
    )
}

/// IS = 1, DS = 0: code fetched from the space-1 twin loads and stores space-0 data, in
/// its own page and in another page.
pub fn is_fetch_ds0_data() -> TestResult {
    fill_pages();
    map_ts1();
    copy_to_twin(label!(st_is_load_start), label!(st_is_load_end));
    copy_to_twin(label!(st_is_store_start), label!(st_is_store_end));
    let data = label!(st_is_load_data);
    // The twin's copy of the data word differs: a load through space 1 would return it.
    poke(data + TWIN, 0xBAD0_0001);
    eq(
        "load with MSR[IS] = 1 from the code's own page (space 0)",
        snippets::is_load(data),
        0x15D5_A7A0,
    )?;
    eq(
        "load with MSR[IS] = 1 from another page",
        snippets::is_load(scratch(PAGE_A) + 0x20),
        marker(PAGE_A, 0x20),
    )?;
    // A store into the routine's own page (its data word), in space 0.
    let word = label!(st_is_store_data);
    poke(word, 0);
    poke(word + TWIN, 0x7317_0000);
    snippets::is_store(word, 0x5EC0_0005);
    eq(
        "space-0 word after the store with MSR[IS] = 1",
        peek(word),
        0x5EC0_0005,
    )?;
    eq("its space-1 twin", peek(word + TWIN), 0x7317_0000)
}

/// IS = 0, DS = 1: byte, algebraic halfword, byte-reversed, update, multiple and dcbz forms
/// on a data block in the routine's own page all act on the space-1 twin.
pub fn ds_forms() -> TestResult {
    map_ts1();
    let data = label!(st_ds_forms_data);
    let twin = data + TWIN;
    for i in 0..32 {
        poke(
            twin + 4 * i,
            if (8..16).contains(&i) { 0xFFFF_FFFF } else { 0 },
        );
    }
    for (i, w) in [0x1122_B344, 0x5566_7788, 0x99AA_BBCC, 0xDDEE_FF00]
        .into_iter()
        .enumerate()
    {
        poke(twin + 4 * i as u32, w);
    }
    let out = scratch(FORMS_OUT_PAGE);
    snippets::ds_forms(data, out);
    eq("lbz", peek(out), 0x22)?;
    eq("lha (sign-extended)", peek(out + 4), 0xFFFF_B344)?;
    eq("lwbrx", peek(out + 8), 0x44B3_2211)?;
    eq(
        "stwu's update of RA (offset from the block)",
        peek(out + 12),
        20,
    )?;
    for (i, w) in [0x1122_B344, 0x5566_7788, 0x99AA_BBCC, 0xDDEE_FF00]
        .into_iter()
        .enumerate()
    {
        eq("lmw r28..r31", peek(out + 16 + 4 * i as u32), w)?;
    }
    eq("stb and sth", peek(twin + 16), 0x2200_B344)?;
    eq("stwu", peek(twin + 20), 0x44B3_2211)?;
    for i in 8..16 {
        eq("dcbz of the block's second line", peek(twin + 4 * i), 0)?;
    }
    eq("stmw r30", peek(twin + 96), 0x99AA_BBCC)?;
    eq("stmw r31", peek(twin + 100), 0xDDEE_FF00)?;
    for i in 0..32 {
        eq("the space-0 block stays zero", peek(data + 4 * i), 0)?;
    }
    Ok(())
}

/// Scratch page for `ds_forms`' and `ds_strings`' output.
const FORMS_OUT_PAGE: u32 = 6;

/// IS = 0, DS = 1: lwarx/stwcx. (an increment loop that succeeds, then a stwcx. without a
/// reservation that fails), lswi/stswi/stswx and dcbst/dcbf/icbi on a block in the routine's own page.
pub fn ds_strings() -> TestResult {
    map_ts1();
    let data = label!(st_ds_strings_data);
    let twin = data + TWIN;
    for i in 0..16 {
        poke(twin + 4 * i, 0xEEEE_EEEE);
    }
    for (i, w) in [0x0102_0304, 0x0506_0708, 0x090A_0B0C]
        .into_iter()
        .enumerate()
    {
        poke(twin + 4 * i as u32, w);
    }
    let out = scratch(FORMS_OUT_PAGE);
    snippets::ds_strings(data, out);
    eq("lwarx result + 1", peek(out), 0x0102_0305)?;
    eq(
        "CR0 after stwcx. with the reservation",
        peek(out + 4) >> 28,
        0b0010,
    )?;
    eq("CR0 after stwcx. without one", peek(out + 8) >> 28, 0)?;
    eq("the stwcx. store", peek(twin), 0x0102_0305)?;
    eq("lswi r28", peek(out + 12), 0x0102_0305)?;
    eq("lswi r29", peek(out + 16), 0x0506_0708)?;
    eq(
        "lswi r30 (two bytes, zero-filled)",
        peek(out + 20),
        0x090A_0000,
    )?;
    eq("stswi word 0", peek(twin + 32), 0x0102_0305)?;
    eq("stswi word 1", peek(twin + 36), 0x0506_0708)?;
    eq("stswi word 2 (two bytes)", peek(twin + 40), 0x090A_EEEE)?;
    eq("stswx word 0", peek(twin + 48), 0x0506_0708)?;
    eq("stswx word 1 (two bytes)", peek(twin + 52), 0x090A_EEEE)?;
    for i in 0..16 {
        eq("the space-0 block stays zero", peek(data + 4 * i), 0)?;
    }
    Ok(())
}
