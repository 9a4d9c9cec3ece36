//! Property tests: arbitrary guest register traffic and host events never panic, and the
//! models' invariants hold after every step. The UIC is also checked against a per-line
//! reference model written independently of the bit-mask implementation
//! (`kestrel_testkit::uic`, shared with the `uic` fuzz target).

use kestrel_devices::uart::{iir, lcr, lsr, mcr, reg as ureg, FIFO_LEN};
use kestrel_devices::{Uart16550, Uic};
use kestrel_testkit::uic::{check as check_uic, RefUic};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// UART

#[derive(Clone, Debug)]
enum UartOp {
    Read(u32),
    Write(u32, u8),
    Push(u8),
    Break,
    Modem(u8),
}

fn uart_offset() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..8, 1 => any::<u32>()]
}

fn uart_value() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => any::<u8>(),
        1 => Just(lcr::DLAB),
        1 => Just(0x0F),
        1 => Just(0xC1),
        1 => Just(0x01),
        1 => Just(mcr::LOOP),
        1 => Just(0),
    ]
}

fn uart_op() -> impl Strategy<Value = UartOp> {
    prop_oneof![
        4 => uart_offset().prop_map(UartOp::Read),
        4 => (uart_offset(), uart_value()).prop_map(|(o, v)| UartOp::Write(o, v)),
        3 => any::<u8>().prop_map(UartOp::Push),
        1 => Just(UartOp::Break),
        1 => any::<u8>().prop_map(UartOp::Modem),
    ]
}

/// What the test tracks from the guest's writes to check the model against.
#[derive(Default)]
struct UartShadow {
    lcr: u8,
    mcr: u8,
    fifo: bool,
    expected_tx: Vec<u8>,
}

fn check_uart(uart: &Uart16550, shadow: &UartShadow) {
    // irq() agrees with IIR[0], read on a copy so the check has no side effects.
    let mut copy = uart.clone();
    let iir_value = copy.read(ureg::IIR);
    assert_eq!(
        uart.irq(),
        iir_value & iir::NO_INT == 0,
        "IIR {iir_value:#04x}"
    );
    // IIR bits 7:6 say whether the FIFOs are on; bits 5:4 are 0; the ID is a known one.
    let fifo_bits = if shadow.fifo { iir::FIFO_ENABLED } else { 0 };
    assert_eq!(iir_value & 0xF0, fifo_bits);
    assert!(
        [
            iir::NO_INT,
            iir::MSI,
            iir::THRI,
            iir::RDI,
            iir::RLSI,
            iir::CTI
        ]
        .contains(&(iir_value & 0x0F)),
        "IIR {iir_value:#04x}"
    );
    // Transmission is instantaneous: THR and the shift register are always empty.
    let mut copy = uart.clone();
    let lsr_value = copy.read(ureg::LSR);
    assert_eq!(lsr_value & (lsr::THRE | lsr::TEMT), lsr::THRE | lsr::TEMT);
    assert_eq!(lsr_value & 0x80, 0);
    // Draining RBR ends within the receiver's capacity and leaves nothing pending but THRE
    // or modem status.
    if shadow.lcr & lcr::DLAB == 0 {
        let mut copy = uart.clone();
        let capacity = if shadow.fifo { FIFO_LEN } else { 1 };
        let mut reads = 0;
        while copy.read(ureg::LSR) & lsr::DR != 0 {
            copy.read(ureg::RBR);
            reads += 1;
            assert!(reads <= capacity, "more than {capacity} bytes readable");
        }
        let id = copy.read(ureg::IIR) & 0x0F;
        assert!(
            [iir::NO_INT, iir::THRI, iir::MSI].contains(&id),
            "after draining: IIR {id:#04x}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn uart_never_panics_and_keeps_invariants(ops in proptest::collection::vec(uart_op(), 0..200)) {
        let mut uart = Uart16550::new();
        let mut shadow = UartShadow::default();
        let mut tx = Vec::new();
        for op in ops {
            match op {
                UartOp::Read(offset) => {
                    uart.read(offset);
                }
                UartOp::Write(offset, value) => {
                    match offset % 8 {
                        0 if shadow.lcr & lcr::DLAB == 0 && shadow.mcr & mcr::LOOP == 0 => {
                            shadow.expected_tx.push(value)
                        }
                        2 => shadow.fifo = value & 1 != 0,
                        3 => shadow.lcr = value,
                        4 => shadow.mcr = value,
                        _ => {}
                    }
                    uart.write(offset, value, &mut |b| tx.push(b));
                }
                UartOp::Push(byte) => {
                    let could = uart.can_accept_input();
                    prop_assert_eq!(uart.push_input(byte), could);
                }
                UartOp::Break => uart.push_break(),
                UartOp::Modem(lines) => uart.set_modem_status(lines),
            }
            check_uart(&uart, &shadow);
        }
        prop_assert_eq!(tx, shadow.expected_tx);
    }
}

// ---------------------------------------------------------------------------------------
// UIC

#[derive(Clone, Debug)]
enum UicOp {
    Read(u32),
    Write(u32, u32),
    Input(u32, bool),
}

fn uic_offset() -> impl Strategy<Value = u32> {
    prop_oneof![10 => 0u32..10, 1 => any::<u32>()]
}

fn uic_value() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => any::<u32>(),
        2 => (0u32..32).prop_map(|n| 1 << n),
        1 => Just(0),
        1 => Just(u32::MAX),
    ]
}

fn uic_line() -> impl Strategy<Value = u32> {
    prop_oneof![10 => 0u32..32, 1 => any::<u32>()]
}

fn uic_op() -> impl Strategy<Value = UicOp> {
    prop_oneof![
        2 => uic_offset().prop_map(UicOp::Read),
        4 => (uic_offset(), uic_value()).prop_map(|(o, v)| UicOp::Write(o, v)),
        5 => (uic_line(), any::<bool>()).prop_map(|(l, v)| UicOp::Input(l, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn uic_matches_reference_and_keeps_invariants(
        polarity in any::<bool>(),
        ops in proptest::collection::vec(uic_op(), 0..200),
    ) {
        let mut uic = if polarity { Uic::new() } else { Uic::without_polarity() };
        let mut reference = RefUic::new(polarity);
        check_uic(&uic, &reference);
        for op in ops {
            match op {
                UicOp::Read(offset) => {
                    prop_assert_eq!(uic.read_dcr(offset), reference.read(offset));
                }
                UicOp::Write(offset, value) => {
                    uic.write_dcr(offset, value);
                    reference.write(offset, value);
                }
                UicOp::Input(line, level) => {
                    uic.set_input(line, level);
                    reference.set_input(line, level);
                }
            }
            check_uic(&uic, &reference);
        }
    }
}
