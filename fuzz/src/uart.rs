//! Target `uart`: the 16550A model (`kestrel_devices::Uart16550`) under arbitrary guest
//! register traffic and host events, the checks of `devices/tests/props.rs` plus the
//! registers a guest can read back.
//!
//! Input: operations, one selector byte each (read, write, console byte, break, modem
//! lines), offsets mostly 0..8 and now and then any `u32`. After every step:
//! `irq()` agrees with IIR bit 0; IIR has the FIFO bits exactly when FCR[FE] is set and a
//! known interrupt ID; THR and the shift register are always empty; draining RBR ends
//! within the receiver's capacity (16 with FIFOs, else RBR plus a queued break) and
//! leaves no receive interrupt; LCR, MCR (bits 4:0), SCR and the divisor read back what
//! the guest wrote; `push_input` accepts exactly when `can_accept_input` said so; and
//! the transmitted bytes are exactly the THR writes made outside DLAB and loopback.

use crate::input::{Input, SeedWriter};
use kestrel_devices::uart::{iir, lcr, lsr, mcr, reg, FIFO_LEN};
use kestrel_devices::Uart16550;

/// What the guest's writes say the registers must hold.
#[derive(Default)]
struct Shadow {
    lcr: u8,
    mcr: u8,
    scr: u8,
    fifo: bool,
    /// Written divisor bytes (DLL, DLM), once written.
    dll: Option<u8>,
    dlm: Option<u8>,
    expected_tx: Vec<u8>,
}

/// Operation selectors, for [`seed`].
pub mod op {
    pub const READ: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const PUSH: u8 = 2;
    pub const BREAK: u8 = 3;
    pub const MODEM: u8 = 4;
    pub const COUNT: u8 = 5;
}

fn offset(input: &mut Input) -> u32 {
    let o = input.u8();
    if o == 0xFF {
        input.u32()
    } else {
        u32::from(o % 8)
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut uart = Uart16550::new();
    let mut shadow = Shadow {
        mcr: mcr::OUT2,
        ..Shadow::default()
    };
    let mut tx = Vec::new();
    check(&uart, &shadow);
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::READ => {
                uart.read(offset(&mut input));
            }
            op::WRITE => {
                let offset = offset(&mut input);
                let value = input.u8();
                let dlab = shadow.lcr & lcr::DLAB != 0;
                match offset % 8 {
                    0 if dlab => shadow.dll = Some(value),
                    0 if shadow.mcr & mcr::LOOP == 0 => shadow.expected_tx.push(value),
                    1 if dlab => shadow.dlm = Some(value),
                    2 => shadow.fifo = value & 1 != 0,
                    3 => shadow.lcr = value,
                    4 => shadow.mcr = value & 0x1F,
                    7 => shadow.scr = value,
                    _ => {}
                }
                uart.write(offset, value, &mut |b| tx.push(b));
            }
            op::PUSH => {
                let could = uart.can_accept_input();
                assert_eq!(
                    uart.push_input(input.u8()),
                    could,
                    "push_input vs can_accept_input"
                );
            }
            op::BREAK => uart.push_break(),
            _ => uart.set_modem_status(input.u8()),
        }
        check(&uart, &shadow);
    }
    assert_eq!(tx, shadow.expected_tx, "transmitted bytes");
}

fn check(uart: &Uart16550, shadow: &Shadow) {
    // Reads have side effects: every check reads a copy.
    let mut copy = uart.clone();
    let iir_value = copy.read(reg::IIR);
    assert_eq!(
        uart.irq(),
        iir_value & iir::NO_INT == 0,
        "IIR {iir_value:#04x}"
    );
    let fifo_bits = if shadow.fifo { iir::FIFO_ENABLED } else { 0 };
    assert_eq!(iir_value & 0xF0, fifo_bits, "IIR {iir_value:#04x}");
    let known = [
        iir::NO_INT,
        iir::MSI,
        iir::THRI,
        iir::RDI,
        iir::RLSI,
        iir::CTI,
    ];
    assert!(known.contains(&(iir_value & 0x0F)), "IIR {iir_value:#04x}");

    let mut copy = uart.clone();
    let lsr_value = copy.read(reg::LSR);
    assert_eq!(
        lsr_value & (lsr::THRE | lsr::TEMT),
        lsr::THRE | lsr::TEMT,
        "transmitter empty"
    );
    assert_eq!(lsr_value & 0x80, 0, "LSR bit 7 (FIFO error) is never set");

    let mut copy = uart.clone();
    assert_eq!(copy.read(reg::LCR), shadow.lcr, "LCR reads back");
    assert_eq!(copy.read(reg::MCR), shadow.mcr, "MCR reads back bits 4:0");
    assert_eq!(copy.read(reg::SCR), shadow.scr, "SCR reads back");
    assert_eq!(uart.line_control(), shadow.lcr);
    let [dll, dlm] = uart.divisor().to_le_bytes();
    assert_eq!(shadow.dll.unwrap_or(0x0C), dll, "DLL");
    assert_eq!(shadow.dlm.unwrap_or(0), dlm, "DLM");
    if shadow.lcr & lcr::DLAB != 0 {
        assert_eq!(copy.read(reg::DLL), dll);
        assert_eq!(copy.read(reg::DLM), dlm);
        return;
    }
    // A break queues its NUL even with FIFOs off, so RBR plus a FIFO's worth is the most
    // a guest can ever drain; with FIFOs on, at most the FIFO.
    let capacity = if shadow.fifo { FIFO_LEN } else { FIFO_LEN + 1 };
    let mut copy = uart.clone();
    let mut reads = 0;
    while copy.read(reg::LSR) & lsr::DR != 0 {
        copy.read(reg::RBR);
        reads += 1;
        assert!(reads <= capacity, "more than {capacity} bytes readable");
    }
    let id = copy.read(reg::IIR) & 0x0F;
    assert!(
        [iir::NO_INT, iir::THRI, iir::MSI].contains(&id),
        "after draining: IIR {id:#04x}"
    );
}

/// The operations of one seed, as the property test's generator makes them.
pub enum Op {
    Read(u32),
    Write(u32, u8),
    Push(u8),
    Break,
    Modem(u8),
}

/// Encodes `ops` as an input of this target.
pub fn seed(ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    let put_offset = |w: &mut SeedWriter, o: u32| {
        if o < 8 {
            w.u8(o as u8);
        } else {
            w.u8(0xFF).u32(o);
        }
    };
    for o in ops {
        match *o {
            Op::Read(off) => {
                w.u8(op::READ);
                put_offset(&mut w, off);
            }
            Op::Write(off, v) => {
                w.u8(op::WRITE);
                put_offset(&mut w, off);
                w.u8(v);
            }
            Op::Push(b) => {
                w.u8(op::PUSH).u8(b);
            }
            Op::Break => {
                w.u8(op::BREAK);
            }
            Op::Modem(l) => {
                w.u8(op::MODEM).u8(l);
            }
        }
    }
    w.bytes
}
