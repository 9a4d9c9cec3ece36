//! The UIC driven through its DCRs as Linux 6.1's `arch/powerpc/platforms/4xx/uic.c` does:
//! init, `uic_set_irq_type`, mask/unmask/ack, `uic_get_irq`, and the level-flow handler;
//! plus polarity, edge detection, critical routing and the vector registers.

use kestrel_devices::uic::{line_bit, reg, vcr};
use kestrel_devices::{Uic, UIC_DCR_BASE, UIC_DCR_COUNT};

#[derive(Clone, Copy)]
enum Sense {
    EdgeRising,
    EdgeFalling,
    LevelHigh,
    LevelLow,
}

/// What Linux's UIC driver does, one function per driver entry point.
struct Driver {
    uic: Uic,
}

impl Driver {
    /// `uic_init_one`.
    fn init() -> Self {
        let mut uic = Uic::new();
        uic.write_dcr(reg::ER, 0);
        uic.write_dcr(reg::CR, 0);
        uic.write_dcr(reg::TR, 0);
        uic.write_dcr(reg::SR, 0xFFFF_FFFF);
        Self { uic }
    }

    /// `uic_set_irq_type`.
    fn set_type(&mut self, src: u32, sense: Sense) {
        let (trigger, polarity) = match sense {
            Sense::EdgeRising => (1, 1),
            Sense::EdgeFalling => (1, 0),
            Sense::LevelHigh => (0, 1),
            Sense::LevelLow => (0, 0),
        };
        let mask = !(1u32 << (31 - src));
        let tr = (self.uic.read_dcr(reg::TR) & mask) | (trigger << (31 - src));
        let pr = (self.uic.read_dcr(reg::PR) & mask) | (polarity << (31 - src));
        self.uic.write_dcr(reg::PR, pr);
        self.uic.write_dcr(reg::TR, tr);
        self.uic.write_dcr(reg::SR, !mask);
    }

    fn is_level(&mut self, src: u32) -> bool {
        self.uic.read_dcr(reg::TR) & (1 << (31 - src)) == 0
    }

    /// `uic_unmask_irq`.
    fn unmask(&mut self, src: u32) {
        let sr = 1u32 << (31 - src);
        if self.is_level(src) {
            self.uic.write_dcr(reg::SR, sr);
        }
        let er = self.uic.read_dcr(reg::ER) | sr;
        self.uic.write_dcr(reg::ER, er);
    }

    /// `uic_mask_irq`.
    fn mask(&mut self, src: u32) {
        let er = self.uic.read_dcr(reg::ER) & !(1u32 << (31 - src));
        self.uic.write_dcr(reg::ER, er);
    }

    /// `uic_mask_ack_irq`.
    fn mask_ack(&mut self, src: u32) {
        let sr = 1u32 << (31 - src);
        let er = self.uic.read_dcr(reg::ER) & !sr;
        self.uic.write_dcr(reg::ER, er);
        if !self.is_level(src) {
            self.uic.write_dcr(reg::SR, sr);
        }
    }

    /// `uic_get_irq`: the highest-priority (lowest-numbered) enabled request, if any.
    fn get_irq(&mut self) -> Option<u32> {
        let msr = self.uic.read_dcr(reg::MSR);
        (msr != 0).then(|| msr.leading_zeros())
    }

    /// `handle_level_irq` around a device handler that silences the device.
    fn handle(&mut self, src: u32, device_handler: impl FnOnce(&mut Uic)) {
        self.mask_ack(src);
        device_handler(&mut self.uic);
        self.unmask(src);
    }
}

#[test]
fn dcr_window() {
    assert_eq!(UIC_DCR_BASE, 0xC0);
    assert_eq!(UIC_DCR_COUNT, 9);
    assert_eq!(reg::VCR, UIC_DCR_COUNT - 1);
}

#[test]
fn uart_level_high_flow() {
    let mut d = Driver::init();
    // Linux maps UART0 (line 0, "interrupts = <0 4>": level high) and requests it.
    d.set_type(0, Sense::LevelHigh);
    d.unmask(0);
    assert!(!d.uic.irq_output());
    assert_eq!(d.get_irq(), None);

    // The UART raises its line.
    d.uic.set_input(0, true);
    assert!(d.uic.irq_output());
    assert!(!d.uic.crit_output());
    assert_eq!(d.get_irq(), Some(0));
    assert_eq!(d.uic.read_dcr(reg::MSR), line_bit(0));

    // handle_level_irq: mask_ack (no SR write for level), the 8250 handler quiets the UART,
    // unmask acks SR and re-enables.
    d.handle(0, |uic| {
        assert!(!uic.irq_output(), "masked while the handler runs");
        uic.set_input(0, false);
    });
    assert!(!d.uic.irq_output());
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(0), 0);
    assert_eq!(d.uic.read_dcr(reg::ER), line_bit(0));
}

#[test]
fn level_line_still_asserted_relatches_after_ack() {
    let mut d = Driver::init();
    d.set_type(1, Sense::LevelHigh);
    d.unmask(1);
    d.uic.set_input(1, true);
    // The handler does not quiet the device: the ack in unmask cannot clear SR.
    d.handle(1, |_| {});
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(1), line_bit(1));
    assert!(d.uic.irq_output());
    // Explicit ack attempts change nothing while the line is asserted.
    d.uic.write_dcr(reg::SR, line_bit(1));
    assert!(d.uic.irq_output());
    d.uic.set_input(1, false);
    assert!(!d.uic.irq_output());
}

#[test]
fn masking_hides_but_keeps_the_request() {
    let mut d = Driver::init();
    d.set_type(0, Sense::LevelHigh);
    d.set_type(1, Sense::LevelHigh);
    d.unmask(0);
    d.unmask(1);
    d.uic.set_input(1, true);
    d.uic.set_input(0, true);
    assert_eq!(d.get_irq(), Some(0), "line 0 has priority");
    d.mask(0);
    assert_eq!(d.get_irq(), Some(1));
    d.mask(1);
    assert!(!d.uic.irq_output());
    assert_eq!(
        d.uic.read_dcr(reg::SR) & (line_bit(0) | line_bit(1)),
        line_bit(0) | line_bit(1)
    );
    assert_eq!(d.uic.read_dcr(reg::MSR), 0);
    d.unmask(1);
    assert_eq!(d.get_irq(), Some(1));
}

#[test]
fn edge_rising_latches_once_per_transition() {
    let mut d = Driver::init();
    d.set_type(5, Sense::EdgeRising);
    d.unmask(5);
    d.uic.set_input(5, true);
    assert_eq!(d.get_irq(), Some(5));
    // mask_ack acks edges up front; the line staying high does not re-latch.
    d.handle(5, |uic| uic.set_input(5, true));
    assert_eq!(d.get_irq(), None);
    d.uic.set_input(5, true);
    assert_eq!(d.get_irq(), None, "no new transition");
    d.uic.set_input(5, false);
    assert_eq!(d.get_irq(), None, "falling edge is the inactive one");
    d.uic.set_input(5, true);
    assert_eq!(d.get_irq(), Some(5));
    // An edge request survives the line going low again.
    d.uic.set_input(5, false);
    assert_eq!(d.get_irq(), Some(5));
    d.mask_ack(5);
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(5), 0);
}

#[test]
fn edge_falling_and_level_low_use_polarity() {
    let mut d = Driver::init();
    // Idle-high lines, configured active low.
    d.uic.set_input(6, true);
    d.uic.set_input(7, true);
    d.set_type(6, Sense::EdgeFalling);
    d.set_type(7, Sense::LevelLow);
    d.unmask(6);
    d.unmask(7);
    assert_eq!(d.get_irq(), None);
    d.uic.set_input(6, false);
    assert_eq!(d.get_irq(), Some(6));
    d.mask_ack(6);
    d.unmask(6);
    assert_eq!(d.get_irq(), None);
    d.uic.set_input(7, false);
    assert_eq!(d.get_irq(), Some(7));
    d.uic.write_dcr(reg::SR, line_bit(7));
    assert_eq!(d.get_irq(), Some(7), "still asserted (low)");
    d.uic.set_input(7, true);
    assert_eq!(d.get_irq(), None);
}

#[test]
fn set_type_clears_the_spurious_request_it_causes() {
    // An active-high source idles low on line 9. After init (PR = 0, level) that counts as
    // asserted and latches (masked by ER = 0).
    let mut uic = Uic::new();
    uic.set_input(9, false);
    let mut d = Driver { uic };
    d.uic.write_dcr(reg::ER, 0);
    d.uic.write_dcr(reg::CR, 0);
    d.uic.write_dcr(reg::TR, 0);
    d.uic.write_dcr(reg::SR, 0xFFFF_FFFF);
    assert_eq!(d.uic.read_dcr(reg::SR), line_bit(9), "only the driven line");
    assert!(!d.uic.irq_output());
    // Switching it to level-high deasserts it; Linux's SR write then finds it clear.
    d.set_type(9, Sense::LevelHigh);
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(9), 0);
    // Raw PR writes re-sample level lines: making low the active level latches at once,
    // and making it inactive again drops the request without any SR write.
    let pr = d.uic.read_dcr(reg::PR);
    d.uic.write_dcr(reg::PR, pr & !line_bit(9));
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(9), line_bit(9));
    d.uic.write_dcr(reg::PR, pr);
    assert_eq!(d.uic.read_dcr(reg::SR) & line_bit(9), 0);
}

#[test]
fn critical_routing_and_vectors() {
    let mut d = Driver::init();
    d.set_type(2, Sense::LevelHigh);
    d.set_type(7, Sense::LevelHigh);
    d.set_type(3, Sense::LevelHigh);
    d.uic.write_dcr(reg::CR, line_bit(2) | line_bit(7));
    d.unmask(2);
    d.unmask(3);
    d.unmask(7);
    d.uic.write_dcr(reg::VCR, 0x1000_0000);
    assert_eq!(d.uic.read_dcr(reg::VR), 0, "no critical request pending");

    d.uic.set_input(3, true);
    assert!(d.uic.irq_output());
    assert!(!d.uic.crit_output());
    assert_eq!(
        d.uic.read_dcr(reg::VR),
        0,
        "non-critical requests have no vector"
    );

    d.uic.set_input(2, true);
    assert!(d.uic.crit_output());
    // QEMU: VCBA + 512 * (31 - n) for the highest-numbered pending critical line n.
    assert_eq!(d.uic.read_dcr(reg::VR), 0x1000_0000 + 512 * 29);
    d.uic.set_input(7, true);
    assert_eq!(d.uic.read_dcr(reg::VR), 0x1000_0000 + 512 * 24);
    // VCR[PRO] = 1: QEMU's search does not run, VR is the base.
    d.uic.write_dcr(reg::VCR, 0x1000_0000 | vcr::PRO);
    assert_eq!(d.uic.read_dcr(reg::VR), 0x1000_0000);
    // Bit 30 of VCR is not kept; VR and MSR ignore writes.
    d.uic.write_dcr(reg::VCR, 0xFFFF_FFFF);
    assert_eq!(d.uic.read_dcr(reg::VCR), 0xFFFF_FFFD);
    d.uic.write_dcr(reg::VR, 0);
    d.uic.write_dcr(reg::MSR, 0);
    assert_eq!(d.uic.read_dcr(reg::VR), 0xFFFF_FFFC);
    assert_ne!(d.uic.read_dcr(reg::MSR), 0);

    // Only masking the critical lines drops the critical output.
    d.mask(2);
    d.mask(7);
    assert!(!d.uic.crit_output());
    assert!(d.uic.irq_output());
    assert_eq!(d.uic.read_dcr(reg::VR), 0);
}

/// Kestrel's selftest guest (`guests/selftest`: `reset_machine` then `uic_registers`)
/// expects QEMU's results; the VMM drives only lines 0 and 1 (the UARTs, idle low).
#[test]
fn selftest_register_sequence_matches_qemu() {
    for mut uic in [Uic::new(), Uic::without_polarity()] {
        uic.set_input(0, false);
        uic.set_input(1, false);
        uic.write_dcr(reg::ER, 0);
        uic.write_dcr(reg::CR, 0);
        uic.write_dcr(reg::TR, 0);
        uic.write_dcr(reg::PR, line_bit(0) | line_bit(1));
        uic.write_dcr(reg::SR, 0xFFFF_FFFF);
        assert_eq!(uic.read_dcr(reg::SR), 0);
        for v in [0x0000_00F0, 0x8000_0001, 0] {
            uic.write_dcr(reg::CR, v);
            assert_eq!(uic.read_dcr(reg::CR), v);
        }
        let pr = uic.read_dcr(reg::PR);
        uic.write_dcr(reg::PR, pr ^ 0xF0);
        assert_eq!(uic.read_dcr(reg::PR), pr ^ 0xF0);
        uic.write_dcr(reg::PR, pr);
        for v in [0x0000_000F, 0] {
            uic.write_dcr(reg::TR, v);
            assert_eq!(uic.read_dcr(reg::TR), v);
        }
        let line = line_bit(31);
        uic.write_dcr(reg::SRS, line);
        assert_eq!(uic.read_dcr(reg::SR) & line, line);
        assert_eq!(uic.read_dcr(reg::MSR), 0);
        uic.write_dcr(reg::ER, line);
        assert_eq!(uic.read_dcr(reg::MSR), line);
        uic.write_dcr(reg::ER, 0);
        assert_eq!(uic.read_dcr(reg::MSR), 0);
        uic.write_dcr(reg::SR, line);
        assert_eq!(
            uic.read_dcr(reg::SR) & line,
            0,
            "UICSR after writing 1 to clear"
        );
        // external_uart1: UART1 raises THRE; SR latches it while ER masks it.
        uic.set_input(1, true);
        assert_eq!(uic.read_dcr(reg::SR) & line_bit(1), line_bit(1));
        assert_eq!(uic.read_dcr(reg::MSR), 0);
        uic.write_dcr(reg::ER, line_bit(1));
        assert!(uic.irq_output());
        // The handler quiets UART1 and acknowledges.
        uic.set_input(1, false);
        uic.write_dcr(reg::SR, line_bit(1));
        assert_eq!(uic.read_dcr(reg::SR) & line_bit(1), 0);
        assert!(!uic.irq_output());
    }
}

#[test]
fn status_set_and_masked_status() {
    let mut uic = Uic::new();
    uic.write_dcr(reg::SRS, 0x8000_0001);
    assert_eq!(uic.read_dcr(reg::SR), 0x8000_0001);
    assert_eq!(uic.read_dcr(reg::SRS), 0x8000_0001);
    assert_eq!(uic.read_dcr(reg::MSR), 0);
    assert!(!uic.irq_output());
    uic.write_dcr(reg::ER, 0x0000_0001);
    assert_eq!(uic.read_dcr(reg::MSR), 0x0000_0001);
    assert!(uic.irq_output());
    uic.write_dcr(reg::CR, 0x0000_0001);
    assert!(!uic.irq_output());
    assert!(uic.crit_output());
    // With every line edge-sensitive, nothing re-latches and an SR write clears it all.
    uic.write_dcr(reg::TR, u32::MAX);
    uic.write_dcr(reg::SR, u32::MAX);
    assert_eq!(uic.read_dcr(reg::SR), 0);
    assert!(!uic.crit_output());
    // Undecoded offsets.
    uic.write_dcr(UIC_DCR_COUNT, u32::MAX);
    assert_eq!(uic.read_dcr(UIC_DCR_COUNT), 0);
    assert_eq!(uic.read_dcr(u32::MAX), 0);
}
