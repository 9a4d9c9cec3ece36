//! Senders are who the fabric says they are (issue 18, finding 2), as the MPI layer sees
//! it: an allreduce completes only on a reduction result, a message's `from` is its true
//! sender, and packets injected under another sender's id cannot corrupt that sender's
//! message in reassembly.

use kestrel_fabric::{EpId, Fabric, FabricApi, VecMemory};
use kestrel_mpi::{self as mpi, Comm, Op};
use kestrel_spi::{layout, link_header, tree, DmaGroup, LINK_HDR, PKT_PAYLOAD};

mod common;
use common::{at, fabric};

fn ranks(f: &mut Fabric<VecMemory>, bus: &[u64], n: u8) -> Vec<Box<Comm>> {
    (0..n)
        .map(|k| {
            let mut c = Box::new(Comm::new());
            c.open(f, EpId(k), bus[k as usize]).unwrap();
            c
        })
        .collect()
}

/// An MPI message (link header with `tag` and MPI's protocol, then `data`).
fn mpi_message(tag: u32, data: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; LINK_HDR + data.len()];
    let n = m.len();
    link_header(&mut m, tag, n, mpi::PROTO);
    m[LINK_HDR..].copy_from_slice(data);
    m
}

#[test]
fn a_broadcast_on_the_class_does_not_complete_an_allreduce() {
    let (mut f, bus) = fabric(3);
    let mut r = ranks(&mut f, &bus, 3);
    let mut out = [0u64; 1];
    r[0].reduce_start(&mut f, Op::Sum, &[1]).unwrap();
    r[1].reduce_start(&mut f, Op::Sum, &[2]).unwrap();
    // Endpoint 2 (a source of the class) broadcasts on it instead of contributing.
    let mut junk = [0u8; 256];
    junk[..8].copy_from_slice(&999u64.to_be_bytes());
    f.tree_inject(EpId(2), mpi::VC, tree::bcast(mpi::CLASS, 0), &junk)
        .unwrap();
    assert!(
        !r[0].reduce_poll(&mut f, &mut out).unwrap(),
        "rank 0 took a broadcast ({out:?}) as the allreduce's result"
    );
    assert!(!r[1].reduce_poll(&mut f, &mut out).unwrap());
    // Rank 2 contributes: the true result, and the next allreduce is not one behind.
    r[2].reduce_start(&mut f, Op::Sum, &[3]).unwrap();
    for rk in r.iter_mut() {
        assert!(rk.reduce_poll(&mut f, &mut out).unwrap());
        assert_eq!(out, [6]);
    }
    for (k, rk) in r.iter_mut().enumerate() {
        rk.reduce_start(&mut f, Op::Max, &[k as u64 * 10]).unwrap();
    }
    for rk in r.iter_mut() {
        assert!(rk.reduce_poll(&mut f, &mut out).unwrap());
        assert_eq!(out, [20]);
    }
}

#[test]
fn a_message_is_from_its_true_sender() {
    let (mut f, bus) = fabric(3);
    let mut r = ranks(&mut f, &bus, 2);
    // Endpoint 2 sets up its DMA group claiming to be (1, 0, 0), rank 1.
    let mut liar = DmaGroup::setup(&mut f, EpId(2), bus[2], at(1)).unwrap();
    assert!(liar
        .send(&mut f, at(0), &mpi_message(9, b"from rank 1"))
        .unwrap());
    let mut buf = [0u8; 64];
    assert_eq!(
        r[0].try_recv(&mut f, Some(1), 9, &mut buf).unwrap(),
        None,
        "a message from endpoint 2 was taken as rank 1's"
    );
    assert_eq!(
        r[0].try_recv(&mut f, None, 9, &mut buf).unwrap(),
        Some((2, 11)),
        "the message is endpoint 2's"
    );
    // Rank 1's own messages still arrive as rank 1's.
    assert!(r[1].send(&mut f, 0, 9, b"really 1").unwrap());
    assert_eq!(
        r[0].try_recv(&mut f, Some(1), 9, &mut buf).unwrap(),
        Some((1, 8))
    );
}

#[test]
fn injected_packets_do_not_corrupt_another_senders_message() {
    let (mut f, bus) = fabric(3);
    let mut r = ranks(&mut f, &bus, 2);
    let mut attacker = DmaGroup::setup(&mut f, EpId(2), bus[2], at(2)).unwrap();
    // Rank 1's first message will go out as connection 1 with source key 1 << 16: the
    // attacker plants that message's second packet first.
    let victim_word3 = 1 << 24 | at(1).key();
    let junk = [0xEEu8; PKT_PAYLOAD];
    attacker
        .inject(
            &mut f,
            at(0),
            layout::TX,
            &junk,
            PKT_PAYLOAD as u32,
            victim_word3,
            false,
        )
        .unwrap();
    let data: Vec<u8> = (0..400u32).map(|i| i as u8).collect();
    assert!(r[1].send(&mut f, 0, 4, &data).unwrap());
    let mut buf = [0u8; 512];
    assert_eq!(
        r[0].try_recv(&mut f, Some(1), 4, &mut buf).unwrap(),
        Some((1, 400))
    );
    let bad = (0..400).find(|&i| buf[i] != data[i]);
    assert_eq!(bad, None, "rank 1's message corrupted from this byte on");
}
