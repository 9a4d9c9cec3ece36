//! `print!`/`println!` for native tasks, through the kernel debug console.

use core::fmt::{self, Write};

/// Formats into a small stack buffer and hands full chunks to `KDebug(WRITE)`.
pub struct Console {
    buf: [u8; 128],
    len: usize,
}

impl Console {
    pub const fn new() -> Console {
        Console { buf: [0; 128], len: 0 }
    }
    pub fn flush(&mut self) {
        if self.len > 0 {
            // Output is best effort: the buffer is on our own mapped stack.
            let _ = crate::sys::kdebug_write(&self.buf[..self.len]);
            self.len = 0;
        }
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush();
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let mut c = Console::new();
    let _ = c.write_fmt(args);
    c.flush();
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::_print(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::console::_print(format_args!("{}\n", format_args!($($arg)*))) };
}
