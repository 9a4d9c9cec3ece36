//! Collectives through the face with 8 ranks: every reduction operation on every datatype
//! against a serial result computed here (the operations written out again, folded in the
//! core's documented tree order), barrier separation, broadcast, gather, scatter,
//! all-gather and all-to-all on the world, a duplicate and a split.

mod common;
use common::{job, pattern, N};
use mpi::collective::{reduce_local_into, SystemOperation};
use mpi::topology::Color;
use mpi::traits::*;
use std::fmt::Debug;

/// The operations in `SystemOperation::all()`'s order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum O {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
}
const OPS: [O; 10] = [
    O::Max,
    O::Min,
    O::Sum,
    O::Prod,
    O::Land,
    O::Band,
    O::Lor,
    O::Bor,
    O::Lxor,
    O::Bxor,
];

/// A datatype of the test, with the operations MPI defines on it written out.
trait Val: Equivalence + PartialEq + Debug + Send {
    const FLOAT: bool;
    /// Element `i` of rank `r`'s contribution: small, some negative, some zero.
    fn make(r: i32, i: usize) -> Self;
    /// `a op b`.
    fn apply(op: O, a: Self, b: Self) -> Self;
    /// Bits, to compare floats exactly.
    fn bits(self) -> u64;
}

macro_rules! int_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const FLOAT: bool = false;
            fn make(r: i32, i: usize) -> Self {
                let v = (r as i64 * 7 + i as i64 * 3) % 11 - 4;
                // Unsigned types get wrapped negatives (large values) too.
                (v as $t).wrapping_mul(if i % 5 == 0 { 37 } else { 1 })
            }
            fn apply(op: O, a: Self, b: Self) -> Self {
                let (x, y) = (a != 0, b != 0);
                match op {
                    O::Max => a.max(b),
                    O::Min => a.min(b),
                    O::Sum => a.wrapping_add(b),
                    O::Prod => a.wrapping_mul(b),
                    O::Land => (x && y) as $t,
                    O::Lor => (x || y) as $t,
                    O::Lxor => (x != y) as $t,
                    O::Band => a & b,
                    O::Bor => a | b,
                    O::Bxor => a ^ b,
                }
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
int_val!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

macro_rules! float_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const FLOAT: bool = true;
            fn make(r: i32, i: usize) -> Self {
                // Inexact on purpose: the order of the fold shows in the bits.
                ((r as i64 * 7 + i as i64 * 3) % 11 - 4) as $t * 0.1 + 1e-6 * r as $t
            }
            fn apply(op: O, a: Self, b: Self) -> Self {
                match op {
                    O::Max => if a < b { b } else { a },
                    O::Min => if b < a { b } else { a },
                    O::Sum => a + b,
                    O::Prod => a * b,
                    _ => unreachable!("{op:?} is not defined on floats"),
                }
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
        }
    )*};
}
float_val!(f32, f64);

const COUNT: usize = 40; // more than one ALU packet of 32 operands

fn contribution<T: Val>(r: i32) -> Vec<T> {
    (0..COUNT).map(|i| T::make(r, i)).collect()
}

/// The serial result: the ranks' contributions folded along a binomial tree rooted at
/// `root`, lower (virtual) ranks on the left, as ADR 0035 fixes the order.
fn serial<T: Val>(op: O, n: i32, root: i32) -> Vec<T> {
    let mut part: Vec<Vec<T>> = (0..n).map(|v| contribution::<T>((v + root) % n)).collect();
    let mut mask = 1;
    while mask < n as usize {
        for v in (0..n as usize).step_by(2 * mask) {
            if v + mask < n as usize {
                let b = part[v + mask].clone();
                for (a, b) in part[v].iter_mut().zip(b) {
                    *a = T::apply(op, *a, b);
                }
            }
        }
        mask <<= 1;
    }
    part.swap_remove(0)
}

fn bits<T: Val>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Every operation MPI defines on `T`, on the world (the ALU for integers), a duplicate
/// (software) and as a reduce to rank 3: each against the serial result, bit for bit.
#[allow(clippy::needless_borrows_for_generic_args)] // `&SystemOperation` is an Operation too
fn every_op<T: Val>(world: &impl Communicator, dup: &impl Communicator) -> usize {
    let me = world.rank();
    let n = world.size();
    let mine = contribution::<T>(me);
    let mut checked = 0;
    for (op, sys) in OPS.into_iter().zip(SystemOperation::all()) {
        if T::FLOAT && !matches!(op, O::Max | O::Min | O::Sum | O::Prod) {
            continue; // MPI_ERR_OP: tests/errors.rs
        }
        let want = bits(&serial::<T>(op, n, 0));
        let mut got = vec![T::make(0, 0); COUNT];
        world.all_reduce_into(&mine[..], &mut got[..], sys);
        assert_eq!(
            bits(&got),
            want,
            "{op:?} on {} (world)",
            std::any::type_name::<T>()
        );
        let mut got = vec![T::make(0, 0); COUNT];
        dup.all_reduce_into(&mine[..], &mut got[..], &sys);
        assert_eq!(
            bits(&got),
            want,
            "{op:?} on {} (duplicate)",
            std::any::type_name::<T>()
        );
        let root = world.process_at_rank(3);
        if me == 3 {
            let mut at = vec![T::make(0, 0); COUNT];
            root.reduce_into_root(&mine[..], &mut at[..], sys);
            assert_eq!(
                bits(&at),
                bits(&serial::<T>(op, n, 3)),
                "{op:?} on {} (reduce)",
                std::any::type_name::<T>()
            );
        } else {
            root.reduce_into(&mine[..], sys);
        }
        // MPI_Reduce_local agrees with the written-out operation.
        let mut acc = contribution::<T>(1);
        reduce_local_into(&mine[..], &mut acc[..], sys);
        let local: Vec<T> = mine
            .iter()
            .zip(contribution::<T>(1))
            .map(|(a, b)| T::apply(op, *a, b))
            .collect();
        assert_eq!(bits(&acc), bits(&local), "{op:?} locally");
        checked += 1;
    }
    checked
}

#[test]
fn every_reduction_against_a_serial_result() {
    let out = job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let dup = world.duplicate();
        let mut checked = 0;
        checked += every_op::<i8>(&world, &dup);
        checked += every_op::<i16>(&world, &dup);
        checked += every_op::<i32>(&world, &dup);
        checked += every_op::<i64>(&world, &dup);
        checked += every_op::<u8>(&world, &dup);
        checked += every_op::<u16>(&world, &dup);
        checked += every_op::<u32>(&world, &dup);
        checked += every_op::<u64>(&world, &dup);
        checked += every_op::<usize>(&world, &dup);
        checked += every_op::<isize>(&world, &dup);
        checked += every_op::<f32>(&world, &dup);
        checked += every_op::<f64>(&world, &dup);
        // Single values and arrays reduce element by element too.
        let me = world.rank();
        let mut s = 0;
        world.all_reduce_into(&me, &mut s, SystemOperation::sum());
        assert_eq!(s, N as i32 * (N as i32 - 1) / 2);
        let mut m = [0u16; 3];
        world.all_reduce_into(
            &[me as u16, 100 - me as u16, 7],
            &mut m,
            SystemOperation::max(),
        );
        assert_eq!(m, [N as u16 - 1, 100, 7]);
        checked
    });
    assert!(out.iter().all(|&c| c == 10 * 10 + 2 * 4), "{out:?}");
}

/// Floats on the software tree give every rank the same bits, on every communicator.
#[test]
fn float_reductions_agree_on_every_rank() {
    let out = job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let odd = world.split_by_color(Color::with_value(me % 2)).unwrap();
        let v: Vec<f64> = (0..100)
            .map(|i| 1.0 / (me as f64 * 3.0 + i as f64 + 1.0))
            .collect();
        let mut w = vec![0.0f64; 100];
        world.all_reduce_into(&v[..], &mut w[..], SystemOperation::sum());
        let mut h = vec![0.0f64; 100];
        odd.all_reduce_into(&v[..], &mut h[..], SystemOperation::product());
        (
            w.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            me % 2,
            h.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        )
    });
    for r in &out {
        assert_eq!(r.0, out[0].0);
        assert_eq!(r.2, out[r.1 as usize].2);
    }
}

/// No rank leaves a barrier before the last one entered it: in each round one rank (a
/// different one each round) arrives late; every rank's exit time is after every rank's
/// entry time, on the world (the ALU barrier), a duplicate and a split (software).
#[test]
fn barrier_separation() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let dup = world.duplicate();
        let half = world.split_by_color(Color::with_value(me / 4)).unwrap();
        for round in 0..12 {
            let (c_rank, c_size): (i32, i32);
            let late;
            let t_in;
            let t_out;
            match round % 3 {
                0 => {
                    (c_rank, c_size) = (world.rank(), world.size());
                    late = round % c_size;
                    if c_rank == late {
                        std::thread::sleep(std::time::Duration::from_millis(30));
                    }
                    t_in = mpi::time();
                    world.barrier();
                    t_out = mpi::time();
                }
                1 => {
                    (c_rank, c_size) = (dup.rank(), dup.size());
                    late = (round * 3) % c_size;
                    if c_rank == late {
                        std::thread::sleep(std::time::Duration::from_millis(30));
                    }
                    t_in = mpi::time();
                    dup.barrier();
                    t_out = mpi::time();
                }
                _ => {
                    (c_rank, c_size) = (half.rank(), half.size());
                    late = round % c_size;
                    if c_rank == late {
                        std::thread::sleep(std::time::Duration::from_millis(30));
                    }
                    t_in = mpi::time();
                    half.barrier();
                    t_out = mpi::time();
                }
            }
            // Compare every rank's entry with every rank's exit (of the same communicator).
            let mut ins = vec![0.0f64; N as usize];
            let mut outs = vec![0.0f64; N as usize];
            world.all_gather_into(&t_in, &mut ins[..]);
            world.all_gather_into(&t_out, &mut outs[..]);
            let members: Vec<usize> = match round % 3 {
                2 => (0..N as usize)
                    .filter(|&r| r / 4 == me as usize / 4)
                    .collect(),
                _ => (0..N as usize).collect(),
            };
            let last_in = members.iter().map(|&r| ins[r]).fold(f64::MIN, f64::max);
            let first_out = members.iter().map(|&r| outs[r]).fold(f64::MAX, f64::min);
            assert!(
                last_in <= first_out,
                "round {round}: a rank left at {first_out} before the last entered at {last_in}"
            );
        }
    });
}

#[test]
fn data_movement_on_world_duplicate_and_split() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        // Evens and odds, ordered by descending world rank.
        let split = world
            .split_by_color_with_key(Color::with_value(me % 2), -me)
            .unwrap();
        assert_eq!((split.size(), split.rank()), (4, 3 - me / 2));
        let none = world.split_by_color(if me == 0 {
            Color::undefined()
        } else {
            Color::with_value(0)
        });
        assert_eq!(none.is_none(), me == 0);
        let dup = world.duplicate();
        assert_eq!((dup.rank(), dup.size()), (me, N as i32));
        // A message on the split does not match a receive on the world.
        let mut b = -1i32;
        mpi::request::scope(|scope| {
            let r = world
                .any_process()
                .immediate_receive_into_with_tag(scope, &mut b, 1);
            let peer = (split.rank() + 1) % 4;
            split.process_at_rank(peer).send_with_tag(&me, 1);
            let (v, st) = split.any_process().receive_with_tag::<i32>(1);
            assert_eq!(v % 2, me % 2);
            assert_eq!(st.source_rank(), (split.rank() + 3) % 4);
            world.this_process().send_with_tag(&(me + 1000), 1);
            assert_eq!(r.wait().source_rank(), me);
        });
        assert_eq!(b, me + 1000);
        fn movement(c: &impl Communicator) {
            let n = c.size() as usize;
            let r = c.rank() as usize;
            let root = c.process_at_rank((1 % n) as i32);
            let mut v = if r == 1 % n {
                pattern(1 << 20, 5)
            } else {
                vec![0u8; 1 << 20]
            };
            root.broadcast_into(&mut v[..]);
            assert!(v == pattern(1 << 20, 5));
            let mut f = if r == 0 { [1.5f32, -2.0] } else { [0.0; 2] };
            c.process_at_rank(0).broadcast_into(&mut f);
            assert_eq!(f, [1.5, -2.0]);
            let mine = [r as u32 * 3, r as u32 * 3 + 1, r as u32 * 3 + 2];
            let gat = c.process_at_rank(0);
            if r == 0 {
                let mut all = vec![0u32; 3 * n];
                gat.gather_into_root(&mine, &mut all[..]);
                assert_eq!(all, (0..3 * n as u32).collect::<Vec<_>>());
            } else {
                gat.gather_into(&mine);
            }
            let sca = c.process_at_rank((n - 1) as i32);
            let mut part = [0i64; 2];
            if r == n - 1 {
                let src: Vec<i64> = (0..2 * n as i64).map(|x| -x).collect();
                sca.scatter_into_root(&src[..], &mut part);
            } else {
                sca.scatter_into(&mut part);
            }
            assert_eq!(part, [-2 * r as i64, -2 * r as i64 - 1]);
            let mut all = vec![[0u8; 2]; n];
            c.all_gather_into(&[r as u8, 0xee], &mut all[..]);
            assert_eq!(all, (0..n).map(|k| [k as u8, 0xee]).collect::<Vec<_>>());
            let send: Vec<u16> = (0..n).flat_map(|k| [(r * 16 + k) as u16; 3]).collect();
            let mut recv = vec![0u16; 3 * n];
            c.all_to_all_into(&send[..], &mut recv[..]);
            assert_eq!(
                recv,
                (0..n)
                    .flat_map(|k| [(k * 16 + r) as u16; 3])
                    .collect::<Vec<_>>()
            );
            c.barrier();
        }
        movement(&world);
        movement(&split);
        movement(&dup);
        drop(split);
        drop(dup);
        // Communicators made after others were freed still work.
        let again = world.duplicate();
        let mut s = 0u64;
        again.all_reduce_into(&1u64, &mut s, SystemOperation::sum());
        assert_eq!(s, N as u64);
    });
}
