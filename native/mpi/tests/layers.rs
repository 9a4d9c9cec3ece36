//! The SPI and MPI layers against the real engine (`Fabric<VecMemory>`), as a native
//! program runs them over the fabric service: DMA group set-up, memory-FIFO messages in
//! bgnet's torus framing through a wrapping reception ring, reassembly in any packet order,
//! the reception interrupt (the MPI core itself: tests/core.rs).

use kestrel_fabric::{EpId, Fabric, FabricApi, VecMemory};
use kestrel_spi::{link_header, DmaGroup, Packet, Reassembly, LINK_HDR, MAX_MSG, PKT_PAYLOAD};
use proptest::prelude::*;

mod common;
use common::{at, fabric, WINDOW};

fn message(len: usize, seed: u8) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    link_header(&mut m, 0x1234, len, 1);
    m
}

/// Receives everything waiting at `g` and returns the complete messages.
fn drain(
    f: &mut Fabric<VecMemory>,
    g: &mut DmaGroup,
    r: &mut Reassembly<4>,
) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    g.receive(f, |p| r.add(p, |m| out.push((m.word3, m.bytes.to_vec()))))
        .unwrap();
    out
}

#[test]
fn messages_cross_the_torus_in_bgnet_framing() {
    let (mut f, bus) = fabric(2);
    let mut a = DmaGroup::setup(&mut f, EpId(0), bus[0], at(0)).unwrap();
    let mut b = DmaGroup::setup(&mut f, EpId(1), bus[1], at(1)).unwrap();
    f.take_changed().unwrap();
    let mut r = Reassembly::<4>::new();
    // Sizes around the packet boundary and the largest message; enough of them that the
    // reception ring (32 KiB) wraps several times.
    let sizes = [LINK_HDR, 100, 240, 241, 1526, 4000, MAX_MSG];
    let mut sent = 0;
    for round in 0..12u8 {
        for &n in &sizes {
            let m = message(n, round);
            assert!(a.send(&mut f, at(1), &m).unwrap());
            sent += 1;
            let got = drain(&mut f, &mut b, &mut r);
            assert_eq!(got.len(), 1, "message of {n} bytes");
            assert_eq!(got[0].1, m);
            // bgnet's source id: conn_id:8 | src_key:24 (X << 16).
            assert_eq!(got[0].0 & 0xff_ffff, 0);
        }
    }
    assert_eq!(f.stats(EpId(1)).drops, 0);
    assert_eq!(f.stats(EpId(0)).errors, 0);
    assert!(sent > 80);
    assert_eq!((r.dropped, r.bad), (0, 0));
}

#[test]
fn a_waiting_packet_raises_the_reception_interrupt() {
    let (mut f, bus) = fabric(2);
    let mut a = DmaGroup::setup(&mut f, EpId(0), bus[0], at(0)).unwrap();
    let mut b = DmaGroup::setup(&mut f, EpId(1), bus[1], at(1)).unwrap();
    f.take_changed().unwrap();
    let line = kestrel_bgp::dma::IRQ_RCV_FIFO_THRESHOLD;
    let up = |f: &Fabric<VecMemory>| {
        f.irq_lines(EpId(1))[(line / 32) as usize] & (0x8000_0000 >> (line % 32)) != 0
    };
    assert!(!up(&f));
    a.send(&mut f, at(1), &message(300, 1)).unwrap();
    assert!(up(&f));
    assert_ne!(
        f.take_changed().unwrap() & 0b10,
        0,
        "endpoint 1's lines changed"
    );
    let mut r = Reassembly::<4>::new();
    assert_eq!(drain(&mut f, &mut b, &mut r).len(), 1);
    assert!(!up(&f), "receiving clears the latch");
}

proptest! {
    /// Packets of several messages, interleaved and each message's packets in any order,
    /// reassemble to exactly the messages sent.
    #[test]
    fn reassembly_in_any_order(lens in proptest::collection::vec(LINK_HDR..MAX_MSG, 1..4), seed in any::<u64>()) {
        let msgs: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| message(n, i as u8)).collect();
        let mut pkts = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            for (k, c) in m.chunks(PKT_PAYLOAD).enumerate() {
                let mut p = c.to_vec();
                p.resize(p.len().div_ceil(32) * 32, 0);
                pkts.push((i as u32, (k * PKT_PAYLOAD) as u32, p));
            }
        }
        // A deterministic shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..pkts.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            pkts.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let mut r = Reassembly::<4>::new();
        let mut got = vec![None; msgs.len()];
        for (id, off, p) in &pkts {
            let pkt = Packet { hw0: 0, put_offset: *off, word3: *id, payload: p };
            r.add(&pkt, |m| got[m.word3 as usize] = Some(m.bytes.to_vec()));
        }
        for (g, m) in got.iter().zip(&msgs) {
            prop_assert_eq!(g.as_ref(), Some(m));
        }
    }

    /// Garbage packets never panic the reassembly and never complete a message longer than
    /// the maximum.
    #[test]
    fn reassembly_survives_garbage(pkts in proptest::collection::vec((any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..256)), 0..40)) {
        let mut r = Reassembly::<2>::new();
        for (w3, off, p) in &pkts {
            let pkt = Packet { hw0: 0, put_offset: *off, word3: *w3, payload: p };
            r.add(&pkt, |m| assert!(m.bytes.len() <= MAX_MSG && m.bytes.len() >= LINK_HDR));
        }
    }
}

#[test]
fn window_access_reaches_only_the_own_window() {
    let (mut f, _) = fabric(1);
    let mut b = [0u8; 4];
    assert!(f.mem_read(EpId(0), WINDOW as u32 - 4, &mut b).is_ok());
    assert!(f.mem_read(EpId(0), WINDOW as u32 - 3, &mut b).is_err());
    assert!(f.mem_write(EpId(1), 0, &b).is_err());
}

proptest! {
    /// `set_routes` (RDR by RDR, through DCRs) sets each class's local source and target
    /// bit as asked and keeps every other bit of the route registers.
    #[test]
    fn set_routes_sets_the_class_bits_and_keeps_the_links(sources in any::<u16>(), targets in any::<u16>(), links in any::<[u32; 8]>()) {
        use kestrel_bgp::coll::{rdr_of_class, DCR_BASE, DCR_RDR0, RDR_LO_SRCL, RDR_LO_TGTL};
        let (mut f, _) = fabric(1);
        for r in 0..8u32 {
            f.dcr_write(EpId(0), DCR_BASE + DCR_RDR0 + r, links[r as usize]).unwrap();
        }
        let before: Vec<u32> = (0..8).map(|r| f.dcr_read(EpId(0), DCR_BASE + DCR_RDR0 + r).unwrap()).collect();
        f.set_routes(EpId(0), sources, targets).unwrap();
        let mut class_bits = [0u32; 8];
        for class in 0..16u32 {
            let (dcr, shift) = rdr_of_class(class);
            let r = (dcr - DCR_BASE - DCR_RDR0) as usize;
            let v = f.dcr_read(EpId(0), dcr).unwrap();
            prop_assert_eq!(v & (RDR_LO_SRCL >> shift) != 0, sources & (1 << class) != 0);
            prop_assert_eq!(v & (RDR_LO_TGTL >> shift) != 0, targets & (1 << class) != 0);
            class_bits[r] |= (RDR_LO_SRCL | RDR_LO_TGTL) >> shift;
        }
        for r in 0..8u32 {
            let v = f.dcr_read(EpId(0), DCR_BASE + DCR_RDR0 + r).unwrap();
            let m = !class_bits[r as usize];
            prop_assert_eq!(v & m, before[r as usize] & m);
        }
    }
}
