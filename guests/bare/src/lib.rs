//! Shared pieces of the small bare-metal guests (`guests/exitbench`, `guests/isolation`,
//! `guests/hostile`):
//! the entry point `_start` (which calls the guest's `bare_main(r3)`), the polled UART0
//! console, its TLB entry and the reset request. The guests run in supervisor mode on
//! bamboo, natively or as a `kestrel-vmm` guest, with the VMM's (or QEMU's) first TLB
//! entry mapping low RAM 1:1. [`ram`]: filling and checksumming guest RAM by address.
#![no_std]

pub mod ram;

use core::arch::{asm, global_asm};
use kestrel_ppc440::tlb::{word0, word2, PageSize};
use kestrel_ppc440::{dbcr0, encode, spr};

// The entry point of every bare guest (placed by its linker script's `.text.boot`): the
// stack from the script's `__stack_top` with a zero back chain, then `bare_main(r3)`, which
// the guest defines, with r3 as the loader left it (the VMM passes the VM index).
global_asm!(
    ".section .text.boot, \"ax\"",
    ".global _start",
    "_start:",
    "    lis 1, __stack_top@ha",
    "    addi 1, 1, __stack_top@l",
    "    li 0, 0",
    "    stwu 0, -16(1)",
    "    bl bare_main",
    "1:  b 1b",
);

/// Bamboo's UART0 registers (16550, byte registers).
pub const UART0: usize = 0xEF60_0300;

/// UART0 as a `core::fmt::Write` sink: polls LSR[THRE] before each byte. Call
/// [`map_uart`] first.
pub struct Uart;

impl core::fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            // SAFETY: UART0's registers, mapped uncached and guarded by `map_uart`.
            unsafe {
                while ((UART0 + 5) as *const u8).read_volatile() & 0x20 == 0 {}
                (UART0 as *mut u8).write_volatile(b);
            }
        }
        Ok(())
    }
}

/// Guest TLB entry 1: the UART page 1:1, uncached and guarded, supervisor read/write.
/// (Natively this replaces QEMU's second 2 GiB boot entry, which nothing else needs.)
pub fn map_uart() {
    map_uart_at(1);
}

/// The UART page 1:1 (as [`map_uart`]) in guest TLB entry `index` (below 64).
pub fn map_uart_at(index: u32) {
    const PAGE: u32 = UART0 as u32 & word0::EPN.mask();
    let w0 = PAGE | word0::V.mask() | PageSize::K4.word0();
    let w2 = word2::I.mask() | word2::G.mask() | word2::SW.mask() | word2::SR.mask();
    // SAFETY: writes TLB entry `index` only (MMUCR = 0: TID 0); tlbwe r4,r3,0 / r5,r3,1 / r6,r3,2
    // as `.long` words (LLVM assembles the word-1/2 forms wrongly).
    unsafe {
        asm!("mtspr {mmucr}, {z}", ".long {a}", ".long {b}", ".long {c}", "isync",
             mmucr = const spr::MMUCR, a = const encode::tlbwe(4, 3, 0),
             b = const encode::tlbwe(5, 3, 1), c = const encode::tlbwe(6, 3, 2),
             z = in(reg) 0u32, in("r3") index & 63, in("r4") w0, in("r5") PAGE, in("r6") w2);
    }
}

/// Requests a system reset through DBCR0[RST]: QEMU with `-no-reboot` exits, the VMM
/// stops this VM.
pub fn reset() -> ! {
    // SAFETY: writing DBCR0 only requests the reset; nothing else depends on it.
    unsafe { asm!("mtspr {dbcr0}, {0}", in(reg) dbcr0::RST_SYSTEM, dbcr0 = const spr::DBCR0) };
    #[allow(
        clippy::empty_loop,
        reason = "the reset requested above takes effect at once; the loop only gives the \
                  function its `!` type and never runs long enough to waste cycles"
    )]
    loop {}
}
