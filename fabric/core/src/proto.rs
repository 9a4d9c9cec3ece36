//! The fabric service's IPC protocol: one request per engine call, encoded as an L4 label
//! and at most six untyped words (the register part of a message), and the replies.
//!
//! For the service helper (fabric/service) and its clients (fabric/client, the VMM's
//! IPC-backed back end):
//! - a request is an IPC *call* with label [`LABEL`]` + op` ([`op`]) and the words of
//!   [`Request::encode`]; the reply has label [`REPLY`]` + kind` ([`Reply`]) or
//!   [`ERROR`] with the [`FabricError`] code in word 0;
//! - [`Request::Attach`] carries map items as well: the client's DMA window (`window_len`
//!   bytes) and its 4 KiB **bulk page**; bulk data never travels in words: a tree packet's
//!   256 payload bytes ([`Request::TreeInject`], [`Request::TreeReceive`]) and a frame
//!   ([`Request::FrameSend`], [`Request::FrameReceive`]) sit at offset 0 of the bulk page;
//! - `event_thread` (attach) is the client's thread that receives [`Event`]s: a 0-timeout
//!   send with label [`EVENT`] and word 0 = the changed endpoints' mask (bit k = EpId(k),
//!   as `Fabric::take_changed`); the fabric retries every ms while the send fails;
//! - every request naming an endpoint is checked by the service against the caller (an
//!   endpoint belongs to the client that attached it);
//! - [`Request::IrqLines`] returns 5 of the 15 BIC words from `first` (the DMA lines are in
//!   words 1..3, the collective's in word 5: `first = 1` gets them all);
//!   [`Request::Stats`] returns the counters `3 * part ..` of `Stats::to_array` as three
//!   u64 (high word first).
//!
//! Decoding is strict: an unknown label, a wrong word count, an endpoint number of
//! MAX_ENDPOINTS or more, a VC other than 0/1 or an out-of-range field is a [`ProtoError`],
//! and `decode(encode(x)) == x` for every message (property-tested, fuzzed).

use crate::{Coords, DiagKind, Diagnostic, EpId, FabricError, Stats, IRQ_WORDS, MAX_ENDPOINTS};
use kestrel_bgp::coll::VCS;
use kestrel_bgp::torus::{FRAME_MAX_BYTES, MAX_WINDOW};

/// Label of request op 0; request `op` has label `LABEL + op`.
pub const LABEL: u16 = 0x0600;
/// Label of reply kind 0; reply kind `k` has label `REPLY + k`.
pub const REPLY: u16 = 0x0680;
/// Reply label: refused, word 0 = the [`FabricError`] code.
pub const ERROR: u16 = 0x06FE;
/// Label of an event (FABRIC_EVENT) the fabric sends to a client's event thread.
pub const EVENT: u16 = 0x06FF;
/// Most untyped words in a message.
pub const MAX_WORDS: usize = 6;
/// Size of the bulk page a client shares at attach.
pub const BULK_PAGE: usize = 4096;
/// BIC words per [`Reply::Lines`].
pub const LINES_PER_REPLY: usize = 5;
/// Counters per [`Reply::Stats`].
pub const STATS_PER_REPLY: usize = 3;

/// Request ops (label − [`LABEL`]).
pub mod op {
    pub const ATTACH: u16 = 1;
    pub const DETACH: u16 = 2;
    pub const DMA_READ: u16 = 3;
    pub const DMA_WRITE: u16 = 4;
    pub const DCR_READ: u16 = 5;
    pub const DCR_WRITE: u16 = 6;
    pub const TREE_INJECT: u16 = 7;
    pub const TREE_RECEIVE: u16 = 8;
    pub const TREE_STATUS: u16 = 9;
    pub const FRAME_SEND: u16 = 10;
    pub const FRAME_RECEIVE: u16 = 11;
    pub const FRAME_MAC: u16 = 12;
    pub const COORDS: u16 = 13;
    pub const IRQ_LINES: u16 = 14;
    pub const TAKE_CHANGED: u16 = 15;
    pub const STATS: u16 = 16;
    pub const TAKE_DIAGNOSTIC: u16 = 17;
    /// One past the last op.
    pub const COUNT: u16 = 18;
}

/// Reply kinds (label − [`REPLY`]).
pub mod kind {
    pub const DONE: u16 = 0;
    pub const VALUE: u16 = 1;
    pub const ATTACHED: u16 = 2;
    pub const TREE_PACKET: u16 = 3;
    pub const FRAME: u16 = 4;
    pub const EMPTY: u16 = 5;
    pub const MAC: u16 = 6;
    pub const COORDS: u16 = 7;
    pub const LINES: u16 = 8;
    pub const STATS: u16 = 9;
    pub const DIAGNOSTIC: u16 = 10;
    /// One past the last kind.
    pub const COUNT: u16 = 11;
}

/// A message that does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// The label is not one of this protocol's.
    UnknownLabel,
    /// The number of words does not match the label.
    WordCount,
    /// A field is out of range (endpoint, VC, length, code).
    BadField,
}

/// A request to the fabric service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Attach an endpoint with a DMA window of `window_len` bytes (mapped by the first map
    /// item; the bulk page by the second); events go to thread `event_thread`.
    Attach { window_len: u32, event_thread: u32 },
    Detach { ep: EpId },
    DmaRead { ep: EpId, offset: u32 },
    DmaWrite { ep: EpId, offset: u32, value: u32 },
    DcrRead { ep: EpId, dcr: u32 },
    DcrWrite { ep: EpId, dcr: u32, value: u32 },
    /// Inject a collective packet; payload = bulk page bytes 0..256.
    TreeInject { ep: EpId, vc: u8, header: u32 },
    /// Receive a collective packet; the payload lands at bulk page bytes 0..256.
    TreeReceive { ep: EpId, vc: u8 },
    TreeStatus { ep: EpId, vc: u8 },
    /// Send the frame at bulk page bytes 0..len.
    FrameSend { ep: EpId, len: u32 },
    /// Receive a frame into the bulk page.
    FrameReceive { ep: EpId },
    FrameMac { ep: EpId },
    Coords { ep: EpId },
    /// BIC words `first .. first + 5` (first <= 10).
    IrqLines { ep: EpId, first: u8 },
    TakeChanged,
    /// Counters `3 * part ..` (part < 4).
    Stats { ep: EpId, part: u8 },
    TakeDiagnostic { ep: EpId },
}

/// The fabric's answer to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done, nothing to return.
    Done,
    /// A register value, a status word or the changed mask.
    Value(u32),
    Attached { ep: EpId, bus_base: u64 },
    /// A collective packet with this header is in the bulk page.
    TreePacket { header: u32 },
    /// A frame of `len` bytes is in the bulk page.
    Frame { len: u32 },
    /// Nothing received (tree, frame) or no diagnostic.
    Empty,
    Mac([u8; 6]),
    Coords { coords: Coords, node_address: u32 },
    Lines { first: u8, words: [u32; LINES_PER_REPLY] },
    Stats([u64; STATS_PER_REPLY]),
    Diagnostic(Diagnostic),
    /// Refused.
    Error(FabricError),
}

/// An event: the endpoints whose irq lines or frame queue changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub changed: u32,
}

/// A message as label and untyped words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    pub label: u16,
    pub len: usize,
    pub w: [u32; MAX_WORDS],
}

impl Words {
    fn new(label: u16, words: &[u32]) -> Words {
        let mut w = [0; MAX_WORDS];
        w[..words.len()].copy_from_slice(words);
        Words {
            label,
            len: words.len(),
            w,
        }
    }

    /// The words in use.
    pub fn words(&self) -> &[u32] {
        &self.w[..self.len]
    }
}

fn ep_of(w: u32) -> Result<EpId, ProtoError> {
    if (w as usize) < MAX_ENDPOINTS {
        Ok(EpId(w as u8))
    } else {
        Err(ProtoError::BadField)
    }
}

fn vc_of(w: u32) -> Result<u8, ProtoError> {
    if w < VCS {
        Ok(w as u8)
    } else {
        Err(ProtoError::BadField)
    }
}

fn expect<const N: usize>(words: &[u32]) -> Result<[u32; N], ProtoError> {
    words.try_into().map_err(|_| ProtoError::WordCount)
}

fn field(ok: bool) -> Result<(), ProtoError> {
    if ok {
        Ok(())
    } else {
        Err(ProtoError::BadField)
    }
}

impl Request {
    pub const fn op(&self) -> u16 {
        match self {
            Request::Attach { .. } => op::ATTACH,
            Request::Detach { .. } => op::DETACH,
            Request::DmaRead { .. } => op::DMA_READ,
            Request::DmaWrite { .. } => op::DMA_WRITE,
            Request::DcrRead { .. } => op::DCR_READ,
            Request::DcrWrite { .. } => op::DCR_WRITE,
            Request::TreeInject { .. } => op::TREE_INJECT,
            Request::TreeReceive { .. } => op::TREE_RECEIVE,
            Request::TreeStatus { .. } => op::TREE_STATUS,
            Request::FrameSend { .. } => op::FRAME_SEND,
            Request::FrameReceive { .. } => op::FRAME_RECEIVE,
            Request::FrameMac { .. } => op::FRAME_MAC,
            Request::Coords { .. } => op::COORDS,
            Request::IrqLines { .. } => op::IRQ_LINES,
            Request::TakeChanged => op::TAKE_CHANGED,
            Request::Stats { .. } => op::STATS,
            Request::TakeDiagnostic { .. } => op::TAKE_DIAGNOSTIC,
        }
    }

    pub fn encode(&self) -> Words {
        let l = LABEL + self.op();
        let e = |ep: EpId| u32::from(ep.0);
        match *self {
            Request::Attach {
                window_len,
                event_thread,
            } => Words::new(l, &[window_len, event_thread]),
            Request::Detach { ep }
            | Request::FrameReceive { ep }
            | Request::FrameMac { ep }
            | Request::Coords { ep }
            | Request::TakeDiagnostic { ep } => Words::new(l, &[e(ep)]),
            Request::DmaRead { ep, offset } => Words::new(l, &[e(ep), offset]),
            Request::DmaWrite { ep, offset, value } => Words::new(l, &[e(ep), offset, value]),
            Request::DcrRead { ep, dcr } => Words::new(l, &[e(ep), dcr]),
            Request::DcrWrite { ep, dcr, value } => Words::new(l, &[e(ep), dcr, value]),
            Request::TreeInject { ep, vc, header } => {
                Words::new(l, &[e(ep), u32::from(vc), header])
            }
            Request::TreeReceive { ep, vc } | Request::TreeStatus { ep, vc } => {
                Words::new(l, &[e(ep), u32::from(vc)])
            }
            Request::FrameSend { ep, len } => Words::new(l, &[e(ep), len]),
            Request::IrqLines { ep, first } => Words::new(l, &[e(ep), u32::from(first)]),
            Request::TakeChanged => Words::new(l, &[]),
            Request::Stats { ep, part } => Words::new(l, &[e(ep), u32::from(part)]),
        }
    }

    /// Decodes a received request.
    pub fn decode(label: u16, words: &[u32]) -> Result<Request, ProtoError> {
        let op = label.checked_sub(LABEL).ok_or(ProtoError::UnknownLabel)?;
        Ok(match op {
            op::ATTACH => {
                let [window_len, event_thread] = expect(words)?;
                field(window_len != 0 && u64::from(window_len) <= MAX_WINDOW)?;
                Request::Attach {
                    window_len,
                    event_thread,
                }
            }
            op::DETACH | op::FRAME_RECEIVE | op::FRAME_MAC | op::COORDS | op::TAKE_DIAGNOSTIC => {
                let [ep] = expect(words)?;
                let ep = ep_of(ep)?;
                match op {
                    op::DETACH => Request::Detach { ep },
                    op::FRAME_RECEIVE => Request::FrameReceive { ep },
                    op::FRAME_MAC => Request::FrameMac { ep },
                    op::COORDS => Request::Coords { ep },
                    _ => Request::TakeDiagnostic { ep },
                }
            }
            op::DMA_READ => {
                let [ep, offset] = expect(words)?;
                Request::DmaRead {
                    ep: ep_of(ep)?,
                    offset,
                }
            }
            op::DMA_WRITE => {
                let [ep, offset, value] = expect(words)?;
                Request::DmaWrite {
                    ep: ep_of(ep)?,
                    offset,
                    value,
                }
            }
            op::DCR_READ => {
                let [ep, dcr] = expect(words)?;
                Request::DcrRead { ep: ep_of(ep)?, dcr }
            }
            op::DCR_WRITE => {
                let [ep, dcr, value] = expect(words)?;
                Request::DcrWrite {
                    ep: ep_of(ep)?,
                    dcr,
                    value,
                }
            }
            op::TREE_INJECT => {
                let [ep, vc, header] = expect(words)?;
                Request::TreeInject {
                    ep: ep_of(ep)?,
                    vc: vc_of(vc)?,
                    header,
                }
            }
            op::TREE_RECEIVE | op::TREE_STATUS => {
                let [ep, vc] = expect(words)?;
                let (ep, vc) = (ep_of(ep)?, vc_of(vc)?);
                if op == op::TREE_RECEIVE {
                    Request::TreeReceive { ep, vc }
                } else {
                    Request::TreeStatus { ep, vc }
                }
            }
            op::FRAME_SEND => {
                let [ep, len] = expect(words)?;
                field(len <= FRAME_MAX_BYTES)?;
                Request::FrameSend { ep: ep_of(ep)?, len }
            }
            op::IRQ_LINES => {
                let [ep, first] = expect(words)?;
                field(first as usize + LINES_PER_REPLY <= IRQ_WORDS)?;
                Request::IrqLines {
                    ep: ep_of(ep)?,
                    first: first as u8,
                }
            }
            op::TAKE_CHANGED => {
                let [] = expect(words)?;
                Request::TakeChanged
            }
            op::STATS => {
                let [ep, part] = expect(words)?;
                field((part as usize) * STATS_PER_REPLY < Stats::FIELDS)?;
                Request::Stats {
                    ep: ep_of(ep)?,
                    part: part as u8,
                }
            }
            _ => return Err(ProtoError::UnknownLabel),
        })
    }
}

/// The code of an error on the wire (1..).
pub fn error_code(e: FabricError) -> u32 {
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
    }
}

/// The error with code `c`.
pub fn error_from_code(c: u32) -> Option<FabricError> {
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
        _ => return None,
    })
}

/// Counters `3 * part ..` of `s` (zero past the end).
pub fn stats_part(s: &Stats, part: u8) -> [u64; STATS_PER_REPLY] {
    let a = s.to_array();
    core::array::from_fn(|i| a.get(usize::from(part) * STATS_PER_REPLY + i).copied().unwrap_or(0))
}

fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}

fn join(h: u32, l: u32) -> u64 {
    u64::from(h) << 32 | u64::from(l)
}

impl Reply {
    pub fn encode(&self) -> Words {
        let k = |kind: u16| REPLY + kind;
        match *self {
            Reply::Done => Words::new(k(kind::DONE), &[]),
            Reply::Value(v) => Words::new(k(kind::VALUE), &[v]),
            Reply::Attached { ep, bus_base } => Words::new(
                k(kind::ATTACHED),
                &[u32::from(ep.0), hi(bus_base), bus_base as u32],
            ),
            Reply::TreePacket { header } => Words::new(k(kind::TREE_PACKET), &[header]),
            Reply::Frame { len } => Words::new(k(kind::FRAME), &[len]),
            Reply::Empty => Words::new(k(kind::EMPTY), &[]),
            Reply::Mac(m) => Words::new(
                k(kind::MAC),
                &[
                    u32::from_be_bytes([0, 0, m[0], m[1]]),
                    u32::from_be_bytes([m[2], m[3], m[4], m[5]]),
                ],
            ),
            Reply::Coords {
                coords,
                node_address,
            } => Words::new(
                k(kind::COORDS),
                &[
                    u32::from(coords.x),
                    u32::from(coords.y),
                    u32::from(coords.z),
                    node_address,
                ],
            ),
            Reply::Lines { first, words } => {
                let mut w = [0u32; 6];
                w[0] = u32::from(first);
                w[1..].copy_from_slice(&words);
                Words::new(k(kind::LINES), &w)
            }
            Reply::Stats(s) => Words::new(
                k(kind::STATS),
                &[hi(s[0]), s[0] as u32, hi(s[1]), s[1] as u32, hi(s[2]), s[2] as u32],
            ),
            Reply::Diagnostic(d) => Words::new(
                k(kind::DIAGNOSTIC),
                &[d.kind as u32, hi(d.addr), d.addr as u32, d.value],
            ),
            Reply::Error(e) => Words::new(ERROR, &[error_code(e)]),
        }
    }

    /// Decodes a received reply.
    pub fn decode(label: u16, words: &[u32]) -> Result<Reply, ProtoError> {
        if label == ERROR {
            let [c] = expect(words)?;
            return error_from_code(c).map(Reply::Error).ok_or(ProtoError::BadField);
        }
        let kind = label.checked_sub(REPLY).ok_or(ProtoError::UnknownLabel)?;
        Ok(match kind {
            kind::DONE => {
                let [] = expect(words)?;
                Reply::Done
            }
            kind::VALUE => Reply::Value(expect::<1>(words)?[0]),
            kind::ATTACHED => {
                let [ep, h, l] = expect(words)?;
                Reply::Attached {
                    ep: ep_of(ep)?,
                    bus_base: join(h, l),
                }
            }
            kind::TREE_PACKET => Reply::TreePacket {
                header: expect::<1>(words)?[0],
            },
            kind::FRAME => {
                let [len] = expect(words)?;
                field(len <= FRAME_MAX_BYTES)?;
                Reply::Frame { len }
            }
            kind::EMPTY => {
                let [] = expect(words)?;
                Reply::Empty
            }
            kind::MAC => {
                let [a, b] = expect(words)?;
                field(a >> 16 == 0)?;
                let [_, _, m0, m1] = a.to_be_bytes();
                let [m2, m3, m4, m5] = b.to_be_bytes();
                Reply::Mac([m0, m1, m2, m3, m4, m5])
            }
            kind::COORDS => {
                let [x, y, z, node_address] = expect(words)?;
                field(x <= 0xFF && y <= 0xFF && z <= 0xFF)?;
                Reply::Coords {
                    coords: Coords {
                        x: x as u8,
                        y: y as u8,
                        z: z as u8,
                    },
                    node_address,
                }
            }
            kind::LINES => {
                let w: [u32; 6] = expect(words)?;
                field(w[0] as usize + LINES_PER_REPLY <= IRQ_WORDS)?;
                Reply::Lines {
                    first: w[0] as u8,
                    words: [w[1], w[2], w[3], w[4], w[5]],
                }
            }
            kind::STATS => {
                let w: [u32; 6] = expect(words)?;
                Reply::Stats([join(w[0], w[1]), join(w[2], w[3]), join(w[4], w[5])])
            }
            kind::DIAGNOSTIC => {
                let [kind, h, l, value] = expect(words)?;
                Reply::Diagnostic(Diagnostic {
                    kind: DiagKind::from_code(kind).ok_or(ProtoError::BadField)?,
                    addr: join(h, l),
                    value,
                })
            }
            _ => return Err(ProtoError::UnknownLabel),
        })
    }
}

impl Event {
    pub fn encode(&self) -> Words {
        Words::new(EVENT, &[self.changed])
    }

    pub fn decode(label: u16, words: &[u32]) -> Result<Event, ProtoError> {
        if label != EVENT {
            return Err(ProtoError::UnknownLabel);
        }
        let [changed] = expect(words)?;
        field(changed >> MAX_ENDPOINTS == 0)?;
        Ok(Event { changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    fn any_ep() -> impl Strategy<Value = EpId> {
        (0..MAX_ENDPOINTS as u8).prop_map(EpId)
    }

    fn any_request() -> impl Strategy<Value = Request> {
        let ep = any_ep;
        prop_oneof![
            (1..=MAX_WINDOW as u32, any::<u32>()).prop_map(|(window_len, event_thread)| {
                Request::Attach {
                    window_len,
                    event_thread,
                }
            }),
            ep().prop_map(|ep| Request::Detach { ep }),
            (ep(), any::<u32>()).prop_map(|(ep, offset)| Request::DmaRead { ep, offset }),
            (ep(), any::<u32>(), any::<u32>())
                .prop_map(|(ep, offset, value)| Request::DmaWrite { ep, offset, value }),
            (ep(), any::<u32>()).prop_map(|(ep, dcr)| Request::DcrRead { ep, dcr }),
            (ep(), any::<u32>(), any::<u32>())
                .prop_map(|(ep, dcr, value)| Request::DcrWrite { ep, dcr, value }),
            (ep(), 0..2u8, any::<u32>())
                .prop_map(|(ep, vc, header)| Request::TreeInject { ep, vc, header }),
            (ep(), 0..2u8).prop_map(|(ep, vc)| Request::TreeReceive { ep, vc }),
            (ep(), 0..2u8).prop_map(|(ep, vc)| Request::TreeStatus { ep, vc }),
            (ep(), 0..=FRAME_MAX_BYTES).prop_map(|(ep, len)| Request::FrameSend { ep, len }),
            ep().prop_map(|ep| Request::FrameReceive { ep }),
            ep().prop_map(|ep| Request::FrameMac { ep }),
            ep().prop_map(|ep| Request::Coords { ep }),
            (ep(), 0..=10u8).prop_map(|(ep, first)| Request::IrqLines { ep, first }),
            Just(Request::TakeChanged),
            (ep(), 0..4u8).prop_map(|(ep, part)| Request::Stats { ep, part }),
            ep().prop_map(|ep| Request::TakeDiagnostic { ep }),
        ]
    }

    fn any_error() -> impl Strategy<Value = FabricError> {
        (1..=9u32).prop_map(|c| error_from_code(c).unwrap())
    }

    fn any_reply() -> impl Strategy<Value = Reply> {
        prop_oneof![
            Just(Reply::Done),
            any::<u32>().prop_map(Reply::Value),
            (any_ep(), any::<u64>()).prop_map(|(ep, bus_base)| Reply::Attached { ep, bus_base }),
            any::<u32>().prop_map(|header| Reply::TreePacket { header }),
            (0..=FRAME_MAX_BYTES).prop_map(|len| Reply::Frame { len }),
            Just(Reply::Empty),
            any::<[u8; 6]>().prop_map(Reply::Mac),
            (any::<[u8; 3]>(), any::<u32>()).prop_map(|(c, node_address)| Reply::Coords {
                coords: Coords {
                    x: c[0],
                    y: c[1],
                    z: c[2]
                },
                node_address
            }),
            (0..=10u8, any::<[u32; 5]>()).prop_map(|(first, words)| Reply::Lines { first, words }),
            any::<[u64; 3]>().prop_map(Reply::Stats),
            (1..=11u32, any::<u64>(), any::<u32>()).prop_map(|(k, addr, value)| {
                Reply::Diagnostic(Diagnostic {
                    kind: DiagKind::from_code(k).unwrap(),
                    addr,
                    value,
                })
            }),
            any_error().prop_map(Reply::Error),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trip(r in any_request()) {
            let w = r.encode();
            prop_assert!(w.len <= MAX_WORDS);
            prop_assert_eq!(Request::decode(w.label, w.words()), Ok(r));
        }

        #[test]
        fn reply_round_trip(r in any_reply()) {
            let w = r.encode();
            prop_assert_eq!(Reply::decode(w.label, w.words()), Ok(r));
        }

        #[test]
        fn event_round_trip(changed in 0..(1u32 << MAX_ENDPOINTS)) {
            let w = Event { changed }.encode();
            prop_assert_eq!(Event::decode(w.label, w.words()), Ok(Event { changed }));
        }

        /// Whatever decodes re-encodes to the same label and words.
        #[test]
        fn decode_is_strict(label in 0x05F0u16..0x0710, n in 0usize..=6, w in any::<[u32; 6]>()) {
            if let Ok(r) = Request::decode(label, &w[..n]) {
                let e = r.encode();
                prop_assert_eq!((e.label, e.words()), (label, &w[..n]));
            }
            if let Ok(r) = Reply::decode(label, &w[..n]) {
                let e = r.encode();
                prop_assert_eq!((e.label, e.words()), (label, &w[..n]));
            }
        }
    }

    #[test]
    fn bad_fields_are_refused() {
        assert_eq!(Request::decode(LABEL + op::DETACH, &[16]), Err(ProtoError::BadField));
        assert_eq!(Request::decode(LABEL + op::TREE_STATUS, &[0, 2]), Err(ProtoError::BadField));
        assert_eq!(Request::decode(LABEL + op::DETACH, &[0, 0]), Err(ProtoError::WordCount));
        assert_eq!(Request::decode(LABEL + op::COUNT, &[]), Err(ProtoError::UnknownLabel));
        assert_eq!(Request::decode(LABEL + op::ATTACH, &[0, 1]), Err(ProtoError::BadField));
        assert_eq!(Request::decode(LABEL + op::IRQ_LINES, &[0, 11]), Err(ProtoError::BadField));
        assert_eq!(Reply::decode(ERROR, &[0]), Err(ProtoError::BadField));
        assert_eq!(Reply::decode(REPLY + kind::COUNT, &[]), Err(ProtoError::UnknownLabel));
        assert_eq!(Event::decode(EVENT, &[1 << 16]), Err(ProtoError::BadField));
    }
}
