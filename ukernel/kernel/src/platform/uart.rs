//! Kernel console on UART0, a 16550 polled for output.

use core::fmt;

/// Register offsets of a 16550 (byte registers).
const THR: usize = 0;
const LSR: usize = 5;
/// LSR[THRE]: transmit holding register empty.
const LSR_THRE: u8 = 0x20;

pub struct Uart {
    base: usize,
}

static mut CONSOLE_BASE: usize = 0;

impl Uart {
    /// Sets the console's virtual base address (after the kernel's TLB is installed).
    pub fn init(base: usize) {
        // SAFETY: called once during single-threaded boot before any output.
        unsafe { CONSOLE_BASE = base };
    }

    pub fn console() -> Uart {
        Uart {
            // SAFETY: written once at boot (`init`), read-only afterwards.
            base: unsafe { CONSOLE_BASE },
        }
    }

    pub fn putc(&self, c: u8) {
        if self.base == 0 {
            return;
        }
        // SAFETY: `base` is the UART0 register block mapped uncached and guarded by the
        // kernel's pinned I/O TLB entry; byte accesses are the device's access width.
        unsafe {
            let lsr = (self.base + LSR) as *const u8;
            while lsr.read_volatile() & LSR_THRE == 0 {}
            ((self.base + THR) as *mut u8).write_volatile(c);
        }
    }

    pub fn write_bytes(&self, s: &[u8]) {
        for &c in s {
            if c == b'\n' {
                self.putc(b'\r');
            }
            self.putc(c);
        }
    }
}

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

#[macro_export]
macro_rules! kprint {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = write!($crate::platform::uart::Uart::console(), $($arg)*);
    }};
}

#[macro_export]
macro_rules! kprintln {
    () => { $crate::kprint!("\n") };
    ($($arg:tt)*) => {{ $crate::kprint!($($arg)*); $crate::kprint!("\n"); }};
}
