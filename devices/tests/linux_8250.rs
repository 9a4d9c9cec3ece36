//! The UART driven register by register as Linux 6.1's 8250 driver drives it on bamboo:
//! probe (autoconfig), startup, termios, console output with LSR polling, and the
//! interrupt-driven transmit and receive paths.

use kestrel_devices::uart::{fcr, ier, iir, lcr, lsr, mcr, msr, reg};
use kestrel_devices::{Uart16550, UART_REGS};

/// A UART plus everything it has transmitted.
struct Port {
    uart: Uart16550,
    tx: Vec<u8>,
}

impl Port {
    fn new() -> Self {
        Self {
            uart: Uart16550::new(),
            tx: Vec::new(),
        }
    }

    fn out(&mut self, offset: u32, value: u8) {
        let tx = &mut self.tx;
        self.uart.write(offset, value, &mut |b| tx.push(b));
    }

    fn inb(&mut self, offset: u32) -> u8 {
        self.uart.read(offset)
    }

    /// `wait_for_xmitr`: poll LSR until all of `bits` are set (bounded, like Linux's loop).
    fn wait_lsr(&mut self, bits: u8) {
        for _ in 0..10_000 {
            if self.inb(reg::LSR) & bits == bits {
                return;
            }
        }
        panic!("LSR never showed {bits:#04x}");
    }

    /// `serial8250_console_putchar` through `uart_console_write` (LF becomes CR LF).
    fn console_write(&mut self, s: &[u8]) {
        let saved_ier = self.inb(reg::IER);
        self.out(reg::IER, 0);
        for &c in s {
            if c == b'\n' {
                self.wait_lsr(lsr::THRE);
                self.out(reg::THR, b'\r');
            }
            self.wait_lsr(lsr::THRE);
            self.out(reg::THR, c);
        }
        self.wait_lsr(lsr::THRE | lsr::TEMT);
        self.out(reg::IER, saved_ier);
    }

    /// `serial8250_do_set_termios` for 8N1 at `divisor`, FIFOs on with an 8-byte trigger.
    fn set_termios(&mut self, divisor: u16) {
        self.out(reg::LCR, lcr::DLAB | lcr::WLEN8);
        let [dll, dlm] = divisor.to_le_bytes();
        self.out(reg::DLL, dll);
        self.out(reg::DLM, dlm);
        self.out(reg::LCR, lcr::WLEN8);
        self.out(reg::FCR, fcr::FE | 0x80);
    }

    /// `serial8250_do_startup` for a 16550A with an interrupt line.
    fn startup(&mut self) {
        // serial8250_clear_fifos
        self.out(reg::FCR, fcr::FE);
        self.out(reg::FCR, fcr::FE | fcr::RFR | fcr::XFR);
        self.out(reg::FCR, 0);
        self.inb(reg::LSR);
        self.inb(reg::RBR);
        self.inb(reg::IIR);
        self.inb(reg::MSR);
        assert_ne!(self.inb(reg::LSR), 0xFF, "port present");
        self.out(reg::LCR, lcr::WLEN8);
        self.out(reg::MCR, mcr::DTR | mcr::RTS | mcr::OUT2);

        // The UART_BUG_THRE probe: a real 16550 re-asserts THRE whenever THRI is enabled
        // while the transmitter is idle.
        self.wait_lsr(lsr::THRE);
        self.out(reg::IER, ier::THRI);
        let iir1 = self.inb(reg::IIR);
        self.out(reg::IER, 0);
        self.out(reg::IER, ier::THRI);
        let iir2 = self.inb(reg::IIR);
        self.out(reg::IER, 0);
        assert_eq!(iir1 & iir::NO_INT, 0, "THRE raised on enabling THRI");
        assert_eq!(iir2 & iir::NO_INT, 0, "no UART_BUG_THRE");
        assert!(!self.uart.irq());

        self.inb(reg::LSR);
        self.inb(reg::RBR);
        self.inb(reg::IIR);
        self.inb(reg::MSR);
        self.out(reg::IER, ier::RLSI | ier::RDI);
    }
}

#[test]
fn register_window_is_eight_bytes() {
    assert_eq!(UART_REGS, 8);
}

#[test]
fn autoconfig_identifies_a_16550a() {
    let mut p = Port::new();
    // Scratch register test.
    p.out(reg::SCR, 0xA5);
    assert_eq!(p.inb(reg::SCR), 0xA5);
    p.out(reg::SCR, 0x5A);
    assert_eq!(p.inb(reg::SCR), 0x5A);
    // IER test: the upper nibble does not stick.
    p.out(reg::LCR, 0);
    p.out(reg::IER, 0);
    assert_eq!(p.inb(reg::IER) & 0x0F, 0);
    p.out(reg::IER, 0xFF);
    assert_eq!(p.inb(reg::IER), 0x0F);
    p.out(reg::IER, 0);
    // Loopback test: RTS|OUT2 in loopback read back as CTS|DCD.
    let saved_mcr = p.inb(reg::MCR);
    p.out(reg::MCR, mcr::LOOP | 0x0A);
    assert_eq!(p.inb(reg::MSR) & msr::LINES, msr::DCD | msr::CTS);
    p.out(reg::MCR, saved_mcr);
    // FIFO detection: IIR bits 7:6 = 11 means a 16550A.
    p.out(reg::FCR, fcr::FE);
    assert_eq!(p.inb(reg::IIR) >> 6, 3);
    p.out(reg::FCR, 0);
    assert_eq!(p.inb(reg::IIR) >> 6, 0);
    // Divisor latch reads back through DLAB, and DLAB hides it again.
    p.out(reg::LCR, lcr::DLAB);
    p.out(reg::DLL, 0x34);
    p.out(reg::DLM, 0x12);
    assert_eq!(p.inb(reg::DLL), 0x34);
    assert_eq!(p.inb(reg::DLM), 0x12);
    p.out(reg::LCR, 0);
    assert_eq!(p.uart.divisor(), 0x1234);
    assert_eq!(p.inb(reg::IER), 0);
    assert!(p.tx.is_empty());
}

#[test]
fn console_write_with_lsr_polling() {
    let mut p = Port::new();
    p.startup();
    p.set_termios(6);
    assert_eq!(p.uart.divisor(), 6);
    assert_eq!(p.uart.line_control(), lcr::WLEN8);
    p.console_write(b"Linux version 6.1\nok\n");
    assert_eq!(p.tx, b"Linux version 6.1\r\nok\r\n");
    // The console path left IER as startup set it, and nothing is pending.
    assert_eq!(p.inb(reg::IER), ier::RLSI | ier::RDI);
    assert!(!p.uart.irq());
    assert_eq!(p.inb(reg::LSR), lsr::THRE | lsr::TEMT);
}

#[test]
fn thre_interrupt_flow() {
    let mut p = Port::new();
    p.startup();
    p.set_termios(6);
    // __start_tx: enable THRI while THR is empty.
    p.out(reg::IER, ier::RLSI | ier::RDI | ier::THRI);
    assert!(p.uart.irq());
    assert_eq!(p.inb(reg::IIR), iir::FIFO_ENABLED | iir::THRI);
    assert!(!p.uart.irq(), "reading IIR clears the THRE interrupt");
    assert_eq!(p.inb(reg::IIR), iir::FIFO_ENABLED | iir::NO_INT);
    // Rewriting IER with THRI unchanged does not re-arm THRE.
    p.out(reg::IER, ier::RLSI | ier::RDI | ier::THRI);
    assert!(!p.uart.irq());
    // serial8250_tx_chars: fill the FIFO; the transmitter drains at once, THRE again.
    for &c in b"abc" {
        p.out(reg::THR, c);
    }
    assert!(p.uart.irq());
    assert_eq!(
        p.inb(reg::LSR) & (lsr::THRE | lsr::TEMT),
        lsr::THRE | lsr::TEMT
    );
    assert_eq!(p.inb(reg::IIR), iir::FIFO_ENABLED | iir::THRI);
    // __stop_tx: nothing left to send.
    p.out(reg::IER, ier::RLSI | ier::RDI);
    assert!(!p.uart.irq());
    assert_eq!(p.tx, b"abc");
    // Toggling THRI off and on re-arms it (QEMU resamples on a 0->1 change).
    p.out(reg::IER, ier::RLSI | ier::RDI | ier::THRI);
    assert!(p.uart.irq());
    p.out(reg::IER, ier::RLSI | ier::RDI);
    assert!(!p.uart.irq(), "clearing THRI drops the pending THRE");
}

#[test]
fn rx_interrupt_flow_without_fifo() {
    let mut p = Port::new();
    p.out(reg::LCR, lcr::WLEN8);
    p.out(reg::IER, ier::RDI);
    assert!(!p.uart.irq());
    assert!(p.uart.push_input(b'x'));
    assert_eq!(p.inb(reg::LSR) & lsr::DR, lsr::DR);
    assert!(p.uart.irq());
    assert_eq!(p.inb(reg::IIR), iir::RDI);
    // The holding register is full: the host must wait.
    assert!(!p.uart.can_accept_input());
    assert!(!p.uart.push_input(b'y'));
    assert_eq!(p.inb(reg::RBR), b'x');
    assert_eq!(p.inb(reg::LSR) & lsr::DR, 0);
    assert!(!p.uart.irq());
    assert!(p.uart.push_input(b'y'));
    assert_eq!(p.inb(reg::RBR), b'y');
    assert!(!p.uart.irq());
}

#[test]
fn rx_interrupt_flow_with_fifo() {
    let mut p = Port::new();
    p.startup();
    p.set_termios(6);
    // One typed character, below the 8-byte trigger: reported as a character timeout.
    assert!(p.uart.push_input(b'l'));
    assert!(p.uart.irq());
    assert_eq!(p.inb(reg::IIR), iir::FIFO_ENABLED | iir::CTI);
    // serial8250_rx_chars: read while LSR[DR].
    let mut got = Vec::new();
    while p.inb(reg::LSR) & lsr::DR != 0 {
        got.push(p.inb(reg::RBR));
    }
    assert_eq!(got, b"l");
    assert!(!p.uart.irq());
    // A burst reaching the trigger level: received-data interrupt.
    for &c in b"ls -l /\n" {
        assert!(p.uart.push_input(c));
    }
    assert_eq!(p.inb(reg::IIR), iir::FIFO_ENABLED | iir::RDI);
    got.clear();
    while p.inb(reg::LSR) & lsr::DR != 0 {
        got.push(p.inb(reg::RBR));
    }
    assert_eq!(got, b"ls -l /\n");
    assert!(!p.uart.irq());
    // RBR reads on an empty FIFO return 0 and change nothing.
    assert_eq!(p.inb(reg::RBR), 0);
    assert!(!p.uart.irq());
}

#[test]
fn rx_fifo_holds_sixteen_bytes() {
    let mut p = Port::new();
    p.out(reg::FCR, fcr::FE | fcr::TRIGGER);
    for i in 0..16u8 {
        assert!(p.uart.push_input(i), "byte {i}");
    }
    assert!(!p.uart.push_input(16));
    assert_eq!(
        p.inb(reg::LSR) & lsr::OE,
        0,
        "refused input is not an overrun"
    );
    for i in 0..16u8 {
        assert_eq!(p.inb(reg::RBR), i);
    }
    assert_eq!(p.inb(reg::LSR) & lsr::DR, 0);
    // A receive-FIFO reset drops queued bytes.
    p.uart.push_input(1);
    p.out(reg::FCR, fcr::FE | fcr::RFR);
    assert_eq!(p.inb(reg::LSR) & lsr::DR, 0);
    // Turning the FIFOs off flushes them too.
    p.uart.push_input(2);
    p.out(reg::FCR, 0);
    assert_eq!(p.inb(reg::LSR) & lsr::DR, 0);
}

#[test]
fn loopback_receives_transmitted_bytes_and_overruns() {
    let mut p = Port::new();
    p.out(reg::MCR, mcr::LOOP | mcr::OUT2);
    p.out(reg::IER, ier::RLSI | ier::RDI);
    p.out(reg::THR, b'A');
    assert!(p.tx.is_empty(), "loopback keeps bytes off the line");
    assert_eq!(p.inb(reg::IIR), iir::RDI);
    // No FIFO: a second byte before RBR is read overruns.
    p.out(reg::THR, b'B');
    assert_eq!(p.inb(reg::IIR), iir::RLSI);
    assert_eq!(p.inb(reg::LSR) & (lsr::OE | lsr::DR), lsr::OE | lsr::DR);
    assert_eq!(p.inb(reg::LSR) & lsr::OE, 0, "reading LSR clears the error");
    assert_eq!(p.inb(reg::IIR), iir::RDI);
    assert_eq!(p.inb(reg::RBR), b'B');
    assert!(!p.uart.irq());
    // With FIFOs, loopback queues up to 16 bytes.
    p.out(reg::FCR, fcr::FE);
    for &c in b"loop" {
        p.out(reg::THR, c);
    }
    let got: Vec<u8> = (0..4).map(|_| p.inb(reg::RBR)).collect();
    assert_eq!(got, b"loop");
    // Leaving loopback sends to the back end again.
    p.out(reg::MCR, mcr::OUT2);
    p.out(reg::THR, b'z');
    assert_eq!(p.tx, b"z");
}

#[test]
fn break_raises_line_status() {
    let mut p = Port::new();
    p.out(reg::IER, ier::RLSI | ier::RDI);
    p.uart.push_break();
    assert_eq!(p.inb(reg::IIR), iir::RLSI);
    assert_eq!(p.inb(reg::LSR) & (lsr::BI | lsr::DR), lsr::BI | lsr::DR);
    assert_eq!(p.inb(reg::IIR), iir::RDI);
    assert_eq!(p.inb(reg::RBR), 0);
    assert!(!p.uart.irq());
}

#[test]
fn transmit_fifo_reset_rearms_thre() {
    let mut p = Port::new();
    p.out(reg::IER, ier::THRI);
    assert_eq!(p.inb(reg::IIR), iir::THRI);
    assert!(!p.uart.irq());
    p.out(reg::FCR, fcr::XFR);
    assert!(p.uart.irq());
}

#[test]
fn modem_status_interrupt() {
    let mut p = Port::new();
    p.out(reg::IER, ier::MSI);
    assert!(!p.uart.irq());
    p.uart.set_modem_status(msr::DSR | msr::CTS);
    assert_eq!(p.inb(reg::IIR), iir::MSI);
    assert_eq!(p.inb(reg::MSR), msr::DSR | msr::CTS | msr::DDCD);
    assert!(!p.uart.irq());
}

#[test]
fn interrupt_priorities() {
    let mut p = Port::new();
    p.out(reg::IER, ier::MASK);
    p.uart.set_modem_status(msr::DCD);
    assert_eq!(p.inb(reg::IIR), iir::THRI, "THR empty beats modem status");
    p.out(reg::IER, 0);
    p.out(reg::IER, ier::MASK);
    p.uart.push_input(1);
    assert_eq!(p.inb(reg::IIR), iir::RDI, "received data beats THR empty");
    p.uart.push_break();
    assert_eq!(
        p.inb(reg::IIR),
        iir::RLSI,
        "line status beats received data"
    );
    p.inb(reg::LSR);
    assert_eq!(p.inb(reg::IIR), iir::RDI);
    p.inb(reg::RBR);
    assert_eq!(p.inb(reg::IIR), iir::THRI);
    assert_eq!(p.inb(reg::IIR), iir::MSI);
    p.inb(reg::MSR);
    assert_eq!(p.inb(reg::IIR), iir::NO_INT);
}
