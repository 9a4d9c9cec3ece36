//! The collective as endpoints use it: broadcast, reductions through the combining ALU,
//! point to point with and without RCVALL, class routes, FIFO limits, status words, flags
//! and irq lines, ordering.

mod common;
use common::*;
use kestrel_bgp::coll::*;
use kestrel_fabric::FabricApi;
use kestrel_fabric::{EpId, FabricError};

const A: EpId = EpId(0);
const B: EpId = EpId(1);
const C: EpId = EpId(2);

fn hdr(class: u32, op: u32, opsize: u32) -> u32 {
    class << HDR_CLASS_SHIFT | op << HDR_OP_SHIFT | opsize << HDR_OPSIZE_SHIFT
}

fn p2p(class: u32, addr: u32) -> u32 {
    class << HDR_CLASS_SHIFT | HDR_P2P | addr << HDR_P2P_ADDR_SHIFT
}

fn payload(seed: u8) -> [u8; 256] {
    pattern(256, seed).try_into().unwrap()
}

fn recv(r: &mut Rig, ep: EpId, vc: usize) -> Option<(u32, [u8; 256])> {
    let mut p = [0u8; 256];
    r.f.tree_receive(ep, vc, &mut p).unwrap().map(|h| (h, p))
}

#[test]
fn broadcast_reaches_every_target_including_the_sender() {
    let mut r = Rig::flat(3);
    let h = hdr(0, OP_NONE, 0);
    r.f.tree_inject(A, 0, h, &payload(1)).unwrap();
    for ep in [A, B, C] {
        assert_eq!(
            r.f.tree_status(ep, 0),
            16 << ST_RCV_QUADS_SHIFT | 1 << ST_RCV_HDRS_SHIFT
        );
        assert_eq!(recv(&mut r, ep, 0), Some((h, payload(1))));
        assert_eq!(r.f.tree_status(ep, 0), 0);
        assert_eq!(recv(&mut r, ep, 0), None);
    }
    assert_eq!(r.f.stats(A).tree_packets_sent, 1);
    assert_eq!(r.f.stats(B).tree_packets_received, 1);
}

#[test]
fn reduction_completes_when_every_source_contributed() {
    let mut r = Rig::flat(3);
    // ADD of 32-bit words (operand size 1 = two 16-bit words).
    let h = hdr(3, OP_ADD, 1);
    let word = |v: u32| -> [u8; 256] {
        let mut p = [0u8; 256];
        for c in p.chunks_mut(4) {
            c.copy_from_slice(&v.to_be_bytes());
        }
        p
    };
    r.f.tree_inject(A, 1, h, &word(0xFFFF_FFFF)).unwrap();
    r.f.tree_inject(B, 1, h, &word(2)).unwrap();
    assert_eq!(recv(&mut r, A, 1), None, "C has not contributed yet");
    assert_eq!(r.f.tree_status(A, 1) >> ST_INJ_HDRS_SHIFT & ST_HDRS_MASK, 1);
    r.f.tree_inject(C, 1, h, &word(5)).unwrap();
    // 0xFFFFFFFF + 2 + 5 wraps within the 32-bit operand: 6.
    for ep in [A, B, C] {
        assert_eq!(recv(&mut r, ep, 1), Some((h, word(6))));
        assert_eq!(r.f.tree_status(ep, 1), 0);
    }
}

#[test]
fn alu_ops_on_wide_operands() {
    let mut r = Rig::flat(2);
    let mut a = [0u8; 256];
    let mut b = [0u8; 256];
    a[0] = 0x01;
    a[31] = 0xFF;
    b[31] = 0x01;
    b[32] = 0x80;
    // MAX over 32-byte operands: operand 0 of a wins, operand 1 of b.
    let h = hdr(2, OP_MAX, 15);
    r.f.tree_inject(A, 0, h, &a).unwrap();
    r.f.tree_inject(B, 0, h, &b).unwrap();
    let (_, got) = recv(&mut r, A, 0).unwrap();
    assert_eq!(&got[..32], &a[..32]);
    assert_eq!(&got[32..64], &b[32..64]);
    assert_eq!(recv(&mut r, B, 0).unwrap().1, got);
    // ADD carries across the bytes of one 32-byte operand but not into the next.
    let h = hdr(2, OP_ADD, 15);
    r.f.tree_inject(A, 0, h, &a).unwrap();
    r.f.tree_inject(B, 0, h, &b).unwrap();
    let (_, got) = recv(&mut r, B, 0).unwrap();
    assert_eq!(got[0], 0x01);
    assert_eq!(got[30], 0x01);
    assert_eq!(got[31], 0x00);
    assert_eq!(got[32], 0x80);
}

#[test]
fn point_to_point_by_node_address_and_rcvall() {
    let mut r = Rig::flat(3);
    let h = p2p(0, 2);
    r.f.tree_inject(A, 0, h, &payload(4)).unwrap();
    assert_eq!(recv(&mut r, C, 0), Some((h, payload(4))));
    assert_eq!(recv(&mut r, B, 0), None);
    assert_eq!(recv(&mut r, A, 0), None);
    // B turns off p2p filtering on VC0: it sees C-bound packets too.
    r.f.dcr_write(B, DCR_BASE + DCR_VCFG0, VCFG_RCVALL).unwrap();
    r.f.tree_inject(A, 0, h, &payload(5)).unwrap();
    assert_eq!(recv(&mut r, B, 0), Some((h, payload(5))));
    assert_eq!(recv(&mut r, C, 0), Some((h, payload(5))));
    // NADDR is the fabric's.
    r.f.dcr_write(C, DCR_BASE + DCR_NADDR, 7).unwrap();
    assert_eq!(r.f.dcr_read(C, DCR_BASE + DCR_NADDR).unwrap(), 2);
    // To nobody (VC1: B's RCVALL is VC0's): dropped and counted at the sender.
    r.f.tree_inject(A, 1, p2p(0, 9), &payload(6)).unwrap();
    assert_eq!(r.f.stats(A).drops, 1);
}

#[test]
fn reaches_answers_as_the_engine_delivers() {
    use kestrel_fabric::coll::reaches;
    // The pure rule over a DCR file: C targets class 0 only, with RCVALL on VC1.
    let (rdr0, _) = rdr_of_class(0);
    let c_dcrs = |o: u32| match o {
        o if o == rdr0 - DCR_BASE => RDR_LO_SRCL | RDR_LO_TGTL,
        DCR_VCFG1 => VCFG_RCVALL,
        _ => 0,
    };
    assert!(reaches(hdr(0, OP_NONE, 0), 0, A, C, c_dcrs));
    assert!(!reaches(hdr(1, OP_NONE, 0), 0, A, C, c_dcrs), "class 1");
    assert!(reaches(p2p(0, 2), 0, A, C, c_dcrs), "addressed");
    assert!(!reaches(p2p(0, 1), 0, A, C, c_dcrs), "to B on VC0");
    assert!(reaches(p2p(0, 1), 1, A, C, c_dcrs), "RCVALL on VC1");
    assert!(!reaches(p2p(0, 1), 1, C, C, c_dcrs), "its own RCVALL");
    assert!(!reaches(p2p(1, 2), 0, A, C, c_dcrs), "p2p on class 1");
    assert!(
        reaches(hdr(0, OP_ADD, 1), 0, A, C, c_dcrs),
        "a reduction's result"
    );
    // Against the engine: routes and RCVALL of every kind; for every header and VC, who
    // receives is who `reaches` names (read through the DCRs as a client sees them).
    let mut r = Rig::flat(4);
    let (rdr2, _) = rdr_of_class(2);
    // B: class 0 sourced only (no target); C: RCVALL on VC0; D: classes 0 and 2 targeted.
    r.f.dcr_write(B, rdr0, RDR_LO_SRCL).unwrap();
    r.f.dcr_write(C, DCR_BASE + DCR_VCFG0, VCFG_RCVALL).unwrap();
    r.f.dcr_write(EpId(3), rdr2, RDR_LO_TGTL | RDR_LO_TGTL >> RDR_HI_SHIFT)
        .unwrap();
    let headers = [
        hdr(0, OP_NONE, 0),
        hdr(1, OP_NONE, 0),
        hdr(2, OP_NONE, 0),
        hdr(3, OP_NONE, 0),
        p2p(0, 0),
        p2p(0, 1),
        p2p(0, 2),
        p2p(0, 3),
        p2p(0, 9),
        p2p(2, 3),
        p2p(3, 3),
    ];
    for from in [A, C] {
        for vc in 0..2 {
            for h in headers {
                let expect: Vec<EpId> = (0..4)
                    .map(EpId)
                    .filter(|&to| {
                        let mut f = |o| r.f.dcr_read(to, DCR_BASE + o).unwrap();
                        reaches(h, vc, from, to, &mut f)
                    })
                    .collect();
                r.f.tree_inject(from, vc, h, &payload(1)).unwrap();
                let got: Vec<EpId> = (0..4)
                    .map(EpId)
                    .filter(|&to| recv(&mut r, to, vc).is_some())
                    .collect();
                assert_eq!(got, expect, "{from:?} VC{vc} header {h:#010x}");
            }
        }
    }
}

#[test]
fn class_routes_choose_sources_and_targets() {
    let mut r = Rig::flat(3);
    // Class 1 is the odd half of RDR0. B neither sources nor targets it.
    let (dcr, shift) = rdr_of_class(1);
    let keep_class0 = (RDR_LO_SRCL | RDR_LO_TGTL) & !(u32::MAX >> shift);
    r.f.dcr_write(B, dcr, keep_class0).unwrap();
    let h = hdr(1, OP_OR, 0);
    r.f.tree_inject(A, 0, h, &[1u8; 256]).unwrap();
    r.f.tree_inject(C, 0, h, &[2u8; 256]).unwrap();
    assert_eq!(recv(&mut r, A, 0), Some((h, [3u8; 256])));
    assert_eq!(recv(&mut r, C, 0), Some((h, [3u8; 256])));
    assert_eq!(recv(&mut r, B, 0), None);
    // B injecting into a class it does not source: refused, flag, line when enabled.
    r.f.dcr_write(B, DCR_BASE + DCR_PIXEN, PIX_BADHDR0).unwrap();
    assert_eq!(
        r.f.tree_inject(B, 0, h, &[0; 256]),
        Err(FabricError::BadHeader)
    );
    assert!(line(&r.f.irq_lines(B), IRQ_INJ_EXC));
    assert_ne!(
        r.f.dcr_read(B, DCR_BASE + DCR_PIXF).unwrap() & PIX_BADHDR0,
        0
    );
    assert!(!line(&r.f.irq_lines(B), IRQ_INJ_EXC), "PIXF read clears");
    // Class 0 still works for B.
    r.f.tree_inject(B, 0, hdr(0, OP_NONE, 0), &[0; 256])
        .unwrap();
    assert!(recv(&mut r, B, 0).is_some());
}

#[test]
fn route_change_and_detach_complete_waiting_reductions() {
    let mut r = Rig::flat(3);
    let h = hdr(4, OP_XOR, 0);
    r.f.tree_inject(A, 0, h, &[1; 256]).unwrap();
    r.f.tree_inject(B, 0, h, &[2; 256]).unwrap();
    assert_eq!(recv(&mut r, A, 0), None);
    r.f.detach(C);
    assert_eq!(recv(&mut r, A, 0), Some((h, [3; 256])));
    assert_eq!(recv(&mut r, B, 0), Some((h, [3; 256])));
}

#[test]
fn reception_fifo_holds_eight_packets() {
    let mut r = Rig::flat(2);
    for i in 0..10u8 {
        r.f.tree_inject(A, 0, hdr(0, OP_NONE, 0), &payload(i))
            .unwrap();
    }
    assert_eq!(r.f.stats(B).drops, 2);
    assert_eq!(
        r.f.tree_status(B, 0),
        128 << ST_RCV_QUADS_SHIFT | 8 << ST_RCV_HDRS_SHIFT
    );
    for i in 0..8u8 {
        assert_eq!(recv(&mut r, B, 0).unwrap().1, payload(i), "in order");
    }
}

#[test]
fn waiting_reduction_packets_are_bounded_by_the_injection_fifo() {
    let mut r = Rig::flat(2);
    let h = hdr(0, OP_ADD, 0);
    for _ in 0..8 {
        r.f.tree_inject(A, 1, h, &[0; 256]).unwrap();
    }
    assert_eq!(
        r.f.tree_inject(A, 1, h, &[0; 256]),
        Err(FabricError::InjectionFull)
    );
    let f = r.f.dcr_read(A, DCR_BASE + DCR_PIXF).unwrap();
    assert_eq!(f & (PIX_HOF1 | PIX_POF1), PIX_HOF1 | PIX_POF1);
    // B's contributions complete them in order.
    for i in 0..8u8 {
        r.f.tree_inject(B, 1, h, &[i; 256]).unwrap();
    }
    for i in 0..8u8 {
        assert_eq!(recv(&mut r, A, 1).unwrap().1, [i; 256]);
    }
}

#[test]
fn irq_bit_packets_raise_the_vc_line() {
    let mut r = Rig::flat(2);
    r.f.tree_inject(A, 1, hdr(0, OP_NONE, 0) | HDR_IRQ, &[0; 256])
        .unwrap();
    assert!(line(&r.f.irq_lines(B), IRQ_RCV_VC1));
    assert!(!line(&r.f.irq_lines(B), IRQ_RCV_VC0));
    assert_ne!(r.f.tree_status(B, 1) & ST_RCV_IRQ, 0);
    assert_ne!(r.f.take_changed().unwrap() & 0b10, 0);
    recv(&mut r, B, 1).unwrap();
    assert!(!line(&r.f.irq_lines(B), IRQ_RCV_VC1));
}

#[test]
fn reception_watermark_flag_is_a_condition() {
    let mut r = Rig::flat(2);
    r.f.dcr_write(B, DCR_BASE + DCR_PRXEN, PRX_WM0).unwrap();
    assert!(!line(&r.f.irq_lines(B), IRQ_RCV_EXC));
    r.f.tree_inject(A, 0, hdr(0, OP_NONE, 0), &[0; 256])
        .unwrap();
    assert!(line(&r.f.irq_lines(B), IRQ_RCV_EXC));
    assert_eq!(r.f.dcr_read(B, DCR_BASE + DCR_PRXF).unwrap(), PRX_WM0);
    assert!(
        line(&r.f.irq_lines(B), IRQ_RCV_EXC),
        "still above the watermark"
    );
    recv(&mut r, B, 0).unwrap();
    assert!(!line(&r.f.irq_lines(B), IRQ_RCV_EXC));
}

#[test]
fn bad_vc_and_reserved_opcode() {
    let mut r = Rig::flat(1);
    assert_eq!(r.f.tree_inject(A, 2, 0, &[0; 256]), Err(FabricError::BadVc));
    assert_eq!(
        r.f.tree_inject(A, 0, hdr(0, 4, 0), &[0; 256]),
        Err(FabricError::BadHeader)
    );
    assert_eq!(
        r.f.tree_inject(A, 0, hdr(0, 7, 0), &[0; 256]),
        Err(FabricError::BadHeader)
    );
    assert_eq!(r.f.tree_status(A, 5), 0);
    assert_eq!(recv(&mut r, A, 9), None);
    assert_eq!(
        r.f.tree_inject(EpId(3), 0, 0, &[0; 256]),
        Err(FabricError::NoSuchEndpoint)
    );
}

#[test]
fn set_routes_keeps_a_vm_out_of_native_reductions() {
    let mut r = Rig::flat(3);
    // C plays a VM whose driver uses class 0 only.
    r.f.set_routes(C, 1, 1).unwrap();
    let (dcr, _) = rdr_of_class(0);
    assert_eq!(r.f.dcr_read(C, dcr).unwrap(), RDR_LO_SRCL | RDR_LO_TGTL);
    let h = hdr(14, OP_ADD, 0);
    r.f.tree_inject(A, 1, h, &[1; 256]).unwrap();
    r.f.tree_inject(B, 1, h, &[2; 256]).unwrap();
    assert_eq!(recv(&mut r, A, 1), Some((h, [3; 256])), "no wait for C");
    assert_eq!(recv(&mut r, C, 1), None);
    // Class 0 broadcasts still reach C; C cannot inject into class 14.
    r.f.tree_inject(A, 0, hdr(0, OP_NONE, 0), &[5; 256])
        .unwrap();
    assert!(recv(&mut r, C, 0).is_some());
    assert_eq!(
        r.f.tree_inject(C, 1, h, &[0; 256]),
        Err(FabricError::BadHeader)
    );
    assert_eq!(
        r.f.set_routes(EpId(9), 0, 0),
        Err(FabricError::NoSuchEndpoint)
    );
}
