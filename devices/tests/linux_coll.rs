//! The collective model driven as a Linux driver on a 440 drives it (kestrel_coll.h's
//! contract): send = header to HI, then 16 quads of 4 x `stw` (or 2 x `stfd`) to DI;
//! receive = S for the number of headers, then HR and 16 quads from DR; the DCRs forwarded
//! to the backend with PRXF/PIXF merged; and every guest error mapped to its flag, line and
//! diagnostic. The backend here is a loopback: VC n's injected packets come back on VC n,
//! at most 8 queued, like one node whose class route targets itself.

use kestrel_bgp::bic::line_mask;
use kestrel_bgp::coll::{self, *};
use kestrel_devices::bus::{DcrDevice, MmioDevice, Unanswered};
use kestrel_devices::collective::{
    Collective, Diagnostic, TreeBackend, TreeError, PAYLOAD, VC_STRIDE,
};
use std::collections::VecDeque;

#[derive(Default)]
struct Loopback {
    fifo: [VecDeque<(u32, [u8; PAYLOAD])>; 2],
    dcrs: std::collections::HashMap<u32, u32>,
    refuse: bool,
}

impl TreeBackend for Loopback {
    fn inject(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), TreeError> {
        if self.refuse {
            return Err(TreeError::Refused);
        }
        if self.fifo[vc].len() >= FIFO_PACKETS as usize {
            return Err(TreeError::Full);
        }
        self.fifo[vc].push_back((header, *payload));
        Ok(())
    }

    fn receive(&mut self, vc: usize, payload: &mut [u8; PAYLOAD]) -> Option<u32> {
        let (h, p) = self.fifo[vc].pop_front()?;
        *payload = p;
        Some(h)
    }

    fn status(&self, vc: usize) -> u32 {
        let n = self.fifo[vc].len() as u32;
        let irq = self.fifo[vc].iter().any(|(h, _)| h & HDR_IRQ != 0);
        (n << ST_RCV_HDRS_SHIFT)
            | ((n * 16).min(0xFF) << ST_RCV_QUADS_SHIFT)
            | if irq { ST_RCV_IRQ } else { 0 }
    }

    fn dcr_read(&mut self, dcr: u32) -> u32 {
        let v = self.dcrs.get(&dcr).copied().unwrap_or(0);
        if dcr == DCR_BASE + DCR_PRXF {
            self.dcrs.remove(&dcr);
        }
        v
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        self.dcrs.insert(dcr, value);
    }
}

struct Driver {
    c: Collective<Loopback>,
}

impl Driver {
    fn new() -> Self {
        Driver {
            c: Collective::new(Loopback::default()),
        }
    }

    fn base(vc: usize) -> u64 {
        vc as u64 * VC_STRIDE
    }

    fn stw(&mut self, vc: usize, off: u32, v: u32) {
        self.c
            .mmio_write(Self::base(vc) + u64::from(off), &v.to_be_bytes())
            .unwrap();
    }

    fn stfd(&mut self, vc: usize, off: u32, v: [u8; 8]) {
        self.c
            .mmio_write(Self::base(vc) + u64::from(off), &v)
            .unwrap();
    }

    fn lwz(&mut self, vc: usize, off: u32) -> u32 {
        let mut w = [0u8; 4];
        self.c
            .mmio_read(Self::base(vc) + u64::from(off), &mut w)
            .unwrap();
        u32::from_be_bytes(w)
    }

    /// kestrel_coll_send: HI, then 16 quads of 4 x stw.
    fn send(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) {
        self.stw(vc, HI, header);
        for q in payload.chunks(16) {
            for (i, w) in q.chunks(4).enumerate() {
                self.stw(
                    vc,
                    DI + 4 * i as u32,
                    u32::from_be_bytes(w.try_into().unwrap()),
                );
            }
        }
    }

    /// The same with 2 x stfd per quad.
    fn send_fp(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) {
        self.stw(vc, HI, header);
        for q in payload.chunks(16) {
            self.stfd(vc, DI, q[..8].try_into().unwrap());
            self.stfd(vc, DI + 8, q[8..].try_into().unwrap());
        }
    }

    fn rcv_headers(&mut self, vc: usize) -> u32 {
        (self.lwz(vc, S) >> ST_RCV_HDRS_SHIFT) & ST_HDRS_MASK
    }

    /// The driver's drain loop: while S counts headers, HR + 16 quads of 4 x lwz.
    fn drain(&mut self, vc: usize) -> Vec<(u32, [u8; PAYLOAD])> {
        let mut out = Vec::new();
        while self.rcv_headers(vc) > 0 {
            let h = self.lwz(vc, HR);
            let mut p = [0u8; PAYLOAD];
            for w in p.chunks_mut(4).enumerate() {
                let off = DR + 4 * (w.0 as u32 % 4);
                w.1.copy_from_slice(&self.lwz(vc, off).to_be_bytes());
            }
            out.push((h, p));
        }
        out
    }
}

fn pattern(seed: u8) -> [u8; PAYLOAD] {
    let mut p = [0u8; PAYLOAD];
    for (i, b) in p.iter_mut().enumerate() {
        *b = seed.wrapping_mul(31).wrapping_add(i as u8);
    }
    p
}

fn p2p_header(dest: u32) -> u32 {
    HDR_P2P | HDR_IRQ | (dest << HDR_P2P_ADDR_SHIFT)
}

#[test]
fn window_layout() {
    assert_eq!(VC_STRIDE, 0x100_0000);
    assert_eq!((DI, HI, DR, HR, S, SO), (0, 0x10, 0x20, 0x30, 0x40, 0x50));
    assert_eq!(PAYLOAD, 256);
}

#[test]
fn send_and_receive_with_word_stores() {
    let mut d = Driver::new();
    d.send(0, p2p_header(3), &pattern(1));
    d.send(0, p2p_header(4), &pattern(2));
    assert_eq!(d.c.backend().fifo[0].len(), 2);
    assert_eq!(d.rcv_headers(0), 2);
    assert_ne!(d.lwz(0, S) & ST_RCV_IRQ, 0);
    assert_eq!(d.rcv_headers(1), 0);
    assert_eq!(
        (d.lwz(1, SO) >> ST_RCV_HDRS_SHIFT) & ST_HDRS_MASK,
        2,
        "SO of VC1 is VC0"
    );
    let got = d.drain(0);
    assert_eq!(
        got,
        vec![(p2p_header(3), pattern(1)), (p2p_header(4), pattern(2))]
    );
    assert_eq!(d.lwz(0, S), 0);
    assert_eq!(d.c.take_diagnostic(), None);
    assert_eq!(d.c.flags(), (0, 0));
}

#[test]
fn send_with_fp_stores_and_quad_loads_on_vc1() {
    let mut d = Driver::new();
    d.send_fp(1, 0x1234_5678 & !3, &pattern(9));
    assert_eq!(d.lwz(1, HR), 0x1234_5678 & !3);
    let mut p = [0u8; PAYLOAD];
    for q in p.chunks_mut(16) {
        d.c.mmio_read(VC_STRIDE + u64::from(DR), q).unwrap();
    }
    assert_eq!(p, pattern(9));
    assert_eq!(d.lwz(1, S), 0);
}

#[test]
fn status_counts_the_packet_in_assembly_and_in_hand() {
    let mut d = Driver::new();
    d.stw(0, HI, 0);
    for i in 0..8 {
        d.stw(0, DI + 4 * (i % 4), i);
    }
    let s = d.lwz(0, S);
    assert_eq!((s >> ST_INJ_HDRS_SHIFT) & ST_HDRS_MASK, 1);
    assert_eq!((s >> ST_INJ_QUADS_SHIFT) & ST_QUADS_MASK, 2);
    for _ in 0..14 * 4 {
        d.stw(0, DI, 0);
        d.stw(0, DI + 4, 0);
        d.stw(0, DI + 8, 0);
        d.stw(0, DI + 12, 0);
        if d.c.backend().fifo[0].len() == 1 {
            break;
        }
    }
    assert_eq!(d.c.backend().fifo[0].len(), 1);
    // Read the header only: the payload is in hand and counted.
    d.lwz(0, HR);
    let s = d.lwz(0, S);
    assert_eq!((s >> ST_RCV_HDRS_SHIFT) & ST_HDRS_MASK, 0);
    assert_eq!((s >> ST_RCV_QUADS_SHIFT) & ST_QUADS_MASK, 16);
    d.lwz(0, DR);
    assert_eq!(
        (d.lwz(0, S) >> ST_RCV_QUADS_SHIFT) & ST_QUADS_MASK,
        16,
        "partial quad"
    );
    d.lwz(0, DR + 4);
    d.lwz(0, DR + 8);
    d.lwz(0, DR + 12);
    assert_eq!((d.lwz(0, S) >> ST_RCV_QUADS_SHIFT) & ST_QUADS_MASK, 15);
}

#[test]
fn payload_before_header_is_a_collision() {
    let mut d = Driver::new();
    d.c.write_dcr(DCR_PIXEN, PIX_COLLISION);
    d.stw(0, DI, 1);
    assert_eq!(
        d.c.take_diagnostic(),
        Some((Diagnostic::PayloadWithoutHeader { vc: 0 }, 1))
    );
    let mut lines = [0u32; 15];
    d.c.irq_lines(&mut lines);
    assert_eq!(lines[5], line_mask(IRQ_INJ_EXC));
    assert_eq!(d.c.read_dcr(DCR_PIXF) & PIX_COLLISION, PIX_COLLISION);
    assert_eq!(d.c.read_dcr(DCR_PIXF) & PIX_COLLISION, 0, "a read clears");
    let mut lines = [0u32; 15];
    d.c.irq_lines(&mut lines);
    assert_eq!(lines, [0; 15]);
    // The driver recovers: a whole packet goes through.
    d.send(0, 5 << HDR_TAG_SHIFT, &pattern(3));
    assert_eq!(d.drain(0), vec![(5 << HDR_TAG_SHIFT, pattern(3))]);
}

#[test]
fn out_of_order_store_and_interrupted_packet_drop_the_packet() {
    let mut d = Driver::new();
    d.stw(1, HI, 7);
    d.stw(1, DI, 0);
    d.stw(1, DI + 8, 0);
    assert_eq!(
        d.c.take_diagnostic(),
        Some((
            Diagnostic::QuadOutOfOrder {
                vc: 1,
                offset: 8,
                expected: 4
            },
            1
        ))
    );
    assert_eq!(d.c.flags().1, PIX_COLLISION);
    d.stw(1, HI, 8);
    d.stw(1, DI, 0);
    d.stw(1, HI, 9);
    assert_eq!(
        d.c.take_diagnostic(),
        Some((Diagnostic::HeaderInterruptsPacket { vc: 1, bytes: 4 }, 1))
    );
    for _ in 0..16 {
        for o in [0, 4, 8, 12] {
            d.stw(1, DI + o, 0xAA);
        }
    }
    let got = d.drain(1);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].0, 9,
        "the last header starts the packet that went out"
    );
}

#[test]
fn full_injection_fifo_sets_overflow() {
    let mut d = Driver::new();
    for i in 0..8 {
        d.send(1, i << 2, &pattern(i as u8));
    }
    assert_eq!(d.c.take_diagnostic(), None);
    d.send(1, 99 << 2, &pattern(0));
    assert_eq!(
        d.c.take_diagnostic(),
        Some((Diagnostic::InjectionFull { vc: 1 }, 1))
    );
    assert_eq!(d.c.read_dcr(DCR_PIXF), PIX_POF1 | PIX_HOF1);
    assert_eq!(d.drain(1).len(), 8);
    d.c.backend_mut().refuse = true;
    d.send(0, 0, &pattern(0));
    assert_eq!(
        d.c.take_diagnostic(),
        Some((Diagnostic::InjectionRefused { vc: 0 }, 1))
    );
    assert_eq!(d.c.flags(), (0, 0), "refusals are not the guest's to see");
}

#[test]
fn underruns_and_bad_addresses() {
    let mut d = Driver::new();
    d.c.write_dcr(DCR_PRXEN, PRX_HUR0 | PRX_PUR1 | PRX_BADADDR0);
    assert_eq!(d.lwz(0, HR), 0);
    assert_eq!(d.lwz(1, DR + 4), 0);
    assert_eq!(d.lwz(0, 0x60), 0);
    d.c.mmio_write(u64::from(S), &[0; 8]).unwrap();
    assert_eq!(
        d.c.take_diagnostic(),
        Some((
            Diagnostic::BadAddress {
                vc: 0,
                offset: S,
                len: 8
            },
            4
        ))
    );
    assert_eq!(d.c.flags().0, PRX_HUR0 | PRX_PUR1 | PRX_BADADDR0);
    let mut lines = [0u32; 15];
    d.c.irq_lines(&mut lines);
    assert_eq!(lines[5], line_mask(IRQ_RCV_EXC));
    // The backend's own PRXF bits are merged, and both sides clear on read.
    d.c.backend_mut().dcrs.insert(DCR_BASE + DCR_PRXF, PRX_WM0);
    assert_eq!(
        d.c.read_dcr(DCR_PRXF),
        PRX_HUR0 | PRX_PUR1 | PRX_BADADDR0 | PRX_WM0
    );
    assert_eq!(d.c.read_dcr(DCR_PRXF), 0);
}

#[test]
fn undecodable_accesses_are_unanswered() {
    let mut d = Driver::new();
    let mut b = [0u8; 1];
    assert_eq!(d.c.mmio_read(u64::from(HR), &mut b), Err(Unanswered));
    assert_eq!(d.c.mmio_write(u64::from(DI) + 4, &[0; 8]), Err(Unanswered));
    assert_eq!(d.c.mmio_write(VC_SIZE, &[0; 4]), Err(Unanswered));
    assert_eq!(d.c.mmio_write(2 * VC_STRIDE, &[0; 4]), Err(Unanswered));
    assert_eq!(d.c.mmio_write(u64::MAX - 3, &[0; 4]), Err(Unanswered));
    assert_eq!(d.c.take_diagnostic(), None);
}

#[test]
fn header_after_payload_and_abandoned_packets() {
    let mut d = Driver::new();
    d.send(0, 0x100, &pattern(1));
    d.send(0, 0x200, &pattern(2));
    // DR before HR: the payload first, then its header.
    let first = d.lwz(0, DR);
    assert_eq!(first.to_be_bytes(), pattern(1)[..4]);
    // HR now returns that packet's header; a second HR abandons the payload.
    assert_eq!(d.lwz(0, HR), 0x100);
    assert_eq!(d.lwz(0, HR), 0x200);
    assert_eq!(
        d.c.take_diagnostic(),
        Some((Diagnostic::PayloadAbandoned { vc: 0, bytes: 252 }, 1))
    );
    assert_eq!(d.lwz(0, DR).to_be_bytes(), pattern(2)[..4]);
}

#[test]
fn receive_line_follows_a_held_irq_header() {
    let mut d = Driver::new();
    d.send(1, HDR_IRQ, &pattern(0));
    // A DR read pulls the packet into the hand: the backend no longer has it, the model
    // keeps VC1's receive line up until the header is read.
    d.lwz(1, DR);
    assert!(d.c.backend().fifo[1].is_empty());
    let mut lines = [0u32; 15];
    d.c.irq_lines(&mut lines);
    assert_eq!(lines[5], line_mask(IRQ_RCV_VC1));
    d.lwz(1, HR);
    let mut lines = [0u32; 15];
    d.c.irq_lines(&mut lines);
    assert_eq!(lines, [0; 15]);
}

#[test]
fn dcrs_are_forwarded_with_absolute_numbers() {
    let mut d = Driver::new();
    d.c.dcr_write(coll::DCR_NADDR, 5);
    assert_eq!(d.c.backend().dcrs.get(&0xC41), Some(&5));
    assert_eq!(d.c.dcr_read(coll::DCR_NADDR), 5);
    d.c.dcr_write(DCR_COUNT, 1);
    assert_eq!(d.c.dcr_read(DCR_COUNT), 0);
    assert_eq!(d.c.backend().dcrs.len(), 1);
}
