//! The two 16550 UARTs of bamboo, reached 1:1 through the I/O TLB entry the boot code writes.
//!
//! UART0 (0xEF600300) is the console, polled for output only. UART1 (0xEF600400, UIC line 1)
//! exists only as an interrupt source: enabling its transmitter-empty interrupt raises the
//! line at once, because its transmit holding register is always empty.

use core::fmt;

/// Physical (= virtual) base addresses.
pub const UART0: usize = 0xEF60_0300;
pub const UART1: usize = 0xEF60_0400;

/// Register offsets of a 16550 (byte registers, big-endian bus, no stride).
const THR: usize = 0;
const IER: usize = 1;
const LSR: usize = 5;
/// LSR[THRE]: transmit holding register empty.
const LSR_THRE: u8 = 0x20;
/// IER[ETBEI]: transmitter holding register empty interrupt enable.
pub const IER_THRI: u8 = 0x02;

fn read(base: usize, reg: usize) -> u8 {
    // SAFETY: `base` is one of the two UART register blocks, mapped guarded and caching
    // inhibited by the I/O entry; byte accesses are the device's access width.
    unsafe { ((base + reg) as *const u8).read_volatile() }
}

fn write(base: usize, reg: usize, v: u8) {
    // SAFETY: as for `read`.
    unsafe { ((base + reg) as *mut u8).write_volatile(v) }
}

/// Writes one console byte, waiting for the transmitter.
pub fn putc(c: u8) {
    while read(UART0, LSR) & LSR_THRE == 0 {}
    write(UART0, THR, c);
}

/// UART1's interrupt enable register.
pub fn uart1_ier() -> u8 {
    read(UART1, IER)
}

pub fn set_uart1_ier(v: u8) {
    write(UART1, IER, v);
}

/// The console as a `fmt::Write` sink.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &c in s.as_bytes() {
            if c == b'\n' {
                putc(b'\r');
            }
            putc(c);
        }
        Ok(())
    }
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = write!($crate::uart::Console, $($arg)*);
    }};
}

#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => {{ $crate::print!($($arg)*); $crate::print!("\n"); }};
}
