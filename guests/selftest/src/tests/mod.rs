//! The suite, in the order it runs, and what tests share: scratch pages and the
//! problem-state mappings.
//!
//! Every test starts from the state `reset_machine` establishes (main.rs) and may leave
//! anything behind that it resets too. TLB entries 0..59 are the tests' own, 60/61 hold the
//! problem-state aliases; test virtual addresses live at 0x1000_0000 (problem-state aliases),
//! 0x3000_0000..0x3FFF_FFFF (single pages) and 0x4000_0000 (page-size tests, 1 GiB aligned),
//! all outside the 1:1 mapping of 0..256 MiB.

mod exceptions;
mod interrupts;
mod msr;
mod rfi;
mod split;
mod spr;
mod timer;
mod tlbtests;

use crate::check::TestResult;
use crate::cpu::tlb;
use crate::snippets::{USER_DATA_VA, USER_VA};

/// One entry of the suite: the test's name and the test.
pub type Test = (&'static str, fn() -> TestResult);

pub static TESTS: &[Test] = &[
    ("msr_mtmsr_roundtrip", msr::mtmsr_roundtrip),
    ("msr_wrtee", msr::wrtee),
    ("msr_wrteei", msr::wrteei),
    ("spr_save_restore_registers", spr::save_restore_registers),
    ("spr_sprg0_7", spr::sprg),
    ("spr_sprg4_7_user_read", spr::sprg_user_read),
    ("spr_usprg0", spr::usprg0),
    ("spr_esr_dear", spr::esr_dear),
    ("spr_ivpr_ivor", spr::ivpr_ivor),
    ("spr_pid_mmucr", spr::pid_mmucr),
    ("spr_ccr0_ccr1", spr::ccr0_ccr1),
    ("spr_debug_registers", spr::debug_registers),
    ("spr_timebase_write", spr::timebase_write),
    ("spr_pvr_pir", spr::pvr_pir),
    ("timer_tcr_roundtrip", timer::tcr_roundtrip),
    ("timer_dec_expiry", timer::dec_expiry),
    ("timer_dec_read", timer::dec_read),
    (
        "timer_tsr_write_one_to_clear",
        timer::tsr_write_one_to_clear,
    ),
    ("timer_dec_interrupt", timer::dec_interrupt),
    ("timer_dec_pending_until_ee", timer::dec_pending_until_ee),
    ("timer_dec_autoreload", timer::dec_autoreload),
    ("timer_fit_interrupt", timer::fit_interrupt),
    ("timer_watchdog_interrupt", timer::watchdog_interrupt),
    ("tlb_read_write_words", tlbtests::read_write_words),
    ("tlb_tlbsx_index_and_cr0", tlbtests::tlbsx_index_and_cr0),
    ("tlb_tlbsx_tid", tlbtests::tlbsx_tid),
    ("tlb_tlbsx_ts", tlbtests::tlbsx_ts),
    ("tlb_first_match", tlbtests::first_match),
    ("tlb_page_sizes", tlbtests::page_sizes),
    ("tlb_page_extent", tlbtests::page_extent),
    ("tlb_pid_translation", tlbtests::pid_translation),
    ("tlb_ts1_data", tlbtests::ts1_data),
    ("tlb_ts1_instruction", tlbtests::ts1_instruction),
    ("tlb_invalidate", tlbtests::invalidate),
    ("tlb_execute_alias", tlbtests::execute_alias),
    ("cache_and_sync_ops", tlbtests::cache_and_sync_ops),
    ("split_ds1_load", split::ds_load),
    ("split_ds1_store", split::ds_store),
    ("split_ds1_forms", split::ds_forms),
    ("split_ds1_strings", split::ds_strings),
    ("split_is1_fetch_ds0_data", split::is_fetch_ds0_data),
    ("rfi_supervisor", rfi::rfi_supervisor),
    ("rfi_user_sc", rfi::rfi_user_sc),
    ("rfci_return", rfi::rfci_return),
    ("rfmci_return", rfi::rfmci_return),
    ("user_resume_after_trap", rfi::user_resume_after_trap),
    ("interrupt_entry_msr", rfi::interrupt_entry_msr),
    ("program_illegal", exceptions::program_illegal),
    (
        "program_privileged_mfmsr_user",
        exceptions::program_privileged_mfmsr,
    ),
    (
        "program_privileged_all_user",
        exceptions::program_privileged_all,
    ),
    ("program_trap", exceptions::program_trap),
    ("syscall_supervisor", exceptions::syscall_supervisor),
    ("itlb_miss_supervisor", exceptions::itlb_miss_supervisor),
    ("itlb_miss_user", exceptions::itlb_miss_user),
    ("dtlb_miss_load", exceptions::dtlb_miss_load),
    ("dtlb_miss_store", exceptions::dtlb_miss_store),
    ("dsi_store_read_only", exceptions::dsi_store_read_only),
    (
        "dsi_user_supervisor_page",
        exceptions::dsi_user_supervisor_page,
    ),
    ("isi_no_execute", exceptions::isi_no_execute),
    ("alignment_lwarx", exceptions::alignment_lwarx),
    ("fp_unavailable", exceptions::fp_unavailable),
    ("debug_single_step", exceptions::debug_single_step),
    ("machine_check", exceptions::machine_check),
    ("uic_registers", interrupts::uic_registers),
    ("external_uart1", interrupts::external_uart1),
    ("critical_input_uart1", interrupts::critical_input_uart1),
];

/// TLB entries the problem-state mappings use.
const USER_CODE_ENTRY: u32 = 60;
const USER_DATA_ENTRY: u32 = 61;

/// Scratch page `n` (0..8) of the image: its physical (= 1:1 virtual) address.
pub fn scratch(n: u32) -> u32 {
    assert!(n < 8);
    crate::label!(__scratch) + n * 4096
}

/// Page A/B: scratch pages 0/1, filled with a recognizable pattern by `fill_pages`.
pub const PAGE_A: u32 = 0;
pub const PAGE_B: u32 = 1;
/// Scratch page 3 is the problem-state data page.
pub const USER_DATA_PAGE: u32 = 3;

/// The word at offset `off` of page A or B after `fill_pages`.
pub fn marker(page: u32, off: u32) -> u32 {
    0xA000_0000 + (page << 24) + off
}

/// Fills pages A and B with their markers.
pub fn fill_pages() {
    for page in [PAGE_A, PAGE_B] {
        for off in (0..4096).step_by(4) {
            poke(scratch(page) + off, marker(page, off));
        }
    }
}

/// Reads a word of the selftest's own memory (1:1 mapped).
pub fn peek(addr: u32) -> u32 {
    // SAFETY: callers pass addresses inside the image's scratch pages, statics or code,
    // all mapped 1:1 by the RAM entry.
    unsafe { (addr as *const u32).read_volatile() }
}

/// Writes a word of the selftest's scratch memory (1:1 mapped).
pub fn poke(addr: u32, value: u32) {
    // SAFETY: callers pass addresses inside the scratch pages, which nothing else uses.
    unsafe { (addr as *mut u32).write_volatile(value) }
}

/// Maps the problem-state code page at USER_VA (user execute only) and the data page at
/// USER_DATA_VA (user and supervisor read/write).
pub fn map_user() {
    let code = crate::label!(__user_start);
    tlb::map(
        USER_CODE_ENTRY,
        0,
        USER_VA | tlb::V | tlb::size(tlb::S4K),
        code,
        tlb::UX,
    );
    tlb::map(
        USER_DATA_ENTRY,
        0,
        USER_DATA_VA | tlb::V | tlb::size(tlb::S4K),
        scratch(USER_DATA_PAGE),
        tlb::UR | tlb::UW | tlb::SR | tlb::SW,
    );
}
