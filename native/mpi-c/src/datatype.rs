//! The predefined datatypes of mpi.h: decoding a handle, the C type behind each, its size
//! (`MPI_Type_size`: the data bytes) and its extent (the stride between elements in a buffer;
//! they differ only for the value-index pairs, whose struct has padding).

use crate::abi;
use crate::error::ErrorClass;
use core::ffi::{c_int, c_long, c_short};
use core::mem::{offset_of, size_of};

/// A predefined datatype (every one mpi.h defines; `MPI_LONG_LONG` is `MPI_LONG_LONG_INT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    Char,
    SignedChar,
    UnsignedChar,
    Byte,
    Short,
    UnsignedShort,
    Int,
    Unsigned,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    LongDouble,
    CBool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    TwoInt,
    FloatInt,
    DoubleInt,
    LongInt,
    ShortInt,
    LongDoubleInt,
}

/// What the reductions may do with a datatype (MPI 3.1 §5.9.2's groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// `MPI_CHAR`: characters, in no reduction.
    Character,
    /// C integer: arithmetic, logical and bitwise operations.
    CInteger,
    /// Floating point: `MPI_MAX`, `MPI_MIN`, `MPI_SUM`, `MPI_PROD`.
    Floating,
    /// Logical (`MPI_C_BOOL`): `MPI_LAND`, `MPI_LOR`, `MPI_LXOR`.
    Logical,
    /// Byte: the bitwise operations.
    Byte,
    /// Value-index pairs: `MPI_MAXLOC`, `MPI_MINLOC`.
    Pair,
}

/// The C layout of `struct { V value; int index; }`.
#[repr(C)]
struct Pair<V> {
    value: V,
    index: c_int,
}

/// The C layout of long double (and its pair), which only C knows (src/ldouble.c): size,
/// alignment, pair size, pair index offset.
fn ldouble_layout() -> [usize; 4] {
    extern "C" {
        static kestrel_mpi_ldouble_layout: [c_int; 4];
    }
    // SAFETY: a constant array defined in src/ldouble.c (compiled and linked by build.rs), never
    // written; reading an immutable C static is sound.
    let raw = unsafe { kestrel_mpi_ldouble_layout };
    raw.map(|v| usize::try_from(v).expect("C sizes are positive"))
}

/// Every predefined datatype, in handle order.
pub const ALL: [Datatype; 30] = [
    Datatype::Char,
    Datatype::SignedChar,
    Datatype::UnsignedChar,
    Datatype::Byte,
    Datatype::Short,
    Datatype::UnsignedShort,
    Datatype::Int,
    Datatype::Unsigned,
    Datatype::Long,
    Datatype::UnsignedLong,
    Datatype::LongLong,
    Datatype::UnsignedLongLong,
    Datatype::Float,
    Datatype::Double,
    Datatype::LongDouble,
    Datatype::CBool,
    Datatype::Int8,
    Datatype::Int16,
    Datatype::Int32,
    Datatype::Int64,
    Datatype::Uint8,
    Datatype::Uint16,
    Datatype::Uint32,
    Datatype::Uint64,
    Datatype::TwoInt,
    Datatype::FloatInt,
    Datatype::DoubleInt,
    Datatype::LongInt,
    Datatype::ShortInt,
    Datatype::LongDoubleInt,
];

impl Datatype {
    /// The handle mpi.h gives this datatype.
    pub const fn handle(self) -> abi::MPI_Datatype {
        match self {
            Datatype::Char => abi::MPI_CHAR,
            Datatype::SignedChar => abi::MPI_SIGNED_CHAR,
            Datatype::UnsignedChar => abi::MPI_UNSIGNED_CHAR,
            Datatype::Byte => abi::MPI_BYTE,
            Datatype::Short => abi::MPI_SHORT,
            Datatype::UnsignedShort => abi::MPI_UNSIGNED_SHORT,
            Datatype::Int => abi::MPI_INT,
            Datatype::Unsigned => abi::MPI_UNSIGNED,
            Datatype::Long => abi::MPI_LONG,
            Datatype::UnsignedLong => abi::MPI_UNSIGNED_LONG,
            Datatype::LongLong => abi::MPI_LONG_LONG_INT,
            Datatype::UnsignedLongLong => abi::MPI_UNSIGNED_LONG_LONG,
            Datatype::Float => abi::MPI_FLOAT,
            Datatype::Double => abi::MPI_DOUBLE,
            Datatype::LongDouble => abi::MPI_LONG_DOUBLE,
            Datatype::CBool => abi::MPI_C_BOOL,
            Datatype::Int8 => abi::MPI_INT8_T,
            Datatype::Int16 => abi::MPI_INT16_T,
            Datatype::Int32 => abi::MPI_INT32_T,
            Datatype::Int64 => abi::MPI_INT64_T,
            Datatype::Uint8 => abi::MPI_UINT8_T,
            Datatype::Uint16 => abi::MPI_UINT16_T,
            Datatype::Uint32 => abi::MPI_UINT32_T,
            Datatype::Uint64 => abi::MPI_UINT64_T,
            Datatype::TwoInt => abi::MPI_2INT,
            Datatype::FloatInt => abi::MPI_FLOAT_INT,
            Datatype::DoubleInt => abi::MPI_DOUBLE_INT,
            Datatype::LongInt => abi::MPI_LONG_INT,
            Datatype::ShortInt => abi::MPI_SHORT_INT,
            Datatype::LongDoubleInt => abi::MPI_LONG_DOUBLE_INT,
        }
    }

    /// Decodes a handle from C: `Err(Type)` for `MPI_DATATYPE_NULL` and anything that is not a
    /// predefined datatype.
    pub fn from_handle(handle: abi::MPI_Datatype) -> Result<Self, ErrorClass> {
        ALL.iter()
            .copied()
            .find(|d| d.handle() == handle)
            .ok_or(ErrorClass::Type)
    }

    /// The reduction group.
    pub const fn group(self) -> Group {
        match self {
            Datatype::Char => Group::Character,
            Datatype::Float | Datatype::Double | Datatype::LongDouble => Group::Floating,
            Datatype::CBool => Group::Logical,
            Datatype::Byte => Group::Byte,
            Datatype::TwoInt
            | Datatype::FloatInt
            | Datatype::DoubleInt
            | Datatype::LongInt
            | Datatype::ShortInt
            | Datatype::LongDoubleInt => Group::Pair,
            _ => Group::CInteger,
        }
    }

    /// `MPI_Type_size`: bytes of data in one element (a pair's value and index, without the
    /// padding of its struct).
    pub fn size(self) -> usize {
        match self {
            Datatype::Char
            | Datatype::SignedChar
            | Datatype::UnsignedChar
            | Datatype::Byte
            | Datatype::CBool
            | Datatype::Int8
            | Datatype::Uint8 => 1,
            Datatype::Short | Datatype::UnsignedShort | Datatype::Int16 | Datatype::Uint16 => 2,
            Datatype::Int
            | Datatype::Unsigned
            | Datatype::Int32
            | Datatype::Uint32
            | Datatype::Float => 4,
            Datatype::Long | Datatype::UnsignedLong => size_of::<c_long>(),
            Datatype::LongLong
            | Datatype::UnsignedLongLong
            | Datatype::Int64
            | Datatype::Uint64
            | Datatype::Double => 8,
            Datatype::LongDouble => ldouble_layout()[0],
            Datatype::TwoInt => 2 * size_of::<c_int>(),
            Datatype::FloatInt => size_of::<f32>() + size_of::<c_int>(),
            Datatype::DoubleInt => size_of::<f64>() + size_of::<c_int>(),
            Datatype::LongInt => size_of::<c_long>() + size_of::<c_int>(),
            Datatype::ShortInt => size_of::<c_short>() + size_of::<c_int>(),
            Datatype::LongDoubleInt => ldouble_layout()[0] + size_of::<c_int>(),
        }
    }

    /// Bytes from one element to the next in a buffer (the C sizeof of the element type).
    pub fn extent(self) -> usize {
        match self {
            Datatype::TwoInt => size_of::<Pair<c_int>>(),
            Datatype::FloatInt => size_of::<Pair<f32>>(),
            Datatype::DoubleInt => size_of::<Pair<f64>>(),
            Datatype::LongInt => size_of::<Pair<c_long>>(),
            Datatype::ShortInt => size_of::<Pair<c_short>>(),
            Datatype::LongDoubleInt => ldouble_layout()[2],
            _ => self.size(),
        }
    }

    /// For a pair type: the offset of the index in its struct.
    pub fn index_offset(self) -> Option<usize> {
        match self {
            Datatype::TwoInt => Some(offset_of!(Pair<c_int>, index)),
            Datatype::FloatInt => Some(offset_of!(Pair<f32>, index)),
            Datatype::DoubleInt => Some(offset_of!(Pair<f64>, index)),
            Datatype::LongInt => Some(offset_of!(Pair<c_long>, index)),
            Datatype::ShortInt => Some(offset_of!(Pair<c_short>, index)),
            Datatype::LongDoubleInt => Some(ldouble_layout()[3]),
            _ => None,
        }
    }

    /// The name mpi.h gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Datatype::Char => "MPI_CHAR",
            Datatype::SignedChar => "MPI_SIGNED_CHAR",
            Datatype::UnsignedChar => "MPI_UNSIGNED_CHAR",
            Datatype::Byte => "MPI_BYTE",
            Datatype::Short => "MPI_SHORT",
            Datatype::UnsignedShort => "MPI_UNSIGNED_SHORT",
            Datatype::Int => "MPI_INT",
            Datatype::Unsigned => "MPI_UNSIGNED",
            Datatype::Long => "MPI_LONG",
            Datatype::UnsignedLong => "MPI_UNSIGNED_LONG",
            Datatype::LongLong => "MPI_LONG_LONG",
            Datatype::UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            Datatype::Float => "MPI_FLOAT",
            Datatype::Double => "MPI_DOUBLE",
            Datatype::LongDouble => "MPI_LONG_DOUBLE",
            Datatype::CBool => "MPI_C_BOOL",
            Datatype::Int8 => "MPI_INT8_T",
            Datatype::Int16 => "MPI_INT16_T",
            Datatype::Int32 => "MPI_INT32_T",
            Datatype::Int64 => "MPI_INT64_T",
            Datatype::Uint8 => "MPI_UINT8_T",
            Datatype::Uint16 => "MPI_UINT16_T",
            Datatype::Uint32 => "MPI_UINT32_T",
            Datatype::Uint64 => "MPI_UINT64_T",
            Datatype::TwoInt => "MPI_2INT",
            Datatype::FloatInt => "MPI_FLOAT_INT",
            Datatype::DoubleInt => "MPI_DOUBLE_INT",
            Datatype::LongInt => "MPI_LONG_INT",
            Datatype::ShortInt => "MPI_SHORT_INT",
            Datatype::LongDoubleInt => "MPI_LONG_DOUBLE_INT",
        }
    }
}

/// `MPI_Type_size` on a handle.
pub fn type_size(handle: abi::MPI_Datatype) -> Result<c_int, ErrorClass> {
    let size = Datatype::from_handle(handle)?.size();
    c_int::try_from(size).map_err(|_| ErrorClass::Intern)
}

/// Bytes of `count` elements in a buffer: `Err(Count)` for a negative count, `Err(Buffer)` when
/// the span does not fit in the address space.
pub fn buffer_len(datatype: Datatype, count: c_int) -> Result<usize, ErrorClass> {
    let count = usize::try_from(count).map_err(|_| ErrorClass::Count)?;
    count
        .checked_mul(datatype.extent())
        .ok_or(ErrorClass::Buffer)
}

/// `MPI_Get_count`: elements in `bytes` received bytes, or `MPI_UNDEFINED` when they are not a
/// whole number of elements.
pub fn get_count(datatype: Datatype, bytes: usize) -> c_int {
    let size = datatype.size();
    if size == 0 || !bytes.is_multiple_of(size) {
        return abi::MPI_UNDEFINED;
    }
    c_int::try_from(bytes / size).unwrap_or(abi::MPI_UNDEFINED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_are_distinct() {
        for (i, d) in ALL.iter().enumerate() {
            assert_eq!(Datatype::from_handle(d.handle()), Ok(*d));
            assert!(
                ALL[..i].iter().all(|e| e.handle() != d.handle()),
                "{} twice",
                d.name()
            );
        }
        assert_eq!(
            Datatype::from_handle(abi::MPI_LONG_LONG),
            Ok(Datatype::LongLong)
        );
    }

    #[test]
    fn invalid_handles_are_type_errors() {
        for h in [
            abi::MPI_DATATYPE_NULL,
            0,
            -1,
            abi::MPI_INT + 0x100,
            0x4c0000ff,
            abi::MPI_COMM_WORLD,
            abi::MPI_SUM,
        ] {
            assert_eq!(Datatype::from_handle(h), Err(ErrorClass::Type), "{h:#x}");
        }
        assert_eq!(type_size(abi::MPI_DATATYPE_NULL), Err(ErrorClass::Type));
    }

    #[test]
    fn pair_sizes_leave_out_padding() {
        assert_eq!(Datatype::DoubleInt.size(), 12);
        assert_eq!(Datatype::DoubleInt.extent(), 16);
        assert_eq!(Datatype::ShortInt.size(), 6);
        assert_eq!(Datatype::ShortInt.extent(), 8);
        assert_eq!(Datatype::ShortInt.index_offset(), Some(4));
        assert_eq!(Datatype::Int.index_offset(), None);
    }

    #[test]
    fn counts() {
        assert_eq!(buffer_len(Datatype::Int, 3), Ok(12));
        assert_eq!(buffer_len(Datatype::Int, -1), Err(ErrorClass::Count));
        assert_eq!(buffer_len(Datatype::DoubleInt, 2), Ok(32));
        assert_eq!(get_count(Datatype::Int, 5), abi::MPI_UNDEFINED);
        assert_eq!(get_count(Datatype::Int, 0), 0);
        assert_eq!(get_count(Datatype::DoubleInt, 24), 2);
    }
}
