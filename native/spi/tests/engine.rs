//! The SPI layer against the real engine (`Fabric<VecMemory>`): the DMA group it programs,
//! memory-FIFO messages (one packet, many packets, two senders at once), direct put, the
//! collective headers on the wire, and the error paths (too long, a full reception FIFO,
//! offsets outside the window), which return errors or drop and never panic.

use kestrel_bgp::coll;
use kestrel_bgp::dma::{self, inj_ctr, inj_fifo, rcv_ctr, rcv_fifo};
use kestrel_fabric::{EpId, Fabric, FabricApi, FabricError, VecMemory};
use kestrel_spi::{
    layout, link_header, tree, Coords, DmaGroup, Reassembly, INJ_COUNTER, INJ_FIFO, MAX_MSG,
    PKT_PAYLOAD, RCV_FIFO,
};

type F = Fabric<VecMemory>;

fn node(x: u8) -> Coords {
    Coords { x, y: 0, z: 0 }
}

/// `n` endpoints with windows of `window` bytes, endpoint k at (k, 0, 0) with its DMA group
/// set up by the SPI layer.
fn groups(n: u8, window: u32) -> (F, Vec<DmaGroup>) {
    let mut f = Fabric::new(VecMemory::new());
    let mut gs = Vec::new();
    for k in 0..n {
        let (ep, bus) = f.attach(u64::from(window)).unwrap();
        f.grant(ep, kestrel_fabric::Grant::ALL).unwrap();
        f.set_routes(ep, u16::MAX, u16::MAX).unwrap();
        f.memory_mut().set_window(ep, window as usize);
        gs.push(DmaGroup::setup(&mut f, ep, bus, node(k)).unwrap());
    }
    (f, gs)
}

/// A message of `len` bytes starting with bgnet's link header.
fn msg(len: usize, seed: u8) -> Vec<u8> {
    let mut m = vec![seed; len];
    for (i, b) in m.iter_mut().enumerate() {
        *b ^= (i * 7 % 251) as u8;
    }
    link_header(&mut m, 0x0001_0203, len, 0x0800);
    m
}

/// A received packet, copied out of the ring.
#[derive(Clone, Debug)]
struct Pkt {
    hw0: u32,
    put_offset: u32,
    word3: u32,
    payload: Vec<u8>,
}

/// Every packet waiting at `g`, oldest first.
fn packets(f: &mut F, g: &mut DmaGroup) -> Vec<Pkt> {
    let mut out = Vec::new();
    let n = g
        .receive(f, |p| {
            out.push(Pkt {
                hw0: p.hw0,
                put_offset: p.put_offset,
                word3: p.word3,
                payload: p.payload.to_vec(),
            })
        })
        .unwrap();
    assert_eq!(n, out.len());
    out
}

/// Feeds `pkts` to `r` in order; the complete messages as (word3, bytes).
fn reassemble<'a, const N: usize>(
    r: &mut Reassembly<N>,
    pkts: impl IntoIterator<Item = &'a Pkt>,
) -> Vec<(u32, Vec<u8>)> {
    let mut got = Vec::new();
    for p in pkts {
        let pkt = kestrel_spi::Packet {
            hw0: p.hw0,
            put_offset: p.put_offset,
            word3: p.word3,
            payload: &p.payload,
        };
        r.add(&pkt, |m| got.push((m.word3, m.bytes.to_vec())));
    }
    got
}

fn q(bus: u64) -> u32 {
    (bus >> 4) as u32
}

fn dcr(f: &mut F, ep: EpId, o: u32) -> u32 {
    f.dcr_read(ep, dma::DCR_BASE + o).unwrap()
}

// The window's regions do not overlap, and the longest message fits the send buffer in
// whole packets (checked at compile time).
const _: () = {
    use layout::*;
    assert!(INJ + INJ_ENTRIES * dma::DESC_BYTES <= TX);
    assert!(TX + TX_BYTES <= RX);
    assert!(RX + RX_BYTES <= USER);
    assert!(USER < MIN_WINDOW);
    assert!(MAX_MSG <= TX_BYTES as usize);
    assert!(MAX_MSG.is_multiple_of(PKT_PAYLOAD));
};

#[test]
fn setup_programs_fifos_counter_and_map_in_the_window() {
    let (mut f, gs) = groups(2, layout::MIN_WINDOW);
    let g = &gs[1];
    let (ep, bus) = (g.ep, g.bus);
    assert_eq!((ep, bus), (EpId(1), f.window(EpId(1)).unwrap().0));
    // Both rings empty (HEAD = TAIL = START) where the layout puts them.
    let inj = q(bus + u64::from(layout::INJ));
    let inj_end = inj + layout::INJ_ENTRIES * dma::DESC_BYTES / 16;
    let rx = q(bus + u64::from(layout::RX));
    let rx_end = q(bus + u64::from(layout::RX + layout::RX_BYTES));
    for (regs, start, end) in [
        (inj_fifo(INJ_FIFO, 0), inj, inj_end),
        (rcv_fifo(RCV_FIFO, 0), rx, rx_end),
    ] {
        let ring = [
            dma::FIFO_START,
            dma::FIFO_END,
            dma::FIFO_HEAD,
            dma::FIFO_TAIL,
        ]
        .map(|reg| f.dma_read(ep, regs + reg).unwrap());
        assert_eq!(ring, [start, end, start, start]);
    }
    // The injection counter is based at the window, empty, enabled.
    let c = inj_ctr(INJ_COUNTER, 0);
    assert_eq!(f.dma_read(ep, c + dma::CTR_BASE).unwrap(), q(bus));
    assert_eq!(f.dma_read(ep, c + dma::CTR_COUNT).unwrap(), 0);
    let enabled = f.dma_read(ep, dma::INJ_CTR_ENABLED + 4).unwrap();
    assert_ne!(enabled & 0x8000_0000 >> (INJ_COUNTER % 32), 0);
    // The injection FIFO is enabled and activated.
    let fifo_bit = 0x8000_0000u32 >> INJ_FIFO;
    assert_ne!(f.dma_read(ep, dma::INJ_ACTIVATED).unwrap() & fifo_bit, 0);
    assert_ne!(
        dcr(&mut f, ep, dma::DCR_INJ_FIFO_ENABLE + dma::VM_GROUP) & fifo_bit,
        0
    );
    // Reception FIFO 7 of the group: enabled, type 0, threshold 0, interrupt on, every
    // PID's every direction mapped to it.
    let rbit = 0x8000_0000u32 >> (dma::VM_GROUP * dma::RCV_FIFOS + RCV_FIFO);
    assert_ne!(dcr(&mut f, ep, dma::DCR_RCV_FIFO_ENABLE) & rbit, 0);
    assert_ne!(dcr(&mut f, ep, dma::DCR_RCV_FIFO_IRQ_EN) & rbit, 0);
    assert_eq!(dcr(&mut f, ep, dma::DCR_RCV_FIFO_TYPE) & rbit, 0);
    assert_eq!(dcr(&mut f, ep, dma::DCR_RCV_THRESHOLD0), 0);
    let byte = dma::VM_GROUP << 3 | RCV_FIFO;
    for i in 0..dma::PIDS * dma::RCV_MAP_DCRS_PER_PID {
        assert_eq!(dcr(&mut f, ep, dma::DCR_RCV_MAP + i), byte * 0x0101_0101);
    }
    // Setting up leaves nothing to receive and no error.
    let mut g = DmaGroup::setup(&mut f, ep, bus, node(1)).unwrap();
    assert!(packets(&mut f, &mut g).is_empty());
    assert_eq!(f.stats(ep).errors, 0);
}

#[test]
fn setup_of_a_missing_endpoint_is_an_error() {
    let (mut f, _) = groups(1, layout::MIN_WINDOW);
    let r = DmaGroup::setup(&mut f, EpId(5), 0, node(5));
    assert_eq!(r.err(), Some(FabricError::NoSuchEndpoint));
    // An unset group names endpoint 0 at bus 0: usable only once set up; on a fabric
    // without endpoints every call is an error.
    let mut empty = Fabric::new(VecMemory::new());
    let mut g = DmaGroup::unset();
    assert!(g.send(&mut empty, node(1), &msg(64, 0)).is_err());
    assert!(g.receive(&mut empty, |_| panic!("no packet")).is_err());
}

#[test]
fn a_small_message_is_one_packet_in_bgnet_framing() {
    let (mut f, mut gs) = groups(3, layout::MIN_WINDOW);
    let m = msg(100, 1);
    assert!(gs[2].send(&mut f, node(1), &m).unwrap());
    let pkts = packets(&mut f, &mut gs[1]);
    assert_eq!(pkts.len(), 1);
    let p = &pkts[0];
    // 16 header bytes + 100 padded to 128: Chunks = 3, payload 112 bytes.
    assert_eq!((p.hw0 >> dma::HW_CHUNKS_SHIFT) & dma::HW_CHUNKS_MASK, 3);
    assert_eq!(p.payload.len(), 112);
    assert_eq!(p.put_offset, 0);
    // conn_id 1 (the first message), src_key = X << 16.
    assert_eq!(p.word3, 1 << 24 | node(2).key());
    assert_eq!(&p.payload[..100], &m[..]);
    let mut r = Reassembly::<4>::new();
    assert_eq!(reassemble(&mut r, &pkts), vec![(p.word3, m)]);
    // Nothing more waits, and the sender's injection counter is back at zero.
    assert!(packets(&mut f, &mut gs[1]).is_empty());
    let count = f.dma_read(EpId(2), inj_ctr(INJ_COUNTER, dma::CTR_COUNT));
    assert_eq!(count.unwrap(), 0);
    assert_eq!((r.dropped, r.bad), (0, 0));
}

#[test]
fn multi_packet_messages_reassemble_to_the_exact_bytes() {
    let (mut f, mut gs) = groups(2, layout::MIN_WINDOW);
    let mut r = Reassembly::<2>::new();
    for (i, len) in [241, 1000, 4321, MAX_MSG].into_iter().enumerate() {
        let m = msg(len, i as u8);
        assert!(gs[0].send(&mut f, node(1), &m).unwrap());
        let pkts = packets(&mut f, &mut gs[1]);
        assert_eq!(pkts.len(), len.div_ceil(PKT_PAYLOAD), "{len} bytes");
        for (k, p) in pkts.iter().enumerate() {
            assert_eq!(p.put_offset as usize, k * PKT_PAYLOAD);
            assert_eq!(p.word3 >> 24, i as u32 + 1, "one conn_id per message");
        }
        let got = reassemble(&mut r, &pkts);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, m, "{len} bytes");
    }
    assert_eq!((r.dropped, r.bad), (0, 0));
}

#[test]
fn interleaved_messages_of_two_senders_reassemble_separately() {
    let (mut f, mut gs) = groups(3, layout::MIN_WINDOW);
    // Both senders' first message: the same conn_id, told apart by the source key.
    let a = msg(2000, 0xA0);
    let b = msg(1500, 0xB0);
    assert!(gs[0].send(&mut f, node(1), &a).unwrap());
    assert!(gs[2].send(&mut f, node(1), &b).unwrap());
    let pkts = packets(&mut f, &mut gs[1]);
    let (pa, pb): (Vec<&Pkt>, Vec<&Pkt>) = pkts.iter().partition(|p| p.word3 == 1 << 24);
    assert_eq!((pa.len(), pb.len()), (9, 7));
    assert!(pb.iter().all(|p| p.word3 == 1 << 24 | node(2).key()));
    // Alternate the two senders' packets, B's in reverse order.
    let mut mixed = Vec::new();
    for k in 0..pa.len().max(pb.len()) {
        mixed.extend(pa.get(k).copied());
        mixed.extend(pb.iter().rev().nth(k).copied());
    }
    let mut r = Reassembly::<2>::new();
    let mut got = reassemble(&mut r, mixed);
    got.sort();
    assert_eq!(got, vec![(1 << 24, a), (1 << 24 | node(2).key(), b)]);
    assert_eq!((r.dropped, r.bad), (0, 0));
}

#[test]
fn direct_put_lands_at_its_offset_and_counts_down_to_zero() {
    let (mut f, mut gs) = groups(2, layout::MIN_WINDOW);
    let (ep, bus) = (gs[1].ep, gs[1].bus);
    // Reception counter 5 of the receiver covers [USER, USER + 0x2000), expecting 1000.
    let c = 5;
    let at = bus + u64::from(layout::USER);
    for (reg, v) in [
        (dma::CTR_BASE, q(at)),
        (dma::CTR_LIMIT, q(at + 0x2000 - 1)),
        (dma::CTR_COUNT, 1000),
    ] {
        f.dma_write(ep, rcv_ctr(c, reg), v).unwrap();
    }
    f.dma_write(ep, dma::RCV_CTR_ENABLE, 0x8000_0000 >> c)
        .unwrap();
    // The counter's owner takes puts from any endpoint it reaches.
    f.dcr_write(ep, dma::DCR_BASE + dma::DCR_PUT_FROM + c, dma::PUT_FROM_ANY)
        .unwrap();
    let data = msg(1000, 0x5A);
    let word3 = (dma::VM_GROUP * dma::COUNTERS + c) << dma::SW_RCV_CTR_SHIFT;
    let ok = gs[0].inject(&mut f, node(1), layout::TX, &data, 0x100, word3, true);
    assert!(ok.unwrap());
    let mut win = vec![0u8; 0x2000];
    f.mem_read(ep, layout::USER, &mut win).unwrap();
    assert!(
        win[..0x100].iter().all(|&b| b == 0),
        "nothing before the offset"
    );
    assert_eq!(&win[0x100..0x100 + 1000], &data[..]);
    assert!(win[0x100 + 1000..].iter().all(|&b| b == 0), "nothing after");
    assert_eq!(f.dma_read(ep, rcv_ctr(c, dma::CTR_COUNT)).unwrap(), 0);
    let hit = f.dma_read(ep, dma::RCV_CTR_HIT_ZERO).unwrap();
    assert_ne!(hit & 0x8000_0000 >> c, 0, "hit-zero bit");
    // A direct put bypasses the reception FIFO.
    assert!(packets(&mut f, &mut gs[1]).is_empty());
    assert_eq!((f.stats(EpId(0)).errors, f.stats(ep).drops), (0, 0));
}

#[test]
fn collective_headers_cross_the_engine_unchanged() {
    let (mut f, _) = groups(2, layout::MIN_WINDOW);
    let payload = [0x42u8; 256];
    let h = tree::bcast(3, 0x155);
    f.tree_inject(EpId(0), 0, h, &payload).unwrap();
    let mut buf = [0u8; 256];
    let got = f.tree_receive(EpId(1), 0, &mut buf).unwrap();
    assert_eq!(got, Some(h));
    assert_eq!(buf, payload);
    assert_eq!(coll::hdr_class(h), 3);
}

#[test]
fn a_too_long_message_is_refused_and_nothing_is_sent() {
    let (mut f, mut gs) = groups(2, layout::MIN_WINDOW);
    assert!(!gs[0].send(&mut f, node(1), &msg(MAX_MSG + 1, 0)).unwrap());
    assert!(!gs[0].send(&mut f, node(1), &vec![0; 1 << 16]).unwrap());
    assert!(packets(&mut f, &mut gs[1]).is_empty());
    assert_eq!(f.stats(EpId(0)).dma_packets_sent, 0);
    // The refused messages used no conn_id.
    assert!(gs[0].send(&mut f, node(1), &msg(20, 0)).unwrap());
    assert_eq!(packets(&mut f, &mut gs[1])[0].word3 >> 24, 1);
}

#[test]
fn a_full_reception_fifo_drops_and_the_layer_recovers() {
    let (mut f, mut gs) = groups(2, layout::MIN_WINDOW);
    // 128 full slots in the ring: the fourth largest message no longer fits.
    let sent: Vec<Vec<u8>> = (0..5).map(|i| msg(MAX_MSG, i)).collect();
    for m in &sent {
        assert!(
            gs[0].send(&mut f, node(1), m).unwrap(),
            "the sender never fails"
        );
    }
    assert!(f.stats(EpId(1)).drops > 0);
    let mut r = Reassembly::<4>::new();
    let pkts = packets(&mut f, &mut gs[1]);
    assert!(pkts.len() < layout::RX_BYTES as usize / 256);
    let got = reassemble(&mut r, &pkts);
    assert_eq!(got.len(), 3);
    for (g, m) in got.iter().zip(&sent) {
        assert_eq!(&g.1, m);
    }
    // After draining, messages arrive again (through the wrapped ring).
    for i in 0..6 {
        let m = msg(3000 + i, 0x70 + i as u8);
        assert!(gs[0].send(&mut f, node(1), &m).unwrap());
        let got = reassemble(&mut r, &packets(&mut f, &mut gs[1]));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, m);
    }
}

#[test]
fn offsets_outside_the_window_are_errors() {
    // A window too small for the layer: set-up writes registers only and succeeds.
    let (mut f, mut gs) = groups(2, 0x2000);
    // The send buffer runs past the window's end.
    let r = gs[0].send(&mut f, node(1), &msg(5000, 0));
    assert_eq!(r.err(), Some(FabricError::OutsideWindow));
    let r = gs[0].inject(&mut f, node(1), u32::MAX - 8, &[1; 64], 0, 0, false);
    assert_eq!(r.err(), Some(FabricError::OutsideWindow));
    // A message that fits the send buffer reaches a reception ring outside the window:
    // the engine drops it at the receiver, which then finds nothing.
    assert!(gs[0].send(&mut f, node(1), &msg(100, 0)).unwrap());
    assert!(f.stats(EpId(1)).drops > 0);
    assert!(packets(&mut f, &mut gs[1]).is_empty());
    // A reception TAIL outside the ring (the program trampled its registers) reads as
    // nothing to receive.
    let (mut f, mut gs) = groups(1, layout::MIN_WINDOW);
    f.dma_write(EpId(0), rcv_fifo(RCV_FIFO, dma::FIFO_TAIL), 7)
        .unwrap();
    assert!(packets(&mut f, &mut gs[0]).is_empty());
}

/// Regression: a packet shorter than its place in the message (a sender may choose any
/// Chunks, or send a few bytes at any Put_Offset) left the rest of that place as it was,
/// so a forged message came out with the bytes of an earlier message reassembled in the
/// same slot, possibly another sender's.
#[test]
fn short_packets_never_reveal_an_earlier_message() {
    let (mut f, mut gs) = groups(3, layout::MIN_WINDOW);
    let mut r = Reassembly::<1>::new();
    let secret = {
        let mut m = vec![0xAA; 480];
        link_header(&mut m, 0, 480, 0x0800);
        m
    };
    assert!(gs[0].send(&mut f, node(1), &secret).unwrap());
    assert_eq!(reassemble(&mut r, &packets(&mut f, &mut gs[1])).len(), 1);
    // Endpoint 2 sends two 16-byte packets claiming a 480-byte message.
    let mut head = [0u8; 16];
    link_header(&mut head, 0, 480, 0x0800);
    let forged = 0x77 << 24 | node(2).key();
    for (put, data) in [(0, &head[..]), (240, &[0x55; 16][..])] {
        let ok = gs[2].inject(&mut f, node(1), layout::TX, data, put, forged, false);
        assert!(ok.unwrap());
    }
    let got = reassemble(&mut r, &packets(&mut f, &mut gs[1]));
    assert_eq!(got.len(), 1);
    let m = &got[0].1;
    assert_eq!(m.len(), 480);
    assert!(!m.contains(&0xAA), "an earlier message's bytes leaked");
    assert_eq!(&m[..16], &head);
    assert_eq!(&m[240..256], &[0x55; 16]);
}

#[test]
fn a_message_lost_in_part_does_not_spoil_a_later_one_with_its_conn_id() {
    let (mut f, mut gs) = groups(2, layout::MIN_WINDOW);
    let mut r = Reassembly::<4>::new();
    // The fourth message (conn_id 4) overflows the ring after its first packets.
    for i in 0..4 {
        assert!(gs[0].send(&mut f, node(1), &msg(MAX_MSG, i)).unwrap());
    }
    assert!(f.stats(EpId(1)).drops > 0);
    assert_eq!(reassemble(&mut r, &packets(&mut f, &mut gs[1])).len(), 3);
    // conn_id wraps at 256: every later message, conn_id 4 again among them, arrives.
    for i in 0..300usize {
        let m = msg(300 + i % 7, i as u8);
        assert!(gs[0].send(&mut f, node(1), &m).unwrap());
        let got = reassemble(&mut r, &packets(&mut f, &mut gs[1]));
        assert_eq!(got.len(), 1, "message {i} (conn_id {})", (i + 5) % 256);
        assert_eq!(got[0].1, m);
    }
}
