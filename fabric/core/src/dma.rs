//! The torus DMA engine (bgp-interconnect.md 2.3): one DMA group register file per
//! endpoint, the DMA and torus DCRs, and the injection that a TAIL write runs.
//!
//! Register semantics (offsets and bits from `kestrel_bgp::dma`):
//! - FIFO and counter addresses are bus addresses >> 4 (16-byte units). A FIFO is the ring
//!   `[START, END)`; it is empty when HEAD == TAIL and holds at most size − 1 quad.
//! - Injection FIFO f runs when it is enabled (DCR `0xD2C + group`, bit f) and activated
//!   (`INJ_ACTIVATE`); a TAIL write, an activate write or an enable write runs it at once:
//!   every 32-byte descriptor between HEAD and TAIL is read (under the injection range
//!   check), its message split into packets of up to `(Chunks + 1) * 32 − 16` bytes (240 at
//!   most), each packet routed by the hardware header's X, Y, Z and delivered; the
//!   injection counter counts down by the bytes sent, HEAD advances, and the FIFO's
//!   threshold bit is set.
//! - One engine call moves at most `INJECT_BUDGET_BYTES` of payload and starts at most
//!   `INJECT_BUDGET_DESCRIPTORS` descriptors (all endpoints together). What is left stays
//!   pending (HEAD on the partly sent message) and continues at the end of the next engine
//!   call of any endpoint, at a `dma_read`, or at `Fabric::poll`: one endpoint's huge
//!   messages or endless rings cannot stall the others.
//! - Memory-FIFO packets land at the destination's reception FIFO chosen by its reception
//!   map (PID pair, LOCAL byte) as a slot of the 16-byte header + payload, padded to
//!   32-byte chunks (the header's Chunks field says how many; Put_Offset is the byte offset
//!   of the packet within its message, Kittyhawk's reading). TAIL advances; the FIFO's
//!   threshold bit latches when it then holds more quads than its type's threshold.
//!   Software word 3's low 24 bits (bgnet's `src_key`, [`SRC_KEY_MASK`]) are stamped with
//!   the injecting endpoint's coordinates, whatever the descriptor said: a receiver always
//!   learns the true sender (the top byte, bgnet's `conn_id`, is the sender's).
//! - Direct-put packets are written at the destination reception counter's
//!   `BASE + Put_Offset`, which must lie in `BASE ..= LIMIT` (LIMIT is the last valid
//!   quad), and count that counter down. A disabled reception counter refuses packets, and
//!   so does a counter whose owner did not allow the sender in its `DCR_PUT_FROM` DCR
//!   (Kestrel's: one named sender, or any endpoint the owner reaches; nobody at reset).
//! - A packet to an endpoint the sender may not reach (no shared partition in their
//!   [`Grant`](crate::Grant)s) is dropped: `ERR_PUT_REFUSED` in the sender's fatal status,
//!   counted, `DiagKind::Unreachable`.
//! - A counter that counts down to exactly zero sets its hit-zero bit.
//! - Local memcopy descriptors are direct puts to the injecting endpoint itself;
//!   prefetch-only descriptors are consumed without effect; a zero-length memory-FIFO
//!   message sends one header-only packet.
//!
//! Errors (DCR `DCR_FATAL_STATUS`, the fatal IRQ line while `status & DCR_FATAL_ENABLE`):
//! the endpoint whose setting was wrong gets the bit: the sender for a bad descriptor, a
//! destination outside the machine, a source outside its windows, or a Put_Offset outside
//! the counter; the receiver for its own reception FIFO or counter outside its windows
//! (`ERR_RANGE`, bad address in `DCR_BAD_ADDRESS`), FIFO pointers outside their FIFO
//! (`ERR_DESCRIPTOR`) or a full FIFO (`ERR_RCV_OVERFLOW`, not enabled at reset). Dropped
//! packets are counted at the receiver.
//!
//! Kestrel's reset state (what firmware leaves on BG/P): range window 0 of both directions
//! covers the endpoint's whole memory window, every reception map byte sends to FIFO 0 of
//! the endpoint's group, fatal enable = `ERR_RANGE | ERR_DESCRIPTOR`. The endpoint's group
//! is `VM_GROUP` (the only group it has); other groups' DCR fields read back what was
//! written and have no effect.

use crate::{DiagKind, Dir, EpId, Fabric, Hop, Link, Memory};
use kestrel_bgp::dma::*;
use kestrel_bgp::torus;

const GROUP: u32 = VM_GROUP;
const NINJ: usize = INJ_FIFOS as usize;
const NRCV: usize = RCV_FIFOS as usize;
const NCTR: usize = COUNTERS as usize;

/// Mask of bit `i` (MSB first) of a 32-bit word.
const fn bit(i: u32) -> u32 {
    0x8000_0000u32.wrapping_shr(i)
}

/// Mask of counter `c` (MSB first) of a 64-bit pair of words (word 0 = high half).
const fn bit64(c: usize) -> u64 {
    0x8000_0000_0000_0000u64.wrapping_shr(c as u32)
}

/// The reception FIFO bit of FIFO `f` of our group in a `group * 8 + f` word.
const fn rcv_bit(f: usize) -> u32 {
    bit(GROUP * RCV_FIFOS + f as u32)
}

/// The counter-subgroup bit of counter `c` of our group in a `group * 8 + c / 8` word.
const fn subgroup_bit(c: usize) -> u32 {
    kestrel_bgp::dma::ctr_subgroup_bit(GROUP, c as u32)
}

/// A FIFO's four registers (addresses >> 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ring {
    pub start: u32,
    pub end: u32,
    pub head: u32,
    pub tail: u32,
}

impl Ring {
    /// START < END and HEAD, TAIL inside.
    pub fn valid(&self) -> bool {
        self.start < self.end
            && (self.start..self.end).contains(&self.head)
            && (self.start..self.end).contains(&self.tail)
    }

    /// Size in quads (valid rings only).
    fn size(&self) -> u32 {
        self.end - self.start
    }

    /// Quads in use (valid rings only).
    pub fn used(&self) -> u32 {
        if self.tail >= self.head {
            self.tail - self.head
        } else {
            self.size() - (self.head - self.tail)
        }
    }

    /// Free quads, keeping one empty so full and empty differ (valid rings only).
    pub fn free(&self) -> u32 {
        self.size() - 1 - self.used()
    }

    fn get(&self, reg: u32) -> u32 {
        match reg {
            FIFO_START => self.start,
            FIFO_END => self.end,
            FIFO_HEAD => self.head,
            _ => self.tail,
        }
    }

    fn set(&mut self, reg: u32, v: u32) {
        match reg {
            FIFO_START => self.start = v,
            FIFO_END => self.end = v,
            FIFO_HEAD => self.head = v,
            _ => self.tail = v,
        }
    }

    /// `p` advanced by `quads` with wrap (valid rings only).
    fn advance(&self, p: u32, quads: u32) -> u32 {
        let off = (u64::from(p - self.start) + u64::from(quads)) % u64::from(self.size());
        self.start + off as u32
    }
}

/// A message the DMA has started but not finished (the engine's per-call budget ran out).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inflight {
    desc: Descriptor,
    /// Bus address of the message (counter BASE + base_offset, taken when it started).
    src: u64,
    /// Bytes already sent.
    sent: u32,
}

/// A counter's registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counter {
    pub count: u32,
    pub base: u32,
    pub limit: u32,
}

/// What a register write asks the engine to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    None,
    /// Run the injection FIFOs of this mask (bit f = FIFO f, MSB first).
    Inject(u32),
}

/// One endpoint's DMA group register file, DMA DCRs and torus DCRs.
#[derive(Clone, Debug)]
pub(crate) struct DmaRegs {
    pub inj: [Ring; NINJ],
    /// The message at each injection FIFO's HEAD that is partly sent.
    pub inflight: [Option<Inflight>; NINJ],
    pub activated: u32,
    pub inj_threshold: u32,
    pub inj_ctr: [Counter; NCTR],
    pub inj_ctr_enabled: u64,
    pub inj_ctr_zero: u64,
    pub rcv: [Ring; NRCV],
    pub rcv_hdr: Ring,
    /// Threshold-crossed bits of our group's reception FIFOs (`rcv_bit` layout).
    pub rcv_threshold: u32,
    pub rcv_ctr: [Counter; NCTR],
    pub rcv_ctr_enabled: u64,
    pub rcv_ctr_zero: u64,
    pub scratch: [u32; 16],
    pub dcr: [u32; DCR_COUNT as usize],
    pub torus_dcr: [u32; torus::DCR_COUNT as usize],
}

pub(crate) fn is_dma_dcr(dcr: u32) -> bool {
    (DCR_BASE..DCR_BASE + DCR_COUNT).contains(&dcr)
}

pub(crate) fn is_torus_dcr(dcr: u32) -> bool {
    (torus::DCR_BASE..torus::DCR_BASE + torus::DCR_COUNT).contains(&dcr)
}

/// Torus DCR reads: size, coordinates and neighbours are the fabric's; the rest is storage.
pub(crate) fn torus_dcr_read(d: &DmaRegs, k: u8, dcr: u32) -> u32 {
    let n = torus::MAX_ENDPOINTS as u8;
    match dcr - torus::DCR_BASE {
        torus::DCR_SIZE => torus::coord_word(n - 1, 0, 0),
        torus::DCR_COORDS => torus::coord_word(k, 0, 0),
        torus::DCR_NEIGHBOUR_PLUS => torus::coord_word((k + 1) % n, 0, 0),
        torus::DCR_NEIGHBOUR_MINUS => torus::coord_word((k + n - 1) % n, 0, 0),
        o => d.torus_dcr[(o & (torus::DCR_COUNT - 1)) as usize],
    }
}

impl DmaRegs {
    /// The reset state of an endpoint whose window is bus `[base, base + len)`.
    pub fn reset(base: u64, len: u64) -> DmaRegs {
        let mut d = DmaRegs {
            inj: [Ring::default(); NINJ],
            inflight: [None; NINJ],
            activated: 0,
            inj_threshold: 0,
            inj_ctr: [Counter::default(); NCTR],
            inj_ctr_enabled: 0,
            inj_ctr_zero: 0,
            rcv: [Ring::default(); NRCV],
            rcv_hdr: Ring::default(),
            rcv_threshold: 0,
            rcv_ctr: [Counter::default(); NCTR],
            rcv_ctr_enabled: 0,
            rcv_ctr_zero: 0,
            scratch: [0; 16],
            dcr: [0; DCR_COUNT as usize],
            torus_dcr: [0; torus::DCR_COUNT as usize],
        };
        let lo = (base >> 4) as u32;
        let hi = ((base + len - 1) >> 4) as u32;
        d.dcr[DCR_INJ_MIN as usize] = lo;
        d.dcr[DCR_INJ_MIN as usize + 1] = hi;
        d.dcr[DCR_RCV_MIN as usize] = lo;
        d.dcr[DCR_RCV_MIN as usize + 1] = hi;
        d.dcr[DCR_BASE_CONTROL as usize] = BASE_CONTROL_USE_DMA;
        d.dcr[DCR_FATAL_ENABLE as usize] = ERR_RANGE | ERR_DESCRIPTOR;
        let byte = GROUP << 3;
        for i in 0..PIDS * RCV_MAP_DCRS_PER_PID {
            d.dcr[(DCR_RCV_MAP + i) as usize] = byte * 0x0101_0101;
        }
        d
    }

    /// Whether bus `[bus, end)` lies in one range-check window of direction `dir`
    /// (window w: `MIN << 4 ..= (MAX << 4) + 15`).
    pub fn in_range_window(&self, bus: u64, end: u64, dir: Dir) -> bool {
        let first = match dir {
            Dir::Inj => DCR_INJ_MIN,
            Dir::Rcv => DCR_RCV_MIN,
        } as usize;
        (0..RANGE_WINDOWS as usize).any(|w| {
            let lo = u64::from(self.dcr[first + 2 * w]) << 4;
            let hi = (u64::from(self.dcr[first + 2 * w + 1]) << 4) + 16;
            lo <= bus && end <= hi
        })
    }

    fn inj_fifo_enabled(&self) -> u32 {
        self.dcr[(DCR_INJ_FIFO_ENABLE + GROUP) as usize]
    }

    /// Whether the DMA is held in reset (DCR 0xD00 not zero): nothing moves.
    pub fn in_reset(&self) -> bool {
        self.dcr[DCR_RESET as usize] != 0
    }

    fn ctr_word(v: u64, w: u32) -> u32 {
        if w == 0 {
            (v >> 32) as u32
        } else {
            v as u32
        }
    }

    fn word_mask(v: u32, w: u32) -> u64 {
        if w == 0 {
            u64::from(v) << 32
        } else {
            u64::from(v)
        }
    }

    /// The subgroup bits (`group * 8 + c / 8`) of the counters set in `zero`.
    fn ctr_group_status(zero: u64) -> u32 {
        (0..8usize)
            .filter(|&s| (zero >> (56 - 8 * s)) & 0xFF != 0)
            .fold(0, |a, s| a | subgroup_bit(8 * s))
    }

    /// Fills the DMA words of a register mirror (`proto::mirror`): what [`DmaRegs::read`]
    /// answers at each mirrored offset.
    pub fn fill_mirror(&self, out: &mut [u32; crate::proto::mirror::WORDS]) {
        use crate::proto::mirror as m;
        for (o, r) in out[m::INJ_HEAD..].iter_mut().zip(&self.inj) {
            *o = r.get(FIFO_HEAD);
        }
        for (o, r) in out[m::RCV_TAIL..].iter_mut().zip(&self.rcv) {
            *o = r.get(FIFO_TAIL);
        }
        out[m::RCV_HDR_TAIL] = self.rcv_hdr.get(FIFO_TAIL);
        out[m::RCV_HIT_ZERO] = Self::ctr_word(self.rcv_ctr_zero, 0);
        out[m::RCV_HIT_ZERO + 1] = Self::ctr_word(self.rcv_ctr_zero, 1);
        for (o, c) in out[m::RCV_COUNT..].iter_mut().zip(&self.rcv_ctr) {
            *o = c.count;
        }
    }

    /// A register read; `None` for a reserved or unaligned offset.
    pub fn read(&self, off: u32) -> Option<u32> {
        if off & 3 != 0 || off >= GROUP_SIZE as u32 {
            return None;
        }
        let reg = off % FIFO_STRIDE;
        let idx = (off % 0x400 / FIFO_STRIDE) as usize;
        Some(match off {
            0x000..=0x1FF => self.inj[idx % NINJ].get(reg),
            INJ_NOT_EMPTY => (0..NINJ)
                .filter(|&f| self.inj[f].head != self.inj[f].tail)
                .fold(0, |a, f| a | bit(f as u32)),
            INJ_AVAILABLE => (0..NINJ)
                .filter(|&f| self.inj[f].valid() && self.inj[f].free() >= 2)
                .fold(0, |a, f| a | bit(f as u32)),
            INJ_THRESHOLD => self.inj_threshold,
            INJ_ACTIVATED => self.activated,
            INJ_THRESHOLD_CLEAR | INJ_ACTIVATE | INJ_DEACTIVATE => 0,
            INJ_CTR_ENABLED | 0x304 => Self::ctr_word(self.inj_ctr_enabled, (off >> 2) & 1),
            INJ_CTR_HIT_ZERO | 0x324 => Self::ctr_word(self.inj_ctr_zero, (off >> 2) & 1),
            INJ_CTR_ENABLE | 0x30C | INJ_CTR_DISABLE | 0x314 | INJ_CTR_CLEAR_HIT_ZERO | 0x32C => 0,
            INJ_CTR_GRP_STATUS => Self::ctr_group_status(self.inj_ctr_zero),
            0x400..=0x7FF => {
                let c = &self.inj_ctr[((off - INJ_CTR) / FIFO_STRIDE) as usize % NCTR];
                match reg {
                    CTR_COUNT => c.count,
                    CTR_INCREMENT => 0,
                    CTR_BASE => c.base,
                    _ => return None,
                }
            }
            0x800..=0x87F => self.rcv[idx % NRCV].get(reg),
            0x880..=0x88F => self.rcv_hdr.get(reg),
            0x900..=0x93F => self.scratch[((off - SCRATCH) / 4) as usize % 16],
            RCV_NOT_EMPTY => (0..NRCV)
                .filter(|&f| self.rcv[f].head != self.rcv[f].tail)
                .fold(0, |a, f| a | rcv_bit(f)),
            RCV_AVAILABLE => (0..NRCV)
                .filter(|&f| self.rcv[f].valid() && self.rcv[f].free() > 0)
                .fold(0, |a, f| a | rcv_bit(f)),
            RCV_THRESHOLD => self.rcv_threshold,
            0xA04 | 0xA0C | 0xA14 | RCV_THRESHOLD_CLEAR | 0xA1C => 0,
            RCV_CTR_ENABLED | 0xB04 => Self::ctr_word(self.rcv_ctr_enabled, (off >> 2) & 1),
            RCV_CTR_HIT_ZERO | 0xB1C => Self::ctr_word(self.rcv_ctr_zero, (off >> 2) & 1),
            RCV_CTR_ENABLE | 0xB0C | RCV_CTR_DISABLE | 0xB14 | RCV_CTR_CLEAR_HIT_ZERO | 0xB24 => 0,
            RCV_CTR_GRP_STATUS => Self::ctr_group_status(self.rcv_ctr_zero),
            0xC00..=0xFFF => {
                let c = &self.rcv_ctr[((off - RCV_CTR) / FIFO_STRIDE) as usize % NCTR];
                match reg {
                    CTR_COUNT => c.count,
                    CTR_INCREMENT => 0,
                    CTR_BASE => c.base,
                    _ => c.limit,
                }
            }
            _ => return None,
        })
    }

    /// A register write; `None` for a reserved or unaligned offset. Writes to read-only
    /// status registers are ignored.
    pub fn write(&mut self, off: u32, v: u32) -> Option<Effect> {
        if off & 3 != 0 || off >= GROUP_SIZE as u32 {
            return None;
        }
        let reg = off % FIFO_STRIDE;
        let idx = (off % 0x400 / FIFO_STRIDE) as usize;
        let w = (off >> 2) & 1;
        match off {
            0x000..=0x1FF => {
                self.inj[idx % NINJ].set(reg, v);
                if reg == FIFO_TAIL {
                    return Some(Effect::Inject(bit(idx as u32)));
                }
                // START, END or HEAD moved: a partly sent message is abandoned.
                self.inflight[idx % NINJ] = None;
            }
            INJ_NOT_EMPTY | INJ_AVAILABLE | INJ_THRESHOLD | INJ_ACTIVATED => {}
            INJ_THRESHOLD_CLEAR => self.inj_threshold &= !v,
            INJ_ACTIVATE => {
                self.activated |= v;
                return Some(Effect::Inject(v));
            }
            INJ_DEACTIVATE => self.activated &= !v,
            INJ_CTR_ENABLED | 0x304 | INJ_CTR_HIT_ZERO | 0x324 | INJ_CTR_GRP_STATUS => {}
            INJ_CTR_ENABLE | 0x30C => self.inj_ctr_enabled |= Self::word_mask(v, w),
            INJ_CTR_DISABLE | 0x314 => self.inj_ctr_enabled &= !Self::word_mask(v, w),
            INJ_CTR_CLEAR_HIT_ZERO | 0x32C => self.inj_ctr_zero &= !Self::word_mask(v, w),
            0x400..=0x7FF => {
                let c = &mut self.inj_ctr[((off - INJ_CTR) / FIFO_STRIDE) as usize % NCTR];
                match reg {
                    CTR_COUNT => c.count = v,
                    CTR_INCREMENT => c.count = c.count.wrapping_add(v),
                    CTR_BASE => c.base = v,
                    _ => return None,
                }
            }
            0x800..=0x87F => self.rcv[idx % NRCV].set(reg, v),
            0x880..=0x88F => self.rcv_hdr.set(reg, v),
            0x900..=0x93F => self.scratch[((off - SCRATCH) / 4) as usize % 16] = v,
            RCV_NOT_EMPTY | 0xA04 | RCV_AVAILABLE | 0xA0C | RCV_THRESHOLD | 0xA14 | 0xA1C => {}
            RCV_THRESHOLD_CLEAR => self.rcv_threshold &= !v,
            RCV_CTR_ENABLED | 0xB04 | RCV_CTR_HIT_ZERO | 0xB1C | RCV_CTR_GRP_STATUS => {}
            RCV_CTR_ENABLE | 0xB0C => self.rcv_ctr_enabled |= Self::word_mask(v, w),
            RCV_CTR_DISABLE | 0xB14 => self.rcv_ctr_enabled &= !Self::word_mask(v, w),
            RCV_CTR_CLEAR_HIT_ZERO | 0xB24 => self.rcv_ctr_zero &= !Self::word_mask(v, w),
            0xC00..=0xFFF => {
                let c = &mut self.rcv_ctr[((off - RCV_CTR) / FIFO_STRIDE) as usize % NCTR];
                match reg {
                    CTR_COUNT => c.count = v,
                    CTR_INCREMENT => c.count = c.count.wrapping_add(v),
                    CTR_BASE => c.base = v,
                    _ => c.limit = v,
                }
            }
            _ => return None,
        }
        Some(Effect::None)
    }

    /// A DMA DCR read (`dcr` in 0xD00..0xDFF).
    pub fn dcr_read(&self, dcr: u32) -> u32 {
        self.dcr[((dcr - DCR_BASE) % DCR_COUNT) as usize]
    }

    /// A DMA DCR write; returns whether injection FIFOs may now run (enable or reset
    /// changed). Fatal status is write-1-to-clear; the bad address is read-only.
    pub fn dcr_write(&mut self, dcr: u32, v: u32) -> bool {
        let o = (dcr - DCR_BASE) % DCR_COUNT;
        match o {
            DCR_FATAL_STATUS => self.dcr[o as usize] &= !v,
            DCR_BAD_ADDRESS => {}
            _ => self.dcr[o as usize] = v,
        }
        o == DCR_RESET || o == DCR_INJ_FIFO_ENABLE + GROUP
    }

    /// A torus DCR write: size, coordinates and neighbours are read-only.
    pub fn torus_dcr_write(&mut self, dcr: u32, v: u32) {
        let o = (dcr - torus::DCR_BASE) % torus::DCR_COUNT;
        if !matches!(
            o,
            torus::DCR_SIZE
                | torus::DCR_COORDS
                | torus::DCR_NEIGHBOUR_PLUS
                | torus::DCR_NEIGHBOUR_MINUS
        ) {
            self.torus_dcr[o as usize] = v;
        }
    }

    /// Reports every BIC line the DMA asserts.
    pub fn irqs(&self, set: &mut impl FnMut(u32)) {
        let d = |o: u32| self.dcr[o as usize];
        if d(DCR_FATAL_STATUS) & d(DCR_FATAL_ENABLE) != 0 {
            set(IRQ_FATAL);
        }
        if self.inj_threshold & d(DCR_INJ_FIFO_IRQ_EN + GROUP) != 0 {
            set(IRQ_INJ_FIFO_THRESHOLD + GROUP);
        }
        let types = d(DCR_RCV_FIFO_TYPE);
        for t in 0..2u32 {
            let of_type = (0..NRCV)
                .filter(|&f| (types & rcv_bit(f) != 0) == (t == 1))
                .fold(0, |a, f| a | rcv_bit(f));
            if self.rcv_threshold & of_type & d(DCR_RCV_FIFO_IRQ_EN + t) != 0 {
                set(IRQ_RCV_FIFO_THRESHOLD + t);
            }
        }
        let inj = Self::ctr_group_status(self.inj_ctr_zero);
        let rcv = Self::ctr_group_status(self.rcv_ctr_zero);
        for i in 0..4 {
            if inj & d(DCR_INJ_CTR_IRQ_EN + i) != 0 {
                set(IRQ_INJ_CTR_ZERO + i);
            }
            if rcv & d(DCR_RCV_CTR_IRQ_EN + i) != 0 {
                set(IRQ_RCV_CTR_ZERO + i);
            }
        }
    }
}

/// A decoded injection descriptor.
#[derive(Clone, Copy, Debug)]
struct Descriptor {
    flags: u32,
    ctr_id: u32,
    base_offset: u32,
    len: u32,
    hw: [u32; 2],
    sw: [u32; 2],
}

impl Descriptor {
    fn parse(b: &[u8; DESC_BYTES as usize]) -> Descriptor {
        let w = |i: usize| u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        Descriptor {
            flags: w(0),
            ctr_id: w(1) & DESC_CTR_ID_MASK,
            base_offset: w(2),
            len: w(3),
            hw: [w(4), w(5)],
            sw: [w(6), w(7)],
        }
    }
}

/// Bits of a memory-FIFO packet's software word 3 that name its sender: bgnet's torus
/// framing's `src_key` (`X << 16 | Y << 8 | Z`, below the sender's `conn_id:8`), which
/// Linux's torus driver, the SPI layer's reassembly and the MPI layer's `from` read. The
/// engine stamps them from the injecting endpoint's coordinates, whatever the descriptor
/// said (issue 18: a tenant cannot send as another).
pub const SRC_KEY_MASK: u32 = 0x00FF_FFFF;

/// The source key of torus coordinates (what [`SRC_KEY_MASK`] holds).
pub const fn src_key(c: crate::Coords) -> u32 {
    (c.x as u32) << 16 | (c.y as u32) << 8 | c.z as u32
}

/// The 16-byte packet header of a packet with `n` payload bytes at `put` in its message,
/// from the sender with source key `src`. A memory-FIFO packet's word 3 carries `src` in
/// its [`SRC_KEY_MASK`] bits; a direct put's word 3 (the receiver's counter) is the
/// descriptor's.
fn packet_header(d: &Descriptor, n: u32, put: u32, src: u32) -> [u8; PKT_HDR_BYTES as usize] {
    let chunks = (PKT_HDR_BYTES + n).div_ceil(CHUNK_BYTES).max(1) - 1;
    let hw0 = (d.hw[0] & !(HW_CHUNKS_MASK << HW_CHUNKS_SHIFT)) | (chunks << HW_CHUNKS_SHIFT);
    let word3 = if d.hw[0] & HW_DM != 0 || d.flags & DESC_LOCAL_MEMCOPY != 0 {
        d.sw[1]
    } else {
        (d.sw[1] & !SRC_KEY_MASK) | (src & SRC_KEY_MASK)
    };
    let mut h = [0u8; PKT_HDR_BYTES as usize];
    h[0..4].copy_from_slice(&hw0.to_be_bytes());
    h[4..8].copy_from_slice(&d.hw[1].to_be_bytes());
    h[8..12].copy_from_slice(&put.to_be_bytes());
    h[12..16].copy_from_slice(&word3.to_be_bytes());
    h
}

impl<M: Memory, L: Link> Fabric<M, L> {
    /// Sets error bits in `ep`'s fatal status (and the bad address for a range error).
    fn dma_error(&mut self, ep: EpId, bits: u32, kind: DiagKind, addr: u64, value: u32) {
        if let Some(e) = self.slot_mut(ep) {
            e.dma.dcr[DCR_FATAL_STATUS as usize] |= bits;
            if bits & ERR_RANGE != 0 {
                e.dma.dcr[DCR_BAD_ADDRESS as usize] = (addr >> 4) as u32;
            }
        }
        self.note_error(ep, kind, addr, value);
    }

    /// Runs the injection FIFOs of `ep` in `mask` that are enabled and activated.
    pub(crate) fn run_injection(&mut self, ep: EpId, mask: u32) {
        for f in 0..NINJ {
            if mask & bit(f as u32) != 0 {
                self.run_fifo(ep, f);
            }
        }
    }

    fn run_fifo(&mut self, ep: EpId, f: usize) {
        let Some(e) = self.slot(ep) else { return };
        let b = bit(f as u32);
        if e.dma.in_reset() || e.dma.inj_fifo_enabled() & b == 0 || e.dma.activated & b == 0 {
            return;
        }
        let ring = e.dma.inj[f];
        if ring.head == ring.tail {
            return;
        }
        if !ring.valid() {
            self.dma_error(ep, ERR_DESCRIPTOR, DiagKind::FifoPointers, 0, f as u32);
            return;
        }
        let desc_quads = DESC_BYTES / 16;
        // At most one pass over the ring: HEAD reaches TAIL by then.
        for _ in 0..=ring.size() / desc_quads {
            let Some(e) = self.slot_mut(ep) else { return };
            let ring = e.dma.inj[f];
            if ring.head == ring.tail || !ring.valid() {
                break;
            }
            let resumed = e.dma.inflight[f].take();
            if self.budget == 0 || (resumed.is_none() && self.desc_budget == 0) {
                if let Some(e) = self.slot_mut(ep) {
                    e.dma.inflight[f] = resumed;
                }
                self.pending |= 1 << ep.0;
                break;
            }
            let started = match resumed {
                Some(i) => Some(i),
                None => {
                    if ring.end - ring.head < desc_quads {
                        self.dma_error(ep, ERR_DESCRIPTOR, DiagKind::FifoPointers, 0, f as u32);
                        break;
                    }
                    self.desc_budget -= 1;
                    let at = u64::from(ring.head) << 4;
                    let mut raw = [0u8; DESC_BYTES as usize];
                    if let Err(bad) = self.read_bus(ep, at, &mut raw) {
                        self.dma_error(ep, ERR_RANGE, DiagKind::RangeCheck, bad, f as u32);
                        break;
                    }
                    self.start_message(ep, Descriptor::parse(&raw))
                }
            };
            if let Some(mut i) = started {
                if !self.send_message(ep, &mut i) {
                    if let Some(e) = self.slot_mut(ep) {
                        e.dma.inflight[f] = Some(i);
                    }
                    self.pending |= 1 << ep.0;
                    break;
                }
            }
            let Some(e) = self.slot_mut(ep) else { return };
            let r = &mut e.dma.inj[f];
            if r.valid() {
                r.head = r.advance(r.head, desc_quads);
            }
            e.dma.inj_threshold |= b;
        }
        self.touch(ep);
    }

    /// Checks a descriptor; `None` (after setting the error) if it sends nothing.
    fn start_message(&mut self, ep: EpId, d: Descriptor) -> Option<Inflight> {
        if d.flags & DESC_PREFETCH_ONLY != 0 {
            return None;
        }
        if d.ctr_id / COUNTERS != GROUP {
            self.dma_error(ep, ERR_DESCRIPTOR, DiagKind::Descriptor, 0, d.ctr_id);
            return None;
        }
        let c = (d.ctr_id % COUNTERS) as usize;
        let e = self.slot(ep)?;
        let src = (u64::from(e.dma.inj_ctr[c].base) << 4) + u64::from(d.base_offset);
        if self.check(ep, src, u64::from(d.len), Dir::Inj).is_none() {
            self.dma_error(ep, ERR_RANGE, DiagKind::RangeCheck, src, d.len);
            return None;
        }
        Some(Inflight {
            desc: d,
            src,
            sent: 0,
        })
    }

    /// Sends the rest of a message; `false` if the call's budget ran out first (`i.sent`
    /// says how far it got).
    fn send_message(&mut self, ep: EpId, i: &mut Inflight) -> bool {
        let d = &i.desc;
        let c = (d.ctr_id % COUNTERS) as usize;
        let src = i.src;
        let memcopy = d.flags & DESC_LOCAL_MEMCOPY != 0;
        let direct = memcopy || d.hw[0] & HW_DM != 0;
        let hop = if memcopy {
            Hop::Local(ep)
        } else {
            let dest = crate::Coords {
                x: (d.hw[0] & HW_X_MASK) as u8,
                y: (d.hw[1] >> HW_Y_SHIFT) as u8,
                z: (d.hw[1] >> HW_Z_SHIFT) as u8,
            };
            self.link.route(dest)
        };
        if hop == Hop::Outside {
            self.dma_error(ep, ERR_DESCRIPTOR, DiagKind::Descriptor, 0, d.hw[0]);
            return true;
        }
        let max = if memcopy {
            PKT_MAX_PAYLOAD
        } else {
            (((d.hw[0] >> HW_CHUNKS_SHIFT) & HW_CHUNKS_MASK) + 1) * CHUNK_BYTES - PKT_HDR_BYTES
        };
        // The sender's identity as every receiver sees it: its own coordinates.
        let me = src_key(crate::FabricApi::coords(self, ep));
        let mut off = i.sent;
        if direct {
            if let Hop::Local(to) = hop {
                // Inside the node a direct put is one copy, not a packet at a time.
                off += self.put_local_bulk(ep, to, d, src + u64::from(off), off, max);
                if off >= d.len && off > 0 {
                    return true;
                }
            }
        }
        loop {
            let n = (d.len - off).min(max);
            if n == 0 && (off > 0 || direct) {
                break;
            }
            if self.budget == 0 {
                i.sent = off;
                return false;
            }
            self.budget = self.budget.saturating_sub(u64::from(n.max(PKT_HDR_BYTES)));
            let mut buf = [0u8; PKT_MAX_PAYLOAD as usize];
            let payload = &mut buf[..n as usize];
            if let Err(bad) = self.read_bus(ep, src + u64::from(off), payload) {
                self.dma_error(ep, ERR_RANGE, DiagKind::RangeCheck, bad, n);
                return true;
            }
            let put = d.sw[0].wrapping_add(off);
            match hop {
                Hop::Local(to) if direct => {
                    let ctr = (d.sw[1] >> SW_RCV_CTR_SHIFT) & DESC_CTR_ID_MASK;
                    self.deliver_put(ep, to, ctr, put, payload);
                }
                Hop::Local(to) => self.deliver_fifo(ep, to, &packet_header(d, n, put, me), payload),
                Hop::Remote(dir) => {
                    let mut pkt = [0u8; (PKT_HDR_BYTES + PKT_MAX_PAYLOAD) as usize];
                    pkt[..16].copy_from_slice(&packet_header(d, n, put, me));
                    pkt[16..16 + n as usize].copy_from_slice(payload);
                    if self.link.send(dir, &pkt[..16 + n as usize]).is_err() {
                        self.note_drop(ep, DiagKind::NoRoute, 0, u32::from(dir));
                    }
                }
                Hop::Outside => return true,
            }
            if let Some(e) = self.slot_mut(ep) {
                e.stats.dma_packets_sent += 1;
                e.stats.dma_bytes_sent += u64::from(n);
                let ctr = &mut e.dma.inj_ctr[c];
                ctr.count = ctr.count.wrapping_sub(n);
                if ctr.count == 0 {
                    e.dma.inj_ctr_zero |= bit64(c);
                }
            }
            off += n;
            if off >= d.len {
                break;
            }
        }
        true
    }

    /// Whether `from` may send to `to`; if not, sets `ERR_PUT_REFUSED` in `from`'s fatal
    /// status and counts the drop there.
    fn reach_or_refuse(&mut self, from: EpId, to: EpId) -> bool {
        if self.slot(to).is_none() || self.may_reach(from, to) {
            return true;
        }
        self.dma_error(
            from,
            ERR_PUT_REFUSED,
            DiagKind::Unreachable,
            0,
            u32::from(to.0),
        );
        if let Some(e) = self.slot_mut(from) {
            e.stats.drops += 1;
        }
        false
    }

    /// Whether `to`'s reception counter `c` takes direct puts from `from`
    /// (`DCR_PUT_FROM + c`): its own local copies always, others when named or allowed as
    /// any reachable endpoint.
    fn put_allowed(&self, from: EpId, to: EpId, c: usize) -> bool {
        if from == to {
            return true;
        }
        let Some(e) = self.slot(to) else { return false };
        let v = e.dma.dcr[DCR_PUT_FROM as usize + c];
        let me = crate::FabricApi::coords(self, from);
        let key = torus::coord_word(me.x, me.y, me.z);
        v & PUT_FROM_ANY != 0 || (v & PUT_FROM_ONE != 0 && v & !0xFF == key)
    }

    /// Delivers a memory-FIFO packet from `from` to `to`.
    fn deliver_fifo(&mut self, from: EpId, to: EpId, hdr: &[u8; 16], payload: &[u8]) {
        if !self.reach_or_refuse(from, to) {
            return;
        }
        let Some(e) = self.slot(to) else {
            self.note_drop(from, DiagKind::NoRoute, 0, u32::from(to.0));
            return;
        };
        if e.dma.in_reset() {
            self.note_drop(to, DiagKind::RcvConfig, 0, DCR_BASE + DCR_RESET);
            return;
        }
        let hw0 = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let pid = u32::from(hw0 & HW_PID0 != 0) << 1 | u32::from(hw0 & HW_PID1 != 0);
        let map =
            e.dma.dcr[(DCR_RCV_MAP + RCV_MAP_DCRS_PER_PID * pid + RCV_MAP_LOCAL_WORD) as usize];
        let byte = (map >> RCV_MAP_LOCAL_SHIFT) & 0xFF;
        let f = (byte & 7) as usize;
        if byte >> 3 != GROUP || e.dma.dcr[DCR_RCV_FIFO_ENABLE as usize] & rcv_bit(f) == 0 {
            self.note_drop(to, DiagKind::RcvConfig, 0, byte);
            return;
        }
        let ring = e.dma.rcv[f];
        if !ring.valid() {
            self.dma_error(to, ERR_DESCRIPTOR, DiagKind::FifoPointers, 0, f as u32);
            self.note_drop(to, DiagKind::FifoPointers, 0, f as u32);
            return;
        }
        let slot = (PKT_HDR_BYTES + payload.len() as u32).div_ceil(CHUNK_BYTES) * CHUNK_BYTES;
        if slot / 16 > ring.free() {
            self.dma_error(to, ERR_RCV_OVERFLOW, DiagKind::RcvOverflow, 0, f as u32);
            self.note_drop(to, DiagKind::RcvOverflow, 0, f as u32);
            return;
        }
        let mut buf = [0u8; 256];
        buf[..16].copy_from_slice(hdr);
        buf[16..16 + payload.len()].copy_from_slice(payload);
        let data = &buf[..slot as usize];
        // The slot may wrap at END: the part that fits, then the rest at START. Both parts
        // are checked before either is written.
        let room = (u64::from(ring.end - ring.tail) * 16).min(u64::from(slot)) as usize;
        let parts = [
            (u64::from(ring.tail) << 4, &data[..room]),
            (u64::from(ring.start) << 4, &data[room..]),
        ];
        for (at, part) in parts {
            if !part.is_empty() && self.check(to, at, part.len() as u64, Dir::Rcv).is_none() {
                self.dma_error(to, ERR_RANGE, DiagKind::RangeCheck, at, f as u32);
                self.note_drop(to, DiagKind::RangeCheck, at, f as u32);
                return;
            }
        }
        for (at, part) in parts {
            if part.is_empty() {
                continue;
            }
            if let Err(bad) = self.write_bus(to, at, part) {
                self.dma_error(to, ERR_RANGE, DiagKind::RangeCheck, bad, f as u32);
                self.note_drop(to, DiagKind::RangeCheck, bad, f as u32);
                return;
            }
        }
        let Some(e) = self.slot_mut(to) else { return };
        let r = &mut e.dma.rcv[f];
        r.tail = r.advance(r.tail, slot / 16);
        let used = r.used();
        let t = u32::from(e.dma.dcr[DCR_RCV_FIFO_TYPE as usize] & rcv_bit(f) != 0);
        if used > e.dma.dcr[(DCR_RCV_THRESHOLD0 + t) as usize] {
            e.dma.rcv_threshold |= rcv_bit(f);
        }
        e.stats.dma_packets_received += 1;
        e.stats.dma_bytes_received += payload.len() as u64;
        self.touch(to);
    }

    /// A local direct put of message `d` from byte `off` (at bus address `src`) as one copy
    /// of as many whole packets as the call's budget allows (all the rest if it allows),
    /// with the outcome of delivering them one by one: the same counters (both sides'
    /// packets and bytes, the injection and reception counters, hit-zero bits), the same
    /// destination bytes. Returns the bytes moved; 0 whenever anything would make a packet
    /// fail (refused, out of any range, counter off, overlapping source and destination):
    /// then the packet loop delivers them and reports the error as it does.
    fn put_local_bulk(
        &mut self,
        from: EpId,
        to: EpId,
        d: &Descriptor,
        src: u64,
        off: u32,
        max: u32,
    ) -> u32 {
        let left = d.len - off;
        let budget = u32::try_from(self.budget).unwrap_or(u32::MAX);
        let n = if left <= budget {
            left
        } else {
            budget / max * max
        };
        if n == 0 || max == 0 {
            return 0;
        }
        let ctr_id = (d.sw[1] >> SW_RCV_CTR_SHIFT) & DESC_CTR_ID_MASK;
        if ctr_id / COUNTERS != GROUP || self.slot(to).is_none() || !self.may_reach(from, to) {
            return 0;
        }
        let c = (ctr_id % COUNTERS) as usize;
        if !self.put_allowed(from, to, c) {
            return 0;
        }
        let Some(e) = self.slot(to) else { return 0 };
        if e.dma.in_reset() || e.dma.rcv_ctr_enabled & bit64(c) == 0 {
            return 0;
        }
        let ctr = e.dma.rcv_ctr[c];
        let lo = u64::from(ctr.base) << 4;
        let hi = (u64::from(ctr.limit) << 4) + 16;
        let at = lo + u64::from(d.sw[0].wrapping_add(off));
        if at + u64::from(n) > hi {
            return 0;
        }
        let (Some(from_off), Some(to_off)) = (
            self.check(from, src, u64::from(n), crate::Dir::Inj),
            self.check(to, at, u64::from(n), crate::Dir::Rcv),
        ) else {
            return 0;
        };
        if from == to && from_off < to_off + u64::from(n) && to_off < from_off + u64::from(n) {
            return 0;
        }
        if self
            .mem
            .copy(from, from_off, to, to_off, u64::from(n))
            .is_err()
        {
            // Part may have landed: the packet loop redoes it and reports the error.
            return 0;
        }
        let packets = u64::from(n.div_ceil(max));
        self.budget = self.budget.saturating_sub(u64::from(n));
        let ic = (d.ctr_id % COUNTERS) as usize;
        if let Some(e) = self.slot_mut(from) {
            e.stats.dma_packets_sent += packets;
            e.stats.dma_bytes_sent += u64::from(n);
            let ctr = &mut e.dma.inj_ctr[ic];
            if hits_zero(ctr.count, n, max) {
                e.dma.inj_ctr_zero |= bit64(ic);
            }
            ctr.count = ctr.count.wrapping_sub(n);
        }
        if let Some(e) = self.slot_mut(to) {
            let ctr = &mut e.dma.rcv_ctr[c];
            if hits_zero(ctr.count, n, max) {
                e.dma.rcv_ctr_zero |= bit64(c);
            }
            ctr.count = ctr.count.wrapping_sub(n);
            e.stats.dma_packets_received += packets;
            e.stats.dma_bytes_received += u64::from(n);
        }
        self.touch(to);
        n
    }

    /// Delivers a direct-put packet from `from` into `to`'s reception counter `ctr_id`.
    fn deliver_put(&mut self, from: EpId, to: EpId, ctr_id: u32, put: u32, payload: &[u8]) {
        if !self.reach_or_refuse(from, to) {
            return;
        }
        if self.slot(to).is_none() {
            self.note_drop(from, DiagKind::NoRoute, 0, u32::from(to.0));
            return;
        }
        if ctr_id / COUNTERS != GROUP {
            self.dma_error(from, ERR_DESCRIPTOR, DiagKind::Descriptor, 0, ctr_id);
            self.note_drop(to, DiagKind::RcvConfig, 0, ctr_id);
            return;
        }
        let c = (ctr_id % COUNTERS) as usize;
        if !self.put_allowed(from, to, c) {
            let x = u64::from(crate::FabricApi::coords(self, from).x);
            self.dma_error(from, ERR_PUT_REFUSED, DiagKind::PutRefused, x, ctr_id);
            self.note_drop(to, DiagKind::PutRefused, x, ctr_id);
            return;
        }
        let Some(e) = self.slot(to) else { return };
        if e.dma.in_reset() || e.dma.rcv_ctr_enabled & bit64(c) == 0 {
            self.note_drop(to, DiagKind::RcvConfig, 0, ctr_id);
            return;
        }
        let ctr = e.dma.rcv_ctr[c];
        let lo = u64::from(ctr.base) << 4;
        let hi = (u64::from(ctr.limit) << 4) + 16;
        let at = lo + u64::from(put);
        if at + payload.len() as u64 > hi {
            self.dma_error(from, ERR_RANGE, DiagKind::RangeCheck, at, ctr_id);
            self.note_drop(to, DiagKind::RcvConfig, at, ctr_id);
            return;
        }
        if let Err(bad) = self.write_bus(to, at, payload) {
            self.dma_error(to, ERR_RANGE, DiagKind::RangeCheck, bad, ctr_id);
            self.note_drop(to, DiagKind::RangeCheck, bad, ctr_id);
            return;
        }
        let Some(e) = self.slot_mut(to) else { return };
        let ctr = &mut e.dma.rcv_ctr[c];
        ctr.count = ctr.count.wrapping_sub(payload.len() as u32);
        if ctr.count == 0 {
            e.dma.rcv_ctr_zero |= bit64(c);
        }
        e.stats.dma_packets_received += 1;
        e.stats.dma_bytes_received += payload.len() as u64;
        self.touch(to);
    }
}

/// Whether a counter at `count` reaches exactly zero after one of the packets of `n` bytes
/// (`max` bytes each, the last one shorter) that are taken from it one at a time: what
/// sets its hit-zero bit when a packet at a time takes them.
fn hits_zero(count: u32, n: u32, max: u32) -> bool {
    count != 0 && count <= n && (count == n || count.is_multiple_of(max))
}
