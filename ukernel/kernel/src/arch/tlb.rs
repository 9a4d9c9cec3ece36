//! The PPC440 software-managed TLB (PPC440 UM §5): 64 entries, three words each.
//!
//! Entries [`KERNEL_FIRST`]..64 are pinned for the kernel; native refills rotate through
//! 0..[`GUEST_FIRST`], the running VM's shadow entries use GUEST_FIRST..KERNEL_FIRST. LLVM silently assembles `tlbwe rS,rA,1|2` and `tlbre rT,rA,1|2` as
//! word 0 (see platform notes), so those instructions are emitted as literal words
//! with fixed registers; the encodings are spelled out next to each.

use super::spr;
use core::arch::asm;
use ppc440::encode;
use ppc440::tlb::{flags, word0, PageSize};

pub const ENTRIES: u32 = ppc440::tlb::ENTRIES;
/// First pinned kernel entry.
pub const KERNEL_FIRST: u32 = 60;
/// Entries GUEST_FIRST..KERNEL_FIRST (44) hold the running VM's shadow entries (TS 1);
/// native refills use 0..GUEST_FIRST.
pub const GUEST_FIRST: u32 = 16;
/// Entry mapping RAM for the kernel.
const KERNEL_RAM_ENTRY: u32 = 63;
/// Entry mapping the console UART page for the kernel.
const KERNEL_IO_ENTRY: u32 = 62;
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

/// Invalidates every user entry tagged `tid` (used when a PID is recycled).
pub fn flush_tid(tid: u8) {
    for i in 0..KERNEL_FIRST {
        let (w0, _, _, t) = read(i);
        if w0 & flags::V != 0 && t == tid {
            invalidate(i);
        }
    }
}

/// Invalidates the translation of the page at `ea` for `tid` in space 0, if any.
pub fn flush_page(ea: u32, tid: u8) {
    if let Some(i) = search(ea, tid, false) {
        if i < KERNEL_FIRST {
            invalidate(i);
        }
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
        flags::V | PageSize::M256.word0(),
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

/// Round-robin victim selection for user refills.
#[derive(Default)]
pub struct Victim(u32);

impl Victim {
    pub const fn new() -> Victim {
        Victim(0)
    }
    /// The TLB slot the next user refill overwrites (below `GUEST_FIRST`).
    pub fn next_slot(&mut self) -> u32 {
        let v = self.0;
        self.0 = if v + 1 >= GUEST_FIRST { 0 } else { v + 1 };
        v
    }
}
