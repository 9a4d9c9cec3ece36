//! The kernels against a serial reference computed in wider arithmetic, for every operation on
//! every datatype it accepts; the refusals; the pair ties; long double through C.

use super::*;
use crate::{datatype, op};
use std::vec::Vec;

/// Reduces `ranks` (one buffer each) in order, as a reduction algorithm's steps would.
fn fold(op: Op, dt: Datatype, ranks: &[Vec<u8>], count: usize) -> Vec<u8> {
    let mut acc = ranks[0].clone();
    for r in &ranks[1..] {
        reduce_local(op, dt, r, &mut acc, count).expect("accepted");
    }
    acc
}

macro_rules! check_integer {
    ($dt:expr, $t:ty) => {{
        let values: [$t; 8] = [
            <$t>::MIN,
            <$t>::MAX,
            0,
            1,
            (0 as $t).wrapping_sub(1),
            2,
            3,
            <$t>::MAX / 3,
        ];
        // Eight ranks of four elements: element i of rank r is values[(r * 3 + i) % 8], then a
        // column of all-true and one of all-ones bits.
        let elem = |r: usize, i: usize| -> $t {
            match i {
                0 | 1 => values[(r * 3 + i) % 8],
                2 => values[(r % 3) + 1 + (r % 2)],
                _ => <$t>::MAX,
            }
        };
        let ranks: Vec<Vec<u8>> = (0..8)
            .map(|r| (0..4).flat_map(|i| elem(r, i).to_ne_bytes()).collect())
            .collect();
        for op in op::ALL.iter().copied().filter(|o| o.accepts($dt)) {
            let got = fold(op, $dt, &ranks, 4);
            for i in 0..4 {
                let col: Vec<i128> = (0..8).map(|r| elem(r, i) as i128).collect();
                let t = |v: i128| v != 0;
                let want: i128 = match op {
                    Op::Max => *col.iter().max().unwrap(),
                    Op::Min => *col.iter().min().unwrap(),
                    Op::Sum => col.iter().fold(0i128, |a, b| a.wrapping_add(*b)),
                    Op::Prod => col.iter().fold(1i128, |a, b| a.wrapping_mul(*b)),
                    Op::Land => col.iter().all(|v| t(*v)) as i128,
                    Op::Lor => col.iter().any(|v| t(*v)) as i128,
                    Op::Lxor => (col.iter().filter(|v| t(**v)).count() % 2) as i128,
                    Op::Band => col.iter().fold(-1i128, |a, b| a & b),
                    Op::Bor => col.iter().fold(0i128, |a, b| a | b),
                    Op::Bxor => col.iter().fold(0i128, |a, b| a ^ b),
                    Op::Minloc | Op::Maxloc => unreachable!(),
                };
                let size = core::mem::size_of::<$t>();
                let mut raw = [0u8; core::mem::size_of::<$t>()];
                raw.copy_from_slice(&got[i * size..(i + 1) * size]);
                assert_eq!(
                    <$t>::from_ne_bytes(raw),
                    want as $t,
                    "{:?} {} element {}",
                    op,
                    $dt.name(),
                    i
                );
            }
        }
    }};
}

#[test]
fn every_operation_on_every_integer_type() {
    check_integer!(Datatype::SignedChar, i8);
    check_integer!(Datatype::Int8, i8);
    check_integer!(Datatype::UnsignedChar, u8);
    check_integer!(Datatype::Uint8, u8);
    check_integer!(Datatype::Short, i16);
    check_integer!(Datatype::Int16, i16);
    check_integer!(Datatype::UnsignedShort, u16);
    check_integer!(Datatype::Uint16, u16);
    check_integer!(Datatype::Int, i32);
    check_integer!(Datatype::Int32, i32);
    check_integer!(Datatype::Unsigned, u32);
    check_integer!(Datatype::Uint32, u32);
    check_integer!(Datatype::Long, c_long);
    check_integer!(Datatype::UnsignedLong, c_ulong);
    check_integer!(Datatype::LongLong, i64);
    check_integer!(Datatype::Int64, i64);
    check_integer!(Datatype::UnsignedLongLong, u64);
    check_integer!(Datatype::Uint64, u64);
    check_integer!(Datatype::Byte, u8);
}

#[test]
fn unsigned_max_and_min_compare_as_unsigned() {
    // MPICH 4.0.2 gets this wrong (tests/mpi/unsigned_minmax.c).
    let mut acc = u32::MAX.to_ne_bytes().to_vec();
    reduce_local(
        Op::Max,
        Datatype::Unsigned,
        &2u32.to_ne_bytes(),
        &mut acc,
        1,
    )
    .unwrap();
    assert_eq!(acc, u32::MAX.to_ne_bytes());
    reduce_local(
        Op::Min,
        Datatype::Unsigned,
        &2u32.to_ne_bytes(),
        &mut acc,
        1,
    )
    .unwrap();
    assert_eq!(acc, 2u32.to_ne_bytes());
}

#[test]
fn c_bool_logical_operations_give_0_or_1() {
    // Rank values per element: (true, true), (true, false), (false, false).
    let a = [1u8, 1, 0];
    let b = [1u8, 0, 0];
    let run = |op| {
        let mut acc = a.to_vec();
        reduce_local(op, Datatype::CBool, &b, &mut acc, 3).unwrap();
        acc
    };
    assert_eq!(run(Op::Land), [1, 0, 0]);
    assert_eq!(run(Op::Lor), [1, 1, 0]);
    assert_eq!(run(Op::Lxor), [0, 1, 0]);
    assert_eq!(
        reduce_local(Op::Sum, Datatype::CBool, &b, &mut a.to_vec(), 3),
        Err(ErrorClass::Op)
    );
}

macro_rules! check_float {
    ($dt:expr, $t:ty) => {{
        let elem = |r: usize, i: usize| -> $t { (((r * 5 + i * 3) % 7) as $t - 3.0) * 0.5 };
        let ranks: Vec<Vec<u8>> = (0..8)
            .map(|r| (0..3).flat_map(|i| elem(r, i).to_ne_bytes()).collect())
            .collect();
        for op in op::ALL.iter().copied().filter(|o| o.accepts($dt)) {
            let got = fold(op, $dt, &ranks, 3);
            for i in 0..3 {
                let col: Vec<f64> = (0..8).map(|r| elem(r, i) as f64).collect();
                let want = match op {
                    Op::Max => col.iter().cloned().fold(f64::MIN, f64::max),
                    Op::Min => col.iter().cloned().fold(f64::MAX, f64::min),
                    Op::Sum => col.iter().sum(),
                    Op::Prod => col.iter().product(),
                    _ => unreachable!("{op:?} on a floating type"),
                };
                let size = core::mem::size_of::<$t>();
                let mut raw = [0u8; core::mem::size_of::<$t>()];
                raw.copy_from_slice(&got[i * size..(i + 1) * size]);
                assert_eq!(
                    <$t>::from_ne_bytes(raw) as f64,
                    want,
                    "{:?} {} element {}",
                    op,
                    $dt.name(),
                    i
                );
            }
        }
    }};
}

#[test]
fn every_operation_on_float_and_double() {
    check_float!(Datatype::Float, f32);
    check_float!(Datatype::Double, f64);
}

#[test]
fn max_with_a_nan_follows_the_c_expression() {
    let mut acc = f64::NAN.to_ne_bytes().to_vec();
    reduce_local(
        Op::Max,
        Datatype::Double,
        &1.5f64.to_ne_bytes(),
        &mut acc,
        1,
    )
    .unwrap();
    assert_eq!(f64::from_ne_bytes(acc.try_into().unwrap()), 1.5);
}

/// One pair element in C layout.
fn pair_bytes<V: Elem>(dt: Datatype, value: V, index: i32) -> Vec<u8> {
    let mut b = std::vec![0u8; dt.extent()];
    value.store(&mut b);
    index.store(&mut b[dt.index_offset().unwrap()..]);
    b
}

fn read_pair<V: Elem>(dt: Datatype, b: &[u8]) -> (V, i32) {
    (V::load(b), i32::load(&b[dt.index_offset().unwrap()..]))
}

macro_rules! check_pair {
    ($dt:expr, $v:ty) => {{
        // Values with ties: rank r holds ((r * 3) % 5) - 2 at index 10 * r + 1.
        let value = |r: usize| (((r * 3) % 5) as i32 - 2) as $v;
        let ranks: Vec<Vec<u8>> = (0..8)
            .map(|r| pair_bytes::<$v>($dt, value(r), 10 * r as i32 + 1))
            .collect();
        // Folded from the last rank down too, so the tie rule is what picks the index.
        let rev: Vec<Vec<u8>> = ranks.iter().rev().cloned().collect();
        for ranks in [&ranks, &rev] {
            let max = fold(Op::Maxloc, $dt, ranks, 1);
            let min = fold(Op::Minloc, $dt, ranks, 1);
            assert_eq!(
                read_pair::<$v>($dt, &max),
                (2 as $v, 31),
                "MAXLOC {}",
                $dt.name()
            );
            assert_eq!(
                read_pair::<$v>($dt, &min),
                ((-2i32) as $v, 1),
                "MINLOC {}",
                $dt.name()
            );
        }
    }};
}

#[test]
fn maxloc_and_minloc_on_every_pair_type_keep_the_lower_index() {
    check_pair!(Datatype::TwoInt, c_int);
    check_pair!(Datatype::FloatInt, f32);
    check_pair!(Datatype::DoubleInt, f64);
    check_pair!(Datatype::LongInt, c_long);
    check_pair!(Datatype::ShortInt, c_short);
}

extern "C" {
    fn kestrel_mpi_ldouble_from_double(value: f64, out: *mut c_void);
    fn kestrel_mpi_ldouble_to_double(input: *const c_void) -> f64;
}

fn ld(values: &[f64], stride: usize) -> Vec<u8> {
    let mut b = std::vec![0u8; values.len() * stride];
    for (i, v) in values.iter().enumerate() {
        // SAFETY: the slot holds `stride` >= sizeof(long double) bytes; the C side memcpys.
        unsafe { kestrel_mpi_ldouble_from_double(*v, b[i * stride..].as_mut_ptr().cast()) };
    }
    b
}

fn ld_at(b: &[u8], at: usize) -> f64 {
    assert!(b.len() >= at + Datatype::LongDouble.size());
    // SAFETY: checked just above that a whole long double lies at `at`.
    unsafe { kestrel_mpi_ldouble_to_double(b[at..].as_ptr().cast()) }
}

#[test]
fn long_double_through_c() {
    let s = Datatype::LongDouble.size();
    let a = ld(&[1.5, -2.0, 3.0], s);
    for (op, want) in [
        (Op::Max, [1.5, 4.0, 3.0]),
        (Op::Min, [-0.5, -2.0, 2.0]),
        (Op::Sum, [1.0, 2.0, 5.0]),
        (Op::Prod, [-0.75, -8.0, 6.0]),
    ] {
        let mut acc = ld(&[-0.5, 4.0, 2.0], s);
        reduce_local(op, Datatype::LongDouble, &a, &mut acc, 3).unwrap();
        let got: Vec<f64> = (0..3).map(|i| ld_at(&acc, i * s)).collect();
        assert_eq!(got, want, "{op:?}");
    }
    assert_eq!(
        reduce_local(Op::Band, Datatype::LongDouble, &a, &mut a.clone(), 3),
        Err(ErrorClass::Op)
    );
}

#[test]
fn long_double_int_through_c() {
    let dt = Datatype::LongDoubleInt;
    let make = |v: f64, i: i32| {
        let mut b = ld(&[v], dt.extent());
        i.store(&mut b[dt.index_offset().unwrap()..]);
        b
    };
    let index = |b: &[u8]| i32::load(&b[dt.index_offset().unwrap()..]);
    let mut acc = make(2.0, 7);
    reduce_local(Op::Maxloc, dt, &make(2.0, 3), &mut acc, 1).unwrap();
    assert_eq!((ld_at(&acc, 0), index(&acc)), (2.0, 3));
    reduce_local(Op::Maxloc, dt, &make(5.0, 9), &mut acc, 1).unwrap();
    assert_eq!((ld_at(&acc, 0), index(&acc)), (5.0, 9));
    reduce_local(Op::Minloc, dt, &make(-1.0, 11), &mut acc, 1).unwrap();
    assert_eq!((ld_at(&acc, 0), index(&acc)), (-1.0, 11));
}

#[test]
fn refusals() {
    let a = [0u8; 64];
    let mut b = [0u8; 64];
    for dt in datatype::ALL {
        for op in op::ALL {
            let r = reduce_local(op, dt, &a, &mut b, 1);
            assert_eq!(r.is_ok(), op.accepts(dt), "{op:?} {}", dt.name());
            if !op.accepts(dt) {
                assert_eq!(r, Err(ErrorClass::Op));
            }
        }
    }
    assert_eq!(
        reduce_local(Op::Sum, Datatype::Int, &a, &mut b, 17),
        Err(ErrorClass::Buffer)
    );
    assert_eq!(
        reduce_local(Op::Sum, Datatype::Char, &a, &mut b, 1),
        Err(ErrorClass::Op)
    );
    assert_eq!(
        reduce_local(Op::Sum, Datatype::Int, &a, &mut b, usize::MAX),
        Err(ErrorClass::Buffer)
    );
    // Zero elements: nothing to do, any buffers.
    assert_eq!(
        reduce_local(Op::Sum, Datatype::Int, &[], &mut [], 0),
        Ok(())
    );
}
