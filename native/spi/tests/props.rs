//! Property tests of what the SPI layer parses from other tenants (received packets, put
//! back together by [`Reassembly`]) and of the headers it encodes (bgnet's link header,
//! the collective packet headers).

use kestrel_bgp::coll;
use kestrel_spi::{link_header, tree, Packet, Reassembly, LINK_HDR, MAX_MSG, PKT_PAYLOAD};
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::HashMap;

/// A packet as (word3, put_offset, payload).
type Raw = (u32, u32, Vec<u8>);

fn add<const N: usize>(r: &mut Reassembly<N>, (w3, off, p): &Raw, out: &mut Vec<(u32, Vec<u8>)>) {
    let pkt = Packet {
        hw0: 0,
        put_offset: *off,
        word3: *w3,
        payload: p,
    };
    r.add(&pkt, |m| out.push((m.word3, m.bytes.to_vec())));
}

/// The packets of `m` (word3 `w3`) as the engine delivers them: 240-byte pieces at their
/// byte offsets, each padded to the end of its 32-byte chunk.
fn split(w3: u32, m: &[u8]) -> Vec<Raw> {
    m.chunks(PKT_PAYLOAD)
        .enumerate()
        .map(|(k, c)| {
            let mut p = c.to_vec();
            p.resize((c.len() + 16).div_ceil(32) * 32 - 16, 0);
            (w3, (k * PKT_PAYLOAD) as u32, p)
        })
        .collect()
}

fn message(len: usize, fill: u8) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
    link_header(&mut m, 7, len, 1);
    m
}

/// Packets a hostile sender might deliver: ids that collide, offsets on and off the 240-byte
/// grid and past the longest message, payloads of any length (0xAA never among their
/// bytes), and forged link-header lengths.
fn hostile() -> impl Strategy<Value = Raw> {
    let word3 = prop_oneof![4 => 0..3u32, 1 => any::<u32>()];
    let off = prop_oneof![
        4 => (0..42u32).prop_map(|k| k * PKT_PAYLOAD as u32),
        1 => any::<u32>(),
    ];
    let total = prop_oneof![
        3 => LINK_HDR as u32..=2 * PKT_PAYLOAD as u32,
        1 => 0..=MAX_MSG as u32 + 1,
        1 => any::<u32>(),
    ];
    let payload = (vec(0..0xAAu8, 0..=256), proptest::option::of(total)).prop_map(|(mut p, t)| {
        if let (Some(t), true) = (t, p.len() >= 8) {
            p[4..8].copy_from_slice(&t.to_be_bytes());
        }
        p
    });
    (word3, off, payload)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Hostile packet sequences never panic the reassembly, and every message it completes
    /// has the length its link header says (within LINK_HDR..=MAX_MSG) and holds only bytes
    /// that the last packet at each offset of its id carried, or zeros: never the bytes of
    /// an earlier message reassembled in the same slot (the 0xAA messages put through
    /// first).
    #[test]
    fn hostile_packets_yield_only_consistent_messages(pkts in vec(hostile(), 0..80)) {
        let mut r = Reassembly::<3>::new();
        let mut out = Vec::new();
        // Leave 0xAA bytes in every slot.
        let secrets: Vec<Raw> = (0..3).flat_map(|k| {
            let mut m = vec![0xAA; MAX_MSG];
            link_header(&mut m, 0, MAX_MSG, 0);
            split(0xAA00 + k, &m)
        }).collect();
        for k in 0..3 {
            add(&mut r, &secrets[k * 39], &mut out);
        }
        for p in &secrets {
            if p.1 != 0 {
                add(&mut r, p, &mut out);
            }
        }
        prop_assert_eq!(out.len(), 3);
        out.clear();
        let mut last: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
        for p in &pkts {
            last.insert((p.0, p.1), p.2.clone());
            add(&mut r, p, &mut out);
            for (w3, m) in out.drain(..) {
                prop_assert!((LINK_HDR..=MAX_MSG).contains(&m.len()));
                prop_assert_eq!(u32::from_be_bytes([m[4], m[5], m[6], m[7]]) as usize, m.len());
                for (i, &b) in m.iter().enumerate() {
                    let at = (i - i % PKT_PAYLOAD) as u32;
                    let carried = last[&(w3, at)].get(i % PKT_PAYLOAD).copied().unwrap_or(0);
                    prop_assert_eq!(b, carried, "byte {} of a message of {} bytes", i, m.len());
                }
            }
        }
    }

    /// A genuine message, its packets in any order and some of them twice, among hostile
    /// packets of other ids, comes out exactly (and whenever it comes out again, exactly).
    #[test]
    fn a_message_survives_reordering_duplicates_and_noise(
        len in LINK_HDR..=MAX_MSG,
        fill in any::<u8>(),
        seed in any::<u64>(),
        dups in vec(any::<prop::sample::Index>(), 0..4),
        noise in vec((any::<prop::sample::Index>(), hostile()), 0..40),
    ) {
        let m = message(len, fill);
        let mut pkts = split(0x77, &m);
        for d in &dups {
            let p = d.get(&pkts).clone();
            pkts.push(p);
        }
        // Shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..pkts.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            pkts.swap(i, (s >> 33) as usize % (i + 1));
        }
        for (at, (w3, off, p)) in noise {
            let i = at.index(pkts.len() + 1);
            pkts.insert(i, (w3 % 3, off, p));
        }
        let mut r = Reassembly::<4>::new();
        let mut out = Vec::new();
        for p in &pkts {
            add(&mut r, p, &mut out);
        }
        let mine: Vec<&Vec<u8>> = out.iter().filter(|(w3, _)| *w3 == 0x77).map(|(_, b)| b).collect();
        prop_assert!(!mine.is_empty(), "the message never completed");
        for b in mine {
            prop_assert_eq!(b, &m);
        }
    }

    /// bgnet's link header reads back as written.
    #[test]
    fn link_header_round_trips(key in any::<u32>(), len in 0..=MAX_MSG, proto in any::<u16>(), junk in any::<[u8; 16]>()) {
        let mut out = junk;
        link_header(&mut out, key, len, proto);
        prop_assert_eq!(u32::from_be_bytes(out[0..4].try_into().unwrap()), key);
        prop_assert_eq!(u32::from_be_bytes(out[4..8].try_into().unwrap()) as usize, len);
        prop_assert_eq!(u16::from_be_bytes([out[8], out[9]]), proto);
        prop_assert_eq!(&out[10..12], &[0, 0]);
        prop_assert_eq!(&out[12..], &junk[12..]);
    }

    /// The collective headers decode to the fields they were built from; out-of-range
    /// values are masked into their own field and never reach another.
    #[test]
    fn collective_headers_round_trip(class in any::<u32>(), tag in any::<u32>(), dest in any::<u32>(), op in any::<u32>(), k in 0..8u32) {
        let field = |h: u32, shift: u32, mask: u32| (h >> shift) & mask;
        let h = tree::bcast(class, tag);
        prop_assert_eq!(coll::hdr_class(h), class & coll::HDR_CLASS_MASK);
        prop_assert_eq!(field(h, coll::HDR_TAG_SHIFT, coll::HDR_TAG_MASK), tag & coll::HDR_TAG_MASK);
        prop_assert_eq!(field(h, coll::HDR_OP_SHIFT, coll::HDR_OP_MASK), coll::OP_NONE);
        prop_assert_eq!(h & (coll::HDR_P2P | coll::HDR_IRQ), coll::HDR_IRQ);
        prop_assert_eq!(h & coll::HDR_CSUM_MASK, 0);

        let h = tree::p2p(class, dest);
        prop_assert_eq!(coll::hdr_class(h), class & coll::HDR_CLASS_MASK);
        prop_assert_eq!(field(h, coll::HDR_P2P_ADDR_SHIFT, coll::HDR_P2P_ADDR_MASK), dest & coll::HDR_P2P_ADDR_MASK);
        prop_assert_eq!(h & (coll::HDR_P2P | coll::HDR_IRQ), coll::HDR_P2P | coll::HDR_IRQ);
        prop_assert_eq!(h & coll::HDR_CSUM_MASK, 0);

        // Operand sizes 2, 4, ... 256 bytes.
        let bytes = 2 << k;
        let h = tree::reduce(class, op, bytes);
        prop_assert_eq!(coll::hdr_class(h), class & coll::HDR_CLASS_MASK);
        prop_assert_eq!(field(h, coll::HDR_OP_SHIFT, coll::HDR_OP_MASK), op & coll::HDR_OP_MASK);
        prop_assert_eq!((field(h, coll::HDR_OPSIZE_SHIFT, coll::HDR_OPSIZE_MASK) + 1) * 2, bytes);
        prop_assert_eq!(h & (coll::HDR_P2P | coll::HDR_IRQ), coll::HDR_IRQ);
        prop_assert_eq!(field(h, coll::HDR_TAG_SHIFT, coll::HDR_TAG_MASK), 0);
    }
}
