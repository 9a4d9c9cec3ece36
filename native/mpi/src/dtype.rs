//! Datatypes and reduction operations: what MPI's predefined `MPI_Datatype`s and `MPI_Op`s
//! mean to the core. Buffers are bytes in the machine's own order (the C face passes its
//! buffers through unchanged); [`combine`] folds one buffer into another element by
//! element, in the order the caller chose (the collectives fix that order, ADR 0035).

use crate::Error;

/// A predefined datatype. The pair types are C's `struct { value; int index; }` with C's
/// padding: the index at the value's size rounded up to 4, the whole rounded up to the
/// value's alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Datatype {
    Byte = 1,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// MPI_FLOAT_INT.
    F32I32,
    /// MPI_DOUBLE_INT.
    F64I32,
    /// MPI_LONG_INT on a 64-bit `long`.
    I64I32,
    /// MPI_2INT.
    I32I32,
    /// MPI_SHORT_INT.
    I16I32,
}

const ALL_TYPES: [Datatype; 16] = [
    Datatype::Byte,
    Datatype::I8,
    Datatype::U8,
    Datatype::I16,
    Datatype::U16,
    Datatype::I32,
    Datatype::U32,
    Datatype::I64,
    Datatype::U64,
    Datatype::F32,
    Datatype::F64,
    Datatype::F32I32,
    Datatype::F64I32,
    Datatype::I64I32,
    Datatype::I32I32,
    Datatype::I16I32,
];

/// The kind of a datatype's value part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Byte,
    Signed,
    Unsigned,
    Float,
}

impl Datatype {
    /// Every datatype (for tests and for a C face's table).
    pub const ALL: [Datatype; 16] = ALL_TYPES;

    /// The datatype with number `raw` (`Datatype as u32`), or `Error::Type`.
    pub fn from_raw(raw: u32) -> Result<Datatype, Error> {
        ALL_TYPES
            .iter()
            .copied()
            .find(|d| *d as u32 == raw)
            .ok_or(Error::Type)
    }

    /// Bytes of the value part.
    pub const fn value_size(self) -> usize {
        use Datatype::*;
        match self {
            Byte | I8 | U8 => 1,
            I16 | U16 | I16I32 => 2,
            I32 | U32 | F32 | F32I32 | I32I32 => 4,
            I64 | U64 | F64 | F64I32 | I64I32 => 8,
        }
    }

    /// Whether this is a (value, index) pair type.
    pub const fn is_pair(self) -> bool {
        use Datatype::*;
        matches!(self, F32I32 | F64I32 | I64I32 | I32I32 | I16I32)
    }

    /// Offset of a pair's index.
    pub const fn index_offset(self) -> usize {
        self.value_size().div_ceil(4) * 4
    }

    /// Bytes of one element (C's `sizeof`).
    pub const fn size(self) -> usize {
        if self.is_pair() {
            let a = self.value_size();
            let a = if a < 4 { 4 } else { a };
            (self.index_offset() + 4).div_ceil(a) * a
        } else {
            self.value_size()
        }
    }

    /// The value part's kind.
    pub const fn kind(self) -> Kind {
        use Datatype::*;
        match self {
            Byte => Kind::Byte,
            U8 | U16 | U32 | U64 => Kind::Unsigned,
            F32 | F64 | F32I32 | F64I32 => Kind::Float,
            _ => Kind::Signed,
        }
    }

    /// Bytes of `count` elements: `Error::Count` for a negative count (MPI_ERR_COUNT).
    pub fn bytes(self, count: i64) -> Result<usize, Error> {
        usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(self.size()))
            .ok_or(Error::Count)
    }
}

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    Sum = 1,
    Prod,
    Max,
    Min,
    MaxLoc,
    MinLoc,
    Land,
    Lor,
    Lxor,
    Band,
    Bor,
    Bxor,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 12] = [
        Op::Sum,
        Op::Prod,
        Op::Max,
        Op::Min,
        Op::MaxLoc,
        Op::MinLoc,
        Op::Land,
        Op::Lor,
        Op::Lxor,
        Op::Band,
        Op::Bor,
        Op::Bxor,
    ];

    /// The operation with number `raw`, or `Error::Op`.
    pub fn from_raw(raw: u32) -> Result<Op, Error> {
        Op::ALL
            .iter()
            .copied()
            .find(|o| *o as u32 == raw)
            .ok_or(Error::Op)
    }

    /// Whether MPI defines `self` on `dt` (MPI 4.0 §6.9.2: MAXLOC/MINLOC on pairs only;
    /// arithmetic and MAX/MIN on integers and floats; logical on integers; bitwise on
    /// integers and bytes).
    pub fn valid_on(self, dt: Datatype) -> bool {
        let k = dt.kind();
        let int = matches!(k, Kind::Signed | Kind::Unsigned);
        match self {
            Op::MaxLoc | Op::MinLoc => dt.is_pair(),
            _ if dt.is_pair() => false,
            Op::Sum | Op::Prod | Op::Max | Op::Min => int || k == Kind::Float,
            Op::Land | Op::Lor | Op::Lxor => int,
            Op::Band | Op::Bor | Op::Bxor => int || k == Kind::Byte,
        }
    }
}

macro_rules! fold_int {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let x = <$t>::from_ne_bytes($a.try_into().expect("element width"));
        let y = <$t>::from_ne_bytes($b.try_into().expect("element width"));
        let r: $t = match $op {
            Op::Sum => x.wrapping_add(y),
            Op::Prod => x.wrapping_mul(y),
            Op::Max => x.max(y),
            Op::Min => x.min(y),
            Op::Land => <$t>::from((x != 0) && (y != 0)),
            Op::Lor => <$t>::from((x != 0) || (y != 0)),
            Op::Lxor => <$t>::from((x != 0) != (y != 0)),
            Op::Band => x & y,
            Op::Bor => x | y,
            Op::Bxor => x ^ y,
            Op::MaxLoc | Op::MinLoc => x,
        };
        $a.copy_from_slice(&r.to_ne_bytes());
    }};
}

macro_rules! fold_float {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let x = <$t>::from_ne_bytes($a.try_into().expect("element width"));
        let y = <$t>::from_ne_bytes($b.try_into().expect("element width"));
        let r: $t = match $op {
            Op::Sum => x + y,
            Op::Prod => x * y,
            // C's fmax/fmin would drop a NaN; MPI leaves it open. Here: y if x < y.
            Op::Max => {
                if x < y {
                    y
                } else {
                    x
                }
            }
            Op::Min => {
                if y < x {
                    y
                } else {
                    x
                }
            }
            _ => x,
        };
        $a.copy_from_slice(&r.to_ne_bytes());
    }};
}

/// Compares two pair values: `Less` if `b`'s value is smaller (as the type orders).
fn value_cmp(dt: Datatype, a: &[u8], b: &[u8]) -> core::cmp::Ordering {
    use core::cmp::Ordering::Equal;
    macro_rules! cmp {
        ($t:ty) => {{
            let x = <$t>::from_ne_bytes(a.try_into().expect("value width"));
            let y = <$t>::from_ne_bytes(b.try_into().expect("value width"));
            x.partial_cmp(&y).unwrap_or(Equal)
        }};
    }
    match dt {
        Datatype::F32I32 => cmp!(f32),
        Datatype::F64I32 => cmp!(f64),
        Datatype::I64I32 => cmp!(i64),
        Datatype::I32I32 => cmp!(i32),
        Datatype::I16I32 => cmp!(i16),
        _ => Equal,
    }
}

/// Folds `b` into `acc` (`acc = acc op b`, element by element); both hold whole
/// elements of `dt`. `Error::Op` if `op` is not defined on `dt`, `Error::Count` if the
/// lengths differ or are not whole elements.
pub fn combine(op: Op, dt: Datatype, acc: &mut [u8], b: &[u8]) -> Result<(), Error> {
    if !op.valid_on(dt) {
        return Err(Error::Op);
    }
    let n = dt.size();
    if acc.len() != b.len() || !acc.len().is_multiple_of(n) {
        return Err(Error::Count);
    }
    for (a, b) in acc.chunks_exact_mut(n).zip(b.chunks_exact(n)) {
        if dt.is_pair() {
            let v = dt.value_size();
            let i = dt.index_offset();
            let ia = i32::from_ne_bytes(a[i..i + 4].try_into().expect("index"));
            let ib = i32::from_ne_bytes(b[i..i + 4].try_into().expect("index"));
            let ord = value_cmp(dt, &a[..v], &b[..v]);
            use core::cmp::Ordering::*;
            // MPI 4.0 §6.9.4: the better value; on a tie, the smaller index.
            let take_b = match (op, ord) {
                (Op::MaxLoc, Less) | (Op::MinLoc, Greater) => true,
                (_, Equal) => ib < ia,
                _ => false,
            };
            if take_b {
                a.copy_from_slice(b);
            }
            continue;
        }
        match dt {
            Datatype::Byte | Datatype::U8 => fold_int!(u8, op, a, b),
            Datatype::I8 => fold_int!(i8, op, a, b),
            Datatype::I16 => fold_int!(i16, op, a, b),
            Datatype::U16 => fold_int!(u16, op, a, b),
            Datatype::I32 => fold_int!(i32, op, a, b),
            Datatype::U32 => fold_int!(u32, op, a, b),
            Datatype::I64 => fold_int!(i64, op, a, b),
            Datatype::U64 => fold_int!(u64, op, a, b),
            Datatype::F32 => fold_float!(f32, op, a, b),
            Datatype::F64 => fold_float!(f64, op, a, b),
            _ => return Err(Error::Type),
        }
    }
    Ok(())
}

/// How an integer reduction runs on the collective network's unsigned ALU (ADD, MAX, OR,
/// AND, XOR over 64-bit big-endian operands): the operand each element becomes, the
/// opcode, and the way back. `None`: the operation needs the software tree (PROD, floats,
/// pairs).
#[derive(Clone, Copy, Debug)]
pub struct AluPlan {
    pub opcode: u32,
    dt: Datatype,
    op: Op,
}

impl AluPlan {
    pub fn new(op: Op, dt: Datatype) -> Option<AluPlan> {
        use kestrel_bgp::coll::{OP_ADD, OP_AND, OP_MAX, OP_OR, OP_XOR};
        if !op.valid_on(dt) || !matches!(dt.kind(), Kind::Signed | Kind::Unsigned | Kind::Byte) {
            return None;
        }
        let opcode = match op {
            Op::Sum => OP_ADD,
            Op::Max | Op::Min => OP_MAX,
            Op::Land | Op::Band => OP_AND,
            Op::Lor | Op::Bor => OP_OR,
            Op::Lxor | Op::Bxor => OP_XOR,
            _ => return None,
        };
        Some(AluPlan { opcode, dt, op })
    }

    fn read(&self, e: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = e.len();
        if cfg!(target_endian = "big") {
            b[8 - n..].copy_from_slice(e);
        } else {
            b[..n].copy_from_slice(e);
        }
        let v = u64::from_ne_bytes(b);
        let bits = 8 * n as u32;
        if self.dt.kind() == Kind::Signed && bits < 64 {
            // Sign-extend.
            (((v << (64 - bits)) as i64) >> (64 - bits)) as u64
        } else {
            v
        }
    }

    /// The 64-bit ALU operand of element `e`.
    pub fn encode(&self, e: &[u8]) -> u64 {
        let v = self.read(e);
        let signed = self.dt.kind() == Kind::Signed;
        match self.op {
            Op::Land | Op::Lor | Op::Lxor => u64::from(v != 0),
            // Unsigned MAX orders signed values once the sign bit is flipped; MIN is the
            // MAX of the complement.
            Op::Max if signed => v ^ (1 << 63),
            Op::Min if signed => !(v ^ (1 << 63)),
            Op::Min => !v,
            _ => v,
        }
    }

    /// Writes the element the ALU's result `r` stands for into `e`.
    pub fn decode(&self, r: u64, e: &mut [u8]) {
        let signed = self.dt.kind() == Kind::Signed;
        let v = match self.op {
            Op::Max if signed => r ^ (1 << 63),
            Op::Min if signed => !r ^ (1 << 63),
            Op::Min => !r,
            _ => r,
        };
        let b = v.to_ne_bytes();
        let n = e.len();
        if cfg!(target_endian = "big") {
            e.copy_from_slice(&b[8 - n..]);
        } else {
            e.copy_from_slice(&b[..n]);
        }
    }
}
