//! The SPI and MPI layers against the real engine (`Fabric<VecMemory>`), as a native
//! program runs them over the fabric service: DMA group set-up, memory-FIFO messages in
//! bgnet's torus framing through a wrapping reception ring, reassembly in any packet order,
//! the reception interrupt, MPI send/recv and allreduce/barrier on the collective ALU.

use kestrel_fabric::{EpId, Fabric, FabricApi, VecMemory};
use kestrel_mpi::{self as mpi, Comm, Op};
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
fn mpi_send_recv_allreduce_and_barrier() {
    let (mut f, bus) = fabric(3);
    let mut ranks: Vec<Box<Comm>> = (0..3u8)
        .map(|k| {
            let mut c = Box::new(Comm::new());
            c.open(&mut f, EpId(k), bus[k as usize]).unwrap();
            c
        })
        .collect();
    // Point to point, with a message for a later receive arriving first.
    assert!(ranks[0].send(&mut f, 2, 7, b"later").unwrap());
    assert!(ranks[0].send(&mut f, 2, 5, &[9u8; 3000]).unwrap());
    let mut buf = [0u8; 4000];
    assert_eq!(
        ranks[2].try_recv(&mut f, Some(0), 5, &mut buf).unwrap(),
        Some((0, 3000))
    );
    assert!(buf[..3000].iter().all(|&b| b == 9));
    assert_eq!(
        ranks[2].try_recv(&mut f, None, 7, &mut buf).unwrap(),
        Some((0, 5))
    );
    assert_eq!(&buf[..5], b"later");
    assert_eq!(ranks[2].try_recv(&mut f, None, 7, &mut buf).unwrap(), None);
    assert_eq!(ranks[1].try_recv(&mut f, None, 5, &mut buf).unwrap(), None);
    // Allreduce: nothing until every endpoint sourcing the class contributed.
    for round in 0..3u64 {
        for (k, r) in ranks.iter_mut().enumerate() {
            let v = [k as u64 + 1 + round, 1000 * (k as u64 + 1)];
            r.reduce_start(&mut f, Op::Sum, &v).unwrap();
            let mut out = [0u64; 2];
            let done = r.reduce_poll(&mut f, &mut out).unwrap();
            assert_eq!(done, k == 2, "rank {k} round {round}");
        }
        for r in ranks.iter_mut() {
            let mut out = [0u64; 2];
            if r.rank != 2 {
                assert!(r.reduce_poll(&mut f, &mut out).unwrap());
            } else {
                // Rank 2 took its result above; recompute it through another reduction
                // below instead.
                continue;
            }
            assert_eq!(out, [6 + 3 * round, 6000]);
        }
    }
    // Max over the ALU.
    for (k, r) in ranks.iter_mut().enumerate() {
        r.reduce_start(&mut f, Op::Max, &[k as u64 * 7]).unwrap();
    }
    for r in ranks.iter_mut() {
        let mut out = [0u64];
        assert!(r.reduce_poll(&mut f, &mut out).unwrap());
        assert_eq!(out, [14]);
    }
    // The collective class and VC the layer uses.
    assert_eq!((mpi::CLASS, mpi::VC), (14, 1));
    assert_eq!(f.stats(EpId(0)).errors, 0);
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

/// `Comm::start` (MPI_Init's wire-up): ranks whose numbers are not their endpoints',
/// arriving one after the other, learn where every rank is; messages then name ranks, and
/// the first allreduce waits for all of them. A late rank still hears the early ones
/// (their final hello), and nobody finishes before everyone was heard.
#[test]
fn start_maps_ranks_to_endpoints_whatever_the_order_of_arrival() {
    let (mut f, bus) = fabric(4);
    // Endpoint 0 plays a VM of the node (no rank); ranks 2, 0, 1 sit at endpoints 1, 2, 3.
    let mut ranks: Vec<Box<Comm>> = [(1u8, 2u8), (2, 0), (3, 1)]
        .iter()
        .map(|&(ep, rank)| {
            let mut c = Box::new(Comm::new());
            c.open(&mut f, EpId(ep), bus[usize::from(ep)]).unwrap();
            c.rank = rank;
            c.begin(3);
            c
        })
        .collect();
    // The first two step alone for a while: neither can finish without the third.
    for _ in 0..5 {
        assert!(!ranks[0].start_step(&mut f).unwrap());
        assert!(!ranks[1].start_step(&mut f).unwrap());
    }
    let mut done = [false; 3];
    for _ in 0..10 {
        for (i, r) in ranks.iter_mut().enumerate() {
            if !done[i] {
                done[i] = r.start_step(&mut f).unwrap();
            }
        }
    }
    assert_eq!(done, [true; 3], "every rank finished its wire-up");
    // Rank 0 (endpoint 2) to rank 2 (endpoint 1), and the answer by rank.
    assert!(ranks[1].send(&mut f, 2, 9, b"to rank two").unwrap());
    let mut buf = [0u8; 64];
    assert_eq!(
        ranks[0].try_recv(&mut f, Some(0), 9, &mut buf).unwrap(),
        Some((0, 11))
    );
    assert_eq!(&buf[..11], b"to rank two");
    // The allreduce sums the three ranks' contributions (the last hellos are ignored).
    for (k, r) in ranks.iter_mut().enumerate() {
        r.reduce_start(&mut f, Op::Sum, &[k as u64 + 1]).unwrap();
    }
    for r in ranks.iter_mut() {
        let mut out = [0u64; 1];
        assert!(r.reduce_poll(&mut f, &mut out).unwrap());
        assert_eq!(out, [6]);
    }
}
