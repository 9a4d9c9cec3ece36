//! The collective (tree) network (bgp-interconnect.md 2.2) as the fabric runs it: per
//! endpoint two virtual channels with reception FIFOs of 8 packets, the collective DCRs,
//! and the node-wide class routes and combining ALU.
//!
//! A packet is a 32-bit header and 256 bytes of payload ([`FabricApi::tree_inject`](crate::FabricApi::tree_inject)).
//! - **Class routes.** RDR0..7 hold two classes each; an endpoint *sources* a class when
//!   its SRCL bit is set and *targets* it when TGTL is set (the links' bits have no effect
//!   inside a node). At reset no class is sourced or targeted. Only classes in the
//!   endpoint's [`Grant`](crate::Grant) can be set: a route write's SRCL/TGTL bits of other
//!   classes are cleared and counted (`DiagKind::RouteRefused`), as BG/P's route registers
//!   were the control system's, set from the partition's personality.
//! - **Grants.** A packet reaches only endpoints granted its class, and point to point (or
//!   receive-all) only endpoints the sender may reach (a shared partition); the others are
//!   skipped and counted at the sender (`DiagKind::Unreachable`).
//! - **Point to point** (header P2P): delivered to the endpoint whose node address (= k,
//!   NADDR reads it, writes are ignored) matches and which targets the class, and to every
//!   other endpoint targeting the class with RCVALL set in that VC's VCFG.
//! - **Broadcast** (ALU opcode none): delivered at once to every endpoint targeting the
//!   class, the sender included (bgnet drops its own packets).
//! - **Reduction** (OR, AND, XOR, MAX, ADD over unsigned big-endian operands of
//!   `(operand size + 1) * 2` bytes; a shorter last operand is folded the same way):
//!   completes when every endpoint sourcing the class has injected a packet of that class
//!   on that VC; each contributor's packets are taken in injection order, the result (with
//!   the first contributor's header) goes to every endpoint targeting the class. An
//!   endpoint may have up to 8 packets waiting per VC (its injection FIFO); more set the
//!   overflow flags and are dropped.
//!
//! Flags (PIXF/PRXF, read-to-clear; the IRQ lines 0xB4/0xB5 are `flags & enables`): the
//! watermark bits are conditions, re-evaluated after every read (PRX_WMn: more packets
//! received than VCFG's reception watermark; PIX_WMn: at most the injection watermark
//! waiting); PIX_BADHDRn for an undeliverable header, PIX_HOFn|POFn for an injection
//! overflow. Underruns are the device model's (it knows HR from DR). A full reception FIFO
//! drops the packet for that receiver (counted). Lines 0xB6/0xB7: a received packet with
//! the header IRQ bit is waiting on VC0/VC1.

use crate::{DiagKind, EpId, Fabric, FabricError, Link, Memory, MAX_ENDPOINTS};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use kestrel_bgp::coll::*;

const NVC: usize = VCS as usize;
const DEPTH: usize = FIFO_PACKETS as usize;
/// Payload bytes of a packet.
pub const PAYLOAD: usize = PAYLOAD_BYTES as usize;

/// A collective packet: header and payload.
pub(crate) type Packet = (u32, Box<[u8; PAYLOAD]>);

pub(crate) fn is_coll_dcr(dcr: u32) -> bool {
    (DCR_BASE..DCR_BASE + DCR_COUNT).contains(&dcr)
}

/// One endpoint's collective state.
#[derive(Clone, Debug)]
pub(crate) struct CollEp {
    dcr: [u32; DCR_COUNT as usize],
    rcv: [VecDeque<Packet>; NVC],
    /// Packets this endpoint injected that wait for a reduction, per VC.
    waiting: [u8; NVC],
}

const fn per_vc(vc: usize, vc0: u32, vc1: u32) -> u32 {
    if vc == 0 {
        vc0
    } else {
        vc1
    }
}

/// What a collective DCR write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RouteWrite {
    /// A class route changed (a reduction may now complete).
    pub routes_changed: bool,
    /// SRCL/TGTL bits the write asked for outside the grant (cleared).
    pub refused: u32,
}

impl CollEp {
    /// The reset state: no class sourced or targeted, nothing received.
    pub fn reset() -> CollEp {
        CollEp {
            dcr: [0; DCR_COUNT as usize],
            rcv: [VecDeque::new(), VecDeque::new()],
            waiting: [0; NVC],
        }
    }

    /// Clears every local source and target bit of a class outside `classes`.
    pub fn clamp_routes(&mut self, classes: u16) {
        for r in 0..RDR_COUNT {
            let dcr = DCR_BASE + DCR_RDR0 + r;
            let outside = local_route_bits(dcr, u16::MAX) & !local_route_bits(dcr, classes);
            self.dcr[(DCR_RDR0 + r) as usize] &= !outside;
        }
    }

    fn route_bits(&self, class: u32) -> u32 {
        let (dcr, shift) = rdr_of_class(class);
        self.dcr[((dcr - DCR_BASE) % DCR_COUNT) as usize] << shift
    }

    pub fn sources(&self, class: u32) -> bool {
        self.route_bits(class) & RDR_LO_SRCL != 0
    }

    pub fn targets(&self, class: u32) -> bool {
        self.route_bits(class) & RDR_LO_TGTL != 0
    }

    fn vcfg(&self, vc: usize) -> u32 {
        self.dcr[per_vc(vc, DCR_VCFG0, DCR_VCFG1) as usize]
    }

    /// PRXF with the watermark conditions of now.
    fn prxf(&self) -> u32 {
        let mut f = self.dcr[DCR_PRXF as usize];
        for vc in 0..NVC {
            let wm = (self.vcfg(vc) >> VCFG_RWM_SHIFT) & VCFG_WM_MASK;
            if self.rcv[vc].len() as u32 > wm {
                f |= per_vc(vc, PRX_WM0, PRX_WM1);
            }
        }
        f
    }

    /// PIXF with the watermark conditions of now.
    fn pixf(&self) -> u32 {
        let mut f = self.dcr[DCR_PIXF as usize];
        for vc in 0..NVC {
            let wm = (self.vcfg(vc) >> VCFG_IWM_SHIFT) & VCFG_WM_MASK;
            if u32::from(self.waiting[vc]) <= wm {
                f |= per_vc(vc, PIX_WM0, PIX_WM1);
            }
        }
        f
    }

    fn flag(&mut self, dcr: u32, bits: u32) {
        self.dcr[dcr as usize] |= bits;
    }

    /// A DCR read (`dcr` in 0xC00..0xC7F) by endpoint `k`; PRXF and PIXF clear.
    pub fn dcr_read(&mut self, k: u8, dcr: u32) -> u32 {
        let o = (dcr - DCR_BASE) % DCR_COUNT;
        match o {
            DCR_NADDR => u32::from(k),
            DCR_PRXF => {
                let v = self.prxf();
                self.dcr[o as usize] = 0;
                v
            }
            DCR_PIXF => {
                let v = self.pixf();
                self.dcr[o as usize] = 0;
                v
            }
            _ => self.dcr[o as usize],
        }
    }

    /// A DCR write by an endpoint granted `classes`: a route register keeps only the local
    /// bits of granted classes (the rest is reported as refused); NADDR, PRXF and PIXF
    /// ignore writes.
    pub fn dcr_write(&mut self, dcr: u32, v: u32, classes: u16) -> RouteWrite {
        let o = (dcr - DCR_BASE) % DCR_COUNT;
        match o {
            DCR_NADDR | DCR_PRXF | DCR_PIXF => RouteWrite::default(),
            _ if o < DCR_RDR0 + RDR_COUNT => {
                let abs = DCR_BASE + o;
                let outside = local_route_bits(abs, u16::MAX) & !local_route_bits(abs, classes);
                self.dcr[o as usize] = v & !outside;
                RouteWrite {
                    routes_changed: true,
                    refused: v & outside,
                }
            }
            _ => {
                self.dcr[o as usize] = v;
                RouteWrite::default()
            }
        }
    }

    /// The VC's status word.
    pub fn status(&self, vc: usize) -> u32 {
        let n = self.rcv[vc].len() as u32;
        let w = u32::from(self.waiting[vc]);
        let mut s = ((w * PAYLOAD_QUADS) & ST_QUADS_MASK) << ST_INJ_QUADS_SHIFT
            | (w & ST_HDRS_MASK) << ST_INJ_HDRS_SHIFT
            | ((n * PAYLOAD_QUADS) & ST_QUADS_MASK) << ST_RCV_QUADS_SHIFT
            | (n & ST_HDRS_MASK) << ST_RCV_HDRS_SHIFT;
        if self.rcv[vc].iter().any(|p| p.0 & HDR_IRQ != 0) {
            s |= ST_RCV_IRQ;
        }
        s
    }

    /// Reports every BIC line the collective asserts.
    pub fn irqs(&self, set: &mut impl FnMut(u32)) {
        if self.pixf() & self.dcr[DCR_PIXEN as usize] != 0 {
            set(IRQ_INJ_EXC);
        }
        if self.prxf() & self.dcr[DCR_PRXEN as usize] != 0 {
            set(IRQ_RCV_EXC);
        }
        for vc in 0..NVC {
            if self.rcv[vc].iter().any(|p| p.0 & HDR_IRQ != 0) {
                set(per_vc(vc, IRQ_RCV_VC0, IRQ_RCV_VC1));
            }
        }
    }
}

/// One packet waiting for a reduction.
#[derive(Clone, Debug)]
struct Contribution {
    vc: u8,
    class: u8,
    ep: EpId,
    packet: Packet,
}

/// The reductions in progress, node-wide, in injection order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reductions {
    waiting: Vec<Contribution>,
}

impl Reductions {
    /// Drops every contribution of `ep` (detached).
    pub fn forget(&mut self, ep: EpId) {
        self.waiting.retain(|c| c.ep != ep);
    }
}

/// ALU opcode of a (non-P2P) header.
fn op(h: u32) -> u32 {
    (h >> HDR_OP_SHIFT) & HDR_OP_MASK
}

/// Operand bytes of a header: (operand size + 1) 16-bit words.
fn operand_bytes(h: u32) -> usize {
    ((((h >> HDR_OPSIZE_SHIFT) & HDR_OPSIZE_MASK) + 1) * 2) as usize
}

/// Whether `op` is an ALU opcode the combining network has.
pub fn is_alu_op(op: u32) -> bool {
    matches!(op, OP_OR | OP_AND | OP_XOR | OP_MAX | OP_ADD)
}

/// Folds `b` into `acc` with ALU opcode `op` on unsigned big-endian operands of `width`
/// bytes (the last one shorter if `width` does not divide the payload). Unknown opcodes
/// leave `acc` alone.
pub fn alu(op: u32, width: usize, acc: &mut [u8; PAYLOAD], b: &[u8; PAYLOAD]) {
    let width = width.clamp(1, PAYLOAD);
    for (x, y) in acc.chunks_mut(width).zip(b.chunks(width)) {
        match op {
            OP_OR => x.iter_mut().zip(y).for_each(|(x, y)| *x |= y),
            OP_AND => x.iter_mut().zip(y).for_each(|(x, y)| *x &= y),
            OP_XOR => x.iter_mut().zip(y).for_each(|(x, y)| *x ^= y),
            OP_MAX => {
                if y > &*x {
                    x.copy_from_slice(y);
                }
            }
            OP_ADD => {
                let mut carry = 0u16;
                for (x, y) in x.iter_mut().zip(y).rev() {
                    let s = u16::from(*x) + u16::from(*y) + carry;
                    *x = s as u8;
                    carry = s >> 8;
                }
            }
            _ => {}
        }
    }
}

/// Whether endpoint `to` receives a packet with `header` that endpoint `from` injects on
/// `vc`, given `to`'s collective DCRs (`dcr(offset from DCR_BASE)`; the class's route
/// descriptor and the VC's VCFG are read): the engine's own routing rule. `to` must target
/// the header's class; a point-to-point packet then reaches the endpoint whose node address
/// it names and every other endpoint with RCVALL on `vc`; a broadcast (the sender
/// included) and a reduction's result reach every endpoint targeting the class. Whether
/// `from` may source the class is not asked (a refused header reaches nobody, but this
/// answers for the header as routed).
pub fn reaches(
    header: u32,
    vc: usize,
    from: EpId,
    to: EpId,
    mut dcr: impl FnMut(u32) -> u32,
) -> bool {
    let class = hdr_class(header);
    let (rdr, shift) = rdr_of_class(class);
    if (dcr(rdr - DCR_BASE) << shift) & RDR_LO_TGTL == 0 {
        return false;
    }
    if header & HDR_P2P == 0 {
        return true;
    }
    let addr = (header >> HDR_P2P_ADDR_SHIFT) & HDR_P2P_ADDR_MASK;
    addr == u32::from(to.0)
        || (to != from && dcr(per_vc(vc, DCR_VCFG0, DCR_VCFG1)) & VCFG_RCVALL != 0)
}

fn check_vc(vc: usize) -> Result<(), FabricError> {
    if vc < NVC {
        Ok(())
    } else {
        Err(FabricError::BadVc)
    }
}

impl<M: Memory, L: Link> Fabric<M, L> {
    /// [`FabricApi::tree_inject`](crate::FabricApi::tree_inject).
    pub(crate) fn coll_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        header: u32,
        payload: &[u8; PAYLOAD],
    ) -> Result<(), FabricError> {
        check_vc(vc)?;
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        let class = hdr_class(header);
        let p2p = header & HDR_P2P != 0;
        let bad = !e.coll.sources(class)
            || !e.grant.has_class(class)
            || (!p2p && op(header) != OP_NONE && !is_alu_op(op(header)));
        let r = if bad {
            e.coll.flag(DCR_PIXF, per_vc(vc, PIX_BADHDR0, PIX_BADHDR1));
            self.note_error(ep, DiagKind::TreeHeader, 0, header);
            Err(FabricError::BadHeader)
        } else if !p2p && op(header) != OP_NONE {
            if usize::from(e.coll.waiting[vc]) >= DEPTH {
                e.coll.flag(
                    DCR_PIXF,
                    per_vc(vc, PIX_HOF0 | PIX_POF0, PIX_HOF1 | PIX_POF1),
                );
                self.note_drop(ep, DiagKind::TreeOverflow, 0, vc as u32);
                Err(FabricError::InjectionFull)
            } else {
                e.coll.waiting[vc] += 1;
                e.stats.tree_packets_sent += 1;
                self.red.waiting.push(Contribution {
                    vc: vc as u8,
                    class: class as u8,
                    ep,
                    packet: (header, Box::new(*payload)),
                });
                self.coll_settle(vc as u8, class as u8);
                Ok(())
            }
        } else {
            e.stats.tree_packets_sent += 1;
            let (mut n, mut refused) = (0, 0);
            for k in 0..MAX_ENDPOINTS {
                let to = EpId(k as u8);
                let Some(t) = self.slot(to) else { continue };
                if !t.grant.has_class(class)
                    || !reaches(header, vc, ep, to, |o| t.coll.dcr[(o % DCR_COUNT) as usize])
                {
                    continue;
                }
                if self.may_reach(ep, to) {
                    self.tree_deliver(to, vc, header, payload);
                    n += 1;
                } else {
                    refused += 1;
                }
            }
            if refused != 0 {
                self.note_drop(ep, DiagKind::Unreachable, 0, header);
            } else if n == 0 {
                self.note_drop(ep, DiagKind::TreeNoTarget, 0, header);
            }
            Ok(())
        };
        self.touch(ep);
        self.settle();
        r
    }

    /// [`FabricApi::tree_receive`](crate::FabricApi::tree_receive).
    pub(crate) fn coll_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        payload: &mut [u8; PAYLOAD],
    ) -> Option<u32> {
        check_vc(vc).ok()?;
        let e = self.slot_mut(ep)?;
        let r = match e.coll.rcv[vc].pop_front() {
            Some((h, p)) => {
                payload.copy_from_slice(&*p);
                Some(h)
            }
            None => None,
        };
        self.touch(ep);
        self.settle();
        r
    }

    /// [`FabricApi::tree_status`](crate::FabricApi::tree_status).
    pub(crate) fn coll_status(&self, ep: EpId, vc: usize) -> u32 {
        match self.slot(ep) {
            Some(e) if vc < NVC => e.coll.status(vc),
            _ => 0,
        }
    }

    fn tree_deliver(&mut self, to: EpId, vc: usize, header: u32, payload: &[u8; PAYLOAD]) {
        let Some(e) = self.slot_mut(to) else { return };
        if e.coll.rcv[vc].len() >= DEPTH {
            self.note_drop(to, DiagKind::TreeOverflow, 0, vc as u32);
            return;
        }
        e.coll.rcv[vc].push_back((header, Box::new(*payload)));
        e.stats.tree_packets_received += 1;
        self.touch(to);
    }

    /// Completes every reduction that can complete (after attach, detach or a route change),
    /// dropping waiting packets of endpoints that no longer source their class.
    pub(crate) fn coll_settle_all(&mut self) {
        let keep: Vec<bool> = self
            .red
            .waiting
            .iter()
            .map(|c| {
                self.slot(c.ep)
                    .is_some_and(|e| e.coll.sources(u32::from(c.class)))
            })
            .collect();
        let stale: Vec<(EpId, u8)> = self
            .red
            .waiting
            .iter()
            .zip(&keep)
            .filter(|(_, &k)| !k)
            .map(|(c, _)| (c.ep, c.vc))
            .collect();
        let mut i = 0;
        self.red.waiting.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        for (ep, vc) in stale {
            if let Some(e) = self.slot_mut(ep) {
                let w = &mut e.coll.waiting[usize::from(vc)];
                *w = w.saturating_sub(1);
                self.note_drop(ep, DiagKind::TreeNoTarget, 0, u32::from(vc));
            }
        }
        let mut keys: Vec<(u8, u8)> = Vec::new();
        for c in &self.red.waiting {
            if !keys.contains(&(c.vc, c.class)) {
                keys.push((c.vc, c.class));
            }
        }
        for (vc, class) in keys {
            self.coll_settle(vc, class);
        }
    }

    /// Completes the reductions of (`vc`, `class`) while every source has a packet waiting.
    fn coll_settle(&mut self, vc: u8, class: u8) {
        loop {
            let sources: Vec<EpId> = (0..MAX_ENDPOINTS)
                .map(|k| EpId(k as u8))
                .filter(|&k| {
                    self.slot(k)
                        .is_some_and(|e| e.coll.sources(u32::from(class)))
                })
                .collect();
            if sources.is_empty() {
                return;
            }
            // The oldest waiting packet of each source.
            let mut picks = Vec::with_capacity(sources.len());
            for &s in &sources {
                match self
                    .red
                    .waiting
                    .iter()
                    .position(|c| c.ep == s && c.vc == vc && c.class == class)
                {
                    Some(i) => picks.push(i),
                    None => return,
                }
            }
            picks.sort_unstable();
            let mut taken: Vec<Contribution> = Vec::with_capacity(picks.len());
            for &i in picks.iter().rev() {
                taken.push(self.red.waiting.remove(i));
            }
            taken.sort_by_key(|c| c.ep);
            let header = taken[0].packet.0;
            let mut acc = *taken[0].packet.1;
            for c in &taken[1..] {
                if op(c.packet.0) != op(header)
                    || operand_bytes(c.packet.0) != operand_bytes(header)
                {
                    if let Some(e) = self.slot_mut(c.ep) {
                        e.coll
                            .flag(DCR_PIXF, per_vc(usize::from(vc), PIX_BADHDR0, PIX_BADHDR1));
                    }
                    self.note_error(c.ep, DiagKind::TreeHeader, 0, c.packet.0);
                }
                alu(op(header), operand_bytes(header), &mut acc, &c.packet.1);
            }
            for c in &taken {
                if let Some(e) = self.slot_mut(c.ep) {
                    let w = &mut e.coll.waiting[usize::from(vc)];
                    *w = w.saturating_sub(1);
                }
                self.touch(c.ep);
            }
            let mut n = 0;
            for k in 0..MAX_ENDPOINTS {
                let to = EpId(k as u8);
                if self.slot(to).is_some_and(|e| {
                    e.coll.targets(u32::from(class)) && e.grant.has_class(u32::from(class))
                }) {
                    self.tree_deliver(to, usize::from(vc), header, &acc);
                    n += 1;
                }
            }
            if n == 0 {
                self.note_drop(taken[0].ep, DiagKind::TreeNoTarget, 0, header);
            }
        }
    }
}
