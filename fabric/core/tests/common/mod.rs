//! A test rig shared by the integration tests: a fabric over `VecMemory`, and the register
//! sequences a driver runs (set up FIFOs and counters, write descriptors, write TAIL).
#![allow(dead_code)]

use kestrel_bgp::dma::{self as d, *};
use kestrel_fabric::FabricApi;
use kestrel_fabric::{EpId, Fabric, Grant, VecMemory};

pub const WINDOW: u64 = 0x1_0000;
/// Window offsets the drivers below use.
pub const INJ_FIFO_AT: u64 = 0x1000;
pub const INJ_FIFO_LEN: u64 = 0x400;
pub const RCV_FIFO_AT: u64 = 0x8000;
pub const RCV_FIFO_LEN: u64 = 0x1000;
pub const DATA_AT: u64 = 0x2000;
/// The descriptor's counter id for counter `c` of the endpoint's group.
pub const fn ctr_id(c: u32) -> u32 {
    VM_GROUP * COUNTERS + c
}

pub struct Rig {
    pub f: Fabric<VecMemory>,
}

impl Rig {
    /// A fabric with `n` endpoints of `WINDOW` bytes each, granted everything (one
    /// partition, every class) and with no class route set.
    pub fn new(n: u8) -> Rig {
        let mut f = Fabric::new(VecMemory::new());
        for k in 0..n {
            let (ep, _) = f.attach(WINDOW).unwrap();
            assert_eq!(ep, EpId(k));
            f.memory_mut().set_window(ep, WINDOW as usize);
            f.grant(ep, Grant::ALL).unwrap();
        }
        Rig { f }
    }

    /// `new(n)` with every endpoint sourcing and targeting every class (the routes a flat
    /// node's personality sets).
    pub fn flat(n: u8) -> Rig {
        let mut r = Rig::new(n);
        for k in 0..n {
            r.f.set_routes(EpId(k), u16::MAX, u16::MAX).unwrap();
        }
        r
    }

    pub fn base(&self, ep: EpId) -> u64 {
        self.f.window(ep).unwrap().0
    }

    /// Bus address >> 4 of window offset `off`.
    pub fn q(&self, ep: EpId, off: u64) -> u32 {
        ((self.base(ep) + off) >> 4) as u32
    }

    pub fn w(&mut self, ep: EpId, off: u32, v: u32) {
        self.f.dma_write(ep, off, v).unwrap();
    }

    pub fn r(&mut self, ep: EpId, off: u32) -> u32 {
        self.f.dma_read(ep, off).unwrap()
    }

    pub fn dcr(&mut self, ep: EpId, o: u32, v: u32) {
        self.f.dcr_write(ep, DCR_BASE + o, v).unwrap();
    }

    pub fn dcr_r(&mut self, ep: EpId, o: u32) -> u32 {
        self.f.dcr_read(ep, DCR_BASE + o).unwrap()
    }

    /// Injection FIFO `fifo`: ring at INJ_FIFO_AT, enabled and activated.
    pub fn setup_inj(&mut self, ep: EpId, fifo: u32) {
        let s = self.q(ep, INJ_FIFO_AT);
        let e = self.q(ep, INJ_FIFO_AT + INJ_FIFO_LEN);
        self.w(ep, d::inj_fifo(fifo, FIFO_START), s);
        self.w(ep, d::inj_fifo(fifo, FIFO_END), e);
        self.w(ep, d::inj_fifo(fifo, FIFO_HEAD), s);
        self.w(ep, d::inj_fifo(fifo, FIFO_TAIL), s);
        let en = self.dcr_r(ep, DCR_INJ_FIFO_ENABLE + VM_GROUP);
        self.dcr(ep, DCR_INJ_FIFO_ENABLE + VM_GROUP, en | 0x8000_0000 >> fifo);
        self.w(ep, INJ_ACTIVATE, 0x8000_0000 >> fifo);
        // Injection counter 0 based at the window: base_offset is a window offset.
        let b = self.q(ep, 0);
        self.w(ep, d::inj_ctr(0, CTR_BASE), b);
        self.w(ep, INJ_CTR_ENABLE, 0x8000_0000);
    }

    /// Reception FIFO `fifo`: ring at RCV_FIFO_AT, enabled, threshold IRQ type 0.
    pub fn setup_rcv(&mut self, ep: EpId, fifo: u32) {
        let s = self.q(ep, RCV_FIFO_AT);
        let e = self.q(ep, RCV_FIFO_AT + RCV_FIFO_LEN);
        for (r, v) in [
            (FIFO_START, s),
            (FIFO_END, e),
            (FIFO_HEAD, s),
            (FIFO_TAIL, s),
        ] {
            self.w(ep, d::rcv_fifo(fifo, r), v);
        }
        let bit = 0x8000_0000u32 >> (VM_GROUP * RCV_FIFOS + fifo);
        let en = self.dcr_r(ep, DCR_RCV_FIFO_ENABLE);
        self.dcr(ep, DCR_RCV_FIFO_ENABLE, en | bit);
        self.dcr(ep, DCR_RCV_FIFO_IRQ_EN, bit);
        // Every PID's LOCAL byte -> this FIFO.
        for i in 0..PIDS * RCV_MAP_DCRS_PER_PID {
            self.dcr(ep, DCR_RCV_MAP + i, (VM_GROUP << 3 | fifo) * 0x0101_0101);
        }
    }

    /// Reception counter `c` covering window `[off, off + len)`, enabled, counting `len`,
    /// taking direct puts from any endpoint `ep` reaches.
    pub fn setup_rcv_ctr(&mut self, ep: EpId, c: u32, off: u64, len: u64) {
        self.dcr(ep, DCR_PUT_FROM + c, PUT_FROM_ANY);
        let b = self.q(ep, off);
        let l = self.q(ep, off + len - 1);
        self.w(ep, d::rcv_ctr(c, CTR_BASE), b);
        self.w(ep, d::rcv_ctr(c, CTR_LIMIT), l);
        self.w(ep, d::rcv_ctr(c, CTR_COUNT), len as u32);
        self.w(ep, RCV_CTR_ENABLE + 4 * (c / 32), 0x8000_0000 >> (c % 32));
    }

    /// Writes a descriptor at the injection FIFO's TAIL and advances TAIL (runs it).
    pub fn post(&mut self, ep: EpId, fifo: u32, desc: [u32; 8]) {
        let tail = self.r(ep, d::inj_fifo(fifo, FIFO_TAIL));
        let at = (u64::from(tail) << 4) - self.base(ep);
        let bytes: Vec<u8> = desc.iter().flat_map(|w| w.to_be_bytes()).collect();
        self.f.memory_mut().window_mut(ep)[at as usize..at as usize + 32].copy_from_slice(&bytes);
        let end = self.r(ep, d::inj_fifo(fifo, FIFO_END));
        let start = self.r(ep, d::inj_fifo(fifo, FIFO_START));
        let next = if tail + 2 >= end { start } else { tail + 2 };
        self.w(ep, d::inj_fifo(fifo, FIFO_TAIL), next);
    }

    pub fn mem(&self, ep: EpId) -> &[u8] {
        self.f.memory().window(ep)
    }

    pub fn fill(&mut self, ep: EpId, off: u64, data: &[u8]) {
        self.f.memory_mut().window_mut(ep)[off as usize..off as usize + data.len()]
            .copy_from_slice(data);
    }
}

/// A memory-FIFO descriptor: `len` bytes at window offset `off` (counter 0) to X = `x`.
pub fn fifo_desc(x: u8, off: u32, len: u32, sw1: u32) -> [u32; 8] {
    let hw0 = HW_CHUNKS_MASK << HW_CHUNKS_SHIFT | u32::from(x);
    [0, ctr_id(0), off, len, hw0, 0, 0, sw1]
}

/// A direct-put descriptor into the destination's reception counter `rc` at `put`.
pub fn put_desc(x: u8, off: u32, len: u32, rc: u32, put: u32) -> [u32; 8] {
    let hw0 = HW_CHUNKS_MASK << HW_CHUNKS_SHIFT | HW_DM | u32::from(x);
    [
        0,
        ctr_id(0),
        off,
        len,
        hw0,
        0,
        put,
        ctr_id(rc) << SW_RCV_CTR_SHIFT,
    ]
}

/// Whether BIC line `irq` is set in `lines`.
pub fn line(lines: &[u32; 15], irq: u32) -> bool {
    lines[(irq / 32) as usize] & kestrel_bgp::bic::line_mask(irq) != 0
}

pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
