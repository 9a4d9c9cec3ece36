//! The fabric service's IPC protocol, its one wire codec (`docs/adr/0020-fabric-service.md`):
//! requests from a client to the fabric thread (`kestrel-fabric`), its replies, its event
//! message, where things lie in the fabric's address space and in the page each client
//! shares with it, and the engine's values on the wire (its errors, diagnostics and counters).
//!
//! A request is an IPC *call* with label [`LABEL`]` + op` and at most six untyped words
//! (registers only); [`Request::Attach`] adds map items (the client's DMA window and its
//! shared page). The reply has label [`OK`] and the op's words, or [`ERROR`] and one
//! [`FabricErr`] code. Bulk data (a collective packet, a frame, the interrupt lines) travels
//! in the client's shared page ([`shared`]), never in message registers. Every request but
//! `Attach` and `TakeChanged` names an endpoint in MR1; the service answers
//! [`FabricErr::NotOwner`] unless the caller is the thread that attached it.
//!
//! The operations, their words and what travels in the shared page are stated once, in the
//! [`ipc_protocol!`](kestrel_abi::ipc_protocol) table below, which generates [`Request`],
//! the replies ([`reply`]), the client calls ([`Client`], over `kestrel_fabric_client`'s
//! IPC) and the service's side ([`Server`]).
//!
//! Events: when an endpoint's interrupt lines or frame queue change, the service sends
//! [`EVENT`] (MR1 = mask of the changed endpoints of that event thread, bit k = endpoint k)
//! to the event thread named at attach, with a zero timeout, and retries every millisecond
//! until it is taken or the client collected the change with `TakeChanged`. An endpoint
//! whose event thread is the thread that attached it gets no pushed events: that thread
//! sleeps in `WaitChanged`, whose reply is the event. An `EVENT` with
//! an empty mask is the service's liveness probe (sent after a second without requests):
//! nothing changed.

use crate::{DiagKind, Diagnostic, FabricError, Stats};

/// Label of request op 0; request `op` has label `LABEL + op`.
pub const LABEL: u16 = 0x0600;
/// Reply label: done, words as the op defines.
pub const OK: u16 = 0x0000;
/// Reply label: refused, MR1 = [`FabricErr`] code.
pub const ERROR: u16 = 0x06ff;
/// The service's event message to a client's event thread: MR1 = changed endpoints.
pub const EVENT: u16 = 0x06f0;
/// Most untyped words in a request or reply, and a message as label and words.
pub use kestrel_abi::idl::{Words, MAX_WORDS};
/// Most endpoints (the engine's and `kestrel_bgp::torus::MAX_ENDPOINTS`).
pub const MAX_ENDPOINTS: usize = 16;
/// Interrupt-line words of an endpoint (BIC groups).
pub const LINE_WORDS: usize = 15;
/// Bytes of a collective packet's payload.
pub const TREE_PAYLOAD: usize = 256;
/// Longest frame (Ethernet with FCS room: 1514 + 4).
pub const MAX_FRAME: usize = 1518;

/// Where a client's memory lands in the fabric's address space. The service's receive
/// window is always the next free slot, so a client's map items can only ever land there,
/// never on another client's pages.
pub mod layout {
    /// First slot.
    pub const SLOTS_BASE: u32 = 0x4000_0000;
    /// log2 of a slot's size (128 MiB: a window of up to 64 MiB and the shared page).
    pub const SLOT_LOG2: u32 = 27;
    /// Largest DMA window (a VM's 64 MiB RAM segment).
    pub const WINDOW_MAX: u32 = 64 << 20;
    /// Offset of the shared page inside a slot (the hot spot of its map item).
    pub const SHARED_OFFSET: u32 = WINDOW_MAX;
    /// Slot `k`'s base in the fabric's space.
    pub const fn slot(k: usize) -> u32 {
        SLOTS_BASE + ((k as u32) << SLOT_LOG2)
    }
    const _: () =
        assert!(SLOTS_BASE as u64 + ((super::MAX_ENDPOINTS as u64) << SLOT_LOG2) <= 0xE000_0000);
    const _: () = assert!(SHARED_OFFSET + 4096 <= 1 << SLOT_LOG2);
}

/// Byte offsets in a client's shared page (4 KiB).
pub mod shared {
    /// A collective payload (256 bytes) or a frame (up to `MAX_FRAME`).
    pub const PAYLOAD: usize = 0;
    /// The interrupt lines (`LINE_WORDS` big-endian words) of an `IrqLines` reply.
    pub const LINES: usize = 2048;
    /// Size of the page.
    pub const SIZE: usize = 4096;
    const _: () = assert!(PAYLOAD + super::MAX_FRAME <= LINES);
    const _: () = assert!(LINES + 4 * super::LINE_WORDS <= SIZE);
    /// The register mirror ([`super::mirror`], [`super::mirror::WORDS`] native-order words)
    /// of an endpoint the client asked `Mirror` for.
    pub const MIRROR: usize = 2560;
    const _: () = assert!(LINES + 4 * super::LINE_WORDS <= MIRROR);
    const _: () = assert!(MIRROR + 4 * super::mirror::WORDS <= SIZE);
}

/// The register mirror: the DMA group registers and collective status words a native
/// client polls while it waits for messages (FIFO pointers the DMA moves, reception
/// counters), as word indexes into the mirror at [`shared::MIRROR`]. Real BG/P software
/// reads these registers with loads from its mapped DMA page; through the service each
/// read would be a call. The values are exactly what `DmaRead` (and `TreeStatus`) would
/// answer at the end of the service's latest call.
pub mod mirror {
    use kestrel_bgp::{coll, dma};

    /// Injection FIFO f's HEAD at `INJ_HEAD + f`.
    pub const INJ_HEAD: usize = 0;
    /// Reception FIFO f's TAIL at `RCV_TAIL + f`.
    pub const RCV_TAIL: usize = INJ_HEAD + dma::INJ_FIFOS as usize;
    /// The reception header FIFO's TAIL.
    pub const RCV_HDR_TAIL: usize = RCV_TAIL + dma::RCV_FIFOS as usize;
    /// The two reception-counter hit-zero words.
    pub const RCV_HIT_ZERO: usize = RCV_HDR_TAIL + 1;
    /// Reception counter c's COUNT at `RCV_COUNT + c`.
    pub const RCV_COUNT: usize = RCV_HIT_ZERO + 2;
    /// Collective VC v's status word at `TREE_STATUS + v`.
    pub const TREE_STATUS: usize = RCV_COUNT + dma::COUNTERS as usize;
    /// Words in the mirror.
    pub const WORDS: usize = TREE_STATUS + coll::VCS as usize;
    /// Words from here on say what arrived for the endpoint (a change is news for it);
    /// those before move only by its own injections.
    pub const RECEIVE_FIRST: usize = RCV_TAIL;

    /// The mirror word that holds DMA register `offset` of the endpoint's group, if any.
    pub const fn index_of(offset: u32) -> Option<usize> {
        let stride = dma::FIFO_STRIDE;
        if offset < dma::INJ_FIFO + dma::INJ_FIFOS * stride {
            let rel = offset - dma::INJ_FIFO;
            if rel % stride == dma::FIFO_HEAD {
                return Some(INJ_HEAD + (rel / stride) as usize);
            }
            return None;
        }
        if offset >= dma::RCV_FIFO && offset < dma::RCV_FIFO + dma::RCV_FIFOS * stride {
            let rel = offset - dma::RCV_FIFO;
            if rel % stride == dma::FIFO_TAIL {
                return Some(RCV_TAIL + (rel / stride) as usize);
            }
            return None;
        }
        if offset == dma::RCV_HDR_FIFO + dma::FIFO_TAIL {
            return Some(RCV_HDR_TAIL);
        }
        if offset == dma::RCV_CTR_HIT_ZERO || offset == dma::RCV_CTR_HIT_ZERO + 4 {
            return Some(RCV_HIT_ZERO + ((offset - dma::RCV_CTR_HIT_ZERO) / 4) as usize);
        }
        if offset >= dma::RCV_CTR && offset < dma::RCV_CTR + dma::COUNTERS * stride {
            let rel = offset - dma::RCV_CTR;
            if rel % stride == dma::CTR_COUNT {
                return Some(RCV_COUNT + (rel / stride) as usize);
            }
        }
        None
    }
}

kestrel_abi::ipc_protocol! {
    protocol {
        label: LABEL,
        ok: OK,
        error: ERROR,
        refusal: FabricErr,
        // Every request but `Attach` and `TakeChanged` names an endpoint, which must exist.
        valid: |r: &Request| r.ep().is_none_or(|e| usize::from(e) < MAX_ENDPOINTS),
    }
    ops {
        /// Attach a new endpoint whose DMA window is `window_len` bytes (page multiple, at most
        /// [`layout::WINDOW_MAX`]), mapped by the message's items at window offsets (hot spots)
        /// `0..window_len`, plus the shared page at hot spot [`layout::SHARED_OFFSET`]. Events
        /// go to thread `event` (raw id; nil: none). The endpoint is for tenant `tenant` of the
        /// caller's program (a VMM's VM number, or `kestrel_abi::grants::TENANT_SELF`): the
        /// service asks the root task what that tenant is granted
        /// (`kestrel_abi::root::Request::FabricGrant`) and holds the program to its endpoint
        /// quota. Reply: the endpoint, its window's bus base, its torus coordinates
        /// (`kestrel_bgp::torus::coord_word`) and node address.
        ATTACH = 1: Attach, attach { window_len: u32, event: u32, tenant: u32 }
            -> { ep: u32, bus_base: u64, coords: u32, node_address: u32 };
        DETACH = 2: Detach, detach { ep: u8 } -> {};
        /// Reply: coordinates, node address, MAC (hi: bytes 0-1, lo: bytes 2-5,
        /// [`mac_words`]), the window's bus base.
        INFO = 3: Info, info { ep: u8 }
            -> { coords: u32, node_address: u32, mac_hi: u32, mac_lo: u32, bus_base: u64 };
        DMA_READ = 4: DmaRead, dma_read { ep: u8, offset: u32 } -> { value: u32 };
        DMA_WRITE = 5: DmaWrite, dma_write { ep: u8, offset: u32, value: u32 } -> {};
        DCR_READ = 6: DcrRead, dcr_read { ep: u8, dcr: u32 } -> { value: u32 };
        DCR_WRITE = 7: DcrWrite, dcr_write { ep: u8, dcr: u32, value: u32 } -> {};
        /// The payload (256 bytes) is in the shared page at [`shared::PAYLOAD`].
        TREE_INJECT = 8: TreeInject, tree_inject { ep: u8, vc: u32, header: u32 } -> {};
        /// `found` = 1: the payload is in the shared page at [`shared::PAYLOAD`].
        TREE_RECEIVE = 9: TreeReceive, tree_receive { ep: u8, vc: u32 }
            -> { found: u32, header: u32 };
        TREE_STATUS = 10: TreeStatus, tree_status { ep: u8, vc: u32 } -> { status: u32 };
        /// The frame (`len` bytes) is in the shared page at [`shared::PAYLOAD`].
        FRAME_SEND = 11: FrameSend, frame_send { ep: u8, len: u32 } -> {};
        /// `found` = 1: `len` bytes of the frame are in the shared page at [`shared::PAYLOAD`].
        FRAME_RECEIVE = 12: FrameReceive, frame_receive { ep: u8 } -> { found: u32, len: u32 };
        /// The lines ([`LINE_WORDS`] big-endian words) are in the shared page at
        /// [`shared::LINES`].
        IRQ_LINES = 13: IrqLines, irq_lines { ep: u8 } -> {};
        /// Reply: the mask of the caller's changed endpoints (bit k = endpoint k).
        TAKE_CHANGED = 14: TakeChanged, take_changed {} -> { mask: u32 };
        /// Reply: packets, bytes, drops, errors ([`stats_words`]).
        STATS = 15: Stats, stats { ep: u8 } -> { counters: [u32; 4] };
        /// The engine's last error or drop on the endpoint (`Fabric::take_diagnostic`).
        /// Reply: `found`, then [`diagnostic_words`].
        TAKE_DIAGNOSTIC = 16: TakeDiagnostic, take_diagnostic { ep: u8 }
            -> { found: u32, diagnostic: [u32; 4] };
        /// How many frames wait for the endpoint (`Fabric::frames_queued`).
        FRAMES_QUEUED = 17: FramesQueued, frames_queued { ep: u8 } -> { frames: u32 };
        /// `TakeChanged` that waits: when none of the caller's endpoints changed, the
        /// service answers when one does, and the caller's receive timeout bounds the wait.
        /// The way a client whose event thread is the thread that attached (a native
        /// program) sleeps until news: no event is pushed to such a thread, so nothing
        /// is lost while it is busy and nothing is retried.
        WAIT_CHANGED = 18: WaitChanged, wait_changed {} -> { mask: u32 };
        /// From now on the service keeps the endpoint's register mirror ([`mirror`]) in its
        /// shared page: refreshed before the service answers any call and after its timer
        /// work, so the client reads those registers without a call. A change of a
        /// receive-side word of the mirror counts as a change of the endpoint for
        /// `WaitChanged` and `TakeChanged`, as a change of its interrupt lines does.
        MIRROR = 19: Mirror, mirror { ep: u8 } -> {};
        /// Two DMA register writes in one call, in order, as two `DmaWrite`s (the second
        /// is not made if the first fails): an injection's counter increment and FIFO
        /// tail.
        DMA_WRITE2 = 20: DmaWrite2, dma_write2 { ep: u8, offset: u32, value: u32,
            offset2: u32, value2: u32 } -> {};
    }
}

/// The last op.
pub const LAST_OP: u16 = op::DMA_WRITE2;

impl Request {
    /// The endpoint the request names (all but `Attach` and `TakeChanged`).
    pub const fn ep(&self) -> Option<u8> {
        match *self {
            Request::Attach { .. } | Request::TakeChanged {} | Request::WaitChanged {} => None,
            Request::Detach { ep }
            | Request::Info { ep }
            | Request::DmaRead { ep, .. }
            | Request::DmaWrite { ep, .. }
            | Request::DcrRead { ep, .. }
            | Request::DcrWrite { ep, .. }
            | Request::TreeInject { ep, .. }
            | Request::TreeReceive { ep, .. }
            | Request::TreeStatus { ep, .. }
            | Request::FrameSend { ep, .. }
            | Request::FrameReceive { ep }
            | Request::IrqLines { ep }
            | Request::Stats { ep }
            | Request::TakeDiagnostic { ep }
            | Request::FramesQueued { ep }
            | Request::Mirror { ep }
            | Request::DmaWrite2 { ep, .. } => Some(ep),
        }
    }
}

/// Why the service refused a request. The doc comments are the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricErr {
    /// malformed request (unknown op, wrong word count, endpoint number out of range)
    BadRequest,
    /// the endpoint is not attached, or not by the caller
    NotOwner,
    /// every endpoint is taken
    NoEndpoint,
    /// the window is malformed (size, alignment, items that do not cover it, no shared page)
    BadWindow,
    /// a length is out of range (frame longer than the shared page allows)
    BadLength,
    /// the client's window or shared page was unmapped under the service; the endpoint is gone
    Revoked,
    /// the engine refused: its error code (`kestrel_fabric::proto::error_code`) is in the
    /// low byte
    Engine(u8),
    /// the caller's program holds as many endpoints as its quota allows
    Quota,
    /// the root task has no fabric grant for the caller (not a program it started)
    NoGrant,
}

impl FabricErr {
    /// The wire code.
    pub const fn code(self) -> u32 {
        match self {
            Self::BadRequest => 1,
            Self::NotOwner => 2,
            Self::NoEndpoint => 3,
            Self::BadWindow => 4,
            Self::BadLength => 5,
            Self::Revoked => 6,
            Self::Quota => 7,
            Self::NoGrant => 8,
            Self::Engine(e) => 0x100 | e as u32,
        }
    }
    pub const fn from_code(c: u32) -> Option<FabricErr> {
        Some(match c {
            1 => Self::BadRequest,
            2 => Self::NotOwner,
            3 => Self::NoEndpoint,
            4 => Self::BadWindow,
            5 => Self::BadLength,
            6 => Self::Revoked,
            7 => Self::Quota,
            8 => Self::NoGrant,
            0x100..=0x1ff => Self::Engine(c as u8),
            _ => return None,
        })
    }
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => {
                "malformed request (unknown op, wrong word count, endpoint number out of range)"
            }
            Self::NotOwner => "the endpoint is not attached, or not by the caller",
            Self::NoEndpoint => "every endpoint is taken",
            Self::BadWindow => "the window is malformed",
            Self::BadLength => "a length is out of range",
            Self::Revoked => "the client's window or shared page was unmapped under the service",
            Self::Engine(_) => "the engine refused",
            Self::Quota => "the program holds as many fabric endpoints as its quota allows",
            Self::NoGrant => "the root task has no fabric grant for the caller",
        }
    }
}

impl kestrel_abi::idl::WireError for FabricErr {
    const MALFORMED: FabricErr = FabricErr::BadRequest;
    fn code(self) -> u32 {
        FabricErr::code(self)
    }
    fn from_code(c: u32) -> Option<FabricErr> {
        FabricErr::from_code(c)
    }
}

impl core::fmt::Display for FabricErr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Engine(e) => write!(f, "the engine refused (error {e})"),
            e => f.write_str(e.as_str()),
        }
    }
}

/// A MAC address as the two words of an `Info` reply (`hi` = bytes 0-1, `lo` = bytes 2-5).
pub const fn mac_words(mac: [u8; 6]) -> (u32, u32) {
    (
        u32::from_be_bytes([0, 0, mac[0], mac[1]]),
        u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]),
    )
}

/// The MAC address of an `Info` reply's two words.
pub const fn mac_from_words(hi: u32, lo: u32) -> [u8; 6] {
    let h = hi.to_be_bytes();
    let l = lo.to_be_bytes();
    [h[2], h[3], l[0], l[1], l[2], l[3]]
}

/// The wire code of an engine error (1..=10; 0 is never used).
pub fn error_code(e: FabricError) -> u8 {
    match e {
        FabricError::NoSuchEndpoint => 1,
        FabricError::NoFreeEndpoint => 2,
        FabricError::BadWindow => 3,
        FabricError::BadRegister => 4,
        FabricError::BadDcr => 5,
        FabricError::BadVc => 6,
        FabricError::BadFrame => 7,
        FabricError::InjectionFull => 8,
        FabricError::BadHeader => 9,
        FabricError::OutsideWindow => 10,
    }
}

/// The engine error with wire code `c`.
pub fn error_from_code(c: u8) -> Option<FabricError> {
    Some(match c {
        1 => FabricError::NoSuchEndpoint,
        2 => FabricError::NoFreeEndpoint,
        3 => FabricError::BadWindow,
        4 => FabricError::BadRegister,
        5 => FabricError::BadDcr,
        6 => FabricError::BadVc,
        7 => FabricError::BadFrame,
        8 => FabricError::InjectionFull,
        9 => FabricError::BadHeader,
        10 => FabricError::OutsideWindow,
        _ => return None,
    })
}

/// A diagnostic as four words: kind code, address high, address low, value.
pub fn diagnostic_words(d: &Diagnostic) -> [u32; 4] {
    [d.kind as u32, (d.addr >> 32) as u32, d.addr as u32, d.value]
}

/// The inverse of [`diagnostic_words`]; `None` for an unknown kind.
pub fn diagnostic_from_words(w: [u32; 4]) -> Option<Diagnostic> {
    Some(Diagnostic {
        kind: DiagKind::from_code(w[0])?,
        addr: u64::from(w[1]) << 32 | u64::from(w[2]),
        value: w[3],
    })
}

/// The `Stats` reply's counters: packets (torus + collective + frames, sent and
/// received), payload bytes (torus, sent and received), drops, errors; each saturated to
/// 32 bits.
pub fn stats_words(s: &Stats) -> [u32; 4] {
    let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let packets = s.dma_packets_sent
        + s.dma_packets_received
        + s.tree_packets_sent
        + s.tree_packets_received
        + s.frames_sent
        + s.frames_received;
    [
        sat(packets),
        sat(s.dma_bytes_sent + s.dma_bytes_received),
        sat(s.drops),
        sat(s.errors),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec;

    fn any_request() -> impl Strategy<Value = Request> {
        let ep = 0u8..MAX_ENDPOINTS as u8;
        let w = any::<u32>();
        prop_oneof![
            (w, w, w).prop_map(|(window_len, event, tenant)| Request::Attach {
                window_len,
                event,
                tenant
            }),
            ep.clone().prop_map(|ep| Request::Detach { ep }),
            ep.clone().prop_map(|ep| Request::Info { ep }),
            (ep.clone(), w).prop_map(|(ep, offset)| Request::DmaRead { ep, offset }),
            (ep.clone(), w, w).prop_map(|(ep, offset, value)| Request::DmaWrite {
                ep,
                offset,
                value
            }),
            (ep.clone(), w).prop_map(|(ep, dcr)| Request::DcrRead { ep, dcr }),
            (ep.clone(), w, w).prop_map(|(ep, dcr, value)| Request::DcrWrite { ep, dcr, value }),
            (ep.clone(), w, w).prop_map(|(ep, vc, header)| Request::TreeInject { ep, vc, header }),
            (ep.clone(), w).prop_map(|(ep, vc)| Request::TreeReceive { ep, vc }),
            (ep.clone(), w).prop_map(|(ep, vc)| Request::TreeStatus { ep, vc }),
            (ep.clone(), w).prop_map(|(ep, len)| Request::FrameSend { ep, len }),
            ep.clone().prop_map(|ep| Request::FrameReceive { ep }),
            ep.clone().prop_map(|ep| Request::IrqLines { ep }),
            Just(Request::TakeChanged {}),
            Just(Request::WaitChanged {}),
            ep.clone().prop_map(|ep| Request::Stats { ep }),
            ep.clone().prop_map(|ep| Request::TakeDiagnostic { ep }),
            ep.clone().prop_map(|ep| Request::FramesQueued { ep }),
            ep.clone().prop_map(|ep| Request::Mirror { ep }),
            (ep, w, w, w, w).prop_map(|(ep, offset, value, offset2, value2)| Request::DmaWrite2 {
                ep,
                offset,
                value,
                offset2,
                value2
            }),
        ]
    }

    proptest! {
        #[test]
        fn request_roundtrip(r in any_request()) {
            prop_assert!(r.round_trips(), "{:?}", r);
        }

        /// Whatever a client sends decodes to nothing or to a request naming a valid
        /// endpoint number, and re-encodes to the same words.
        #[test]
        fn decode_is_total(label in any::<u16>(), words in proptest::collection::vec(any::<u32>(), 0..8)) {
            if let Some(ep) = Request::decode(label, &words).and_then(|r| r.ep()) {
                prop_assert!((ep as usize) < MAX_ENDPOINTS);
            }
            prop_assert!(codec_holds(label, &words));
        }

        #[test]
        fn mac_roundtrip(mac in any::<[u8; 6]>()) {
            let (h, l) = mac_words(mac);
            prop_assert_eq!(mac_from_words(h, l), mac);
        }
    }

    /// Every mirror word below the collective's holds exactly one DMA register, and
    /// `index_of` names only those.
    #[test]
    fn mirror_covers_each_word_once() {
        let mut hits = [0u32; mirror::WORDS];
        for off in (0..0x1000u32).step_by(4) {
            if let Some(i) = mirror::index_of(off) {
                hits[i] += 1;
            }
        }
        assert!(
            hits[..mirror::TREE_STATUS].iter().all(|&n| n == 1),
            "{hits:?}"
        );
        assert!(hits[mirror::TREE_STATUS..].iter().all(|&n| n == 0));
        assert_eq!(
            mirror::index_of(kestrel_bgp::dma::inj_fifo(3, kestrel_bgp::dma::FIFO_TAIL)),
            None
        );
        assert_eq!(mirror::index_of(2), None);
    }

    #[test]
    fn errors_roundtrip() {
        for e in [
            FabricErr::BadRequest,
            FabricErr::NotOwner,
            FabricErr::NoEndpoint,
            FabricErr::BadWindow,
            FabricErr::BadLength,
            FabricErr::Revoked,
            FabricErr::Engine(0),
            FabricErr::Engine(7),
        ] {
            let w = encode_error(e);
            assert_eq!(decode_reply(op::DETACH, w.label, w.words()), Err(e));
            assert!(!e.as_str().is_empty());
        }
        assert_eq!(
            decode_reply(op::DETACH, ERROR, &[99]),
            Err(FabricErr::BadRequest)
        );
        assert_eq!(
            decode_reply(op::TREE_RECEIVE, OK, &[1]),
            Err(FabricErr::BadRequest)
        );
        assert_eq!(
            reply::DmaRead::decode(OK, &[7, 8]),
            Ok(reply::DmaRead { value: 7 })
        );
    }

    #[test]
    fn refuses_foreign_endpoints_and_counts() {
        assert_eq!(Request::decode(LABEL + op::DETACH, &[16]), None);
        assert_eq!(Request::decode(LABEL + op::DETACH, &[0x100]), None);
        assert_eq!(Request::decode(LABEL + op::DMA_WRITE, &[0, 1]), None);
        assert_eq!(Request::decode(LABEL, &[]), None);
        assert_eq!(Request::decode(LABEL + LAST_OP + 1, &[]), None);
        assert_eq!(Request::decode(OK, &[]), None);
    }

    /// The words on the wire, pinned: the format is part of the ABI between the service and
    /// every client, whatever generates the codec.
    #[test]
    fn wire_words_are_pinned() {
        let w = Request::DcrWrite {
            ep: 3,
            dcr: 0xc00,
            value: 9,
        }
        .encode();
        assert_eq!((w.label, w.words()), (0x0607, &[3, 0xc00, 9][..]));
        let w = Request::TakeChanged {}.encode();
        assert_eq!((w.label, w.words()), (0x060e, &[][..]));
        let a = reply::Attach {
            ep: 2,
            bus_base: 0x1_8000_0000,
            coords: 0x20000,
            node_address: 2,
        };
        assert_eq!(a.encode().words(), &[2, 1, 0x8000_0000, 0x20000, 2]);
        let i = reply::Info {
            coords: 1,
            node_address: 2,
            mac_hi: 3,
            mac_lo: 4,
            bus_base: 0x5_0000_0006,
        };
        assert_eq!(i.encode().words(), &[1, 2, 3, 4, 5, 6]);
        let d = reply::TakeDiagnostic {
            found: 1,
            diagnostic: [2, 3, 4, 5],
        };
        assert_eq!(d.encode().words(), &[1, 2, 3, 4, 5]);
        assert_eq!(encode_error(FabricErr::Engine(7)).words(), &[0x107]);
        assert_eq!(encode_error(FabricErr::Engine(7)).label, ERROR);
        let want = [
            (op::ATTACH, 5),
            (op::INFO, 6),
            (op::TREE_RECEIVE, 2),
            (op::STATS, 4),
        ];
        for (o, n) in want {
            assert_eq!(reply_words(o), n);
        }
    }

    #[test]
    fn slots_do_not_overlap_the_image_or_devices() {
        assert_eq!(layout::slot(0), 0x4000_0000);
        assert_eq!(layout::slot(15) + (1 << layout::SLOT_LOG2), 0xC000_0000);
        assert_eq!(layout::slot(1) % (1 << layout::SLOT_LOG2), 0);
    }

    #[test]
    fn error_codes_round_trip_and_are_distinct() {
        let mut seen = [false; 256];
        for c in 0..=255u8 {
            if let Some(e) = error_from_code(c) {
                assert_eq!(error_code(e), c);
                assert!(!seen[usize::from(c)]);
                seen[usize::from(c)] = true;
            }
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), 10);
        assert_eq!(error_from_code(0), None);
    }

    proptest! {
        #[test]
        fn diagnostic_round_trip(k in 1..=12u32, addr in any::<u64>(), value in any::<u32>()) {
            let d = Diagnostic { kind: DiagKind::from_code(k).unwrap(), addr, value };
            prop_assert_eq!(diagnostic_from_words(diagnostic_words(&d)), Some(d));
        }

        #[test]
        fn diagnostic_decode_is_total(w in any::<[u32; 4]>()) {
            if let Some(d) = diagnostic_from_words(w) {
                prop_assert_eq!(diagnostic_words(&d), w);
            }
        }

        #[test]
        fn stats_words_saturate(a in any::<[u32; 10]>()) {
            let s = Stats::from_array(a.map(u64::from));
            let w = stats_words(&s);
            prop_assert_eq!(w[2], a[8]);
            prop_assert_eq!(w[3], a[9]);
            prop_assert_eq!(Stats::from_array(s.to_array()), s);
        }
    }
}
