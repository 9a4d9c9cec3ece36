//! The C face ([`Face`]) over the engine with 8 ranks on threads: every call with the
//! arguments a C program passes (handles, mpi.h's rank and tag constants), checked the way
//! tests/mpi/*.c check the library on the target, plus what those programs cannot see
//! (refused handles, the pair types' wire format, the deadlock report).

mod common;

use common::{job, Shared};
use kestrel_mpi_c::abi;
use kestrel_mpi_c::args;
use kestrel_mpi_c::datatype::Datatype;
use kestrel_mpi_c::error::ErrorClass;
use kestrel_mpi_c::face::{Face, RecvBuf};
use kestrel_mpi_c::op::{self, Op};
use kestrel_mpi_c::reduce::reduce_local;

const N: u32 = 8;
const WORLD: i32 = abi::MPI_COMM_WORLD;

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn to_ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// What collectives.c does on one communicator: barrier separation, bcast, gather (and in
/// place), scatter, allgather (and in place), alltoall.
fn collectives_on(f: &mut Face<Shared>, comm: i32) -> usize {
    let rank = f.rank(comm).unwrap();
    let size = f.size(comm).unwrap();
    let mut bad = 0;
    for round in 0..5 {
        let early = f.iprobe(comm, abi::MPI_ANY_SOURCE, 600 + round).unwrap();
        bad += usize::from(early.is_some());
        f.barrier(comm).unwrap();
        let v = ints(&[rank * 10 + round]);
        f.send(comm, (rank + 1) % size, 600 + round, Datatype::Int, &v, false)
            .unwrap();
        let mut got = [0u8; 4];
        let left = (rank + size - 1) % size;
        let st = f
            .recv(comm, left, 600 + round, Datatype::Int, &mut got)
            .unwrap();
        bad += usize::from(to_ints(&got) != [left * 10 + round] || st.MPI_SOURCE != left);
    }
    for root in 0..size {
        let mut a = if rank == root {
            ints(&[root * 100, root * 100 + 1])
        } else {
            vec![0; 8]
        };
        f.bcast(comm, &mut a, root).unwrap();
        bad += usize::from(to_ints(&a) != [root * 100, root * 100 + 1]);
        let mine = ints(&[rank * 2 + root, rank * 2 + root + 1]);
        let mut all = if rank == root {
            vec![0u8; 8 * size as usize]
        } else {
            Vec::new()
        };
        f.gather(comm, Some(&mine), &mut all, root).unwrap();
        if rank == root {
            let want: Vec<i32> = (0..size).flat_map(|i| [i * 2 + root, i * 2 + root + 1]).collect();
            bad += usize::from(to_ints(&all) != want);
            // In place: the root's block is in the receive buffer already.
            all.fill(0xff);
            all[root as usize * 8..][..8].copy_from_slice(&ints(&[7, 8]));
            f.gather(comm, None, &mut all, root).unwrap();
            bad += usize::from(to_ints(&all[root as usize * 8..][..8]) != [7, 8]);
        } else {
            f.gather(comm, Some(&mine), &mut [], root).unwrap();
        }
        let src: Vec<u8> = if rank == root {
            ints(&(0..3 * size).map(|i| root * 1000 + i).collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        let mut part = [0u8; 12];
        f.scatter(comm, &src, Some(&mut part), root).unwrap();
        bad += usize::from(
            to_ints(&part) != [root * 1000 + rank * 3, root * 1000 + rank * 3 + 1, root * 1000 + rank * 3 + 2],
        );
    }
    let mut all = vec![0u8; 4 * size as usize];
    f.allgather(comm, Some(&ints(&[rank * rank])), &mut all)
        .unwrap();
    bad += usize::from(to_ints(&all) != (0..size).map(|i| i * i).collect::<Vec<_>>());
    all[rank as usize * 4..][..4].copy_from_slice(&ints(&[rank + 500]));
    f.allgather(comm, None, &mut all).unwrap();
    bad += usize::from(to_ints(&all) != (0..size).map(|i| i + 500).collect::<Vec<_>>());
    let send = ints(&(0..size).map(|i| rank * 100 + i).collect::<Vec<_>>());
    let mut recv = vec![0u8; send.len()];
    f.alltoall(comm, Some(&send), &mut recv).unwrap();
    bad += usize::from(to_ints(&recv) != (0..size).map(|i| i * 100 + rank).collect::<Vec<_>>());
    bad
}

#[test]
fn collectives_on_world_a_dup_and_a_split() {
    let out = job(N, 20_000, |f: &mut Face<Shared>| {
        let me = f.rank(WORLD).unwrap();
        let mut bad = collectives_on(f, WORLD);
        let dup = f.comm_dup(WORLD).unwrap();
        assert_eq!(dup, 0x4400_0002);
        assert_eq!(f.rank(dup).unwrap(), me);
        bad += collectives_on(f, dup);
        f.comm_free(dup).unwrap();
        assert_eq!(f.comm(dup), Err(ErrorClass::Comm));
        let half = f.comm_split(WORLD, me % 2, -me).unwrap();
        assert_eq!(f.size(half).unwrap(), 4);
        assert_eq!(f.rank(half).unwrap(), (7 - me) / 2);
        let mut sum = [0u8; 4];
        f.allreduce(half, Some(&ints(&[me])), &mut sum, 1, Datatype::Int, Op::Sum)
            .unwrap();
        assert_eq!(to_ints(&sum), [if me % 2 == 1 { 16 } else { 12 }]);
        bad += collectives_on(f, half);
        f.comm_free(half).unwrap();
        let none = f
            .comm_split(WORLD, if me < 2 { 0 } else { abi::MPI_UNDEFINED }, 0)
            .unwrap();
        assert_eq!(none == abi::MPI_COMM_NULL, me >= 2);
        assert_eq!(f.comm_free(WORLD), Err(ErrorClass::Comm));
        bad
    });
    assert_eq!(out, vec![0; N as usize]);
}
