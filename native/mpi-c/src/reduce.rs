//! The reduction kernels: `inout[i] = input[i] op inout[i]` for every predefined operation on
//! every datatype it is defined on ([`Op::accepts`]), over byte buffers in the machine's byte
//! order and C layout (no alignment needed). This is `MPI_Reduce_local`, the step every
//! reduction algorithm of the core repeats. The results follow C's expressions as MPI
//! implementations write them: `MPI_MAX` is `inout > in ? inout : in` (so a NaN in `inout`
//! yields `in`), integer `MPI_SUM` and `MPI_PROD` wrap, the logical operations give 0 or 1,
//! and `MPI_MAXLOC`/`MPI_MINLOC` keep the lower index on a tie. Long double is reduced by C
//! (src/ldouble.c).

use crate::abi;
use crate::datatype::Datatype;
use crate::error::ErrorClass;
use crate::op::Op;
use core::ffi::{c_int, c_long, c_short, c_ulong, c_void};

/// A fixed-size element read from and written to bytes.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);
}

/// An element MPI treats as a C integer.
trait Int: Elem {
    fn zero() -> Self;
    fn one() -> Self;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_mul(self, other: Self) -> Self;
    fn and(self, other: Self) -> Self;
    fn or(self, other: Self) -> Self;
    fn xor(self, other: Self) -> Self;
}

/// An element MPI treats as floating point.
trait Float: Elem + core::ops::Add<Output = Self> + core::ops::Mul<Output = Self> {}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn load(bytes: &[u8]) -> Self {
                let mut raw = [0u8; core::mem::size_of::<$t>()];
                raw.copy_from_slice(&bytes[..Self::SIZE]);
                <$t>::from_ne_bytes(raw)
            }
            fn store(self, bytes: &mut [u8]) {
                bytes[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
elem!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
            fn wrapping_add(self, other: Self) -> Self { <$t>::wrapping_add(self, other) }
            fn wrapping_mul(self, other: Self) -> Self { <$t>::wrapping_mul(self, other) }
            fn and(self, other: Self) -> Self { self & other }
            fn or(self, other: Self) -> Self { self | other }
            fn xor(self, other: Self) -> Self { self ^ other }
        }
    )*};
}
int!(i8, i16, i32, i64, u8, u16, u32, u64);
impl Float for f32 {}
impl Float for f64 {}

fn max<T: PartialOrd>(inout: T, input: T) -> T {
    if inout > input {
        inout
    } else {
        input
    }
}

fn min<T: PartialOrd>(inout: T, input: T) -> T {
    if inout < input {
        inout
    } else {
        input
    }
}

fn elementwise<T: Elem>(input: &[u8], inout: &mut [u8], count: usize, f: impl Fn(T, T) -> T) {
    for (a, b) in inout
        .chunks_exact_mut(T::SIZE)
        .zip(input.chunks_exact(T::SIZE))
        .take(count)
    {
        f(T::load(a), T::load(b)).store(a);
    }
}

fn integer<T: Int>(op: Op, input: &[u8], inout: &mut [u8], count: usize) {
    let truth = |v: T| v != T::zero();
    let of = |b: bool| if b { T::one() } else { T::zero() };
    match op {
        Op::Max => elementwise::<T>(input, inout, count, max),
        Op::Min => elementwise::<T>(input, inout, count, min),
        Op::Sum => elementwise::<T>(input, inout, count, |a, b| b.wrapping_add(a)),
        Op::Prod => elementwise::<T>(input, inout, count, |a, b| b.wrapping_mul(a)),
        Op::Land => elementwise::<T>(input, inout, count, |a, b| of(truth(b) && truth(a))),
        Op::Lor => elementwise::<T>(input, inout, count, |a, b| of(truth(b) || truth(a))),
        Op::Lxor => elementwise::<T>(input, inout, count, |a, b| of(truth(b) != truth(a))),
        Op::Band => elementwise::<T>(input, inout, count, |a, b| b.and(a)),
        Op::Bor => elementwise::<T>(input, inout, count, |a, b| b.or(a)),
        Op::Bxor => elementwise::<T>(input, inout, count, |a, b| b.xor(a)),
        // Op::accepts keeps the pair operations off integers.
        Op::Minloc | Op::Maxloc => {}
    }
}

fn floating<T: Float>(op: Op, input: &[u8], inout: &mut [u8], count: usize) {
    match op {
        Op::Max => elementwise::<T>(input, inout, count, max),
        Op::Min => elementwise::<T>(input, inout, count, min),
        Op::Sum => elementwise::<T>(input, inout, count, |a, b| b + a),
        Op::Prod => elementwise::<T>(input, inout, count, |a, b| b * a),
        // Op::accepts keeps the other operations off floating types.
        _ => {}
    }
}

/// `MPI_MAXLOC` / `MPI_MINLOC` on `struct { V value; int index; }` of `extent` bytes with the
/// index at `index_at`.
fn pair<V: Elem>(
    op: Op,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
    extent: usize,
    index_at: usize,
) {
    for (a, b) in inout
        .chunks_exact_mut(extent)
        .zip(input.chunks_exact(extent))
        .take(count)
    {
        let (av, bv) = (V::load(a), V::load(b));
        let (ai, bi) = (i32::load(&a[index_at..]), i32::load(&b[index_at..]));
        let better = if op == Op::Maxloc { bv > av } else { bv < av };
        if better {
            bv.store(a);
            bi.store(&mut a[index_at..]);
        } else if bv == av && bi < ai {
            bi.store(&mut a[index_at..]);
        }
    }
}

extern "C" {
    fn kestrel_mpi_reduce_long_double(
        op: c_int,
        inout: *mut c_void,
        input: *const c_void,
        count: c_int,
    ) -> c_int;
    fn kestrel_mpi_reduce_long_double_int(
        op: c_int,
        inout: *mut c_void,
        input: *const c_void,
        count: c_int,
    ) -> c_int;
}

/// `MPI_Reduce_local`: combines `count` elements of `input` into `inout`. `Err(Op)` when the
/// operation is not defined on the datatype, `Err(Buffer)` when a buffer is shorter than
/// `count` elements, `Err(Count)` when `count` does not fit a C int.
pub fn reduce_local(
    op: Op,
    datatype: Datatype,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
) -> Result<(), ErrorClass> {
    if !op.accepts(datatype) {
        return Err(ErrorClass::Op);
    }
    let len = count
        .checked_mul(datatype.extent())
        .ok_or(ErrorClass::Buffer)?;
    if input.len() < len || inout.len() < len {
        return Err(ErrorClass::Buffer);
    }
    let (input, inout) = (&input[..len], &mut inout[..len]);
    match datatype {
        Datatype::SignedChar | Datatype::Int8 => integer::<i8>(op, input, inout, count),
        Datatype::UnsignedChar | Datatype::Uint8 | Datatype::Byte => {
            integer::<u8>(op, input, inout, count)
        }
        Datatype::Short | Datatype::Int16 => integer::<i16>(op, input, inout, count),
        Datatype::UnsignedShort | Datatype::Uint16 => integer::<u16>(op, input, inout, count),
        Datatype::Int | Datatype::Int32 => integer::<i32>(op, input, inout, count),
        Datatype::Unsigned | Datatype::Uint32 => integer::<u32>(op, input, inout, count),
        Datatype::Long => integer::<c_long>(op, input, inout, count),
        Datatype::UnsignedLong => integer::<c_ulong>(op, input, inout, count),
        Datatype::LongLong | Datatype::Int64 => integer::<i64>(op, input, inout, count),
        Datatype::UnsignedLongLong | Datatype::Uint64 => integer::<u64>(op, input, inout, count),
        // C's _Bool is one byte holding 0 or 1; the logical operations keep it so.
        Datatype::CBool => integer::<u8>(op, input, inout, count),
        Datatype::Float => floating::<f32>(op, input, inout, count),
        Datatype::Double => floating::<f64>(op, input, inout, count),
        Datatype::TwoInt
        | Datatype::FloatInt
        | Datatype::DoubleInt
        | Datatype::LongInt
        | Datatype::ShortInt => {
            let (extent, at) = (
                datatype.extent(),
                datatype.index_offset().expect("a pair type"),
            );
            match datatype {
                Datatype::TwoInt => pair::<c_int>(op, input, inout, count, extent, at),
                Datatype::FloatInt => pair::<f32>(op, input, inout, count, extent, at),
                Datatype::DoubleInt => pair::<f64>(op, input, inout, count, extent, at),
                Datatype::LongInt => pair::<c_long>(op, input, inout, count, extent, at),
                _ => pair::<c_short>(op, input, inout, count, extent, at),
            }
        }
        Datatype::LongDouble | Datatype::LongDoubleInt => {
            let n = c_int::try_from(count).map_err(|_| ErrorClass::Count)?;
            let kernel = if datatype == Datatype::LongDouble {
                kestrel_mpi_reduce_long_double
            } else {
                kestrel_mpi_reduce_long_double_int
            };
            // SAFETY: both buffers hold `count` elements of the C type (checked above against
            // the C extent), the C kernel touches only those bytes through memcpy (no
            // alignment needed), and `inout` is exclusively ours for the call.
            let rc = unsafe {
                kernel(
                    op.handle(),
                    inout.as_mut_ptr().cast(),
                    input.as_ptr().cast(),
                    n,
                )
            };
            if rc != abi::MPI_SUCCESS {
                return Err(ErrorClass::Op);
            }
        }
        // Op::accepts refuses every operation on MPI_CHAR.
        Datatype::Char => return Err(ErrorClass::Op),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
