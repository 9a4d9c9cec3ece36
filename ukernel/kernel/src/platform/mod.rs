//! The bamboo board (PPC440EP as QEMU models it): console UART and the UIC.
//!
//! The rest of the kernel reaches the interrupt controller only through the
//! [`IrqController`] trait and [`irq_controller`], and learns the number of lines from
//! [`IRQ_LINES`]: another board (BG/P's BIC) supplies its own implementation here.
//! Platform code uses `arch` (DCR access) and nothing above it.

pub mod uart;
pub mod uic;

/// An interrupt controller as the kernel uses it: lines are numbered from 0; a line
/// whose interrupt is being handled stays masked until its handler acknowledges it.
pub trait IrqController {
    /// Masks every line, routes all of them to the non-critical input, clears status.
    fn init(&self);
    /// Number of interrupt lines.
    fn lines(&self) -> u32;
    /// Configures `line`'s trigger (`edge` or level) and polarity, and unmasks it.
    fn enable(&self, line: u32, edge: bool, active_high: bool);
    /// Masks `line`.
    fn disable(&self, line: u32);
    /// Unmasks `line` (configured before by [`enable`](Self::enable)).
    fn unmask(&self, line: u32);
    /// Clears the latched request of `line`.
    fn ack(&self, line: u32);
    /// The highest-priority pending, unmasked line.
    fn pending(&self) -> Option<u32>;
}

/// The board's interrupt lines (a fact of the board, not of the ABI: the ABI only says
/// that thread numbers below `FIRST_THREAD_NO` name interrupt lines).
pub const IRQ_LINES: usize = uic::LINES as usize;
const _: () = assert!(
    IRQ_LINES <= kestrel_abi::FIRST_THREAD_NO as usize,
    "every line needs an interrupt-thread id"
);

/// The board's interrupt controller.
#[inline(always)]
pub fn irq_controller() -> impl IrqController {
    uic::Uic
}

/// Stops the machine: under QEMU with `-no-reboot` the requested system reset ends the
/// emulator.
pub fn shutdown(code: u32) -> ! {
    crate::kprintln!("kestrel: shutdown (code {})", code);
    crate::arch::system_reset()
}
