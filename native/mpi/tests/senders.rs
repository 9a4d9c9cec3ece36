//! Senders are who the fabric says they are (issue 18, finding 2), as the MPI core sees it,
//! with 3 ranks on threads over one engine where rank 2 misbehaves: an allreduce completes
//! only on a reduction result (not on a broadcast on the class), a message's source is its
//! true sender whatever the sender's DMA group claims, and packets planted under another
//! sender's connection cannot corrupt that sender's message in reassembly.

use kestrel_fabric::FabricApi;
use kestrel_mpi::wire::{Hdr, EAGER, HDR, PROTO};
use kestrel_mpi::{Datatype, Mpi, Op, ANY_SOURCE, WORLD};
use kestrel_spi::{layout, link_header, tree, Coords, LINK_HDR, PKT_PAYLOAD};

#[path = "common/shared.rs"]
mod shared;
use shared::{job, Shared};

const WIN: u64 = 1 << 20;

fn at(x: u8) -> Coords {
    Coords { x, y: 0, z: 0 }
}

fn sum(m: &mut Mpi<Shared>, v: u64) -> u64 {
    let mut out = [0u8; 8];
    m.allreduce(WORLD, &v.to_ne_bytes(), &mut out, Datatype::U64, Op::Sum)
        .unwrap();
    u64::from_ne_bytes(out)
}

#[test]
fn a_broadcast_on_the_class_does_not_complete_an_allreduce() {
    let out = job(3, WIN, 20_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        if me == 2 {
            // A source of the class broadcasts junk on it before it contributes.
            let ep = m.dma().1.ep;
            let mut junk = [0xEEu8; 256];
            junk[..8].copy_from_slice(&999u64.to_be_bytes());
            let _ = m.fabric().tree_inject(
                ep,
                kestrel_mpi::VC,
                tree::bcast(kestrel_mpi::CLASS, 0),
                &junk,
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let first = sum(m, u64::from(me as u32) + 1);
        let second = sum(m, 10 * u64::from(me as u32));
        (first, second)
    });
    for (r, got) in out.iter().enumerate() {
        assert_eq!(*got, (6, 30), "rank {r} took something else for the result");
    }
}

/// An eager MPI message on WORLD with `tag`, `seq` and `data`, as the wire carries it.
fn eager(tag: i32, seq: u32, data: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; LINK_HDR + HDR + data.len()];
    let n = m.len();
    link_header(&mut m, 0, n, PROTO);
    Hdr {
        kind: EAGER,
        tag,
        seq,
        len: data.len() as u64,
        ..Hdr::default()
    }
    .write(&mut m[LINK_HDR..LINK_HDR + HDR]);
    m[LINK_HDR + HDR..].copy_from_slice(data);
    m
}

#[test]
fn a_message_is_from_its_true_sender() {
    let out = job(3, WIN, 20_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        match me {
            2 => {
                // Rank 2's DMA group claims to be rank 1 at (1, 0, 0).
                let (p, dma) = m.dma();
                dma.me = at(1);
                assert!(dma.send(p, at(0), &eager(9, 0, b"from rank 1")).unwrap());
                dma.me = at(2);
                m.barrier(WORLD).unwrap();
                String::new()
            }
            1 => {
                m.barrier(WORLD).unwrap();
                m.send(WORLD, 0, 9, b"really 1").unwrap();
                String::new()
            }
            _ => {
                m.barrier(WORLD).unwrap();
                let mut buf = [0u8; 64];
                let st = m.recv(WORLD, 1, 9, &mut buf).unwrap();
                let from1 = String::from_utf8_lossy(&buf[..st.bytes]).into_owned();
                let st = m.recv(WORLD, ANY_SOURCE, 9, &mut buf).unwrap();
                format!(
                    "{from1} / {} from {}",
                    String::from_utf8_lossy(&buf[..st.bytes]),
                    st.source
                )
            }
        }
    });
    assert_eq!(
        out[0], "really 1 / from rank 1 from 2",
        "the forged message is rank 2's"
    );
}

#[test]
fn injected_packets_do_not_corrupt_another_senders_message() {
    let data: Vec<u8> = (0..400u32).map(|i| i as u8).collect();
    let want = data.clone();
    let out = job(3, WIN, 20_000, move |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        if me == 2 {
            // Plant a packet for connections 1..=8 of rank 1, at the second packet's offset.
            let (p, dma) = m.dma();
            let junk = [0xEEu8; PKT_PAYLOAD];
            for conn in 1..=8u32 {
                let victim_word3 = conn << 24 | at(1).key();
                let _ = dma.inject(
                    p,
                    at(0),
                    layout::TX,
                    &junk,
                    PKT_PAYLOAD as u32,
                    victim_word3,
                    false,
                );
            }
        }
        m.barrier(WORLD).unwrap();
        if me == 1 {
            m.send(WORLD, 0, 4, &data).unwrap();
        }
        if me == 0 {
            let mut buf = [0u8; 512];
            let st = m.recv(WORLD, 1, 4, &mut buf).unwrap();
            return buf[..st.bytes].to_vec();
        }
        Vec::new()
    });
    let bad = (0..want.len()).find(|&i| out[0].get(i) != Some(&want[i]));
    assert_eq!(bad, None, "rank 1's message corrupted from this byte on");
}
