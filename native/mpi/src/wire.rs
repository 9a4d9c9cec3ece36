//! The point-to-point protocol's header (ADR 0035): every MPI message on the torus is one
//! memory-FIFO message in bgnet's framing (link header, protocol [`PROTO`]) whose first
//! [`HDR`] bytes after the link header are this header, big-endian.

use kestrel_spi::{LINK_HDR, PKT_PAYLOAD};

/// The link protocol of MPI messages (bgnet's frames are `TORUS_LINK_PROTO_NET`).
pub const PROTO: u16 = 0x4d50;
/// Bytes of the header.
pub const HDR: usize = 52;

/// Eager data: the payload follows the header.
pub const EAGER: u8 = 1;
/// Request to send: `len` bytes wait at the sender as request `a`, whose send stage
/// holds `d` bytes.
pub const RTS: u8 = 2;
/// Clear to send: put bytes `c .. c + d` of request `a` into reception counter `b`, at put
/// offset `len` (0 to 15: the counter's base is in 16-byte units, a chunk put straight into
/// a receive buffer starts where that buffer does); `d == 0` ends the request (matched,
/// nothing more to move).
pub const CTS: u8 = 3;
/// Credits only.
pub const CREDIT: u8 = 4;

/// The header's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hdr {
    pub kind: u8,
    pub ctx: u32,
    pub tag: i32,
    pub seq: u32,
    pub len: u64,
    /// Control-pool bytes of the receiver's messages the sender has taken in.
    pub credit_ctl: u32,
    /// Data-pool bytes of the receiver's eager messages the sender has matched.
    pub credit_data: u32,
    pub a: u32,
    pub b: u32,
    pub c: u64,
    pub d: u32,
}

impl Hdr {
    pub fn write(&self, o: &mut [u8]) {
        o[0] = self.kind;
        o[1..4].fill(0);
        o[4..8].copy_from_slice(&self.ctx.to_be_bytes());
        o[8..12].copy_from_slice(&self.tag.to_be_bytes());
        o[12..16].copy_from_slice(&self.seq.to_be_bytes());
        o[16..24].copy_from_slice(&self.len.to_be_bytes());
        o[24..28].copy_from_slice(&self.credit_ctl.to_be_bytes());
        o[28..32].copy_from_slice(&self.credit_data.to_be_bytes());
        o[32..36].copy_from_slice(&self.a.to_be_bytes());
        o[36..40].copy_from_slice(&self.b.to_be_bytes());
        o[40..48].copy_from_slice(&self.c.to_be_bytes());
        o[48..52].copy_from_slice(&self.d.to_be_bytes());
    }

    pub fn read(i: &[u8]) -> Option<Hdr> {
        if i.len() < HDR {
            return None;
        }
        let w = |k: usize| u32::from_be_bytes(i[k..k + 4].try_into().expect("4 bytes"));
        let q = |k: usize| u64::from_be_bytes(i[k..k + 8].try_into().expect("8 bytes"));
        Some(Hdr {
            kind: i[0],
            ctx: w(4),
            tag: w(8) as i32,
            seq: w(12),
            len: q(16),
            credit_ctl: w(24),
            credit_data: w(28),
            a: w(32),
            b: w(36),
            c: q(40),
            d: w(48),
        })
    }
}

/// Reception-ring bytes a memory-FIFO message of `total` bytes (link header included)
/// occupies: each packet's slot is its 16-byte header and payload rounded up to 32.
pub const fn ring_cost(total: usize) -> u32 {
    let full = total / PKT_PAYLOAD;
    let rest = total % PKT_PAYLOAD;
    let mut c = full * 256;
    if rest > 0 || total == 0 {
        c += (16 + rest).div_ceil(32) * 32;
    }
    c as u32
}

/// Ring cost of a header-only message.
pub const CTL_COST: u32 = ring_cost(LINK_HDR + HDR);
