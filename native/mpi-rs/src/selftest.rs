//! The face's own checks, run by every rank of a job (feature `selftest`): the same suite
//! runs as threads on the host (`tests/selftest.rs`) and as native programs on Kestrel
//! (`native/programs/mpi-rs-test`, `tests/functional/test_mpi_rs.py`). Each check prints
//! one line, `NAME: ok (...)` or `NAME: FAILED: why`; a failed comparison never skips an MPI
//! call, so the ranks stay in step and the remaining checks still run.
//!
//! The checks: point to point of every datatype around a ring; ordering between a pair and
//! the sizes either side of the eager limit up to multi-megabyte; wildcards; zero-length
//! messages; multi-megabyte messages around a ring; nonblocking completion in any order;
//! synchronous sends; probes; every reduction on every datatype against a serial result;
//! barrier separation; broadcast, gather, scatter, all-gather and all-to-all on the world, a
//! duplicate and a split.

use crate::collective::{reduce_local_into, SystemOperation};
use crate::datatype::Equivalence;
use crate::point_to_point::{send_receive_into, Status};
use crate::request::{self, wait_any, WaitGuard};
use crate::topology::{Color, SimpleCommunicator};
use crate::traits::*;
use crate::Universe;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Debug;

/// What a check found wrong.
type Outcome = Result<String, String>;

macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

/// How large the checks' messages are.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// The largest message of the pair-order check and of the ring of large messages.
    pub big: usize,
}

/// Runs every check on `universe`'s world; `out` gets one line per check. Returns
/// `(passed, failed)`.
pub fn run(universe: &Universe, sizes: Sizes, out: &mut dyn FnMut(&str)) -> (u32, u32) {
    let world = universe.world();
    let eager = universe.eager_limit();
    // `order` first: a receiver that takes a sender's messages out of order can stall that
    // sender's eager sends on flow-control credits it still owes from earlier checks (an
    // MPI core problem, issue 19), which a fresh start avoids.
    let checks: [(&str, &dyn Fn() -> Outcome); 11] = [
        ("order", &|| order(&world, eager, sizes.big)),
        ("wildcards", &|| wildcards(&world)),
        ("ring", &|| ring(&world)),
        ("zero-length", &|| zero_length(&world)),
        ("large", &|| large(&world, sizes.big)),
        ("nonblocking", &|| nonblocking(&world, eager)),
        ("synchronous", &|| synchronous(&world)),
        ("probe", &|| probe(&world)),
        ("reductions", &|| reductions(&world)),
        ("barrier", &|| barrier(&world)),
        ("collectives", &|| collectives(&world)),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in checks {
        match check() {
            Ok(what) => {
                passed += 1;
                out(&format!("{name}: ok ({what})"));
            }
            Err(why) => {
                failed += 1;
                out(&format!("{name}: FAILED: {why}"));
            }
        }
    }
    (passed, failed)
}

/// `len` bytes of a xorshift stream seeded with `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn ring_of<T: Equivalence + PartialEq + Debug>(
    world: &SimpleCommunicator,
    what: &str,
    make: impl Fn(i32) -> T,
) -> Result<(), String> {
    let me = world.rank();
    let n = world.size();
    let next = world.process_at_rank((me + 1) % n);
    let prev = world.process_at_rank((me + n - 1) % n);
    let p = prev.rank();
    let one = make(me);
    let many: Vec<T> = (0..37).map(|i| make(me * 1000 + i)).collect();
    let arr = [make(me), make(me + 1), make(me + 2)];
    let dt = T::equivalent_datatype();
    request::scope(|scope| {
        let _g1 = WaitGuard::from(next.immediate_send_with_tag(scope, &one, 1));
        let _g2 = WaitGuard::from(next.immediate_send_with_tag(scope, &many[..], 2));
        let _g3 = WaitGuard::from(next.immediate_send_with_tag(scope, &arr, 3));
        let (v, st) = prev.receive_with_tag::<T>(1);
        let (vs, st2) = prev.receive_vec_with_tag::<T>(2);
        let (a, st3) = prev.receive_with_tag::<[T; 3]>(3);
        ensure!(
            v == make(p) && st.count(&dt) == 1,
            "{what}: one value {v:?} from {p}"
        );
        ensure!(
            vs.iter()
                .enumerate()
                .all(|(i, x)| *x == make(p * 1000 + i as i32))
                && st2.count(&dt) == 37,
            "{what}: a slice of 37 from {p}"
        );
        ensure!(
            a == [make(p), make(p + 1), make(p + 2)]
                && st3.count(<[T; 3]>::equivalent_datatype()) == 1
                && st3.count(&dt) == 3,
            "{what}: an array from {p}"
        );
        Ok(())
    })
}

fn ring(world: &SimpleCommunicator) -> Outcome {
    // Every datatype goes round even after one failed: the ranks stay in step.
    let results = [
        ring_of(world, "i8", |x| x as i8),
        ring_of(world, "i16", |x| (x as i16).wrapping_mul(-3)),
        ring_of(world, "i32", |x| x.wrapping_mul(-7)),
        ring_of(world, "i64", |x| (x as i64).wrapping_mul(-1_000_000_007)),
        ring_of(world, "u8", |x| x as u8),
        ring_of(world, "u16", |x| (x as u16).wrapping_mul(3)),
        ring_of(world, "u32", |x| (x as u32).wrapping_mul(0x0101_0101)),
        ring_of(world, "u64", |x| (x as u64).wrapping_mul(0x1_0000_0001)),
        ring_of(world, "f32", |x| x as f32 * 0.25 - 1.5),
        ring_of(world, "f64", |x| x as f64 * 1e-3 - 7.0),
        ring_of(world, "usize", |x| x as usize * 5),
        ring_of(world, "isize", |x| x as isize * -5),
        ring_of(world, "[u16; 2]", |x| [x as u16, !x as u16]),
    ];
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    Ok(String::from("13 datatypes, as values, slices and arrays"))
}

/// Every rank but 0 sends rank 0 one message of each size (tag: the size's index), then 20
/// with one tag; rank 0 takes the sized ones by tag in reverse order, then the 20 from any
/// source with any tag, per sender in the order sent.
fn order(world: &SimpleCommunicator, eager: usize, big: usize) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let sizes = [0, 1, eager, eager + 1, 100_000, big];
    let mut bad = None;
    if me != 0 {
        let root = world.process_at_rank(0);
        // All at once: rank 0 takes them in reverse order, and a send above the eager
        // limit waits for its receive.
        let msgs: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| pattern(len, me as u32 * 100 + i as u32))
            .collect();
        request::scope(|scope| {
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
    } else {
        let mut buf = vec![0u8; big];
        for r in 1..n {
            for (i, &len) in sizes.iter().enumerate().rev() {
                let st = world
                    .process_at_rank(r)
                    .receive_into_with_tag(&mut buf[..], i as i32);
                let ok = (st.source_rank(), st.tag(), st.bytes()) == (r, i as i32, len)
                    && buf[..len] == pattern(len, r as u32 * 100 + i as u32)[..];
                if !ok && bad.is_none() {
                    bad = Some(format!("{len} bytes from rank {r}: {st:?}"));
                }
            }
        }
        let mut next = vec![0u8; n as usize];
        for _ in 0..20 * (n - 1) {
            let (v, st) = world.any_process().receive_vec::<u8>();
            let s = st.source_rank() as usize;
            if (st.tag(), &v[..]) != (99, &[next[s]; 7][..]) && bad.is_none() {
                bad = Some(format!("message {} from rank {s} out of order", next[s]));
            }
            next[s] += 1;
        }
    }
    world.barrier();
    match bad {
        Some(b) => Err(b),
        None => Ok(format!(
            "sizes {sizes:?} to rank 0, then 20 in order from each"
        )),
    }
}

/// A specific source with any tag, then any source with a specific tag.
fn wildcards(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let mut bad = None;
    if me != 0 {
        let root = world.process_at_rank(0);
        for k in 0..4 {
            root.send_with_tag(&(me * 100 + k), 1 + k % 2);
        }
    } else {
        let from = n - 1;
        for k in 0..4 {
            let (v, st) = world.process_at_rank(from).receive::<i32>();
            if (v, st.tag()) != (from * 100 + k, 1 + k % 2) {
                bad.get_or_insert(format!("from rank {from}, any tag: {v} {st:?}"));
            }
        }
        let mut seen = vec![0; n as usize];
        for _ in 0..2 * (n - 2) {
            let (v, st) = world.any_process().receive_with_tag::<i32>(2);
            let s = st.source_rank() as usize;
            if v != s as i32 * 100 + 1 + 2 * seen[s] {
                bad.get_or_insert(format!("tag 2, any source: {v} {st:?}"));
            }
            seen[s] += 1;
        }
        for _ in 0..2 * (n - 2) {
            let (v, st) = world.any_process().receive::<i32>();
            if st.tag() != 1 || v % 2 != 0 {
                bad.get_or_insert(format!("any source, any tag: {v} {st:?}"));
            }
        }
        if world.any_process().immediate_probe().is_some() {
            bad.get_or_insert(String::from("a message left over"));
        }
    }
    world.barrier();
    match bad {
        Some(b) => Err(b),
        None => Ok(String::from(
            "a source with any tag, any source with a tag, any with any",
        )),
    }
}

fn zero_length(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let next = world.process_at_rank((me + 1) % n);
    let prev = world.process_at_rank((me + n - 1) % n);
    let empty: [f64; 0] = [];
    let empty_vec: Vec<u32> = Vec::new();
    let mut none: [f64; 0] = [];
    let r = request::scope(|scope| {
        let s = next.immediate_send_with_tag(scope, &empty[..], 4);
        let s2 = next.immediate_synchronous_send_with_tag(scope, &empty_vec, 5);
        let st = prev.probe_with_tag(4);
        let st1 = prev.receive_into_with_tag(&mut none[..], 4);
        let (v, st2) = world.any_process().receive_vec_with_tag::<u32>(5);
        s.wait();
        s2.wait();
        ensure!(
            st.count(f64::equivalent_datatype()) == 0 && st1.bytes() == 0,
            "probe or receive of an empty message: {st:?} {st1:?}"
        );
        ensure!(
            v.is_empty() && st2.source_rank() == prev.rank(),
            "an empty vector: {st2:?}"
        );
        Ok(())
    });
    next.send_with_tag(&[0u8; 0][..], 6);
    let mut big = [7u16; 10];
    let st = prev.receive_into(&mut big[..]);
    r?;
    ensure!(
        st.count(u16::equivalent_datatype()) == 0 && big == [7; 10],
        "an empty message into a buffer: {st:?}"
    );
    Ok(String::from(
        "immediate, synchronous, probed, into a vector and a buffer",
    ))
}

/// Each rank sends `big` bytes to the next and receives `big` from the previous at once.
fn large(world: &SimpleCommunicator, big: usize) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let next = world.process_at_rank((me + 1) % n);
    let prev = world.process_at_rank((me + n - 1) % n);
    let t0 = crate::time();
    let mine = pattern(big, 1000 + me as u32);
    let mut got = vec![0u8; big];
    let st = send_receive_into(&mine[..], &next, &mut got[..], &prev);
    drop(mine);
    let ok = got == pattern(big, 1000 + prev.rank() as u32);
    let t = crate::time() - t0;
    ensure!(
        ok && st.bytes() == big && st.source_rank() == prev.rank(),
        "{big} bytes from rank {}: {st:?}, data {}",
        prev.rank(),
        if ok { "right" } else { "WRONG" }
    );
    Ok(format!("{big} bytes each way around the ring in {t:.3} s"))
}

/// Receives from every rank and sends to every rank (every other one above the eager
/// limit, one synchronous), receives completed in reverse order, sends by wait_any.
fn nonblocking(world: &SimpleCommunicator, eager: usize) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let size_of = |r: i32| if r % 2 == 0 { 4 * eager + 17 } else { 10 };
    let mut bufs: Vec<Vec<u8>> = (0..n).map(|k| vec![0u8; size_of(k)]).collect();
    let outgoing: Vec<Vec<u8>> = (0..n)
        .map(|k| pattern(size_of(me), (me * 8 + k) as u32))
        .collect();
    let mut statuses: Vec<Status> = Vec::new();
    let mut any = 0;
    request::scope(|scope| {
        let recvs: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(k, b)| {
                world
                    .process_at_rank(k as i32)
                    .immediate_receive_into_with_tag(scope, &mut b[..], 5)
            })
            .collect();
        let mut sends: Vec<_> = (0..n)
            .rev()
            .map(|k| {
                let p = world.process_at_rank(k);
                let m = &outgoing[k as usize][..];
                if k == (me + 3) % n {
                    p.immediate_synchronous_send_with_tag(scope, m, 5)
                } else {
                    p.immediate_send_with_tag(scope, m, 5)
                }
            })
            .collect();
        for r in recvs.into_iter().rev() {
            statuses.push(r.wait());
        }
        while wait_any(&mut sends).is_some() {
            any += 1;
        }
    });
    statuses.reverse();
    for (k, (b, st)) in bufs.iter().zip(&statuses).enumerate() {
        let k = k as i32;
        ensure!(
            (st.source_rank(), st.bytes()) == (k, size_of(k))
                && b[..] == pattern(size_of(k), (k * 8 + me) as u32)[..],
            "from rank {k}: {st:?}"
        );
    }
    ensure!(any == n, "wait_any completed {any} of {n} sends");
    // Receives polled with test, round robin.
    let mut got = vec![[0u64; 2]; n as usize];
    let mut polls = 0;
    request::scope(|scope| {
        let mut pending: Vec<_> = got
            .iter_mut()
            .enumerate()
            .map(|(k, g)| {
                world
                    .process_at_rank(k as i32)
                    .immediate_receive_into_with_tag(scope, g, 8)
            })
            .collect();
        for j in 0..n {
            let k = (me + j) % n;
            world
                .process_at_rank(k)
                .send_with_tag(&[me as u64, k as u64], 8);
        }
        while !pending.is_empty() {
            let r = pending.remove(0);
            polls += 1;
            if let Err(r) = r.test() {
                pending.push(r);
            }
        }
    });
    for (k, g) in got.iter().enumerate() {
        ensure!(*g == [k as u64, me as u64], "polled from rank {k}: {g:?}");
    }
    // A future.
    let fut = world.any_process().immediate_receive_with_tag::<f64>(9);
    world
        .process_at_rank((me + 1) % n)
        .send_with_tag(&(me as f64 * 1.5), 9);
    let (x, st) = fut.get();
    let prev = (me + n - 1) % n;
    ensure!(
        (x, st.source_rank()) == (prev as f64 * 1.5, prev),
        "a future: {x} {st:?}"
    );
    world.barrier();
    Ok(format!(
        "{n} receives waited in reverse, {n} sends by wait_any, {n} polled in {polls} tests, a future"
    ))
}

/// A synchronous send does not complete before its receive is posted.
fn synchronous(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    if me ^ 1 >= world.size() {
        world.barrier();
        return Ok(String::from("no partner"));
    }
    let other = world.process_at_rank(me ^ 1);
    let x = 42u64 + me as u64;
    let mut early = 0;
    if me % 2 == 0 {
        request::scope(|scope| {
            let mut s = Some(other.immediate_synchronous_send_with_tag(scope, &x, 1));
            // The partner receives tag 1 only after tag 2, which is not sent yet.
            for _ in 0..50 {
                match s.take().map(|r| r.test()) {
                    Some(Ok(_)) => {
                        early += 1;
                        break;
                    }
                    Some(Err(r)) => s = Some(r),
                    None => break,
                }
            }
            other.send_with_tag(&x, 2);
            if let Some(s) = s {
                s.wait();
            }
        });
    } else {
        let (a, _) = other.receive_with_tag::<u64>(2);
        let (b, _) = other.receive_with_tag::<u64>(1);
        ensure!(
            (a, b) == (42 + (me ^ 1) as u64, 42 + (me ^ 1) as u64),
            "received {a} and {b}"
        );
    }
    world.barrier();
    ensure!(
        early == 0,
        "a synchronous send completed before its receive"
    );
    Ok(String::from(
        "not complete in 50 tests before the receive, complete after",
    ))
}

fn probe(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    let n = world.size();
    let next = world.process_at_rank((me + 1) % n);
    let from = (me + n - 1) % n;
    let data: Vec<i64> = (0..me as i64 + 3).collect();
    let r = request::scope(|scope| {
        let s = next.immediate_send_with_tag(scope, &data[..], 77);
        let st = world.any_process().probe_with_tag(77);
        let none = world.any_process().immediate_probe_with_tag(78);
        let (msg, st2) = world.any_process().matched_probe();
        let mut v = vec![0i64; st.count(i64::equivalent_datatype()).max(0) as usize];
        let st3 = msg.matched_receive_into(&mut v[..]);
        s.wait();
        ensure!(
            (st.source_rank(), st.count(i64::equivalent_datatype())) == (from, from + 3)
                && st.count(i32::equivalent_datatype()) == 2 * (from + 3)
                && st.count(<[i64; 100]>::equivalent_datatype()) == crate::UNDEFINED,
            "probe: {st:?}"
        );
        ensure!(
            none.is_none() && st2 == st && st3 == st,
            "immediate or matched probe"
        );
        ensure!(
            v.iter().copied().eq(0..from as i64 + 3),
            "the matched message"
        );
        Ok(())
    });
    world.barrier();
    r?;
    Ok(String::from(
        "probe counts, immediate probe, matched probe and receive",
    ))
}

// ---- reductions ----------------------------------------------------------------------

/// The operations in [`SystemOperation::all`]'s order, written out again.
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

/// A datatype with the operations MPI defines on it.
trait Val: Equivalence + PartialEq + Debug {
    const FLOAT: bool;
    const NAME: &'static str;
    /// Element `i` of rank `r`'s contribution: small, some negative, some zero.
    fn make(r: i32, i: usize) -> Self;
    /// `a op b`.
    fn apply(op: O, a: Self, b: Self) -> Self;
    fn bits(self) -> u64;
}

macro_rules! int_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const FLOAT: bool = false;
            const NAME: &'static str = stringify!($t);
            fn make(r: i32, i: usize) -> Self {
                let v = (r as i64 * 7 + i as i64 * 3) % 11 - 4;
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
            const NAME: &'static str = stringify!($t);
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
                    _ => a,
                }
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
        }
    )*};
}
float_val!(f32, f64);

/// Elements per reduction: more than one ALU packet of 32 operands.
const COUNT: usize = 40;

fn contribution<T: Val>(r: i32) -> Vec<T> {
    (0..COUNT).map(|i| T::make(r, i)).collect()
}

/// The serial result: the contributions folded along a binomial tree rooted at `root`,
/// lower (virtual) ranks on the left, the order ADR 0035 fixes.
fn serial<T: Val>(op: O, n: i32, root: i32) -> Vec<u64> {
    let mut part: Vec<Vec<T>> = (0..n).map(|v| contribution::<T>((v + root) % n)).collect();
    let mut mask = 1;
    while mask < n as usize {
        for v in (0..n as usize).step_by(2 * mask) {
            if v + mask < n as usize {
                let b = core::mem::take(&mut part[v + mask]);
                for (a, b) in part[v].iter_mut().zip(b) {
                    *a = T::apply(op, *a, b);
                }
            }
        }
        mask <<= 1;
    }
    part.swap_remove(0).into_iter().map(T::bits).collect()
}

fn bits<T: Val>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Every operation MPI defines on `T` on the world (the ALU for integers), on `dup`
/// (software) and as a reduce to rank 3, each against the serial result bit for bit.
fn every_op<T: Val>(
    world: &SimpleCommunicator,
    dup: &SimpleCommunicator,
    bad: &mut Option<String>,
) -> u32 {
    let me = world.rank();
    let n = world.size();
    let mine = contribution::<T>(me);
    let mut checked = 0;
    for (op, sys) in OPS.into_iter().zip(SystemOperation::all()) {
        if T::FLOAT && !matches!(op, O::Max | O::Min | O::Sum | O::Prod) {
            continue; // MPI_ERR_OP (the error tests)
        }
        let want = serial::<T>(op, n, 0);
        let mut got = vec![T::make(0, 0); COUNT];
        world.all_reduce_into(&mine[..], &mut got[..], sys);
        let mut got2 = vec![T::make(0, 0); COUNT];
        dup.all_reduce_into(&mine[..], &mut got2[..], sys);
        let root = world.process_at_rank(3 % n);
        let mut at = vec![T::make(0, 0); COUNT];
        if me == 3 % n {
            root.reduce_into_root(&mine[..], &mut at[..], sys);
        } else {
            root.reduce_into(&mine[..], sys);
        }
        let mut local = contribution::<T>(1);
        reduce_local_into(&mine[..], &mut local[..], sys);
        let local_want: Vec<u64> = mine
            .iter()
            .zip(contribution::<T>(1))
            .map(|(a, b)| T::apply(op, *a, b).bits())
            .collect();
        let name = T::NAME;
        if bits(&got) != want {
            bad.get_or_insert(format!("{op:?} on {name} (world)"));
        } else if bits(&got2) != want {
            bad.get_or_insert(format!("{op:?} on {name} (duplicate)"));
        } else if me == 3 % n && bits(&at) != serial::<T>(op, n, 3 % n) {
            bad.get_or_insert(format!("{op:?} on {name} (reduce to rank 3)"));
        } else if bits(&local) != local_want {
            bad.get_or_insert(format!("{op:?} on {name} (reduce_local_into)"));
        }
        checked += 1;
    }
    checked
}

fn reductions(world: &SimpleCommunicator) -> Outcome {
    let dup = world.duplicate();
    let mut bad = None;
    let mut n = 0;
    n += every_op::<i8>(world, &dup, &mut bad);
    n += every_op::<i16>(world, &dup, &mut bad);
    n += every_op::<i32>(world, &dup, &mut bad);
    n += every_op::<i64>(world, &dup, &mut bad);
    n += every_op::<u8>(world, &dup, &mut bad);
    n += every_op::<u16>(world, &dup, &mut bad);
    n += every_op::<u32>(world, &dup, &mut bad);
    n += every_op::<u64>(world, &dup, &mut bad);
    n += every_op::<usize>(world, &dup, &mut bad);
    n += every_op::<isize>(world, &dup, &mut bad);
    n += every_op::<f32>(world, &dup, &mut bad);
    n += every_op::<f64>(world, &dup, &mut bad);
    // Floats on a split agree on every rank of it.
    let me = world.rank();
    let half = world.split_by_color(Color::with_value(me % 2));
    if let Some(half) = half {
        let v: Vec<f64> = (0..50)
            .map(|i| 1.0 / (me as f64 * 3.0 + i as f64 + 1.0))
            .collect();
        let mut w = vec![0.0f64; 50];
        half.all_reduce_into(&v[..], &mut w[..], SystemOperation::sum());
        let mine: Vec<u64> = w.iter().map(|x| x.to_bits()).collect();
        let mut all = vec![0u64; 50 * half.size() as usize];
        half.all_gather_into(&mine[..], &mut all[..]);
        if all.chunks(50).any(|c| c != &mine[..]) {
            bad.get_or_insert(String::from("a float sum differs between ranks of a split"));
        }
    }
    match bad {
        Some(b) => Err(b),
        None => Ok(format!(
            "{n} operation and datatype pairs on the world, a duplicate and to a root"
        )),
    }
}

/// In each round one rank arrives late; every rank's exit time must be after every rank's
/// entry time, on the world (the ALU barrier), a duplicate and a split (software).
fn barrier(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    let n = world.size() as usize;
    let dup = world.duplicate();
    let half = world
        .split_by_color(Color::with_value(me / 4))
        .expect("every rank has a colour");
    let mut worst = f64::MAX;
    let mut bad = None;
    for round in 0..9 {
        let c: &SimpleCommunicator = match round % 3 {
            0 => world,
            1 => &dup,
            _ => &half,
        };
        let late = (round * 3) % c.size();
        if c.rank() == late {
            let t = crate::time();
            while crate::time() < t + 0.02 {}
        }
        let t_in = crate::time();
        c.barrier();
        let t_out = crate::time();
        let mut ins = vec![0.0f64; n];
        let mut outs = vec![0.0f64; n];
        world.all_gather_into(&t_in, &mut ins[..]);
        world.all_gather_into(&t_out, &mut outs[..]);
        let members: Vec<usize> = if round % 3 == 2 {
            (0..n).filter(|&r| r / 4 == me as usize / 4).collect()
        } else {
            (0..n).collect()
        };
        let last_in = members.iter().map(|&r| ins[r]).fold(f64::MIN, f64::max);
        let first_out = members.iter().map(|&r| outs[r]).fold(f64::MAX, f64::min);
        worst = worst.min(first_out - last_in);
        if last_in > first_out {
            bad.get_or_insert(format!(
                "round {round}: a rank left at {first_out} before the last entered at {last_in}"
            ));
        }
    }
    match bad {
        Some(b) => Err(b),
        None => Ok(format!(
            "9 rounds with a late rank, first exit at least {:.0} us after the last entry",
            worst * 1e6
        )),
    }
}

fn movement(c: &SimpleCommunicator, what: &str) -> Result<(), String> {
    let n = c.size() as usize;
    let r = c.rank() as usize;
    let root = c.process_at_rank((1 % n) as i32);
    let mut v = if r == 1 % n {
        pattern(100_000, 5)
    } else {
        vec![0u8; 100_000]
    };
    root.broadcast_into(&mut v[..]);
    let mut f = if r == 0 { [1.5f32, -2.0] } else { [0.0; 2] };
    c.process_at_rank(0).broadcast_into(&mut f);
    let mine = [r as u32 * 3, r as u32 * 3 + 1, r as u32 * 3 + 2];
    let gat = c.process_at_rank(0);
    let mut all = vec![0u32; 3 * n];
    if r == 0 {
        gat.gather_into_root(&mine, &mut all[..]);
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
    let mut every = vec![[0u8; 2]; n];
    c.all_gather_into(&[r as u8, 0xee], &mut every[..]);
    let send: Vec<u16> = (0..n).flat_map(|k| [(r * 16 + k) as u16; 3]).collect();
    let mut recv = vec![0u16; 3 * n];
    c.all_to_all_into(&send[..], &mut recv[..]);
    c.barrier();
    ensure!(
        v == pattern(100_000, 5),
        "{what}: broadcast of 100,000 bytes"
    );
    ensure!(f == [1.5, -2.0], "{what}: broadcast of an array");
    ensure!(
        r != 0 || all.iter().copied().eq(0..3 * n as u32),
        "{what}: gather"
    );
    ensure!(
        part == [-2 * r as i64, -2 * r as i64 - 1],
        "{what}: scatter"
    );
    ensure!(
        every.iter().enumerate().all(|(k, e)| *e == [k as u8, 0xee]),
        "{what}: all-gather"
    );
    ensure!(
        recv.iter()
            .enumerate()
            .all(|(i, &x)| x == ((i / 3) * 16 + r) as u16),
        "{what}: all-to-all"
    );
    Ok(())
}

fn collectives(world: &SimpleCommunicator) -> Outcome {
    let me = world.rank();
    let split = world
        .split_by_color_with_key(Color::with_value(me % 2), -me)
        .expect("every rank has a colour");
    let dup = world.duplicate();
    let results = [
        movement(world, "world"),
        movement(&split, "split"),
        movement(&dup, "duplicate"),
    ];
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    let expect = (world.size() / 2 - 1 - me / 2, world.size() / 2);
    ensure!(
        (split.rank(), split.size()) == expect,
        "split by descending rank: {} of {}",
        split.rank(),
        split.size()
    );
    Ok(String::from(
        "broadcast, gather, scatter, all-gather, all-to-all on the world, a split and a duplicate",
    ))
}
