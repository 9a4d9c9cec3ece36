//! The 16550A UART of QEMU's `-M bamboo` as a pure model: byte registers, regshift 0.
//!
//! The VMM forwards a trapped byte load/store at `UART base + offset` (offset `0..UART_REGS`)
//! to [`Uart16550::read`]/[`Uart16550::write`], hands console input to
//! [`Uart16550::push_input`], and after each of those calls drives the UART's UIC line
//! with [`Uart16550::irq`]. Bytes the guest transmits come out through the `tx` callback
//! of `write`, one call per byte, in order.
//!
//! Bit numbers in this file are the 16550 data sheet's: bit 0 is the least significant.
//!
//! # Behaviour (QEMU 7.2 `hw/char/serial.c`)
//!
//! - Offsets are taken modulo 8, as QEMU does. LCR\[DLAB\] maps DLL/DLM over RBR/THR and IER.
//! - Transmission is instantaneous: a THR write hands the byte to `tx` (or, with MCR\[LOOP\],
//!   to the receiver) and leaves LSR\[THRE\] and LSR\[TEMT\] set, with a THRE interrupt pending.
//!   There is therefore never anything in the transmit FIFO.
//! - IIR reports the highest-priority pending source: receiver line status (IER\[RLSI\] and
//!   one of LSR\[OE, PE, FE, BI\]) > character timeout (IER\[RDI\]; see below) > received
//!   data (IER\[RDI\], LSR\[DR\], and in FIFO mode at least the trigger level) > THR empty
//!   (IER\[THRI\] and a pending THRE) > modem status (IER\[MSI\] and a delta bit in MSR).
//!   Bits 7:6 read 11 while FCR\[FE\] is set. `irq()` is true exactly when IIR\[0\] = 0.
//! - Reading IIR while it reports THR empty clears that pending THRE. Setting IER\[THRI\]
//!   (a 0→1 change) while THR is empty makes THRE pending again; clearing it drops it.
//!   Writing IER with THRI unchanged does not re-arm it (QEMU resamples only on a change).
//! - Reading LSR clears its error bits (OE, BI; PE and FE are never set, nothing models
//!   framing or parity). Reading RBR clears DR (and BI) once nothing is left to read.
//! - A receive into a full FIFO, or into a full RBR in non-FIFO mode, sets LSR\[OE\] and the
//!   byte is lost. That only happens through loopback or [`Uart16550::push_break`]:
//!   `push_input` refuses a byte the receiver cannot hold.
//! - FCR: changing FE flushes both FIFOs; RFR/XFR flush one each (XFR also re-arms THRE).
//!   FCR keeps FE, DMS and the trigger level (1, 4, 8 or 14 bytes).
//! - MCR keeps bits 4:0. With MCR\[LOOP\], transmitted bytes are received instead of going
//!   to `tx` (which may overrun the receiver), and MSR reads return the MCR outputs
//!   (DTR→DSR, RTS→CTS, OUT1→RI, OUT2→DCD) with no delta bits. Host input is still
//!   accepted in loopback, as QEMU does.
//! - MSR starts as DCD|DSR|CTS (what QEMU shows with a console back end that has no modem
//!   lines). [`Uart16550::set_modem_status`] changes the inputs and sets delta bits as
//!   QEMU's modem-line poll does; reading MSR clears the delta bits.
//! - Reset: divisor 12, MCR = OUT2, LSR = THRE|TEMT, IIR = 0x01, everything else 0.
//!
//! # Where this model departs from QEMU, and why
//!
//! - **No clock.** QEMU raises the character-timeout interrupt (IIR = 0xCC with FIFOs on)
//!   four character times after the last receive when data below the trigger level sits in
//!   the FIFO. A model without time cannot wait, and waiting forever would leave a typed
//!   character unreported, so the timeout counts as already expired: in FIFO mode with
//!   IER\[RDI\] set, 1 to trigger-level−1 bytes in the FIFO report a character timeout, and
//!   the trigger level or more report received data. Linux's 8250 driver handles both the
//!   same way.
//! - **Input pacing.** QEMU's back end offers the FIFO only up to the trigger level at a
//!   time; `push_input` accepts bytes until the FIFO holds 16 (or, without FIFOs, until RBR
//!   is full). The guest sees the same registers either way, possibly with more bytes
//!   queued.
//! - **Back-end failures.** QEMU keeps THRE clear while its character back end refuses a
//!   byte and retries later; `tx` cannot refuse, so a back end that cannot keep up must
//!   buffer or drop.

/// How many byte registers the UART decodes (the size of its MMIO window).
pub const UART_REGS: u32 = 8;

/// The receive (and transmit) FIFO depth of a 16550A.
pub const FIFO_LEN: usize = 16;

/// Register offsets from the UART's base (regshift 0).
pub mod reg {
    /// Receiver buffer (read, LCR\[DLAB\] = 0).
    pub const RBR: u32 = 0;
    /// Transmitter holding register (write, LCR\[DLAB\] = 0).
    pub const THR: u32 = 0;
    /// Divisor latch, low byte (LCR\[DLAB\] = 1).
    pub const DLL: u32 = 0;
    /// Interrupt enable (LCR\[DLAB\] = 0).
    pub const IER: u32 = 1;
    /// Divisor latch, high byte (LCR\[DLAB\] = 1).
    pub const DLM: u32 = 1;
    /// Interrupt identification (read).
    pub const IIR: u32 = 2;
    /// FIFO control (write).
    pub const FCR: u32 = 2;
    /// Line control.
    pub const LCR: u32 = 3;
    /// Modem control.
    pub const MCR: u32 = 4;
    /// Line status (writes ignored).
    pub const LSR: u32 = 5;
    /// Modem status (writes ignored).
    pub const MSR: u32 = 6;
    /// Scratch.
    pub const SCR: u32 = 7;
}

/// IER bits.
pub mod ier {
    /// Bit 0: received data available (and character timeout).
    pub const RDI: u8 = 1 << 0;
    /// Bit 1: transmitter holding register empty.
    pub const THRI: u8 = 1 << 1;
    /// Bit 2: receiver line status.
    pub const RLSI: u8 = 1 << 2;
    /// Bit 3: modem status.
    pub const MSI: u8 = 1 << 3;
    /// The bits IER keeps.
    pub const MASK: u8 = RDI | THRI | RLSI | MSI;
}

/// IIR values and bits.
pub mod iir {
    /// Bit 0: 1 = no interrupt pending.
    pub const NO_INT: u8 = 0x01;
    /// Bits 2:1: the interrupt identification proper (bit 3 added for the timeout).
    pub const ID: u8 = 0x06;
    /// Modem status.
    pub const MSI: u8 = 0x00;
    /// Transmitter holding register empty.
    pub const THRI: u8 = 0x02;
    /// Received data available.
    pub const RDI: u8 = 0x04;
    /// Receiver line status.
    pub const RLSI: u8 = 0x06;
    /// Character timeout (bits 3:1 = 110).
    pub const CTI: u8 = 0x0C;
    /// Bits 7:6: FIFOs enabled.
    pub const FIFO_ENABLED: u8 = 0xC0;
}

/// FCR bits.
pub mod fcr {
    /// Bit 0: enable the FIFOs.
    pub const FE: u8 = 1 << 0;
    /// Bit 1: reset the receive FIFO (self-clearing).
    pub const RFR: u8 = 1 << 1;
    /// Bit 2: reset the transmit FIFO (self-clearing).
    pub const XFR: u8 = 1 << 2;
    /// Bit 3: DMA mode select.
    pub const DMS: u8 = 1 << 3;
    /// Bits 7:6: receive trigger level (00 = 1, 01 = 4, 10 = 8, 11 = 14 bytes).
    pub const TRIGGER: u8 = 0xC0;
    /// The bits FCR keeps after a write.
    pub const STICKY: u8 = TRIGGER | DMS | FE;
}

/// LCR bits.
pub mod lcr {
    /// Bits 1:0: word length − 5.
    pub const WLEN: u8 = 0x03;
    /// Bit 2: two stop bits.
    pub const STOP: u8 = 1 << 2;
    /// Bit 3: parity enable.
    pub const PARITY: u8 = 1 << 3;
    /// Bit 6: set break.
    pub const SBC: u8 = 1 << 6;
    /// Bit 7: divisor latch access.
    pub const DLAB: u8 = 1 << 7;
    /// 8 data bits, no parity, 1 stop bit.
    pub const WLEN8: u8 = 0x03;
}

/// MCR bits.
pub mod mcr {
    /// Bit 0: data terminal ready.
    pub const DTR: u8 = 1 << 0;
    /// Bit 1: request to send.
    pub const RTS: u8 = 1 << 1;
    /// Bit 2: OUT1.
    pub const OUT1: u8 = 1 << 2;
    /// Bit 3: OUT2 (gates the interrupt on PCs; no effect here, as in QEMU).
    pub const OUT2: u8 = 1 << 3;
    /// Bit 4: loopback.
    pub const LOOP: u8 = 1 << 4;
    /// The bits MCR keeps.
    pub const MASK: u8 = 0x1F;
}

/// LSR bits.
pub mod lsr {
    /// Bit 0: data ready.
    pub const DR: u8 = 1 << 0;
    /// Bit 1: overrun error.
    pub const OE: u8 = 1 << 1;
    /// Bit 2: parity error (never set by this model).
    pub const PE: u8 = 1 << 2;
    /// Bit 3: framing error (never set by this model).
    pub const FE: u8 = 1 << 3;
    /// Bit 4: break interrupt.
    pub const BI: u8 = 1 << 4;
    /// Bit 5: transmitter holding register empty.
    pub const THRE: u8 = 1 << 5;
    /// Bit 6: transmitter empty.
    pub const TEMT: u8 = 1 << 6;
    /// The error bits that raise a receiver-line-status interrupt; reading LSR clears them.
    pub const ERRORS: u8 = OE | PE | FE | BI;
}

/// MSR bits.
pub mod msr {
    /// Bit 0: delta CTS.
    pub const DCTS: u8 = 1 << 0;
    /// Bit 1: delta DSR.
    pub const DDSR: u8 = 1 << 1;
    /// Bit 2: trailing edge of RI.
    pub const TERI: u8 = 1 << 2;
    /// Bit 3: delta DCD.
    pub const DDCD: u8 = 1 << 3;
    /// Bit 4: clear to send.
    pub const CTS: u8 = 1 << 4;
    /// Bit 5: data set ready.
    pub const DSR: u8 = 1 << 5;
    /// Bit 6: ring indicator.
    pub const RI: u8 = 1 << 6;
    /// Bit 7: data carrier detect.
    pub const DCD: u8 = 1 << 7;
    /// Bits 3:0: the delta bits.
    pub const DELTAS: u8 = 0x0F;
    /// Bits 7:4: the modem input lines.
    pub const LINES: u8 = 0xF0;
}

/// The receive FIFO: a 16-byte ring, no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RxFifo {
    bytes: [u8; FIFO_LEN],
    head: usize,
    len: usize,
}

impl RxFifo {
    const fn new() -> Self {
        Self {
            bytes: [0; FIFO_LEN],
            head: 0,
            len: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.len == FIFO_LEN
    }

    /// Appends `byte`; returns false (and drops it) when the FIFO is full.
    fn push(&mut self, byte: u8) -> bool {
        if self.is_full() {
            return false;
        }
        self.bytes[(self.head + self.len) % FIFO_LEN] = byte;
        self.len += 1;
        true
    }

    fn pop(&mut self) -> Option<u8> {
        if self.len == 0 {
            return None;
        }
        let byte = self.bytes[self.head];
        self.head = (self.head + 1) % FIFO_LEN;
        self.len -= 1;
        Some(byte)
    }

    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

/// One 16550A UART.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uart16550 {
    divisor: u16,
    /// The receiver buffer in non-FIFO mode.
    rbr: u8,
    ier: u8,
    /// The sticky FCR bits ([`fcr::STICKY`]).
    fcr: u8,
    lcr: u8,
    mcr: u8,
    lsr: u8,
    msr: u8,
    scr: u8,
    /// A THR-empty interrupt is pending (cleared by an IIR read that reports it).
    thr_ipending: bool,
    rx: RxFifo,
}

impl Default for Uart16550 {
    fn default() -> Self {
        Self::new()
    }
}

impl Uart16550 {
    /// A UART in QEMU's reset state (9600 8N1 divisor, OUT2 set, transmitter empty).
    pub const fn new() -> Self {
        Self {
            divisor: 0x0C,
            rbr: 0,
            ier: 0,
            fcr: 0,
            lcr: 0,
            mcr: mcr::OUT2,
            lsr: lsr::TEMT | lsr::THRE,
            msr: msr::DCD | msr::DSR | msr::CTS,
            scr: 0,
            thr_ipending: false,
            rx: RxFifo::new(),
        }
    }

    /// Guest read of register `offset` (0..=7; DLAB selects DLL/DLM at 0/1).
    pub fn read(&mut self, offset: u32) -> u8 {
        match offset % UART_REGS {
            reg::RBR if self.dlab() => self.divisor.to_le_bytes()[0],
            reg::RBR => self.read_rbr(),
            reg::IER if self.dlab() => self.divisor.to_le_bytes()[1],
            reg::IER => self.ier,
            reg::IIR => {
                let value = self.iir();
                if value & iir::ID == iir::THRI {
                    self.thr_ipending = false;
                }
                value
            }
            reg::LCR => self.lcr,
            reg::MCR => self.mcr,
            reg::LSR => {
                let value = self.lsr;
                self.lsr &= !lsr::ERRORS;
                value
            }
            reg::MSR => self.read_msr(),
            _ => self.scr,
        }
    }

    /// Guest write; bytes written to THR are handed to `tx` (the console back end).
    pub fn write(&mut self, offset: u32, value: u8, tx: &mut dyn FnMut(u8)) {
        match offset % UART_REGS {
            reg::DLL if self.dlab() => self.set_divisor_byte(0, value),
            reg::THR => self.transmit(value, tx),
            reg::DLM if self.dlab() => self.set_divisor_byte(1, value),
            reg::IER => self.write_ier(value),
            reg::FCR => self.write_fcr(value),
            reg::LCR => self.lcr = value,
            reg::MCR => self.mcr = value & mcr::MASK,
            reg::LSR | reg::MSR => {}
            _ => self.scr = value,
        }
    }

    /// Host input for the guest (RBR); returns false if the receive FIFO (16 bytes) is
    /// full, or, with FIFOs off, if RBR still holds an unread byte. A refused byte is not
    /// consumed: offer it again after the guest has read RBR.
    pub fn push_input(&mut self, byte: u8) -> bool {
        if !self.can_accept_input() {
            return false;
        }
        self.receive(byte);
        true
    }

    /// Whether [`Uart16550::push_input`] would accept a byte now.
    pub fn can_accept_input(&self) -> bool {
        if self.fifo_enabled() {
            !self.rx.is_full()
        } else {
            self.lsr & lsr::DR == 0
        }
    }

    /// A break condition on the receive line: a NUL byte with LSR\[BI\] (as QEMU's
    /// `serial_receive_break`, which queues the NUL in the FIFO even with FIFOs off).
    pub fn push_break(&mut self) {
        self.rbr = 0;
        if !self.rx.push(0) {
            self.lsr |= lsr::OE;
        }
        self.lsr |= lsr::BI | lsr::DR;
    }

    /// Sets the modem input lines (the [`msr::LINES`] bits of `lines`: CTS, DSR, RI, DCD)
    /// and the MSR delta bits for the lines that changed (TERI only when RI falls).
    pub fn set_modem_status(&mut self, lines: u8) {
        let old = self.msr;
        let new = (old & msr::DELTAS) | (lines & msr::LINES);
        if new == old {
            return;
        }
        let mut value = new | ((new ^ old) >> 4);
        if value & msr::TERI != 0 && old & msr::RI == 0 {
            // RI was low, so it did not fall: TERI reports only a trailing edge. (QEMU's
            // modem-line poll clears TERI under this same condition.)
            value &= !msr::TERI;
        }
        self.msr = value;
    }

    /// Level of the interrupt output (IIR not "no interrupt pending").
    pub fn irq(&self) -> bool {
        self.iir() & iir::NO_INT == 0
    }

    /// The divisor latch (DLM:DLL), for a back end that wants the baud rate.
    pub const fn divisor(&self) -> u16 {
        self.divisor
    }

    /// The line control register, for a back end that wants the frame format.
    pub const fn line_control(&self) -> u8 {
        self.lcr
    }

    /// Replaces DLL (`index` 0) or DLM (`index` 1).
    fn set_divisor_byte(&mut self, index: usize, value: u8) {
        let mut bytes = self.divisor.to_le_bytes();
        bytes[index] = value;
        self.divisor = u16::from_le_bytes(bytes);
    }

    const fn dlab(&self) -> bool {
        self.lcr & lcr::DLAB != 0
    }

    const fn fifo_enabled(&self) -> bool {
        self.fcr & fcr::FE != 0
    }

    /// The receive trigger level FCR selects (used only in FIFO mode).
    const fn trigger_level(&self) -> usize {
        match self.fcr & fcr::TRIGGER {
            0x00 => 1,
            0x40 => 4,
            0x80 => 8,
            _ => 14,
        }
    }

    /// IIR as a read would return it, without the read's side effect.
    fn iir(&self) -> u8 {
        let fifo = self.fifo_enabled();
        let rx_len = self.rx.len;
        let rdi = self.ier & ier::RDI != 0;
        let id = if self.ier & ier::RLSI != 0 && self.lsr & lsr::ERRORS != 0 {
            iir::RLSI
        } else if rdi && fifo && rx_len > 0 && rx_len < self.trigger_level() {
            // The character timeout, taken as already expired (see the module docs).
            iir::CTI
        } else if rdi && self.lsr & lsr::DR != 0 && (!fifo || rx_len >= self.trigger_level()) {
            iir::RDI
        } else if self.ier & ier::THRI != 0 && self.thr_ipending {
            iir::THRI
        } else if self.ier & ier::MSI != 0 && self.msr & msr::DELTAS != 0 {
            iir::MSI
        } else {
            iir::NO_INT
        };
        if fifo {
            id | iir::FIFO_ENABLED
        } else {
            id
        }
    }

    fn read_rbr(&mut self) -> u8 {
        if self.fifo_enabled() {
            let byte = self.rx.pop().unwrap_or(0);
            if self.rx.len == 0 {
                self.lsr &= !(lsr::DR | lsr::BI);
            }
            byte
        } else {
            self.lsr &= !(lsr::DR | lsr::BI);
            self.rbr
        }
    }

    fn read_msr(&mut self) -> u8 {
        if self.mcr & mcr::LOOP != 0 {
            // The modem outputs are wired back to the inputs.
            let m = self.mcr;
            let mut value = 0;
            if m & mcr::DTR != 0 {
                value |= msr::DSR;
            }
            if m & mcr::RTS != 0 {
                value |= msr::CTS;
            }
            if m & mcr::OUT1 != 0 {
                value |= msr::RI;
            }
            if m & mcr::OUT2 != 0 {
                value |= msr::DCD;
            }
            value
        } else {
            let value = self.msr;
            self.msr &= msr::LINES;
            value
        }
    }

    /// A byte arrives at the receiver (from the host or through loopback).
    fn receive(&mut self, byte: u8) {
        if self.fifo_enabled() {
            if !self.rx.push(byte) {
                self.lsr |= lsr::OE;
            }
        } else {
            if self.lsr & lsr::DR != 0 {
                self.lsr |= lsr::OE;
            }
            self.rbr = byte;
        }
        self.lsr |= lsr::DR;
    }

    /// A THR write: the byte leaves at once, so THR and the shift register end up empty.
    fn transmit(&mut self, byte: u8, tx: &mut dyn FnMut(u8)) {
        self.lsr |= lsr::THRE | lsr::TEMT;
        self.thr_ipending = true;
        if self.mcr & mcr::LOOP != 0 {
            self.receive(byte);
        } else {
            tx(byte);
        }
    }

    fn write_ier(&mut self, value: u8) {
        let changed = (self.ier ^ value) & ier::MASK;
        self.ier = value & ier::MASK;
        if changed & ier::THRI != 0 {
            self.thr_ipending = self.ier & ier::THRI != 0 && self.lsr & lsr::THRE != 0;
        }
    }

    fn write_fcr(&mut self, value: u8) {
        let mut value = value;
        if (value ^ self.fcr) & fcr::FE != 0 {
            value |= fcr::RFR | fcr::XFR;
        }
        if value & fcr::RFR != 0 {
            self.lsr &= !(lsr::DR | lsr::BI);
            self.rx.clear();
        }
        if value & fcr::XFR != 0 {
            // The transmit FIFO is always empty here; only the THRE state is reset.
            self.lsr |= lsr::THRE;
            self.thr_ipending = true;
        }
        self.fcr = value & fcr::STICKY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_tx(_: u8) {
        panic!("unexpected transmit");
    }

    #[test]
    fn reset_values_match_qemu() {
        let mut uart = Uart16550::new();
        assert_eq!(uart.read(reg::IER), 0);
        assert_eq!(uart.read(reg::IIR), iir::NO_INT);
        assert_eq!(uart.read(reg::LCR), 0);
        assert_eq!(uart.read(reg::MCR), mcr::OUT2);
        assert_eq!(uart.read(reg::LSR), lsr::THRE | lsr::TEMT);
        assert_eq!(uart.read(reg::MSR), msr::DCD | msr::DSR | msr::CTS);
        assert_eq!(uart.read(reg::SCR), 0);
        assert_eq!(uart.divisor(), 12);
        assert!(!uart.irq());
    }

    #[test]
    fn offsets_wrap_modulo_eight() {
        let mut uart = Uart16550::new();
        uart.write(reg::SCR + 8, 0x5A, &mut no_tx);
        assert_eq!(uart.read(reg::SCR), 0x5A);
        assert_eq!(uart.read(u32::MAX), 0x5A);
    }

    #[test]
    fn rx_fifo_ring_wraps() {
        let mut fifo = RxFifo::new();
        for round in 0..3u8 {
            for i in 0..FIFO_LEN as u8 {
                assert!(fifo.push(round.wrapping_mul(16).wrapping_add(i)));
            }
            assert!(!fifo.push(0xFF));
            for i in 0..FIFO_LEN as u8 {
                assert_eq!(fifo.pop(), Some(round.wrapping_mul(16).wrapping_add(i)));
            }
            assert_eq!(fifo.pop(), None);
            fifo.push(1);
            fifo.pop();
        }
    }

    #[test]
    fn modem_status_deltas() {
        let mut uart = Uart16550::new();
        uart.write(reg::IER, ier::MSI, &mut no_tx);
        assert!(!uart.irq());
        // CTS drops, RI rises: DCTS set, TERI not (RI rose).
        uart.set_modem_status(msr::DCD | msr::DSR | msr::RI);
        assert!(uart.irq());
        assert_eq!(uart.read(reg::IIR), iir::MSI);
        assert_eq!(
            uart.read(reg::MSR),
            msr::DCD | msr::DSR | msr::RI | msr::DCTS
        );
        assert!(!uart.irq());
        // RI falls: TERI.
        uart.set_modem_status(msr::DCD | msr::DSR);
        assert_eq!(uart.read(reg::MSR), msr::DCD | msr::DSR | msr::TERI);
        assert_eq!(uart.read(reg::MSR), msr::DCD | msr::DSR);
    }
}
