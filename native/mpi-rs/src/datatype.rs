//! Datatypes (rsmpi's `mpi::datatype`): which Rust types travel as which MPI datatype
//! ([`Equivalence`]), and what a send or receive buffer is ([`Buffer`], [`BufferMut`]).
//!
//! The predefined datatypes are the core's (`kestrel_mpi::Datatype`): the fixed-width
//! integers, `f32`, `f64`, and `usize`/`isize` as the integer of their width. An array
//! `[T; N]` of an `Equivalence` type is one itself (N contiguous `T`s): reductions work on
//! it element by element, and a status counts whole arrays. Buffers are a single value, a
//! slice, a `Vec` or an array of such types. No derived (user) datatypes and no `bool`
//! (see the crate documentation).

use crate::Count;
use alloc::vec::Vec;
use kestrel_mpi::Datatype as Base;

/// Datatype traits.
pub mod traits {
    pub use super::{AsDatatype, Buffer, BufferMut, Collection, Datatype, Equivalence};
}

/// A datatype: `n` contiguous elements of one predefined datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatatypeRef {
    base: Base,
    n: usize,
}

/// rsmpi's name for the predefined datatypes.
pub type SystemDatatype = DatatypeRef;

impl DatatypeRef {
    /// `n` contiguous elements of `base`.
    pub const fn contiguous(base: Base, n: usize) -> DatatypeRef {
        DatatypeRef { base, n }
    }

    /// The predefined datatype of the elements.
    pub const fn base(&self) -> Base {
        self.base
    }

    /// Bytes of one value (MPI_Type_size).
    pub const fn size(&self) -> usize {
        self.base.size() * self.n
    }
}

/// A committed MPI datatype (rsmpi's `Datatype` trait).
pub trait Datatype {
    /// The datatype as a value.
    fn datatype_ref(&self) -> DatatypeRef;
}

impl Datatype for DatatypeRef {
    fn datatype_ref(&self) -> DatatypeRef {
        *self
    }
}

impl<D: Datatype + ?Sized> Datatype for &D {
    fn datatype_ref(&self) -> DatatypeRef {
        (**self).datatype_ref()
    }
}

/// A Rust type that travels as an MPI datatype.
///
/// # Safety
///
/// The type is plain data: its bytes are exactly the datatype's elements in the machine's
/// order, it has no padding and no pointers, and every bit pattern is a valid value (a
/// receive writes whatever bytes arrive into it). `size_of::<Self>()` equals the
/// datatype's size.
pub unsafe trait Equivalence: Copy + 'static {
    /// The datatype's type (always [`DatatypeRef`] here).
    type Out: Datatype;
    /// The MPI datatype of this Rust type.
    fn equivalent_datatype() -> Self::Out;
}

macro_rules! equivalent {
    ($($t:ty => $base:expr),* $(,)?) => {$(
        // SAFETY: a primitive integer or float: no padding, no pointers, any bits valid,
        // and its size is the datatype's.
        unsafe impl Equivalence for $t {
            type Out = DatatypeRef;
            fn equivalent_datatype() -> DatatypeRef {
                DatatypeRef::contiguous($base, 1)
            }
        }
    )*};
}

equivalent! {
    i8 => Base::I8,
    i16 => Base::I16,
    i32 => Base::I32,
    i64 => Base::I64,
    u8 => Base::U8,
    u16 => Base::U16,
    u32 => Base::U32,
    u64 => Base::U64,
    f32 => Base::F32,
    f64 => Base::F64,
}

#[cfg(target_pointer_width = "32")]
equivalent! { usize => Base::U32, isize => Base::I32 }
#[cfg(target_pointer_width = "64")]
equivalent! { usize => Base::U64, isize => Base::I64 }

// SAFETY: an array of plain data is plain data (arrays have no padding between elements),
// `N` elements of `T`'s datatype.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    type Out = DatatypeRef;
    fn equivalent_datatype() -> DatatypeRef {
        let t = T::equivalent_datatype().datatype_ref();
        DatatypeRef::contiguous(t.base, t.n * N)
    }
}

/// The datatype of a buffer's elements.
pub trait AsDatatype {
    /// The datatype's type.
    type Out: Datatype;
    /// The datatype of one element.
    fn as_datatype(&self) -> Self::Out;
}

/// A countable collection of elements.
pub trait Collection {
    /// How many elements.
    fn count(&self) -> Count;
}

/// A send buffer: elements of one datatype, contiguous in memory.
pub trait Buffer: AsDatatype + Collection {
    /// The buffer's bytes.
    fn bytes(&self) -> &[u8];
}

/// A receive buffer.
pub trait BufferMut: Buffer {
    /// The buffer's bytes, to overwrite.
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// The bytes of plain data.
pub(crate) fn bytes_of<T: Equivalence>(s: &[T]) -> &[u8] {
    // SAFETY: `T` is plain data without padding (`Equivalence`'s contract), so all of its
    // `size_of_val(s)` bytes are initialised; the result borrows `s`.
    unsafe { core::slice::from_raw_parts(s.as_ptr().cast::<u8>(), core::mem::size_of_val(s)) }
}

/// The bytes of plain data, to overwrite.
pub(crate) fn bytes_of_mut<T: Equivalence>(s: &mut [T]) -> &mut [u8] {
    let n = core::mem::size_of_val(s);
    // SAFETY: as in `bytes_of`, and every bit pattern is a valid `T` (`Equivalence`'s
    // contract), so any bytes written leave valid values; the result borrows `s` uniquely.
    unsafe { core::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), n) }
}

/// A value of `T` with every byte zero.
pub(crate) fn zeroed<T: Equivalence>() -> T {
    // SAFETY: every bit pattern, all zeros included, is a valid `T` (`Equivalence`).
    unsafe { core::mem::zeroed() }
}

/// `n` zeroed values of `T`.
pub(crate) fn zeroed_vec<T: Equivalence>(n: usize) -> Vec<T> {
    alloc::vec![zeroed::<T>(); n]
}

fn count_of(n: usize) -> Count {
    Count::try_from(n).unwrap_or(Count::MAX)
}

impl<T: Equivalence> AsDatatype for T {
    type Out = DatatypeRef;
    fn as_datatype(&self) -> DatatypeRef {
        T::equivalent_datatype().datatype_ref()
    }
}

impl<T: Equivalence> AsDatatype for [T] {
    type Out = DatatypeRef;
    fn as_datatype(&self) -> DatatypeRef {
        T::equivalent_datatype().datatype_ref()
    }
}

impl<T: Equivalence> AsDatatype for Vec<T> {
    type Out = DatatypeRef;
    fn as_datatype(&self) -> DatatypeRef {
        T::equivalent_datatype().datatype_ref()
    }
}

impl<T: Equivalence> Collection for T {
    fn count(&self) -> Count {
        1
    }
}

impl<T: Equivalence> Collection for [T] {
    fn count(&self) -> Count {
        count_of(self.len())
    }
}

impl<T: Equivalence> Collection for Vec<T> {
    fn count(&self) -> Count {
        count_of(self.len())
    }
}

impl<T: Equivalence> Buffer for T {
    fn bytes(&self) -> &[u8] {
        bytes_of(core::slice::from_ref(self))
    }
}

impl<T: Equivalence> Buffer for [T] {
    fn bytes(&self) -> &[u8] {
        bytes_of(self)
    }
}

impl<T: Equivalence> Buffer for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytes_of(self)
    }
}

impl<T: Equivalence> BufferMut for T {
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(core::slice::from_mut(self))
    }
}

impl<T: Equivalence> BufferMut for [T] {
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
}

impl<T: Equivalence> BufferMut for Vec<T> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
}
