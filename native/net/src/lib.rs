//! A tiny network peer for bgnet (bgp-interconnect.md 2.4): the answers `kestrel-echo`
//! gives (ARP for its IPv4 address, ICMP echo, UDP echo on port 7), and bgnet's collective
//! framing (16-byte link header per 256-byte packet, reassembly by source and connection).
//! Pure and host-tested: every byte here comes from a guest.

#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

use kestrel_bgp::coll::LINK_HDR_BYTES as COLL_HDR_BYTES;
use kestrel_bgp::torus::LINK_PROTO_NET;

/// The UDP echo port.
pub const ECHO_PORT: u16 = 7;
/// A UDP payload that, echoed, also ends `kestrel-echo`.
pub const QUIT: &[u8] = b"KESTREL-ECHO-QUIT";
/// Longest Ethernet frame handled.
pub const MAX_FRAME: usize = 1518;

const ETH_HDR: usize = 14;
const ETH_ARP: u16 = 0x0806;
const ETH_IP: u16 = 0x0800;

/// Who the peer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Me {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
}

/// What [`answer`] made of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Not for us, or nothing to answer.
    None,
    /// The reply (in `out[..len]`) to an ARP request.
    Arp(usize),
    /// The reply to an ICMP echo request.
    Ping(usize),
    /// The UDP echo; `quit` when the payload was [`QUIT`].
    Udp { len: usize, quit: bool },
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The Internet checksum of `b`.
pub fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        s += u32::from(w);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The answer to Ethernet frame `f` (without FCS), written to `out` (at least as long as
/// `f` and 60 bytes).
pub fn answer(me: &Me, f: &[u8], out: &mut [u8]) -> Answer {
    if f.len() < ETH_HDR || f.len() > MAX_FRAME || out.len() < f.len().max(60) {
        return Answer::None;
    }
    let dst = &f[0..6];
    let bcast = dst[0] & 1 != 0;
    if !bcast && dst != me.mac {
        return Answer::None;
    }
    match be16(f, 12) {
        ETH_ARP => arp(me, f, out),
        ETH_IP if !bcast => ip(me, f, out),
        _ => Answer::None,
    }
}

fn arp(me: &Me, f: &[u8], out: &mut [u8]) -> Answer {
    let a = &f[ETH_HDR..];
    // Ethernet/IPv4 request for our address.
    if a.len() < 28
        || be16(a, 0) != 1
        || be16(a, 2) != ETH_IP
        || a[4] != 6
        || a[5] != 4
        || be16(a, 6) != 1
        || a[24..28] != me.ip
    {
        return Answer::None;
    }
    let n = 60;
    out[..n].fill(0);
    out[0..6].copy_from_slice(&a[8..14]);
    out[6..12].copy_from_slice(&me.mac);
    out[12..14].copy_from_slice(&ETH_ARP.to_be_bytes());
    let r = &mut out[ETH_HDR..ETH_HDR + 28];
    r[0..8].copy_from_slice(&a[0..8]);
    r[6..8].copy_from_slice(&2u16.to_be_bytes());
    r[8..14].copy_from_slice(&me.mac);
    r[14..18].copy_from_slice(&me.ip);
    r[18..24].copy_from_slice(&a[8..14]);
    r[24..28].copy_from_slice(&a[14..18]);
    Answer::Arp(n)
}

fn ip(me: &Me, f: &[u8], out: &mut [u8]) -> Answer {
    let p = &f[ETH_HDR..];
    if p.len() < 20 || p[0] >> 4 != 4 {
        return Answer::None;
    }
    let ihl = usize::from(p[0] & 0xf) * 4;
    let total = usize::from(be16(p, 2));
    if ihl < 20 || total < ihl || total > p.len() || p[16..20] != me.ip {
        return Answer::None;
    }
    // Fragments are not reassembled: answer only whole datagrams.
    if be16(p, 6) & 0x3fff != 0 || checksum(&p[..ihl]) != 0 {
        return Answer::None;
    }
    let n = ETH_HDR + total;
    out[..n].copy_from_slice(&f[..n]);
    out[0..6].copy_from_slice(&f[6..12]);
    out[6..12].copy_from_slice(&me.mac);
    let o = &mut out[ETH_HDR..n];
    o[12..16].copy_from_slice(&p[16..20]);
    o[16..20].copy_from_slice(&p[12..16]);
    o[8] = 64;
    let ans = match p[9] {
        1 => {
            let icmp = &mut o[ihl..];
            if icmp.len() < 8 || icmp[0] != 8 || checksum(icmp) != 0 {
                return Answer::None;
            }
            icmp[0] = 0;
            icmp[2..4].fill(0);
            let c = checksum(icmp);
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
            Answer::Ping(n.max(60))
        }
        17 => {
            let udp = &mut o[ihl..];
            if udp.len() < 8 || be16(udp, 2) != ECHO_PORT || usize::from(be16(udp, 4)) != udp.len()
            {
                return Answer::None;
            }
            let (sp, dp) = ([udp[0], udp[1]], [udp[2], udp[3]]);
            udp[0..2].copy_from_slice(&dp);
            udp[2..4].copy_from_slice(&sp);
            // No UDP checksum (IPv4 allows it): the payload goes back unchanged.
            udp[6..8].fill(0);
            let quit = &udp[8..] == QUIT || udp[8..].strip_suffix(b"\n") == Some(QUIT);
            Answer::Udp {
                len: n.max(60),
                quit,
            }
        }
        _ => return Answer::None,
    };
    o[10..12].fill(0);
    let c = checksum(&o[..ihl]);
    o[10..12].copy_from_slice(&c.to_be_bytes());
    if n < 60 {
        out[n..60].fill(0);
    }
    ans
}

/// Writes an ARP request from `me` for `target` to `out` (60 bytes); returns its length.
pub fn arp_request(me: &Me, target: [u8; 4], out: &mut [u8]) -> usize {
    out[..60].fill(0);
    out[0..6].fill(0xff);
    out[6..12].copy_from_slice(&me.mac);
    out[12..14].copy_from_slice(&ETH_ARP.to_be_bytes());
    let a = &mut out[ETH_HDR..ETH_HDR + 28];
    a[0..8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    a[8..14].copy_from_slice(&me.mac);
    a[14..18].copy_from_slice(&me.ip);
    a[24..28].copy_from_slice(&target);
    60
}

/// The MAC an ARP reply to `me` gives for `ip`, if `f` is one.
pub fn arp_reply_mac(me: &Me, ip: [u8; 4], f: &[u8]) -> Option<[u8; 6]> {
    if f.len() < ETH_HDR + 28 || be16(f, 12) != ETH_ARP || f[0..6] != me.mac {
        return None;
    }
    let a = &f[ETH_HDR..];
    if be16(a, 6) != 2 || a[14..18] != ip || a[24..28] != me.ip {
        return None;
    }
    let mut m = [0u8; 6];
    m.copy_from_slice(&a[8..14]);
    Some(m)
}

/// Writes a UDP datagram from `me` (port `sport`) to `dst` (`mac`, `ip`, port `dport`) with
/// `payload` to `out`; returns the frame's length (at least 60).
pub fn udp_datagram(
    me: &Me,
    dst: (&[u8; 6], [u8; 4], u16),
    sport: u16,
    payload: &[u8],
    out: &mut [u8],
) -> usize {
    let total = 20 + 8 + payload.len();
    let n = ETH_HDR + total;
    out[..n.max(60)].fill(0);
    out[0..6].copy_from_slice(dst.0);
    out[6..12].copy_from_slice(&me.mac);
    out[12..14].copy_from_slice(&ETH_IP.to_be_bytes());
    let ip = &mut out[ETH_HDR..n];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&me.ip);
    ip[16..20].copy_from_slice(&dst.1);
    let c = checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&dst.2.to_be_bytes());
    ip[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    ip[28..].copy_from_slice(payload);
    n.max(60)
}

/// The payload of a UDP datagram for `me` on port `port` in frame `f`.
pub fn udp_payload<'a>(me: &Me, port: u16, f: &'a [u8]) -> Option<&'a [u8]> {
    if f.len() < ETH_HDR + 28 || be16(f, 12) != ETH_IP || f[0..6] != me.mac {
        return None;
    }
    let p = &f[ETH_HDR..];
    let ihl = usize::from(p[0] & 0xf) * 4;
    let total = usize::from(be16(p, 2));
    if p[9] != 17 || ihl < 20 || total > p.len() || total < ihl + 8 || p[16..20] != me.ip {
        return None;
    }
    let u = &p[ihl..total];
    if be16(u, 2) != port || usize::from(be16(u, 4)) != u.len() {
        return None;
    }
    Some(&u[8..])
}

/// Cuts `frame` into bgnet collective packets (network `netid`, from node address
/// `src_key`, connection `conn_id`) and gives each to `send`.
pub fn coll_packets(
    frame: &[u8],
    netid: u32,
    src_key: u32,
    conn_id: u16,
    mut send: impl FnMut(&[u8; 256]),
) {
    let npkts = frame.len().div_ceil(COLL_CHUNK).clamp(1, COLL_MAX_PKTS);
    let pad_tail = npkts * COLL_CHUNK - frame.len().min(npkts * COLL_CHUNK);
    for i in 0..npkts {
        let mut p = [0u8; 256];
        CollHdr {
            dst_key: netid,
            src_key,
            conn_id,
            this_pkt: i as u8,
            total_pkt: npkts as u8,
            lnk_proto: LINK_PROTO_NET as u16,
            opt: pad_tail as u16,
        }
        .write(&mut p);
        let c = &frame[(i * COLL_CHUNK).min(frame.len())..frame.len().min((i + 1) * COLL_CHUNK)];
        p[COLL_HDR_BYTES as usize..COLL_HDR_BYTES as usize + c.len()].copy_from_slice(c);
        send(&p);
    }
}

/// bgnet's collective link header (at the start of every 256-byte packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollHdr {
    pub dst_key: u32,
    pub src_key: u32,
    pub conn_id: u16,
    pub this_pkt: u8,
    pub total_pkt: u8,
    pub lnk_proto: u16,
    pub opt: u16,
}

/// Frame bytes per collective packet.
pub const COLL_CHUNK: usize = 256 - COLL_HDR_BYTES as usize;
/// Packets of the longest frame.
const COLL_MAX_PKTS: usize = MAX_FRAME.div_ceil(COLL_CHUNK);

impl CollHdr {
    pub fn parse(p: &[u8; 256]) -> CollHdr {
        let w = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        CollHdr {
            dst_key: w(0),
            src_key: w(4),
            conn_id: be16(p, 8),
            this_pkt: p[10],
            total_pkt: p[11],
            lnk_proto: be16(p, 12),
            opt: be16(p, 14),
        }
    }

    pub fn write(&self, p: &mut [u8; 256]) {
        p[0..4].copy_from_slice(&self.dst_key.to_be_bytes());
        p[4..8].copy_from_slice(&self.src_key.to_be_bytes());
        p[8..10].copy_from_slice(&self.conn_id.to_be_bytes());
        p[10] = self.this_pkt;
        p[11] = self.total_pkt;
        p[12..14].copy_from_slice(&self.lnk_proto.to_be_bytes());
        p[14..16].copy_from_slice(&self.opt.to_be_bytes());
    }
}

/// A frame being put together: in use, source, connection, packets, option word, packets
/// seen, bytes.
type CollSlot = (
    bool,
    u32,
    u16,
    u8,
    u16,
    u64,
    [u8; COLL_MAX_PKTS * COLL_CHUNK],
);

/// Reassembly of bgnet frames from collective packets (one frame at a time per source,
/// `N` sources at once).
pub struct CollReassembly<const N: usize> {
    slots: [CollSlot; N],
    victim: usize,
    pub bad: u32,
}

impl<const N: usize> Default for CollReassembly<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> CollReassembly<N> {
    pub const fn new() -> Self {
        CollReassembly {
            slots: [(false, 0, 0, 0, 0, 0, [0; COLL_MAX_PKTS * COLL_CHUNK]); N],
            victim: 0,
            bad: 0,
        }
    }

    /// Adds a packet of network `netid` not sent by `me` (node address); a completed
    /// frame goes to `done` with its sender's node address.
    pub fn add(&mut self, netid: u32, me: u32, p: &[u8; 256], done: impl FnOnce(u32, &[u8])) {
        let h = CollHdr::parse(p);
        if h.dst_key != netid || u32::from(h.lnk_proto) != LINK_PROTO_NET || h.src_key == me {
            return;
        }
        let total = usize::from(h.total_pkt);
        if total == 0 || total > COLL_MAX_PKTS || h.this_pkt >= h.total_pkt {
            self.bad += 1;
            return;
        }
        let i = match self
            .slots
            .iter()
            .position(|s| s.0 && s.1 == h.src_key && s.2 == h.conn_id)
        {
            Some(i) => i,
            None => {
                let i = self.slots.iter().position(|s| !s.0).unwrap_or_else(|| {
                    self.victim = (self.victim + 1) % N;
                    self.victim
                });
                let s = &mut self.slots[i];
                (s.0, s.1, s.2, s.3, s.4, s.5) =
                    (true, h.src_key, h.conn_id, h.total_pkt, h.opt, 0);
                i
            }
        };
        let s = &mut self.slots[i];
        if s.3 != h.total_pkt || s.4 != h.opt {
            self.bad += 1;
            s.0 = false;
            return;
        }
        let at = usize::from(h.this_pkt) * COLL_CHUNK;
        s.6[at..at + COLL_CHUNK].copy_from_slice(&p[COLL_HDR_BYTES as usize..]);
        s.5 |= 1 << h.this_pkt;
        if s.5 != (1u64 << total) - 1 {
            return;
        }
        s.0 = false;
        let pad_head = usize::from((h.opt >> 8) & 0xf);
        let pad_tail = usize::from(h.opt & 0xff);
        let len = total * COLL_CHUNK;
        if pad_head + pad_tail + ETH_HDR > len {
            self.bad += 1;
            return;
        }
        done(h.src_key, &s.6[pad_head..len - pad_tail]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    const ME: Me = Me {
        mac: [6, 0, 0, 3, 0, 0],
        ip: [10, 1, 0, 100],
    };
    const PEER_MAC: [u8; 6] = [6, 0, 0, 0, 0, 0];
    const PEER_IP: [u8; 4] = [10, 1, 0, 1];

    fn arp_request(tpa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&PEER_IP);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    fn udp(payload: &[u8], port: u16) -> Vec<u8> {
        let mut f = ME.mac.to_vec();
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&[8, 0]);
        let total = 20 + 8 + payload.len();
        let mut ip = vec![
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ];
        ip.extend_from_slice(&PEER_IP);
        ip.extend_from_slice(&ME.ip);
        let c = checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let ul = 8 + payload.len();
        f.extend_from_slice(&[
            0x90,
            0x01,
            (port >> 8) as u8,
            port as u8,
            (ul >> 8) as u8,
            ul as u8,
            0,
            0,
        ]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn answers_arp_for_its_address_only() {
        let mut out = [0u8; MAX_FRAME];
        assert_eq!(answer(&ME, &arp_request(ME.ip), &mut out), Answer::Arp(60));
        assert_eq!(&out[0..6], &PEER_MAC);
        assert_eq!(&out[6..12], &ME.mac);
        assert_eq!(&out[20..22], &[0, 2]);
        assert_eq!(&out[22..28], &ME.mac);
        assert_eq!(&out[28..32], &ME.ip);
        assert_eq!(&out[32..38], &PEER_MAC);
        assert_eq!(&out[38..42], &PEER_IP);
        assert_eq!(
            answer(&ME, &arp_request([10, 1, 0, 7]), &mut out),
            Answer::None
        );
    }

    #[test]
    fn echoes_udp_on_port_7_with_valid_headers() {
        let mut out = [0u8; MAX_FRAME];
        let f = udp(b"hello fabric", 7);
        let Answer::Udp { len, quit } = answer(&ME, &f, &mut out) else {
            panic!("no echo");
        };
        assert!(!quit);
        assert_eq!(len, 60);
        assert_eq!(&out[0..6], &PEER_MAC);
        assert_eq!(checksum(&out[14..34]), 0, "IP header checksum");
        assert_eq!(&out[26..30], &ME.ip);
        assert_eq!(&out[30..34], &PEER_IP);
        assert_eq!(&out[34..38], &[0, 7, 0x90, 0x01]);
        assert_eq!(&out[42..54], b"hello fabric");
        assert_eq!(answer(&ME, &udp(b"x", 9), &mut out), Answer::None);
        let q = udp(QUIT, 7);
        assert!(matches!(
            answer(&ME, &q, &mut out),
            Answer::Udp { quit: true, .. }
        ));
    }

    #[test]
    fn a_client_and_the_peer_understand_each_other() {
        let client = Me {
            mac: PEER_MAC,
            ip: PEER_IP,
        };
        let mut q = [0u8; MAX_FRAME];
        let mut a = [0u8; MAX_FRAME];
        let n = super::arp_request(&client, ME.ip, &mut q);
        let Answer::Arp(m) = answer(&ME, &q[..n], &mut a) else {
            panic!("no ARP answer");
        };
        assert_eq!(arp_reply_mac(&client, ME.ip, &a[..m]), Some(ME.mac));
        let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let n = udp_datagram(&client, (&ME.mac, ME.ip, ECHO_PORT), 4242, &payload, &mut q);
        let Answer::Udp { len, quit: false } = answer(&ME, &q[..n], &mut a) else {
            panic!("no echo");
        };
        assert_eq!(udp_payload(&client, 4242, &a[..len]), Some(&payload[..]));
        // Over the collective framing and back.
        let mut r = CollReassembly::<2>::new();
        let mut got = None;
        coll_packets(&q[..n], 0, 5, 1, |p| {
            r.add(0, 3, p, |src, f| got = Some((src, f.to_vec())))
        });
        assert_eq!(got, Some((5, q[..n].to_vec())));
    }

    #[test]
    fn collective_frames_reassemble() {
        let frame: Vec<u8> = (0..700u32).map(|i| i as u8).collect();
        let npkts = frame.len().div_ceil(COLL_CHUNK);
        let pad_tail = npkts * COLL_CHUNK - frame.len();
        let mut r = CollReassembly::<2>::new();
        let mut got = None;
        for i in (0..npkts).rev() {
            let mut p = [0u8; 256];
            CollHdr {
                dst_key: 0,
                src_key: 1,
                conn_id: 9,
                this_pkt: i as u8,
                total_pkt: npkts as u8,
                lnk_proto: LINK_PROTO_NET as u16,
                opt: pad_tail as u16,
            }
            .write(&mut p);
            let c = &frame[i * COLL_CHUNK..frame.len().min((i + 1) * COLL_CHUNK)];
            p[16..16 + c.len()].copy_from_slice(c);
            r.add(0, 3, &p, |_, f| got = Some(f.to_vec()));
        }
        assert_eq!(got, Some(frame));
    }

    proptest! {
        /// Any bytes: no panic, and an answer always fits the frame it answers (or 60).
        #[test]
        fn answer_never_panics(f in proptest::collection::vec(any::<u8>(), 0..1600), to_me in any::<bool>(), kind in 0u8..3) {
            let mut f = f;
            if to_me && f.len() >= 14 {
                f[0..6].copy_from_slice(&ME.mac);
                f[12..14].copy_from_slice(&[[8, 0], [8, 6], [0x86, 0xdd]][kind as usize]);
            }
            let mut out = [0u8; MAX_FRAME];
            match answer(&ME, &f, &mut out) {
                Answer::None => {}
                Answer::Arp(n) | Answer::Ping(n) | Answer::Udp { len: n, .. } => {
                    prop_assert!(n <= f.len().max(60));
                }
            }
        }

        #[test]
        fn coll_reassembly_survives_garbage(pkts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 256), 0..30)) {
            let mut r = CollReassembly::<2>::new();
            for p in &pkts {
                let mut b = [0u8; 256];
                b.copy_from_slice(p);
                b[0..4].fill(0);
                b[12..14].copy_from_slice(&1u16.to_be_bytes());
                r.add(0, 99, &b, |_, f| assert!(f.len() <= COLL_MAX_PKTS * COLL_CHUNK));
            }
        }
    }
}
