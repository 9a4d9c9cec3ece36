//! The predefined reduction operations of mpi.h and which datatypes each is defined on
//! (MPI 3.1 §5.9.2). Kestrel follows the standard's table where MPICH 4.0.2 departs from it:
//! `MPI_CHAR` is in no reduction, and the logical operations take no floating type
//! (tests/mpi/errors.c prints the table both libraries agree on).

use crate::abi;
use crate::datatype::{Datatype, Group};
use crate::error::ErrorClass;

/// A predefined operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
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
    Minloc,
    Maxloc,
}

/// Every predefined operation, in handle order.
pub const ALL: [Op; 12] = [
    Op::Max,
    Op::Min,
    Op::Sum,
    Op::Prod,
    Op::Land,
    Op::Band,
    Op::Lor,
    Op::Bor,
    Op::Lxor,
    Op::Bxor,
    Op::Minloc,
    Op::Maxloc,
];

impl Op {
    /// The handle mpi.h gives this operation.
    pub const fn handle(self) -> abi::MPI_Op {
        match self {
            Op::Max => abi::MPI_MAX,
            Op::Min => abi::MPI_MIN,
            Op::Sum => abi::MPI_SUM,
            Op::Prod => abi::MPI_PROD,
            Op::Land => abi::MPI_LAND,
            Op::Band => abi::MPI_BAND,
            Op::Lor => abi::MPI_LOR,
            Op::Bor => abi::MPI_BOR,
            Op::Lxor => abi::MPI_LXOR,
            Op::Bxor => abi::MPI_BXOR,
            Op::Minloc => abi::MPI_MINLOC,
            Op::Maxloc => abi::MPI_MAXLOC,
        }
    }

    /// Decodes a handle from C: `Err(Op)` for `MPI_OP_NULL` and anything else that is not a
    /// predefined operation.
    pub fn from_handle(handle: abi::MPI_Op) -> Result<Self, ErrorClass> {
        ALL.iter()
            .copied()
            .find(|o| o.handle() == handle)
            .ok_or(ErrorClass::Op)
    }

    /// Whether MPI defines this operation on `datatype`.
    pub const fn accepts(self, datatype: Datatype) -> bool {
        let group = datatype.group();
        match self {
            Op::Max | Op::Min | Op::Sum | Op::Prod => {
                matches!(group, Group::CInteger | Group::Floating)
            }
            Op::Land | Op::Lor | Op::Lxor => matches!(group, Group::CInteger | Group::Logical),
            Op::Band | Op::Bor | Op::Bxor => matches!(group, Group::CInteger | Group::Byte),
            Op::Minloc | Op::Maxloc => matches!(group, Group::Pair),
        }
    }
}

/// Validates a reduction's operation and datatype handles, in the order MPI_Reduce and
/// MPI_Allreduce check them: the datatype (`Err(Type)`), the operation (`Err(Op)`), then the
/// pair (`Err(Op)`).
pub fn check(op: abi::MPI_Op, datatype: abi::MPI_Datatype) -> Result<(Op, Datatype), ErrorClass> {
    let datatype = Datatype::from_handle(datatype)?;
    let op = Op::from_handle(op)?;
    if op.accepts(datatype) {
        Ok((op, datatype))
    } else {
        Err(ErrorClass::Op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype;
    use std::string::String;
    use std::vec::Vec;

    /// The table tests/mpi/expected/errors.out holds (MPICH's answer where it follows the
    /// standard), as "OP accepts: TYPES" without the MPI_ prefixes.
    const TABLE: &str = include_str!("../../../tests/mpi/expected/errors.out");

    #[test]
    fn the_table_agrees_with_the_oracle() {
        let mut checked = 0;
        for line in TABLE.lines() {
            let Some(rest) = line.strip_prefix("[0] ") else {
                continue;
            };
            let Some((op_name, types)) = rest.split_once(" accepts:") else {
                continue;
            };
            let op = ALL
                .iter()
                .copied()
                .find(|o| op_name == op_debug_name(*o))
                .expect("a known op");
            let want: Vec<&str> = types.split_whitespace().collect();
            // The oracle leaves out MPI_CHAR and the logical operations on floating types.
            let got: Vec<String> = datatype::ALL
                .iter()
                .filter(|d| **d != Datatype::Char)
                .filter(|d| {
                    !(matches!(op, Op::Land | Op::Lor | Op::Lxor) && d.group() == Group::Floating)
                })
                .filter(|d| op.accepts(**d))
                .map(|d| String::from(&d.name()[4..]))
                .collect();
            assert_eq!(got, want, "{op_name}");
            checked += 1;
        }
        assert_eq!(checked, ALL.len());
    }

    fn op_debug_name(op: Op) -> &'static str {
        match op {
            Op::Max => "MPI_MAX",
            Op::Min => "MPI_MIN",
            Op::Sum => "MPI_SUM",
            Op::Prod => "MPI_PROD",
            Op::Land => "MPI_LAND",
            Op::Band => "MPI_BAND",
            Op::Lor => "MPI_LOR",
            Op::Bor => "MPI_BOR",
            Op::Lxor => "MPI_LXOR",
            Op::Bxor => "MPI_BXOR",
            Op::Minloc => "MPI_MINLOC",
            Op::Maxloc => "MPI_MAXLOC",
        }
    }

    #[test]
    fn where_kestrel_departs_from_mpich() {
        assert_eq!(check(abi::MPI_SUM, abi::MPI_CHAR), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_LXOR, abi::MPI_DOUBLE), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_LAND, abi::MPI_FLOAT), Err(ErrorClass::Op));
        // MPICH answers MPI_ERR_OP here; the datatype is the first thing wrong.
        assert_eq!(
            check(abi::MPI_SUM, abi::MPI_DATATYPE_NULL),
            Err(ErrorClass::Type)
        );
    }

    #[test]
    fn invalid_handles() {
        assert_eq!(check(abi::MPI_OP_NULL, abi::MPI_INT), Err(ErrorClass::Op));
        assert_eq!(check(0x580000ff, abi::MPI_INT), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_INT, abi::MPI_INT), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_BAND, abi::MPI_DOUBLE), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_MAXLOC, abi::MPI_INT), Err(ErrorClass::Op));
        assert_eq!(check(abi::MPI_SUM, abi::MPI_2INT), Err(ErrorClass::Op));
        assert_eq!(
            check(abi::MPI_MAXLOC, abi::MPI_2INT),
            Ok((Op::Maxloc, Datatype::TwoInt))
        );
    }
}
