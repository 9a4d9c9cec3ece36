//! Target `service`: everything of the fabric service's side that parses what a client or a
//! guest sends (`kestrel_fabric::proto`, ADR 0020): request decoding, reply decoding, the
//! torus message reassembly (packets with any Put_Offset, source id and payload), bgnet's
//! collective framing reassembly, and the echo peer's frame answering.
//!
//! Input: operations, one selector byte each, then that operation's fields. Checked: nothing
//! panics; a decoded request names a valid endpoint and re-encodes to the words received;
//! reassembled messages and frames stay within their bounds and carry the length their link
//! header says; an answer never outgrows the frame it answers (or the 60-byte minimum).

use crate::input::{Input, SeedWriter};
use kestrel_fabric::proto::{self, decode_reply, encode_reply, Request};
use kestrel_net::{self as net, answer, Answer, CollReassembly, Me, MAX_FRAME};
use kestrel_spi::{Packet, Reassembly, LINK_HDR, MAX_MSG};

/// Operation selectors, for [`seed`].
pub mod op {
    pub const REQUEST: u8 = 0;
    pub const REPLY: u8 = 1;
    pub const PACKET: u8 = 2;
    pub const COLL: u8 = 3;
    pub const FRAME: u8 = 4;
    pub const COUNT: u8 = 5;
}

const ME: Me = Me {
    mac: [6, 0, 0, 2, 0, 0],
    ip: [10, 1, 0, 100],
};

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut torus = Box::new(Reassembly::<2>::new());
    let mut coll = Box::new(CollReassembly::<2>::new());
    let mut out = vec![0u8; MAX_FRAME];
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::REQUEST => {
                let label = proto::LABEL + u16::from(input.u8() % 20);
                let n = input.below(8) as usize;
                let w: Vec<u32> = (0..n).map(|_| input.u32()).collect();
                if let Some(r) = Request::decode(label, &w) {
                    assert!(r.ep().is_none_or(|e| usize::from(e) < proto::MAX_ENDPOINTS));
                }
                assert!(proto::codec_holds(label, &w), "codec round trip");
            }
            op::REPLY => {
                let label = match input.u8() % 3 {
                    0 => proto::OK,
                    1 => proto::ERROR,
                    _ => input.u16(),
                };
                let n = input.below(8) as usize;
                let w: Vec<u32> = (0..n).map(|_| input.u32()).collect();
                let o = input.u8() as u16 % (proto::LAST_OP + 2);
                if let Ok(r) = decode_reply(o, label, &w) {
                    let e = encode_reply(&Ok(r));
                    assert_eq!(
                        decode_reply(o, e.label, e.words()),
                        Ok(r),
                        "reply round trip"
                    );
                }
            }
            op::PACKET => {
                let word3 = u32::from(input.u8() % 3);
                let put_offset = if input.bool() {
                    input.u32()
                } else {
                    240 * input.below(40)
                };
                let len = usize::from(input.u16()) % 257;
                let payload = input.bytes(len);
                let pkt = Packet {
                    hw0: 0,
                    put_offset,
                    word3,
                    payload,
                };
                torus.add(&pkt, |m| {
                    assert!(m.bytes.len() >= LINK_HDR && m.bytes.len() <= MAX_MSG);
                    let b = m.bytes;
                    let total = u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize;
                    assert_eq!(total, b.len());
                });
            }
            op::COLL => {
                let mut p = [0u8; 256];
                let b = input.bytes(256);
                p[..b.len()].copy_from_slice(b);
                if input.bool() {
                    // A well-formed header for network 0, so reassembly gets exercised.
                    p[0..4].fill(0);
                    p[12..14].copy_from_slice(&1u16.to_be_bytes());
                    p[11] %= 8;
                }
                coll.add(0, 99, &p, |_, f| assert!(f.len() <= 8 * net::COLL_CHUNK));
            }
            _ => {
                let len = usize::from(input.u16()) % (MAX_FRAME + 1);
                let mut f = input.bytes(len).to_vec();
                if input.bool() && f.len() >= 14 {
                    f[0..6].copy_from_slice(&ME.mac);
                    f[12..14].copy_from_slice(&input.pick(&[[8u8, 0], [8, 6]]));
                }
                match answer(&ME, &f, &mut out) {
                    Answer::None => {}
                    Answer::Arp(n) | Answer::Ping(n) | Answer::Udp { len: n, .. } => {
                        assert!(n <= f.len().max(60));
                    }
                }
            }
        }
    }
}

/// Seed `i`: requests, a reassembled message, a collective frame and echo traffic.
pub fn seed(i: u8) -> Vec<u8> {
    let mut s = SeedWriter::default();
    s.u8(op::REQUEST)
        .u8(proto::op::DMA_WRITE as u8)
        .u8(3)
        .u32(u32::from(i) % 16)
        .u32(0x10c)
        .u32(i.into());
    s.u8(op::REPLY)
        .u8(1)
        .u8(1)
        .u32(0x105)
        .u8(proto::op::DMA_READ as u8);
    // A 300-byte message in two packets, second first.
    let mut msg = vec![i; 300];
    msg[4..8].copy_from_slice(&300u32.to_be_bytes());
    s.u8(op::PACKET).u8(1).bool(false).u8(1).u16(60);
    s.raw(&msg[240..]);
    s.u8(op::PACKET).u8(1).bool(false).u8(0).u16(240);
    s.raw(&msg[..240]);
    // A one-packet collective frame.
    let mut p = [0u8; 256];
    net::CollHdr {
        dst_key: 0,
        src_key: 1,
        conn_id: i.into(),
        this_pkt: 0,
        total_pkt: 1,
        lnk_proto: 1,
        opt: 240 - 60,
    }
    .write(&mut p);
    s.u8(op::COLL).raw(&p).bool(false);
    // An ARP request and a UDP datagram for the echo.
    let client = Me {
        mac: [6, 0, 0, 0, 0, 0],
        ip: [10, 1, 0, 1],
    };
    let mut f = vec![0u8; MAX_FRAME];
    let n = net::arp_request(&client, ME.ip, &mut f);
    s.u8(op::FRAME).u16(n as u16).raw(&f[..n]).bool(false);
    let payload = vec![i; 100 + usize::from(i)];
    let n = net::udp_datagram(&client, (&ME.mac, ME.ip, 7), 4000, &payload, &mut f);
    s.u8(op::FRAME).u16(n as u16).raw(&f[..n]).bool(false);
    s.bytes
}
