//! Senders are who the fabric says they are (issue 18, finding 2): a memory-FIFO packet
//! arrives with the injecting endpoint's source key whatever its descriptor claimed, and a
//! frame whose source MAC is not the sender's is dropped, counted and reported.

mod common;
use common::*;
use kestrel_bgp::dma::{self as d, *};
use kestrel_fabric::EpId;
use kestrel_fabric::FabricApi;

const B: EpId = EpId(1);
const C: EpId = EpId(2);

/// The receiver's view of the first slot's software word 3.
fn word3_at_receiver(r: &Rig, ep: EpId) -> u32 {
    let at = RCV_FIFO_AT as usize;
    u32::from_be_bytes(r.mem(ep)[at + 12..at + 16].try_into().unwrap())
}

#[test]
fn a_memory_fifo_packet_carries_the_true_sender() {
    let mut r = Rig::new(3);
    r.setup_inj(C, 0);
    r.setup_rcv(B, 0);
    r.fill(C, DATA_AT, &pattern(100, 1));
    // C (X = 2) claims to be X = 0 (key 0x000000), connection 0x5A.
    r.post(C, 0, fifo_desc(1, DATA_AT as u32, 100, 0x5A00_0000));
    let s = r.r(B, d::rcv_fifo(0, FIFO_START));
    assert_ne!(r.r(B, d::rcv_fifo(0, FIFO_TAIL)), s, "the packet arrived");
    let w3 = word3_at_receiver(&r, B);
    let c = r.f.coords(C);
    let key = u32::from(c.x) << 16 | u32::from(c.y) << 8 | u32::from(c.z);
    assert_eq!(
        w3 & 0x00FF_FFFF,
        key,
        "source key is the injecting endpoint's"
    );
    assert_eq!(w3 >> 24, 0x5A, "the sender's connection byte is kept");
}

fn frame(dst: [u8; 6], src: [u8; 6], n: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend(pattern(n, 3));
    f
}

#[test]
fn a_frame_with_another_source_mac_is_dropped_and_counted() {
    let mut r = Rig::new(3);
    // C sends to B as if it were A, unicast and broadcast.
    let forged = r.f.frame_mac(EpId(0));
    r.f.frame_send(C, &frame(r.f.frame_mac(B), forged, 60))
        .unwrap();
    r.f.frame_send(C, &frame([0xFF; 6], forged, 60)).unwrap();
    assert_eq!(r.f.frames_queued(B), 0, "nothing delivered");
    assert_eq!(r.f.frames_queued(EpId(0)), 0, "nothing delivered");
    let s = r.f.stats(C);
    assert_eq!(s.drops + s.errors, 2, "both counted at the sender: {s:?}");
    let d = r.f.take_diagnostic(C).expect("a diagnostic");
    assert!(
        d.to_string().contains("source MAC"),
        "the diagnostic names the forged source: {d}"
    );
    // Its own MAC still goes through.
    r.f.frame_send(C, &frame(r.f.frame_mac(B), r.f.frame_mac(C), 60))
        .unwrap();
    assert_eq!(r.f.frames_queued(B), 1);
}

/// Walks `ep`'s reception FIFO 0 from HEAD to TAIL, returns every slot's word 3, and
/// consumes them (HEAD = TAIL).
fn take_word3s(r: &mut Rig, ep: EpId) -> Vec<u32> {
    let start = r.r(ep, d::rcv_fifo(0, FIFO_START));
    let end = r.r(ep, d::rcv_fifo(0, FIFO_END));
    let tail = r.r(ep, d::rcv_fifo(0, FIFO_TAIL));
    let mut head = r.r(ep, d::rcv_fifo(0, FIFO_HEAD));
    let base = r.base(ep);
    let mut out = Vec::new();
    while head != tail {
        let at = ((u64::from(head) << 4) - base) as usize;
        let m = r.mem(ep);
        let hw0 = u32::from_be_bytes(m[at..at + 4].try_into().unwrap());
        out.push(u32::from_be_bytes(m[at + 12..at + 16].try_into().unwrap()));
        let quads = ((hw0 >> HW_CHUNKS_SHIFT) & HW_CHUNKS_MASK) * 2 + 2;
        head = start + (head - start + quads) % (end - start);
    }
    r.w(ep, d::rcv_fifo(0, FIFO_HEAD), tail);
    out
}

proptest::proptest! {
    /// Whatever a descriptor's headers say (any hardware header bits, any software words,
    /// any length), every memory-FIFO packet a receiver finds carries its true sender's
    /// source key; the sender's connection byte passes unchanged.
    #[test]
    fn the_receiver_always_sees_the_true_sender(
        sends in proptest::collection::vec(
            (0..3u8, 0..3u8, proptest::prelude::any::<u32>(), proptest::prelude::any::<u32>(),
             proptest::prelude::any::<[u32; 2]>(), 0..1000u32),
            1..24,
        )
    ) {
        let mut r = Rig::new(3);
        for k in 0..3 {
            r.setup_inj(EpId(k), 0);
            r.setup_rcv(EpId(k), 0);
        }
        for (from, to, hw0, hw1, sw, len) in sends {
            let (from, to) = (EpId(from), EpId(to));
            // Memory FIFO to `to`; every other hardware header bit as given.
            let hw0 = (hw0 & !(HW_DM | HW_X_MASK)) | u32::from(to.0);
            let hw1 = hw1 & !(0xFF << HW_Y_SHIFT | 0xFF << HW_Z_SHIFT);
            r.fill(from, DATA_AT, &pattern(len as usize, 5));
            r.post(from, 0, [0, ctr_id(0), DATA_AT as u32, len, hw0, hw1, sw[0], sw[1]]);
            let got = take_word3s(&mut r, to);
            proptest::prop_assert!(!got.is_empty(), "a packet arrived");
            for w3 in got {
                proptest::prop_assert_eq!(w3 & 0x00FF_FFFF, u32::from(from.0) << 16);
                proptest::prop_assert_eq!(w3 >> 24, sw[1] >> 24);
            }
        }
    }
}
