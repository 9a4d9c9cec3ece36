//! Tenants of the fabric cannot hurt each other (issue 18, findings 1, 3 and 4), driven the
//! way a hostile guest and honest native ranks would drive the engine. Each test sets up
//! the grants a host gives (`Fabric::grant`: classes and partitions from the root task's
//! policy), lets the attacker do what the finding describes, and checks the victims.
//!
//! The endpoints: A and B are native MPI ranks (partition 1, class 14, the MPI layer's),
//! C and D are VMs (partition 0, class 0, bgnet's), E is a VM of another partition (2)
//! that was also given class 0 (a policy mistake the engine must still contain).

mod common;
use common::*;
use kestrel_bgp::coll::{self, *};
use kestrel_bgp::dma::{self as d, *};
use kestrel_fabric::{DiagKind, EpId, FabricApi, FabricError, Grant};

const A: EpId = EpId(0);
const B: EpId = EpId(1);
const C: EpId = EpId(2);
const D: EpId = EpId(3);
const E: EpId = EpId(4);

const RANKS: Grant = Grant {
    classes: 1 << 14,
    partitions: 1 << 1,
};
const VMS: Grant = Grant {
    classes: 1 << 0,
    partitions: 1 << 0,
};
const OTHER_VMS: Grant = Grant {
    classes: 1 << 0,
    partitions: 1 << 2,
};

/// Five endpoints with the grants above; each sets the routes of its own classes, as the
/// MPI layer and the VMM do.
fn node() -> Rig {
    let mut r = Rig::new(5);
    for (ep, g) in [(A, RANKS), (B, RANKS), (C, VMS), (D, VMS), (E, OTHER_VMS)] {
        r.f.grant(ep, g).unwrap();
        r.f.set_routes(ep, g.classes, g.classes).unwrap();
    }
    r
}

fn hdr(class: u32, op: u32) -> u32 {
    class << HDR_CLASS_SHIFT | op << HDR_OP_SHIFT | 1 << HDR_OPSIZE_SHIFT
}

fn p2p(class: u32, addr: u32) -> u32 {
    class << HDR_CLASS_SHIFT | HDR_P2P | addr << HDR_P2P_ADDR_SHIFT
}

fn recv(r: &mut Rig, ep: EpId, vc: usize) -> Option<(u32, [u8; 256])> {
    let mut p = [0u8; 256];
    r.f.tree_receive(ep, vc, &mut p).unwrap().map(|h| (h, p))
}

/// The ranks' allreduce (ADD on class 14, VC 1) of `a` and `b`: what each rank receives.
fn allreduce(r: &mut Rig, a: u8, b: u8) -> [Option<[u8; 256]>; 2] {
    let h = hdr(14, OP_ADD);
    r.f.tree_inject(A, 1, h, &[a; 256]).unwrap();
    r.f.tree_inject(B, 1, h, &[b; 256]).unwrap();
    [recv(r, A, 1).map(|x| x.1), recv(r, B, 1).map(|x| x.1)]
}

#[test]
fn finding1_a_vm_cannot_join_the_ranks_class() {
    let mut r = node();
    // The guest undoes its VMM's routes: one mtdcrx sourcing and targeting every class.
    for k in 0..RDR_COUNT {
        let both = RDR_LO_SRCL | RDR_LO_TGTL;
        r.f.dcr_write(
            C,
            coll::DCR_BASE + DCR_RDR0 + k,
            both | both >> RDR_HI_SHIFT,
        )
        .unwrap();
    }
    let diag = r.f.take_diagnostic(C).unwrap();
    assert_eq!(diag.kind, DiagKind::RouteRefused, "the refusal is reported");
    let (rdr14, shift) = rdr_of_class(14);
    assert_eq!(
        r.f.dcr_read(C, rdr14).unwrap() & (RDR_LO_SRCL >> shift),
        0,
        "class 14 is not the VM's to source"
    );
    let (rdr0, _) = rdr_of_class(0);
    assert_eq!(
        r.f.dcr_read(C, rdr0).unwrap() & (RDR_LO_SRCL | RDR_LO_TGTL),
        RDR_LO_SRCL | RDR_LO_TGTL,
        "its own class is kept"
    );
    // It never contributes: the ranks' allreduce still completes, with their sum only.
    let sum = Some([7u8; 256]);
    assert_eq!(allreduce(&mut r, 3, 4), [sum, sum]);
    // Contributing, broadcasting or sending point to point on class 14 is refused, and
    // the ranks' next allreduce is neither poisoned nor one result behind.
    let bad = [hdr(14, OP_ADD), hdr(14, OP_NONE), p2p(14, u32::from(A.0))];
    for h in bad {
        assert_eq!(
            r.f.tree_inject(C, 1, h, &[0xEE; 256]),
            Err(FabricError::BadHeader)
        );
    }
    assert_ne!(
        r.f.dcr_read(C, coll::DCR_BASE + DCR_PIXF).unwrap() & PIX_BADHDR1,
        0
    );
    assert_eq!(allreduce(&mut r, 1, 1), [Some([2; 256]), Some([2; 256])]);
    assert_eq!(recv(&mut r, C, 1), None, "the VM read nothing of theirs");
}

#[test]
fn finding1_a_silent_endpoint_does_not_hold_up_reductions() {
    let mut r = node();
    // A third native program, granted class 14 but not taking part (it set no route).
    let (f, _) = r.f.attach(WINDOW).unwrap();
    r.f.memory_mut().set_window(f, WINDOW as usize);
    r.f.grant(f, RANKS).unwrap();
    assert_eq!(allreduce(&mut r, 5, 6), [Some([11; 256]), Some([11; 256])]);
}

#[test]
fn finding1_receive_all_sees_only_its_partition() {
    let mut r = node();
    // E (another partition, class 0 by mistake) listens to everything on class 0.
    r.f.dcr_write(E, coll::DCR_BASE + DCR_VCFG0, VCFG_RCVALL)
        .unwrap();
    r.f.tree_inject(C, 0, p2p(0, u32::from(D.0)), &[0x42; 256])
        .unwrap();
    assert_eq!(recv(&mut r, D, 0).map(|x| x.1), Some([0x42; 256]));
    assert_eq!(recv(&mut r, E, 0), None, "no copy across partitions");
    // Neither broadcasts nor E's own packets cross.
    r.f.tree_inject(C, 0, hdr(0, OP_NONE), &[1; 256]).unwrap();
    assert_eq!(recv(&mut r, E, 0), None);
    r.f.tree_inject(E, 0, p2p(0, u32::from(C.0)), &[2; 256])
        .unwrap();
    assert!(recv(&mut r, C, 0).is_some_and(|x| x.1 == [1; 256]));
    assert_eq!(recv(&mut r, C, 0), None, "E's packet did not reach C");
    assert_eq!(r.f.take_diagnostic(E).unwrap().kind, DiagKind::Unreachable);
}

#[test]
fn finding1_torus_and_frames_stay_in_their_partition() {
    let mut r = node();
    r.setup_inj(C, 0);
    r.setup_rcv(A, 0);
    r.setup_rcv(D, 0);
    r.fill(C, DATA_AT, &pattern(200, 9));
    // To a rank: dropped, the VM's error; to a VM of its partition: delivered.
    r.post(C, 0, fifo_desc(A.0, DATA_AT as u32, 200, 0));
    assert_eq!(r.f.stats(A).dma_packets_received, 0);
    assert_ne!(r.dcr_r(C, DCR_FATAL_STATUS) & ERR_PUT_REFUSED, 0);
    assert_eq!(r.f.take_diagnostic(C).unwrap().kind, DiagKind::Unreachable);
    r.post(C, 0, fifo_desc(D.0, DATA_AT as u32, 200, 0));
    assert_eq!(r.f.stats(D).dma_packets_received, 1);
    // Frames: unicast to a rank dropped, broadcast reaches only the partition.
    let me = r.f.frame_mac(C);
    let mut fr = r.f.frame_mac(A).to_vec();
    fr.extend_from_slice(&me);
    fr.extend_from_slice(&[0x08, 0x00, 1, 2, 3]);
    r.f.frame_send(C, &fr).unwrap();
    assert_eq!(r.f.frames_queued(A), 0);
    fr[..6].fill(0xFF);
    r.f.frame_send(C, &fr).unwrap();
    let queued: Vec<usize> = [A, B, D, E].iter().map(|&e| r.f.frames_queued(e)).collect();
    assert_eq!(queued, [0, 0, 1, 0]);
}

#[test]
fn finding3_a_direct_put_lands_only_where_its_owner_allowed_the_sender() {
    let mut r = node();
    for ep in [A, B, C] {
        r.setup_inj(ep, 0);
        r.fill(ep, DATA_AT, &[0xA0 + ep.0; 240]);
    }
    // B opens counter 3 for a transfer from A alone (no DCR_PUT_FROM yet: nobody).
    let b = r.q(B, 0x4000);
    let l = r.q(B, 0x4000 + 480 - 1);
    r.w(B, d::rcv_ctr(3, CTR_BASE), b);
    r.w(B, d::rcv_ctr(3, CTR_LIMIT), l);
    r.w(B, d::rcv_ctr(3, CTR_COUNT), 480);
    r.w(B, RCV_CTR_ENABLE, 0x8000_0000 >> 3);
    r.post(A, 0, put_desc(B.0, DATA_AT as u32, 240, 3, 0));
    assert_eq!(r.r(B, d::rcv_ctr(3, CTR_COUNT)), 480, "nobody allowed yet");
    assert_eq!(r.f.take_diagnostic(A).unwrap().kind, DiagKind::PutRefused);
    let a = r.f.coords(A);
    r.dcr(
        B,
        DCR_PUT_FROM + 3,
        kestrel_bgp::torus::coord_word(a.x, a.y, a.z) | PUT_FROM_ONE,
    );
    // Another rank of B's partition (here: B's own peer A is allowed; C is a VM outside
    // it, and a fourth endpoint of the partition is played by B's own memcopy below).
    r.post(C, 0, put_desc(B.0, DATA_AT as u32, 240, 3, 240));
    assert_eq!(
        r.r(B, d::rcv_ctr(3, CTR_COUNT)),
        480,
        "the VM cannot count it down"
    );
    assert!(r.mem(B)[0x4000..0x4000 + 480].iter().all(|&x| x == 0));
    assert_ne!(r.dcr_r(C, DCR_FATAL_STATUS) & ERR_PUT_REFUSED, 0);
    r.post(A, 0, put_desc(B.0, DATA_AT as u32, 240, 3, 0));
    r.post(A, 0, put_desc(B.0, DATA_AT as u32, 240, 3, 240));
    assert_eq!(r.r(B, d::rcv_ctr(3, CTR_COUNT)), 0);
    assert_eq!(r.r(B, RCV_CTR_HIT_ZERO), 0x8000_0000 >> 3);
    assert!(r.mem(B)[0x4000..0x4000 + 480].iter().all(|&x| x == 0xA0));
    // A's later puts are refused once B names nobody again.
    r.dcr(B, DCR_PUT_FROM + 3, 0);
    r.w(B, d::rcv_ctr(3, CTR_COUNT), 240);
    r.post(A, 0, put_desc(B.0, DATA_AT as u32, 240, 3, 0));
    assert_eq!(r.r(B, d::rcv_ctr(3, CTR_COUNT)), 240);
}

#[test]
fn finding4_a_tenants_pending_work_runs_only_in_its_own_calls_and_the_timer() {
    use kestrel_bgp::torus::INJECT_BUDGET_BYTES;
    use kestrel_fabric::{Fabric, VecMemory};
    // Sized from the budget, whatever it is: C (the attacker) queues 3 messages of a whole
    // call's budget each with one TAIL write, to D, which has no reception FIFO (each packet
    // is sent and charged all the same, then dropped there).
    let len = INJECT_BUDGET_BYTES as u32;
    let n = 3u32;
    let big = u64::from(n * len) + 0x10_0000;
    let mut f = Fabric::new(VecMemory::new());
    for k in 0..4u8 {
        let w = if EpId(k) == C { big } else { WINDOW };
        let (ep, _) = f.attach(w).unwrap();
        f.memory_mut().set_window(ep, w as usize);
        let g = if k < 2 { RANKS } else { VMS };
        f.grant(ep, g).unwrap();
        f.set_routes(ep, g.classes, g.classes).unwrap();
    }
    let mut r = Rig { f };
    r.setup_inj(C, 0);
    let ring = INJ_FIFO_AT as usize;
    let data = 0x10_0000u32;
    for i in 0..n {
        let desc = fifo_desc(D.0, data + i * len, len, 0);
        let bytes: Vec<u8> = desc.iter().flat_map(|w| w.to_be_bytes()).collect();
        r.fill(C, (ring + 32 * i as usize) as u64, &bytes);
    }
    let start = r.r(C, d::inj_fifo(0, FIFO_START));
    r.w(C, d::inj_fifo(0, FIFO_TAIL), start + 2 * n);
    let moved = r.f.stats(C).dma_bytes_sent;
    // A packet starts while budget is left: a call moves at most one packet more.
    let call = INJECT_BUDGET_BYTES + u64::from(PKT_MAX_PAYLOAD);
    assert!(moved <= call, "one budget per call: {moved}");
    assert!(r.f.has_pending(), "work is left");
    // The victims' calls (register reads, DCRs, collective and frame calls) move none of
    // it.
    for _ in 0..100 {
        r.r(A, d::rcv_ctr(0, CTR_COUNT));
        r.f.tree_status(A, 0);
        r.dcr_r(B, DCR_FATAL_STATUS);
        r.dcr(B, DCR_FATAL_STATUS, 0);
        r.w(A, d::inj_fifo(1, FIFO_TAIL), 0);
        r.f.tree_inject(A, 1, hdr(14, OP_NONE), &[0; 256]).unwrap();
        let _ = recv(&mut r, A, 1);
        let _ = recv(&mut r, B, 1);
    }
    assert_eq!(
        r.f.stats(C).dma_bytes_sent,
        moved,
        "no work in the victims' calls"
    );
    // The attacker's own call continues it, then the host's timer finishes it.
    r.r(C, d::inj_fifo(0, FIFO_HEAD));
    let own = r.f.stats(C).dma_bytes_sent;
    assert!(own > moved && own - moved <= call);
    let mut polls = 0;
    while r.f.poll() {
        polls += 1;
        assert!(polls < 100);
    }
    assert_eq!(r.f.stats(C).dma_bytes_sent, u64::from(n * len));
}

#[test]
fn finding6_a_program_holds_at_most_its_quota_and_the_next_vm_still_starts() {
    use kestrel_fabric::quota::{Holders, QuotaFull};
    use kestrel_fabric::{Fabric, VecMemory, MAX_ENDPOINTS};
    // The fabric service's attach, as fabric/service does it: the root task's answer gives
    // the program's number and quota (kestrel_abi::grants: 2 for a program, 4 for a VMM).
    let mut f = Fabric::new(VecMemory::new());
    let mut holders = Holders::new();
    let mut attach = |f: &mut Fabric<VecMemory>, program: u32, quota: u32| {
        holders.admit(program, quota)?;
        let (ep, _) = f.attach(0x1000).map_err(|_| QuotaFull { held: u32::MAX })?;
        holders.hold(ep, program);
        Ok::<EpId, QuotaFull>(ep)
    };
    // A native program tries to take every endpoint.
    let hog: Vec<_> = (0..MAX_ENDPOINTS).map(|_| attach(&mut f, 7, 2)).collect();
    assert_eq!(hog.iter().filter(|r| r.is_ok()).count(), 2);
    assert_eq!(hog[2], Err(QuotaFull { held: 2 }));
    // The VMM's four VMs all start.
    for _ in 0..4 {
        assert!(attach(&mut f, 3, 4).is_ok(), "a VM could not start");
    }
    assert_eq!(attach(&mut f, 3, 4), Err(QuotaFull { held: 4 }));
}
