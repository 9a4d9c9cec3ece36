//! How device models attach to a VMM: the traits a bus dispatches through, the
//! interrupt-line trait a model drives its output with, and the guest-memory trait a model
//! reads and writes guest RAM through (a DMA engine validating descriptors, paper §4.3).
//!
//! - [`MmioDevice`]: loads and stores in the device's guest-physical window, any access
//!   width the guest can issue (1, 2, 4, 8 or 16 bytes), data in guest byte order
//!   (big-endian). A model refuses an access it does not decode ([`Unanswered`]); the VMM
//!   then injects a data storage exception, never a silent value.
//! - [`DcrDevice`]: `mfdcr`/`mtdcr` on the device's DCRs (offset from its first DCR).
//! - [`IrqLine`]: a level-sensitive interrupt input (modelled on vm-superio's `Trigger`,
//!   with a level instead of an edge, as the UIC's inputs are level-sensitive here).
//! - [`GuestRam`]: checked reads and writes of guest-physical memory.
//!
//! The attachments of this crate's models are here too: [`UartPort`] (a 16550 on the MMIO
//! bus with its UIC line and a transmit sink) and [`UicInput`] (one UIC input as an
//! [`IrqLine`]); the UIC itself is a [`DcrDevice`].

use crate::{Uart16550, Uic, UART_REGS};
use alloc::rc::Rc;
use core::cell::RefCell;

/// A device did not decode an access (offset or width); the guest gets an exception.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unanswered;

/// A device in guest-physical (MMIO) space.
pub trait MmioDevice {
    /// Reads `data.len()` bytes at `offset` from the device's base into `data`, in guest
    /// (big-endian) byte order.
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered>;
    /// Writes `data` (guest byte order) at `offset`.
    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered>;
}

/// A device on the DCR bus.
pub trait DcrDevice {
    /// `mfdcr` of the device's DCR number `offset` (from its first DCR).
    fn dcr_read(&mut self, offset: u32) -> u32;
    /// `mtdcr` of `value` to DCR `offset`.
    fn dcr_write(&mut self, offset: u32, value: u32);
}

/// A level-sensitive interrupt line a device model drives.
pub trait IrqLine {
    /// Sets the line to `high`; setting the level it already has does nothing.
    fn set_level(&self, high: bool);
}

/// Why a guest-memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRam {
    pub gpa: u64,
    pub len: usize,
}

/// Guest-physical memory, with every access checked against the guest's RAM.
pub trait GuestRam {
    /// Copies `buf.len()` bytes at `gpa` into `buf`; all of them must be RAM.
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), OutOfRam>;
    /// Copies `data` to `gpa`; all of it must be RAM.
    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), OutOfRam>;
}

/// Where a UART's transmitted bytes go.
pub trait TxSink {
    fn put(&mut self, byte: u8);
}

/// A sink that drops every byte (QEMU's `-serial null`).
pub struct NullSink;

impl TxSink for NullSink {
    fn put(&mut self, _: u8) {}
}

impl TxSink for alloc::vec::Vec<u8> {
    fn put(&mut self, byte: u8) {
        self.push(byte);
    }
}

/// A 16550 on the MMIO bus: byte registers only (a wider access is [`Unanswered`]), its
/// interrupt output on `line` (updated after every access and every input byte), its
/// transmitted bytes to `tx`.
pub struct UartPort<L: IrqLine, S: TxSink> {
    pub uart: Uart16550,
    pub line: L,
    pub tx: S,
}

impl<L: IrqLine, S: TxSink> UartPort<L, S> {
    pub fn new(line: L, tx: S) -> Self {
        UartPort {
            uart: Uart16550::new(),
            line,
            tx,
        }
    }

    /// Console input: true if the receiver took the byte.
    pub fn push_input(&mut self, byte: u8) -> bool {
        let took = self.uart.push_input(byte);
        self.line.set_level(self.uart.irq());
        took
    }

    pub fn can_accept_input(&self) -> bool {
        self.uart.can_accept_input()
    }
}

impl<L: IrqLine, S: TxSink> MmioDevice for UartPort<L, S> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        if data.len() != 1 || offset >= UART_REGS as u64 {
            return Err(Unanswered);
        }
        data[0] = self.uart.read(offset as u32);
        self.line.set_level(self.uart.irq());
        Ok(())
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        if data.len() != 1 || offset >= UART_REGS as u64 {
            return Err(Unanswered);
        }
        let tx = &mut self.tx;
        self.uart.write(offset as u32, data[0], &mut |b| tx.put(b));
        self.line.set_level(self.uart.irq());
        Ok(())
    }
}

impl DcrDevice for Uic {
    fn dcr_read(&mut self, offset: u32) -> u32 {
        self.read_dcr(offset)
    }

    fn dcr_write(&mut self, offset: u32, value: u32) {
        self.write_dcr(offset, value)
    }
}

/// Input `input` of a shared UIC as an [`IrqLine`].
pub struct UicInput {
    pub uic: Rc<RefCell<Uic>>,
    pub input: u32,
}

impl IrqLine for UicInput {
    fn set_level(&self, high: bool) {
        self.uic.borrow_mut().set_input(self.input, high);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uart::{ier, iir, reg};

    struct Level(core::cell::Cell<bool>);
    impl IrqLine for Level {
        fn set_level(&self, high: bool) {
            self.0.set(high);
        }
    }

    #[test]
    fn uart_port_answers_bytes_only() {
        let mut p = UartPort::new(Level(false.into()), alloc::vec::Vec::new());
        assert_eq!(p.mmio_write(0, b"a"), Ok(()));
        assert_eq!(p.tx, b"a");
        let mut w = [0u8; 4];
        assert_eq!(p.mmio_read(0, &mut w), Err(Unanswered));
        assert_eq!(p.mmio_write(8, &[0]), Err(Unanswered));
    }

    /// The line follows the UART's output as the Linux 8250 driver drives it: enabling
    /// the THR-empty interrupt raises it, reading IIR (which reports THRE) lowers it.
    #[test]
    fn uart_port_drives_its_line() {
        let mut p = UartPort::new(Level(false.into()), NullSink);
        p.mmio_write(reg::IER as u64, &[ier::THRI]).unwrap();
        assert!(p.line.0.get());
        let mut b = [0];
        p.mmio_read(reg::IIR as u64, &mut b).unwrap();
        assert_eq!(b[0] & iir::ID, iir::THRI);
        assert!(!p.line.0.get());
        p.mmio_write(reg::IER as u64, &[ier::RDI]).unwrap();
        assert!(p.push_input(b'x'));
        assert!(p.line.0.get(), "received data raises the line");
    }

    #[test]
    fn uic_input_reaches_the_uic() {
        let uic = Rc::new(RefCell::new(Uic::without_polarity()));
        let line = UicInput {
            uic: uic.clone(),
            input: 0,
        };
        // UIC_ER (offset 2): enable input 0 (MSB-0 bit 0).
        uic.borrow_mut().dcr_write(2, 0x8000_0000);
        line.set_level(true);
        assert!(uic.borrow().irq_output());
        line.set_level(false);
        assert!(!uic.borrow().irq_output());
    }
}
