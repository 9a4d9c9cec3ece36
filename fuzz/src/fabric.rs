//! Target `fabric`: the fabric engine (`kestrel_fabric`) under register traffic,
//! descriptors, collective packets and frames from three endpoints, with a fourth attached
//! as a bystander that nothing configures.
//!
//! Input: one byte saying whether the three endpoints start with a driver's setup
//! (injection FIFO 0, reception FIFO 0, counters 0..2), then operations, one selector byte
//! each, then that operation's fields. Checked after every operation: nothing panics; every
//! memory access the engine makes lies inside the endpoint's window (the memory model
//! panics otherwise) and inside one of that endpoint's range-check windows of the access's
//! direction; the bystander's memory is never accessed; the irq lines are only lines the
//! fabric drives; and at the end the guard bytes between windows are untouched. The
//! engine's wire codes (`kestrel_fabric::proto`) round-trip.

use crate::input::{Input, SeedWriter};
use kestrel_bgp::dma::*;
use kestrel_bgp::{coll, torus};
use kestrel_fabric::{proto, EpId, Fabric, FabricApi};
use kestrel_testkit::fabric::{Guarded, EPS, G, W};

const BYSTANDER: EpId = EpId(3);

/// Operation selectors, for [`seed`].
pub mod op {
    pub const DMA_WRITE: u8 = 0;
    pub const DMA_READ: u8 = 1;
    pub const DCR_WRITE: u8 = 2;
    pub const DCR_READ: u8 = 3;
    pub const POST: u8 = 4;
    pub const MEM: u8 = 5;
    pub const TREE: u8 = 6;
    pub const TREE_RECV: u8 = 7;
    pub const FRAME: u8 = 8;
    pub const TOGGLE: u8 = 9;
    pub const CODES: u8 = 10;
    pub const POLL: u8 = 11;
    pub const COUNT: u8 = 12;
}

fn q(f: &Fabric<Guarded>, ep: EpId, off: u64) -> u32 {
    let base = f.window(ep).map_or(0, |w| w.0);
    ((base + off) >> 4) as u32
}

/// A driver's setup: injection FIFO 0 at 0x100 (16 descriptors), reception FIFO 0 at
/// 0x1000 (2 KiB), injection counters 0..2 at the window, reception counters 0..2 over the
/// upper part, all enabled.
fn setup(f: &mut Fabric<Guarded>, ep: EpId) {
    let (s, e) = (q(f, ep, 0x100), q(f, ep, 0x300));
    let (rs, re) = (q(f, ep, 0x1000), q(f, ep, 0x1800));
    let (b, cb, cl) = (q(f, ep, 0), q(f, ep, 0x1800), q(f, ep, W as u64 - 1));
    let mut regs = vec![
        (inj_fifo(0, FIFO_START), s),
        (inj_fifo(0, FIFO_END), e),
        (inj_fifo(0, FIFO_HEAD), s),
        (inj_fifo(0, FIFO_TAIL), s),
        (rcv_fifo(0, FIFO_START), rs),
        (rcv_fifo(0, FIFO_END), re),
        (rcv_fifo(0, FIFO_HEAD), rs),
        (rcv_fifo(0, FIFO_TAIL), rs),
        (INJ_ACTIVATE, 0x8000_0000),
        (RCV_CTR_ENABLE, 0xE000_0000),
    ];
    for c in 0..3 {
        regs.extend([
            (inj_ctr(c, CTR_BASE), b),
            (rcv_ctr(c, CTR_BASE), cb),
            (rcv_ctr(c, CTR_LIMIT), cl),
        ]);
    }
    for (o, v) in regs {
        let _ = f.dma_write(ep, o, v);
    }
    let _ = f.dcr_write(ep, DCR_BASE + DCR_INJ_FIFO_ENABLE + VM_GROUP, 0x8000_0000);
    let _ = f.dcr_write(
        ep,
        DCR_BASE + DCR_RCV_FIFO_ENABLE,
        0x8000_0000 >> (VM_GROUP * 8),
    );
}

/// A register value: a small kind byte selects a raw word, a quad address near an
/// endpoint's window, a single bit, or a small number.
fn value(input: &mut Input, f: &Fabric<Guarded>) -> u32 {
    match input.u8() % 4 {
        0 => input.u32(),
        1 => {
            let ep = EpId(input.below(EPS as u32) as u8);
            let d = i64::from(input.u16() % (W as u16 / 16 + 8)) - 4;
            (i64::from(q(f, ep, 0)) + d) as u32
        }
        2 => 0x8000_0000 >> input.below(32),
        _ => u32::from(input.u8()),
    }
}

/// A DMA page offset: a meaningful register or a raw aligned offset.
fn offset(input: &mut Input) -> u32 {
    let (f, r) = (input.below(3), 4 * input.below(4));
    match input.u8() % 8 {
        0 => inj_fifo(f, r),
        1 => inj_fifo(f, FIFO_TAIL),
        2 => inj_ctr(f, r),
        3 => rcv_fifo(f, r),
        4 => rcv_ctr(f, r),
        5 => [
            INJ_ACTIVATE,
            INJ_CTR_ENABLE,
            RCV_CTR_ENABLE,
            RCV_THRESHOLD_CLEAR,
        ][r as usize / 4],
        _ => u32::from(input.u16()) & 0xFFF & !3,
    }
}

fn dcr(input: &mut Input) -> u32 {
    match input.u8() % 4 {
        0 => DCR_BASE + input.below(256),
        1 => torus::DCR_BASE + input.below(128),
        2 => coll::DCR_BASE + input.below(128),
        _ => u32::from(input.u16()),
    }
}

/// Checks the accesses logged since the last call against the range windows.
fn check_log(f: &mut Fabric<Guarded>) {
    let log = core::mem::take(&mut f.memory_mut().log);
    for (ep, off, len, write) in log {
        assert_ne!(ep, BYSTANDER, "the bystander's memory was accessed");
        let base = f.window(ep).expect("accessed endpoint is attached").0;
        let (s, e) = (base + off, base + off + len as u64);
        let first = DCR_BASE + if write { DCR_RCV_MIN } else { DCR_INJ_MIN };
        let ok = (0..RANGE_WINDOWS).any(|w| {
            let lo = u64::from(f.dcr_read(ep, first + 2 * w).unwrap_or(0)) << 4;
            let hi = (u64::from(f.dcr_read(ep, first + 2 * w + 1).unwrap_or(0)) << 4) + 16;
            lo <= s && e <= hi
        });
        assert!(
            ok,
            "{ep:?} access {off:#x}+{len} (write {write}) outside its range windows"
        );
    }
}

/// The lines the fabric drives.
fn allowed_lines() -> [u32; 15] {
    let mut l = [0u32; 15];
    let mut set = |irq: u32| l[(irq / 32) as usize] |= kestrel_bgp::bic::line_mask(irq);
    set(IRQ_FATAL);
    set(IRQ_INJ_FIFO_THRESHOLD + VM_GROUP);
    for i in 0..4 {
        set(IRQ_RCV_FIFO_THRESHOLD + i);
        set(IRQ_INJ_CTR_ZERO + i);
        set(IRQ_RCV_CTR_ZERO + i);
    }
    for i in [
        coll::IRQ_INJ_EXC,
        coll::IRQ_RCV_EXC,
        coll::IRQ_RCV_VC0,
        coll::IRQ_RCV_VC1,
    ] {
        set(i);
    }
    l
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut f = Fabric::new(Guarded::new());
    for k in 0..EPS {
        f.attach(W as u64).expect("four endpoints fit");
        // Grants from the input (everything for the first bytes' usual zero/one mix):
        // the engine must stay inside the windows whatever the partitions and classes.
        let g = if input.bool() {
            kestrel_fabric::Grant::ALL
        } else {
            kestrel_fabric::Grant {
                classes: input.u16(),
                partitions: input.u16(),
            }
        };
        f.grant(EpId(k as u8), g).expect("attached");
    }
    if input.bool() {
        for k in 0..3 {
            setup(&mut f, EpId(k));
        }
    }
    let allowed = allowed_lines();
    let mut attached2 = true;
    while !input.is_empty() {
        let ep = EpId(input.below(3) as u8);
        match input.u8() % op::COUNT {
            op::DMA_WRITE => {
                let o = offset(&mut input);
                let v = value(&mut input, &f);
                let _ = f.dma_write(ep, o, v);
            }
            op::DMA_READ => {
                let o = offset(&mut input);
                let _ = f.dma_read(ep, o);
            }
            op::DCR_WRITE => {
                let d = dcr(&mut input);
                let v = value(&mut input, &f);
                let _ = f.dcr_write(ep, d, v);
            }
            op::DCR_READ => {
                let d = dcr(&mut input);
                let _ = f.dcr_read(ep, d);
            }
            op::POST | op::MEM => {
                let post = !input.bool();
                let mut desc = [0u8; 32];
                let got = input.bytes(32);
                desc[..got.len()].copy_from_slice(got);
                // Where: at injection FIFO 0's TAIL (a driver's send) or anywhere.
                let tail = f.dma_read(ep, inj_fifo(0, FIFO_TAIL)).unwrap_or(0);
                let at = if post {
                    (u64::from(tail) << 4).wrapping_sub(f.window(ep).map_or(0, |w| w.0))
                } else {
                    u64::from(input.u16()) % (W as u64 - 32)
                };
                if at.checked_add(32).is_some_and(|e| e <= W as u64) {
                    let a = G + ep.0 as usize * (W + G) + at as usize;
                    f.memory_mut().bytes[a..a + 32].copy_from_slice(&desc);
                }
                if post {
                    let start = f.dma_read(ep, inj_fifo(0, FIFO_START)).unwrap_or(0);
                    let end = f.dma_read(ep, inj_fifo(0, FIFO_END)).unwrap_or(0);
                    let next = tail.wrapping_add(2);
                    let next = if next >= end { start } else { next };
                    let _ = f.dma_write(ep, inj_fifo(0, FIFO_TAIL), next);
                }
            }
            op::TREE => {
                let vc = input.below(3) as usize;
                let h = input.u32();
                let mut p = [0u8; 256];
                p.iter_mut().for_each(|b| *b = input.u8());
                let _ = f.tree_inject(ep, vc, h, &p);
            }
            op::TREE_RECV => {
                let vc = input.below(3) as usize;
                let mut p = [0u8; 256];
                let _ = f.tree_receive(ep, vc, &mut p);
                let _ = f.tree_status(ep, vc);
            }
            op::FRAME => {
                let n = usize::from(input.u16() % 1600);
                let mut fr = vec![0u8; n];
                let head = input.bytes(n.min(14));
                fr[..head.len()].copy_from_slice(head);
                let _ = f.frame_send(ep, &fr);
                let mut buf = [0u8; 64];
                let _ = f.frame_receive(EpId(input.below(3) as u8), &mut buf);
            }
            op::TOGGLE => {
                if attached2 {
                    f.detach(EpId(2));
                } else {
                    assert_eq!(f.attach(W as u64).expect("slot 2 is free").0, EpId(2));
                    f.grant(EpId(2), kestrel_fabric::Grant::ALL)
                        .expect("attached");
                }
                attached2 = !attached2;
            }
            op::POLL => {
                let more = f.poll();
                assert_eq!(more, f.has_pending());
            }
            _ => {
                let c = input.u8();
                if let Some(e) = proto::error_from_code(c) {
                    assert_eq!(proto::error_code(e), c);
                }
                let w = [input.u32(), input.u32(), input.u32(), input.u32()];
                if let Some(d) = proto::diagnostic_from_words(w) {
                    assert_eq!(proto::diagnostic_words(&d), w);
                }
            }
        }
        for k in 0..EPS as u8 {
            let lines = f.irq_lines(EpId(k));
            for (l, a) in lines.iter().zip(&allowed) {
                assert_eq!(l & !a, 0, "a line the fabric does not drive");
            }
            if let Some(d) = f.take_diagnostic(EpId(k)) {
                let _ = alloc_free_len(&d);
            }
        }
        let _ = f.take_changed();
        check_log(&mut f);
    }
    let m = &f.memory().bytes;
    for k in 0..=EPS {
        assert!(
            m[k * (W + G)..k * (W + G) + G].iter().all(|&b| b == 0),
            "guard written"
        );
    }
    let s = G + 3 * (W + G);
    assert!(m[s..s + W].iter().all(|&b| b == 0), "bystander written");
}

/// Formats a diagnostic (its `Display` must not panic).
fn alloc_free_len(d: &kestrel_fabric::Diagnostic) -> usize {
    format!("{d}").len()
}

/// A seed: `setup`, then `ops` as (endpoint, selector, fields already encoded).
pub fn seed(setup: bool, ops: &[(u8, u8, Vec<u8>)]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    w.bool(setup);
    for (ep, sel, fields) in ops {
        w.u8(*ep).u8(*sel).raw(fields);
    }
    w.bytes
}

/// The seeds: a driver's memory-FIFO send, a direct put, a collective broadcast and
/// reduction, a frame, and a stray descriptor.
pub fn seeds() -> Vec<Vec<u8>> {
    let desc = |words: [u32; 8]| -> Vec<u8> {
        let mut v = vec![0u8]; // post
        v.extend(words.iter().flat_map(|w| w.to_be_bytes()));
        v
    };
    let ctr0 = VM_GROUP * COUNTERS;
    let fifo = desc([0, ctr0, 0x400, 300, 7 << HW_CHUNKS_SHIFT | 1, 0, 0, 0x1234]);
    let put = desc([
        0,
        ctr0,
        0x400,
        500,
        7 << HW_CHUNKS_SHIFT | HW_DM | 2,
        0,
        0x10,
        (ctr0 + 1) << SW_RCV_CTR_SHIFT,
    ]);
    let stray = desc([0, ctr0, 0x1FF0, 0x100, 7 << HW_CHUNKS_SHIFT | 3, 0, 0, 0]);
    let tree = |h: u32| {
        let mut v = vec![0u8];
        v.extend(h.to_be_bytes());
        v.extend([7u8; 256]);
        v
    };
    let bcast = tree(0);
    let add = tree(coll::OP_ADD << coll::HDR_OP_SHIFT | 1 << coll::HDR_OPSIZE_SHIFT);
    let mut frame = vec![0u8, 100];
    frame.extend([6, 0, 0, 1, 0, 0, 6, 0, 0, 0, 0, 0, 8, 0]);
    vec![
        seed(
            true,
            &[(0, op::POST, fifo.clone()), (1, op::TREE_RECV, vec![0])],
        ),
        seed(true, &[(0, op::POST, put), (1, op::DMA_READ, vec![4, 0])]),
        seed(true, &[(0, op::POST, stray), (0, op::POST, fifo)]),
        seed(
            false,
            &[
                (0, op::TREE, bcast),
                (0, op::TREE, add.clone()),
                (1, op::TREE, add.clone()),
                (2, op::TREE, add),
                (1, op::TREE_RECV, vec![0]),
            ],
        ),
        seed(
            false,
            &[
                (0, op::FRAME, frame),
                (1, op::TOGGLE, vec![]),
                (2, op::TOGGLE, vec![]),
            ],
        ),
    ]
}
