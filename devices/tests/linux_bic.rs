//! The BIC driven through its MMIO window as a Linux irqchip chained on UIC0 input 30 drives
//! it (Kittyhawk's `bgic.c` flow, core 0): mask = target 0, unmask = target `NCRIT(0)`,
//! ack = STATUS_CLR, and the chained handler's `get_irq` (HIER_NCRIT, then the group's
//! NCRIT view, each by leading-zero count); plus levels re-latching after an ack, critical
//! and machine-check routing, broadcast codes, RD_CLR_STATUS, STATUS_SET and the cascade
//! output.

use kestrel_bgp::{coll, dma};
use kestrel_devices::bic::{
    group_reg, line_mask, target_slot, Bic, BicCascade, CRIT, GROUPS, HIER_CRIT, HIER_MCHK,
    HIER_NCRIT, MCHK, NCRIT, RD_CLR_STATUS, SIZE, STATUS, STATUS_CLR, STATUS_SET, TARGET,
    TARGET_BCAST_CRIT, TARGET_BCAST_NCRIT, TARGET_CRIT_CORE, TARGET_DISABLED, TARGET_MCHK_CORE,
    TARGET_NCRIT_CORE, TARGET_WORDS, UIC0_CASCADE_INPUT,
};
use kestrel_devices::bus::{IrqLine, MmioDevice};
use std::cell::Cell;

/// What the guest driver does, over 32-bit big-endian MMIO only.
struct Driver {
    bic: Bic,
}

impl Driver {
    fn in_be32(&mut self, off: u32) -> u32 {
        let mut w = [0u8; 4];
        self.bic.mmio_read(u64::from(off), &mut w).expect("decoded");
        u32::from_be_bytes(w)
    }

    fn out_be32(&mut self, off: u32, v: u32) {
        self.bic
            .mmio_write(u64::from(off), &v.to_be_bytes())
            .expect("decoded");
    }

    /// Probe: every target disabled, every latch cleared.
    fn init() -> Self {
        let mut d = Driver { bic: Bic::new() };
        for g in 0..GROUPS {
            for w in 0..TARGET_WORDS {
                d.out_be32(group_reg(g, TARGET + 4 * w), 0);
            }
            d.out_be32(group_reg(g, STATUS_CLR), u32::MAX);
        }
        d
    }

    fn set_target(&mut self, irq: u32, code: u32) {
        let (word, shift) = target_slot(irq);
        let off = group_reg(irq / 32, TARGET + 4 * word);
        let v = (self.in_be32(off) & !(0xF << shift)) | (code << shift);
        self.out_be32(off, v);
    }

    fn unmask(&mut self, irq: u32) {
        self.set_target(irq, TARGET_NCRIT_CORE);
    }

    fn mask(&mut self, irq: u32) {
        self.set_target(irq, TARGET_DISABLED);
    }

    fn ack(&mut self, irq: u32) {
        self.out_be32(group_reg(irq / 32, STATUS_CLR), line_mask(irq));
    }

    /// The chained handler's `get_irq` for core 0.
    fn get_irq(&mut self) -> Option<u32> {
        let hier = self.in_be32(HIER_NCRIT);
        if hier == 0 {
            return None;
        }
        let g = hier.leading_zeros();
        let bits = self.in_be32(group_reg(g, NCRIT));
        assert_ne!(bits, 0, "HIER says group {g} is pending");
        Some(g * 32 + bits.leading_zeros())
    }

    /// `handle_level_irq`: mask + ack, the device handler, unmask.
    fn handle_level(&mut self, irq: u32, device: impl FnOnce(&mut Bic)) {
        self.mask(irq);
        self.ack(irq);
        device(&mut self.bic);
        self.unmask(irq);
    }
}

#[test]
fn window_and_group_layout() {
    assert_eq!(GROUPS, 15);
    assert_eq!(SIZE, 0x1000);
    assert_eq!(group_reg(5, STATUS_CLR), 0x288);
    assert_eq!(HIER_NCRIT, 0x780);
    assert_eq!(UIC0_CASCADE_INPUT, 30);
}

#[test]
fn collective_receive_line_flow() {
    let mut d = Driver::init();
    let irq = coll::IRQ_RCV_VC0;
    d.unmask(irq);
    assert_eq!(d.get_irq(), None);
    d.bic.set_line(irq, true);
    assert!(d.bic.ncrit_output(0));
    assert!(!d.bic.ncrit_output(1), "routed to core 0 only");
    assert_eq!(d.get_irq(), Some(irq));
    assert_eq!(d.in_be32(HIER_NCRIT), 0x8000_0000 >> 5, "group 5");
    // The handler drains the VC: the line drops, the ack clears the latch.
    d.handle_level(irq, |bic| bic.set_line(irq, false));
    assert_eq!(d.get_irq(), None);
    assert!(!d.bic.ncrit_output(0));
    assert_eq!(d.in_be32(group_reg(5, STATUS)), 0);
}

#[test]
fn still_asserted_line_relatches_after_ack() {
    let mut d = Driver::init();
    let irq = dma::IRQ_RCV_FIFO_THRESHOLD;
    d.unmask(irq);
    d.bic.set_line(irq, true);
    d.handle_level(irq, |_| {});
    assert_eq!(d.get_irq(), Some(irq), "source still asserted");
    // STATUS writes and RD_CLR_STATUS cannot drop it either.
    let g = irq / 32;
    d.out_be32(group_reg(g, STATUS), 0);
    assert_eq!(d.in_be32(group_reg(g, STATUS)), line_mask(irq));
    assert_eq!(d.in_be32(group_reg(g, RD_CLR_STATUS)), line_mask(irq));
    assert_eq!(d.in_be32(group_reg(g, STATUS)), line_mask(irq));
    d.bic.set_line(irq, false);
    assert_eq!(d.get_irq(), None, "a dropped level clears its bit");
}

#[test]
fn soft_bits_latch_until_acked_and_a_level_pulse_is_gone() {
    let mut d = Driver::init();
    d.unmask(0x40);
    d.unmask(0x41);
    d.bic.set_line(0x40, true);
    d.bic.set_line(0x40, false);
    assert_eq!(
        d.get_irq(),
        None,
        "level-sensitive: the condition went away"
    );
    d.out_be32(group_reg(2, STATUS_SET), line_mask(0x41));
    d.bic.set_line(0x40, false);
    assert_eq!(d.get_irq(), Some(0x41), "soft interrupt stays");
    d.ack(0x41);
    assert_eq!(d.get_irq(), None);
}

#[test]
fn masked_lines_stay_pending_but_hidden() {
    let mut d = Driver::init();
    d.unmask(coll::IRQ_INJ_EXC);
    d.unmask(coll::IRQ_RCV_EXC);
    d.bic.set_line(coll::IRQ_RCV_EXC, true);
    d.bic.set_line(coll::IRQ_INJ_EXC, true);
    assert_eq!(d.get_irq(), Some(coll::IRQ_INJ_EXC), "lowest bit first");
    d.mask(coll::IRQ_INJ_EXC);
    assert_eq!(d.get_irq(), Some(coll::IRQ_RCV_EXC));
    d.mask(coll::IRQ_RCV_EXC);
    assert_eq!(d.get_irq(), None);
    assert!(!d.bic.ncrit_output(0));
    let g = coll::IRQ_INJ_EXC / 32;
    assert_eq!(
        d.in_be32(group_reg(g, STATUS)),
        line_mask(coll::IRQ_INJ_EXC) | line_mask(coll::IRQ_RCV_EXC)
    );
}

#[test]
fn groups_are_ordered_by_hierarchy() {
    let mut d = Driver::init();
    for irq in [0x1D0, 0x60, 0x3F] {
        d.unmask(irq);
        d.bic.set_line(irq, true);
    }
    assert_eq!(
        d.in_be32(HIER_NCRIT),
        (0x8000_0000 >> 1) | (0x8000_0000 >> 3) | (0x8000_0000 >> 14)
    );
    assert_eq!(d.get_irq(), Some(0x3F));
    d.bic.set_line(0x3F, false);
    d.ack(0x3F);
    assert_eq!(d.get_irq(), Some(0x60));
}

#[test]
fn soft_interrupts_and_status_writes() {
    let mut d = Driver::init();
    d.unmask(3);
    d.out_be32(group_reg(0, STATUS_SET), line_mask(3) | line_mask(7));
    assert_eq!(d.get_irq(), Some(3));
    assert_eq!(
        d.in_be32(group_reg(0, NCRIT)),
        line_mask(3),
        "7 has no target"
    );
    assert_eq!(
        d.in_be32(group_reg(0, RD_CLR_STATUS)),
        line_mask(3) | line_mask(7)
    );
    assert_eq!(d.in_be32(group_reg(0, STATUS)), 0);
    d.out_be32(group_reg(0, STATUS), line_mask(3));
    assert_eq!(d.get_irq(), Some(3), "a STATUS write replaces the latch");
}

#[test]
fn critical_machine_check_and_broadcast_routing() {
    let mut d = Driver::init();
    d.set_target(0x21, TARGET_CRIT_CORE);
    d.set_target(0x22, TARGET_MCHK_CORE | 2);
    d.set_target(0x23, TARGET_BCAST_NCRIT);
    d.set_target(0x24, TARGET_BCAST_CRIT);
    for irq in 0x21..=0x24 {
        d.bic.set_line(irq, true);
    }
    let g = 1;
    assert_eq!(d.in_be32(group_reg(g, NCRIT)), line_mask(0x23));
    assert_eq!(
        d.in_be32(group_reg(g, NCRIT + 12)),
        line_mask(0x23),
        "broadcast: core 3 too"
    );
    assert_eq!(
        d.in_be32(group_reg(g, CRIT)),
        line_mask(0x21) | line_mask(0x24)
    );
    assert_eq!(d.in_be32(group_reg(g, CRIT + 4)), line_mask(0x24));
    assert_eq!(d.in_be32(group_reg(g, MCHK + 8)), line_mask(0x22));
    assert_eq!(d.in_be32(group_reg(g, MCHK)), 0);
    assert_eq!(d.in_be32(HIER_CRIT), 0x4000_0000);
    assert_eq!(d.in_be32(HIER_MCHK + 8), 0x4000_0000);
    assert_eq!(d.in_be32(HIER_MCHK), 0);
    assert!(d.bic.crit_output(0) && d.bic.mchk_output(2) && !d.bic.mchk_output(0));
    // Computed views ignore stores.
    d.out_be32(group_reg(g, NCRIT), 0);
    d.out_be32(HIER_NCRIT, 0);
    assert_eq!(d.in_be32(group_reg(g, NCRIT)), line_mask(0x23));
    // TARGET reads back what was written, nibble by nibble.
    assert_eq!(d.in_be32(group_reg(g, TARGET)), 0x08E1_2000);
    assert_eq!(d.bic.target_of(0x22), TARGET_MCHK_CORE | 2);
}

#[test]
fn set_lines_takes_the_fabric_layout() {
    let mut d = Driver::init();
    let mut lines = [0u32; GROUPS as usize];
    lines[5] = line_mask(coll::IRQ_RCV_VC1);
    d.unmask(coll::IRQ_RCV_VC1);
    d.bic.set_lines(&lines);
    assert_eq!(d.get_irq(), Some(coll::IRQ_RCV_VC1));
    d.bic.set_lines(&[0; GROUPS as usize]);
    d.ack(coll::IRQ_RCV_VC1);
    assert_eq!(d.get_irq(), None);
}

struct Level(Cell<bool>);
impl IrqLine for Level {
    fn set_level(&self, high: bool) {
        self.0.set(high);
    }
}

#[test]
fn cascade_drives_the_uic_input() {
    let mut c = BicCascade::new(Level(Cell::new(false)));
    let t = group_reg(5, TARGET + 4 * 2);
    // Unmask 0xB6 (line 22 of group 5: word 2, shift (7 - 6) * 4).
    c.mmio_write(u64::from(t), &(TARGET_NCRIT_CORE << 4).to_be_bytes())
        .unwrap();
    assert!(!c.line.0.get());
    c.set_line(coll::IRQ_RCV_VC0, true);
    assert!(c.line.0.get());
    c.set_line(coll::IRQ_RCV_VC0, false);
    assert!(!c.line.0.get());
    let set = group_reg(5, STATUS_SET);
    c.mmio_write(u64::from(set), &line_mask(coll::IRQ_RCV_VC0).to_be_bytes())
        .unwrap();
    assert!(c.line.0.get(), "soft set");
    let clr = group_reg(5, STATUS_CLR);
    c.mmio_write(u64::from(clr), &line_mask(coll::IRQ_RCV_VC0).to_be_bytes())
        .unwrap();
    assert!(!c.line.0.get());
}
