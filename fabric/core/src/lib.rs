//! The node's interconnect "hardware" (Kestrel's BG/P fabric), as a pure engine.
//!
//! Every user of the fabric is an **endpoint** ([`EpId`]): each VM is one, each native
//! program is one. Endpoint k sits at torus coordinates (k, 0, 0) in a machine of
//! (MAX_ENDPOINTS, 1, 1), has collective node address k, one memory window (its DMA-able
//! memory, reached only through [`Memory`]) at a bus address range the fabric assigns at
//! [`FabricApi::attach`], one torus DMA group register file (seen as group
//! `kestrel_bgp::dma::VM_GROUP`), two collective virtual channels, and a frame queue for
//! the paravirtual NIC.
//!
//! The engine is what BG/P's hardware does (bgp-interconnect.md 2.2, 2.3; docs/adr/0018):
//! - [`dma`]: the DMA group's registers and DCRs; a TAIL (or activate, or FIFO enable)
//!   write runs the injection synchronously: descriptors, packets of up to 240 bytes,
//!   routing by X,Y,Z through the [`Link`], memory-FIFO slots (the sender's source key
//!   stamped by the engine), direct put, counters, hit-zero, range checks;
//! - [`coll`]: class routes, the combining ALU, broadcast, point to point, reception FIFOs
//!   of 8 packets per VC, status words, exception flags;
//! - [`frame`]: Ethernet frames routed by destination MAC (bgnet's rule), sent only from
//!   the sender's own MAC;
//! - interrupts: [`FabricApi::irq_lines`] (BIC line levels) and
//!   [`FabricApi::take_changed`];
//! - [`api`]: [`FabricApi`], the fabric's calls, written once: [`Fabric`] implements them
//!   in-process, the service's client over IPC, and every user is generic over them;
//! - [`proto`]: the fabric service's IPC protocol, its one wire codec (the operations'
//!   table, the shared page, error codes, diagnostics and stats as words).
//!
//! Bad input never panics and never touches memory outside the windows of the endpoints
//! involved: it sets an error bit (DMA fatal status, collective exception flags), drops and
//! counts a packet ([`Stats`]), and leaves a [`Diagnostic`] the VMM can log
//! ([`FabricApi::take_diagnostic`]). A full reception FIFO or frame queue drops (the hardware
//! would back-pressure; an endpoint that never reads must not stall the fabric).
//!
//! Tenants (issue 18, `docs/adr/0033-fabric-grants.md`): each endpoint has a [`Grant`] from
//! its host (classes and partitions, the root task's policy; nothing at attach), enforced on
//! every route write, injection and delivery; a direct put lands only in a counter whose
//! owner allowed the sender; refusals are counted, reported to the tenant and, for the host
//! to log, by [`Fabric::take_refusals`]. One call moves a bounded amount of DMA data
//! (`kestrel_bgp::torus::INJECT_BUDGET_*`) and only its caller's: the rest continues in the
//! owner's later calls or when the host calls [`Fabric::poll`] from its timer while
//! [`Fabric::has_pending`], so no tenant's work runs inside another tenant's call.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod api;
pub mod coll;
pub mod dma;
pub mod frame;
pub mod link;
pub mod mem;
pub mod proto;
pub mod quota;
#[cfg(feature = "std")]
pub mod shared;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use kestrel_bgp::{bic, torus};

pub use api::FabricApi;
pub use link::{Hop, Link, LinkError, LocalLink};
pub use mem::{MemError, Memory, VecMemory};

/// An endpoint of the fabric (index 0..MAX_ENDPOINTS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EpId(pub u8);

/// Torus coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Coords {
    pub x: u8,
    pub y: u8,
    pub z: u8,
}

/// Number of endpoints one fabric serves.
pub const MAX_ENDPOINTS: usize = torus::MAX_ENDPOINTS as usize;

/// The indices of the set bits of `mask`, lowest first (endpoint masks are walked on every
/// engine call: only the endpoints concerned, not all of them).
pub fn bits(mut mask: u32) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        (mask != 0).then(|| {
            let k = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            k
        })
    })
}
/// Words of BIC line levels ([`FabricApi::irq_lines`]).
pub const IRQ_WORDS: usize = bic::GROUPS as usize;

/// Why an engine call was refused. Every message says what the caller should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricError {
    /// No such endpoint is attached: attach first (or the endpoint was detached).
    NoSuchEndpoint,
    /// Every endpoint slot is in use: detach one first.
    NoFreeEndpoint,
    /// The memory window must be 1 byte .. MAX_WINDOW (2 GiB) long.
    BadWindow,
    /// No register at this offset of the DMA group page (reserved or unaligned).
    BadRegister,
    /// No such DCR: the fabric has the collective (0xC00), torus (0xC80) and DMA (0xD00) DCRs.
    BadDcr,
    /// The virtual channel must be 0 or 1.
    BadVc,
    /// A frame must be 14..=1518 bytes long.
    BadFrame,
    /// The collective injection FIFO of this VC is full (a reduction waits for other
    /// endpoints): the packet was dropped and the overflow flag set.
    InjectionFull,
    /// The collective header cannot be delivered (reserved ALU opcode, a class this
    /// endpoint's route does not source or its grant does not hold): the exception flag
    /// is set.
    BadHeader,
    /// A window access outside the endpoint's memory window: keep offsets inside it.
    OutsideWindow,
}

impl fmt::Display for FabricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FabricError::NoSuchEndpoint => "no such endpoint: attach first",
            FabricError::NoFreeEndpoint => "every fabric endpoint is in use: detach one first",
            FabricError::BadWindow => "memory window must be 1 byte to 2 GiB",
            FabricError::BadRegister => "no DMA group register at this offset",
            FabricError::BadDcr => "no fabric DCR with this number",
            FabricError::BadVc => "the collective has VC 0 and 1 only",
            FabricError::BadFrame => "a frame is 14 to 1518 bytes",
            FabricError::InjectionFull => "collective injection FIFO full: packet dropped",
            FabricError::BadHeader => "collective header cannot be delivered: packet dropped",
            FabricError::OutsideWindow => "access outside the endpoint's memory window",
        })
    }
}

/// Counters of one endpoint's traffic and trouble.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Torus packets this endpoint's DMA sent, and their payload bytes.
    pub dma_packets_sent: u64,
    pub dma_bytes_sent: u64,
    /// Torus packets delivered to this endpoint (FIFO slots and direct puts), and bytes.
    pub dma_packets_received: u64,
    pub dma_bytes_received: u64,
    /// Collective packets injected and received.
    pub tree_packets_sent: u64,
    pub tree_packets_received: u64,
    /// Frames sent and received.
    pub frames_sent: u64,
    pub frames_received: u64,
    /// Packets or frames dropped on the way to (or from) this endpoint.
    pub drops: u64,
    /// Errors this endpoint caused (bad descriptors, range checks, bad registers).
    pub errors: u64,
}

impl Stats {
    /// Number of counters (for [`proto`]).
    pub const FIELDS: usize = 10;

    /// The counters in declaration order.
    pub fn to_array(&self) -> [u64; Stats::FIELDS] {
        [
            self.dma_packets_sent,
            self.dma_bytes_sent,
            self.dma_packets_received,
            self.dma_bytes_received,
            self.tree_packets_sent,
            self.tree_packets_received,
            self.frames_sent,
            self.frames_received,
            self.drops,
            self.errors,
        ]
    }

    /// The inverse of [`Stats::to_array`].
    pub fn from_array(a: [u64; Stats::FIELDS]) -> Stats {
        Stats {
            dma_packets_sent: a[0],
            dma_bytes_sent: a[1],
            dma_packets_received: a[2],
            dma_bytes_received: a[3],
            tree_packets_sent: a[4],
            tree_packets_received: a[5],
            frames_sent: a[6],
            frames_received: a[7],
            drops: a[8],
            errors: a[9],
        }
    }
}

/// What went wrong last on an endpoint (for the VMM's log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DiagKind {
    /// A DMA address outside the endpoint's window or range-check windows (`addr`).
    RangeCheck = 1,
    /// A descriptor the engine cannot run (`value` = its word 1, or the bad field).
    Descriptor = 2,
    /// FIFO pointers outside their FIFO (`value` = the FIFO number).
    FifoPointers = 3,
    /// A reception FIFO was full; the packet was dropped (`value` = the FIFO number).
    RcvOverflow = 4,
    /// The destination endpoint is not attached (`value` = its X coordinate).
    NoRoute = 5,
    /// The destination's reception map, FIFO enable or counter refused the packet.
    RcvConfig = 6,
    /// A collective header the fabric cannot deliver (`value` = the header).
    TreeHeader = 7,
    /// A collective FIFO overflowed; the packet was dropped (`value` = the VC).
    TreeOverflow = 8,
    /// A collective packet no endpoint receives (`value` = the header).
    TreeNoTarget = 9,
    /// A frame was dropped (no route for its MAC, or the queue was full).
    FrameDropped = 10,
    /// An access to a register that does not exist (`addr` = offset or DCR).
    BadRegister = 11,
    /// A frame whose source MAC is not the sender's was dropped (`addr` = the low 24 bits
    /// of the MAC it claimed).
    FrameSource = 12,
    /// A class route write asked for classes outside the endpoint's [`Grant`]; those bits
    /// were cleared (`addr` = the DCR, `value` = the refused bits).
    RouteRefused = 13,
    /// A packet or frame to an endpoint this one has no grant to reach was dropped (`value`
    /// = the destination's X coordinate, or the collective header).
    Unreachable = 14,
    /// A direct put into a reception counter whose owner did not allow the sender
    /// (`DCR_PUT_FROM`) was dropped (`addr` = the sender's X, `value` = the counter id).
    PutRefused = 15,
}

impl DiagKind {
    /// Whether this is a refusal of the grants or of a sender's identity (what the host
    /// logs, naming the tenant: [`Fabric::take_refusals`]).
    pub const fn is_refusal(self) -> bool {
        matches!(
            self,
            DiagKind::RouteRefused
                | DiagKind::Unreachable
                | DiagKind::PutRefused
                | DiagKind::FrameSource
        )
    }

    /// The kind with code `c` (for [`proto`]).
    pub fn from_code(c: u32) -> Option<DiagKind> {
        Some(match c {
            1 => DiagKind::RangeCheck,
            2 => DiagKind::Descriptor,
            3 => DiagKind::FifoPointers,
            4 => DiagKind::RcvOverflow,
            5 => DiagKind::NoRoute,
            6 => DiagKind::RcvConfig,
            7 => DiagKind::TreeHeader,
            8 => DiagKind::TreeOverflow,
            9 => DiagKind::TreeNoTarget,
            10 => DiagKind::FrameDropped,
            11 => DiagKind::BadRegister,
            12 => DiagKind::FrameSource,
            13 => DiagKind::RouteRefused,
            14 => DiagKind::Unreachable,
            15 => DiagKind::PutRefused,
            _ => return None,
        })
    }
}

/// The last error or drop of an endpoint: a kind and two numbers whose meaning the kind
/// gives. `Display` writes a line the VMM can log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagKind,
    pub addr: u64,
    pub value: u32,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, v) = (self.addr, self.value);
        match self.kind {
            DiagKind::RangeCheck => write!(f, "DMA address {a:#x} outside the range windows"),
            DiagKind::Descriptor => write!(f, "bad DMA descriptor (field {v:#x})"),
            DiagKind::FifoPointers => write!(f, "FIFO {v} pointers outside the FIFO"),
            DiagKind::RcvOverflow => write!(f, "reception FIFO {v} full: packet dropped"),
            DiagKind::NoRoute => write!(f, "no endpoint at X={v}: packet dropped"),
            DiagKind::RcvConfig => {
                write!(f, "receiver refused a packet (map/enable/counter {v:#x})")
            }
            DiagKind::TreeHeader => write!(f, "collective header {v:#010x} not deliverable"),
            DiagKind::TreeOverflow => write!(f, "collective VC{v} FIFO full: packet dropped"),
            DiagKind::TreeNoTarget => write!(f, "collective header {v:#010x} has no target"),
            DiagKind::FrameDropped => write!(f, "frame to MAC ..{a:06x} dropped"),
            DiagKind::BadRegister => write!(f, "no register at {a:#x}"),
            DiagKind::FrameSource => {
                write!(
                    f,
                    "frame from source MAC ..{a:06x}, not the sender's: dropped"
                )
            }
            DiagKind::RouteRefused => write!(
                f,
                "class route bits {v:#010x} at DCR {a:#x} are outside the grant: cleared"
            ),
            DiagKind::Unreachable => {
                write!(f, "no grant to reach {v:#x}: packet dropped")
            }
            DiagKind::PutRefused => write!(
                f,
                "direct put from X={a} into counter {v} not allowed by its owner: dropped"
            ),
        }
    }
}

/// What an endpoint's host allows it on the fabric (docs/adr/0033-fabric-grants.md): the
/// collective classes it may source and target, and the partitions it belongs to. Two
/// endpoints reach each other (torus packets, frames, collective point to point) only when
/// they share a partition; a class route bit outside `classes` cannot be set; a collective
/// packet is delivered only to endpoints granted its class. The root task's policy decides
/// the grants and hands them to whoever hosts the engine (the fabric service, a VMM's
/// private engine), which calls [`Fabric::grant`]. A new endpoint has [`Grant::NONE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// Collective classes (bit c = class c).
    pub classes: u16,
    /// Partitions (bit p = partition p).
    pub partitions: u16,
}

impl Grant {
    /// Nothing: no class, no partition (a new endpoint's grant).
    pub const NONE: Grant = Grant {
        classes: 0,
        partitions: 0,
    };
    /// Every class, every partition: a fabric with one tenant, or a test.
    pub const ALL: Grant = Grant {
        classes: u16::MAX,
        partitions: u16::MAX,
    };

    /// Whether an endpoint with this grant may reach one with `other`.
    pub const fn reaches(&self, other: &Grant) -> bool {
        self.partitions & other.partitions != 0
    }

    /// Whether class `class` is granted.
    pub const fn has_class(&self, class: u32) -> bool {
        class < 16 && self.classes & (1 << class) != 0
    }
}

/// One attached endpoint.
struct Endpoint {
    /// Bus address of the window, and its length.
    base: u64,
    len: u64,
    dma: dma::DmaRegs,
    coll: coll::CollEp,
    frames: VecDeque<Vec<u8>>,
    stats: Stats,
    diag: Option<Diagnostic>,
    /// The irq lines as last reported (for `take_changed`).
    lines: [u32; IRQ_WORDS],
    /// What the host allows it.
    grant: Grant,
    /// Its last refusal not yet taken by the host, and how many since.
    refusal: Option<(Diagnostic, u32)>,
}

/// The fabric: every endpoint's state, the memory back end and the links.
pub struct Fabric<M, L = LocalLink> {
    mem: M,
    link: L,
    eps: Vec<Option<Box<Endpoint>>>,
    /// Endpoints touched by the current call (irq lines to recompute).
    touched: u32,
    /// Endpoints whose lines or frame queue changed since `take_changed`.
    changed: u32,
    /// Endpoints touched since [`Fabric::take_touched`]: only their register mirrors
    /// ([`Fabric::mirror`]) can have changed.
    dirty: u32,
    red: coll::Reductions,
    /// Endpoints whose injection FIFOs have work left (the budget ran out).
    pending: u32,
    /// Payload bytes and descriptors the DMA may still move in this call.
    budget: u64,
    desc_budget: u32,
    /// The endpoint [`Fabric::poll`] serves first next time.
    next_poll: usize,
    /// Endpoints with a refusal the host has not taken.
    refused: u32,
}

/// Which range-check windows an access goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Reads of the injecting endpoint (descriptors, payload).
    Inj,
    /// Writes at the receiving endpoint (FIFO slots, direct put).
    Rcv,
}

impl<M: Memory> Fabric<M, LocalLink> {
    /// A fabric with no endpoints, delivering inside the node only.
    pub fn new(mem: M) -> Self {
        Fabric::with_link(mem, LocalLink)
    }
}

impl<M: Memory, L: Link> Fabric<M, L> {
    /// A fabric with no endpoints and links `link`.
    pub fn with_link(mem: M, link: L) -> Self {
        let mut eps = Vec::with_capacity(MAX_ENDPOINTS);
        eps.resize_with(MAX_ENDPOINTS, || None);
        Fabric {
            mem,
            link,
            eps,
            touched: 0,
            changed: 0,
            dirty: 0,
            red: coll::Reductions::default(),
            pending: 0,
            budget: torus::INJECT_BUDGET_BYTES,
            desc_budget: torus::INJECT_BUDGET_DESCRIPTORS,
            next_poll: 0,
            refused: 0,
        }
    }

    /// The memory back end.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// The memory back end, writable (a test writes descriptors here).
    pub fn memory_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    /// The bus address endpoint slot `k`'s window starts at.
    pub const fn bus_base(k: EpId) -> u64 {
        (k.0 as u64 + 1) * torus::BUS_SLOT
    }

    /// Whether `ep` is attached.
    pub fn is_attached(&self, ep: EpId) -> bool {
        self.slot(ep).is_some()
    }

    // ---- internals shared by the modules ----

    fn slot(&self, ep: EpId) -> Option<&Endpoint> {
        self.eps.get(usize::from(ep.0))?.as_deref()
    }

    fn slot_mut(&mut self, ep: EpId) -> Option<&mut Endpoint> {
        self.eps.get_mut(usize::from(ep.0))?.as_deref_mut()
    }

    /// The endpoints touched since the last call (bit k = `EpId(k)`): every other
    /// endpoint's [`Fabric::mirror`] is as it was then. A host that keeps mirrors refreshes
    /// these.
    pub fn take_touched(&mut self) -> u32 {
        core::mem::take(&mut self.dirty)
    }

    /// `ep`'s register mirror (`proto::mirror`): its DMA group's polled registers and its
    /// collective status words, as `dma_read` and `tree_status` answer them. False (and
    /// `out` untouched) for an endpoint that is not attached.
    pub fn mirror(&self, ep: EpId, out: &mut [u32; proto::mirror::WORDS]) -> bool {
        let Some(e) = self.slot(ep) else { return false };
        e.dma.fill_mirror(out);
        for v in 0..kestrel_bgp::coll::VCS as usize {
            out[proto::mirror::TREE_STATUS + v] = e.coll.status(v);
        }
        true
    }

    fn touch(&mut self, ep: EpId) {
        if usize::from(ep.0) < MAX_ENDPOINTS {
            self.touched |= 1 << ep.0;
        }
    }

    /// The host's timer (issue 18: work charged to its owner): continues the injections
    /// that a call's budget cut short, one call's budget for all of them, every endpoint
    /// with work left getting a turn, round robin from a different endpoint each poll.
    /// Returns whether work is still left, so the host polls again (the fabric service and
    /// the VMM's private engine every millisecond) until it is done. No endpoint's work
    /// runs in another endpoint's call: a call continues only its caller's own injections.
    pub fn poll(&mut self) -> bool {
        let pending = core::mem::take(&mut self.pending);
        let first = self.next_poll;
        self.next_poll = (first + 1) % MAX_ENDPOINTS;
        for i in 0..MAX_ENDPOINTS {
            let k = (first + i) % MAX_ENDPOINTS;
            if pending & (1 << k) != 0 {
                self.run_injection(EpId(k as u8), u32::MAX);
            }
        }
        self.settle();
        self.pending != 0
    }

    /// Whether injections are waiting for budget (see [`Fabric::poll`]).
    pub fn has_pending(&self) -> bool {
        self.pending != 0
    }

    /// Gives `ep` the grant `g` (what its host's policy allows it): its class routes lose
    /// every local source and target bit outside `g.classes` (a reduction waiting for it
    /// may complete), and from now on it reaches only endpoints sharing a partition. Hosts
    /// call this right after [`FabricApi::attach`], and again when the policy changes.
    pub fn grant(&mut self, ep: EpId, g: Grant) -> Result<(), FabricError> {
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        e.grant = g;
        e.coll.clamp_routes(g.classes);
        self.coll_settle_all();
        self.touch(ep);
        self.settle();
        Ok(())
    }

    /// `ep`'s grant (`None` if it is not attached).
    pub fn grant_of(&self, ep: EpId) -> Option<Grant> {
        self.slot(ep).map(|e| e.grant)
    }

    /// Whether `from` may send to `to`: itself always, another attached endpoint when their
    /// grants share a partition.
    pub(crate) fn may_reach(&self, from: EpId, to: EpId) -> bool {
        if from == to {
            return self.slot(from).is_some();
        }
        match (self.slot(from), self.slot(to)) {
            (Some(a), Some(b)) => a.grant.reaches(&b.grant),
            _ => false,
        }
    }

    /// Continues `ep`'s own pending injections (in `ep`'s call, with that call's budget).
    fn own_work(&mut self, ep: EpId) {
        if usize::from(ep.0) < MAX_ENDPOINTS && self.pending & (1 << ep.0) != 0 {
            self.pending &= !(1 << ep.0);
            self.run_injection(ep, u32::MAX);
        }
    }

    /// Ends an engine call: recomputes the lines of every touched endpoint and records
    /// changes, and refills the DMA budget for the next call. Pending injections are not
    /// continued here: each runs in its owner's calls ([`Fabric::own_work`]) or at
    /// [`Fabric::poll`].
    fn settle(&mut self) {
        self.budget = torus::INJECT_BUDGET_BYTES;
        self.desc_budget = torus::INJECT_BUDGET_DESCRIPTORS;
        let touched = core::mem::take(&mut self.touched);
        self.dirty |= touched;
        for k in bits(touched) {
            let ep = EpId(k as u8);
            let now = self.irq_lines(ep);
            if let Some(e) = self.slot_mut(ep) {
                if e.lines != now {
                    e.lines = now;
                    self.changed |= 1 << k;
                }
            }
        }
    }

    /// Records a drop on `ep`.
    fn note_drop(&mut self, ep: EpId, kind: DiagKind, addr: u64, value: u32) {
        if let Some(e) = self.slot_mut(ep) {
            e.stats.drops += 1;
        }
        self.note(ep, Diagnostic { kind, addr, value });
    }

    /// Records an error `ep` caused (no register bit: the caller sets those).
    fn note_error(&mut self, ep: EpId, kind: DiagKind, addr: u64, value: u32) {
        if let Some(e) = self.slot_mut(ep) {
            e.stats.errors += 1;
        }
        self.note(ep, Diagnostic { kind, addr, value });
    }

    /// Keeps `d` as `ep`'s last diagnostic, and as its last refusal if it is one.
    fn note(&mut self, ep: EpId, d: Diagnostic) {
        if let Some(e) = self.slot_mut(ep) {
            e.diag = Some(d);
            if d.kind.is_refusal() {
                let n = e.refusal.map_or(0, |r| r.1);
                e.refusal = Some((d, n.saturating_add(1)));
                self.refused |= 1 << ep.0;
            }
        }
        self.touch(ep);
    }

    /// Whether any refusal waits for [`Fabric::take_refusals`] (a host asks before every
    /// call's bookkeeping).
    pub fn has_refusals(&self) -> bool {
        self.refused != 0
    }

    /// The host's side of refusals (issue 18: "a counted drop and one rate-limited log line
    /// naming the tenant"): for each endpoint refused something since the last call, its
    /// last refusal and how many there were; the host, which knows whose endpoint it is,
    /// logs them under its rate limit. Independent of [`FabricApi::take_diagnostic`],
    /// which is the tenant's own.
    pub fn take_refusals(&mut self, mut each: impl FnMut(EpId, Diagnostic, u32)) {
        let r = core::mem::take(&mut self.refused);
        for k in bits(r) {
            if let Some(e) = self.eps[k].as_deref_mut() {
                if let Some((d, n)) = e.refusal.take() {
                    each(EpId(k as u8), d, n);
                }
            }
        }
    }

    fn bad_register(&mut self, ep: EpId, at: u64) {
        self.note_error(ep, DiagKind::BadRegister, at, 0);
    }

    /// Where bus range `[bus, bus + len)` lies in `ep`'s window, if the window and one of
    /// `ep`'s range-check windows of direction `dir` hold all of it.
    fn check(&self, ep: EpId, bus: u64, len: u64, dir: Dir) -> Option<u64> {
        let e = self.slot(ep)?;
        let end = bus.checked_add(len)?;
        if bus < e.base || end > e.base + e.len {
            return None;
        }
        if !e.dma.in_range_window(bus, end, dir) {
            return None;
        }
        Some(bus - e.base)
    }

    /// Reads `buf` at bus address `bus` for `ep` (injection direction); `Err(bus)` if the
    /// range check or the memory refuses.
    fn read_bus(&mut self, ep: EpId, bus: u64, buf: &mut [u8]) -> Result<(), u64> {
        let off = self.check(ep, bus, buf.len() as u64, Dir::Inj).ok_or(bus)?;
        self.mem.read(ep, off, buf).map_err(|_| bus)
    }

    /// Writes `data` at bus address `bus` for `ep` (reception direction).
    fn write_bus(&mut self, ep: EpId, bus: u64, data: &[u8]) -> Result<(), u64> {
        let off = self
            .check(ep, bus, data.len() as u64, Dir::Rcv)
            .ok_or(bus)?;
        self.mem.write(ep, off, data).map_err(|_| bus)
    }
}

/// The engine is the fabric, in-process: every call runs to completion synchronously.
impl<M: Memory, L: Link> FabricApi for Fabric<M, L> {
    type Error = FabricError;
    /// The window's length; its bytes are the [`Memory`]'s.
    type Window = u64;

    /// Attaches a new endpoint with a memory window of `window_len` bytes; returns its id
    /// and the window's bus base (the lowest free slot; its registers are at reset).
    fn attach(&mut self, window_len: u64) -> Result<(EpId, u64), FabricError> {
        if window_len == 0 || window_len > torus::MAX_WINDOW {
            return Err(FabricError::BadWindow);
        }
        let k = self
            .eps
            .iter()
            .position(Option::is_none)
            .ok_or(FabricError::NoFreeEndpoint)?;
        let id = EpId(k as u8);
        let base = Self::bus_base(id);
        self.eps[k] = Some(Box::new(Endpoint {
            base,
            len: window_len,
            dma: dma::DmaRegs::reset(base, window_len),
            coll: coll::CollEp::reset(),
            frames: VecDeque::new(),
            stats: Stats::default(),
            diag: None,
            lines: [0; IRQ_WORDS],
            grant: Grant::NONE,
            refusal: None,
        }));
        // Sources of reductions changed: one may now be complete.
        self.coll_settle_all();
        self.settle();
        Ok((id, base))
    }

    /// Detaches `ep`: drops its queues and pending reduction contributions, frees its
    /// coordinates. Unknown endpoints are ignored.
    fn detach(&mut self, ep: EpId) {
        if let Some(slot) = self.eps.get_mut(usize::from(ep.0)) {
            if slot.take().is_some() {
                self.red.forget(ep);
                self.changed &= !(1 << ep.0);
                self.pending &= !(1 << ep.0);
                self.refused &= !(1 << ep.0);
                self.coll_settle_all();
                self.settle();
            }
        }
    }

    /// The bus range of `ep`'s window: `(base, len)`.
    fn window(&self, ep: EpId) -> Option<(u64, u64)> {
        self.slot(ep).map(|e| (e.base, e.len))
    }

    /// Torus coordinates of `ep`: (k, 0, 0).
    fn coords(&self, ep: EpId) -> Coords {
        Coords {
            x: ep.0,
            y: 0,
            z: 0,
        }
    }

    /// Collective node address of `ep`: k.
    fn node_address(&self, ep: EpId) -> u32 {
        u32::from(ep.0)
    }

    /// Reads a register of `ep`'s DMA group page (offset 0..0x1000, word aligned).
    fn dma_read(&mut self, ep: EpId, offset: u32) -> Result<u32, FabricError> {
        // A driver polling a counter or HEAD must see its own pending injections progress.
        if self.pending & (1u32 << (ep.0 & 31)) != 0 {
            self.own_work(ep);
            self.settle();
        }
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        match e.dma.read(offset) {
            Some(v) => Ok(v),
            None => {
                self.bad_register(ep, u64::from(offset));
                self.settle();
                Err(FabricError::BadRegister)
            }
        }
    }

    /// Writes a register of `ep`'s DMA group page; a TAIL or activate write runs the
    /// injection before returning.
    fn dma_write(&mut self, ep: EpId, offset: u32, value: u32) -> Result<(), FabricError> {
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        let r = match e.dma.write(offset, value) {
            Some(dma::Effect::Inject(mask)) => {
                self.run_injection(ep, mask);
                Ok(())
            }
            Some(dma::Effect::None) => Ok(()),
            None => {
                self.bad_register(ep, u64::from(offset));
                Err(FabricError::BadRegister)
            }
        };
        self.own_work(ep);
        self.touch(ep);
        self.settle();
        r
    }

    /// Reads a DCR as `ep` sees it: collective 0xC00..0xC7F, torus 0xC80..0xCFF, DMA
    /// 0xD00..0xDFF. Reading PRXF or PIXF clears it.
    fn dcr_read(&mut self, ep: EpId, dcr: u32) -> Result<u32, FabricError> {
        let k = ep.0;
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        let r = if dma::is_dma_dcr(dcr) {
            Ok(e.dma.dcr_read(dcr))
        } else if dma::is_torus_dcr(dcr) {
            Ok(dma::torus_dcr_read(&e.dma, k, dcr))
        } else if coll::is_coll_dcr(dcr) {
            Ok(e.coll.dcr_read(k, dcr))
        } else {
            Err(FabricError::BadDcr)
        };
        if r.is_err() {
            self.bad_register(ep, u64::from(dcr));
        }
        self.touch(ep);
        self.settle();
        r
    }

    /// Writes a DCR as `ep` sees it. Enabling injection FIFOs (or leaving DMA reset) runs
    /// pending injections; a class-route write may complete a reduction.
    fn dcr_write(&mut self, ep: EpId, dcr: u32, value: u32) -> Result<(), FabricError> {
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        let r = if dma::is_dma_dcr(dcr) {
            if e.dma.dcr_write(dcr, value) {
                self.run_injection(ep, u32::MAX);
            }
            Ok(())
        } else if dma::is_torus_dcr(dcr) {
            e.dma.torus_dcr_write(dcr, value);
            Ok(())
        } else if coll::is_coll_dcr(dcr) {
            let classes = e.grant.classes;
            let w = e.coll.dcr_write(dcr, value, classes);
            if w.refused != 0 {
                self.note_error(ep, DiagKind::RouteRefused, u64::from(dcr), w.refused);
            }
            if w.routes_changed {
                self.coll_settle_all();
            }
            Ok(())
        } else {
            self.bad_register(ep, u64::from(dcr));
            Err(FabricError::BadDcr)
        };
        self.own_work(ep);
        self.touch(ep);
        self.settle();
        r
    }

    /// The BIC lines `ep`'s devices assert: bit `31 - i` of word `w` is BIC irq
    /// `w * 32 + i` (MSB first, as the BIC). All zero for an unknown endpoint.
    fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS] {
        let mut lines = [0; IRQ_WORDS];
        if let Some(e) = self.slot(ep) {
            let mut set = |irq: u32| {
                if let Some(w) = lines.get_mut((irq / bic::LINES_PER_GROUP) as usize) {
                    *w |= bic::line_mask(irq);
                }
            };
            e.dma.irqs(&mut set);
            e.coll.irqs(&mut set);
        }
        lines
    }

    /// Endpoints whose irq lines or frame queue changed since the last call (bit k =
    /// `EpId(k)`), and forgets them.
    fn take_changed(&mut self) -> Result<u32, FabricError> {
        Ok(core::mem::take(&mut self.changed))
    }

    /// `ep`'s counters (zero for an unknown endpoint).
    fn stats(&self, ep: EpId) -> Stats {
        self.slot(ep).map(|e| e.stats).unwrap_or_default()
    }

    /// The last error or drop on `ep` since the previous call, if any.
    fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic> {
        self.slot_mut(ep).and_then(|e| e.diag.take())
    }

    fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        header: u32,
        payload: &[u8; coll::PAYLOAD],
    ) -> Result<(), FabricError> {
        self.coll_inject(ep, vc, header, payload)
    }

    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        payload: &mut [u8; coll::PAYLOAD],
    ) -> Result<Option<u32>, FabricError> {
        Ok(self.coll_receive(ep, vc, payload))
    }

    fn tree_status(&self, ep: EpId, vc: usize) -> u32 {
        self.coll_status(ep, vc)
    }

    fn frame_send(&mut self, ep: EpId, frame: &[u8]) -> Result<(), FabricError> {
        self.send_frame(ep, frame)
    }

    fn frame_receive(&mut self, ep: EpId, buf: &mut [u8]) -> Result<Option<usize>, FabricError> {
        Ok(self.receive_frame(ep, buf))
    }

    fn frames_queued(&self, ep: EpId) -> usize {
        self.queued_frames(ep)
    }

    fn mem_read(&mut self, ep: EpId, offset: u32, buf: &mut [u8]) -> Result<(), FabricError> {
        self.mem
            .read(ep, u64::from(offset), buf)
            .map_err(|_| FabricError::OutsideWindow)
    }

    fn mem_write(&mut self, ep: EpId, offset: u32, data: &[u8]) -> Result<(), FabricError> {
        self.mem
            .write(ep, u64::from(offset), data)
            .map_err(|_| FabricError::OutsideWindow)
    }
}
