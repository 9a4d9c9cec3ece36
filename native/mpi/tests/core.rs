//! The MPI core with 8 ranks on threads over one engine: MPI's matching and ordering,
//! wildcards, eager and rendezvous sizes, nonblocking completion in any order, every
//! reduction against a serial result, communicators, and the error cases.

use kestrel_mpi::{self as mpi, Datatype, Error, Mpi, Op, ANY_SOURCE, ANY_TAG, WORLD};
use proptest::prelude::*;

#[path = "common/shared.rs"]
mod shared;
use shared::{job, Shared};

const N: u32 = 8;
const WIN: u64 = 4 << 20;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn pair_order_wildcards_and_sizes() {
    let out = job(N, WIN, 20_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        let eager = m.limits_now().eager_max;
        let sizes = [0, 1, eager, eager + 1, 100_000, 4 << 20];
        if me != 0 {
            // Nonblocking: rank 0 takes them in another order, and a standard send
            // above the eager limit waits for its receive.
            let rs: Vec<_> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    m.isend(
                        WORLD,
                        0,
                        i as i32,
                        &pattern(n, me as u32 * 100 + i as u32),
                        false,
                    )
                    .unwrap()
                })
                .collect();
            m.waitall(&rs).unwrap();
            // Same tag, in order.
            for k in 0..20u8 {
                m.send(WORLD, 0, 99, &[k; 7]).unwrap();
            }
            return 0;
        }
        // Rank 0: sizes by tag from each rank, in reverse tag order (unexpected queue).
        let mut buf = vec![0u8; 4 << 20];
        for r in 1..N as i32 {
            for (i, &n) in sizes.iter().enumerate().rev() {
                let st = m.recv(WORLD, r, i as i32, &mut buf).unwrap();
                assert_eq!((st.source, st.tag, st.bytes), (r, i as i32, n));
                assert_eq!(
                    buf[..n],
                    pattern(n, r as u32 * 100 + i as u32)[..],
                    "size {n} from {r}"
                );
            }
        }
        // ANY_SOURCE, ANY_TAG: per sender, in the order sent.
        let mut next = [0u8; N as usize];
        for _ in 0..20 * (N - 1) {
            let st = m.recv(WORLD, ANY_SOURCE, ANY_TAG, &mut buf).unwrap();
            assert_eq!(st.tag, 99);
            let s = st.source as usize;
            assert_eq!(buf[0], next[s], "from {s}");
            next[s] += 1;
        }
        m.stats().chunks
    });
    assert!(out[0] >= 7 * 8, "4 MiB went in 512 KiB chunks: {}", out[0]);
}

#[test]
fn sixty_four_mib_by_rendezvous() {
    let out = job(2, 8 << 20, 60_000, |m: &mut Mpi<Shared>| {
        let n = 64 << 20;
        if m.rank(WORLD).unwrap() == 0 {
            let d = pattern(n, 64);
            m.send(WORLD, 1, 3, &d).unwrap();
            true
        } else {
            let mut b = vec![0u8; n];
            let st = m.recv(WORLD, 0, 3, &mut b).unwrap();
            st.bytes == n && b == pattern(n, 64)
        }
    });
    assert!(out.iter().all(|&ok| ok));
}

#[test]
fn nonblocking_in_any_order_and_probe() {
    job(N, WIN, 20_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        let n = N as i32;
        let big = 300_000;
        let mut rs = Vec::new();
        for k in 0..n {
            rs.push(m.irecv(WORLD, k, 5, big).unwrap());
        }
        let mut ss = Vec::new();
        for k in (0..n).rev() {
            ss.push(
                m.isend(
                    WORLD,
                    k,
                    5,
                    &pattern(if k % 2 == 0 { big } else { 10 }, me as u32),
                    k == 3,
                )
                .unwrap(),
            );
        }
        // Receives completed in reverse order of posting.
        for (k, r) in rs.into_iter().enumerate().rev() {
            let (st, d) = m.wait(r).unwrap();
            assert_eq!(st.source, k as i32);
            assert_eq!(d, pattern(if me % 2 == 0 { big } else { 10 }, k as u32));
        }
        // Waitany over the sends until none is left.
        while !ss.is_empty() {
            let (i, _, _) = m.waitany(&ss).unwrap();
            ss.remove(i);
        }
        // Probe gives the envelope before the receive.
        let to = (me + 1) % n;
        let r = m
            .isend(WORLD, to, 77, &[1, 2, 3, 4, 5, 6, 7, 8], false)
            .unwrap();
        let st = m.probe(WORLD, ANY_SOURCE, 77).unwrap();
        assert_eq!(
            (
                st.source,
                st.bytes,
                st.count(Datatype::I32),
                st.count(Datatype::F64I32)
            ),
            ((me + n - 1) % n, 8, Some(2), None)
        );
        assert!(m.iprobe(WORLD, ANY_SOURCE, 78).unwrap().is_none());
        let mut b = [0u8; 8];
        m.recv(WORLD, st.source, 77, &mut b).unwrap();
        m.wait(r).unwrap();
        // Sendrecv around the ring.
        let mut got = [0u8; 4];
        let st = m
            .sendrecv(
                WORLD,
                &(me as u32).to_ne_bytes(),
                to,
                8,
                &mut got,
                ANY_SOURCE,
                8,
            )
            .unwrap();
        assert_eq!(u32::from_ne_bytes(got), st.source as u32);
        m.barrier(WORLD).unwrap();
    });
}

fn elem(dt: Datatype, rank: u32, i: usize) -> Vec<u8> {
    let v = (rank as i64 * 7 + i as i64 * 3) % 11 - 4; // small, some negative
    let idx = ((rank as i32 * 5 + i as i32) % 8).to_ne_bytes();
    let mut e = vec![0u8; dt.size()];
    let val: Vec<u8> = match dt {
        Datatype::Byte | Datatype::U8 => vec![(v + 4) as u8 | (0x10 * (rank as u8 & 1))],
        Datatype::I8 => (v as i8).to_ne_bytes().to_vec(),
        Datatype::I16 | Datatype::I16I32 => (v as i16).to_ne_bytes().to_vec(),
        Datatype::U16 => ((v + 4) as u16).to_ne_bytes().to_vec(),
        Datatype::I32 | Datatype::I32I32 => (v as i32).to_ne_bytes().to_vec(),
        Datatype::U32 => ((v + 4) as u32 * 0x0101).to_ne_bytes().to_vec(),
        Datatype::I64 | Datatype::I64I32 => (v * 1_000_000_007).to_ne_bytes().to_vec(),
        Datatype::U64 => ((v + 4) as u64 * 0x1_0000_0001).to_ne_bytes().to_vec(),
        Datatype::F32 | Datatype::F32I32 => (v as f32 * 0.1).to_ne_bytes().to_vec(),
        Datatype::F64 | Datatype::F64I32 => {
            (v as f64 * 0.1 + 1e-9 * rank as f64).to_ne_bytes().to_vec()
        }
    };
    e[..val.len()].copy_from_slice(&val);
    if dt.is_pair() {
        let o = dt.index_offset();
        e[o..o + 4].copy_from_slice(&idx);
    }
    e
}

#[test]
fn every_reduction_against_a_serial_result() {
    let count = 40; // more than one ALU packet of 64-bit operands
    let out = job(N, WIN, 30_000, move |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap() as u32;
        let sub = m.comm_dup(WORLD).unwrap();
        let mut checked = 0;
        for dt in Datatype::ALL {
            for op in Op::ALL {
                let send: Vec<u8> = (0..count).flat_map(|i| elem(dt, me, i)).collect();
                let mut got = vec![0u8; send.len()];
                let r = m.allreduce(WORLD, &send, &mut got, dt, op);
                if !op.valid_on(dt) {
                    assert_eq!(r, Err(Error::Op));
                    continue;
                }
                r.unwrap();
                // The serial result: fold ranks 0..N in the tree's order.
                let mut want: Vec<u8> = (0..count).flat_map(|i| elem(dt, 0, i)).collect();
                let mut partial: Vec<Vec<u8>> = (0..N)
                    .map(|r| (0..count).flat_map(|i| elem(dt, r, i)).collect())
                    .collect();
                let mut mask = 1;
                while mask < N as usize {
                    for r in (0..N as usize).step_by(2 * mask) {
                        if r + mask < N as usize {
                            let b = partial[r + mask].clone();
                            mpi::combine(op, dt, &mut partial[r], &b).unwrap();
                        }
                    }
                    mask <<= 1;
                }
                want.copy_from_slice(&partial[0]);
                assert_eq!(got, want, "{op:?} on {dt:?} (WORLD)");
                // Same on a derived communicator (software), and Reduce to rank 3.
                let mut got2 = vec![0u8; send.len()];
                m.allreduce(sub, &send, &mut got2, dt, op).unwrap();
                assert_eq!(got2, want, "{op:?} on {dt:?} (dup)");
                let mut at3 = vec![0u8; send.len()];
                m.reduce(WORLD, &send, &mut at3, dt, op, 3).unwrap();
                if me == 3 {
                    // Integer ops are exact; floats combine in the tree rooted at 3.
                    if !matches!(dt, Datatype::F32 | Datatype::F64) {
                        assert_eq!(at3, want, "{op:?} on {dt:?} (reduce)");
                    }
                }
                checked += 1;
            }
        }
        m.comm_free(sub).unwrap();
        checked
    });
    assert!(out[0] > 60, "{out:?}");
}

#[test]
fn communicators_and_data_movement() {
    job(N, WIN, 20_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        // Split into evens and odds, ordered by descending world rank.
        let c = m
            .comm_split(WORLD, Some(me as u32 % 2), -me)
            .unwrap()
            .unwrap();
        assert_eq!(m.size(c).unwrap(), 4);
        assert_eq!(m.rank(c).unwrap(), 3 - me / 2);
        let none = m
            .comm_split(WORLD, if me == 0 { None } else { Some(0) }, 0)
            .unwrap();
        assert_eq!(none.is_none(), me == 0);
        // A message on the split communicator does not match on WORLD.
        let mut b = [0u8; 4];
        let peer = (m.rank(c).unwrap() + 1) % 4;
        let r = m.irecv(WORLD, ANY_SOURCE, 1, 4).unwrap();
        m.send(c, peer, 1, &me.to_ne_bytes()).unwrap();
        let st = m.recv(c, ANY_SOURCE, 1, &mut b).unwrap();
        assert_eq!(i32::from_ne_bytes(b) % 2, me % 2);
        assert_eq!(
            m.world_of(c, st.source).unwrap() as i32,
            i32::from_ne_bytes(b)
        );
        m.send(WORLD, me, 1, &[9; 4]).unwrap();
        assert_eq!(m.wait(r).unwrap().0.source, me);
        // Bcast, gather, scatter, allgather, alltoall, on WORLD and the split.
        for comm in [WORLD, c, mpi::SELF] {
            let n = m.size(comm).unwrap() as usize;
            let r = m.rank(comm).unwrap() as usize;
            let mut v = if r == 1 % n {
                pattern(70_000, 5)
            } else {
                vec![0; 70_000]
            };
            m.bcast(comm, &mut v, (1 % n) as i32).unwrap();
            assert_eq!(v, pattern(70_000, 5));
            let mine = [r as u8; 3];
            let mut all = vec![0u8; 3 * n];
            m.gather(comm, &mine, &mut all, 0).unwrap();
            if r == 0 {
                assert_eq!(all, (0..n).flat_map(|k| [k as u8; 3]).collect::<Vec<_>>());
            }
            let mut part = [0u8; 2];
            let src: Vec<u8> = (0..2 * n as u8).collect();
            m.scatter(comm, &src, &mut part, 0).unwrap();
            assert_eq!(part, [2 * r as u8, 2 * r as u8 + 1]);
            let mut all = vec![0u8; 3 * n];
            m.allgather(comm, &mine, &mut all).unwrap();
            assert_eq!(all, (0..n).flat_map(|k| [k as u8; 3]).collect::<Vec<_>>());
            let send: Vec<u8> = (0..n).flat_map(|k| [(r * 16 + k) as u8; 2]).collect();
            let mut recv = vec![0u8; 2 * n];
            m.alltoall(comm, &send, &mut recv).unwrap();
            assert_eq!(
                recv,
                (0..n)
                    .flat_map(|k| [(k * 16 + r) as u8; 2])
                    .collect::<Vec<_>>()
            );
            m.barrier(comm).unwrap();
        }
        m.comm_free(c).unwrap();
        assert_eq!(m.comm_free(c), Err(Error::Comm));
        assert_eq!(m.comm_free(WORLD), Err(Error::Comm));
    });
}

/// `len` bytes at `off` of this rank's window, as a Kestrel program that keeps its heap in
/// its window has them (the engine's windows here are `Vec`s of this process).
fn window_mem(m: &mut Mpi<Shared>, off: usize, len: usize) -> &'static mut [u8] {
    let (p, g) = m.dma();
    let ep = g.ep;
    let ptr = {
        let f = p.lock();
        let w = f.memory().window(ep);
        assert!(off + len <= w.len());
        w.as_ptr() as *mut u8
    };
    // SAFETY: the window's `Vec` lives as long as the engine (the job) and never moves or
    // grows; above `layout::FREE` the engine touches it only for the puts this test asks
    // for, as the DMA touches a Kestrel program's heap in its window, and each call here
    // takes a range no other live slice of the test covers.
    unsafe { std::slice::from_raw_parts_mut(ptr.add(off), len) }
}

/// Rendezvous messages from and into memory inside the window go without a copy at that
/// end (`Stats::puts_direct`, `chunks_direct`), mixed with ordinary memory at the other,
/// unaligned, truncated; a blocking receive that fails withdraws its buffer from the DMA.
#[test]
fn zero_copy_from_and_into_the_window() {
    let free = kestrel_spi::layout::FREE as usize;
    let out = job(2, 16 << 20, 2_000, move |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        let n = (3 << 20) / 2 + 5;
        if me == 0 {
            let win = window_mem(m, free + 3, n);
            win.copy_from_slice(&pattern(n, 1));
            m.send(WORLD, 1, 1, win).unwrap(); // window -> window
            m.send(WORLD, 1, 2, win).unwrap(); // window -> Vec
            m.ssend(WORLD, 1, 3, &pattern(n, 3)).unwrap(); // Vec -> window
                                                           // Truncated into the window: nothing beyond the buffer changes.
            m.send(WORLD, 1, 4, &pattern(2 << 20, 4)).unwrap();
        } else {
            let into = window_mem(m, free + 7, n);
            let st = m.recv(WORLD, 0, 1, into).unwrap();
            assert_eq!(st.bytes, n);
            assert!(*into == pattern(n, 1)[..], "window -> window");
            let mut v = vec![0u8; n];
            m.recv(WORLD, 0, 2, &mut v).unwrap();
            assert!(v == pattern(n, 1), "window -> Vec");
            into.fill(0);
            m.recv(WORLD, 0, 3, into).unwrap();
            assert!(*into == pattern(n, 3)[..], "Vec -> window");
            let small = window_mem(m, free + (4 << 20), 1 << 20);
            let canary = window_mem(m, free + (5 << 20), 4096);
            canary.fill(0xee);
            assert_eq!(m.recv(WORLD, 0, 4, small), Err(Error::Truncate));
            assert!(canary.iter().all(|&b| b == 0xee));
        }
        // A blocking receive into the window that deadlocks is withdrawn: the message
        // sent afterwards goes to a later receive, never into the old buffer.
        let spot = window_mem(m, free + (8 << 20), n);
        spot.fill(0xee);
        let tag = if me == 0 { 42 } else { 43 };
        assert_eq!(m.recv(WORLD, 1 - me, tag, spot), Err(Error::Deadlock));
        if me == 1 {
            m.send(WORLD, 0, 42, &pattern(n, 42)).unwrap();
        } else {
            let mut v = vec![0u8; n];
            m.recv(WORLD, 1, 42, &mut v).unwrap();
            assert!(v == pattern(n, 42));
            assert!(
                spot.iter().all(|&b| b == 0xee),
                "a withdrawn buffer was written"
            );
        }
        m.stats()
    });
    // Rank 0 put 2 chunks of each of two sends straight from its window; rank 1 took two
    // messages of 2 chunks straight into its window.
    assert!(out[0].puts_direct >= 4, "{:?}", out[0]);
    assert!(out[1].chunks_direct >= 4, "{:?}", out[1]);
    assert!(out[1].chunks > out[1].chunks_direct, "{:?}", out[1]);
}

#[test]
fn error_cases() {
    job(2, WIN, 5_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        assert_eq!(m.send(WORLD, 2, 0, b"x"), Err(Error::Rank));
        assert_eq!(m.send(WORLD, -5, 0, b"x"), Err(Error::Rank));
        assert_eq!(m.send(WORLD, 0, -3, b"x"), Err(Error::Tag));
        assert_eq!(Datatype::I32.bytes(-1), Err(Error::Count));
        assert_eq!(Datatype::from_raw(999), Err(Error::Type));
        assert_eq!(Op::from_raw(0), Err(Error::Op));
        assert_eq!(m.send(mpi::Comm(77), 0, 0, b"x"), Err(Error::Comm));
        let mut o = [0u8; 4];
        assert_eq!(
            m.allreduce(WORLD, &[0; 4], &mut o, Datatype::F32, Op::Band),
            Err(Error::Op)
        );
        assert_eq!(m.bcast(WORLD, &mut o, 2), Err(Error::Root));
        // Truncation, eager and rendezvous; the sender completes either way.
        let other = 1 - me;
        m.send(WORLD, other, 1, &[7u8; 10]).unwrap_or(());
        let big = vec![1u8; 200_000];
        let r = m.isend(WORLD, other, 2, &big, false).unwrap();
        let mut small = [0u8; 4];
        assert_eq!(m.recv(WORLD, other, 1, &mut small), Err(Error::Truncate));
        assert_eq!(small, [7; 4]);
        assert_eq!(m.recv(WORLD, other, 2, &mut small), Err(Error::Truncate));
        m.wait(r).unwrap();
        // PROC_NULL completes at once.
        m.send(WORLD, mpi::PROC_NULL, 0, b"x").unwrap();
        assert_eq!(
            m.recv(WORLD, mpi::PROC_NULL, 0, &mut small).unwrap().source,
            mpi::PROC_NULL
        );
        m.barrier(WORLD).unwrap();
        // Both ranks receive what nobody sends: each reports where it waits.
        let e = m.recv(WORLD, other, 42, &mut small);
        assert_eq!(e, Err(Error::Deadlock));
        let line = m.deadlock_report().unwrap().to_string();
        assert!(
            line.starts_with(&format!(
                "rank {me} waits in MPI_Recv (receive from source {other}, tag 42"
            )),
            "{line}"
        );
    });
}

#[test]
fn a_flood_waits_for_credits_and_loses_nothing() {
    let out = job(N, WIN, 120_000, |m: &mut Mpi<Shared>| {
        let me = m.rank(WORLD).unwrap();
        let k = 100;
        let eager = m.limits_now().eager_max;
        if me != 0 {
            let rs: Vec<_> = (0..k)
                .map(|i| {
                    m.isend(WORLD, 0, 1, &pattern(eager, i * 8 + me as u32), false)
                        .unwrap()
                })
                .collect();
            m.waitall(&rs).unwrap();
            m.barrier(WORLD).unwrap();
            return 0;
        }
        // Rank 0 receives only after the others have queued everything.
        let mut next = [0u32; N as usize];
        let mut b = vec![0u8; eager];
        for _ in 0..k * (N - 1) {
            let st = m.recv(WORLD, ANY_SOURCE, 1, &mut b).unwrap();
            let s = st.source as usize;
            assert_eq!(b, pattern(eager, next[s] * 8 + s as u32));
            next[s] += 1;
        }
        m.barrier(WORLD).unwrap();
        let f = m.fabric();
        use kestrel_fabric::FabricApi;
        // The reception ring must never overflow.
        let d = f.take_diagnostic(kestrel_fabric::EpId(0));
        u32::from(d.is_some_and(|d| d.kind == kestrel_fabric::DiagKind::RcvOverflow))
    });
    assert_eq!(out[0], 0, "no packet dropped at the receiver's ring");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Random sends (tags, sizes either side of the eager limit) from three ranks to
    /// rank 0, received with random wildcards: every message arrives once, and per
    /// (sender, tag) in the order sent.
    #[test]
    fn matching_keeps_pair_order(plan in proptest::collection::vec((1u32..4, 0i32..3, prop_oneof![0usize..50, 1500usize..5000]), 1..40), wild in proptest::collection::vec((any::<bool>(), any::<bool>()), 40)) {
        let plan2 = plan.clone();
        let out = job(4, 1 << 20, 20_000, move |m: &mut Mpi<Shared>| {
            let me = m.rank(WORLD).unwrap() as u32;
            if me != 0 {
                for (i, &(s, tag, len)) in plan2.iter().enumerate() {
                    if s == me {
                        let mut d = pattern(len, i as u32);
                        if len >= 4 { d[..4].copy_from_slice(&(i as u32).to_ne_bytes()); }
                        m.send(WORLD, 0, tag, &d).unwrap();
                    }
                }
                return Vec::new();
            }
            let mut got = Vec::new();
            let mut b = vec![0u8; 5000];
            for (k, _) in plan2.iter().enumerate() {
                let (ws, wt) = wild[k];
                // A specific source/tag only where one is still to come.
                let left: Vec<_> = plan2.iter().enumerate().filter(|(i, _)| !got.iter().any(|(j, _, _, _)| j == i)).map(|(_, p)| *p).collect();
                let src = if ws { ANY_SOURCE } else { left[0].0 as i32 };
                let tag = if wt { ANY_TAG } else { left.iter().find(|p| src == ANY_SOURCE || p.0 as i32 == src).unwrap().1 };
                let st = m.recv(WORLD, src, tag, &mut b).unwrap();
                // Which message: the first unreceived from that source with that tag.
                let i = plan2.iter().enumerate().position(|(i, p)| p.0 as i32 == st.source && p.1 == st.tag && !got.iter().any(|(j, _, _, _)| *j == i)).unwrap();
                assert_eq!(st.bytes, plan2[i].2);
                let want = { let mut d = pattern(plan2[i].2, i as u32); if d.len() >= 4 { d[..4].copy_from_slice(&(i as u32).to_ne_bytes()); } d };
                assert_eq!(&b[..st.bytes], &want[..]);
                got.push((i, st.source, st.tag, st.bytes));
            }
            got.into_iter().map(|x| x.0).collect::<Vec<usize>>()
        });
        prop_assert_eq!(out[0].len(), plan.len());
    }
}
