//! The `extern "C"` MPI functions that need no MPI core: `MPI_Error_class`,
//! `MPI_Error_string`, `MPI_Get_version`, `MPI_Type_size`, `MPI_Get_count`. Each validates its
//! arguments (null pointers are `MPI_ERR_ARG`), then writes its results.
//!
//! An error goes to `MPI_COMM_WORLD`'s error handler (these calls name no communicator): in
//! the library (feature `target`, `cface::world_error`) that ends the job under the default
//! `MPI_ERRORS_ARE_FATAL` and returns the class under `MPI_ERRORS_RETURN`; without the feature
//! (host tests) the class is returned.

use crate::abi::{MPI_Datatype, MPI_Status, MPI_MAX_ERROR_STRING, MPI_SUCCESS};
use crate::datatype::{self, Datatype};
use crate::error::{self, ErrorClass};
use crate::{abi, env};
use core::ffi::{c_char, c_int};

fn code(call: &'static str, result: Result<(), ErrorClass>) -> c_int {
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(class) => error(call, class),
    }
}

#[cfg(feature = "target")]
fn error(call: &'static str, class: ErrorClass) -> c_int {
    crate::cface::world_error(call, class)
}

#[cfg(not(feature = "target"))]
fn error(_call: &'static str, class: ErrorClass) -> c_int {
    class.code()
}

/// `MPI_Error_class`.
///
/// # Safety
/// `errorclass` is null or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    code(
        "MPI_Error_class",
        (|| {
            let class = error::error_class(errorcode)?;
            // SAFETY: the caller passes null or a writable int; null is refused by as_mut.
            let out = unsafe { errorclass.as_mut() }.ok_or(ErrorClass::Arg)?;
            *out = class;
            Ok(())
        })(),
    )
}

/// `MPI_Error_string`: `string` must have room for `MPI_MAX_ERROR_STRING` characters.
///
/// # Safety
/// `string` is null or points to `MPI_MAX_ERROR_STRING` writable bytes; `resultlen` is null or
/// points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    code(
        "MPI_Error_string",
        (|| {
            if string.is_null() {
                return Err(ErrorClass::Arg);
            }
            // SAFETY: the caller passes null (refused) or a writable int.
            let len_out = unsafe { resultlen.as_mut() }.ok_or(ErrorClass::Arg)?;
            // SAFETY: not null (checked above); MPI requires MPI_MAX_ERROR_STRING bytes there, and
            // nothing else refers to them during the call.
            let buf = unsafe {
                core::slice::from_raw_parts_mut(string.cast::<u8>(), MPI_MAX_ERROR_STRING as usize)
            };
            let len = error::error_string(errorcode, buf)?;
            *len_out = c_int::try_from(len).map_err(|_| ErrorClass::Intern)?;
            Ok(())
        })(),
    )
}

/// `MPI_Get_version`.
///
/// # Safety
/// Both pointers are null or point to writable `int`s.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: the caller passes null (refused) or writable ints.
    let (Some(v), Some(s)) = (unsafe { version.as_mut() }, unsafe { subversion.as_mut() }) else {
        return error("MPI_Get_version", ErrorClass::Arg);
    };
    (*v, *s) = env::version();
    MPI_SUCCESS
}

/// `MPI_Type_size`.
///
/// # Safety
/// `size` is null or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    code(
        "MPI_Type_size",
        (|| {
            let bytes = datatype::type_size(datatype)?;
            // SAFETY: the caller passes null (refused) or a writable int.
            *unsafe { size.as_mut() }.ok_or(ErrorClass::Arg)? = bytes;
            Ok(())
        })(),
    )
}

/// `MPI_Get_count`: elements received, from the status's byte count; `MPI_UNDEFINED` when the
/// bytes are not a whole number of elements.
///
/// # Safety
/// `status` is null or points to a readable `MPI_Status` (not `MPI_STATUS_IGNORE`, which is
/// refused); `count` is null or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    code(
        "MPI_Get_count",
        (|| {
            let datatype = Datatype::from_handle(datatype)?;
            if status.cast_mut() == abi::MPI_STATUS_IGNORE {
                return Err(ErrorClass::Arg);
            }
            // SAFETY: the caller passes null (refused), MPI_STATUS_IGNORE (refused above) or a
            // readable MPI_Status.
            let status = unsafe { status.as_ref() }.ok_or(ErrorClass::Arg)?;
            // SAFETY: the caller passes null (refused) or a writable int.
            let out = unsafe { count.as_mut() }.ok_or(ErrorClass::Arg)?;
            let bytes = usize::try_from(status.kestrel_count).map_err(|_| ErrorClass::Arg)?;
            *out = datatype::get_count(datatype, bytes);
            Ok(())
        })(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr;

    #[test]
    fn error_class_and_string() {
        let mut class = -1;
        // SAFETY: a valid int.
        let rc = unsafe { MPI_Error_class(abi::MPI_ERR_TRUNCATE, &mut class) };
        assert_eq!((rc, class), (MPI_SUCCESS, abi::MPI_ERR_TRUNCATE));
        // SAFETY: null is allowed and refused.
        let rc = unsafe { MPI_Error_class(abi::MPI_ERR_RANK, ptr::null_mut()) };
        assert_eq!(rc, abi::MPI_ERR_ARG);
        // SAFETY: a valid int.
        let rc = unsafe { MPI_Error_class(9999, &mut class) };
        assert_eq!(rc, abi::MPI_ERR_ARG);

        let mut buf = [0 as c_char; MPI_MAX_ERROR_STRING as usize];
        let mut len = -1;
        // SAFETY: a buffer of MPI_MAX_ERROR_STRING bytes and a valid int.
        let rc = unsafe { MPI_Error_string(abi::MPI_ERR_COUNT, buf.as_mut_ptr(), &mut len) };
        assert_eq!(rc, MPI_SUCCESS);
        let text: std::vec::Vec<u8> = buf[..len as usize].iter().map(|&c| c as u8).collect();
        assert!(text.starts_with(b"MPI_ERR_COUNT"));
        assert_eq!(buf[len as usize], 0);
        // SAFETY: null is allowed and refused.
        let rc = unsafe { MPI_Error_string(0, ptr::null_mut(), &mut len) };
        assert_eq!(rc, abi::MPI_ERR_ARG);
    }

    #[test]
    fn version_type_size_and_count() {
        let (mut v, mut s) = (0, 0);
        // SAFETY: valid ints.
        let rc = unsafe { MPI_Get_version(&mut v, &mut s) };
        assert_eq!(
            (rc, v, s),
            (MPI_SUCCESS, abi::MPI_VERSION, abi::MPI_SUBVERSION)
        );

        let mut size = 0;
        // SAFETY: a valid int.
        let rc = unsafe { MPI_Type_size(abi::MPI_DOUBLE_INT, &mut size) };
        assert_eq!((rc, size), (MPI_SUCCESS, 12));
        // SAFETY: a valid int.
        let rc = unsafe { MPI_Type_size(abi::MPI_DATATYPE_NULL, &mut size) };
        assert_eq!(rc, abi::MPI_ERR_TYPE);

        let status = MPI_Status {
            MPI_SOURCE: 1,
            MPI_TAG: 2,
            MPI_ERROR: 0,
            kestrel_count: 12,
            kestrel_cancelled: 0,
        };
        let mut count = 0;
        // SAFETY: a valid status and int.
        let rc = unsafe { MPI_Get_count(&status, abi::MPI_INT, &mut count) };
        assert_eq!((rc, count), (MPI_SUCCESS, 3));
        // SAFETY: a valid status and int.
        let rc = unsafe { MPI_Get_count(&status, abi::MPI_DOUBLE, &mut count) };
        assert_eq!((rc, count), (MPI_SUCCESS, abi::MPI_UNDEFINED));
        // SAFETY: MPI_STATUS_IGNORE is refused before any read.
        let rc = unsafe { MPI_Get_count(abi::MPI_STATUS_IGNORE, abi::MPI_INT, &mut count) };
        assert_eq!(rc, abi::MPI_ERR_ARG);
    }
}
