//! The `extern "C"` MPI functions of mpi.h over the core (feature `target`: the static library
//! `libkestrel_mpi_c.a`). Each one decodes its arguments in MPI's order (the communicator,
//! counts and datatypes, then ranks, roots and tags in [`Face`]), makes byte slices of the
//! program's buffers only once their lengths are known, calls [`Face`], then writes its
//! outputs (`MPI_Status`, flags, handles).
//!
//! An error goes to the error handler of the call's communicator (a request's for the
//! completion calls; `MPI_COMM_WORLD`'s when there is none or the handle is bad):
//! `MPI_ERRORS_RETURN` returns the class; `MPI_ERRORS_ARE_FATAL`, the default, prints one line
//! naming the rank, the call and the error class (and what the core knows: a deadlock's
//! report) and exits with the class as the code, which ends the job (kestrel-linux stops the
//! other ranks). `MPI_Abort` prints one line and exits with its code.
//!
//! The library's state is one static: MPI programs here are single-threaded (the personality
//! has no threads, `MPI_Init_thread` provides at most `MPI_THREAD_FUNNELED`), and a flag
//! refuses a re-entered call (an `atexit` handler calling MPI while the library ends the
//! process) instead of aliasing the state.
//!
//! The unsafe code is the state's accessor ([`with`]) and the program's memory ([`mem`]):
//! every pointer a program passes becomes a reference or slice there, after null checks and
//! with the length its count and datatype give.

use crate::abi::{self, MPI_Comm, MPI_Datatype, MPI_Errhandler, MPI_Op, MPI_Request, MPI_Status};
use crate::args;
use crate::datatype::Datatype;
use crate::env;
use crate::error::ErrorClass;
use crate::face::{Completion, Face, RecvBuf};
use crate::handles::Errhandler;
use crate::op;
use crate::platform;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, Ordering};
use kestrel_fabric::{EpId, FabricApi};
use kestrel_fabric_client::service::Service;

/// A running library.
struct Lib {
    face: Face<Service>,
    ep: EpId,
    rank: u32,
    /// What `MPI_Init_thread` provided.
    thread_level: c_int,
    /// `MPI_Get_processor_name`'s answer (the node and the endpoint's torus coordinates).
    name: String,
}

enum Phase {
    Before,
    Running(Box<Lib>),
    After,
}

struct State(UnsafeCell<Phase>);

// SAFETY: only reached through `with`, whose BUSY flag admits one caller at a time (and MPI
// programs on Kestrel are single-threaded: MPI_THREAD_FUNNELED at most).
unsafe impl Sync for State {}

static STATE: State = State(UnsafeCell::new(Phase::Before));
static BUSY: AtomicBool = AtomicBool::new(false);

/// Runs `f` on the library's state; None when a call is already in the library (re-entered
/// from an exit handler, or a second thread).
fn with<R>(f: impl FnOnce(&mut Phase) -> R) -> Option<R> {
    if BUSY.swap(true, Ordering::Acquire) {
        return None;
    }
    // SAFETY: BUSY was clear and is now set, so no other reference to the state exists until
    // it is cleared below (a fatal error exits inside `f` and never clears it).
    let r = f(unsafe { &mut *STATE.0.get() });
    BUSY.store(false, Ordering::Release);
    Some(r)
}

/// The rank for a line printed before MPI_Init worked.
fn env_rank() -> String {
    match platform::job() {
        Ok((r, _)) => format!("{r}"),
        Err(_) => String::from("?"),
    }
}

/// Prints the one line of a fatal error and ends the process with the class as the code.
fn fatal(rank: &str, call: &str, class: ErrorClass, detail: Option<&str>) -> ! {
    let line = match detail {
        // The class's name (the message's text before its colon), then what happened.
        Some(d) => {
            let name = class.message().split(':').next().unwrap_or("MPI_ERR_OTHER");
            format!("kestrel-mpi: rank {rank}: {call}: {name}: {d}\n")
        }
        None => format!("kestrel-mpi: rank {rank}: {call}: {}\n", class.message()),
    };
    platform::say(&line);
    platform::end(class.code())
}

impl Lib {
    /// An error of `call` on communicator `comm`: its handler decides.
    fn error(&mut self, call: &str, comm: c_int, class: ErrorClass) -> c_int {
        if self.face.errhandler(comm) == Errhandler::Return {
            self.face.take_core_error();
            return class.code();
        }
        let detail = match self.face.take_core_error() {
            Some(kestrel_mpi::Error::Deadlock) => self
                .face
                .core()
                .deadlock_report()
                .map(args::deadlock_detail),
            Some(kestrel_mpi::Error::Fabric(e)) => Some(format!("the fabric refused: {e}")),
            _ => None,
        };
        let rank = format!("{}", self.rank);
        self.face.core().fabric().detach(self.ep);
        fatal(&rank, call, class, detail.as_deref())
    }
}

/// Where a call's error goes.
#[derive(Clone, Copy)]
enum On {
    /// The communicator's handler.
    Comm(c_int),
    /// The handler of the request's communicator (decided before the call, which may free
    /// the request).
    Request(c_int),
}

/// Runs an MPI call that needs the library running: `f`'s error goes to the handler `on`
/// names.
fn call(name: &'static str, on: On, f: impl FnOnce(&mut Lib) -> Result<(), ErrorClass>) -> c_int {
    with(|phase| match phase {
        Phase::Running(lib) => {
            let comm = match on {
                On::Comm(c) => c,
                On::Request(r) => lib.face.request_comm(r),
            };
            lib.face.take_core_error();
            match f(lib) {
                Ok(()) => abi::MPI_SUCCESS,
                Err(class) => lib.error(name, comm, class),
            }
        }
        Phase::Before => fatal(
            &env_rank(),
            name,
            ErrorClass::Other,
            Some("called before MPI_Init"),
        ),
        Phase::After => fatal(
            &env_rank(),
            name,
            ErrorClass::Other,
            Some("called after MPI_Finalize"),
        ),
    })
    .unwrap_or(ErrorClass::Other.code())
}

/// An error of a call that names no communicator (capi's): `MPI_COMM_WORLD`'s handler, fatal
/// before MPI_Init (the default handler) and after MPI_Finalize.
pub fn world_error(name: &'static str, class: ErrorClass) -> c_int {
    with(|phase| match phase {
        Phase::Running(lib) => lib.error(name, abi::MPI_COMM_WORLD, class),
        _ => fatal(&env_rank(), name, class, None),
    })
    .unwrap_or(class.code())
}

/// The program's memory: every pointer an MPI call receives becomes a reference here, after
/// checks, with the length MPI's rules give it.
mod mem {
    use super::*;

    /// `len` bytes the program passes to be read (a send buffer).
    ///
    /// # Safety
    /// Unless `len` is 0 or `p` null or `MPI_IN_PLACE` (refused), `p` points to `len`
    /// readable bytes that nothing writes during the call (MPI: a buffer is the call's
    /// until it returns).
    pub unsafe fn src<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], ErrorClass> {
        if len == 0 {
            return Ok(&[]);
        }
        if p.is_null() || p == abi::MPI_IN_PLACE.cast_const() {
            return Err(ErrorClass::Buffer);
        }
        // SAFETY: the caller's promise above; `p` is neither null nor MPI_IN_PLACE.
        Ok(unsafe { core::slice::from_raw_parts(p.cast(), len) })
    }

    /// `len` bytes the program passes to be written (a receive buffer).
    ///
    /// # Safety
    /// As [`src`], and the bytes are writable and not referred to otherwise during the call
    /// (MPI forbids a program to pass one buffer twice, [`args::overlap`] refuses it where
    /// a call takes two).
    pub unsafe fn dst<'a>(p: *mut c_void, len: usize) -> Result<&'a mut [u8], ErrorClass> {
        if len == 0 {
            return Ok(&mut []);
        }
        if p.is_null() || p == abi::MPI_IN_PLACE {
            return Err(ErrorClass::Buffer);
        }
        // SAFETY: the caller's promise above; `p` is neither null nor MPI_IN_PLACE.
        Ok(unsafe { core::slice::from_raw_parts_mut(p.cast(), len) })
    }

    /// One value the call writes (`int *flag`, `MPI_Request *request`, ...).
    ///
    /// # Safety
    /// `p` is null (refused: `MPI_ERR_ARG`) or points to a writable `T`.
    pub unsafe fn out<'a, T>(p: *mut T) -> Result<&'a mut T, ErrorClass> {
        // SAFETY: the caller's promise; null is refused by as_mut.
        unsafe { p.as_mut() }.ok_or(ErrorClass::Arg)
    }

    /// An array of `n` values the call reads and writes (requests, statuses).
    ///
    /// # Safety
    /// Unless `n` is 0, `p` is null (refused) or points to `n` writable `T`s.
    pub unsafe fn array<'a, T>(p: *mut T, n: usize) -> Result<&'a mut [T], ErrorClass> {
        if n == 0 {
            return Ok(&mut []);
        }
        if p.is_null() {
            return Err(ErrorClass::Arg);
        }
        // SAFETY: the caller's promise; not null.
        Ok(unsafe { core::slice::from_raw_parts_mut(p, n) })
    }

    /// Writes `st` where the program wants a status, unless it passed `MPI_STATUS_IGNORE`
    /// (or null).
    ///
    /// # Safety
    /// `p` is null, `MPI_STATUS_IGNORE`, or points to a writable `MPI_Status`.
    pub unsafe fn put_status(p: *mut MPI_Status, st: MPI_Status) {
        if p != abi::MPI_STATUS_IGNORE {
            // SAFETY: the caller's promise; MPI_STATUS_IGNORE is excluded, null by as_mut.
            if let Some(s) = unsafe { p.as_mut() } {
                *s = st;
            }
        }
    }

    /// The statuses array of a multiple completion: None for `MPI_STATUSES_IGNORE` (or null).
    ///
    /// # Safety
    /// `p` is null, `MPI_STATUSES_IGNORE`, or points to `n` writable `MPI_Status`es.
    pub unsafe fn statuses<'a>(p: *mut MPI_Status, n: usize) -> Option<&'a mut [MPI_Status]> {
        if p == abi::MPI_STATUSES_IGNORE || p.is_null() {
            return None;
        }
        // SAFETY: the caller's promise; neither null nor MPI_STATUSES_IGNORE.
        Some(unsafe { core::slice::from_raw_parts_mut(p, n) })
    }

    /// Unpacks a completed receive's data into its buffer.
    pub fn deliver(c: &Completion) {
        let Some(rb) = c.recv else { return };
        // SAFETY: the buffer of the program's pending receive, `rb.len` bytes checked when it
        // was posted (MPI_Irecv); MPI keeps it the library's, unread and unwritten by the
        // program, until the completion that is happening now.
        if let Ok(out) = unsafe { dst(rb.addr as *mut c_void, rb.len) } {
            args::unpack(rb.datatype, &c.data, out);
        }
    }
}

/// A count of elements of a datatype: the datatype and the bytes they take in a buffer.
fn typed(datatype: MPI_Datatype, count: c_int) -> Result<(Datatype, usize), ErrorClass> {
    args::count(count)?;
    let dt = Datatype::from_handle(datatype)?;
    Ok((dt, args::buffer_len(dt, count)?))
}

/// Refuses two buffers of one call that share bytes (MPI forbids it; `MPI_ERR_BUFFER`).
fn apart(a: *const c_void, alen: usize, b: *const c_void, blen: usize) -> Result<(), ErrorClass> {
    if args::overlap((a as usize, alen), (b as usize, blen)) {
        return Err(ErrorClass::Buffer);
    }
    Ok(())
}

/// A completion's status into the program's, its data into its buffer; its error as the
/// call's result.
///
/// # Safety
/// `status` as [`mem::put_status`].
unsafe fn finish(c: Option<Completion>, status: *mut MPI_Status) -> Result<(), ErrorClass> {
    let st = match c {
        Some(c) => {
            mem::deliver(&c);
            c.status
        }
        None => args::empty_status(),
    };
    // SAFETY: the caller's promise.
    unsafe { mem::put_status(status, st) };
    args::status_result(&st)
}

// ---- environment -----------------------------------------------------------------------

fn init(name: &'static str, required: c_int) -> c_int {
    with(|phase| {
        if !matches!(phase, Phase::Before) {
            fatal(
                &env_rank(),
                name,
                ErrorClass::Other,
                Some("MPI was initialized already"),
            );
        }
        let s = match platform::start() {
            Ok(s) => s,
            Err(why) => fatal(&env_rank(), name, ErrorClass::Other, Some(&why)),
        };
        let mut mpi = s.mpi;
        let me = mpi.dma().1.me;
        let face = match Face::start(mpi) {
            Ok(f) => f,
            Err(class) => fatal(
                &format!("{}", s.rank),
                name,
                class,
                Some("the other ranks did not finish MPI_Init"),
            ),
        };
        *phase = Phase::Running(Box::new(Lib {
            face,
            ep: s.ep,
            rank: s.rank,
            thread_level: args::thread_level(required),
            name: format!("kestrel-node-{}.{}.{}", me.x, me.y, me.z),
        }));
        abi::MPI_SUCCESS
    })
    .unwrap_or(ErrorClass::Other.code())
}

/// `MPI_Init`: this rank joins the job: it attaches an endpoint of the node's fabric service
/// and waits until every rank has.
///
/// # Safety
/// Nothing is read through `argc` and `argv` (Kestrel passes MPI no arguments).
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    init("MPI_Init", abi::MPI_THREAD_SINGLE)
}

/// `MPI_Init_thread`: `MPI_Init`, providing at most `MPI_THREAD_FUNNELED`.
///
/// # Safety
/// `provided` is null or writable; `argc` and `argv` are not read.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let rc = init("MPI_Init_thread", required);
    if rc != abi::MPI_SUCCESS {
        return rc;
    }
    call("MPI_Init_thread", On::Comm(abi::MPI_COMM_WORLD), |l| {
        // SAFETY: the caller's promise.
        *unsafe { mem::out(provided) }? = l.thread_level;
        Ok(())
    })
}

/// `MPI_Query_thread`.
///
/// # Safety
/// `provided` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", On::Comm(abi::MPI_COMM_WORLD), |l| {
        // SAFETY: the caller's promise.
        *unsafe { mem::out(provided) }? = l.thread_level;
        Ok(())
    })
}

/// `MPI_Finalize`: a barrier on `MPI_COMM_WORLD`, then the endpoint is detached. Pending
/// requests are forgotten.
#[no_mangle]
pub extern "C" fn MPI_Finalize() -> c_int {
    with(|phase| {
        let lib = match phase {
            Phase::Running(lib) => lib,
            Phase::Before => fatal(
                &env_rank(),
                "MPI_Finalize",
                ErrorClass::Other,
                Some("called before MPI_Init"),
            ),
            Phase::After => fatal(
                &env_rank(),
                "MPI_Finalize",
                ErrorClass::Other,
                Some("called twice"),
            ),
        };
        let rc = match lib.face.finalize() {
            Ok(()) => abi::MPI_SUCCESS,
            Err(class) => lib.error("MPI_Finalize", abi::MPI_COMM_WORLD, class),
        };
        lib.face.core().fabric().detach(lib.ep);
        *phase = Phase::After;
        rc
    })
    .unwrap_or(ErrorClass::Other.code())
}

/// `MPI_Initialized`: whether `MPI_Init` was called (also after `MPI_Finalize`).
///
/// # Safety
/// `flag` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    let Some(done) = with(|phase| !matches!(phase, Phase::Before)) else {
        return ErrorClass::Other.code();
    };
    // SAFETY: the caller's promise.
    match unsafe { mem::out(flag) } {
        Ok(f) => {
            *f = c_int::from(done);
            abi::MPI_SUCCESS
        }
        Err(class) => world_error("MPI_Initialized", class),
    }
}

/// `MPI_Finalized`: whether `MPI_Finalize` was called.
///
/// # Safety
/// `flag` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    let Some(done) = with(|phase| matches!(phase, Phase::After)) else {
        return ErrorClass::Other.code();
    };
    // SAFETY: the caller's promise.
    match unsafe { mem::out(flag) } {
        Ok(f) => {
            *f = c_int::from(done);
            abi::MPI_SUCCESS
        }
        Err(class) => world_error("MPI_Finalized", class),
    }
}

/// `MPI_Abort`: one line naming the rank and the code, then the process exits with the code
/// (its low 8 bits; 1 where those are 0, so that the job ends), and kestrel-linux stops the
/// job's other ranks. Every rank of the job ends, whatever `comm` is.
#[no_mangle]
pub extern "C" fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let rank = with(|phase| match phase {
        Phase::Running(lib) => {
            lib.face.core().fabric().detach(lib.ep);
            format!("{}", lib.rank)
        }
        _ => env_rank(),
    })
    .unwrap_or_else(env_rank);
    let on = if comm == abi::MPI_COMM_WORLD {
        String::from("MPI_COMM_WORLD")
    } else {
        format!("communicator {comm:#x}")
    };
    platform::say(&format!(
        "kestrel-mpi: rank {rank}: MPI_Abort on {on} with error code {errorcode}: ending the job\n"
    ));
    let code = errorcode & 0xff;
    platform::end(if code == 0 { 1 } else { code })
}

/// `MPI_Wtime`: seconds of the time base since the machine started.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    env::wtime(platform::ticks(), platform::timebase_hz()).unwrap_or(0.0)
}

/// `MPI_Wtick`: one time-base tick in seconds.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    env::wtick(platform::timebase_hz()).unwrap_or(1e-6)
}

/// `MPI_Get_processor_name`: `kestrel-node-X.Y.Z` (the endpoint's torus coordinates), or
/// `kestrel-node` before `MPI_Init`.
///
/// # Safety
/// `name` is null or has `MPI_MAX_PROCESSOR_NAME` writable bytes; `resultlen` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let text = with(|phase| match phase {
        Phase::Running(lib) => lib.name.clone(),
        _ => String::from("kestrel-node"),
    })
    .unwrap_or_default();
    let cap = abi::MPI_MAX_PROCESSOR_NAME as usize;
    let bytes = &text.as_bytes()[..text.len().min(cap - 1)];
    // SAFETY: the caller's promise: MPI_MAX_PROCESSOR_NAME bytes, or null (refused).
    let out = match unsafe { mem::dst(name.cast(), cap) } {
        Ok(o) => o,
        Err(_) => return world_error("MPI_Get_processor_name", ErrorClass::Arg),
    };
    out[..bytes.len()].copy_from_slice(bytes);
    out[bytes.len()] = 0;
    // SAFETY: the caller's promise.
    match unsafe { mem::out(resultlen) } {
        Ok(l) => {
            *l = bytes.len() as c_int;
            abi::MPI_SUCCESS
        }
        Err(class) => world_error("MPI_Get_processor_name", class),
    }
}

// ---- communicators ---------------------------------------------------------------------

/// `MPI_Comm_rank`.
///
/// # Safety
/// `rank` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    call("MPI_Comm_rank", On::Comm(comm), |l| {
        let r = l.face.rank(comm)?;
        // SAFETY: the caller's promise.
        *unsafe { mem::out(rank) }? = r;
        Ok(())
    })
}

/// `MPI_Comm_size`.
///
/// # Safety
/// `size` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    call("MPI_Comm_size", On::Comm(comm), |l| {
        let n = l.face.size(comm)?;
        // SAFETY: the caller's promise.
        *unsafe { mem::out(size) }? = n;
        Ok(())
    })
}

/// `MPI_Comm_dup`.
///
/// # Safety
/// `newcomm` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_dup", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        // SAFETY: the caller's promise.
        let out = unsafe { mem::out(newcomm) }?;
        *out = l.face.comm_dup(comm)?;
        Ok(())
    })
}

/// `MPI_Comm_split`.
///
/// # Safety
/// `newcomm` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_split", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        // SAFETY: the caller's promise.
        let out = unsafe { mem::out(newcomm) }?;
        *out = l.face.comm_split(comm, color, key)?;
        Ok(())
    })
}

/// `MPI_Comm_free`: the handle becomes `MPI_COMM_NULL`.
///
/// # Safety
/// `comm` is null or points to a writable handle.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    // SAFETY: the caller's promise: null or readable.
    let h = unsafe { comm.as_ref() }
        .copied()
        .unwrap_or(abi::MPI_COMM_NULL);
    call("MPI_Comm_free", On::Comm(h), |l| {
        // SAFETY: the caller's promise.
        let c = unsafe { mem::out(comm) }?;
        l.face.comm_free(*c)?;
        *c = abi::MPI_COMM_NULL;
        Ok(())
    })
}

/// `MPI_Comm_set_errhandler` (`MPI_ERRORS_ARE_FATAL` or `MPI_ERRORS_RETURN`).
#[no_mangle]
pub extern "C" fn MPI_Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    call("MPI_Comm_set_errhandler", On::Comm(comm), |l| {
        l.face.set_errhandler(comm, errhandler)
    })
}

// ---- point to point ----------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn send(
    name: &'static str,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    sync: bool,
) -> c_int {
    call(name, On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (dt, len) = typed(datatype, count)?;
        // SAFETY: MPI_Send's buffer holds `count` elements of `datatype`: `len` bytes.
        let data = unsafe { mem::src(buf, len) }?;
        l.face.send(comm, dest, tag, dt, data, sync)
    })
}

/// `MPI_Send`: returns once the data has left (above the eager limit, once the receiver took
/// it).
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send("MPI_Send", buf, count, datatype, dest, tag, comm, false)
}

/// `MPI_Ssend`: returns once a receive matched.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send("MPI_Ssend", buf, count, datatype, dest, tag, comm, true)
}

/// `MPI_Recv`.
///
/// # Safety
/// `buf` has room for `count` elements of `datatype`; `status` is null, `MPI_STATUS_IGNORE`
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Recv", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (dt, len) = typed(datatype, count)?;
        // SAFETY: the receive buffer has room for `count` elements: `len` bytes.
        let out = unsafe { mem::dst(buf, len) }?;
        let st = l.face.recv(comm, source, tag, dt, out)?;
        // SAFETY: the caller's promise.
        unsafe { mem::put_status(status, st) };
        args::status_result(&st)
    })
}

/// `MPI_Isend`: the data is copied at once; the buffer is the program's at return.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`; `request` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Isend", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (dt, len) = typed(datatype, count)?;
        // SAFETY: the send buffer holds `count` elements: `len` bytes.
        let data = unsafe { mem::src(buf, len) }?;
        // SAFETY: the caller's promise.
        let out = unsafe { mem::out(request) }?;
        *out = l.face.isend(comm, dest, tag, dt, data, false)?;
        Ok(())
    })
}

/// `MPI_Irecv`: the buffer is the library's until the request completes.
///
/// # Safety
/// `buf` has room for `count` elements of `datatype` and stays valid until the request
/// completes; `request` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Irecv", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (dt, len) = typed(datatype, count)?;
        if len > 0 && (buf.is_null() || buf == abi::MPI_IN_PLACE) {
            return Err(ErrorClass::Buffer);
        }
        // SAFETY: the caller's promise.
        let out = unsafe { mem::out(request) }?;
        let into = RecvBuf {
            addr: buf as usize,
            len,
            datatype: dt,
        };
        *out = l.face.irecv(comm, source, tag, into)?;
        Ok(())
    })
}

/// `MPI_Sendrecv`.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype`, `recvbuf` has room for `recvcount`
/// of `recvtype`; `status` is null, `MPI_STATUS_IGNORE` or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Sendrecv", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (sdt, slen) = typed(sendtype, sendcount)?;
        let (rdt, rlen) = typed(recvtype, recvcount)?;
        apart(sendbuf, slen, recvbuf, rlen)?;
        // SAFETY: the send buffer holds `slen` bytes (its count and type).
        let s = unsafe { mem::src(sendbuf, slen) }?;
        // SAFETY: the receive buffer has room for `rlen` bytes, apart from the send buffer.
        let r = unsafe { mem::dst(recvbuf, rlen) }?;
        let st = l
            .face
            .sendrecv(comm, s, sdt, dest, sendtag, r, rdt, source, recvtag)?;
        // SAFETY: the caller's promise.
        unsafe { mem::put_status(status, st) };
        args::status_result(&st)
    })
}

/// `MPI_Probe`.
///
/// # Safety
/// `status` is null, `MPI_STATUS_IGNORE` or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Probe", On::Comm(comm), |l| {
        let st = l.face.probe(comm, source, tag)?;
        // SAFETY: the caller's promise.
        unsafe { mem::put_status(status, st) };
        Ok(())
    })
}

/// `MPI_Iprobe`.
///
/// # Safety
/// `flag` is null or writable; `status` is null, `MPI_STATUS_IGNORE` or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Iprobe", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        // SAFETY: the caller's promise.
        let f = unsafe { mem::out(flag) }?;
        let st = l.face.iprobe(comm, source, tag)?;
        *f = c_int::from(st.is_some());
        if let Some(st) = st {
            // SAFETY: the caller's promise.
            unsafe { mem::put_status(status, st) };
        }
        Ok(())
    })
}

// ---- completion --------------------------------------------------------------------------

/// The handle `request` points to, for choosing the error handler before the call.
///
/// # Safety
/// `request` is null or readable.
unsafe fn peek(request: *const MPI_Request) -> MPI_Request {
    // SAFETY: the caller's promise.
    unsafe { request.as_ref() }
        .copied()
        .unwrap_or(abi::MPI_REQUEST_NULL)
}

/// The first handle of a request array of `count` (`MPI_REQUEST_NULL` if none), for choosing
/// the error handler before the call.
///
/// # Safety
/// `requests` is null or holds `count` readable handles.
unsafe fn first_request(count: c_int, requests: *const MPI_Request) -> MPI_Request {
    if count > 0 {
        // SAFETY: the caller's promise; at least one handle.
        unsafe { peek(requests) }
    } else {
        abi::MPI_REQUEST_NULL
    }
}

/// `MPI_Wait`: the request becomes `MPI_REQUEST_NULL`; a null request gives the empty status.
///
/// # Safety
/// `request` is null or writable; `status` is null, `MPI_STATUS_IGNORE` or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    // SAFETY: the caller's promise.
    let on = On::Request(unsafe { peek(request) });
    call("MPI_Wait", on, |l| {
        // SAFETY: the caller's promise.
        let r = unsafe { mem::out(request) }?;
        let done = l.face.wait(*r)?;
        *r = abi::MPI_REQUEST_NULL;
        // SAFETY: the caller's promise.
        unsafe { finish(done, status) }
    })
}

/// `MPI_Test`: `*flag` 1 and the request `MPI_REQUEST_NULL` once complete.
///
/// # Safety
/// `request` and `flag` are null or writable; `status` is null, `MPI_STATUS_IGNORE` or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's promise.
    let on = On::Request(unsafe { peek(request) });
    call("MPI_Test", on, |l| {
        // SAFETY: the caller's promise.
        let r = unsafe { mem::out(request) }?;
        // SAFETY: the caller's promise.
        let f = unsafe { mem::out(flag) }?;
        match l.face.test(*r)? {
            None => {
                *f = 0;
                Ok(())
            }
            Some(done) => {
                *r = abi::MPI_REQUEST_NULL;
                *f = 1;
                // SAFETY: the caller's promise.
                unsafe { finish(done, status) }
            }
        }
    })
}

/// The completions of a multiple completion into the program's arrays: every handle that was
/// not null becomes `MPI_REQUEST_NULL`, every status is written (the empty one for null
/// requests); `MPI_ERR_IN_STATUS` if any request failed.
fn finish_all(
    reqs: &mut [MPI_Request],
    mut statuses: Option<&mut [MPI_Status]>,
    done: alloc::vec::Vec<Option<Completion>>,
) -> Result<(), ErrorClass> {
    let mut failed = false;
    for (i, c) in done.into_iter().enumerate() {
        let st = match c {
            Some(c) => {
                reqs[i] = abi::MPI_REQUEST_NULL;
                mem::deliver(&c);
                c.status
            }
            None => args::empty_status(),
        };
        failed |= st.MPI_ERROR != abi::MPI_SUCCESS;
        if let Some(s) = statuses.as_deref_mut().and_then(|s| s.get_mut(i)) {
            *s = st;
        }
    }
    if failed {
        Err(ErrorClass::InStatus)
    } else {
        Ok(())
    }
}

/// The request and status arrays of a multiple completion, refused (`MPI_ERR_ARG`) where they
/// share bytes.
///
/// # Safety
/// As [`mem::array`] for `reqs` and [`mem::statuses`] for `sts`.
unsafe fn arrays<'a>(
    count: c_int,
    reqs: *mut MPI_Request,
    sts: *mut MPI_Status,
) -> Result<(&'a mut [MPI_Request], Option<&'a mut [MPI_Status]>), ErrorClass> {
    let n = args::count(count)?;
    let rbytes = n.saturating_mul(core::mem::size_of::<MPI_Request>());
    let sbytes = n.saturating_mul(core::mem::size_of::<MPI_Status>());
    if sts != abi::MPI_STATUSES_IGNORE
        && args::overlap((reqs as usize, rbytes), (sts as usize, sbytes))
    {
        return Err(ErrorClass::Arg);
    }
    // SAFETY: the caller's promise.
    let r = unsafe { mem::array(reqs, n) }?;
    // SAFETY: the caller's promise; apart from the requests (above).
    let s = unsafe { mem::statuses(sts, n) };
    Ok((r, s))
}

/// `MPI_Waitall`.
///
/// # Safety
/// `array_of_requests` holds `count` writable handles; `array_of_statuses` is
/// `MPI_STATUSES_IGNORE`, null, or has room for `count` statuses.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's promise (the array holds `count` handles).
    let first = unsafe { first_request(count, array_of_requests) };
    call("MPI_Waitall", On::Request(first), |l| {
        // SAFETY: the caller's promise.
        let (reqs, sts) = unsafe { arrays(count, array_of_requests, array_of_statuses) }?;
        let done = l.face.waitall(reqs)?;
        finish_all(reqs, sts, done)
    })
}

/// `MPI_Testall`: `*flag` 1 and every request completed at once, or `*flag` 0 and none.
///
/// # Safety
/// As `MPI_Waitall`, and `flag` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's promise (the array holds `count` handles).
    let first = unsafe { first_request(count, array_of_requests) };
    call("MPI_Testall", On::Request(first), |l| {
        // SAFETY: the caller's promise.
        let (reqs, sts) = unsafe { arrays(count, array_of_requests, array_of_statuses) }?;
        // SAFETY: the caller's promise.
        let f = unsafe { mem::out(flag) }?;
        match l.face.testall(reqs)? {
            None => {
                *f = 0;
                Ok(())
            }
            Some(done) => {
                *f = 1;
                finish_all(reqs, sts, done)
            }
        }
    })
}

/// `MPI_Waitany`: `*index` is the completed request's (which becomes `MPI_REQUEST_NULL`), or
/// `MPI_UNDEFINED` with the empty status when every request is null.
///
/// # Safety
/// `array_of_requests` holds `count` writable handles; `index` is null or writable; `status`
/// is null, `MPI_STATUS_IGNORE` or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's promise (the array holds `count` handles).
    let first = unsafe { first_request(count, array_of_requests) };
    call("MPI_Waitany", On::Request(first), |l| {
        let n = args::count(count)?;
        // SAFETY: the caller's promise.
        let reqs = unsafe { mem::array(array_of_requests, n) }?;
        // SAFETY: the caller's promise.
        let idx = unsafe { mem::out(index) }?;
        match l.face.waitany(reqs)? {
            None => {
                *idx = abi::MPI_UNDEFINED;
                // SAFETY: the caller's promise.
                unsafe { finish(None, status) }
            }
            Some((i, c)) => {
                reqs[i] = abi::MPI_REQUEST_NULL;
                *idx = c_int::try_from(i).map_err(|_| ErrorClass::Intern)?;
                // SAFETY: the caller's promise.
                unsafe { finish(Some(c), status) }
            }
        }
    })
}

// ---- collectives ---------------------------------------------------------------------------

/// `MPI_Barrier`.
#[no_mangle]
pub extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    call("MPI_Barrier", On::Comm(comm), |l| l.face.barrier(comm))
}

/// `MPI_Bcast`.
///
/// # Safety
/// `buffer` has room for `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Bcast", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (_, len) = typed(datatype, count)?;
        l.face.root(comm, root)?;
        // SAFETY: the buffer has room for `count` elements: `len` bytes.
        let buf = unsafe { mem::dst(buffer, len) }?;
        l.face.bcast(comm, buf, root)
    })
}

/// A reduction's operation and datatype, checked in MPI's order (datatype, operation, the
/// pair), and the count's bytes.
fn reduction(
    op: MPI_Op,
    datatype: MPI_Datatype,
    count: c_int,
) -> Result<(op::Op, Datatype, usize, usize), ErrorClass> {
    let n = args::count(count)?;
    let (op, dt) = op::check(op, datatype)?;
    Ok((op, dt, n, args::buffer_len(dt, count)?))
}

/// `MPI_Reduce` (`sendbuf` may be `MPI_IN_PLACE` at the root; `recvbuf` is read at the root
/// only).
///
/// # Safety
/// `sendbuf` holds `count` elements of `datatype` (or is `MPI_IN_PLACE` at the root); at the
/// root `recvbuf` has room for as many.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Reduce", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (op, dt, n, len) = reduction(op, datatype, count)?;
        let (_, at_root) = l.face.root(comm, root)?;
        let in_place = sendbuf == abi::MPI_IN_PLACE.cast_const();
        if in_place && !at_root {
            return Err(ErrorClass::Buffer);
        }
        if at_root && !in_place {
            apart(sendbuf, len, recvbuf, len)?;
        }
        let send = if in_place {
            None
        } else {
            // SAFETY: the send buffer holds `count` elements: `len` bytes.
            Some(unsafe { mem::src(sendbuf, len) }?)
        };
        let recv = if at_root {
            // SAFETY: at the root the receive buffer has room for `len` bytes, apart from
            // the send buffer (above).
            unsafe { mem::dst(recvbuf, len) }?
        } else {
            &mut []
        };
        l.face.reduce(comm, send, recv, n, dt, op, root)
    })
}

/// `MPI_Allreduce` (`sendbuf` may be `MPI_IN_PLACE`).
///
/// # Safety
/// `sendbuf` holds `count` elements of `datatype` (or is `MPI_IN_PLACE`); `recvbuf` has room
/// for as many.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Allreduce", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let (op, dt, n, len) = reduction(op, datatype, count)?;
        let in_place = sendbuf == abi::MPI_IN_PLACE.cast_const();
        if !in_place {
            apart(sendbuf, len, recvbuf, len)?;
        }
        let send = if in_place {
            None
        } else {
            // SAFETY: the send buffer holds `count` elements: `len` bytes.
            Some(unsafe { mem::src(sendbuf, len) }?)
        };
        // SAFETY: the receive buffer has room for `len` bytes, apart from the send buffer.
        let recv = unsafe { mem::dst(recvbuf, len) }?;
        l.face.allreduce(comm, send, recv, n, dt, op)
    })
}

/// Bytes of one rank's block on each side of a gather-like call, which must be the same
/// (the data moves as bytes: both sides use the same layout); `MPI_ERR_TRUNCATE` otherwise.
fn same_blocks(a: usize, b: usize) -> Result<(), ErrorClass> {
    if a == b {
        Ok(())
    } else {
        Err(ErrorClass::Truncate)
    }
}

/// `MPI_Gather` (`sendbuf` may be `MPI_IN_PLACE` at the root; the receive arguments count at
/// the root only).
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype`; at the root `recvbuf` has room for
/// `recvcount` elements of `recvtype` per rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Gather", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let in_place = sendbuf == abi::MPI_IN_PLACE.cast_const();
        let slen = if in_place {
            None
        } else {
            Some(typed(sendtype, sendcount)?.1)
        };
        let (_, at_root) = l.face.root(comm, root)?;
        let n = l.face.size(comm)? as usize;
        if in_place && !at_root {
            return Err(ErrorClass::Buffer);
        }
        let rlen = if at_root {
            let (_, block) = typed(recvtype, recvcount)?;
            if let Some(s) = slen {
                same_blocks(s, block)?;
            }
            block.checked_mul(n).ok_or(ErrorClass::Buffer)?
        } else {
            0
        };
        if let Some(s) = slen {
            apart(sendbuf, s, recvbuf, rlen)?;
        }
        let send = match slen {
            // SAFETY: the send buffer holds `sendcount` elements: `s` bytes.
            Some(s) => Some(unsafe { mem::src(sendbuf, s) }?),
            None => None,
        };
        // SAFETY: at the root the receive buffer has room for `recvcount` elements per rank:
        // `rlen` bytes, apart from the send buffer; nothing elsewhere.
        let recv = unsafe { mem::dst(recvbuf, rlen) }?;
        l.face.gather(comm, send, recv, root)
    })
}

/// `MPI_Scatter` (`recvbuf` may be `MPI_IN_PLACE` at the root; the send arguments count at
/// the root only).
///
/// # Safety
/// At the root `sendbuf` holds `sendcount` elements of `sendtype` per rank; `recvbuf` has
/// room for `recvcount` elements of `recvtype`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Scatter", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let in_place = recvbuf == abi::MPI_IN_PLACE;
        let rlen = if in_place {
            None
        } else {
            Some(typed(recvtype, recvcount)?.1)
        };
        let (_, at_root) = l.face.root(comm, root)?;
        let n = l.face.size(comm)? as usize;
        if in_place && !at_root {
            return Err(ErrorClass::Buffer);
        }
        let slen = if at_root {
            let (_, block) = typed(sendtype, sendcount)?;
            if let Some(r) = rlen {
                same_blocks(block, r)?;
            }
            block.checked_mul(n).ok_or(ErrorClass::Buffer)?
        } else {
            0
        };
        if let Some(r) = rlen {
            apart(sendbuf, slen, recvbuf, r)?;
        }
        // SAFETY: at the root the send buffer holds `sendcount` elements per rank: `slen`
        // bytes; nothing elsewhere.
        let send = unsafe { mem::src(sendbuf, slen) }?;
        let recv = match rlen {
            // SAFETY: the receive buffer has room for `recvcount` elements: `r` bytes, apart
            // from the send buffer.
            Some(r) => Some(unsafe { mem::dst(recvbuf, r) }?),
            None => None,
        };
        l.face.scatter(comm, send, recv, root)
    })
}

/// The send and receive buffers of `MPI_Allgather` and `MPI_Alltoall`: the send side's bytes
/// (None for `MPI_IN_PLACE`) and the receive buffer's, `n` blocks of `recvcount`; `per_rank`:
/// the send buffer holds a block per rank (all to all).
#[allow(clippy::too_many_arguments)]
fn all_sides(
    n: usize,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    per_rank: bool,
) -> Result<(Option<usize>, usize), ErrorClass> {
    let in_place = sendbuf == abi::MPI_IN_PLACE.cast_const();
    let sblock = if in_place {
        None
    } else {
        Some(typed(sendtype, sendcount)?.1)
    };
    let (_, rblock) = typed(recvtype, recvcount)?;
    if let Some(s) = sblock {
        same_blocks(s, rblock)?;
    }
    let rlen = rblock.checked_mul(n).ok_or(ErrorClass::Buffer)?;
    let slen = match sblock {
        Some(s) if per_rank => Some(s.checked_mul(n).ok_or(ErrorClass::Buffer)?),
        s => s,
    };
    if let Some(s) = slen {
        apart(sendbuf, s, recvbuf, rlen)?;
    }
    Ok((slen, rlen))
}

/// `MPI_Allgather` (`sendbuf` may be `MPI_IN_PLACE`: each rank's block is in `recvbuf`).
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype`; `recvbuf` has room for `recvcount`
/// elements of `recvtype` per rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Allgather", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let n = l.face.size(comm)? as usize;
        let (slen, rlen) = all_sides(
            n, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, false,
        )?;
        let send = match slen {
            // SAFETY: the send buffer holds `sendcount` elements: `s` bytes.
            Some(s) => Some(unsafe { mem::src(sendbuf, s) }?),
            None => None,
        };
        // SAFETY: the receive buffer has room for `rlen` bytes, apart from the send buffer.
        let recv = unsafe { mem::dst(recvbuf, rlen) }?;
        l.face.allgather(comm, send, recv)
    })
}

/// `MPI_Alltoall` (`sendbuf` may be `MPI_IN_PLACE`: the blocks to send are in `recvbuf`).
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype` per rank; `recvbuf` has room for
/// `recvcount` elements of `recvtype` per rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Alltoall", On::Comm(comm), |l| {
        l.face.comm(comm)?;
        let n = l.face.size(comm)? as usize;
        let (slen, rlen) = all_sides(
            n, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, true,
        )?;
        let send = match slen {
            // SAFETY: the send buffer holds `sendcount` elements per rank: `s` bytes.
            Some(s) => Some(unsafe { mem::src(sendbuf, s) }?),
            None => None,
        };
        // SAFETY: the receive buffer has room for `rlen` bytes, apart from the send buffer.
        let recv = unsafe { mem::dst(recvbuf, rlen) }?;
        l.face.alltoall(comm, send, recv)
    })
}
