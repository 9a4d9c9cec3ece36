//! Shared pieces of the small bare-metal guests (`guests/exitbench`, `guests/isolation`):
//! they run in supervisor mode on bamboo, natively or as a `kestrel-vmm` guest, with the
//! VMM's (or QEMU's) first TLB entry mapping low RAM 1:1.
#![no_std]

use core::arch::asm;

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
    let (w0, w1, w2): (u32, u32, u32) = (0xEF60_0000 | 0x200 | (1 << 4), 0xEF60_0000, 0x400 | 0x100 | 0x3);
    // SAFETY: writes TLB entry 1 only; encodings: tlbwe r4,r3,0 / r5,r3,1 / r6,r3,2
    // (LLVM assembles the word-1/2 forms wrongly, hence `.long`).
    unsafe {
        asm!("mtspr 946, {z}", ".long 0x7C8307A4", ".long 0x7CA30FA4", ".long 0x7CC317A4", "isync",
             z = in(reg) 0u32, in("r3") 1u32, in("r4") w0, in("r5") w1, in("r6") w2);
    }
}

/// Requests a system reset through DBCR0[RST]: QEMU with `-no-reboot` exits, the VMM
/// stops this VM.
pub fn reset() -> ! {
    // SAFETY: writing DBCR0 only requests the reset; nothing else depends on it.
    unsafe { asm!("mtspr 308, {0}", in(reg) 0x3000_0000u32) };
    loop {}
}
