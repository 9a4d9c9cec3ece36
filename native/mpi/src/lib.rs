//! An MPI-like layer over the SPI layer: rank = endpoint number (torus X), point-to-point
//! messages over the torus DMA (memory FIFO, bgnet's framing with the tag in the link
//! header's `dst_key` and [`PROTO`] as its protocol), and barrier / allreduce over the
//! collective network's combining ALU on VC [`VC`], class [`CLASS`].
//!
//! A reduction on the collective completes when every endpoint that sources the class has
//! contributed (ADR 0018): the communicator is every endpoint of the fabric that sources
//! [`CLASS`] (all of them, at reset).
//!
//! The calls come in two shapes: non-blocking (`try_recv`, `reduce_start` +
//! `reduce_poll`), which a host test drives for several ranks in one thread, and blocking
//! (`recv`, `allreduce`, `barrier`), which take a `wait` function that sleeps until the
//! fabric has news (on the target: the service's event, `service::Service::wait`).

#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

use kestrel_bgp::coll;
use kestrel_fabric::{EpId, FabricApi};
use kestrel_spi::{link_header, tree, Coords, DmaGroup, Reassembly, LINK_HDR, MAX_MSG};

/// The link protocol of MPI messages (bgnet's frames are `TORUS_LINK_PROTO_NET`).
pub const PROTO: u16 = 0x4d50;
/// The collective VC the reductions use (bgnet uses VC 0).
pub const VC: usize = 1;
/// The class route the reductions use.
pub const CLASS: u32 = kestrel_bgp::coll::MPI_CLASS;
/// Longest message payload.
pub const MAX_DATA: usize = MAX_MSG - LINK_HDR;
/// Most 64-bit values one allreduce combines (one collective packet).
pub const MAX_VALUES: usize = 32;
/// Received messages kept for a later `recv` (when they did not match the current one).
const INBOX: usize = 4;

/// The combining operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Max,
    Or,
    And,
    Xor,
}

impl Op {
    const fn alu(self) -> u32 {
        match self {
            Op::Sum => coll::OP_ADD,
            Op::Max => coll::OP_MAX,
            Op::Or => coll::OP_OR,
            Op::And => coll::OP_AND,
            Op::Xor => coll::OP_XOR,
        }
    }
}

/// A message held for a later receive.
struct Held {
    used: bool,
    from: u8,
    tag: u32,
    len: usize,
    data: [u8; MAX_DATA],
}

/// One rank's communicator.
pub struct Comm {
    pub rank: u8,
    pub dma: DmaGroup,
    reasm: Reassembly<4>,
    inbox: [Held; INBOX],
    /// Messages dropped because the inbox was full.
    pub dropped: u32,
    /// Collective packets on the layer's VC taken and ignored while waiting for a
    /// reduction's result (another class, point to point, a broadcast, another operation).
    pub ignored: u32,
    /// The operation of the reduction started last (its result is what `reduce_poll`
    /// waits for).
    reducing: Option<Op>,
    /// [`Comm::start`] is done: ranks are mapped to endpoints through `peers`.
    started: bool,
    /// Ranks in the job, and each rank's endpoint X coordinate (after `start`).
    size: u8,
    peers: [u8; MAX_RANKS],
    /// Ranks heard from during `start` (bit r).
    heard: u32,
    out: [u8; MAX_MSG],
}

/// Most ranks of a job.
pub const MAX_RANKS: usize = 16;
/// The first word of a [`Comm::start`] hello broadcast.
const HELLO_MAGIC: u32 = 0x4b48_454c;

impl Default for Comm {
    fn default() -> Self {
        Self::new()
    }
}

impl Comm {
    /// A communicator not yet open (a `const`, so a program can keep it in a `static`: it
    /// holds the reassembly and inbox buffers, about 85 KiB).
    pub const fn new() -> Comm {
        Comm {
            rank: 0,
            dma: DmaGroup::unset(),
            reasm: Reassembly::new(),
            inbox: [const {
                Held {
                    used: false,
                    from: 0,
                    tag: 0,
                    len: 0,
                    data: [0; MAX_DATA],
                }
            }; INBOX],
            dropped: 0,
            ignored: 0,
            reducing: None,
            started: false,
            size: 0,
            peers: [0; MAX_RANKS],
            heard: 0,
            out: [0; MAX_MSG],
        }
    }

    /// Opens the communicator on endpoint `ep` (window at bus `bus`): joins the collective
    /// class [`CLASS`] (which the endpoint's grant must hold) and programs its DMA group;
    /// the rank is the endpoint number until the program sets `rank` (before
    /// [`Comm::start`], which maps ranks to endpoints).
    pub fn open<P: FabricApi>(&mut self, p: &mut P, ep: EpId, bus: u64) -> Result<(), P::Error> {
        p.join_classes(ep, 1 << CLASS)?;
        self.dma = DmaGroup::setup(
            p,
            ep,
            bus,
            Coords {
                x: ep.0,
                y: 0,
                z: 0,
            },
        )?;
        self.rank = ep.0;
        Ok(())
    }

    /// Sends `data` (at most [`MAX_DATA`] bytes) to rank `to` with `tag`; false if too long.
    pub fn send<P: FabricApi>(
        &mut self,
        p: &mut P,
        to: u8,
        tag: u32,
        data: &[u8],
    ) -> Result<bool, P::Error> {
        if data.len() > MAX_DATA {
            return Ok(false);
        }
        let n = LINK_HDR + data.len();
        link_header(&mut self.out, tag, n, PROTO);
        self.out[LINK_HDR..n].copy_from_slice(data);
        let x = self.x_of(to);
        let Comm { dma, out, .. } = self;
        dma.send(p, Coords { x, y: 0, z: 0 }, &out[..n])
    }

    /// Takes in what arrived (complete messages go to the inbox).
    fn pump<P: FabricApi>(&mut self, p: &mut P) -> Result<(), P::Error> {
        let Comm {
            dma,
            reasm,
            inbox,
            dropped,
            ..
        } = self;
        dma.receive(p, |pkt| {
            reasm.add(pkt, |m| {
                let b = m.bytes;
                if b.len() < LINK_HDR || u16::from_be_bytes([b[8], b[9]]) != PROTO {
                    return;
                }
                let Some(h) = inbox.iter_mut().find(|h| !h.used) else {
                    *dropped += 1;
                    return;
                };
                h.used = true;
                h.from = (m.word3 >> 16) as u8;
                h.tag = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                h.len = b.len() - LINK_HDR;
                h.data[..h.len].copy_from_slice(&b[LINK_HDR..]);
            });
        })?;
        Ok(())
    }

    /// A message from `from` (any rank if `None`) with `tag`, copied into `buf` (cut to its
    /// length): `(source rank, length)`, or `None` if none has arrived. The source rank is
    /// the sender's endpoint as the fabric stamped it, mapped to its rank (`u8::MAX` for a
    /// sender that is no rank of the job).
    pub fn try_recv<P: FabricApi>(
        &mut self,
        p: &mut P,
        from: Option<u8>,
        tag: u32,
        buf: &mut [u8],
    ) -> Result<Option<(u8, usize)>, P::Error> {
        self.pump(p)?;
        let from = from.map(|r| self.x_of(r));
        let hit = self
            .inbox
            .iter_mut()
            .find(|h| h.used && h.tag == tag && from.is_none_or(|f| f == h.from));
        let Some(h) = hit else { return Ok(None) };
        h.used = false;
        let n = h.len.min(buf.len());
        buf[..n].copy_from_slice(&h.data[..n]);
        let (x, len) = (h.from, h.len);
        Ok(Some((self.rank_at(x), len)))
    }

    /// MPI_Init's wire-up, done by the ranks themselves: waits until ranks `0..size` have
    /// all opened their communicators (and so joined the collective class: a reduction
    /// completes when every endpoint that sources the class has contributed, so one started
    /// before a rank joins would complete without it), and learns where each rank is.
    ///
    /// A rank's number is its own (`Comm::rank`, set before `start`; the endpoint number by
    /// default), not its endpoint's: each rank broadcasts `(rank, X)` on the class, again
    /// after each `wait` while it has not heard every rank, and once more after (so the
    /// last to arrive hears the others). Only the class's members (the ranks) receive
    /// these broadcasts, and the fabric stamps nothing here, so a rank checks that a
    /// hello's X is a sender of the class it can reach: the grants keep other tenants off
    /// the class. Afterwards `send` and `recv` name ranks, mapped to and from endpoints.
    pub fn start<P: FabricApi>(
        &mut self,
        p: &mut P,
        size: u8,
        mut wait: impl FnMut(&mut P),
    ) -> Result<(), P::Error> {
        self.begin(size);
        while !self.start_step(p)? {
            wait(p);
        }
        Ok(())
    }

    /// [`Comm::start`] in steps, for a caller with its own loop: `begin`, then
    /// `start_step` until it returns true.
    pub fn begin(&mut self, size: u8) {
        self.size = size.clamp(1, MAX_RANKS as u8);
        self.started = false;
        self.heard = 1u32 << (self.rank % 32);
        self.peers[usize::from(self.rank) % MAX_RANKS] = self.dma.me.x;
    }

    /// One step of [`Comm::start`]: takes in the hellos that arrived, then broadcasts this
    /// rank's (marked final once every rank was heard); true when done.
    pub fn start_step<P: FabricApi>(&mut self, p: &mut P) -> Result<bool, P::Error> {
        let (ep, size) = (self.dma.ep, self.size);
        let mut payload = [0u8; 256];
        while let Some(h) = p.tree_receive(ep, VC, &mut payload)? {
            let is_hello = h & coll::HDR_P2P == 0
                && coll::hdr_class(h) == CLASS
                && payload[..4] == HELLO_MAGIC.to_be_bytes()
                && payload[5] == size;
            let r = payload[4];
            if !is_hello || r >= size {
                self.ignored += 1;
                continue;
            }
            self.peers[usize::from(r)] = payload[6];
            self.heard |= 1 << r;
        }
        let all = u32::MAX >> (32 - u32::from(size));
        let done = self.heard & all == all;
        let mut hello = [0u8; 256];
        hello[..4].copy_from_slice(&HELLO_MAGIC.to_be_bytes());
        hello[4] = self.rank;
        hello[5] = size;
        hello[6] = self.dma.me.x;
        hello[7] = u8::from(done);
        p.tree_inject(ep, VC, tree::bcast(CLASS, 0), &hello)?;
        self.started = done;
        Ok(done)
    }

    /// The endpoint X coordinate of rank `r` (itself before [`Comm::start`]).
    fn x_of(&self, r: u8) -> u8 {
        if self.started && usize::from(r) < MAX_RANKS {
            self.peers[usize::from(r)]
        } else {
            r
        }
    }

    /// The rank at X coordinate `x` (itself before [`Comm::start`], or if no rank is).
    fn rank_at(&self, x: u8) -> u8 {
        if !self.started {
            return x;
        }
        (0..self.size)
            .find(|&r| self.peers[usize::from(r)] == x)
            .unwrap_or(u8::MAX)
    }

    /// [`Comm::try_recv`] until a message arrives, calling `wait` in between.
    pub fn recv<P: FabricApi>(
        &mut self,
        p: &mut P,
        from: Option<u8>,
        tag: u32,
        buf: &mut [u8],
        mut wait: impl FnMut(&mut P),
    ) -> Result<(u8, usize), P::Error> {
        loop {
            if let Some(r) = self.try_recv(p, from, tag, buf)? {
                return Ok(r);
            }
            wait(p);
        }
    }

    /// Contributes `values` (at most [`MAX_VALUES`], big-endian 64-bit operands) to a
    /// reduction with `op`.
    pub fn reduce_start<P: FabricApi>(
        &mut self,
        p: &mut P,
        op: Op,
        values: &[u64],
    ) -> Result<(), P::Error> {
        let mut payload = [0u8; 256];
        for (i, v) in values.iter().take(MAX_VALUES).enumerate() {
            payload[8 * i..8 * i + 8].copy_from_slice(&v.to_be_bytes());
        }
        p.tree_inject(self.dma.ep, VC, tree::reduce(CLASS, op.alu(), 8), &payload)?;
        self.reducing = Some(op);
        Ok(())
    }

    /// Whether `h` is the header of the result of a reduction with `op` on [`CLASS`]
    /// over 64-bit operands, as the engine delivers it (the first contributor's header:
    /// that class, not point to point, that ALU opcode and operand size). A broadcast
    /// (opcode none) on the class is not: whoever sources the class can send one at any
    /// time, while a reduction result exists only once every source has contributed.
    fn is_result(h: u32, op: Op) -> bool {
        let fields = coll::HDR_CLASS_MASK << coll::HDR_CLASS_SHIFT
            | coll::HDR_P2P
            | coll::HDR_OP_MASK << coll::HDR_OP_SHIFT
            | coll::HDR_OPSIZE_MASK << coll::HDR_OPSIZE_SHIFT;
        h & fields == tree::reduce(CLASS, op.alu(), 8) & fields
    }

    /// The result of the reduction started last, into `out`, once it is there. Only a
    /// reduction result of that operation counts (see `is_result`); anything else on the
    /// VC is counted in `ignored` and dropped.
    pub fn reduce_poll<P: FabricApi>(
        &mut self,
        p: &mut P,
        out: &mut [u64],
    ) -> Result<bool, P::Error> {
        let mut payload = [0u8; 256];
        loop {
            let Some(h) = p.tree_receive(self.dma.ep, VC, &mut payload)? else {
                return Ok(false);
            };
            let Some(op) = self.reducing else {
                self.ignored += 1;
                continue;
            };
            if !Self::is_result(h, op) {
                self.ignored += 1;
                continue;
            }
            self.reducing = None;
            for (i, o) in out.iter_mut().take(MAX_VALUES).enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(&payload[8 * i..8 * i + 8]);
                *o = u64::from_be_bytes(b);
            }
            return Ok(true);
        }
    }

    /// Every rank's `values` combined with `op`, element by element, in `values`.
    pub fn allreduce<P: FabricApi>(
        &mut self,
        p: &mut P,
        op: Op,
        values: &mut [u64],
        mut wait: impl FnMut(&mut P),
    ) -> Result<(), P::Error> {
        self.reduce_start(p, op, values)?;
        while !self.reduce_poll(p, values)? {
            wait(p);
        }
        Ok(())
    }

    /// Returns when every rank has called it.
    pub fn barrier<P: FabricApi>(
        &mut self,
        p: &mut P,
        wait: impl FnMut(&mut P),
    ) -> Result<(), P::Error> {
        let mut v = [0u64];
        self.allreduce(p, Op::Or, &mut v, wait)
    }
}
