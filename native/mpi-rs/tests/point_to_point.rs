//! Point to point through the rsmpi-shaped face with 8 ranks on threads over the engine:
//! ordering between a pair, wildcards, zero-length and multi-megabyte messages, every
//! datatype, probes, synchronous sends, send-receive.

mod common;
use common::{job, job_with, pattern, N};
use mpi::platform::host::Options;
use mpi::point_to_point::{send_receive, send_receive_into, send_receive_into_with_tags};
use mpi::request::WaitGuard;
use mpi::traits::*;

#[test]
#[allow(clippy::useless_vec)] // as the example has it
fn readme_ring_and_broadcast() {
    // rsmpi's README example, unchanged but for the checks.
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let size = world.size();
        let rank = world.rank();
        let next_rank = (rank + 1) % size;
        let previous_rank = (rank - 1 + size) % size;
        let msg = vec![rank, 2 * rank, 4 * rank];
        mpi::request::scope(|scope| {
            let _sreq = WaitGuard::from(
                world
                    .process_at_rank(next_rank)
                    .immediate_send(scope, &msg[..]),
            );
            let (msg, status) = world.any_process().receive_vec::<i32>();
            let x = status.source_rank();
            assert_eq!(x, previous_rank);
            assert_eq!(vec![x, 2 * x, 4 * x], msg);
            let root_process = world.process_at_rank(0);
            let mut a = if rank == 0 {
                vec![2, 4, 8, 16]
            } else {
                vec![0; 4]
            };
            root_process.broadcast_into(&mut a[..]);
            assert_eq!(&a[..], &[2, 4, 8, 16]);
        });
        assert!(mpi::initialize().is_none(), "a second MPI_Init");
    });
}

/// Every rank but 0 sends rank 0 one message of each size (tag = the size's index), then
/// 20 messages with one tag; rank 0 takes the sized ones by tag in reverse order (so they
/// wait in the unexpected queue), then the 20 from any source with any tag: per sender in
/// the order sent.
#[test]
fn pair_order_wildcards_and_sizes() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let eager = universe.eager_limit();
        let world = universe.world();
        let me = world.rank();
        let sizes = [0, 1, eager, eager + 1, 100_000, 3 << 20];
        if me != 0 {
            let root = world.process_at_rank(0);
            let msgs: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| pattern(n, me as u32 * 100 + i as u32))
                .collect();
            mpi::request::scope(|scope| {
                let reqs: Vec<_> = msgs
                    .iter()
                    .enumerate()
                    .map(|(i, m)| root.immediate_send_with_tag(scope, &m[..], i as i32))
                    .collect();
                for r in reqs {
                    r.wait();
                }
            });
            for k in 0..20u8 {
                root.send_with_tag(&[k; 7], 99);
            }
            return;
        }
        let mut buf = vec![0u8; 3 << 20];
        for r in 1..N as i32 {
            for (i, &n) in sizes.iter().enumerate().rev() {
                let st = world
                    .process_at_rank(r)
                    .receive_into_with_tag(&mut buf[..], i as i32);
                assert_eq!(
                    (
                        st.source_rank(),
                        st.tag(),
                        st.count(u8::equivalent_datatype())
                    ),
                    (r, i as i32, n as i32)
                );
                assert_eq!(
                    buf[..n],
                    pattern(n, r as u32 * 100 + i as u32)[..],
                    "size {n} from {r}"
                );
            }
        }
        let mut next = [0u8; N as usize];
        for _ in 0..20 * (N - 1) {
            let (v, st) = world.any_process().receive_vec::<u8>();
            assert_eq!((st.tag(), v.len()), (99, 7));
            let s = st.source_rank() as usize;
            assert_eq!(v, [next[s]; 7], "from {s}");
            next[s] += 1;
        }
    });
}

/// A specific source with any tag, any source with a specific tag: each takes the first
/// message its pattern matches, in the order each sender sent.
#[test]
fn wildcards_one_at_a_time() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        if me != 0 {
            let root = world.process_at_rank(0);
            for k in 0..6i32 {
                // Tags 1, 2, 1, 2, ...: value me * 100 + k.
                root.send_with_tag(&(me * 100 + k), 1 + k % 2);
            }
            world.barrier();
            return;
        }
        // From rank 3, any tag: its messages in order.
        for k in 0..3 {
            let (v, st) = world.process_at_rank(3).receive::<i32>();
            assert_eq!((v, st.source_rank(), st.tag()), (300 + k, 3, 1 + k % 2));
        }
        // Tag 2 from anyone: per sender in order; then the rest.
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..(N - 1) * 6 - 3 {
            let (v, st) = world.any_process().receive_with_tag::<i32>(2);
            let _ = v;
            let s = st.source_rank();
            let k = seen.entry(s).or_insert(0);
            // Rank 3 already gave its first three (tags 1, 2, 1).
            let first = if s == 3 { 3 } else { 1 };
            assert_eq!(v, s * 100 + first + 2 * *k, "tag 2 from {s}");
            *k += 1;
            if seen.values().sum::<i32>() == (N as i32 - 1) * 3 - 1 {
                break;
            }
        }
        let mut tag1 = std::collections::BTreeMap::new();
        for _ in 0..(N - 1) * 3 - 2 {
            let (v, st) = world.any_process().receive::<i32>();
            assert_eq!(st.tag(), 1, "only tag 1 is left");
            let s = st.source_rank();
            let k = tag1.entry(s).or_insert(0);
            let first = if s == 3 { 4 } else { 0 };
            assert_eq!(v, s * 100 + first + 2 * *k);
            *k += 1;
        }
        assert!(world.any_process().immediate_probe().is_none());
        world.barrier();
    });
}

fn ring_of<T: Equivalence + PartialEq + std::fmt::Debug>(
    world: &impl Communicator,
    make: impl Fn(i32) -> T,
) {
    let me = world.rank();
    let n = world.size();
    let (next, prev) = (
        world.process_at_rank((me + 1) % n),
        world.process_at_rank((me + n - 1) % n),
    );
    // One value, a slice, a Vec, an array.
    let one = make(me);
    let many: Vec<T> = (0..37).map(|i| make(me * 1000 + i)).collect();
    let arr = [make(me), make(me + 1), make(me + 2)];
    mpi::request::scope(|scope| {
        let g1 = WaitGuard::from(next.immediate_send_with_tag(scope, &one, 1));
        let g2 = WaitGuard::from(next.immediate_send_with_tag(scope, &many[..], 2));
        let g3 = WaitGuard::from(next.immediate_send_with_tag(scope, &arr, 3));
        let (v, st) = prev.receive_with_tag::<T>(1);
        assert_eq!(
            (v, st.count(T::equivalent_datatype())),
            (make(prev.rank()), 1)
        );
        let (v, st) = prev.receive_vec_with_tag::<T>(2);
        assert_eq!(
            v,
            (0..37)
                .map(|i| make(prev.rank() * 1000 + i))
                .collect::<Vec<_>>()
        );
        assert_eq!(st.count(T::equivalent_datatype()), 37);
        let (a, st) = prev.receive_with_tag::<[T; 3]>(3);
        let p = prev.rank();
        assert_eq!(a, [make(p), make(p + 1), make(p + 2)]);
        assert_eq!(
            (
                st.count(<[T; 3]>::equivalent_datatype()),
                st.count(T::equivalent_datatype())
            ),
            (1, 3)
        );
        drop((g1, g2, g3));
    });
}

#[test]
fn every_datatype_around_a_ring() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        ring_of(&world, |x| x as i8);
        ring_of(&world, |x| (x as i16).wrapping_mul(-3));
        ring_of(&world, |x| x.wrapping_mul(-7));
        ring_of(&world, |x| (x as i64).wrapping_mul(-1_000_000_007));
        ring_of(&world, |x| x as u8);
        ring_of(&world, |x| (x as u16).wrapping_mul(3));
        ring_of(&world, |x| (x as u32).wrapping_mul(0x0101_0101));
        ring_of(&world, |x| (x as u64).wrapping_mul(0x1_0000_0001));
        ring_of(&world, |x| x as f32 * 0.25 - 1.5);
        ring_of(&world, |x| x as f64 * 1e-3 - 7.0);
        ring_of(&world, |x| x as usize * 5);
        ring_of(&world, |x| x as isize * -5);
        ring_of(&world, |x| [x as u16, !x as u16]);
    });
}

#[test]
fn zero_length_messages() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let next = world.process_at_rank((me + 1) % n);
        let prev = world.process_at_rank((me + n - 1) % n);
        let empty: [f64; 0] = [];
        let empty_vec = Vec::<u32>::new();
        mpi::request::scope(|scope| {
            let s = next.immediate_send_with_tag(scope, &empty[..], 4);
            let s2 = next.immediate_synchronous_send_with_tag(scope, &empty_vec, 5);
            let st = prev.probe_with_tag(4);
            assert_eq!(
                (st.source_rank(), st.count(f64::equivalent_datatype())),
                (prev.rank(), 0)
            );
            let mut none: [f64; 0] = [];
            let st = prev.receive_into_with_tag(&mut none[..], 4);
            assert_eq!((st.tag(), st.bytes()), (4, 0));
            let (v, st) = world.any_process().receive_vec_with_tag::<u32>(5);
            assert!(v.is_empty());
            assert_eq!(st.source_rank(), prev.rank());
            s.wait();
            s2.wait();
        });
        // A zero-length message fits any buffer.
        next.send_with_tag(&[0u8; 0][..], 6);
        let mut big = [7u16; 10];
        let st = prev.receive_into(&mut big[..]);
        assert_eq!((st.count(u16::equivalent_datatype()), big), (0, [7; 10]));
    });
}

/// Each rank sends 4 MiB to the next and receives 4 MiB from the previous at once, and
/// rank 0 sends rank 1 16 MiB of f64.
#[test]
fn multi_megabyte_messages() {
    let opts = Options {
        window: 8 << 20,
        ..Options::default()
    };
    job_with(N, opts, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let next = world.process_at_rank((me + 1) % n);
        let prev = world.process_at_rank((me + n - 1) % n);
        let mine = pattern(4 << 20, me as u32);
        let mut got = vec![0u8; 4 << 20];
        let st = send_receive_into(&mine[..], &next, &mut got[..], &prev);
        assert_eq!(st.bytes(), 4 << 20);
        assert!(
            got == pattern(4 << 20, prev.rank() as u32),
            "4 MiB from {}",
            prev.rank()
        );
        let big = 2 << 20; // f64s: 16 MiB
        if me == 0 {
            let v: Vec<f64> = (0..big).map(|i| i as f64 * 0.5).collect();
            world
                .process_at_rank(1)
                .synchronous_send_with_tag(&v[..], 16);
        } else if me == 1 {
            let (v, st) = world.process_at_rank(0).receive_vec_with_tag::<f64>(16);
            assert_eq!(st.count(f64::equivalent_datatype()), big);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as f64 * 0.5));
        }
        world.barrier();
    });
}

/// A synchronous send does not complete before its receive is posted; a standard eager one
/// does.
#[test]
fn synchronous_send_waits_for_the_receive() {
    job(2, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let other = world.process_at_rank(1 - world.rank());
        if world.rank() == 0 {
            let x = 42u64;
            mpi::request::scope(|scope| {
                let mut s = other.immediate_synchronous_send_with_tag(scope, &x, 1);
                let e = other.immediate_send_with_tag(scope, &x, 3);
                // Rank 1 receives tag 1 only after tag 2, which is not sent yet.
                for _ in 0..200 {
                    s = s
                        .test()
                        .expect_err("a synchronous send completed before its receive");
                }
                e.wait();
                other.send_with_tag(&x, 2);
                s.wait();
            });
        } else {
            let (_, st) = other.receive_with_tag::<u64>(2);
            assert_eq!(st.tag(), 2);
            let (v, _) = other.receive_with_tag::<u64>(1);
            let (w, _) = other.receive_with_tag::<u64>(3);
            assert_eq!((v, w), (42, 42));
        }
    });
}

#[test]
fn probes_and_matched_probes() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let next = world.process_at_rank((me + 1) % n);
        let data: Vec<i64> = (0..me as i64 + 3).collect();
        mpi::request::scope(|scope| {
            let s = next.immediate_send_with_tag(scope, &data[..], 77);
            let st = world.any_process().probe_with_tag(77);
            let from = (me + n - 1) % n;
            assert_eq!(
                (st.source_rank(), st.count(i64::equivalent_datatype())),
                (from, from + 3)
            );
            assert_eq!(st.count(i32::equivalent_datatype()), 2 * (from + 3));
            assert_eq!(
                st.count(<[i64; 100]>::equivalent_datatype()),
                mpi::UNDEFINED
            );
            assert!(world.any_process().immediate_probe_with_tag(78).is_none());
            let (msg, st2) = world.any_process().matched_probe();
            assert_eq!(st2, st);
            let mut v = vec![0i64; st.count(i64::equivalent_datatype()) as usize];
            let st3 = msg.matched_receive_into(&mut v[..]);
            assert_eq!(
                (st3.source_rank(), v),
                (from, (0..from as i64 + 3).collect::<Vec<_>>())
            );
            s.wait();
        });
        // Immediate matched probe, polled.
        next.send_with_tag(&(me as u16), 9);
        let (msg, st) = loop {
            if let Some(m) = world.any_process().immediate_matched_probe_with_tag(9) {
                break m;
            }
        };
        let (v, _) = msg.matched_receive::<u16>();
        assert_eq!(v as i32, st.source_rank());
        world.barrier();
    });
}

#[test]
fn send_receive_around_a_ring() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let next = world.process_at_rank((me + 1) % n);
        let prev = world.process_at_rank((me + n - 1) % n);
        // Everyone sends first: without MPI_Sendrecv's both-at-once this ring of
        // rendezvous sends would deadlock.
        let mine = vec![me as u32; 50_000];
        let mut got = vec![0u32; 50_000];
        let st = send_receive_into_with_tags(&mine[..], &next, 3, &mut got[..], &prev, 3);
        assert_eq!(
            (st.source_rank(), got[49_999]),
            (prev.rank(), prev.rank() as u32)
        );
        let (x, st) = send_receive::<f32, _, _, _>(&(me as f32), &prev, &world.any_process());
        assert_eq!((x, st.source_rank()), (next.rank() as f32, next.rank()));
    });
}
