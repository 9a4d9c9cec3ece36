//! The device attacker (issue 18, finding 7): what the hostile guest does to its own BG/P
//! devices and virtio NIC, seeded like everything else here.
//!
//! Two halves, both pure and host-tested:
//!
//! - **Block operations** ([`Gen::mmio`], [`Gen::bgp_dcr`], [`Gen::doorbell`], classes
//!   [`Class::Mmio`], [`Class::BgpDcr`], [`Class::Doorbell`]), mixed into the random blocks
//!   by weight ([`DEVICE_WEIGHTS`]) when the layout has devices: loads and stores of every
//!   width and form (byte to doubleword, FP, byte-reversed, update, indexed, multiple and
//!   string) with random values at random or register offsets of the VM's vBIC, collective
//!   VC0/VC1 windows, torus DMA group page and virtio-mmio window; `mfdcrx`/`mtdcrx` (the
//!   immediate forms name only 10-bit DCRs) on DCRs 0xC00..0xDFF, weighted towards the collective's class route
//!   registers (every class sourced and targeted, class 14 alone, random), VCFG with RCVALL
//!   and NADDR; and near-valid doorbells (DMA FIFO TAIL/HEAD, activations, counter enables,
//!   virtio QueueNotify and Status). The address is loaded into a data register right
//!   before the access (`lis`/`ori`), so the base-register invariants of the crate stay
//!   as they are: the access lands in the window the generator chose.
//! - **Plans** ([`setup`], [`burst`]): straight-line lists of 32-bit stores and DCR writes the
//!   guest runs between blocks (through the same entry and vectors as a block, so an
//!   exception only cuts a plan short): the DMA set-up (out of reset, range windows over the
//!   VM's RAM, FIFOs enabled) and, in turn, floods of collective packets (broadcasts,
//!   point to point to every node address, reductions on every class, class 14 and 0
//!   included, reserved opcodes too), torus descriptors with random and near-valid fields
//!   (destinations X 0..15, direct puts to random counters, memory FIFO to every endpoint,
//!   huge lengths, bad counter ids) rung through TAIL, and virtio frames (random, broadcast,
//!   with forged source MACs) through a freshly set-up transmit queue.
//!
//! Every address a plan stores to is either in the plan area of the scratch RAM
//! ([`DeviceLayout::area`], [`AREA_BYTES`]) or a register of one of the windows, and every
//! DCR is a documented one, so the guest's own code never takes an exception from a plan
//! the models would refuse; the blocks do the rest.

use crate::{Class, Gen, Layout, Rng, FIRST_DATA_REG};
use kestrel_bgp::{bic, coll, dma};
use kestrel_devices::virtio_net::{self as vnet, reg as vreg, status as vstatus};
use kestrel_ppc440::decode::{AddrMode, LsOp};
use kestrel_ppc440::encode as e;

/// Effective addresses at which the guest maps its device windows (its own TLB entries,
/// data only, never executable), and the scratch area its plans use.
#[derive(Clone, Copy, Debug)]
pub struct DeviceLayout {
    pub bic: u32,
    pub vc0: u32,
    pub vc1: u32,
    pub dma: u32,
    pub virtio: u32,
    /// `[area, area + AREA_BYTES)`: scratch RAM, 64 KiB aligned, mapped 1:1.
    pub area: u32,
}

/// Bytes of the plan area: DMA ring, payloads, virtqueue, frames.
pub const AREA_BYTES: u32 = 256 << 10;
/// The DMA injection ring (RING_SLOTS descriptors) at the start of the area.
pub const RING_SLOTS: u32 = 64;
const RING: u32 = 0;
/// What the injection counters point at (payload of the descriptors): 64 KiB.
const PAYLOAD: u32 = 0x1_0000;
const PAYLOAD_BYTES: u32 = 0x1_0000;
/// The virtqueue (descriptor table, available and used rings) and its frames.
const VQ_DESC: u32 = 0x2_0000;
const VQ_AVAIL: u32 = 0x2_0400;
const VQ_USED: u32 = 0x2_0800;
const FRAMES: u32 = 0x2_1000;
const FRAME_SLOT: u32 = 2048;
/// Entries of the transmit queue the plans set up (a power of two).
pub const VQ_ENTRIES: u32 = 16;

/// The guest's window EAs map these guest-physical windows, in this order.
pub const WINDOWS: [(u64, u32); 5] = [
    (bic::BASE, bic::SIZE as u32),
    (coll::VC0_BASE, coll::VC_SIZE as u32),
    (coll::VC1_BASE, coll::VC_SIZE as u32),
    (
        dma::BASE + dma::VM_GROUP as u64 * dma::GROUP_SIZE,
        dma::GROUP_SIZE as u32,
    ),
    (0xE000_0000, vnet::WINDOW as u32),
];

impl DeviceLayout {
    /// The window EAs in [`WINDOWS`] order.
    pub fn eas(&self) -> [u32; 5] {
        [self.bic, self.vc0, self.vc1, self.dma, self.virtio]
    }
}

/// The collective VC registers.
const VC_REGS: [u32; 6] = [coll::DI, coll::HI, coll::DR, coll::HR, coll::S, coll::SO];
/// Single DMA group registers (FIFOs and counters are drawn separately).
const DMA_REGS: [u32; 22] = [
    dma::INJ_NOT_EMPTY,
    dma::INJ_AVAILABLE,
    dma::INJ_THRESHOLD,
    dma::INJ_THRESHOLD_CLEAR,
    dma::INJ_ACTIVATED,
    dma::INJ_ACTIVATE,
    dma::INJ_DEACTIVATE,
    dma::INJ_CTR_ENABLED,
    dma::INJ_CTR_ENABLE,
    dma::INJ_CTR_DISABLE,
    dma::INJ_CTR_HIT_ZERO,
    dma::INJ_CTR_CLEAR_HIT_ZERO,
    dma::INJ_CTR_GRP_STATUS,
    dma::SCRATCH,
    dma::RCV_NOT_EMPTY,
    dma::RCV_AVAILABLE,
    dma::RCV_THRESHOLD_CLEAR,
    dma::RCV_CTR_ENABLED,
    dma::RCV_CTR_ENABLE,
    dma::RCV_CTR_DISABLE,
    dma::RCV_CTR_CLEAR_HIT_ZERO,
    dma::RCV_CTR_GRP_STATUS,
];
/// virtio-mmio registers.
const VIRTIO_REGS: [u32; 22] = [
    vreg::MAGIC_VALUE,
    vreg::VERSION,
    vreg::DEVICE_ID,
    vreg::DEVICE_FEATURES,
    vreg::DEVICE_FEATURES_SEL,
    vreg::DRIVER_FEATURES,
    vreg::DRIVER_FEATURES_SEL,
    vreg::QUEUE_SEL,
    vreg::QUEUE_NUM_MAX,
    vreg::QUEUE_NUM,
    vreg::QUEUE_READY,
    vreg::QUEUE_NOTIFY,
    vreg::INTERRUPT_STATUS,
    vreg::INTERRUPT_ACK,
    vreg::STATUS,
    vreg::QUEUE_DESC_LOW,
    vreg::QUEUE_DESC_HIGH,
    vreg::QUEUE_DRIVER_LOW,
    vreg::QUEUE_DRIVER_HIGH,
    vreg::QUEUE_DEVICE_LOW,
    vreg::QUEUE_DEVICE_HIGH,
    vreg::CONFIG,
];
/// Documented collective and DMA DCRs besides the route registers.
const NAMED_DCRS: [u32; 22] = [
    coll::DCR_BASE + coll::DCR_RCFG,
    coll::DCR_BASE + coll::DCR_FPTR,
    coll::DCR_BASE + coll::DCR_NADDR,
    coll::DCR_BASE + coll::DCR_VCFG0,
    coll::DCR_BASE + coll::DCR_VCFG1,
    coll::DCR_BASE + coll::DCR_PRXF,
    coll::DCR_BASE + coll::DCR_PRXEN,
    coll::DCR_BASE + coll::DCR_PIXF,
    coll::DCR_BASE + coll::DCR_PIXEN,
    dma::DCR_BASE + dma::DCR_RESET,
    dma::DCR_BASE + dma::DCR_BASE_CONTROL,
    dma::DCR_BASE + dma::DCR_INJ_MIN,
    dma::DCR_BASE + dma::DCR_INJ_MIN + 1,
    dma::DCR_BASE + dma::DCR_RCV_MIN,
    dma::DCR_BASE + dma::DCR_RCV_MIN + 1,
    dma::DCR_BASE + dma::DCR_INJ_FIFO_ENABLE + dma::VM_GROUP,
    dma::DCR_BASE + dma::DCR_RCV_FIFO_ENABLE,
    dma::DCR_BASE + dma::DCR_RCV_HDR_FIFO_ENABLE,
    dma::DCR_BASE + dma::DCR_RCV_MAP + 1,
    dma::DCR_BASE + dma::DCR_FATAL_ENABLE,
    dma::DCR_BASE + dma::DCR_FATAL_STATUS,
    dma::DCR_BASE + dma::DCR_BAD_ADDRESS,
];

/// First and last DCR the device attacker touches.
pub const DCR_FIRST: u32 = 0xC00;
pub const DCR_LAST: u32 = 0xDFF;

/// A route register value: both classes' local source/target bits from `sources`/`targets`
/// (bit c = class c), the rest of `v` kept.
fn route(dcr: u32, v: u32, sources: u16, targets: u16) -> u32 {
    coll::route_word(dcr, v, sources, targets)
}

/// A value for route register `dcr`: every class sourced and targeted, class 14 (the MPI
/// layer's reductions) sourced, or random bits.
fn route_value(rng: &mut Rng, dcr: u32) -> u32 {
    match rng.below(4) {
        0 => route(dcr, rng.u32(), 0xFFFF, 0xFFFF),
        1 => route(dcr, 0, 1 << 14, 1 << 14),
        2 => route(dcr, 0, rng.u32() as u16, rng.u32() as u16),
        _ => rng.u32(),
    }
}

/// A register offset inside window `w` (an index into [`WINDOWS`]): a known register most
/// of the time, else anywhere in the window.
fn offset_in(rng: &mut Rng, w: usize) -> u32 {
    let size = WINDOWS[w].1;
    if rng.chance(35) {
        return rng.below(size);
    }
    match w {
        0 => bic::group_reg(rng.below(bic::GROUPS), rng.below(0x50) & !3),
        1 | 2 => rng.pick(&VC_REGS) + 4 * rng.below(4),
        3 => match rng.below(5) {
            0 => dma::inj_fifo(rng.below(dma::INJ_FIFOS), 4 * rng.below(4)),
            1 => dma::inj_ctr(rng.below(dma::COUNTERS), 4 * rng.below(4)),
            2 => dma::rcv_fifo(rng.below(dma::RCV_FIFOS + 1), 4 * rng.below(4)),
            3 => dma::rcv_ctr(rng.below(dma::COUNTERS), 4 * rng.below(4)),
            _ => rng.pick(&DMA_REGS) + 4 * rng.below(2),
        },
        _ => rng.pick(&VIRTIO_REGS) + if rng.chance(10) { rng.below(0x100) } else { 0 },
    }
}

impl Gen<'_> {
    fn devices(&self) -> DeviceLayout {
        self.layout
            .devices
            .expect("device classes have weight only with devices")
    }

    /// A data register other than `avoid`.
    fn data_not(&mut self, avoid: u32) -> u32 {
        loop {
            let r = self.data();
            if r != avoid {
                return r;
            }
        }
    }

    /// One access of any form to a random register or offset of one of the windows.
    pub(crate) fn mmio(&mut self) {
        let d = self.devices();
        let w = self.rng.below(WINDOWS.len() as u32) as usize;
        let mut off = offset_in(self.rng, w);
        match self.rng.below(10) {
            // lmw/stmw: up to 8 words (r24..r31), the base below them.
            0 => {
                let store = self.rng.chance(50);
                let rt = 24 + self.rng.below(8);
                let rb = FIRST_DATA_REG + self.rng.below(24 - FIRST_DATA_REG);
                self.load_imm(rb, d.eas()[w].wrapping_add(off & !3));
                let op = if store { LsOp::Stmw } else { LsOp::Lmw };
                let w = e::load_store(op, rt, rb, AddrMode::D { d: 0 });
                self.push(w.expect("lmw/stmw with the base below rT is valid"));
            }
            // lswi/stswi: up to 32 bytes into r24.. (no wrap), the base below them.
            1 => {
                let store = self.rng.chance(50);
                let rt = 24 + self.rng.below(8);
                let rb = FIRST_DATA_REG + self.rng.below(24 - FIRST_DATA_REG);
                let nb = 1 + self.rng.below(4 * (32 - rt));
                self.load_imm(rb, d.eas()[w].wrapping_add(off));
                self.push(e::string_imm(store, rt, rb, nb & 31));
            }
            _ => loop {
                let op = self.rng.pick(&LsOp::ALL);
                if op.multiple() {
                    continue;
                }
                let width = op.width() as u32;
                if self.rng.chance(85) {
                    off &= !(width - 1);
                }
                let rb = self.data();
                let store = matches!(op.kind(), kestrel_ppc440::decode::AccessKind::Store);
                let rv = if op.is_fp() {
                    self.any()
                } else {
                    self.data_not(rb)
                };
                let ea = d.eas()[w].wrapping_add(off);
                let word = if op.is_indexed() {
                    let rx = loop {
                        let r = self.data();
                        if r != rb && r != rv {
                            break r;
                        }
                    };
                    let k = self.rng.below(64) as i16;
                    let Some(word) = e::load_store(op, rv, rb, AddrMode::X { rb: crate::gpr(rx) })
                    else {
                        continue;
                    };
                    self.load_imm(rb, ea.wrapping_sub(k as u32));
                    self.push(e::li(rx, k));
                    word
                } else {
                    let k = self.rng.below(64) as i16;
                    let Some(word) = e::load_store(op, rv, rb, AddrMode::D { d: k }) else {
                        continue;
                    };
                    self.load_imm(rb, ea.wrapping_sub(k as u32));
                    word
                };
                if store && !op.is_fp() && self.rng.chance(70) {
                    let v = self.rng.u32();
                    self.load_imm(rv, v);
                }
                self.push(word);
                break;
            },
        }
    }

    /// `mfdcrx`/`mtdcrx` on DCRs 0xC00..0xDFF, the route registers weighted.
    pub(crate) fn bgp_dcr(&mut self) {
        let n = match self.rng.below(10) {
            0..=3 => coll::DCR_BASE + coll::DCR_RDR0 + self.rng.below(coll::RDR_COUNT),
            4..=6 => self.rng.pick(&NAMED_DCRS),
            _ => DCR_FIRST + self.rng.below(DCR_LAST - DCR_FIRST + 1),
        };
        let v = if n < coll::DCR_BASE + coll::RDR_COUNT {
            route_value(self.rng, n)
        } else if n == coll::DCR_BASE + coll::DCR_VCFG0 || n == coll::DCR_BASE + coll::DCR_VCFG1 {
            coll::VCFG_RCVALL | (self.rng.u32() & 0x7ff)
        } else {
            self.rng.u32()
        };
        // mfdcr/mtdcr name 10-bit DCRs: 0xC00..0xDFF only the indexed forms reach (which
        // the 440x5 lacks; the kernel passes them to the VMM, as for BG/P's own kernel).
        let rv = self.data();
        let rn = self.data_not(rv);
        if self.rng.chance(35) {
            self.load_imm(rn, n);
            self.push(e::mfdcrx(rv, rn));
        } else {
            self.load_imm(rv, v);
            self.load_imm(rn, n);
            self.push(e::mtdcrx(rn, rv));
        }
    }

    /// A near-valid doorbell: a DMA FIFO's TAIL or HEAD moved inside the plan ring, FIFOs
    /// activated, counters enabled or given a huge count, or virtio QueueNotify / Status.
    pub(crate) fn doorbell(&mut self) {
        let d = self.devices();
        let ring = (d.area + RING) >> 4;
        let (reg, v, le) = match self.rng.below(8) {
            0 | 1 => {
                let f = if self.rng.chance(70) {
                    0
                } else {
                    self.rng.below(32)
                };
                let reg = if self.rng.chance(75) {
                    dma::FIFO_TAIL
                } else {
                    dma::FIFO_HEAD
                };
                let v = ring + 2 * self.rng.below(RING_SLOTS + 2);
                (d.dma + dma::inj_fifo(f, reg), v, false)
            }
            2 => (d.dma + dma::INJ_ACTIVATE, self.rng.u32() | 1 << 31, false),
            3 => (
                d.dma + dma::INJ_CTR_ENABLE + 4 * self.rng.below(2),
                u32::MAX,
                false,
            ),
            4 => {
                let c = self.rng.below(dma::COUNTERS);
                let v = if self.rng.chance(50) {
                    u32::MAX
                } else {
                    self.rng.u32()
                };
                (d.dma + dma::inj_ctr(c, dma::CTR_COUNT), v, false)
            }
            5 | 6 => (
                d.virtio + vreg::QUEUE_NOTIFY,
                if self.rng.chance(70) {
                    1
                } else {
                    self.rng.u32()
                },
                true,
            ),
            _ => {
                let any = self.rng.u32();
                let v = self.rng.pick(&[0, 0xF, vstatus::DRIVER_OK, any]);
                (d.virtio + vreg::STATUS, v, true)
            }
        };
        let (rb, rv) = (self.data(), self.data());
        let rv = if rv == rb { self.data_not(rb) } else { rv };
        self.load_imm(rb, reg);
        self.load_imm(rv, v);
        // virtio registers are little-endian: stwbrx as Linux's writel.
        let word = if le {
            e::load_store(LsOp::Stwbrx, rv, 0, AddrMode::X { rb: crate::gpr(rb) })
        } else {
            e::load_store(LsOp::Stw, rv, rb, AddrMode::D { d: 0 })
        };
        self.push(word.expect("stw/stwbrx are valid"));
    }
}

/// Device classes and their weights (beside [`crate::WEIGHTS`]) when the layout has devices.
pub const DEVICE_CLASS_WEIGHTS: [(Class, u32); 3] = [
    (Class::Mmio, 40),
    (Class::BgpDcr, 16),
    (Class::Doorbell, 10),
];

// ---------------------------------------------------------------------------------------
// Plans.

/// Most steps of a plan.
pub const PLAN_STEPS: usize = 1024;

/// One step of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A big-endian 32-bit store (`stw`) at effective address `ea`.
    Store { ea: u32, value: u32 },
    /// `mtdcr dcr, value`.
    Dcr { dcr: u32, value: u32 },
}

/// What a plan does (for the guest's counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanKind {
    Setup,
    Collective,
    Torus,
    Virtio,
}

/// Short plan names for the guest's summary lines, in [`PlanKind`] order.
pub const PLAN_NAMES: [&str; 4] = ["setup", "coll", "torus", "virtio"];

/// A plan: `steps[..len]`, and how many packets, descriptors or frames it sends.
#[derive(Clone, Debug)]
pub struct Plan {
    pub steps: [Step; PLAN_STEPS],
    pub len: usize,
    pub kind: PlanKind,
    pub items: u32,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            steps: [Step::Dcr { dcr: 0, value: 0 }; PLAN_STEPS],
            len: 0,
            kind: PlanKind::Setup,
            items: 0,
        }
    }
}

impl Plan {
    fn store(&mut self, ea: u32, value: u32) {
        if self.len < PLAN_STEPS {
            self.steps[self.len] = Step::Store { ea, value };
            self.len += 1;
        }
    }

    /// A little-endian store (virtio registers and rings).
    fn store_le(&mut self, ea: u32, value: u32) {
        self.store(ea, value.swap_bytes());
    }

    fn dcr(&mut self, dcr: u32, value: u32) {
        if self.len < PLAN_STEPS {
            self.steps[self.len] = Step::Dcr { dcr, value };
            self.len += 1;
        }
    }
}

/// The DMA out of reset with range windows over the VM's RAM (`ram_end`), the VM group's
/// injection FIFOs and every reception FIFO enabled; half of the time, every collective
/// class sourced and targeted (class 14 too: a reduction of the native ranks then waits
/// for this VM, which ISSUE 18's fix must refuse).
pub fn setup(rng: &mut Rng, ram_end: u32, out: &mut Plan) {
    *out = Plan::default();
    let b = dma::DCR_BASE;
    out.dcr(b + dma::DCR_RESET, 0);
    out.dcr(b + dma::DCR_BASE_CONTROL, dma::BASE_CONTROL_USE_DMA);
    for w in 0..dma::RANGE_WINDOWS {
        out.dcr(b + dma::DCR_INJ_MIN + 2 * w, 0);
        out.dcr(b + dma::DCR_INJ_MIN + 2 * w + 1, ram_end >> 4);
        out.dcr(b + dma::DCR_RCV_MIN + 2 * w, 0);
        out.dcr(b + dma::DCR_RCV_MIN + 2 * w + 1, ram_end >> 4);
    }
    out.dcr(b + dma::DCR_INJ_FIFO_ENABLE + dma::VM_GROUP, u32::MAX);
    out.dcr(b + dma::DCR_RCV_FIFO_ENABLE, u32::MAX);
    out.dcr(b + dma::DCR_RCV_HDR_FIFO_ENABLE, u32::MAX);
    if rng.chance(50) {
        for r in 0..coll::RDR_COUNT {
            let dcr = coll::DCR_BASE + coll::DCR_RDR0 + r;
            out.dcr(dcr, route(dcr, 0, 0xFFFF, 0xFFFF));
        }
        out.items = 1;
    }
}

/// One flood, its kind drawn at random.
pub fn burst(rng: &mut Rng, d: &DeviceLayout, out: &mut Plan) {
    *out = Plan::default();
    match rng.below(3) {
        0 => collective(rng, d, out),
        1 => torus(rng, d, out),
        _ => virtio(rng, d, out),
    }
}

/// A collective header: broadcast, point to point to node `k`, or a reduction, on any class.
pub fn coll_header(rng: &mut Rng, k: u32) -> u32 {
    let class = match rng.below(4) {
        0 => 14,
        1 => 0,
        _ => rng.below(16),
    };
    let mut h = class << coll::HDR_CLASS_SHIFT;
    match rng.below(3) {
        0 => {}
        1 => h |= coll::HDR_P2P | (k & coll::HDR_P2P_ADDR_MASK) << coll::HDR_P2P_ADDR_SHIFT,
        _ => {
            h |= (1 + rng.below(7)) << coll::HDR_OP_SHIFT;
            h |= rng.below(coll::HDR_OPSIZE_MASK + 1) << coll::HDR_OPSIZE_SHIFT;
            h |= rng.below(coll::HDR_TAG_MASK + 1) << coll::HDR_TAG_SHIFT;
        }
    }
    if rng.chance(20) {
        h |= coll::HDR_IRQ;
    }
    if rng.chance(10) {
        h ^= rng.u32();
    }
    h
}

fn collective(rng: &mut Rng, d: &DeviceLayout, out: &mut Plan) {
    out.kind = PlanKind::Collective;
    let vc = if rng.chance(50) { d.vc0 } else { d.vc1 };
    let packets = 1 + rng.below(12);
    let first = rng.below(16);
    for p in 0..packets {
        out.store(vc + coll::HI, coll_header(rng, (first + p) % 16));
        let fill = rng.u32();
        for q in 0..coll::PAYLOAD_QUADS * 4 {
            out.store(
                vc + coll::DI + 4 * (q % 4),
                fill ^ q.wrapping_mul(0x9E37_79B9),
            );
        }
        out.items += 1;
    }
}

/// A descriptor's eight words: random and near-valid fields.
pub fn descriptor(rng: &mut Rng, k: u32) -> [u32; 8] {
    let counter = if rng.chance(75) {
        dma::VM_GROUP * dma::COUNTERS + rng.below(4)
    } else {
        rng.below(256)
    };
    let length = match rng.below(6) {
        0 => rng.u32(),
        1 => 0x7FFF_FFFF,
        2 => 0,
        _ => 1 + rng.below(4096),
    };
    let mut hw0 = dma::HW_CHUNKS_MASK << dma::HW_CHUNKS_SHIFT | (k % 16);
    if rng.chance(40) {
        hw0 |= dma::HW_DM;
    }
    if rng.chance(30) {
        hw0 |= dma::HW_PID0 | dma::HW_PID1;
    }
    let put = if rng.chance(60) {
        rng.below(PAYLOAD_BYTES)
    } else {
        rng.u32()
    };
    let word3 = rng.below(256) << dma::SW_RCV_CTR_SHIFT | (rng.u32() & 0xFF_FFFF);
    [
        if rng.chance(85) { 0 } else { rng.u32() },
        counter & dma::DESC_CTR_ID_MASK,
        if rng.chance(80) {
            rng.below(PAYLOAD_BYTES)
        } else {
            rng.u32()
        },
        length,
        if rng.chance(90) { hw0 } else { rng.u32() },
        if rng.chance(90) { 0 } else { rng.u32() },
        put,
        word3,
    ]
}

fn torus(rng: &mut Rng, d: &DeviceLayout, out: &mut Plan) {
    out.kind = PlanKind::Torus;
    let g = d.dma;
    let ring = d.area + RING;
    let n = 1 + rng.below(RING_SLOTS - 1);
    // The counters the descriptors name: the payload area, a huge count, enabled.
    for c in 0..4 {
        out.store(g + dma::inj_ctr(c, dma::CTR_BASE), (d.area + PAYLOAD) >> 4);
        out.store(g + dma::inj_ctr(c, dma::CTR_COUNT), u32::MAX);
        out.store(g + dma::rcv_ctr(c, dma::CTR_BASE), (d.area + PAYLOAD) >> 4);
        out.store(
            g + dma::rcv_ctr(c, dma::CTR_LIMIT),
            (d.area + PAYLOAD + PAYLOAD_BYTES) >> 4,
        );
    }
    out.store(g + dma::INJ_CTR_ENABLE, u32::MAX);
    out.store(g + dma::INJ_CTR_ENABLE + 4, u32::MAX);
    out.store(g + dma::RCV_CTR_ENABLE, u32::MAX);
    // FIFO 0 over the ring, empty, then the descriptors, then TAIL past them.
    out.store(g + dma::INJ_DEACTIVATE, 1 << 31);
    out.store(g + dma::inj_fifo(0, dma::FIFO_START), ring >> 4);
    out.store(
        g + dma::inj_fifo(0, dma::FIFO_END),
        (ring + RING_SLOTS * dma::DESC_BYTES) >> 4,
    );
    out.store(g + dma::inj_fifo(0, dma::FIFO_HEAD), ring >> 4);
    out.store(g + dma::inj_fifo(0, dma::FIFO_TAIL), ring >> 4);
    out.store(g + dma::INJ_ACTIVATE, 1 << 31);
    let first = rng.below(16);
    for k in 0..n {
        for (i, w) in descriptor(rng, first + k).iter().enumerate() {
            out.store(ring + k * dma::DESC_BYTES + 4 * i as u32, *w);
        }
        out.items += 1;
    }
    out.store(
        g + dma::inj_fifo(0, dma::FIFO_TAIL),
        (ring + n * dma::DESC_BYTES) >> 4,
    );
}

/// A MAC address: broadcast, bgnet-like (06:00:00:kk:00:00, every endpoint), or random.
fn mac(rng: &mut Rng) -> [u8; 6] {
    match rng.below(3) {
        0 => [0xFF; 6],
        1 => [6, 0, 0, rng.below(16) as u8, 0, 0],
        _ => {
            let v = rng.next_u64().to_be_bytes();
            [v[0], v[1], v[2], v[3], v[4], v[5]]
        }
    }
}

fn virtio(rng: &mut Rng, d: &DeviceLayout, out: &mut Plan) {
    out.kind = PlanKind::Virtio;
    let v = d.virtio;
    let a = d.area;
    // The transmit queue, set up the way Linux's driver does.
    out.store_le(v + vreg::STATUS, 0);
    out.store_le(v + vreg::STATUS, vstatus::ACKNOWLEDGE | vstatus::DRIVER);
    out.store_le(v + vreg::DRIVER_FEATURES_SEL, 1);
    out.store_le(v + vreg::DRIVER_FEATURES, 1);
    out.store_le(v + vreg::DRIVER_FEATURES_SEL, 0);
    out.store_le(v + vreg::DRIVER_FEATURES, 1 << 5);
    out.store_le(
        v + vreg::STATUS,
        vstatus::ACKNOWLEDGE | vstatus::DRIVER | vstatus::FEATURES_OK,
    );
    out.store_le(v + vreg::QUEUE_SEL, vnet::TX_QUEUE as u32);
    out.store_le(v + vreg::QUEUE_NUM, VQ_ENTRIES);
    for (reg, at) in [
        (vreg::QUEUE_DESC_LOW, VQ_DESC),
        (vreg::QUEUE_DRIVER_LOW, VQ_AVAIL),
        (vreg::QUEUE_DEVICE_LOW, VQ_USED),
    ] {
        out.store_le(v + reg, a + at);
        out.store_le(v + reg + 4, 0);
    }
    out.store_le(v + vreg::QUEUE_READY, 1);
    out.store_le(
        v + vreg::STATUS,
        vstatus::ACKNOWLEDGE | vstatus::DRIVER | vstatus::FEATURES_OK | vstatus::DRIVER_OK,
    );
    let n = 1 + rng.below(VQ_ENTRIES);
    for i in 0..n {
        let frame = a + FRAMES + i * FRAME_SLOT;
        // virtio_net_hdr (12 bytes of zeros), then destination, source, type, payload.
        let (dst, src) = (mac(rng), mac(rng));
        let mut bytes = [0u8; 48];
        bytes[12..18].copy_from_slice(&dst);
        bytes[18..24].copy_from_slice(&src);
        bytes[24..26].copy_from_slice(&rng.pick(&[0x0800u16, 0x0806, 0x86DD]).to_be_bytes());
        for b in bytes[26..].iter_mut() {
            *b = rng.u32() as u8;
        }
        for (j, w) in bytes.chunks(4).enumerate() {
            out.store(
                frame + 4 * j as u32,
                u32::from_be_bytes([w[0], w[1], w[2], w[3]]),
            );
        }
        let len = match rng.below(8) {
            0 => rng.u32(),
            1 => 0,
            _ => vnet::NET_HDR as u32 + 14 + rng.below(1500),
        };
        let desc = a + VQ_DESC + 16 * i;
        out.store_le(desc, frame);
        out.store_le(desc + 4, 0);
        out.store_le(desc + 8, len);
        out.store_le(desc + 12, 0);
        out.items += 1;
    }
    // The available ring: flags 0, idx n, ring[i] = i.
    for i in (0..n).step_by(2) {
        let pair = i | (i + 1) << 16;
        out.store_le(a + VQ_AVAIL + 4 + 2 * i, pair);
    }
    out.store_le(a + VQ_AVAIL, n << 16);
    out.store_le(v + vreg::QUEUE_NOTIFY, vnet::TX_QUEUE as u32);
}

/// Whether `ea` lies in one of the device windows of `layout`.
pub fn in_window(layout: &Layout, ea: u32) -> bool {
    layout.devices.is_some_and(|d| {
        d.eas()
            .iter()
            .zip(WINDOWS)
            .any(|(&base, (_, size))| (base..base + size).contains(&ea))
    })
}

/// Whether `ea` is somewhere a plan may store: the plan area, or a window.
pub fn plan_may_store(layout: &Layout, ea: u32) -> bool {
    layout
        .devices
        .is_some_and(|d| (d.area..d.area + AREA_BYTES).contains(&ea))
        || in_window(layout, ea)
}
