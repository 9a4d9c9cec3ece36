//! The fabric service's IPC protocol (`docs/adr/0020-fabric-service.md`): requests from a
//! client to the fabric thread (`kestrel-fabric`), its replies, its event message, and where
//! things lie in the fabric's address space and in the page each client shares with it.
//!
//! A request is an IPC *call* with label [`LABEL`]` + op` and at most six untyped words
//! (registers only); [`Request::Attach`] adds map items (the client's DMA window and its
//! shared page). The reply has label [`OK`] and the op's words, or [`ERROR`] and one
//! [`FabricErr`] code. Bulk data (a collective packet, a frame, the interrupt lines) travels
//! in the client's shared page ([`shared`]), never in message registers. Every request but
//! `Attach` and `TakeChanged` names an endpoint in MR1; the service answers
//! [`FabricErr::NotOwner`] unless the caller is the thread that attached it.
//!
//! | request | words | reply words | shared page |
//! |---|---|---|---|
//! | [`Request::Attach`] | window len, event thread | ep, bus base hi, lo, coords, node address | (mapped) |
//! | [`Request::Detach`] | ep | | |
//! | [`Request::Info`] | ep | coords, node address, MAC hi (16 bits), MAC lo, bus hi, lo | |
//! | [`Request::DmaRead`] | ep, offset | value | |
//! | [`Request::DmaWrite`] | ep, offset, value | | |
//! | [`Request::DcrRead`] | ep, dcr | value | |
//! | [`Request::DcrWrite`] | ep, dcr, value | | |
//! | [`Request::TreeInject`] | ep, vc, header | | payload in |
//! | [`Request::TreeReceive`] | ep, vc | found, header | payload out |
//! | [`Request::TreeStatus`] | ep, vc | status | |
//! | [`Request::FrameSend`] | ep, len | | frame in |
//! | [`Request::FrameReceive`] | ep | found, len | frame out |
//! | [`Request::IrqLines`] | ep | | 15 words out at [`shared::LINES`] |
//! | [`Request::TakeChanged`] | | mask of the caller's changed endpoints | |
//! | [`Request::Stats`] | ep | packets, bytes, drops, errors (`kestrel_fabric::proto::stats_words`) | |
//! | [`Request::TakeDiagnostic`] | ep | found, then `kestrel_fabric::proto::diagnostic_words` | |
//! | [`Request::FramesQueued`] | ep | frames waiting for the endpoint | |
//!
//! Events: when an endpoint's interrupt lines or frame queue change, the service sends
//! [`EVENT`] (MR1 = mask of the changed endpoints of that event thread, bit k = endpoint k)
//! to the event thread named at attach, with a zero timeout, and retries every millisecond
//! until it is taken or the client collected the change with `TakeChanged`. An `EVENT` with
//! an empty mask is the service's liveness probe (sent after a second without requests):
//! nothing changed.

/// Label of request op 0; request `op` has label `LABEL + op`.
pub const LABEL: u16 = 0x0600;
/// Reply label: done, words as the op defines.
pub const OK: u16 = 0x0000;
/// Reply label: refused, MR1 = [`FabricErr`] code.
pub const ERROR: u16 = 0x06ff;
/// The service's event message to a client's event thread: MR1 = changed endpoints.
pub const EVENT: u16 = 0x06f0;
/// Most untyped words in a request or reply.
pub const MAX_WORDS: usize = 6;
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
}

/// Request ops (label − [`LABEL`]).
pub mod op {
    pub const ATTACH: u16 = 1;
    pub const DETACH: u16 = 2;
    pub const INFO: u16 = 3;
    pub const DMA_READ: u16 = 4;
    pub const DMA_WRITE: u16 = 5;
    pub const DCR_READ: u16 = 6;
    pub const DCR_WRITE: u16 = 7;
    pub const TREE_INJECT: u16 = 8;
    pub const TREE_RECEIVE: u16 = 9;
    pub const TREE_STATUS: u16 = 10;
    pub const FRAME_SEND: u16 = 11;
    pub const FRAME_RECEIVE: u16 = 12;
    pub const IRQ_LINES: u16 = 13;
    pub const TAKE_CHANGED: u16 = 14;
    pub const STATS: u16 = 15;
    pub const TAKE_DIAGNOSTIC: u16 = 16;
    pub const FRAMES_QUEUED: u16 = 17;
    /// The last op.
    pub const LAST: u16 = FRAMES_QUEUED;
}

/// A request to the fabric service. `ep` is an endpoint number (`EpId.0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Attach a new endpoint whose DMA window is `window_len` bytes (page multiple, at most
    /// [`layout::WINDOW_MAX`]), mapped by the message's items at window offsets (hot spots)
    /// `0..window_len`, plus the shared page at hot spot [`layout::SHARED_OFFSET`]. Events
    /// go to thread `event` (raw id; nil: none).
    Attach {
        window_len: u32,
        event: u32,
    },
    Detach {
        ep: u8,
    },
    Info {
        ep: u8,
    },
    DmaRead {
        ep: u8,
        offset: u32,
    },
    DmaWrite {
        ep: u8,
        offset: u32,
        value: u32,
    },
    DcrRead {
        ep: u8,
        dcr: u32,
    },
    DcrWrite {
        ep: u8,
        dcr: u32,
        value: u32,
    },
    TreeInject {
        ep: u8,
        vc: u32,
        header: u32,
    },
    TreeReceive {
        ep: u8,
        vc: u32,
    },
    TreeStatus {
        ep: u8,
        vc: u32,
    },
    FrameSend {
        ep: u8,
        len: u32,
    },
    FrameReceive {
        ep: u8,
    },
    IrqLines {
        ep: u8,
    },
    TakeChanged,
    Stats {
        ep: u8,
    },
    /// The engine's last error or drop on the endpoint (`Fabric::take_diagnostic`).
    TakeDiagnostic {
        ep: u8,
    },
    /// How many frames wait for the endpoint (`Fabric::frames_queued`).
    FramesQueued {
        ep: u8,
    },
}

/// A request or reply as label and untyped words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    pub label: u16,
    pub len: usize,
    pub w: [u32; MAX_WORDS],
}

impl Words {
    pub fn new(label: u16, words: &[u32]) -> Words {
        let mut w = [0; MAX_WORDS];
        let len = words.len().min(MAX_WORDS);
        w[..len].copy_from_slice(&words[..len]);
        Words { label, len, w }
    }
    /// The words in use.
    pub fn words(&self) -> &[u32] {
        &self.w[..self.len]
    }
}

impl Request {
    pub const fn op(&self) -> u16 {
        match self {
            Request::Attach { .. } => op::ATTACH,
            Request::Detach { .. } => op::DETACH,
            Request::Info { .. } => op::INFO,
            Request::DmaRead { .. } => op::DMA_READ,
            Request::DmaWrite { .. } => op::DMA_WRITE,
            Request::DcrRead { .. } => op::DCR_READ,
            Request::DcrWrite { .. } => op::DCR_WRITE,
            Request::TreeInject { .. } => op::TREE_INJECT,
            Request::TreeReceive { .. } => op::TREE_RECEIVE,
            Request::TreeStatus { .. } => op::TREE_STATUS,
            Request::FrameSend { .. } => op::FRAME_SEND,
            Request::FrameReceive { .. } => op::FRAME_RECEIVE,
            Request::IrqLines { .. } => op::IRQ_LINES,
            Request::TakeChanged => op::TAKE_CHANGED,
            Request::Stats { .. } => op::STATS,
            Request::TakeDiagnostic { .. } => op::TAKE_DIAGNOSTIC,
            Request::FramesQueued { .. } => op::FRAMES_QUEUED,
        }
    }

    /// The endpoint the request names (all but `Attach` and `TakeChanged`).
    pub const fn ep(&self) -> Option<u8> {
        match *self {
            Request::Attach { .. } | Request::TakeChanged => None,
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
            | Request::FramesQueued { ep } => Some(ep),
        }
    }

    pub fn encode(&self) -> Words {
        let l = LABEL + self.op();
        match *self {
            Request::Attach { window_len, event } => Words::new(l, &[window_len, event]),
            Request::TakeChanged => Words::new(l, &[]),
            Request::Detach { ep }
            | Request::Info { ep }
            | Request::FrameReceive { ep }
            | Request::IrqLines { ep }
            | Request::Stats { ep }
            | Request::TakeDiagnostic { ep }
            | Request::FramesQueued { ep } => Words::new(l, &[ep as u32]),
            Request::DmaRead { ep, offset: a }
            | Request::DcrRead { ep, dcr: a }
            | Request::TreeReceive { ep, vc: a }
            | Request::TreeStatus { ep, vc: a }
            | Request::FrameSend { ep, len: a } => Words::new(l, &[ep as u32, a]),
            Request::DmaWrite {
                ep,
                offset: a,
                value: b,
            }
            | Request::DcrWrite {
                ep,
                dcr: a,
                value: b,
            }
            | Request::TreeInject {
                ep,
                vc: a,
                header: b,
            } => Words::new(l, &[ep as u32, a, b]),
        }
    }

    /// Decodes a received message; `None` if the label is no request, the word count does
    /// not match the op, or an endpoint number is out of range (the service answers
    /// [`FabricErr::BadRequest`]).
    pub fn decode(label: u16, words: &[u32]) -> Option<Request> {
        let op = label.checked_sub(LABEL)?;
        let want = match op {
            op::TAKE_CHANGED => 0,
            op::DETACH
            | op::INFO
            | op::FRAME_RECEIVE
            | op::IRQ_LINES
            | op::STATS
            | op::TAKE_DIAGNOSTIC
            | op::FRAMES_QUEUED => 1,
            op::ATTACH
            | op::DMA_READ
            | op::DCR_READ
            | op::TREE_RECEIVE
            | op::TREE_STATUS
            | op::FRAME_SEND => 2,
            op::DMA_WRITE | op::DCR_WRITE | op::TREE_INJECT => 3,
            _ => return None,
        };
        if words.len() != want {
            return None;
        }
        if op == op::ATTACH {
            return Some(Request::Attach {
                window_len: words[0],
                event: words[1],
            });
        }
        if op == op::TAKE_CHANGED {
            return Some(Request::TakeChanged);
        }
        let ep = u8::try_from(words[0])
            .ok()
            .filter(|&e| (e as usize) < MAX_ENDPOINTS)?;
        let a = words.get(1).copied().unwrap_or(0);
        let b = words.get(2).copied().unwrap_or(0);
        Some(match op {
            op::DETACH => Request::Detach { ep },
            op::INFO => Request::Info { ep },
            op::DMA_READ => Request::DmaRead { ep, offset: a },
            op::DMA_WRITE => Request::DmaWrite {
                ep,
                offset: a,
                value: b,
            },
            op::DCR_READ => Request::DcrRead { ep, dcr: a },
            op::DCR_WRITE => Request::DcrWrite {
                ep,
                dcr: a,
                value: b,
            },
            op::TREE_INJECT => Request::TreeInject {
                ep,
                vc: a,
                header: b,
            },
            op::TREE_RECEIVE => Request::TreeReceive { ep, vc: a },
            op::TREE_STATUS => Request::TreeStatus { ep, vc: a },
            op::FRAME_SEND => Request::FrameSend { ep, len: a },
            op::FRAME_RECEIVE => Request::FrameReceive { ep },
            op::IRQ_LINES => Request::IrqLines { ep },
            op::STATS => Request::Stats { ep },
            op::TAKE_DIAGNOSTIC => Request::TakeDiagnostic { ep },
            _ => Request::FramesQueued { ep },
        })
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
        }
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

/// Encodes a reply: `OK` with `words`, or `ERROR` with the code.
pub fn encode_reply(r: Result<&[u32], FabricErr>) -> Words {
    match r {
        Ok(w) => Words::new(OK, w),
        Err(e) => Words::new(ERROR, &[e.code()]),
    }
}

/// Decodes a reply to an op that answers `want` words. A reply that fits no shape is
/// [`FabricErr::BadRequest`] (it cannot come from a working service).
pub fn decode_reply(want: usize, label: u16, words: &[u32]) -> Result<[u32; MAX_WORDS], FabricErr> {
    match label {
        ERROR => Err(words
            .first()
            .and_then(|&c| FabricErr::from_code(c))
            .unwrap_or(FabricErr::BadRequest)),
        OK if words.len() >= want && want <= MAX_WORDS => {
            let mut w = [0; MAX_WORDS];
            w[..want].copy_from_slice(&words[..want]);
            Ok(w)
        }
        _ => Err(FabricErr::BadRequest),
    }
}

/// How many words the reply to `op` carries.
pub const fn reply_words(op: u16) -> usize {
    match op {
        op::ATTACH => 5,
        op::INFO => 6,
        op::DMA_READ | op::DCR_READ | op::TREE_STATUS | op::TAKE_CHANGED | op::FRAMES_QUEUED => 1,
        op::TREE_RECEIVE | op::FRAME_RECEIVE => 2,
        op::STATS => 4,
        op::TAKE_DIAGNOSTIC => 5,
        _ => 0,
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
            (w, w).prop_map(|(window_len, event)| Request::Attach { window_len, event }),
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
            Just(Request::TakeChanged),
            ep.clone().prop_map(|ep| Request::Stats { ep }),
            ep.clone().prop_map(|ep| Request::TakeDiagnostic { ep }),
            ep.prop_map(|ep| Request::FramesQueued { ep }),
        ]
    }

    proptest! {
        #[test]
        fn request_roundtrip(r in any_request()) {
            let w = r.encode();
            prop_assert!(w.len <= MAX_WORDS);
            prop_assert_eq!(Request::decode(w.label, w.words()), Some(r));
        }

        /// Whatever a client sends decodes to nothing or to a request naming a valid
        /// endpoint number, and re-encodes to the same words.
        #[test]
        fn decode_is_total(label in any::<u16>(), words in proptest::collection::vec(any::<u32>(), 0..8)) {
            if let Some(r) = Request::decode(label, &words) {
                if let Some(ep) = r.ep() {
                    prop_assert!((ep as usize) < MAX_ENDPOINTS);
                }
                let w = r.encode();
                prop_assert_eq!(w.label, label);
                prop_assert_eq!(w.words(), &words[..]);
            }
            for op in 0..=op::LAST + 1 {
                let _ = decode_reply(reply_words(op), label, &words);
            }
        }

        #[test]
        fn mac_roundtrip(mac in any::<[u8; 6]>()) {
            let (h, l) = mac_words(mac);
            prop_assert_eq!(mac_from_words(h, l), mac);
        }
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
            let w = encode_reply(Err(e));
            assert_eq!(decode_reply(0, w.label, w.words()), Err(e));
            assert!(!e.as_str().is_empty());
        }
        assert_eq!(decode_reply(0, ERROR, &[99]), Err(FabricErr::BadRequest));
        assert_eq!(decode_reply(2, OK, &[1]), Err(FabricErr::BadRequest));
        assert_eq!(decode_reply(1, OK, &[7, 8]).unwrap()[0], 7);
    }

    #[test]
    fn refuses_foreign_endpoints_and_counts() {
        assert_eq!(Request::decode(LABEL + op::DETACH, &[16]), None);
        assert_eq!(Request::decode(LABEL + op::DETACH, &[0x100]), None);
        assert_eq!(Request::decode(LABEL + op::DMA_WRITE, &[0, 1]), None);
        assert_eq!(Request::decode(LABEL, &[]), None);
        assert_eq!(Request::decode(LABEL + op::LAST + 1, &[]), None);
        assert_eq!(Request::decode(OK, &[]), None);
    }

    #[test]
    fn slots_do_not_overlap_the_image_or_devices() {
        assert_eq!(layout::slot(0), 0x4000_0000);
        assert_eq!(layout::slot(15) + (1 << layout::SLOT_LOG2), 0xC000_0000);
        assert_eq!(layout::slot(1) % (1 << layout::SLOT_LOG2), 0);
    }
}
