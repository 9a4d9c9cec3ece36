//! The torus DMA model driven as kestrel_torus.ko drives it (its `kt_program` bring-up, a
//! send = counter INCREMENT + injection TAIL, the receive path = threshold clear, TAIL read,
//! HEAD write, the fatal handler = FATAL_STATUS + BAD_ADDRESS), over a backend that records
//! what reaches the fabric: every address arrives translated guest-physical -> bus, every
//! value the guest reads back is guest-physical again, and every value outside the VM's
//! memory or its FIFO stops at the model with the hardware's error bit and a diagnostic.

use kestrel_bgp::bic::line_mask;
use kestrel_bgp::dma::{
    inj_ctr, inj_fifo, rcv_ctr, rcv_fifo, BASE_CONTROL_USE_DMA, CTR_BASE, CTR_COUNT, CTR_INCREMENT,
    CTR_LIMIT, DCR_BAD_ADDRESS, DCR_BASE, DCR_BASE_CONTROL, DCR_FATAL_ENABLE, DCR_FATAL_STATUS,
    DCR_INJ_FIFO_ENABLE, DCR_INJ_MIN, DCR_RCV_MAP, DCR_RCV_MIN, DESC_BYTES, ERR_DESCRIPTOR,
    ERR_RANGE, FIFO_END, FIFO_HEAD, FIFO_START, FIFO_TAIL, GROUP_SIZE, INJ_ACTIVATE,
    INJ_CTR_DISABLE, INJ_CTR_ENABLE, INJ_DEACTIVATE, IRQ_FATAL, PKT_HDR_BYTES, PKT_MAX_PAYLOAD,
    RCV_THRESHOLD_CLEAR, VM_GROUP,
};
use kestrel_bgp::torus;
use kestrel_devices::bus::{DcrDevice, MmioDevice, Unanswered};
use kestrel_devices::torus::{Diagnostic, DmaBackend, Target, TorusDma, DCR_SPAN, TORUS_DCR_BASE};
use std::collections::HashMap;

/// A VM with 64 MiB at guest-physical 0, seen by the fabric at bus 0x1000_0000.
const SEG_LEN: u64 = 64 << 20;
const BUS: u64 = 0x1000_0000;
const BUS_Q: u32 = (BUS >> 4) as u32;

#[derive(Default)]
struct Regs {
    page: HashMap<u32, u32>,
    dcr: HashMap<u32, u32>,
    writes: Vec<(u32, u32)>,
}

impl DmaBackend for Regs {
    fn read(&mut self, offset: u32) -> u32 {
        self.page.get(&offset).copied().unwrap_or(0)
    }
    fn write(&mut self, offset: u32, value: u32) {
        self.writes.push((offset, value));
        self.page.insert(offset, value);
    }
    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.dcr.get(&dcr).copied().unwrap_or(0)
    }
    fn dcr_write(&mut self, dcr: u32, value: u32) {
        if dcr == DCR_BASE + DCR_FATAL_STATUS {
            // Write-1-to-clear, as the engine's.
            *self.dcr.entry(dcr).or_default() &= !value;
        } else {
            self.dcr.insert(dcr, value);
        }
    }
}

fn backend() -> Regs {
    let mut r = Regs::default();
    r.dcr
        .insert(DCR_BASE + DCR_FATAL_ENABLE, ERR_RANGE | ERR_DESCRIPTOR);
    r
}

struct Driver {
    t: TorusDma<Regs>,
}

const TX_START: u32 = 0x0010_0000 >> 4; // guest-physical 1 MiB
const TX_ENTRIES: u32 = 256;
const RX_START: u32 = 0x0020_0000 >> 4;
const RX_ENTRIES: u32 = 512;
const SLOT_QUADS: u32 = (PKT_HDR_BYTES + PKT_MAX_PAYLOAD) / 16;
const FIFO: u32 = 31;
const RFIFO: u32 = 7;
const CTR: u32 = 63;

impl Driver {
    fn new() -> Self {
        Driver {
            t: TorusDma::new(backend(), 0, SEG_LEN, BUS),
        }
    }

    fn wr(&mut self, off: u32, v: u32) {
        self.t.mmio_write(u64::from(off), &v.to_be_bytes()).unwrap();
    }

    fn rd(&mut self, off: u32) -> u32 {
        let mut w = [0u8; 4];
        self.t.mmio_read(u64::from(off), &mut w).unwrap();
        u32::from_be_bytes(w)
    }

    fn mtdcrx(&mut self, dcr: u32, v: u32) {
        self.t.dcr_write(dcr - TORUS_DCR_BASE, v);
    }

    fn mfdcrx(&mut self, dcr: u32) -> u32 {
        self.t.dcr_read(dcr - TORUS_DCR_BASE)
    }

    fn tx_end() -> u32 {
        TX_START + TX_ENTRIES * DESC_BYTES / 16
    }

    fn rx_end() -> u32 {
        RX_START + RX_ENTRIES * SLOT_QUADS
    }

    /// kt_program.
    fn program(&mut self, high_memory: u64) {
        self.mtdcrx(DCR_BASE + DCR_BASE_CONTROL, BASE_CONTROL_USE_DMA);
        let hi = ((high_memory - 1) >> 4) as u32;
        self.mtdcrx(DCR_BASE + DCR_INJ_MIN, 0);
        self.mtdcrx(DCR_BASE + DCR_INJ_MIN + 1, hi);
        self.mtdcrx(DCR_BASE + DCR_RCV_MIN, 0);
        self.mtdcrx(DCR_BASE + DCR_RCV_MIN + 1, hi);
        self.wr(INJ_DEACTIVATE, 1);
        self.wr(inj_fifo(FIFO, FIFO_START), TX_START);
        self.wr(inj_fifo(FIFO, FIFO_END), Self::tx_end());
        self.wr(inj_fifo(FIFO, FIFO_HEAD), TX_START);
        self.wr(inj_fifo(FIFO, FIFO_TAIL), TX_START);
        self.wr(INJ_CTR_DISABLE + 4, 1);
        self.wr(inj_ctr(CTR, CTR_BASE), 0);
        self.wr(inj_ctr(CTR, CTR_COUNT), 0);
        self.wr(INJ_CTR_ENABLE + 4, 1);
        self.wr(rcv_fifo(RFIFO, FIFO_START), RX_START);
        self.wr(rcv_fifo(RFIFO, FIFO_END), Self::rx_end());
        self.wr(rcv_fifo(RFIFO, FIFO_HEAD), RX_START);
        self.wr(rcv_fifo(RFIFO, FIFO_TAIL), RX_START);
        self.mtdcrx(DCR_BASE + DCR_RCV_MAP, 0x1F1F_1F1F);
        let en = self.mfdcrx(DCR_BASE + DCR_INJ_FIFO_ENABLE + VM_GROUP);
        self.mtdcrx(DCR_BASE + DCR_INJ_FIFO_ENABLE + VM_GROUP, en | 1);
        self.wr(INJ_ACTIVATE, 1);
    }
}

fn page(d: &Driver, off: u32) -> u32 {
    d.t.backend().page.get(&off).copied().unwrap_or(0)
}

#[test]
fn dcr_span_covers_torus_and_dma() {
    assert_eq!(TORUS_DCR_BASE, torus::DCR_BASE);
    assert_eq!(DCR_SPAN, 0x180);
}

#[test]
fn bring_up_translates_every_address() {
    let mut d = Driver::new();
    d.program(SEG_LEN);
    assert_eq!(d.t.take_diagnostic(), None);
    assert_eq!(d.t.fatal(), 0);
    // The fabric sees bus addresses.
    assert_eq!(page(&d, inj_fifo(FIFO, FIFO_START)), BUS_Q + TX_START);
    assert_eq!(page(&d, inj_fifo(FIFO, FIFO_END)), BUS_Q + Driver::tx_end());
    assert_eq!(page(&d, inj_fifo(FIFO, FIFO_TAIL)), BUS_Q + TX_START);
    assert_eq!(page(&d, inj_ctr(CTR, CTR_BASE)), BUS_Q);
    assert_eq!(
        page(&d, rcv_fifo(RFIFO, FIFO_END)),
        BUS_Q + Driver::rx_end()
    );
    let dcr = &d.t.backend().dcr;
    assert_eq!(dcr[&(DCR_BASE + DCR_INJ_MIN)], BUS_Q);
    assert_eq!(
        dcr[&(DCR_BASE + DCR_INJ_MIN + 1)],
        BUS_Q + ((SEG_LEN - 1) >> 4) as u32
    );
    assert_eq!(
        dcr[&(DCR_BASE + DCR_RCV_MAP)],
        0x1F1F_1F1F,
        "plain DCRs pass through"
    );
    // Non-address registers are untouched.
    assert_eq!(page(&d, INJ_ACTIVATE), 1);
    assert_eq!(page(&d, inj_ctr(CTR, CTR_COUNT)), 0);
    // The guest reads guest-physical values back.
    assert_eq!(d.rd(inj_fifo(FIFO, FIFO_START)), TX_START);
    assert_eq!(d.rd(inj_ctr(CTR, CTR_BASE)), 0);
    assert_eq!(
        d.mfdcrx(DCR_BASE + DCR_INJ_MIN + 1),
        ((SEG_LEN - 1) >> 4) as u32
    );
}

#[test]
fn send_and_receive_paths() {
    let mut d = Driver::new();
    d.program(SEG_LEN);
    // Send: INCREMENT passes as is, TAIL is translated.
    d.wr(inj_ctr(CTR, CTR_INCREMENT), 1500);
    d.wr(inj_fifo(FIFO, FIFO_TAIL), TX_START + 2);
    assert_eq!(
        d.t.backend().writes[d.t.backend().writes.len() - 2],
        (inj_ctr(CTR, CTR_INCREMENT), 1500)
    );
    assert_eq!(page(&d, inj_fifo(FIFO, FIFO_TAIL)), BUS_Q + TX_START + 2);
    // The engine advanced HEAD (bus); the driver's reclaim reads it guest-physical.
    d.t.backend_mut()
        .page
        .insert(inj_fifo(FIFO, FIFO_HEAD), BUS_Q + TX_START + 2);
    assert_eq!(d.rd(inj_fifo(FIFO, FIFO_HEAD)), TX_START + 2);
    // Receive: the engine moved TAIL by two slots; the driver frees them by writing HEAD.
    d.t.backend_mut().page.insert(
        rcv_fifo(RFIFO, FIFO_TAIL),
        BUS_Q + RX_START + 2 * SLOT_QUADS,
    );
    d.wr(RCV_THRESHOLD_CLEAR, 1);
    let tail = d.rd(rcv_fifo(RFIFO, FIFO_TAIL));
    assert_eq!(tail, RX_START + 2 * SLOT_QUADS);
    d.wr(rcv_fifo(RFIFO, FIFO_HEAD), tail);
    assert_eq!(page(&d, rcv_fifo(RFIFO, FIFO_HEAD)), BUS_Q + tail);
    // Wrap: TAIL back at START is inside; END itself is not.
    d.wr(inj_fifo(FIFO, FIFO_TAIL), TX_START);
    assert_eq!(d.t.take_diagnostic(), None);
    d.wr(inj_fifo(FIFO, FIFO_TAIL), Driver::tx_end());
    assert_eq!(
        d.t.take_diagnostic(),
        Some((
            Diagnostic::OutsideFifo {
                offset: inj_fifo(FIFO, FIFO_TAIL),
                value: Driver::tx_end(),
                start: TX_START,
                end: Driver::tx_end()
            },
            1
        ))
    );
    assert_eq!(
        page(&d, inj_fifo(FIFO, FIFO_TAIL)),
        BUS_Q + TX_START,
        "not forwarded"
    );
    assert_eq!(d.t.fatal(), ERR_DESCRIPTOR);
}

#[test]
fn addresses_outside_the_segment_are_stopped_and_reported() {
    let mut d = Driver::new();
    d.program(SEG_LEN);
    let outside = (SEG_LEN >> 4) as u32;
    let writes = d.t.backend().writes.len();
    d.wr(rcv_ctr(5, CTR_BASE), outside);
    d.wr(rcv_ctr(5, CTR_LIMIT), outside);
    d.wr(inj_fifo(3, FIFO_START), u32::MAX);
    assert_eq!(d.t.backend().writes.len(), writes, "nothing forwarded");
    assert_eq!(
        d.t.take_diagnostic(),
        Some((
            Diagnostic::OutsideSegment {
                target: Target::Register(inj_fifo(3, FIFO_START)),
                value: u32::MAX
            },
            3
        ))
    );
    // The fatal handler: status and bad address as the guest wrote it, line up.
    let mut lines = [0u32; 15];
    d.t.irq_lines(&mut lines);
    assert_eq!(lines[(IRQ_FATAL / 32) as usize], line_mask(IRQ_FATAL));
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_FATAL_STATUS), ERR_RANGE);
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_BAD_ADDRESS), u32::MAX);
    d.mtdcrx(DCR_BASE + DCR_FATAL_STATUS, ERR_RANGE);
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_FATAL_STATUS), 0);
    let mut lines = [0u32; 15];
    d.t.irq_lines(&mut lines);
    assert_eq!(lines, [0; 15]);
    // An END may sit at the very end of the segment; a START may not.
    d.wr(inj_fifo(3, FIFO_START), outside - 4);
    d.wr(inj_fifo(3, FIFO_END), outside);
    assert_eq!(d.t.take_diagnostic(), None);
    d.wr(inj_fifo(4, FIFO_START), outside);
    assert!(d.t.take_diagnostic().is_some());
    // Masking the error in FATAL_ENABLE keeps the line down.
    d.mtdcrx(DCR_BASE + DCR_FATAL_ENABLE, 0);
    let mut lines = [0u32; 15];
    d.t.irq_lines(&mut lines);
    assert_eq!(lines, [0; 15]);
}

#[test]
fn pointers_before_bounds_and_backend_errors() {
    let mut d = Driver::new();
    d.wr(rcv_fifo(0, FIFO_HEAD), RX_START);
    assert!(matches!(
        d.t.take_diagnostic(),
        Some((
            Diagnostic::OutsideFifo {
                start: 0,
                end: 0,
                ..
            },
            1
        ))
    ));
    // The engine's own fatal bits and bad address (bus) read merged and translated.
    d.mtdcrx(DCR_BASE + DCR_FATAL_STATUS, ERR_DESCRIPTOR);
    d.t.backend_mut()
        .dcr
        .insert(DCR_BASE + DCR_FATAL_STATUS, ERR_RANGE);
    d.t.backend_mut()
        .dcr
        .insert(DCR_BASE + DCR_BAD_ADDRESS, BUS_Q + 0x1234);
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_FATAL_STATUS), ERR_RANGE);
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_BAD_ADDRESS), 0x1234);
    // A bus value outside the VM's window (never written) reads 0.
    d.t.backend_mut().page.insert(inj_fifo(9, FIFO_HEAD), 5);
    assert_eq!(d.rd(inj_fifo(9, FIFO_HEAD)), 0);
}

#[test]
fn range_windows_are_clamped() {
    let mut d = Driver::new();
    d.mtdcrx(DCR_BASE + DCR_RCV_MIN + 2 * 3 + 1, u32::MAX);
    let last = ((SEG_LEN >> 4) - 1) as u32;
    assert_eq!(
        d.t.backend().dcr[&(DCR_BASE + DCR_RCV_MIN + 7)],
        BUS_Q + last
    );
    assert_eq!(
        d.t.take_diagnostic(),
        Some((
            Diagnostic::WindowClamped {
                dcr: DCR_BASE + DCR_RCV_MIN + 7,
                value: u32::MAX,
                clamped: last
            },
            1
        ))
    );
    assert_eq!(d.t.fatal(), 0, "clamping is not an error");
    assert_eq!(d.mfdcrx(DCR_BASE + DCR_RCV_MIN + 7), last);
}

#[test]
fn a_segment_not_at_zero() {
    // 16 MiB at guest-physical 16 MiB, bus 0.
    let mut t = TorusDma::new(backend(), 16 << 20, 16 << 20, 0);
    t.write(inj_ctr(0, CTR_BASE), 0);
    assert!(
        t.take_diagnostic().is_some(),
        "guest-physical 0 is not this VM's"
    );
    t.write(inj_ctr(0, CTR_BASE), (16 << 20) >> 4);
    assert_eq!(t.backend().page[&inj_ctr(0, CTR_BASE)], 0);
    assert_eq!(t.read(inj_ctr(0, CTR_BASE)), (16 << 20) >> 4);
    t.write_dcr(DCR_BASE + DCR_INJ_MIN - TORUS_DCR_BASE, 0);
    assert_eq!(
        t.backend().dcr[&(DCR_BASE + DCR_INJ_MIN)],
        0,
        "clamped to the first quad"
    );
}

#[test]
fn torus_dcrs_pass_through_and_accesses_decode() {
    let mut d = Driver::new();
    d.t.backend_mut().dcr.insert(
        torus::DCR_BASE + torus::DCR_COORDS,
        torus::coord_word(2, 0, 0),
    );
    assert_eq!(d.mfdcrx(torus::DCR_BASE + torus::DCR_COORDS), 0x0200_0000);
    d.mtdcrx(torus::DCR_BASE + torus::DCR_RESET, 0);
    assert_eq!(d.t.backend().dcr[&torus::DCR_BASE], 0);
    assert_eq!(d.t.dcr_read(DCR_SPAN), 0);
    d.t.dcr_write(DCR_SPAN + 5, 1);
    assert_eq!(d.t.backend().dcr.len(), 3);
    let mut b = [0u8; 8];
    assert_eq!(d.t.mmio_read(0, &mut b), Err(Unanswered));
    assert_eq!(d.t.mmio_read(2, &mut b[..4]), Err(Unanswered));
    assert_eq!(d.t.mmio_write(GROUP_SIZE, &[0; 4]), Err(Unanswered));
}
