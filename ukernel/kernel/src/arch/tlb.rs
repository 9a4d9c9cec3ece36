//! The PPC440 software-managed TLB (PPC440 UM §5): 64 entries, three words each.
//!
//! Entries [`KERNEL_FIRST`]..64 are pinned for the kernel; 0..KERNEL_FIRST ([`USER_ENTRIES`])
//! hold native refills (translation space 0) and guests' shadow entries (space 1) alike,
//! placed by one replacement policy (`Kernel::tlb`, a `kestrel_vtlb::ShadowTlb`, which
//! records every one of them; docs/adr/0024-tagged-shadow-tlb.md). LLVM silently assembles `tlbwe rS,rA,1|2` and `tlbre rT,rA,1|2` as
//! word 0 (see platform notes), so those instructions are emitted as literal words
//! with fixed registers; the encodings are spelled out next to each.

use super::spr;
use core::arch::asm;
use ppc440::encode;
use ppc440::tlb::{flags, word0, PageSize};

pub const ENTRIES: u32 = ppc440::tlb::ENTRIES;
/// First pinned kernel entry.
pub const KERNEL_FIRST: u32 = 60;
/// Entries 0..USER_ENTRIES hold native refills and guest shadow entries.
pub const USER_ENTRIES: usize = KERNEL_FIRST as usize;
/// Entry mapping RAM for the kernel.
const KERNEL_RAM_ENTRY: u32 = 63;
/// Entry mapping the console UART page for the kernel.
const KERNEL_IO_ENTRY: u32 = 62;
/// Size of the kernel's 1:1 RAM mapping (entry [`KERNEL_RAM_ENTRY`]): every physical address
/// below it is readable by the kernel at the same virtual address.
pub const KERNEL_RAM_WINDOW: u32 = PageSize::M256.bytes();
/// Kernel virtual address of the I/O page (UART0 lives at offset 0x300).
pub const KERNEL_IO_VA: u32 = 0xF000_0000;

const MMUCR_STS: u32 = ppc440::mmucr::STS.mask();
const MMUCR_STID_MASK: u32 = ppc440::mmucr::STID.mask();

/// Writes all three words of entry `index`, tagging it with `tid` (through MMUCR[STID]).
#[inline(always)]
pub fn write(index: u32, tid: u8, word0: u32, word1: u32, word2: u32) {
    let mmucr = spr::read::<{ ppc440::spr::MMUCR }>();
    spr::write::<{ ppc440::spr::MMUCR }>((mmucr & !MMUCR_STID_MASK) | tid as u32);
    // SAFETY: the kernel owns the TLB; callers never overwrite the pinned kernel
    // entries except during boot. The words are tlbwe r4,r3,0; tlbwe r5,r3,1;
    // tlbwe r6,r3,2 (encoded by hand: LLVM assembles WS 1 and 2 as 0).
    unsafe {
        asm!(
            ".long {we0}",
            ".long {we1}",
            ".long {we2}",
            "isync",
            we0 = const encode::tlbwe(4, 3, 0),
            we1 = const encode::tlbwe(5, 3, 1),
            we2 = const encode::tlbwe(6, 3, 2),
            in("r3") index, in("r4") word0, in("r5") word1, in("r6") word2,
            options(nostack, preserves_flags)
        );
    }
}

/// Reads entry `index`: (word0, word1, word2, tid).
pub fn read(index: u32) -> (u32, u32, u32, u8) {
    let (a, b, c): (u32, u32, u32);
    // SAFETY: tlbre only reads the TLB and sets MMUCR[STID]. The words are
    // tlbre r4,r3,0; tlbre r5,r3,1; tlbre r6,r3,2.
    unsafe {
        asm!(
            ".long {re0}",
            ".long {re1}",
            ".long {re2}",
            re0 = const encode::tlbre(4, 3, 0),
            re1 = const encode::tlbre(5, 3, 1),
            re2 = const encode::tlbre(6, 3, 2),
            in("r3") index, out("r4") a, out("r5") b, out("r6") c,
            options(nostack, preserves_flags, nomem)
        );
    }
    let tid = (spr::read::<{ ppc440::spr::MMUCR }>() & MMUCR_STID_MASK) as u8;
    (a, b, c, tid)
}

/// Invalidates entry `index`.
#[inline]
pub fn invalidate(index: u32) {
    write(index, 0, 0, 0, 0);
}

/// Finds the entry translating `ea` for `tid` in translation space `ts`.
pub fn search(ea: u32, tid: u8, ts: bool) -> Option<u32> {
    let mmucr = spr::read::<{ ppc440::spr::MMUCR }>() & !(MMUCR_STID_MASK | MMUCR_STS);
    spr::write::<{ ppc440::spr::MMUCR }>(mmucr | tid as u32 | if ts { MMUCR_STS } else { 0 });
    let index: u32;
    let cr: u32;
    // SAFETY: tlbsx. only searches the TLB and sets CR0[EQ] when an entry matches.
    unsafe {
        asm!("tlbsx. {idx}, 0, {ea}", "mfcr {cr}", idx = out(reg) index, ea = in(reg) ea,
             cr = out(reg) cr, options(nostack, nomem));
    }
    if cr & ppc440::cr::CR0_EQ != 0 {
        Some(index & (ENTRIES - 1))
    } else {
        None
    }
}

/// Invalidates the translation of the page at `ea` for `tid` in space 0, if any, and
/// returns its index.
pub fn flush_page(ea: u32, tid: u8) -> Option<u32> {
    let i = search(ea, tid, false)?;
    if i < KERNEL_FIRST {
        invalidate(i);
        Some(i)
    } else {
        None
    }
}

/// Invalidates all user entries.
pub fn flush_user() {
    for i in 0..KERNEL_FIRST {
        invalidate(i);
    }
}

/// Installs the kernel's pinned entries and removes QEMU's boot entries.
///
/// QEMU enters with entries 0 and 1 mapping 2 GiB 1:1 each (supervisor, TID 0); it
/// searches in index order with first match winning, so as long as they exist no user
/// mapping would ever be found. We map RAM 1:1 with one 256 MiB entry (supervisor
/// only, so user accesses to kernel memory fault) and the console UART page at
/// [`KERNEL_IO_VA`], then invalidate everything else.
pub fn install_kernel_map(uart_phys_page: u32) {
    let supervisor_rw = flags::SW | flags::SR;
    write(
        KERNEL_RAM_ENTRY,
        0,
        flags::V | PageSize::M256.word0(), // KERNEL_RAM_WINDOW
        0,
        flags::SX | supervisor_rw,
    );
    write(
        KERNEL_IO_ENTRY,
        0,
        KERNEL_IO_VA | flags::V | PageSize::K4.word0(),
        uart_phys_page & word0::EPN.mask(),
        flags::I | flags::G | supervisor_rw,
    );
    for i in 0..KERNEL_FIRST {
        invalidate(i);
    }
    invalidate(KERNEL_FIRST);
    invalidate(KERNEL_FIRST + 1);
}
