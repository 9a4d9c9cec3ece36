//! The SPI-like layer (after IBM's BG/P DMA SPI, written afresh): one DMA group's injection
//! FIFO, injection counter and reception FIFO laid out in the client's window, memory-FIFO
//! messages in bgnet's torus framing (bgp-interconnect.md 2.4), direct put, and collective
//! packet headers. Every register number comes from `kestrel_bgp`.
//!
//! Window layout ([`layout`]): descriptors at 0, the send buffer at 4 KiB, the reception
//! ring at 16 KiB, free for the program from 48 KiB ([`layout::USER`]). The engine runs an
//! injection inside the TAIL write (ADR 0018), so when [`DmaGroup::send`] returns, the
//! descriptor and the send buffer are free again.
//!
//! Reception: packets land in the ring as slots of the 16-byte header and the payload padded
//! to 32-byte chunks (the header's Chunks field); [`DmaGroup::receive`] walks them, and
//! [`Reassembly`] puts messages back together by source id and Put_Offset, the length coming
//! from the link header at the start of every message. The FIFO's threshold interrupt
//! (type 0, threshold 0) is enabled, so a packet for us changes our interrupt lines and the
//! fabric service sends us an event.

#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

use kestrel_bgp::coll;
use kestrel_bgp::dma::{self, inj_ctr, inj_fifo, rcv_fifo};
use kestrel_fabric::{EpId, FabricApi};

/// Offsets in the window.
pub mod layout {
    /// Injection descriptors (32 bytes each).
    pub const INJ: u32 = 0;
    /// Descriptors in the injection FIFO.
    pub const INJ_ENTRIES: u32 = 64;
    /// The send buffer.
    pub const TX: u32 = 0x1000;
    /// Its size: the longest message.
    pub const TX_BYTES: u32 = 0x3000;
    /// The reception ring.
    pub const RX: u32 = 0x4000;
    /// Its size (128 full-size slots).
    pub const RX_BYTES: u32 = 0x8000;
    /// First byte the SPI layer does not use.
    pub const USER: u32 = 0xC000;
    /// The smallest window the layer works in.
    pub const MIN_WINDOW: u32 = 0x10000;
    /// The most each of the MPI core's two rendezvous stages (above [`USER`]) takes.
    pub const STAGE_MAX: u32 = 512 << 10;
    /// Window offset from which on neither this layer nor the MPI core's stages use the
    /// window: a program may keep its own memory there (its heap), and the MPI core then
    /// puts large messages straight from it and into it (`FabricApi::window_offset_of`).
    pub const FREE: u32 = 2 << 20;
    const _: () = assert!(USER + 2 * STAGE_MAX <= FREE);
}

/// The injection FIFO, injection counter, reception FIFO and PID used (Kittyhawk's and
/// kestrel_torus.ko's choice, bgp-interconnect.md 2.3).
pub const INJ_FIFO: u32 = 31;
pub const INJ_COUNTER: u32 = 63;
pub const RCV_FIFO: u32 = 7;
pub const PID: u32 = 3;
/// Payload bytes per packet.
pub const PKT_PAYLOAD: usize = dma::PKT_MAX_PAYLOAD as usize;
/// Bytes of the torus link header (bgnet framing) at the start of every message.
pub const LINK_HDR: usize = dma::LINK_HDR_BYTES as usize;
/// The longest message, link header included.
pub const MAX_MSG: usize = dma::MSG_MAX_PKTS as usize * PKT_PAYLOAD;
const _: () = assert!(MAX_MSG <= layout::TX_BYTES as usize);

const fn bit(i: u32) -> u32 {
    0x8000_0000 >> (i % 32)
}

/// Torus coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coords {
    pub x: u8,
    pub y: u8,
    pub z: u8,
}

impl Coords {
    /// bgnet's source key: X << 16 | Y << 8 | Z.
    pub const fn key(self) -> u32 {
        (self.x as u32) << 16 | (self.y as u32) << 8 | self.z as u32
    }
    /// The coordinates of a torus-style MAC (06:RR:MM:X:Y:Z).
    pub const fn of_mac(mac: &[u8; 6]) -> Coords {
        Coords {
            x: mac[3],
            y: mac[4],
            z: mac[5],
        }
    }
}

/// A received packet: its header fields and payload (the whole slot after the header).
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    pub hw0: u32,
    pub put_offset: u32,
    /// Software header word 3 (memory FIFO: bgnet's `conn_id:8 | src_key:24`; the fabric
    /// stamps `src_key` with the true sender's coordinates, so it names who sent it).
    pub word3: u32,
    pub payload: &'a [u8],
}

/// One endpoint's DMA group as the SPI layer runs it.
pub struct DmaGroup {
    pub ep: EpId,
    /// Bus address of window offset 0.
    pub bus: u64,
    /// This endpoint's coordinates.
    pub me: Coords,
    inj_tail: u32,
    rx_head: u32,
    conn: u8,
}

fn q(bus: u64) -> u32 {
    (bus >> 4) as u32
}

impl DmaGroup {
    /// A group not set up yet (endpoint 0, bus 0): an empty value until
    /// [`DmaGroup::setup`].
    pub const fn unset() -> DmaGroup {
        DmaGroup {
            ep: EpId(0),
            bus: 0,
            me: Coords { x: 0, y: 0, z: 0 },
            inj_tail: 0,
            rx_head: 0,
            conn: 0,
        }
    }

    /// Programs endpoint `ep`'s group (window at bus `bus`, coordinates `me`): the
    /// injection FIFO and counter, the reception FIFO with every PID mapped to it and its
    /// threshold interrupt enabled.
    pub fn setup<P: FabricApi>(
        p: &mut P,
        ep: EpId,
        bus: u64,
        me: Coords,
    ) -> Result<DmaGroup, P::Error> {
        let g = dma::VM_GROUP;
        let d = |o: u32| dma::DCR_BASE + o;
        p.dcr_write(ep, d(dma::DCR_BASE_CONTROL), dma::BASE_CONTROL_USE_DMA)?;
        // Injection FIFO (off while it is set up) and its counter: BASE = the window, so
        // a descriptor's base_offset is a window offset.
        let inj = q(bus + u64::from(layout::INJ));
        let inj_end = inj + layout::INJ_ENTRIES * dma::DESC_BYTES / 16;
        p.dma_write(ep, dma::INJ_DEACTIVATE, bit(INJ_FIFO))?;
        p.dma_write(ep, inj_fifo(INJ_FIFO, dma::FIFO_START), inj)?;
        p.dma_write(ep, inj_fifo(INJ_FIFO, dma::FIFO_END), inj_end)?;
        p.dma_write(ep, inj_fifo(INJ_FIFO, dma::FIFO_HEAD), inj)?;
        p.dma_write(ep, inj_fifo(INJ_FIFO, dma::FIFO_TAIL), inj)?;
        let cw = 4 * (INJ_COUNTER / 32);
        p.dma_write(ep, inj_ctr(INJ_COUNTER, dma::CTR_BASE), q(bus))?;
        p.dma_write(ep, inj_ctr(INJ_COUNTER, dma::CTR_COUNT), 0)?;
        p.dma_write(ep, dma::INJ_CTR_CLEAR_HIT_ZERO + cw, bit(INJ_COUNTER))?;
        p.dma_write(ep, dma::INJ_CTR_ENABLE + cw, bit(INJ_COUNTER))?;
        // Reception FIFO, every PID's every arrival byte mapped to it.
        let ri = g * dma::RCV_FIFOS + RCV_FIFO;
        let rx = q(bus + u64::from(layout::RX));
        p.dma_write(ep, rcv_fifo(RCV_FIFO, dma::FIFO_START), rx)?;
        p.dma_write(
            ep,
            rcv_fifo(RCV_FIFO, dma::FIFO_END),
            rx + layout::RX_BYTES / 16,
        )?;
        p.dma_write(ep, rcv_fifo(RCV_FIFO, dma::FIFO_HEAD), rx)?;
        p.dma_write(ep, rcv_fifo(RCV_FIFO, dma::FIFO_TAIL), rx)?;
        let byte = g << 3 | RCV_FIFO;
        for i in 0..dma::PIDS * dma::RCV_MAP_DCRS_PER_PID {
            p.dcr_write(ep, d(dma::DCR_RCV_MAP + i), byte * 0x0101_0101)?;
        }
        let types = p.dcr_read(ep, d(dma::DCR_RCV_FIFO_TYPE))?;
        p.dcr_write(ep, d(dma::DCR_RCV_FIFO_TYPE), types & !bit(ri))?;
        p.dcr_write(ep, d(dma::DCR_RCV_THRESHOLD0), 0)?;
        p.dma_write(ep, dma::RCV_THRESHOLD_CLEAR + 4 * (ri / 32), bit(ri))?;
        let en = p.dcr_read(ep, d(dma::DCR_RCV_FIFO_ENABLE))?;
        p.dcr_write(ep, d(dma::DCR_RCV_FIFO_ENABLE), en | bit(ri))?;
        let ie = p.dcr_read(ep, d(dma::DCR_RCV_FIFO_IRQ_EN))?;
        p.dcr_write(ep, d(dma::DCR_RCV_FIFO_IRQ_EN), ie | bit(ri))?;
        // Injection FIFO on.
        let ien = p.dcr_read(ep, d(dma::DCR_INJ_FIFO_ENABLE + g))?;
        p.dcr_write(ep, d(dma::DCR_INJ_FIFO_ENABLE + g), ien | bit(INJ_FIFO))?;
        p.dma_write(ep, dma::INJ_ACTIVATE, bit(INJ_FIFO))?;
        Ok(DmaGroup {
            ep,
            bus,
            me,
            inj_tail: 0,
            rx_head: 0,
            conn: 0,
        })
    }

    /// Sends `msg` (at most [`MAX_MSG`] bytes, link header included) to `to` as one
    /// memory-FIFO message: packets of 240 bytes, Put_Offset = byte offset, software word 3
    /// = `conn_id:8 | src_key:24` (bgnet's torus framing). Returns false (nothing sent) if
    /// the message is too long.
    pub fn send<P: FabricApi>(
        &mut self,
        p: &mut P,
        to: Coords,
        msg: &[u8],
    ) -> Result<bool, P::Error> {
        if msg.len() > MAX_MSG {
            return Ok(false);
        }
        self.conn = self.conn.wrapping_add(1);
        let word3 = u32::from(self.conn) << 24 | self.me.key();
        self.inject(p, to, layout::TX, msg, 0, word3, false)
    }

    /// Writes `data` to the send buffer and injects one descriptor for it: a memory-FIFO
    /// message, or (`direct`) a direct put whose packets land at the destination's reception
    /// counter `word3 >> 24` at `BASE + put + offset`.
    #[allow(clippy::too_many_arguments)]
    pub fn inject<P: FabricApi>(
        &mut self,
        p: &mut P,
        to: Coords,
        buf: u32,
        data: &[u8],
        put: u32,
        word3: u32,
        direct: bool,
    ) -> Result<bool, P::Error> {
        p.mem_write(self.ep, buf, data)?;
        self.inject_at(p, to, buf, data.len() as u32, put, word3, direct)
    }

    /// [`DmaGroup::inject`] of `len` bytes already at window offset `buf` (a zero-copy
    /// put from memory the program keeps in its window, `layout::FREE` and above).
    #[allow(clippy::too_many_arguments)]
    pub fn inject_at<P: FabricApi>(
        &mut self,
        p: &mut P,
        to: Coords,
        buf: u32,
        len: u32,
        put: u32,
        word3: u32,
        direct: bool,
    ) -> Result<bool, P::Error> {
        let hw0 = dma::HW_SK
            | dma::HW_CHUNKS_MASK << dma::HW_CHUNKS_SHIFT
            | if PID & 2 != 0 { dma::HW_PID0 } else { 0 }
            | if PID & 1 != 0 { dma::HW_PID1 } else { 0 }
            | if direct { dma::HW_DM } else { 0 }
            | dma::HW_DYNAMIC
            | u32::from(to.x);
        let hw1 = u32::from(to.y) << dma::HW_Y_SHIFT | u32::from(to.z) << dma::HW_Z_SHIFT;
        let desc = [
            0,
            dma::VM_GROUP * dma::COUNTERS + INJ_COUNTER,
            buf,
            len,
            hw0,
            hw1,
            put,
            word3,
        ];
        let mut raw = [0u8; dma::DESC_BYTES as usize];
        for (i, w) in desc.iter().enumerate() {
            raw[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        let at = layout::INJ + self.inj_tail * dma::DESC_BYTES;
        p.mem_write(self.ep, at, &raw)?;
        self.inj_tail = (self.inj_tail + 1) % layout::INJ_ENTRIES;
        let tail = q(self.bus + u64::from(layout::INJ)) + self.inj_tail * dma::DESC_BYTES / 16;
        p.dma_write2(
            self.ep,
            (inj_ctr(INJ_COUNTER, dma::CTR_INCREMENT), len),
            (inj_fifo(INJ_FIFO, dma::FIFO_TAIL), tail),
        )?;
        Ok(true)
    }

    /// Takes every packet waiting in the reception ring, oldest first, and gives each to
    /// `f`; returns how many there were.
    pub fn receive<P: FabricApi>(
        &mut self,
        p: &mut P,
        mut f: impl FnMut(&Packet),
    ) -> Result<usize, P::Error> {
        let ri = dma::VM_GROUP * dma::RCV_FIFOS + RCV_FIFO;
        // Clear the latch first: a packet landing after the TAIL read raises it again. (Not
        // needed where the registers are mirrored: a packet's arrival itself wakes us.)
        if !p.registers_mirrored(self.ep) {
            p.dma_write(self.ep, dma::RCV_THRESHOLD_CLEAR + 4 * (ri / 32), bit(ri))?;
        }
        let start = q(self.bus + u64::from(layout::RX));
        let size = layout::RX_BYTES / 16;
        let tail = p.dma_read(self.ep, rcv_fifo(RCV_FIFO, dma::FIFO_TAIL))?;
        let tail = tail.wrapping_sub(start);
        if tail >= size {
            return Ok(0);
        }
        let mut n = 0;
        let mut slot = [0u8; 256];
        while self.rx_head != tail {
            let at = layout::RX + self.rx_head * 16;
            p.mem_read(self.ep, at, &mut slot[..16])?;
            let hw0 = u32::from_be_bytes([slot[0], slot[1], slot[2], slot[3]]);
            let chunks = (hw0 >> dma::HW_CHUNKS_SHIFT) & dma::HW_CHUNKS_MASK;
            let bytes = (chunks + 1) * dma::CHUNK_BYTES;
            // The slot may wrap at the ring's end.
            let first = (layout::RX_BYTES - self.rx_head * 16).min(bytes);
            p.mem_read(self.ep, at + 16, &mut slot[16..first as usize])?;
            if first < bytes {
                p.mem_read(
                    self.ep,
                    layout::RX,
                    &mut slot[first as usize..bytes as usize],
                )?;
            }
            let w = |i: usize| u32::from_be_bytes([slot[i], slot[i + 1], slot[i + 2], slot[i + 3]]);
            f(&Packet {
                hw0,
                put_offset: w(8),
                word3: w(12),
                payload: &slot[16..bytes as usize],
            });
            n += 1;
            self.rx_head = (self.rx_head + bytes / 16) % size;
        }
        p.dma_write(
            self.ep,
            rcv_fifo(RCV_FIFO, dma::FIFO_HEAD),
            start + self.rx_head,
        )?;
        Ok(n)
    }
}

/// Writes bgnet's torus link header (`dst_key`, `len` of the whole message, `lnk_proto`,
/// `opt` 0) into `out[..LINK_HDR]`.
pub fn link_header(out: &mut [u8], dst_key: u32, len: usize, proto: u16) {
    out[0..4].copy_from_slice(&dst_key.to_be_bytes());
    out[4..8].copy_from_slice(&(len as u32).to_be_bytes());
    out[8..10].copy_from_slice(&proto.to_be_bytes());
    out[10..12].copy_from_slice(&[0, 0]);
}

/// A message put back together: its source id (software word 3) and bytes (link header
/// included).
pub struct Message<'a> {
    pub word3: u32,
    pub bytes: &'a [u8],
}

struct Partial {
    used: bool,
    word3: u32,
    total: usize,
    have: u64,
    buf: [u8; MAX_MSG],
}

/// Reassembly of memory-FIFO messages by source id (word 3) and Put_Offset, in `N` slots;
/// a new message when all are busy replaces the oldest partial one (counted in `dropped`).
pub struct Reassembly<const N: usize> {
    slots: [Partial; N],
    next_victim: usize,
    /// Partial messages given up (replaced by a new one while every slot was busy).
    pub dropped: u32,
    /// Packets that fit no message (off the 240-byte grid, past the end, a bad length).
    pub bad: u32,
}

impl<const N: usize> Default for Reassembly<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Reassembly<N> {
    pub const fn new() -> Self {
        Reassembly {
            slots: [const {
                Partial {
                    used: false,
                    word3: 0,
                    total: 0,
                    have: 0,
                    buf: [0; MAX_MSG],
                }
            }; N],
            next_victim: 0,
            dropped: 0,
            bad: 0,
        }
    }

    /// Adds one packet; when it completes a message, calls `done` with it.
    pub fn add(&mut self, pkt: &Packet, done: impl FnOnce(Message)) {
        let off = pkt.put_offset as usize;
        if !off.is_multiple_of(PKT_PAYLOAD) || off >= MAX_MSG {
            self.bad += 1;
            return;
        }
        let i = match self
            .slots
            .iter()
            .position(|s| s.used && s.word3 == pkt.word3)
        {
            Some(i) => i,
            None => {
                let i = match self.slots.iter().position(|s| !s.used) {
                    Some(i) => i,
                    None => {
                        self.dropped += 1;
                        let v = self.next_victim;
                        self.next_victim = (v + 1) % N;
                        v
                    }
                };
                let s = &mut self.slots[i];
                s.used = true;
                s.word3 = pkt.word3;
                s.total = MAX_MSG;
                s.have = 0;
                i
            }
        };
        let s = &mut self.slots[i];
        if off == 0 {
            let p = pkt.payload;
            let total = if p.len() >= 8 {
                u32::from_be_bytes([p[4], p[5], p[6], p[7]]) as usize
            } else {
                0
            };
            if !(LINK_HDR..=MAX_MSG).contains(&total) {
                self.bad += 1;
                s.used = false;
                return;
            }
            // Packets past this message's end are what is left of an older message with
            // this id (its conn_id wrapped after packets were lost): start over.
            if s.have >> total.div_ceil(PKT_PAYLOAD) != 0 {
                s.have = 0;
            }
            s.total = total;
        }
        if off >= s.total {
            self.bad += 1;
            s.used = false;
            return;
        }
        // A short packet (a sender may pick any Chunks) leaves zeros, never the bytes of an
        // earlier message that used this slot.
        let n = PKT_PAYLOAD.min(pkt.payload.len());
        s.buf[off..off + n].copy_from_slice(&pkt.payload[..n]);
        s.buf[off + n..off + PKT_PAYLOAD].fill(0);
        s.have |= 1 << (off / PKT_PAYLOAD);
        let npkts = s.total.div_ceil(PKT_PAYLOAD);
        if s.have & 1 == 0 {
            return;
        }
        if s.have >> npkts != 0 {
            self.bad += 1;
            s.used = false;
            return;
        }
        if s.have == (1u64 << npkts) - 1 {
            s.used = false;
            done(Message {
                word3: s.word3,
                bytes: &s.buf[..s.total],
            });
        }
    }
}

/// Collective packet headers (bgp-interconnect.md 2.2, `kestrel_bgp::coll`).
pub mod tree {
    use super::coll;

    /// A broadcast on class `class` with `tag`, with the receive interrupt.
    pub const fn bcast(class: u32, tag: u32) -> u32 {
        (class & coll::HDR_CLASS_MASK) << coll::HDR_CLASS_SHIFT
            | coll::HDR_IRQ
            | coll::OP_NONE << coll::HDR_OP_SHIFT
            | (tag & coll::HDR_TAG_MASK) << coll::HDR_TAG_SHIFT
    }

    /// A point-to-point packet to node address `dest` on class `class`.
    pub const fn p2p(class: u32, dest: u32) -> u32 {
        (class & coll::HDR_CLASS_MASK) << coll::HDR_CLASS_SHIFT
            | coll::HDR_P2P
            | coll::HDR_IRQ
            | (dest & coll::HDR_P2P_ADDR_MASK) << coll::HDR_P2P_ADDR_SHIFT
    }

    /// A reduction with ALU `op` over operands of `bytes` bytes (2, 4, ... 256) on `class`.
    pub const fn reduce(class: u32, op: u32, bytes: u32) -> u32 {
        (class & coll::HDR_CLASS_MASK) << coll::HDR_CLASS_SHIFT
            | coll::HDR_IRQ
            | (op & coll::HDR_OP_MASK) << coll::HDR_OP_SHIFT
            | ((bytes / 2 - 1) & coll::HDR_OPSIZE_MASK) << coll::HDR_OPSIZE_SHIFT
    }
}
