//! The error classes of mpi.h, `MPI_Error_class` and `MPI_Error_string`. Kestrel's error codes
//! are their own classes (mpi.h), so a code is valid exactly when it is `MPI_SUCCESS` or a
//! class.

use crate::abi;
use core::ffi::c_int;

/// An MPI error class (every one mpi.h defines). `MPI_SUCCESS` is not an error, so not here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ErrorClass {
    /// Invalid buffer pointer.
    Buffer = abi::MPI_ERR_BUFFER,
    /// Invalid count argument.
    Count = abi::MPI_ERR_COUNT,
    /// Invalid datatype argument.
    Type = abi::MPI_ERR_TYPE,
    /// Invalid tag argument.
    Tag = abi::MPI_ERR_TAG,
    /// Invalid communicator.
    Comm = abi::MPI_ERR_COMM,
    /// Invalid rank.
    Rank = abi::MPI_ERR_RANK,
    /// Invalid root.
    Root = abi::MPI_ERR_ROOT,
    /// Invalid group.
    Group = abi::MPI_ERR_GROUP,
    /// Invalid operation.
    Op = abi::MPI_ERR_OP,
    /// Invalid topology.
    Topology = abi::MPI_ERR_TOPOLOGY,
    /// Invalid dimension argument.
    Dims = abi::MPI_ERR_DIMS,
    /// Invalid argument of some other kind.
    Arg = abi::MPI_ERR_ARG,
    /// Unknown error.
    Unknown = abi::MPI_ERR_UNKNOWN,
    /// Message truncated on receive.
    Truncate = abi::MPI_ERR_TRUNCATE,
    /// Known error not in this list.
    Other = abi::MPI_ERR_OTHER,
    /// Internal MPI (implementation) error.
    Intern = abi::MPI_ERR_INTERN,
    /// Error code is in status.
    InStatus = abi::MPI_ERR_IN_STATUS,
    /// Pending request.
    Pending = abi::MPI_ERR_PENDING,
    /// Invalid request (handle).
    Request = abi::MPI_ERR_REQUEST,
}

/// Every class, in code order.
pub const ALL: [ErrorClass; 19] = [
    ErrorClass::Buffer,
    ErrorClass::Count,
    ErrorClass::Type,
    ErrorClass::Tag,
    ErrorClass::Comm,
    ErrorClass::Rank,
    ErrorClass::Root,
    ErrorClass::Group,
    ErrorClass::Op,
    ErrorClass::Topology,
    ErrorClass::Dims,
    ErrorClass::Arg,
    ErrorClass::Unknown,
    ErrorClass::Truncate,
    ErrorClass::Other,
    ErrorClass::Intern,
    ErrorClass::InStatus,
    ErrorClass::Pending,
    ErrorClass::Request,
];

impl ErrorClass {
    /// The C error code (and class) of this error.
    pub const fn code(self) -> c_int {
        self as c_int
    }

    /// The class of a non-success code, or None when the code is not one Kestrel returns.
    pub fn from_code(code: c_int) -> Option<Self> {
        ALL.iter().copied().find(|c| c.code() == code)
    }

    /// What `MPI_Error_string` says about this class.
    pub const fn message(self) -> &'static str {
        match self {
            ErrorClass::Buffer => "MPI_ERR_BUFFER: invalid buffer pointer",
            ErrorClass::Count => "MPI_ERR_COUNT: invalid count argument (negative?)",
            ErrorClass::Type => "MPI_ERR_TYPE: invalid datatype (not a predefined datatype?)",
            ErrorClass::Tag => {
                "MPI_ERR_TAG: invalid tag (negative, and not MPI_ANY_TAG on a receive?)"
            }
            ErrorClass::Comm => "MPI_ERR_COMM: invalid communicator (MPI_COMM_NULL or freed?)",
            ErrorClass::Rank => "MPI_ERR_RANK: invalid rank (not in the communicator?)",
            ErrorClass::Root => "MPI_ERR_ROOT: invalid root (not a rank of the communicator?)",
            ErrorClass::Group => "MPI_ERR_GROUP: invalid group",
            ErrorClass::Op => "MPI_ERR_OP: invalid operation, or one not defined on this datatype",
            ErrorClass::Topology => "MPI_ERR_TOPOLOGY: invalid topology",
            ErrorClass::Dims => "MPI_ERR_DIMS: invalid dimension argument",
            ErrorClass::Arg => "MPI_ERR_ARG: invalid argument",
            ErrorClass::Unknown => "MPI_ERR_UNKNOWN: unknown error",
            ErrorClass::Truncate => {
                "MPI_ERR_TRUNCATE: message truncated (the receive buffer is too small)"
            }
            ErrorClass::Other => "MPI_ERR_OTHER: other error",
            ErrorClass::Intern => "MPI_ERR_INTERN: internal error in Kestrel's MPI library",
            ErrorClass::InStatus => "MPI_ERR_IN_STATUS: error code is in the status array",
            ErrorClass::Pending => "MPI_ERR_PENDING: pending request",
            ErrorClass::Request => "MPI_ERR_REQUEST: invalid request",
        }
    }
}

const SUCCESS_MESSAGE: &str = "MPI_SUCCESS: no error";

/// `MPI_Error_class`: the class of a code (a code is its own class), or `Err(Arg)` for a code
/// Kestrel never returns.
pub fn error_class(code: c_int) -> Result<c_int, ErrorClass> {
    if code == abi::MPI_SUCCESS {
        return Ok(abi::MPI_SUCCESS);
    }
    ErrorClass::from_code(code)
        .map(ErrorClass::code)
        .ok_or(ErrorClass::Arg)
}

/// `MPI_Error_string`: writes the code's message and a NUL into `out` (which must hold
/// `MPI_MAX_ERROR_STRING` bytes, as the standard requires of the caller) and returns its length
/// without the NUL; `Err(Arg)` for an unknown code or a buffer too short.
pub fn error_string(code: c_int, out: &mut [u8]) -> Result<usize, ErrorClass> {
    let text = if code == abi::MPI_SUCCESS {
        SUCCESS_MESSAGE
    } else {
        ErrorClass::from_code(code)
            .ok_or(ErrorClass::Arg)?
            .message()
    };
    let bytes = text.as_bytes();
    let slot = out.get_mut(..=bytes.len()).ok_or(ErrorClass::Arg)?;
    slot[..bytes.len()].copy_from_slice(bytes);
    slot[bytes.len()] = 0;
    Ok(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_its_own_class() {
        assert_eq!(error_class(abi::MPI_SUCCESS), Ok(abi::MPI_SUCCESS));
        for class in ALL {
            assert_eq!(error_class(class.code()), Ok(class.code()));
        }
        assert_eq!(ALL.len() as c_int, abi::MPI_ERR_LASTCODE);
        assert_eq!(error_class(abi::MPI_ERR_LASTCODE + 1), Err(ErrorClass::Arg));
        assert_eq!(error_class(-1), Err(ErrorClass::Arg));
    }

    #[test]
    fn every_code_has_a_string_that_fits() {
        let mut buf = [0xffu8; abi::MPI_MAX_ERROR_STRING as usize];
        for code in core::iter::once(abi::MPI_SUCCESS).chain(ALL.iter().map(|c| c.code())) {
            let len = error_string(code, &mut buf).expect("a known code");
            assert!(len > 0 && len < buf.len());
            assert_eq!(buf[len], 0);
            assert!(buf[..len].iter().all(|&b| b.is_ascii() && b != 0));
        }
        assert_eq!(error_string(12345, &mut buf), Err(ErrorClass::Arg));
        assert_eq!(
            error_string(abi::MPI_ERR_TRUNCATE, &mut [0u8; 4]),
            Err(ErrorClass::Arg)
        );
    }

    #[test]
    fn messages_name_their_class() {
        let mut buf = [0u8; abi::MPI_MAX_ERROR_STRING as usize];
        let len = error_string(abi::MPI_ERR_TRUNCATE, &mut buf).expect("known");
        assert!(buf[..len].starts_with(b"MPI_ERR_TRUNCATE"));
    }
}
