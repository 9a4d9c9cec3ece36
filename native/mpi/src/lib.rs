//! The MPI library's core (issue 19; protocol in ADR 0035): point-to-point messages with
//! MPI's matching (communicator context, source, tag, wildcards, no overtaking per pair),
//! nonblocking requests, communicators (WORLD, SELF, dup, split, free) and collectives,
//! over one endpoint's DMA group (`kestrel-spi`) and the collective network, generic over
//! [`FabricApi`] so native programs run it on the fabric service and host tests on the
//! engine.
//!
//! Every call returns `Result<_, Error>`: the core never aborts. MPI's default
//! (MPI_ERRORS_ARE_FATAL) is the faces' business: the Rust face (`kestrel-mpi-rs`) panics
//! with the error's message, a C face would call `MPI_Abort` unless MPI_ERRORS_RETURN.
//!
//! Blocking calls loop over [`Mpi::progress`] and the environment's `wait` (on the target:
//! sleep until the fabric service's event). A blocking call that sees no progress of any
//! kind for `Env::deadlock_ns` returns [`Error::Deadlock`] and leaves one line in
//! [`Mpi::deadlock_report`] naming the rank and the call it waits in.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod coll;
pub mod dtype;
pub mod wire;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use kestrel_bgp::{coll as bgpcoll, dma, torus};
use kestrel_fabric::{EpId, FabricApi, FabricError};
use kestrel_spi::{layout, link_header, Coords, DmaGroup, LINK_HDR, MAX_MSG, PKT_PAYLOAD};
use wire::{Hdr, CREDIT, CTL_COST, CTS, EAGER, HDR, PROTO, RTS};

pub use dtype::{combine, Datatype, Op};

/// MPI_ANY_SOURCE.
pub const ANY_SOURCE: i32 = -1;
/// MPI_ANY_TAG.
pub const ANY_TAG: i32 = -1;
/// MPI_PROC_NULL: sends and receives with it complete at once.
pub const PROC_NULL: i32 = -2;
/// MPI_TAG_UB: the largest tag.
pub const TAG_UB: i32 = 0x3fff_ffff;
/// The collective VC the ALU reductions use (bgnet uses VC 0).
pub const VC: usize = 1;
/// How much longer each rank number waits before it calls a wait a deadlock (see
/// `Mpi::stall_check`).
pub const DEADLOCK_STAGGER_NS: u64 = 20_000_000;
/// The class route of the ALU reductions and of the start-up census.
pub const CLASS: u32 = bgpcoll::MPI_CLASS;
/// Most bytes one direct put moves (one engine call moves at most 1 MiB): a stage.
pub const CHUNK_MAX: usize = layout::STAGE_MAX as usize;
/// Window offset from which a program may keep its own memory (its heap) in its window:
/// large messages from and into memory there go without a copy (`layout::FREE`).
pub const WINDOW_FREE: u32 = layout::FREE;
/// Reception-ring bytes kept for messages that are not MPI's (bgnet frames).
pub const FOREIGN_RESERVE: u32 = 4096;
/// Messages kept for communicators not made yet before more are dropped (counted).
pub const EARLY_MAX: usize = 4096;
/// Non-MPI messages kept for [`Mpi::take_foreign`] before more are dropped (counted).
pub const FOREIGN_QUEUE: usize = 64;
/// The reception counter a rendezvous receive uses.
const RDV_COUNTER: u32 = 0;
/// Least time between two start-up censuses that did not hear every rank.
const CENSUS_EVERY_NS: u64 = 1_000_000;
/// 64-bit operands in one collective packet (and so the most ranks a census counts).
pub(crate) const ALU_SLOTS: usize = 32;
/// A census slot's present bit.
const CENSUS_PRESENT: u64 = 1 << 63;

/// Rank's census slot: present, the job size it was started with, its coordinates.
fn census_word(size: u32, c: Coords) -> u64 {
    CENSUS_PRESENT
        | u64::from(size) << 32
        | u64::from(c.x) << 16
        | u64::from(c.y) << 8
        | u64::from(c.z)
}

/// A census slot's (size, coordinates), if its rank took part.
fn census_read(v: u64) -> Option<(u32, Coords)> {
    let c = Coords {
        x: (v >> 16) as u8,
        y: (v >> 8) as u8,
        z: v as u8,
    };
    (v & CENSUS_PRESENT != 0).then_some(((v >> 32) as u32 & 0xff, c))
}

/// Why a call failed (MPI's error classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// MPI_ERR_RANK: no such rank in the communicator.
    Rank,
    /// MPI_ERR_TAG: a tag below 0 (other than ANY_TAG where allowed) or above TAG_UB.
    Tag,
    /// MPI_ERR_TRUNCATE: the message is longer than the receive buffer.
    Truncate,
    /// MPI_ERR_COUNT: a negative count, or buffers of the wrong size.
    Count,
    /// MPI_ERR_TYPE: an unknown datatype.
    Type,
    /// MPI_ERR_OP: an unknown operation, or one not defined on the datatype.
    Op,
    /// MPI_ERR_COMM: an unknown or freed communicator.
    Comm,
    /// MPI_ERR_REQUEST: an unknown or finished request.
    Request,
    /// MPI_ERR_ROOT: a root that is no rank of the communicator.
    Root,
    /// MPI_ERR_OTHER: the fabric refused a call.
    Fabric(FabricError),
    /// MPI_ERR_OTHER: a blocking call saw no progress for `Env::deadlock_ns`; see
    /// [`Mpi::deadlock_report`].
    Deadlock,
    /// MPI_ERR_INTERN: a peer broke the protocol (a CTS for no send).
    Protocol,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::Rank => write!(f, "MPI_ERR_RANK: no such rank in the communicator"),
            Error::Tag => write!(f, "MPI_ERR_TAG: tags are 0..={TAG_UB}"),
            Error::Truncate => write!(
                f,
                "MPI_ERR_TRUNCATE: message longer than the receive buffer"
            ),
            Error::Count => write!(
                f,
                "MPI_ERR_COUNT: negative count or buffer sizes that do not match"
            ),
            Error::Type => write!(f, "MPI_ERR_TYPE: unknown datatype"),
            Error::Op => write!(
                f,
                "MPI_ERR_OP: unknown operation or not defined on the datatype"
            ),
            Error::Comm => write!(f, "MPI_ERR_COMM: unknown or freed communicator"),
            Error::Request => write!(f, "MPI_ERR_REQUEST: unknown or finished request"),
            Error::Root => write!(f, "MPI_ERR_ROOT: root is no rank of the communicator"),
            Error::Fabric(e) => write!(f, "MPI_ERR_OTHER: fabric: {e}"),
            Error::Deadlock => write!(f, "MPI_ERR_OTHER: deadlock (no progress)"),
            Error::Protocol => write!(f, "MPI_ERR_INTERN: protocol violation by a peer"),
        }
    }
}

/// A message's envelope as a receive saw it (MPI_Status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank in the communicator (PROC_NULL for a receive from PROC_NULL).
    pub source: i32,
    pub tag: i32,
    /// MPI_SUCCESS (`None`) or the error of this request (Waitall's MPI_ERR_IN_STATUS).
    pub error: Option<Error>,
    /// Bytes received.
    pub bytes: usize,
}

impl Status {
    const EMPTY: Status = Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: None,
        bytes: 0,
    };

    /// MPI_Get_count: whole elements of `dt` received, `None` (MPI_UNDEFINED) if the
    /// bytes are not a whole number of them.
    pub fn count(&self, dt: Datatype) -> Option<usize> {
        self.bytes
            .is_multiple_of(dt.size())
            .then(|| self.bytes / dt.size())
    }
}

/// A communicator handle (MPI_Comm).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Comm(pub u32);

/// MPI_COMM_WORLD.
pub const WORLD: Comm = Comm(0);
/// MPI_COMM_SELF.
pub const SELF: Comm = Comm(1);

/// A completed request: its status and, for a receive, the data.
pub type Completed = (Status, Vec<u8>);

/// A request handle (MPI_Request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request(pub u32);

/// What the core needs from its surroundings.
pub struct Env<P> {
    /// Sleeps until the fabric may have news (or a while).
    pub wait: fn(&mut P),
    /// A clock in nanoseconds (MPI_Wtime, the deadlock timeout).
    pub now_ns: fn() -> u64,
    /// A blocking call that sees no progress for this long returns `Error::Deadlock`.
    pub deadlock_ns: u64,
}

/// Counters for tests and reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Messages that were not MPI's taken off the ring (kept for `take_foreign`).
    pub foreign: u32,
    /// Of those, dropped because [`FOREIGN_QUEUE`] were waiting.
    pub foreign_dropped: u32,
    /// Messages from no rank of the job, malformed ones, duplicates.
    pub bad: u32,
    /// Credit-only messages sent.
    pub credit_msgs: u32,
    /// Collective packets on [`VC`] ignored while waiting for a reduction result.
    pub ignored: u32,
    /// Rendezvous chunks received.
    pub chunks: u32,
    /// Of those, chunks the DMA put straight into the receive's memory (in the window).
    pub chunks_direct: u32,
    /// Rendezvous chunks this rank put straight from the send's memory (in the window).
    pub puts_direct: u32,
    /// Sends that waited for credits at least once.
    pub credit_waits: u32,
    /// Eager sends turned into rendezvous because the receiver's data pool was full.
    pub eager_as_rts: u32,
}

/// The flow-control numbers this job runs with (ADR 0035).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Ring bytes of the control pool (RTS, CTS), per sender, returned when taken in.
    pub q_ctl: u32,
    /// Ring bytes of the data pool (eager messages), per sender, returned when matched:
    /// also the most unmatched eager bytes a receiver holds for one sender.
    pub q_data: u32,
    /// The largest payload sent eagerly; longer ones go by rendezvous.
    pub eager_max: usize,
    /// Window offset and length of the send and the receive stages of rendezvous.
    pub send_stage: (u32, u32),
    pub recv_stage: (u32, u32),
}

struct CommData {
    ctx: u32,
    /// World rank of each rank.
    group: Vec<u32>,
    rank: u32,
}

#[derive(Default)]
struct Peer {
    send_seq: BTreeMap<u32, u32>,
    recv_seq: BTreeMap<u32, u32>,
    used_ctl: u32,
    used_data: u32,
    freed_ctl: u32,
    freed_data: u32,
    out_ctl: VecDeque<Out>,
    out_data: VecDeque<Out>,
    holdback: BTreeMap<(u32, u32), (Hdr, Vec<u8>, u32)>,
    waited: bool,
}

struct Out {
    hdr: Hdr,
    payload: Vec<u8>,
    req: Option<u32>,
}

enum Unexp {
    Eager { data: Vec<u8>, cost: u32 },
    Rts { sid: u32, len: u64, stage: u32 },
}

struct Incoming {
    ctx: u32,
    src_world: u32,
    src: i32,
    tag: i32,
    body: Unexp,
}

enum State {
    /// An eager send waiting for credits.
    SendEager,
    /// A rendezvous send: `data` waits for CTS from `dest`; or, for a blocking send of
    /// memory inside the window (`at`: window offset and length), nothing is copied and
    /// `data` is empty: the chunks are put from the caller's buffer, which the call holds.
    SendRdv {
        dest: u32,
        data: Vec<u8>,
        at: Option<(u32, usize)>,
    },
    /// A posted receive of at most `cap` bytes; `into`: the window offset of a blocking
    /// receive's buffer (inside the window), where a rendezvous message is put directly.
    Recv {
        ctx: u32,
        src: i32,
        tag: i32,
        cap: usize,
        into: Option<u32>,
    },
    /// A matched rendezvous receive, in `rdv_wait` or active.
    RecvRdv {
        src_world: u32,
        src: i32,
        tag: i32,
        sid: u32,
        len: usize,
        stage: u32,
        data: Vec<u8>,
        into: Option<u32>,
        off: usize,
    },
    Done(Status, Vec<u8>),
}

struct Req {
    state: State,
}

/// A rendezvous receive whose chunk of `n` bytes is on its way, into the receive stage or
/// (`direct`) straight into the receive's memory in the window.
struct Active {
    req: u32,
    n: usize,
    direct: bool,
}

/// One rank's MPI library.
pub struct Mpi<P: FabricApi> {
    p: P,
    env: Env<P>,
    dma: DmaGroup,
    rank: u32,
    pub(crate) size: u32,
    coords: Vec<Coords>,
    comms: BTreeMap<u32, CommData>,
    ctx_comm: BTreeMap<u32, u32>,
    next_comm: u32,
    next_ctx: u32,
    peers: Vec<Peer>,
    reasm: BTreeMap<u32, (usize, usize, Vec<u8>)>,
    reqs: BTreeMap<u32, Req>,
    next_req: u32,
    posted: Vec<u32>,
    unexpected: VecDeque<Incoming>,
    rdv_wait: VecDeque<u32>,
    active: Option<Active>,
    limits: Limits,
    foreign: VecDeque<(u32, Vec<u8>)>,
    stats: Stats,
    last_progress: u64,
    report: Option<String>,
    start_ns: u64,
    /// Inside an ALU reduction: the VC's packets are left for it.
    pub(crate) in_alu: bool,
    /// EAGER and RTS messages (in order per sender) on a context this rank has not made
    /// yet: a peer that finished MPI_Comm_dup or _split sends on the new communicator while
    /// we are still in it. Delivered when the communicator is made ([`Mpi::made`]).
    early: Vec<(u32, Hdr, Vec<u8>, u32)>,
    /// The start-up census is done: every rank's coordinates are known, so torus
    /// messages can be told apart by sender. Until then they stay in the ring.
    wired: bool,
}

fn bit(i: u32) -> u32 {
    0x8000_0000 >> (i % 32)
}

fn fab<E: Into<FabricError>>(e: E) -> Error {
    Error::Fabric(e.into())
}

impl<P: FabricApi> Mpi<P> {
    /// MPI_Init: opens endpoint `ep` (window at bus `bus`) as rank `rank` of `size`: joins
    /// the collective class [`CLASS`], programs the DMA group, and waits (censuses on the
    /// class's ALU) until every rank has done the same, learning where each one is.
    pub fn init(
        mut p: P,
        ep: EpId,
        bus: u64,
        rank: u32,
        size: u32,
        env: Env<P>,
    ) -> Result<Self, Error> {
        if size == 0 || size > 32 || rank >= size {
            return Err(Error::Rank);
        }
        p.join_classes(ep, 1 << CLASS).map_err(fab)?;
        let me = p.coords(ep);
        let me = Coords {
            x: me.x,
            y: me.y,
            z: me.z,
        };
        let dma = DmaGroup::setup(&mut p, ep, bus, me).map_err(fab)?;
        // A rendezvous chunk's arrival (the counter reaching zero) raises an interrupt line,
        // so a rank sleeping until its endpoint changes wakes for it.
        let ie = dma::DCR_BASE + dma::DCR_RCV_CTR_IRQ_EN;
        let v = p.dcr_read(ep, ie).map_err(fab)?;
        p.dcr_write(
            ep,
            ie,
            v | dma::ctr_subgroup_bit(dma::VM_GROUP, RDV_COUNTER),
        )
        .map_err(fab)?;
        let win = p
            .window(ep)
            .map(|w| w.1 as u32)
            .unwrap_or(layout::MIN_WINDOW);
        let now = (env.now_ns)();
        let mut m = Mpi {
            p,
            env,
            dma,
            rank,
            size,
            coords: vec![me; size as usize],
            comms: BTreeMap::new(),
            ctx_comm: BTreeMap::new(),
            next_comm: 2,
            next_ctx: 4,
            peers: (0..size).map(|_| Peer::default()).collect(),
            reasm: BTreeMap::new(),
            reqs: BTreeMap::new(),
            next_req: 1,
            posted: Vec::new(),
            unexpected: VecDeque::new(),
            rdv_wait: VecDeque::new(),
            active: None,
            limits: Self::limits(size, win),
            foreign: VecDeque::new(),
            stats: Stats::default(),
            last_progress: now,
            report: None,
            start_ns: now,
            in_alu: false,
            early: Vec::new(),
            wired: false,
        };
        m.add_comm(WORLD.0, 0, (0..size).collect());
        m.add_comm(SELF.0, 2, vec![rank]);
        m.census()?;
        m.wired = true;
        Ok(m)
    }

    /// The flow-control numbers for `size` ranks and a window of `win` bytes (ADR 0035).
    pub fn limits(size: u32, win: u32) -> Limits {
        let ring = layout::RX_BYTES - 16 - FOREIGN_RESERVE;
        let per = ring / size.max(1);
        // At most two credit-only messages per pool may wait in the ring (each returns at
        // least half a pool).
        let avail = per.saturating_sub(4 * CTL_COST);
        let q_ctl = (avail / 4 / 32 * 32).max(2 * CTL_COST);
        let q_data = avail.saturating_sub(q_ctl) / 32 * 32;
        // An eager message costs at most half the data pool, so a sender it blocks has
        // more than half outstanding, and the receiver returns it (threshold: half).
        let mut eager_max = MAX_MSG - LINK_HDR - HDR;
        while eager_max > 0 && wire::ring_cost(LINK_HDR + HDR + eager_max) > q_data / 2 {
            eager_max -= 1;
        }
        let user = layout::USER;
        let free = win.saturating_sub(user).min(2 * layout::STAGE_MAX) / 2 / 16 * 16;
        Limits {
            q_ctl,
            q_data,
            eager_max,
            send_stage: (user, free),
            recv_stage: (user + free, free),
        }
    }

    /// MPI_Init's wire-up: censuses on the collective ALU until one hears every rank.
    ///
    /// Each census is one OR reduction of 32 64-bit slots on [`CLASS`]; rank `r` fills slot
    /// `r` with [`census_word`] (present bit, job size, torus coordinates) and the others
    /// with 0. The engine completes a reduction when every endpoint *sourcing* the class has
    /// contributed, so a census taken before some rank joined the class lacks that rank, and
    /// the ones that took part contribute again ([`CENSUS_EVERY_NS`] later). Once the last
    /// rank has joined, the next census needs everyone: it is the first complete one for
    /// every rank alike, and each rank's single waiting contribution is consumed by it, so
    /// nothing is left on the VC. No broadcasts are involved: there is nothing to overflow a
    /// reception FIFO that a later reduction result needs (the start-up hellos this
    /// replaced could, and lost results: ADR 0035).
    fn census(&mut self) -> Result<(), Error> {
        let size = self.size;
        let all = u32::MAX >> (32 - size);
        let t0 = self.now();
        loop {
            let mut vals = [0u64; ALU_SLOTS];
            vals[self.rank as usize] = census_word(size, self.dma.me);
            self.alu_round_in("MPI_Init", bgpcoll::OP_OR, &mut vals)?;
            let mut heard = 0u32;
            for (r, &v) in vals.iter().enumerate().take(size as usize) {
                let Some((n, c)) = census_read(v) else {
                    continue;
                };
                if n != size {
                    // Two jobs share the class, or a rank was started with another size.
                    let mut s = String::new();
                    let _ = write!(
                        s,
                        "rank {} in MPI_Init: rank {r} says the job has {n} ranks, not {size}",
                        self.rank
                    );
                    self.report = Some(s);
                    return Err(Error::Rank);
                }
                self.coords[r] = c;
                heard |= 1 << r;
            }
            if heard & all == all {
                return Ok(());
            }
            let now = self.now();
            if now.saturating_sub(t0) > self.env.deadlock_ns {
                let mut s = String::new();
                let _ = write!(
                    s,
                    "rank {} waits in MPI_Init (heard ranks {heard:#x} of {size}) with no \
                     progress for {} ms: deadlock",
                    self.rank,
                    self.env.deadlock_ns / 1_000_000
                );
                self.report = Some(s);
                return Err(Error::Deadlock);
            }
            // Not everyone has joined yet: do not spin reductions at full speed meanwhile.
            while self.now().saturating_sub(now) < CENSUS_EVERY_NS {
                (self.env.wait)(&mut self.p);
            }
        }
    }

    fn add_comm(&mut self, handle: u32, ctx: u32, group: Vec<u32>) {
        let rank = group.iter().position(|&w| w == self.rank).unwrap_or(0) as u32;
        self.comms.insert(handle, CommData { ctx, group, rank });
        self.ctx_comm.insert(ctx, handle);
    }

    /// The fabric (for the program's other uses of its endpoint).
    pub fn fabric(&mut self) -> &mut P {
        &mut self.p
    }

    /// The DMA group (for bgnet traffic next to MPI's: see [`Mpi::take_foreign`]).
    pub fn dma(&mut self) -> (&mut P, &mut DmaGroup) {
        (&mut self.p, &mut self.dma)
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The flow-control numbers.
    pub fn limits_now(&self) -> Limits {
        self.limits
    }

    /// MPI_Wtime.
    pub fn wtime(&self) -> f64 {
        ((self.env.now_ns)() - self.start_ns) as f64 / 1e9
    }

    /// The line a deadlocked blocking call left: "rank R waits in CALL (...)".
    pub fn deadlock_report(&self) -> Option<&str> {
        self.report.as_deref()
    }

    /// A message that arrived on the torus but is not MPI's: (software word 3 with the
    /// sender's key, bytes with the link header).
    pub fn take_foreign(&mut self) -> Option<(u32, Vec<u8>)> {
        self.foreign.pop_front()
    }

    /// The world rank.
    pub fn world_rank(&self) -> u32 {
        self.rank
    }

    fn comm(&self, c: Comm) -> Result<&CommData, Error> {
        self.comms.get(&c.0).ok_or(Error::Comm)
    }

    /// MPI_Comm_rank.
    pub fn rank(&self, c: Comm) -> Result<i32, Error> {
        Ok(self.comm(c)?.rank as i32)
    }

    /// MPI_Comm_size.
    pub fn size(&self, c: Comm) -> Result<i32, Error> {
        Ok(self.comm(c)?.group.len() as i32)
    }

    /// The world rank of `c`'s rank `r`.
    pub fn world_of(&self, c: Comm, r: i32) -> Result<u32, Error> {
        let g = &self.comm(c)?.group;
        usize::try_from(r)
            .ok()
            .and_then(|r| g.get(r))
            .copied()
            .ok_or(Error::Rank)
    }

    // ---- progress ----------------------------------------------------------------

    fn now(&self) -> u64 {
        (self.env.now_ns)()
    }

    fn stall_check(
        &mut self,
        call: &str,
        detail: impl FnOnce(&Self, &mut String),
    ) -> Result<(), Error> {
        // Ranks that wait on each other reach the timeout together; rank r waits r times
        // `DEADLOCK_STAGGER_NS` longer, so the lowest reports first and the others have
        // time to hear that it ended the job (one line per job, not one per rank).
        let limit = self
            .env
            .deadlock_ns
            .saturating_add(u64::from(self.rank) * DEADLOCK_STAGGER_NS);
        if self.now().saturating_sub(self.last_progress) <= limit {
            return Ok(());
        }
        let mut s = String::new();
        let _ = write!(s, "rank {} waits in {call} (", self.rank);
        detail(self, &mut s);
        let _ = write!(
            s,
            ") with no progress for {} ms: deadlock",
            self.env.deadlock_ns / 1_000_000
        );
        self.report = Some(s);
        Err(Error::Deadlock)
    }

    /// Blocks until `done` says so, progressing; `call` and `detail` name the wait for a
    /// deadlock report (`detail` runs only then: formatting on every wait cost more than
    /// a small message's whole trip).
    fn block(
        &mut self,
        call: &str,
        detail: impl Fn(&Self, &mut String),
        mut done: impl FnMut(&mut Self) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let t = self.now();
        self.last_progress = self.last_progress.max(t);
        loop {
            let moved = self.progress()?;
            if done(self)? {
                return Ok(());
            }
            self.stall_check(call, &detail)?;
            // Sleep only when this round moved nothing: what it sent (to ourselves, say)
            // may already have arrived, and a fabric that mirrors our registers does not
            // count our own call's effects as news that would wake us.
            if !moved {
                (self.env.wait)(&mut self.p);
            }
        }
    }

    /// Moves everything that can move: takes in what arrived, continues rendezvous, sends
    /// what credits allow. True if anything moved.
    pub fn progress(&mut self) -> Result<bool, Error> {
        if !self.wired {
            // In MPI_Init: a rank that finished its census may already send to us, but we
            // may not know its coordinates yet; its messages wait in the ring.
            return Ok(false);
        }
        let mut moved = false;
        let mut done = Vec::new();
        {
            let Mpi {
                p,
                dma,
                reasm,
                stats,
                ..
            } = self;
            dma.receive(p, |pkt| {
                let off = pkt.put_offset as usize;
                let e = reasm
                    .entry(pkt.word3)
                    .or_insert((0, usize::MAX, Vec::new()));
                if off == 0 {
                    let b = pkt.payload;
                    let total = if b.len() >= 8 {
                        u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize
                    } else {
                        0
                    };
                    if !(LINK_HDR..=MAX_MSG).contains(&total) {
                        stats.bad += 1;
                        reasm.remove(&pkt.word3);
                        return;
                    }
                    e.1 = total;
                    e.2.resize(total, 0);
                } else if e.1 == usize::MAX {
                    // A packet before its message's first: keep room for the largest.
                    e.2.resize(MAX_MSG, 0);
                }
                let room = e.2.len();
                if !off.is_multiple_of(PKT_PAYLOAD) || off >= room {
                    stats.bad += 1;
                    return;
                }
                let n = PKT_PAYLOAD.min(pkt.payload.len()).min(room - off);
                e.2[off..off + n].copy_from_slice(&pkt.payload[..n]);
                e.0 += n;
                if e.1 != usize::MAX && e.0 >= e.1 {
                    let (_, total, mut bytes) = reasm.remove(&pkt.word3).expect("present");
                    bytes.truncate(total);
                    done.push((pkt.word3, bytes));
                }
            })
            .map_err(fab)?;
        }
        for (w3, bytes) in done {
            moved = true;
            self.incoming(w3, bytes)?;
        }
        let queued = (self.p.tree_status(self.dma.ep, VC) >> bgpcoll::ST_RCV_HDRS_SHIFT)
            & bgpcoll::ST_HDRS_MASK;
        if !self.in_alu && queued != 0 {
            // Outside an ALU reduction nothing on the VC is for us (a result needs our
            // contribution): stray broadcasts on the class. Left there they would fill the
            // 8-packet FIFO and the next result would be dropped. (The status word costs
            // no call where the service mirrors it.)
            let mut junk = [0u8; 256];
            while self
                .p
                .tree_receive(self.dma.ep, VC, &mut junk)
                .map_err(fab)?
                .is_some()
            {
                self.stats.ignored += 1;
            }
        }
        moved |= self.rdv_progress()?;
        moved |= self.flush()?;
        if moved {
            self.last_progress = self.now();
        }
        Ok(moved)
    }

    fn world_of_key(&self, key: u32) -> Option<u32> {
        self.coords
            .iter()
            .position(|c| c.key() == key)
            .map(|r| r as u32)
    }

    fn incoming(&mut self, w3: u32, bytes: Vec<u8>) -> Result<(), Error> {
        if bytes.len() < LINK_HDR + HDR || u16::from_be_bytes([bytes[8], bytes[9]]) != PROTO {
            self.stats.foreign += 1;
            if self.foreign.len() < FOREIGN_QUEUE {
                self.foreign.push_back((w3, bytes));
            } else {
                self.stats.foreign_dropped += 1;
            }
            return Ok(());
        }
        let (Some(src), Some(h)) = (
            self.world_of_key(w3 & 0xff_ffff),
            Hdr::read(&bytes[LINK_HDR..]),
        ) else {
            self.stats.bad += 1;
            return Ok(());
        };
        let cost = wire::ring_cost(bytes.len());
        let peer = &mut self.peers[src as usize];
        peer.used_ctl = peer.used_ctl.saturating_sub(h.credit_ctl);
        peer.used_data = peer.used_data.saturating_sub(h.credit_data);
        match h.kind {
            CREDIT => Ok(()),
            CTS => {
                peer.freed_ctl += cost;
                self.cts(src, &h)
            }
            EAGER | RTS => {
                if h.kind == RTS {
                    peer.freed_ctl += cost;
                }
                let exp = peer.recv_seq.entry(h.ctx).or_insert(0);
                let ahead = h.seq.wrapping_sub(*exp);
                if ahead == 0 {
                    *exp = exp.wrapping_add(1);
                    let payload = bytes[LINK_HDR + HDR..].to_vec();
                    self.deliver(src, h, payload, cost)?;
                    // Messages held back for this one, in order.
                    loop {
                        let peer = &mut self.peers[src as usize];
                        let exp = *peer.recv_seq.get(&h.ctx).expect("set above");
                        let Some((h2, p2, c2)) = peer.holdback.remove(&(h.ctx, exp)) else {
                            break;
                        };
                        peer.recv_seq.insert(h.ctx, exp.wrapping_add(1));
                        self.deliver(src, h2, p2, c2)?;
                    }
                } else if ahead < 1 << 31 {
                    peer.holdback
                        .insert((h.ctx, h.seq), (h, bytes[LINK_HDR + HDR..].to_vec(), cost));
                } else {
                    self.stats.bad += 1;
                }
                Ok(())
            }
            _ => {
                self.stats.bad += 1;
                Ok(())
            }
        }
    }

    /// A new EAGER or RTS from world rank `src`, in order: to the first posted receive it
    /// matches, else to the unexpected queue.
    fn deliver(
        &mut self,
        src_world: u32,
        h: Hdr,
        payload: Vec<u8>,
        cost: u32,
    ) -> Result<(), Error> {
        let Some(comm) = self
            .ctx_comm
            .get(&(h.ctx & !1))
            .and_then(|c| self.comms.get(c))
        else {
            // A communicator still being made here (or never: a broken peer). Eager data is
            // bounded by the sender's credits, which stay out until it is matched.
            if h.ctx >= 4 && self.early.len() < EARLY_MAX {
                self.early.push((src_world, h, payload, cost));
            } else {
                self.stats.bad += 1;
            }
            return Ok(());
        };
        let Some(src) = comm.group.iter().position(|&w| w == src_world) else {
            self.stats.bad += 1;
            return Ok(());
        };
        let body = if h.kind == EAGER {
            Unexp::Eager {
                data: payload,
                cost,
            }
        } else {
            Unexp::Rts {
                sid: h.a,
                len: h.len,
                stage: h.d,
            }
        };
        let inc = Incoming {
            ctx: h.ctx,
            src_world,
            src: src as i32,
            tag: h.tag,
            body,
        };
        let hit = self.posted.iter().position(|id| match self.reqs.get(id) {
            Some(Req {
                state: State::Recv { ctx, src, tag, .. },
            }) => {
                *ctx == inc.ctx
                    && (*src == ANY_SOURCE || *src == inc.src)
                    && (*tag == ANY_TAG || *tag == inc.tag)
            }
            _ => false,
        });
        match hit {
            Some(i) => {
                let id = self.posted.remove(i);
                self.matched(id, inc)
            }
            None => {
                self.unexpected.push_back(inc);
                Ok(())
            }
        }
    }

    /// Receive `id` matched message `inc`.
    fn matched(&mut self, id: u32, inc: Incoming) -> Result<(), Error> {
        let Some(Req {
            state: State::Recv { cap, into, .. },
        }) = self.reqs.get(&id)
        else {
            return Err(Error::Request);
        };
        let (cap, into) = (*cap, *into);
        match inc.body {
            Unexp::Eager { mut data, cost } => {
                self.peers[inc.src_world as usize].freed_data += cost;
                let error = (data.len() > cap).then_some(Error::Truncate);
                data.truncate(cap);
                self.finish(
                    id,
                    Status {
                        source: inc.src,
                        tag: inc.tag,
                        error,
                        bytes: data.len(),
                    },
                    data,
                );
            }
            Unexp::Rts { sid, len, stage } => {
                if len > cap as u64 {
                    // Truncated: the sender completes, nothing moves.
                    self.queue_ctl(
                        inc.src_world,
                        Hdr {
                            kind: CTS,
                            a: sid,
                            ..Hdr::default()
                        },
                    );
                    let st = Status {
                        source: inc.src,
                        tag: inc.tag,
                        error: Some(Error::Truncate),
                        bytes: 0,
                    };
                    self.finish(id, st, Vec::new());
                    return Ok(());
                }
                let len = len as usize;
                if len == 0 {
                    self.queue_ctl(
                        inc.src_world,
                        Hdr {
                            kind: CTS,
                            a: sid,
                            ..Hdr::default()
                        },
                    );
                    self.finish(
                        id,
                        Status {
                            source: inc.src,
                            tag: inc.tag,
                            error: None,
                            bytes: 0,
                        },
                        Vec::new(),
                    );
                    return Ok(());
                }
                if let Some(r) = self.reqs.get_mut(&id) {
                    r.state = State::RecvRdv {
                        src_world: inc.src_world,
                        src: inc.src,
                        tag: inc.tag,
                        sid,
                        len,
                        stage,
                        // A blocking receive's own buffer takes the data directly.
                        data: if into.is_some() {
                            Vec::new()
                        } else {
                            vec![0; len]
                        },
                        into,
                        off: 0,
                    };
                }
                self.rdv_wait.push_back(id);
                self.rdv_next()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, id: u32, st: Status, data: Vec<u8>) {
        if let Some(r) = self.reqs.get_mut(&id) {
            r.state = State::Done(st, data);
        }
    }

    fn queue_ctl(&mut self, dest: u32, hdr: Hdr) {
        self.peers[dest as usize].out_ctl.push_back(Out {
            hdr,
            payload: Vec::new(),
            req: None,
        });
    }

    /// Arms the reception counter for the next chunk of the active rendezvous receive (or
    /// the first of the next waiting one) and asks its sender for it.
    fn rdv_next(&mut self) -> Result<(), Error> {
        if self.active.is_some() {
            return Ok(());
        }
        let Some(&id) = self.rdv_wait.front() else {
            return Ok(());
        };
        let Some(Req {
            state:
                State::RecvRdv {
                    src_world,
                    sid,
                    len,
                    stage,
                    off,
                    data,
                    into,
                    ..
                },
        }) = self.reqs.get(&id)
        else {
            self.rdv_wait.pop_front();
            return Err(Error::Request);
        };
        let (src_world, sid, len, stage, off) = (*src_world, *sid, *len, *stage, *off);
        // Straight into the receive's memory where it lies in the window (a blocking
        // receive's buffer, or the request's own buffer when the heap is there).
        let direct = into.or_else(|| self.direct_offset(data.as_ptr() as usize, data.len()));
        let (so, sl) = self.limits.recv_stage;
        let n = (len - off)
            .min(if direct.is_some() {
                CHUNK_MAX
            } else {
                sl as usize
            })
            .min(stage as usize)
            .min(CHUNK_MAX);
        if n == 0 {
            // Neither side has a stage: nothing can move (a window below 64 KiB).
            return Err(Error::Count);
        }
        let c = RDV_COUNTER;
        // The counter's base is in 16-byte units: a chunk starting elsewhere is put at an
        // offset from it.
        let at = self.dma.bus + u64::from(direct.map_or(so, |o| o + off as u32));
        let (base, put) = (at & !15, at & 15);
        let from = self.coords[src_world as usize];
        let p = &mut self.p;
        let ep = self.dma.ep;
        p.dma_write(ep, dma::RCV_CTR_DISABLE + 4 * (c / 32), bit(c))
            .map_err(fab)?;
        p.dma_write(ep, dma::rcv_ctr(c, dma::CTR_BASE), (base >> 4) as u32)
            .map_err(fab)?;
        p.dma_write(
            ep,
            dma::rcv_ctr(c, dma::CTR_LIMIT),
            ((at + n as u64 - 1) >> 4) as u32,
        )
        .map_err(fab)?;
        p.dma_write(ep, dma::rcv_ctr(c, dma::CTR_COUNT), n as u32)
            .map_err(fab)?;
        p.dcr_write(
            ep,
            dma::DCR_BASE + dma::DCR_PUT_FROM + c,
            torus::coord_word(from.x, from.y, from.z) | dma::PUT_FROM_ONE,
        )
        .map_err(fab)?;
        p.dma_write(ep, dma::RCV_CTR_CLEAR_HIT_ZERO + 4 * (c / 32), bit(c))
            .map_err(fab)?;
        p.dma_write(ep, dma::RCV_CTR_ENABLE + 4 * (c / 32), bit(c))
            .map_err(fab)?;
        self.rdv_wait.pop_front();
        self.active = Some(Active {
            req: id,
            n,
            direct: direct.is_some(),
        });
        self.queue_ctl(
            src_world,
            Hdr {
                kind: CTS,
                a: sid,
                b: dma::VM_GROUP * dma::COUNTERS + c,
                c: off as u64,
                d: n as u32,
                len: put,
                ..Hdr::default()
            },
        );
        Ok(())
    }

    /// Takes in a finished chunk of the active rendezvous receive.
    fn rdv_progress(&mut self) -> Result<bool, Error> {
        let Some(Active { req, n, direct }) = self.active else {
            return Ok(false);
        };
        let c = RDV_COUNTER;
        let ep = self.dma.ep;
        let left = self
            .p
            .dma_read(ep, dma::rcv_ctr(c, dma::CTR_COUNT))
            .map_err(fab)?;
        if left != 0 {
            return Ok(false);
        }
        self.stats.chunks += 1;
        self.stats.chunks_direct += u32::from(direct);
        self.p
            .dma_write(ep, dma::RCV_CTR_DISABLE + 4 * (c / 32), bit(c))
            .map_err(fab)?;
        // Lower the hit-zero line, so the next chunk's arrival changes it again.
        self.p
            .dma_write(ep, dma::RCV_CTR_CLEAR_HIT_ZERO + 4 * (c / 32), bit(c))
            .map_err(fab)?;
        self.p
            .dcr_write(ep, dma::DCR_BASE + dma::DCR_PUT_FROM + c, 0)
            .map_err(fab)?;
        self.active = None;
        let so = self.limits.recv_stage.0;
        let Some(Req {
            state:
                State::RecvRdv {
                    data,
                    off,
                    len,
                    src,
                    tag,
                    ..
                },
        }) = self.reqs.get_mut(&req)
        else {
            return Err(Error::Request);
        };
        if !direct {
            self.p
                .mem_read(ep, so, &mut data[*off..*off + n])
                .map_err(fab)?;
        }
        *off += n;
        if *off == *len {
            let st = Status {
                source: *src,
                tag: *tag,
                error: None,
                bytes: *len,
            };
            let data = core::mem::take(data);
            self.finish(req, st, data);
        } else {
            self.rdv_wait.push_front(req);
        }
        self.rdv_next()?;
        Ok(true)
    }

    /// A CTS from `from` for send request `h.a`: put the chunk it names.
    fn cts(&mut self, from: u32, h: &Hdr) -> Result<(), Error> {
        let Some(Req {
            state: State::SendRdv { dest, data, at },
        }) = self.reqs.get(&h.a)
        else {
            self.stats.bad += 1;
            return Ok(());
        };
        if *dest != from {
            self.stats.bad += 1;
            return Ok(());
        }
        let (off, n) = (h.c as usize, h.d as usize);
        let len = at.map_or(data.len(), |(_, l)| l);
        let (so, sl) = self.limits.send_stage;
        if n > 0 {
            if off.checked_add(n).is_none_or(|e| e > len) || n > CHUNK_MAX || h.len > 15 {
                return Err(Error::Protocol);
            }
            let to = self.coords[from as usize];
            let (put, word3) = (h.len as u32, h.b << 24);
            // Zero-copy from the window where the data lies there; else through the stage.
            let direct = match at {
                Some((o, _)) => Some(o + off as u32),
                None => self.direct_offset(data[off..].as_ptr() as usize, n),
            };
            self.stats.puts_direct += u32::from(direct.is_some());
            match direct {
                Some(o) => self
                    .dma
                    .inject_at(&mut self.p, to, o, n as u32, put, word3, true),
                None if n <= sl as usize => {
                    let chunk = &data[off..off + n];
                    self.dma
                        .inject(&mut self.p, to, so, chunk, put, word3, true)
                }
                None => return Err(Error::Protocol),
            }
            .map_err(fab)?;
        }
        if n > 0 {
            self.inj_idle()?;
        }
        if n == 0 || off + n == len {
            self.finish(
                h.a,
                Status {
                    bytes: len,
                    ..Status::EMPTY
                },
                Vec::new(),
            );
        }
        Ok(())
    }

    /// The window offset of this rank's memory `[addr, addr + len)` if it lies in the
    /// window above the stages (`layout::FREE`), where the DMA reaches it directly.
    fn direct_offset(&self, addr: usize, len: usize) -> Option<u32> {
        if len == 0 {
            return None;
        }
        let floor = self.limits.recv_stage.0 + self.limits.recv_stage.1;
        self.p
            .window_offset_of(self.dma.ep, addr, len)
            .filter(|&o| o >= floor)
    }

    /// Waits until the injection FIFO has sent everything (the send buffer and stage are
    /// free again). HEAD may be mirrored (read without a call, which moves nothing): while
    /// the FIFO is busy, a read of a register that is not (`INJ_NOT_EMPTY`) goes to the
    /// fabric, and every such call continues the caller's own pending injections.
    fn inj_idle(&mut self) -> Result<(), Error> {
        let ep = self.dma.ep;
        let f = kestrel_spi::INJ_FIFO;
        for _ in 0..1_000_000 {
            let head = self
                .p
                .dma_read(ep, dma::inj_fifo(f, dma::FIFO_HEAD))
                .map_err(fab)?;
            let tail = self
                .p
                .dma_read(ep, dma::inj_fifo(f, dma::FIFO_TAIL))
                .map_err(fab)?;
            if head == tail {
                return Ok(());
            }
            self.p.dma_read(ep, dma::INJ_NOT_EMPTY).map_err(fab)?;
        }
        Err(Error::Fabric(FabricError::BadRegister))
    }

    fn inject(&mut self, dest: u32, mut hdr: Hdr, payload: &[u8]) -> Result<(), Error> {
        let peer = &mut self.peers[dest as usize];
        hdr.credit_ctl = core::mem::take(&mut peer.freed_ctl);
        hdr.credit_data = core::mem::take(&mut peer.freed_data);
        let total = LINK_HDR + HDR + payload.len();
        let mut msg = vec![0u8; total];
        link_header(&mut msg, 0, total, PROTO);
        hdr.write(&mut msg[LINK_HDR..LINK_HDR + HDR]);
        msg[LINK_HDR + HDR..].copy_from_slice(payload);
        self.inj_idle()?;
        let to = self.coords[dest as usize];
        self.dma.send(&mut self.p, to, &msg).map_err(fab)?;
        Ok(())
    }

    /// Sends what the credits allow, and credit-only messages where half a pool is owed.
    fn flush(&mut self) -> Result<bool, Error> {
        let mut moved = false;
        let l = self.limits;
        for d in 0..self.size {
            for data_pool in [false, true] {
                loop {
                    let peer = &mut self.peers[d as usize];
                    let (q, used, out) = if data_pool {
                        (l.q_data, &mut peer.used_data, &mut peer.out_data)
                    } else {
                        (l.q_ctl, &mut peer.used_ctl, &mut peer.out_ctl)
                    };
                    let Some(o) = out.front() else { break };
                    let cost = wire::ring_cost(LINK_HDR + HDR + o.payload.len());
                    if *used + cost > q {
                        if !peer.waited {
                            peer.waited = true;
                            self.stats.credit_waits += 1;
                        }
                        if data_pool {
                            // The data pool comes back only as the receiver matches, and it
                            // may want a later message first (legal with Isend): what waits
                            // goes by rendezvous instead, its RTS through the control pool,
                            // which comes back as soon as the receiver takes a message in.
                            self.eager_to_rts(d);
                        }
                        break;
                    }
                    *used += cost;
                    peer.waited = false;
                    let o = out.pop_front().expect("front");
                    self.inject(d, o.hdr, &o.payload)?;
                    if let Some(id) = o.req {
                        let n = o.payload.len();
                        self.finish(
                            id,
                            Status {
                                bytes: n,
                                ..Status::EMPTY
                            },
                            Vec::new(),
                        );
                    }
                    moved = true;
                }
            }
            let peer = &self.peers[d as usize];
            if peer.freed_ctl >= l.q_ctl / 2 || peer.freed_data >= l.q_data / 2 {
                self.stats.credit_msgs += 1;
                self.inject(
                    d,
                    Hdr {
                        kind: CREDIT,
                        ..Hdr::default()
                    },
                    &[],
                )?;
                moved = true;
            }
        }
        Ok(moved)
    }

    /// Turns every eager message waiting for `dest`'s data pool into a rendezvous send: its
    /// data stays here, an RTS with the same sequence number goes to the control queue.
    fn eager_to_rts(&mut self, dest: u32) {
        let stage = self.limits.send_stage.1;
        let waiting = core::mem::take(&mut self.peers[dest as usize].out_data);
        for o in waiting {
            let Some(id) = o.req else { continue };
            let hdr = Hdr {
                kind: RTS,
                a: id,
                d: stage,
                ..o.hdr
            };
            if let Some(r) = self.reqs.get_mut(&id) {
                r.state = State::SendRdv {
                    dest,
                    data: o.payload,
                    at: None,
                };
            }
            self.stats.eager_as_rts += 1;
            self.peers[dest as usize].out_ctl.push_back(Out {
                hdr,
                payload: Vec::new(),
                req: None,
            });
        }
    }

    // ---- point to point ------------------------------------------------------------

    fn new_req(&mut self, state: State) -> Request {
        let id = self.next_req;
        self.next_req = self.next_req.wrapping_add(1).max(1);
        self.reqs.insert(id, Req { state });
        Request(id)
    }

    fn check_tag(tag: i32, any: bool) -> Result<(), Error> {
        if (0..=TAG_UB).contains(&tag) || (any && tag == ANY_TAG) {
            Ok(())
        } else {
            Err(Error::Tag)
        }
    }

    /// A send on `c`'s point-to-point context, or (`coll`) its collectives' context;
    /// `borrow`: the caller waits for the request before `data` goes (a blocking send), so a
    /// rendezvous send of memory in the window is not copied.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn isend_full(
        &mut self,
        c: Comm,
        coll: bool,
        dest: i32,
        tag: i32,
        data: &[u8],
        sync: bool,
        borrow: bool,
    ) -> Result<Request, Error> {
        let cd = self.comm(c)?;
        let ctx = cd.ctx + u32::from(coll);
        if dest == PROC_NULL {
            return Ok(self.new_req(State::Done(Status::EMPTY, Vec::new())));
        }
        Self::check_tag(tag, false)?;
        let dw = self.world_of(c, dest)?;
        let peer = &mut self.peers[dw as usize];
        let s = peer.send_seq.entry(ctx).or_insert(0);
        let seq = *s;
        *s = s.wrapping_add(1);
        let len = data.len() as u64;
        if !sync && data.len() <= self.limits.eager_max {
            let r = self.new_req(State::SendEager);
            let hdr = Hdr {
                kind: EAGER,
                ctx,
                tag,
                seq,
                len,
                ..Hdr::default()
            };
            self.peers[dw as usize].out_data.push_back(Out {
                hdr,
                payload: data.to_vec(),
                req: Some(r.0),
            });
            self.flush()?;
            Ok(r)
        } else {
            let at = if borrow {
                self.direct_offset(data.as_ptr() as usize, data.len())
            } else {
                None
            };
            let r = self.new_req(State::SendRdv {
                dest: dw,
                data: if at.is_some() {
                    Vec::new()
                } else {
                    data.to_vec()
                },
                at: at.map(|o| (o, data.len())),
            });
            let hdr = Hdr {
                kind: RTS,
                ctx,
                tag,
                seq,
                len,
                a: r.0,
                d: self.limits.send_stage.1,
                ..Hdr::default()
            };
            self.queue_ctl(dw, hdr);
            self.flush()?;
            Ok(r)
        }
    }

    /// A receive on `c`'s point-to-point context, or (`coll`) its collectives' context;
    /// `into`: the window offset of a blocking receive's buffer of `cap` bytes, which a
    /// rendezvous message is put into directly.
    pub(crate) fn irecv_full(
        &mut self,
        c: Comm,
        coll: bool,
        src: i32,
        tag: i32,
        cap: usize,
        into: Option<u32>,
    ) -> Result<Request, Error> {
        let cd = self.comm(c)?;
        let ctx = cd.ctx + u32::from(coll);
        if src == PROC_NULL {
            return Ok(self.new_req(State::Done(Status::EMPTY, Vec::new())));
        }
        if src != ANY_SOURCE {
            self.world_of(c, src)?;
        }
        Self::check_tag(tag, true)?;
        let r = self.new_req(State::Recv {
            ctx,
            src,
            tag,
            cap,
            into,
        });
        let hit = self.unexpected.iter().position(|m| {
            m.ctx == ctx && (src == ANY_SOURCE || src == m.src) && (tag == ANY_TAG || tag == m.tag)
        });
        match hit {
            Some(i) => {
                let inc = self.unexpected.remove(i).expect("found");
                self.matched(r.0, inc)?;
            }
            None => self.posted.push(r.0),
        }
        Ok(r)
    }

    /// MPI_Isend (`sync`: MPI_Issend, complete once matched). The data is copied: the
    /// caller's buffer is free at return.
    pub fn isend(
        &mut self,
        c: Comm,
        dest: i32,
        tag: i32,
        data: &[u8],
        sync: bool,
    ) -> Result<Request, Error> {
        self.isend_full(c, false, dest, tag, data, sync, false)
    }

    /// MPI_Irecv of at most `cap` bytes; the data comes with the completion
    /// ([`Mpi::test`], [`Mpi::wait`]).
    pub fn irecv(&mut self, c: Comm, src: i32, tag: i32, cap: usize) -> Result<Request, Error> {
        self.irecv_full(c, false, src, tag, cap, None)
    }

    /// MPI_Test: the status and received bytes once `r` is done (and then forgets it).
    /// A receive's own error (truncation) is in the status, not the result.
    pub fn test(&mut self, r: Request) -> Result<Option<(Status, Vec<u8>)>, Error> {
        self.progress()?;
        self.take_done(r)
    }

    fn take_done(&mut self, r: Request) -> Result<Option<(Status, Vec<u8>)>, Error> {
        match self.reqs.get(&r.0) {
            None => Err(Error::Request),
            Some(Req {
                state: State::Done(..),
            }) => match self.reqs.remove(&r.0) {
                Some(Req {
                    state: State::Done(s, d),
                }) => Ok(Some((s, d))),
                _ => Err(Error::Request),
            },
            Some(_) => Ok(None),
        }
    }

    fn is_done(&self, r: Request) -> Result<bool, Error> {
        match self.reqs.get(&r.0) {
            None => Err(Error::Request),
            Some(q) => Ok(matches!(q.state, State::Done(..))),
        }
    }

    fn describe(&self, r: Request, s: &mut String) {
        let _ = match self.reqs.get(&r.0).map(|q| &q.state) {
            Some(State::Recv { src, tag, ctx, .. }) => {
                write!(s, "receive from source {src}, tag {tag}, context {ctx}")
            }
            Some(State::RecvRdv {
                src, tag, off, len, ..
            }) => write!(
                s,
                "receive from source {src}, tag {tag}, {off} of {len} bytes"
            ),
            Some(State::SendRdv { dest, data, at }) => write!(
                s,
                "send of {} bytes to world rank {dest}, not matched",
                at.map_or(data.len(), |(_, l)| l)
            ),
            Some(State::SendEager) => write!(s, "eager send waiting for credits"),
            _ => write!(s, "request {}", r.0),
        };
    }

    /// MPI_Wait.
    pub fn wait(&mut self, r: Request) -> Result<(Status, Vec<u8>), Error> {
        self.wait_named(r, "MPI_Wait")
    }

    fn wait_named(&mut self, r: Request, call: &str) -> Result<(Status, Vec<u8>), Error> {
        if !self.is_done(r)? {
            self.block(call, |m, s| m.describe(r, s), |m| m.is_done(r))?;
        }
        self.take_done(r)?.ok_or(Error::Request)
    }

    /// MPI_Waitall: every result, in the order of `rs`.
    pub fn waitall(&mut self, rs: &[Request]) -> Result<Vec<(Status, Vec<u8>)>, Error> {
        for &r in rs {
            self.is_done(r)?;
        }
        self.block(
            "MPI_Waitall",
            |m, s| {
                let _ = write!(s, "{} requests, first: ", rs.len());
                if let Some(&r) = rs.first() {
                    m.describe(r, s);
                }
            },
            |m| {
                for &r in rs {
                    if !m.is_done(r)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            },
        )?;
        rs.iter()
            .map(|&r| self.take_done(r)?.ok_or(Error::Request))
            .collect()
    }

    /// MPI_Testall: all results once every one is done (none taken before).
    pub fn testall(&mut self, rs: &[Request]) -> Result<Option<Vec<Completed>>, Error> {
        self.progress()?;
        for &r in rs {
            if !self.is_done(r)? {
                return Ok(None);
            }
        }
        rs.iter()
            .map(|&r| self.take_done(r)?.ok_or(Error::Request))
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// MPI_Waitany: the index of a finished request and its result.
    pub fn waitany(&mut self, rs: &[Request]) -> Result<(usize, Status, Vec<u8>), Error> {
        let mut hit = None;
        self.block(
            "MPI_Waitany",
            |_, s| {
                let _ = write!(s, "{} requests", rs.len());
            },
            |m| {
                for (i, &r) in rs.iter().enumerate() {
                    if m.is_done(r)? {
                        hit = Some(i);
                        return Ok(true);
                    }
                }
                Ok(false)
            },
        )?;
        let i = hit.ok_or(Error::Request)?;
        let (s, d) = self.take_done(rs[i])?.ok_or(Error::Request)?;
        Ok((i, s, d))
    }

    /// MPI_Send (standard mode: returns once the data has left, or, above the eager
    /// limit, once the receiver has taken it).
    pub fn send(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error> {
        let r = self.isend_full(c, false, dest, tag, data, false, true)?;
        self.wait_borrowed(r, "MPI_Send").map(|_| ())
    }

    /// MPI_Ssend: returns once a receive has matched.
    pub fn ssend(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error> {
        let r = self.isend_full(c, false, dest, tag, data, true, true)?;
        self.wait_borrowed(r, "MPI_Ssend").map(|_| ())
    }

    /// [`Mpi::wait_named`] for a request that may use the caller's memory in the window
    /// (a blocking send's data, a blocking receive's buffer): should the wait fail, the
    /// request is withdrawn first, so the DMA never touches that memory after the call.
    fn wait_borrowed(&mut self, r: Request, call: &str) -> Result<(Status, Vec<u8>), Error> {
        let res = self.wait_named(r, call);
        if res.is_err() {
            self.withdraw(r);
        }
        res
    }

    /// Forgets request `r` wherever it waits; a rendezvous receive whose chunk is on its
    /// way has its counter disarmed (whatever still comes for it is refused by the DMA).
    /// The peer learns nothing: what it still sends for `r` is dropped as stray.
    fn withdraw(&mut self, r: Request) {
        if self.active.as_ref().is_some_and(|a| a.req == r.0) {
            let (ep, c) = (self.dma.ep, RDV_COUNTER);
            let _ = self
                .p
                .dma_write(ep, dma::RCV_CTR_DISABLE + 4 * (c / 32), bit(c));
            let _ = self
                .p
                .dcr_write(ep, dma::DCR_BASE + dma::DCR_PUT_FROM + c, 0);
            self.active = None;
        }
        self.posted.retain(|&id| id != r.0);
        self.rdv_wait.retain(|&id| id != r.0);
        self.reqs.remove(&r.0);
    }

    /// MPI_Recv into `buf`. A truncated message is `Err(Error::Truncate)`, as MPI returns
    /// it (the first `buf.len()` bytes of an eager message are in `buf`). A rendezvous
    /// message is put straight into `buf` where it lies in the window.
    pub fn recv(&mut self, c: Comm, src: i32, tag: i32, buf: &mut [u8]) -> Result<Status, Error> {
        let st = self.recv_status(c, src, tag, buf)?;
        match st.error {
            Some(e) => Err(e),
            None => Ok(st),
        }
    }

    /// [`Mpi::recv`] whose receive's own error (`Error::Truncate`) is in the status, as
    /// `MPI_Wait` reports it: the result's error is the call's (a bad argument, a deadlock).
    pub fn recv_status(
        &mut self,
        c: Comm,
        src: i32,
        tag: i32,
        buf: &mut [u8],
    ) -> Result<Status, Error> {
        let into = if buf.len() > self.limits.eager_max {
            self.direct_offset(buf.as_ptr() as usize, buf.len())
        } else {
            None
        };
        let r = self.irecv_full(c, false, src, tag, buf.len(), into)?;
        let (st, d) = self.wait_borrowed(r, "MPI_Recv")?;
        // With `into` the DMA wrote the data into `buf` during the wait (d is empty).
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        buf[..d.len()].copy_from_slice(&d);
        Ok(st)
    }

    /// MPI_Sendrecv.
    #[allow(clippy::too_many_arguments)]
    pub fn sendrecv(
        &mut self,
        c: Comm,
        data: &[u8],
        dest: i32,
        stag: i32,
        buf: &mut [u8],
        src: i32,
        rtag: i32,
    ) -> Result<Status, Error> {
        let rr = self.irecv(c, src, rtag, buf.len())?;
        let sr = self.isend(c, dest, stag, data, false)?;
        let mut v = self.waitall(&[rr, sr])?;
        let (st, d) = v.swap_remove(0);
        buf[..d.len()].copy_from_slice(&d);
        match st.error {
            Some(e) => Err(e),
            None => Ok(st),
        }
    }

    /// MPI_Iprobe: the envelope of the first message a receive of (`src`, `tag`) would
    /// match, without taking it.
    pub fn iprobe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Option<Status>, Error> {
        let ctx = self.comm(c)?.ctx;
        if src != ANY_SOURCE && src != PROC_NULL {
            self.world_of(c, src)?;
        }
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Some(Status::EMPTY));
        }
        self.progress()?;
        Ok(self
            .unexpected
            .iter()
            .find(|m| {
                m.ctx == ctx
                    && (src == ANY_SOURCE || src == m.src)
                    && (tag == ANY_TAG || tag == m.tag)
            })
            .map(|m| Status {
                source: m.src,
                tag: m.tag,
                error: None,
                bytes: match &m.body {
                    Unexp::Eager { data, .. } => data.len(),
                    Unexp::Rts { len, .. } => *len as usize,
                },
            }))
    }

    /// MPI_Probe.
    pub fn probe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Status, Error> {
        let mut got = None;
        self.block(
            "MPI_Probe",
            |_, s| {
                let _ = write!(s, "source {src}, tag {tag}");
            },
            |m| {
                got = m.iprobe(c, src, tag)?;
                Ok(got.is_some())
            },
        )?;
        got.ok_or(Error::Request)
    }

    // ---- communicators --------------------------------------------------------------

    /// MPI_Comm_dup.
    pub fn comm_dup(&mut self, c: Comm) -> Result<Comm, Error> {
        let group = self.comm(c)?.group.clone();
        let ctx = self.agree_ctx(c)?;
        let h = self.next_comm;
        self.next_comm += 1;
        self.add_comm(h, ctx, group);
        self.made(ctx)?;
        Ok(Comm(h))
    }

    /// MPI_Comm_split: `None` for MPI_UNDEFINED colours.
    pub fn comm_split(
        &mut self,
        c: Comm,
        color: Option<u32>,
        key: i32,
    ) -> Result<Option<Comm>, Error> {
        let n = self.size(c)? as usize;
        let me = self.rank(c)?;
        let mut mine = [0u8; 12];
        mine[..4].copy_from_slice(&color.map_or(-1i32, |v| v as i32).to_ne_bytes());
        mine[4..8].copy_from_slice(&key.to_ne_bytes());
        mine[8..12].copy_from_slice(&me.to_ne_bytes());
        let mut all = vec![0u8; 12 * n];
        self.allgather(c, &mine, &mut all)?;
        let ctx = self.agree_ctx(c)?;
        let Some(color) = color else { return Ok(None) };
        let w = |b: &[u8], k: usize| i32::from_ne_bytes(b[k..k + 4].try_into().expect("4 bytes"));
        let mut members: Vec<(i32, i32)> = all
            .chunks_exact(12)
            .filter(|e| w(e, 0) == color as i32)
            .map(|e| (w(e, 4), w(e, 8)))
            .collect();
        members.sort();
        let group = members
            .iter()
            .map(|&(_, r)| self.world_of(c, r))
            .collect::<Result<Vec<_>, _>>()?;
        let h = self.next_comm;
        self.next_comm += 1;
        self.add_comm(h, ctx, group);
        self.made(ctx)?;
        Ok(Some(Comm(h)))
    }

    /// Delivers, in arrival order, what came early on communicator context `ctx` (its
    /// point-to-point and collective halves).
    fn made(&mut self, ctx: u32) -> Result<(), Error> {
        if self.early.is_empty() {
            return Ok(());
        }
        let (now, later) = core::mem::take(&mut self.early)
            .into_iter()
            .partition::<Vec<_>, _>(|e| e.1.ctx & !1 == ctx);
        self.early = later;
        for (src, h, payload, cost) in now {
            self.deliver(src, h, payload, cost)?;
        }
        Ok(())
    }

    /// MPI_Comm_free (WORLD and SELF cannot be freed).
    pub fn comm_free(&mut self, c: Comm) -> Result<(), Error> {
        if c == WORLD || c == SELF {
            return Err(Error::Comm);
        }
        let cd = self.comms.remove(&c.0).ok_or(Error::Comm)?;
        self.ctx_comm.remove(&cd.ctx);
        Ok(())
    }

    /// A context id every rank of `c` agrees on: the largest next free one.
    fn agree_ctx(&mut self, c: Comm) -> Result<u32, Error> {
        let mine = self.next_ctx.to_ne_bytes();
        let mut out = [0u8; 4];
        self.allreduce(c, &mine, &mut out, Datatype::U32, Op::Max)?;
        let ctx = u32::from_ne_bytes(out);
        self.next_ctx = ctx + 2;
        Ok(ctx)
    }

    pub(crate) fn is_world(&self, c: Comm) -> bool {
        c == WORLD
    }
}
