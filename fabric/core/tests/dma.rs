//! The torus DMA engine driven the way a driver drives it: FIFOs and counters set up
//! through the register file, descriptors written into memory, TAIL written; then the
//! delivered bytes, HEAD/TAIL, counters, hit-zero bits and irq lines are checked.

mod common;
use common::*;
use kestrel_bgp::dma::{self as d, *};
use kestrel_fabric::FabricApi;
use kestrel_fabric::{DiagKind, EpId};

const A: EpId = EpId(0);
const B: EpId = EpId(1);

#[test]
fn memory_fifo_message_lands_as_slots() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    let msg = pattern(500, 7);
    r.fill(A, DATA_AT, &msg);
    r.w(A, d::inj_ctr(0, CTR_INCREMENT), 500);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 500, 0x7700_1234));

    // HEAD caught up with TAIL; the counter hit zero.
    assert_eq!(
        r.r(A, d::inj_fifo(0, FIFO_HEAD)),
        r.r(A, d::inj_fifo(0, FIFO_TAIL))
    );
    assert_eq!(r.r(A, d::inj_ctr(0, CTR_COUNT)), 0);
    assert_eq!(r.r(A, INJ_CTR_HIT_ZERO), 0x8000_0000);
    assert_eq!(r.r(A, INJ_NOT_EMPTY), 0);
    // 240 + 240 + 20 bytes: slots of 256, 256 and 64 bytes.
    let start = r.r(B, d::rcv_fifo(0, FIFO_START));
    assert_eq!(
        r.r(B, d::rcv_fifo(0, FIFO_TAIL)),
        start + (256 + 256 + 64) / 16
    );
    let m = r.mem(B);
    let at = RCV_FIFO_AT as usize;
    for (i, (slot, n)) in [(0usize, 240usize), (256, 240), (512, 20)]
        .into_iter()
        .enumerate()
    {
        let h = &m[at + slot..at + slot + 16];
        let hw0 = u32::from_be_bytes(h[0..4].try_into().unwrap());
        let chunks = (hw0 >> HW_CHUNKS_SHIFT) & HW_CHUNKS_MASK;
        assert_eq!(chunks, if n == 240 { 7 } else { 1 });
        assert_eq!(hw0 & HW_X_MASK, 1);
        let put = u32::from_be_bytes(h[8..12].try_into().unwrap());
        assert_eq!(put, 240 * i as u32);
        // Word 3: the sender's conn byte; the source key stamped (A is X = 0).
        assert_eq!(&h[12..16], &0x7700_0000u32.to_be_bytes());
        assert_eq!(
            &m[at + slot + 16..at + slot + 16 + n],
            &msg[240 * i..240 * i + n]
        );
    }
    // B: not empty, threshold crossed, type-0 threshold line up.
    let bit = 0x8000_0000u32 >> (VM_GROUP * RCV_FIFOS);
    assert_eq!(r.r(B, RCV_NOT_EMPTY), bit);
    assert_eq!(r.r(B, RCV_THRESHOLD), bit);
    assert!(line(&r.f.irq_lines(B), IRQ_RCV_FIFO_THRESHOLD));
    assert!(!line(&r.f.irq_lines(A), IRQ_RCV_FIFO_THRESHOLD));
    assert_eq!(r.f.take_changed().unwrap() & 0b10, 0b10);
    // The driver consumes: HEAD = TAIL, clears the threshold: the line drops.
    let tail = r.r(B, d::rcv_fifo(0, FIFO_TAIL));
    r.w(B, d::rcv_fifo(0, FIFO_HEAD), tail);
    r.w(B, RCV_THRESHOLD_CLEAR, bit);
    assert_eq!(r.r(B, RCV_NOT_EMPTY), 0);
    assert!(!line(&r.f.irq_lines(B), IRQ_RCV_FIFO_THRESHOLD));
    assert_eq!(r.f.take_changed().unwrap() & 0b10, 0b10);
    let s = r.f.stats(A);
    assert_eq!((s.dma_packets_sent, s.dma_bytes_sent), (3, 500));
    let s = r.f.stats(B);
    assert_eq!(
        (s.dma_packets_received, s.dma_bytes_received, s.drops),
        (3, 500, 0)
    );
}

#[test]
fn injection_counter_hit_zero_raises_its_line() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    // Counter subgroup of counter 0 of our group -> line 0.
    r.dcr(A, DCR_INJ_CTR_IRQ_EN, 0x8000_0000 >> (VM_GROUP * 8));
    r.w(A, d::inj_ctr(0, CTR_INCREMENT), 100);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 100, 0));
    assert!(line(&r.f.irq_lines(A), IRQ_INJ_CTR_ZERO));
    assert_eq!(r.r(A, INJ_CTR_GRP_STATUS), 0x8000_0000 >> (VM_GROUP * 8));
    r.w(A, INJ_CTR_CLEAR_HIT_ZERO, 0x8000_0000);
    assert!(!line(&r.f.irq_lines(A), IRQ_INJ_CTR_ZERO));
}

#[test]
fn direct_put_writes_at_counter_base_and_counts_down() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv_ctr(B, 5, 0x4000, 1000);
    r.dcr(B, DCR_RCV_CTR_IRQ_EN + 1, 0x8000_0000 >> (VM_GROUP * 8));
    let msg = pattern(1000, 3);
    r.fill(A, DATA_AT, &msg);
    r.post(A, 0, put_desc(1, DATA_AT as u32, 600, 5, 0));
    assert_eq!(r.r(B, d::rcv_ctr(5, CTR_COUNT)), 400);
    assert_eq!(r.r(B, RCV_CTR_HIT_ZERO), 0);
    r.post(A, 0, put_desc(1, DATA_AT as u32 + 600, 400, 5, 600));
    assert_eq!(r.r(B, d::rcv_ctr(5, CTR_COUNT)), 0);
    assert_eq!(r.r(B, RCV_CTR_HIT_ZERO), 0x8000_0000 >> 5);
    assert_eq!(&r.mem(B)[0x4000..0x4000 + 1000], &msg[..]);
    assert!(line(&r.f.irq_lines(B), IRQ_RCV_CTR_ZERO + 1));
    // Nothing outside the counter's range was written.
    assert!(r.mem(B)[..0x4000].iter().all(|&b| b == 0));
    assert!(r.mem(B)[0x4000 + 1000..].iter().all(|&b| b == 0));
}

#[test]
fn put_outside_the_counter_is_the_senders_error() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv_ctr(B, 0, 0x4000, 256);
    r.post(A, 0, put_desc(1, DATA_AT as u32, 100, 0, 200));
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS) & ERR_RANGE, ERR_RANGE);
    assert!(line(&r.f.irq_lines(A), IRQ_FATAL));
    assert!(!line(&r.f.irq_lines(B), IRQ_FATAL));
    assert!(r.mem(B).iter().all(|&b| b == 0));
    assert_eq!(r.f.stats(B).drops, 1);
    assert_eq!(r.f.take_diagnostic(A).unwrap().kind, DiagKind::RangeCheck);
    // W1C clears it.
    r.dcr(A, DCR_FATAL_STATUS, ERR_RANGE);
    assert!(!line(&r.f.irq_lines(A), IRQ_FATAL));
}

#[test]
fn descriptor_outside_the_window_is_refused() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    // Source beyond A's window, into where B's would be.
    r.post(A, 0, fifo_desc(1, WINDOW as u32 - 16, 64, 0));
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS), ERR_RANGE);
    assert_eq!(r.dcr_r(A, DCR_BAD_ADDRESS), r.q(A, WINDOW - 16));
    assert_eq!(r.r(B, RCV_NOT_EMPTY), 0);
    // The bad descriptor was consumed; the next one runs.
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 64, 0));
    assert_ne!(r.r(B, RCV_NOT_EMPTY), 0);
}

#[test]
fn local_memcopy_stays_inside_the_endpoint() {
    let mut r = Rig::new(1);
    r.setup_inj(A, 0);
    r.setup_rcv_ctr(A, 1, 0x6000, 300);
    let msg = pattern(300, 9);
    r.fill(A, DATA_AT, &msg);
    let mut desc = put_desc(0, DATA_AT as u32, 300, 1, 0);
    desc[0] = DESC_LOCAL_MEMCOPY;
    desc[4] = 0xFF; // X is ignored for a local copy
    r.post(A, 0, desc);
    assert_eq!(&r.mem(A)[0x6000..0x6000 + 300], &msg[..]);
    assert_eq!(r.r(A, d::rcv_ctr(1, CTR_COUNT)), 0);
}

#[test]
fn full_reception_fifo_drops_and_counts() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    // 0x1000 bytes hold 15 slots of 256 (one quad stays free).
    for _ in 0..20 {
        r.post(A, 0, fifo_desc(1, DATA_AT as u32, 240, 0));
    }
    assert_eq!(r.f.stats(B).drops, 5);
    assert_eq!(r.dcr_r(B, DCR_FATAL_STATUS), ERR_RCV_OVERFLOW);
    assert!(
        !line(&r.f.irq_lines(B), IRQ_FATAL),
        "overflow is not enabled at reset"
    );
    assert_eq!(r.f.take_diagnostic(B).unwrap().kind, DiagKind::RcvOverflow);
}

#[test]
fn reception_slots_wrap_at_end() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    let msg = pattern(240, 1);
    r.fill(A, DATA_AT, &msg);
    // Move B's ring so that the next slot straddles END by 128 bytes.
    let start = r.r(B, d::rcv_fifo(0, FIFO_START));
    let end = r.r(B, d::rcv_fifo(0, FIFO_END));
    r.w(B, d::rcv_fifo(0, FIFO_HEAD), end - 8);
    r.w(B, d::rcv_fifo(0, FIFO_TAIL), end - 8);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 240, 0));
    assert_eq!(r.r(B, d::rcv_fifo(0, FIFO_TAIL)), start + 8);
    let m = r.mem(B);
    let e = (RCV_FIFO_AT + RCV_FIFO_LEN) as usize;
    assert_eq!(&m[e - 128 + 16..e], &msg[..112]);
    let s = RCV_FIFO_AT as usize;
    assert_eq!(&m[s..s + 128], &msg[112..]);
}

#[test]
fn unattached_destination_and_outside_machine() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.post(A, 0, fifo_desc(7, DATA_AT as u32, 16, 0));
    assert_eq!(r.f.stats(A).drops, 1);
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS), 0);
    r.post(A, 0, fifo_desc(200, DATA_AT as u32, 16, 0));
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS), ERR_DESCRIPTOR);
}

#[test]
fn reserved_registers_are_errors_not_panics() {
    let mut r = Rig::new(1);
    assert!(r.f.dma_read(A, 0x204).is_err());
    assert!(r.f.dma_read(A, 0x1000).is_err());
    assert!(r.f.dma_write(A, 0x3, 1).is_err());
    assert!(r.f.dma_read(A, d::inj_ctr(3, CTR_LIMIT)).is_err());
    assert!(r.f.dcr_read(A, 0xE00).is_err());
    assert!(r.f.dma_read(EpId(9), 0).is_err());
    assert_eq!(r.f.stats(A).errors, 5);
}

#[test]
fn torus_dcrs_give_coordinates() {
    let mut r = Rig::new(3);
    use kestrel_bgp::torus;
    assert_eq!(
        r.f.dcr_read(EpId(2), torus::DCR_BASE + torus::DCR_COORDS)
            .unwrap(),
        torus::coord_word(2, 0, 0)
    );
    assert_eq!(
        r.f.dcr_read(EpId(2), torus::DCR_BASE + torus::DCR_SIZE)
            .unwrap(),
        torus::coord_word(15, 0, 0)
    );
    r.f.dcr_write(EpId(2), torus::DCR_BASE + torus::DCR_COORDS, 0)
        .unwrap();
    assert_eq!(
        r.f.dcr_read(EpId(2), torus::DCR_BASE + torus::DCR_COORDS)
            .unwrap(),
        torus::coord_word(2, 0, 0)
    );
    assert_eq!(r.f.frame_mac(EpId(2)), [6, 0, 0, 2, 0, 0]);
}

#[test]
fn attach_detach_lifecycle() {
    let mut r = Rig::new(2);
    assert_eq!(r.f.attach(0), Err(kestrel_fabric::FabricError::BadWindow));
    assert_eq!(
        r.f.attach((1 << 31) + 1),
        Err(kestrel_fabric::FabricError::BadWindow)
    );
    for k in 2..16u8 {
        assert_eq!(r.f.attach(0x100).unwrap().0, EpId(k));
    }
    assert_eq!(
        r.f.attach(0x100),
        Err(kestrel_fabric::FabricError::NoFreeEndpoint)
    );
    // Detach frees the slot; the next attach gets it back at reset.
    r.setup_inj(B, 0);
    r.f.detach(B);
    assert!(!r.f.is_attached(B));
    assert_eq!(
        r.f.dma_read(B, 0),
        Err(kestrel_fabric::FabricError::NoSuchEndpoint)
    );
    let (ep, base) = r.f.attach(WINDOW).unwrap();
    assert_eq!(
        (ep, base),
        (
            B,
            kestrel_fabric::Fabric::<kestrel_fabric::VecMemory>::bus_base(B)
        )
    );
    assert_eq!(r.r(B, INJ_ACTIVATED), 0);
    assert_eq!(r.r(B, d::inj_fifo(0, FIFO_START)), 0);
    // Reset range window 0 is the whole window.
    assert_eq!(r.dcr_r(B, DCR_INJ_MIN), (base >> 4) as u32);
    assert_eq!(
        r.dcr_r(B, DCR_INJ_MIN + 1),
        ((base + WINDOW - 1) >> 4) as u32
    );
}

#[test]
fn injection_waits_for_enable_activate_and_reset() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    r.w(A, INJ_DEACTIVATE, 0x8000_0000);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 16, 0));
    assert_eq!(
        r.r(A, INJ_NOT_EMPTY),
        0x8000_0000,
        "deactivated: the descriptor waits"
    );
    assert_eq!(r.f.stats(B).dma_packets_received, 0);
    // Hold the DMA in reset, then activate: still nothing.
    r.dcr(A, DCR_RESET, u32::MAX);
    r.w(A, INJ_ACTIVATE, 0x8000_0000);
    assert_eq!(r.f.stats(B).dma_packets_received, 0);
    // Leaving reset runs it.
    r.dcr(A, DCR_RESET, 0);
    assert_eq!(r.f.stats(B).dma_packets_received, 1);
    assert_eq!(r.r(A, INJ_NOT_EMPTY), 0);
    assert_eq!(r.r(A, INJ_THRESHOLD), 0x8000_0000);
    // Disabled by DCR: waits until enabled again.
    let en = r.dcr_r(A, DCR_INJ_FIFO_ENABLE + VM_GROUP);
    r.dcr(A, DCR_INJ_FIFO_ENABLE + VM_GROUP, 0);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 16, 0));
    assert_eq!(r.f.stats(B).dma_packets_received, 1);
    r.dcr(A, DCR_INJ_FIFO_ENABLE + VM_GROUP, en);
    assert_eq!(r.f.stats(B).dma_packets_received, 2);
}

#[test]
fn fifo_pointers_outside_the_fifo_are_an_error() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    let end = r.r(A, d::inj_fifo(0, FIFO_END));
    r.w(A, d::inj_fifo(0, FIFO_TAIL), end + 10);
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS), ERR_DESCRIPTOR);
    assert_eq!(r.f.take_diagnostic(A).unwrap().kind, DiagKind::FifoPointers);
    assert!(line(&r.f.irq_lines(A), IRQ_FATAL));
    // The receiver's broken ring: its error, the sender's packet dropped.
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    r.w(B, d::rcv_fifo(0, FIFO_HEAD), 0);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 16, 0));
    assert_eq!(r.dcr_r(B, DCR_FATAL_STATUS), ERR_DESCRIPTOR);
    assert_eq!(r.dcr_r(A, DCR_FATAL_STATUS), 0);
    assert_eq!(r.f.stats(B).drops, 1);
}

#[test]
fn zero_length_memory_fifo_message_sends_a_header() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 0, 0x4200_ABCD));
    let s = r.r(B, d::rcv_fifo(0, FIFO_START));
    assert_eq!(r.r(B, d::rcv_fifo(0, FIFO_TAIL)), s + 2);
    let at = RCV_FIFO_AT as usize;
    assert_eq!(&r.mem(B)[at + 12..at + 16], &0x4200_0000u32.to_be_bytes());
}

#[test]
fn huge_messages_continue_over_calls_within_the_budget() {
    use kestrel_bgp::torus::{INJECT_BUDGET_BYTES, INJECT_BUDGET_DESCRIPTORS};
    use kestrel_fabric::{Fabric, VecMemory};
    const BIG: u64 = 24 << 20;
    let mut f = Fabric::new(VecMemory::new());
    for _ in 0..2 {
        let (ep, _) = f.attach(BIG).unwrap();
        f.memory_mut().set_window(ep, BIG as usize);
        f.grant(ep, kestrel_fabric::Grant::ALL).unwrap();
    }
    let q =
        |f: &Fabric<VecMemory>, ep: EpId, off: u64| ((f.window(ep).unwrap().0 + off) >> 4) as u32;
    // A: injection FIFO 0 big enough for 5000 descriptors at 0x10_0000.
    let (s, e) = (q(&f, A, 0x10_0000), q(&f, A, 0x10_0000 + 32 * 6000));
    for (r, v) in [
        (FIFO_START, s),
        (FIFO_END, e),
        (FIFO_HEAD, s),
        (FIFO_TAIL, s),
    ] {
        f.dma_write(A, d::inj_fifo(0, r), v).unwrap();
    }
    f.dcr_write(A, DCR_BASE + DCR_INJ_FIFO_ENABLE + VM_GROUP, 0x8000_0000)
        .unwrap();
    f.dma_write(A, INJ_ACTIVATE, 0x8000_0000).unwrap();
    let base = q(&f, A, 0);
    f.dma_write(A, d::inj_ctr(0, CTR_BASE), base).unwrap();
    // B: reception counter 0 over its whole window.
    let (bb, bl) = (q(&f, B, 0), q(&f, B, BIG - 1));
    f.dma_write(B, d::rcv_ctr(0, CTR_BASE), bb).unwrap();
    f.dma_write(B, d::rcv_ctr(0, CTR_LIMIT), bl).unwrap();
    let len = 20u32 << 20;
    assert!(u64::from(len) > INJECT_BUDGET_BYTES);
    f.dma_write(B, d::rcv_ctr(0, CTR_COUNT), len).unwrap();
    f.dma_write(B, RCV_CTR_ENABLE, 0x8000_0000).unwrap();
    f.dcr_write(B, DCR_BASE + DCR_PUT_FROM, PUT_FROM_ANY)
        .unwrap();
    // One 20 MiB direct put: more than one call's budget.
    let desc = put_desc(1, 0, len, 0, 0);
    let bytes: Vec<u8> = desc.iter().flat_map(|w| w.to_be_bytes()).collect();
    f.memory_mut().window_mut(A)[0x10_0000..0x10_0000 + 32].copy_from_slice(&bytes);
    let end = len as usize;
    f.memory_mut().window_mut(A)[end - 16..end].fill(0xAB);
    f.memory_mut().window_mut(A)[..16].fill(0xCD);
    f.dma_write(A, d::inj_fifo(0, FIFO_TAIL), s + 2).unwrap();
    assert!(f.has_pending());
    let m = f.memory().window(B);
    assert!(
        m[..16].iter().all(|&b| b == 0xCD),
        "the start moved in this call"
    );
    assert!(m[end - 16..end].iter().all(|&b| b == 0), "the end did not");
    let polls = (1..).find(|_| !f.poll()).unwrap();
    assert_eq!(
        polls as u64,
        u64::from(len).div_ceil(INJECT_BUDGET_BYTES) - 1,
        "the host's timer finishes it, one budget per poll"
    );
    assert!(f.memory().window(B)[end - 16..end]
        .iter()
        .all(|&b| b == 0xAB));
    assert_eq!(f.dma_read(B, d::rcv_ctr(0, CTR_COUNT)).unwrap(), 0);
    assert_eq!(f.dma_read(B, RCV_CTR_HIT_ZERO).unwrap(), 0x8000_0000);
    assert_eq!(f.dma_read(A, d::inj_fifo(0, FIFO_HEAD)).unwrap(), s + 2);
    // 5000 prefetch-only descriptors: more than one call's descriptor budget.
    let n = INJECT_BUDGET_DESCRIPTORS + 904;
    let mut ring = Vec::new();
    for _ in 0..n {
        let mut d = [0u32; 8];
        d[0] = DESC_PREFETCH_ONLY;
        ring.extend(d.iter().flat_map(|w| w.to_be_bytes()));
    }
    f.dma_write(A, d::inj_fifo(0, FIFO_HEAD), s).unwrap();
    f.memory_mut().window_mut(A)[0x10_0000..0x10_0000 + ring.len()].copy_from_slice(&ring);
    f.dma_write(A, d::inj_fifo(0, FIFO_TAIL), s + 2 * n)
        .unwrap();
    assert!(f.has_pending(), "{n} descriptors take two calls");
    assert!(!f.poll());
    assert_eq!(f.dma_read(A, INJ_NOT_EMPTY).unwrap(), 0);
}

#[test]
fn a_slot_whose_wrapped_part_is_outside_the_windows_is_not_half_written() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    r.fill(A, DATA_AT, &pattern(240, 5));
    // B's reception window 0 starts 128 bytes into its ring: the part of the slot that
    // wraps to START is outside it.
    let start = r.r(B, d::rcv_fifo(0, FIFO_START));
    let end = r.r(B, d::rcv_fifo(0, FIFO_END));
    r.dcr(B, DCR_RCV_MIN, start + 8);
    r.w(B, d::rcv_fifo(0, FIFO_HEAD), end - 8);
    r.w(B, d::rcv_fifo(0, FIFO_TAIL), end - 8);
    r.post(A, 0, fifo_desc(1, DATA_AT as u32, 240, 0));
    assert_eq!(r.dcr_r(B, DCR_FATAL_STATUS), ERR_RANGE);
    assert_eq!(r.r(B, d::rcv_fifo(0, FIFO_TAIL)), end - 8);
    assert!(r.mem(B).iter().all(|&b| b == 0), "nothing written");
}

#[test]
fn counter_group_status_names_the_subgroup() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    for (c, word, bit) in [(63u32, 4u32, 1u32), (9, 0, 1 << 22), (40, 4, 1 << 23)] {
        r.setup_rcv_ctr(B, c, 0x4000, 16);
        r.post(A, 0, put_desc(1, DATA_AT as u32, 16, c, 0));
        assert_eq!(r.r(B, RCV_CTR_HIT_ZERO + word), bit, "counter {c}");
        let sub = 0x8000_0000u32 >> (VM_GROUP * 8 + c / 8);
        assert_eq!(r.r(B, RCV_CTR_GRP_STATUS), sub, "counter {c}");
        r.w(B, RCV_CTR_CLEAR_HIT_ZERO + word, bit);
        assert_eq!(r.r(B, RCV_CTR_GRP_STATUS), 0);
    }
}
