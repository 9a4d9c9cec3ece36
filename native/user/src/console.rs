//! `print!`/`println!` for native tasks, through the kernel debug console.
//!
//! Output is line-buffered: each line (up to [`LINE`] bytes) reaches the kernel in one
//! `KDebug(WRITE)` call, which the kernel prints without interruption, so lines of
//! programs running side by side (and of the VMs, which the VMM prints the same way) never
//! break into each other. A program started by the root task prefixes each line with its
//! name, `[kestrel-demo] `, as the VMM prefixes a guest's lines with `[vmN] `; the root
//! task itself prints without a prefix, and so does a program that names itself in every
//! line already ([`set_unprefixed`]; the VMM's lines start with `vmm: `, which tests and
//! benchmarks parse).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering};

static UNPREFIXED: AtomicBool = AtomicBool::new(false);

/// Turns the program-name prefix off for the whole program.
pub fn set_unprefixed() {
    UNPREFIXED.store(true, Ordering::Relaxed);
}

/// Longest piece written in one kernel call; a longer line is continued without prefix.
pub const LINE: usize = kestrel_abi::kdebug::WRITE_MAX as usize;

/// Formats into a stack buffer and writes it line by line.
pub struct Console {
    buf: [u8; LINE],
    len: usize,
    /// The next byte starts a line (gets the prefix).
    line_start: bool,
    name: [u8; kestrel_abi::root::NAME_WORDS * 4],
    name_len: usize,
}

impl Console {
    pub fn new() -> Console {
        let (name, mut name_len) = crate::rt::program_name();
        if UNPREFIXED.load(Ordering::Relaxed) {
            name_len = 0;
        }
        Console {
            buf: [0; LINE],
            len: 0,
            line_start: true,
            name,
            name_len,
        }
    }

    pub fn flush(&mut self) {
        if self.len > 0 {
            // Output is best effort: the buffer is on our own mapped stack.
            let _ = crate::sys::kdebug_write(&self.buf[..self.len]);
            self.len = 0;
        }
    }

    fn push(&mut self, b: u8) {
        if self.len == self.buf.len() {
            self.flush();
        }
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn start_line(&mut self) {
        self.line_start = false;
        if self.name_len == 0 {
            return;
        }
        // Prefix and the start of the line must fit into one write.
        if self.len + self.name_len + 3 > self.buf.len() {
            self.flush();
        }
        self.push(b'[');
        for i in 0..self.name_len {
            self.push(self.name[i]);
        }
        self.push(b']');
        self.push(b' ');
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
            if self.line_start {
                self.start_line();
            }
            self.push(b);
            if b == b'\n' {
                self.flush();
                self.line_start = true;
            }
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
