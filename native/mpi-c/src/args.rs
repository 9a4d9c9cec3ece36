//! Argument validation and translation between the C ABI (mpi.h) and the MPI core
//! (`kestrel-mpi`): counts, ranks, roots and tags from C, `MPI_Status` from the core's
//! `Status`, the core's errors as error classes, the pair types' packing for point to point,
//! the datatypes the core reduces itself, and the job's environment (`KESTREL_RANK`,
//! `KESTREL_SIZE`). Pure functions over values a C program controls: none panics on any
//! input (property-tested below).
//!
//! Two numbering differences are translated here and nowhere else: mpi.h's `MPI_ANY_SOURCE`
//! is -2 and `MPI_PROC_NULL` -1 (MPICH's values), the core's `ANY_SOURCE` is -1 and
//! `PROC_NULL` -2.

use crate::abi::{self, MPI_Status};
use crate::datatype::{self, Datatype};
use crate::error::ErrorClass;
use crate::op::Op;
use alloc::borrow::Cow;
use alloc::vec::Vec;
use core::ffi::{c_int, c_long};
use kestrel_mpi as mpi;

/// Elements of a count: `Err(Count)` when negative.
pub fn count(count: c_int) -> Result<usize, ErrorClass> {
    usize::try_from(count).map_err(|_| ErrorClass::Count)
}

/// Bytes `count` elements of `dt` occupy in a C buffer (elements `extent` apart).
pub fn buffer_len(dt: Datatype, count: c_int) -> Result<usize, ErrorClass> {
    datatype::buffer_len(dt, count)
}

/// Bytes `count` elements of `dt` occupy on the wire: their type signature (a pair's value and
/// index without the struct's padding, see [`pack`]); what a status counts.
pub fn wire_len(dt: Datatype, count: c_int) -> Result<usize, ErrorClass> {
    self::count(count)?
        .checked_mul(dt.size())
        .ok_or(ErrorClass::Buffer)
}

/// A send's destination (or a collective's peer): a rank of a communicator of `size` ranks,
/// or `MPI_PROC_NULL`; the core's number for it.
pub fn dest(rank: c_int, size: i32) -> Result<i32, ErrorClass> {
    match rank {
        abi::MPI_PROC_NULL => Ok(mpi::PROC_NULL),
        r if (0..size).contains(&r) => Ok(r),
        _ => Err(ErrorClass::Rank),
    }
}

/// A receive's source: a rank, `MPI_ANY_SOURCE` or `MPI_PROC_NULL`; the core's number for it.
pub fn source(rank: c_int, size: i32) -> Result<i32, ErrorClass> {
    match rank {
        abi::MPI_ANY_SOURCE => Ok(mpi::ANY_SOURCE),
        r => dest(r, size),
    }
}

/// A rank number the core reports (a status's source) in mpi.h's numbering.
pub fn c_rank(core: i32) -> c_int {
    match core {
        mpi::PROC_NULL => abi::MPI_PROC_NULL,
        mpi::ANY_SOURCE => abi::MPI_ANY_SOURCE,
        r => r,
    }
}

/// A collective's root: a rank of the communicator (`MPI_ROOT` and `MPI_PROC_NULL` belong to
/// intercommunicators, which Kestrel does not have).
pub fn root(root: c_int, size: i32) -> Result<i32, ErrorClass> {
    if (0..size).contains(&root) {
        Ok(root)
    } else {
        Err(ErrorClass::Root)
    }
}

/// A send's tag: 0 to the core's `TAG_UB`.
pub fn send_tag(tag: c_int) -> Result<i32, ErrorClass> {
    if (0..=mpi::TAG_UB).contains(&tag) {
        Ok(tag)
    } else {
        Err(ErrorClass::Tag)
    }
}

/// A receive's (or probe's) tag: a send's tag or `MPI_ANY_TAG` (the same -1 in both).
pub fn recv_tag(tag: c_int) -> Result<i32, ErrorClass> {
    if tag == abi::MPI_ANY_TAG {
        Ok(mpi::ANY_TAG)
    } else {
        send_tag(tag)
    }
}

/// `MPI_Comm_split`'s colour: `MPI_UNDEFINED` (no new communicator) or a non-negative number.
pub fn split_color(color: c_int) -> Result<Option<u32>, ErrorClass> {
    if color == abi::MPI_UNDEFINED {
        return Ok(None);
    }
    u32::try_from(color).map(Some).map_err(|_| ErrorClass::Arg)
}

/// The thread level `MPI_Init_thread` provides for `required`: the library keeps no locks, so
/// at most `MPI_THREAD_FUNNELED` (the personality runs single-threaded programs anyway).
pub fn thread_level(required: c_int) -> c_int {
    required.clamp(abi::MPI_THREAD_SINGLE, abi::MPI_THREAD_FUNNELED)
}

/// The error class of a core error.
pub fn class(e: mpi::Error) -> ErrorClass {
    match e {
        mpi::Error::Rank => ErrorClass::Rank,
        mpi::Error::Tag => ErrorClass::Tag,
        mpi::Error::Truncate => ErrorClass::Truncate,
        mpi::Error::Count => ErrorClass::Count,
        mpi::Error::Type => ErrorClass::Type,
        mpi::Error::Op => ErrorClass::Op,
        mpi::Error::Comm => ErrorClass::Comm,
        mpi::Error::Request => ErrorClass::Request,
        mpi::Error::Root => ErrorClass::Root,
        mpi::Error::Fabric(_) | mpi::Error::Deadlock => ErrorClass::Other,
        mpi::Error::Protocol => ErrorClass::Intern,
    }
}

/// The status of an empty or null request: `MPI_ANY_SOURCE`, `MPI_ANY_TAG`, no error, 0 bytes.
pub const fn empty_status() -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: abi::MPI_ANY_SOURCE,
        MPI_TAG: abi::MPI_ANY_TAG,
        MPI_ERROR: abi::MPI_SUCCESS,
        kestrel_count: 0,
        kestrel_cancelled: 0,
    }
}

/// The C status of a completed receive (or probe): source in mpi.h's numbering, the request's
/// own error, and the bytes received, which are type-signature bytes (see [`pack`]).
pub fn status(st: &mpi::Status) -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: c_rank(st.source),
        MPI_TAG: st.tag,
        MPI_ERROR: st.error.map_or(abi::MPI_SUCCESS, |e| class(e).code()),
        // At most 64 MiB move (the core's limit), far below c_int's; saturate regardless.
        kestrel_count: c_int::try_from(st.bytes).unwrap_or(c_int::MAX),
        kestrel_cancelled: 0,
    }
}

/// The error a completed request's status holds, as a call's result.
pub fn status_result(st: &MPI_Status) -> Result<(), ErrorClass> {
    match ErrorClass::from_code(st.MPI_ERROR) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Whether point to point sends the elements of `dt` as they lie in memory ([`pack`]
/// borrows the buffer, [`unpack`] copies it whole).
pub fn packed_as_is(dt: Datatype) -> bool {
    padded_pair(dt).is_none()
}

/// `(value bytes, index offset)` of a pair type whose C struct has padding, which point to
/// point leaves out ([`pack`]); None for every other type.
fn padded_pair(dt: Datatype) -> Option<(usize, usize)> {
    let at = dt.index_offset()?;
    (dt.size() != dt.extent()).then(|| (dt.size() - core::mem::size_of::<c_int>(), at))
}

/// The bytes point to point sends for `count` elements of `dt` in `buf` (`count` × extent
/// bytes): the buffer itself, or for a pair type with padding (`MPI_DOUBLE_INT`,
/// `MPI_SHORT_INT`, `MPI_LONG_DOUBLE_INT`, and `MPI_LONG_INT` where `long` is 8 bytes) each
/// element's value and index without the padding, so a message carries its type signature:
/// `MPI_Get_count` on a status then counts elements as MPI defines them, whatever datatype
/// the receiver names. Elements past the end of `buf` are left out.
pub fn pack(dt: Datatype, buf: &[u8]) -> Cow<'_, [u8]> {
    let Some((value, at)) = padded_pair(dt) else {
        return Cow::Borrowed(buf);
    };
    let mut out = Vec::with_capacity(buf.len() / dt.extent() * dt.size());
    for e in buf.chunks_exact(dt.extent()) {
        out.extend_from_slice(&e[..value]);
        out.extend_from_slice(&e[at..at + core::mem::size_of::<c_int>()]);
    }
    Cow::Owned(out)
}

/// Writes received wire bytes (`wire`, type-signature bytes) into a C buffer of elements of
/// `dt` (`out`), the inverse of [`pack`]: whole elements only, as many as both hold; the
/// padding of `out` is left as it was. Returns the bytes of `out` written.
pub fn unpack(dt: Datatype, wire: &[u8], out: &mut [u8]) -> usize {
    let Some((value, at)) = padded_pair(dt) else {
        let n = wire.len().min(out.len());
        out[..n].copy_from_slice(&wire[..n]);
        return n;
    };
    let int = core::mem::size_of::<c_int>();
    let mut n = 0;
    for (w, e) in wire
        .chunks_exact(dt.size())
        .zip(out.chunks_exact_mut(dt.extent()))
    {
        e[..value].copy_from_slice(&w[..value]);
        e[at..at + int].copy_from_slice(&w[value..value + int]);
        n += dt.extent();
    }
    n
}

/// Whether two byte ranges `(address, length)` share a byte (an empty range shares none).
pub fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.1 > 0 && b.1 > 0 && a.0 < b.0.saturating_add(b.1) && b.0 < a.0.saturating_add(a.1)
}

/// The core's datatype for a reduction on `dt`, when the core has one of the same C layout
/// (the integer types by width and sign, `float`, `double`, the pairs but long double's); None
/// for `MPI_CHAR` (in no reduction) and the long double types, which this crate reduces itself
/// (`face`).
pub fn core_datatype(dt: Datatype) -> Option<mpi::Datatype> {
    use mpi::Datatype as C;
    let long64 = core::mem::size_of::<c_long>() == 8;
    Some(match dt {
        Datatype::SignedChar | Datatype::Int8 => C::I8,
        // C's _Bool holds 0 or 1 in one byte: the logical operations keep it so on U8.
        Datatype::UnsignedChar | Datatype::Uint8 | Datatype::CBool => C::U8,
        Datatype::Byte => C::Byte,
        Datatype::Short | Datatype::Int16 => C::I16,
        Datatype::UnsignedShort | Datatype::Uint16 => C::U16,
        Datatype::Int | Datatype::Int32 => C::I32,
        Datatype::Unsigned | Datatype::Uint32 => C::U32,
        Datatype::Long if long64 => C::I64,
        Datatype::Long => C::I32,
        Datatype::UnsignedLong if long64 => C::U64,
        Datatype::UnsignedLong => C::U32,
        Datatype::LongLong | Datatype::Int64 => C::I64,
        Datatype::UnsignedLongLong | Datatype::Uint64 => C::U64,
        Datatype::Float => C::F32,
        Datatype::Double => C::F64,
        Datatype::TwoInt => C::I32I32,
        Datatype::FloatInt => C::F32I32,
        Datatype::DoubleInt => C::F64I32,
        Datatype::LongInt if long64 => C::I64I32,
        Datatype::LongInt => C::I32I32,
        Datatype::ShortInt => C::I16I32,
        Datatype::Char | Datatype::LongDouble | Datatype::LongDoubleInt => return None,
    })
}

/// The core's operation.
pub const fn core_op(op: Op) -> mpi::Op {
    match op {
        Op::Max => mpi::Op::Max,
        Op::Min => mpi::Op::Min,
        Op::Sum => mpi::Op::Sum,
        Op::Prod => mpi::Op::Prod,
        Op::Land => mpi::Op::Land,
        Op::Band => mpi::Op::Band,
        Op::Lor => mpi::Op::Lor,
        Op::Bor => mpi::Op::Bor,
        Op::Lxor => mpi::Op::Lxor,
        Op::Bxor => mpi::Op::Bxor,
        Op::Minloc => mpi::Op::MinLoc,
        Op::Maxloc => mpi::Op::MaxLoc,
    }
}

/// What a fatal deadlock line says after the error class, from the core's report `rank R waits
/// in CALL (WHAT) with no progress for T ms: deadlock`: the line names the rank and the C call
/// already, and CALL is the core's inner one (MPI_Wait under MPI_Recv), so only what the rank
/// waits for and how long, with the core's wildcard source (its -1 is mpi.h's MPI_PROC_NULL)
/// in words.
pub fn deadlock_detail(report: &str) -> alloc::string::String {
    let what = report.find(" (").map_or(report, |i| &report[i + 1..]);
    let what = what.strip_suffix(": deadlock").unwrap_or(what);
    let what = what.replace(
        &alloc::format!("source {},", mpi::ANY_SOURCE),
        "any source,",
    );
    alloc::format!("deadlock: waiting {what}")
}

/// Why a rank cannot tell its place in the job from its environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobError {
    /// `KESTREL_RANK` or `KESTREL_SIZE` is not set: the program was not started as a job.
    Missing,
    /// One of them is not a decimal number, or the rank is not below the size.
    Malformed,
    /// More ranks than the core takes (32) or none.
    Size,
}

impl JobError {
    /// What to tell the user.
    pub const fn message(self) -> &'static str {
        match self {
            JobError::Missing => {
                "KESTREL_RANK and KESTREL_SIZE are not set: start the program as a job (just mpi PROG N)"
            }
            JobError::Malformed => "KESTREL_RANK or KESTREL_SIZE is malformed (want 0 <= rank < size)",
            JobError::Size => "KESTREL_SIZE is out of range (1 to 32 ranks)",
        }
    }
}

fn decimal(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.iter().try_fold(0u32, |v, d| {
        v.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

/// This rank's place in the job from the values of `KESTREL_RANK` and `KESTREL_SIZE`
/// (kestrel-linux sets both, docs/adr/0034-linux-personality.md): `(rank, size)`.
pub fn job(rank: Option<&[u8]>, size: Option<&[u8]>) -> Result<(u32, u32), JobError> {
    let (Some(rank), Some(size)) = (rank, size) else {
        return Err(JobError::Missing);
    };
    let (Some(rank), Some(size)) = (decimal(rank), decimal(size)) else {
        return Err(JobError::Malformed);
    };
    if size == 0 || size > 32 {
        return Err(JobError::Size);
    }
    if rank >= size {
        return Err(JobError::Malformed);
    }
    Ok((rank, size))
}

/// The default patience of a blocking call before it reports a deadlock, in seconds.
pub const DEADLOCK_SECONDS: u64 = 60;

/// How long a blocking call on rank `rank` may see no progress before it reports a deadlock,
/// in nanoseconds: `KESTREL_MPI_DEADLOCK_SECONDS` (a decimal number of seconds, 1 or more;
/// anything else means the default, [`DEADLOCK_SECONDS`]) plus `rank` seconds, so that when
/// every rank waits, the lowest one reports first and its fatal error ends the job before the
/// others speak: one line.
pub fn deadlock_ns(setting: Option<&[u8]>, rank: u32) -> u64 {
    let secs = setting
        .and_then(decimal)
        .filter(|&s| s > 0)
        .map_or(DEADLOCK_SECONDS, u64::from);
    (secs + u64::from(rank)).saturating_mul(1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::ALL;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn ranks_translate_both_ways() {
        assert_eq!(dest(abi::MPI_PROC_NULL, 8), Ok(mpi::PROC_NULL));
        assert_eq!(dest(abi::MPI_ANY_SOURCE, 8), Err(ErrorClass::Rank));
        assert_eq!(dest(7, 8), Ok(7));
        assert_eq!(dest(8, 8), Err(ErrorClass::Rank));
        assert_eq!(dest(-5, 8), Err(ErrorClass::Rank));
        assert_eq!(source(abi::MPI_ANY_SOURCE, 8), Ok(mpi::ANY_SOURCE));
        assert_eq!(source(abi::MPI_PROC_NULL, 8), Ok(mpi::PROC_NULL));
        assert_eq!(source(11, 8), Err(ErrorClass::Rank));
        assert_eq!(c_rank(mpi::PROC_NULL), abi::MPI_PROC_NULL);
        assert_eq!(c_rank(mpi::ANY_SOURCE), abi::MPI_ANY_SOURCE);
        assert_eq!(c_rank(3), 3);
        assert_eq!(root(8, 8), Err(ErrorClass::Root));
        assert_eq!(root(-1, 8), Err(ErrorClass::Root));
    }

    #[test]
    fn tags_and_counts() {
        assert_eq!(send_tag(abi::MPI_ANY_TAG), Err(ErrorClass::Tag));
        assert_eq!(send_tag(-7), Err(ErrorClass::Tag));
        assert_eq!(send_tag(mpi::TAG_UB), Ok(mpi::TAG_UB));
        assert_eq!(send_tag(mpi::TAG_UB + 1), Err(ErrorClass::Tag));
        assert_eq!(recv_tag(abi::MPI_ANY_TAG), Ok(mpi::ANY_TAG));
        assert_eq!(count(-1), Err(ErrorClass::Count));
        assert_eq!(wire_len(Datatype::DoubleInt, 2), Ok(24));
        assert_eq!(buffer_len(Datatype::DoubleInt, 2), Ok(32));
        assert_eq!(wire_len(Datatype::Int, -3), Err(ErrorClass::Count));
    }

    #[test]
    fn statuses() {
        let st = status(&mpi::Status {
            source: 3,
            tag: 9,
            error: Some(mpi::Error::Truncate),
            bytes: 20,
        });
        assert_eq!(
            (st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR, st.kestrel_count),
            (3, 9, abi::MPI_ERR_TRUNCATE, 20)
        );
        assert_eq!(status_result(&st), Err(ErrorClass::Truncate));
        let null = status(&mpi::Status {
            source: mpi::PROC_NULL,
            tag: mpi::ANY_TAG,
            error: None,
            bytes: 0,
        });
        assert_eq!(
            (null.MPI_SOURCE, null.MPI_TAG),
            (abi::MPI_PROC_NULL, abi::MPI_ANY_TAG)
        );
        assert_eq!(status_result(&empty_status()), Ok(()));
    }

    #[test]
    fn core_errors_have_classes() {
        assert_eq!(class(mpi::Error::Deadlock), ErrorClass::Other);
        assert_eq!(class(mpi::Error::Protocol), ErrorClass::Intern);
        assert_eq!(class(mpi::Error::Root), ErrorClass::Root);
    }

    /// Every datatype the core reduces has the same C layout there as here, so buffers pass
    /// through unchanged.
    #[test]
    fn core_datatypes_have_the_c_layout() {
        for dt in ALL {
            let Some(c) = core_datatype(dt) else {
                assert!(matches!(
                    dt,
                    Datatype::Char | Datatype::LongDouble | Datatype::LongDoubleInt
                ));
                continue;
            };
            assert_eq!(c.size(), dt.extent(), "{}", dt.name());
            if let Some(at) = dt.index_offset() {
                assert!(c.is_pair());
                assert_eq!(c.index_offset(), at, "{}", dt.name());
            }
            for op in crate::op::ALL {
                if op.accepts(dt) {
                    assert!(core_op(op).valid_on(c), "{op:?} on {}", dt.name());
                }
            }
        }
    }

    #[test]
    fn pairs_lose_their_padding_on_the_wire() {
        // struct { double value; int index; }: 16 bytes, 12 on the wire.
        let mut buf = vec![0u8; 32];
        buf[..8].copy_from_slice(&1.5f64.to_ne_bytes());
        buf[8..12].copy_from_slice(&7i32.to_ne_bytes());
        buf[12..16].fill(0xee);
        buf[16..24].copy_from_slice(&(-2.0f64).to_ne_bytes());
        buf[24..28].copy_from_slice(&9i32.to_ne_bytes());
        let wire = pack(Datatype::DoubleInt, &buf);
        assert_eq!(wire.len(), 24);
        assert_eq!(&wire[..12], &buf[..12]);
        let mut out = vec![0x55u8; 32];
        assert_eq!(unpack(Datatype::DoubleInt, &wire, &mut out), 32);
        assert_eq!(&out[..12], &buf[..12]);
        assert_eq!(&out[12..16], &[0x55; 4]);
        assert_eq!(&out[16..28], &buf[16..28]);
        assert!(matches!(pack(Datatype::Int, &buf), Cow::Borrowed(_)));
    }

    #[test]
    fn deadlock_lines() {
        assert_eq!(
            deadlock_detail(
                "rank 3 waits in MPI_Wait (receive from source -1, tag 4242, context 0) with no \
                 progress for 5000 ms: deadlock"
            ),
            "deadlock: waiting (receive from any source, tag 4242, context 0) with no progress \
             for 5000 ms"
        );
        assert_eq!(
            deadlock_detail("rank 0 waits in MPI_Allreduce (ALU reduction on WORLD, opcode 1) with no progress for 9 ms: deadlock"),
            "deadlock: waiting (ALU reduction on WORLD, opcode 1) with no progress for 9 ms"
        );
        assert_eq!(deadlock_detail("odd"), "deadlock: waiting odd");
    }

    #[test]
    fn aliasing() {
        assert!(overlap((100, 10), (109, 1)));
        assert!(!overlap((100, 10), (110, 5)));
        assert!(!overlap((100, 0), (100, 5)));
        assert!(overlap((usize::MAX - 4, 4), (usize::MAX - 1, 8)));
    }

    #[test]
    fn the_jobs_environment() {
        assert_eq!(job(Some(b"3"), Some(b"8")), Ok((3, 8)));
        assert_eq!(job(None, Some(b"8")), Err(JobError::Missing));
        assert_eq!(job(Some(b"8"), Some(b"8")), Err(JobError::Malformed));
        assert_eq!(job(Some(b"-1"), Some(b"8")), Err(JobError::Malformed));
        assert_eq!(job(Some(b"0"), Some(b"33")), Err(JobError::Size));
        assert_eq!(job(Some(b"0"), Some(b"0")), Err(JobError::Size));
        assert_eq!(job(Some(b" 1"), Some(b"4")), Err(JobError::Malformed));
        assert_eq!(deadlock_ns(None, 0), 60_000_000_000);
        assert_eq!(deadlock_ns(Some(b"5"), 2), 7_000_000_000);
        assert_eq!(deadlock_ns(Some(b"0"), 0), 60_000_000_000);
        assert_eq!(deadlock_ns(Some(b"x"), 1), 61_000_000_000);
        assert_eq!(split_color(abi::MPI_UNDEFINED), Ok(None));
        assert_eq!(split_color(-3), Err(ErrorClass::Arg));
        assert_eq!(
            thread_level(abi::MPI_THREAD_MULTIPLE),
            abi::MPI_THREAD_FUNNELED
        );
        assert_eq!(thread_level(abi::MPI_THREAD_SINGLE), abi::MPI_THREAD_SINGLE);
    }

    fn datatype() -> impl Strategy<Value = Datatype> {
        (0..ALL.len()).prop_map(|i| ALL[i])
    }

    proptest! {
        /// Any rank, tag, count or colour a program passes is accepted or refused, never a
        /// panic; an accepted rank translates back to itself.
        #[test]
        fn validation_never_panics(r in any::<c_int>(), size in 0i32..64, t in any::<c_int>()) {
            if let Ok(core) = source(r, size) {
                prop_assert_eq!(c_rank(core), r);
            }
            if let Ok(core) = dest(r, size) {
                prop_assert!(core == mpi::PROC_NULL || (0..size).contains(&core));
            }
            let _ = (root(r, size), send_tag(t), recv_tag(t), split_color(r), thread_level(r));
            if let Ok(n) = count(r) {
                prop_assert_eq!(n as c_int, r);
            }
        }

        /// Packing then unpacking gives back every element's value and index, for every
        /// datatype and any bytes.
        #[test]
        fn pack_unpack_round_trip(dt in datatype(), bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let wire = pack(dt, &bytes);
            let whole = bytes.len() / dt.extent() * dt.extent();
            if dt.size() != dt.extent() {
                prop_assert_eq!(wire.len(), bytes.len() / dt.extent() * dt.size());
            }
            let mut out = bytes.clone();
            // Scribble on the data bytes only; unpack must restore them.
            for (i, b) in out.iter_mut().enumerate() {
                *b = b.wrapping_add(i as u8 | 1);
            }
            let n = unpack(dt, &wire, &mut out);
            if dt.size() != dt.extent() {
                prop_assert_eq!(n, whole);
                let at = dt.index_offset().unwrap();
                let value = dt.size() - 4;
                for (a, b) in out.chunks_exact(dt.extent()).zip(bytes.chunks_exact(dt.extent())) {
                    prop_assert_eq!(&a[..value], &b[..value]);
                    prop_assert_eq!(&a[at..at + 4], &b[at..at + 4]);
                }
            } else {
                prop_assert_eq!(&out[..n], &bytes[..n]);
            }
        }

        /// Whatever a program's environment holds, it is a place in the job or an error.
        #[test]
        fn any_environment(rank in proptest::collection::vec(any::<u8>(), 0..12),
                           size in proptest::collection::vec(any::<u8>(), 0..12),
                           secs in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12))) {
            if let Ok((r, n)) = job(Some(&rank), Some(&size)) {
                prop_assert!(r < n && n <= 32);
            }
            let ns = deadlock_ns(secs.as_deref(), 31);
            prop_assert!(ns >= 32_000_000_000);
        }

        /// The overlap test agrees with a byte-by-byte one on small ranges.
        #[test]
        fn overlap_is_byte_sharing(a in 0usize..64, al in 0usize..16, b in 0usize..64, bl in 0usize..16) {
            let shared = (a..a + al).any(|x| (b..b + bl).contains(&x));
            prop_assert_eq!(overlap((a, al), (b, bl)), shared);
        }
    }
}
