//! The client side of the root task's protocol (`kestrel_abi::root`): what a program
//! started by `kestrel-root` calls instead of the privileged system calls.
//!
//! Every function is one IPC call to the root task. The requests that hand out memory
//! open the caller's receive window to the whole address space for the duration of the
//! call (the root task only maps at the `dest` the caller names).

use crate::ipc::{call, IpcErr, Msg};
use crate::rt;
use crate::sys::utcb;
use kestrel_abi::root::{decode_reply, Reply, Request, RootError};
use kestrel_abi::{Fpage, Rights, ThreadId};

/// Why a request to the root task failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The IPC itself failed (no root task, or it died).
    Ipc(IpcErr),
    /// The root task refused.
    Refused(RootError),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Ipc(e) => write!(
                f,
                "IPC to the root task failed: {:?} ({:?} phase)",
                e.error, e.phase
            ),
            Error::Refused(e) => write!(f, "the root task refused: {e}"),
        }
    }
}

/// Sends `r` to the root task and decodes its reply.
pub fn request(r: Request) -> Result<Reply, Error> {
    let w = r.encode();
    let msg = Msg::with_words(w.label, w.words());
    let maps = matches!(
        r,
        Request::Ram { .. } | Request::Device { .. } | Request::Archive { .. }
    );
    let old = utcb().acceptor;
    if maps {
        utcb().acceptor = Fpage::complete(Rights::RWX).0;
    }
    let reply = call(ThreadId::ROOT, &msg);
    if maps {
        utcb().acceptor = old;
    }
    let reply = reply.map_err(Error::Ipc)?;
    let n = reply.tag.untyped().min(kestrel_abi::root::MAX_WORDS);
    let words: [u32; kestrel_abi::root::MAX_WORDS] = core::array::from_fn(|i| reply.mr(i + 1));
    decode_reply(r.op(), reply.label(), &words[..n]).map_err(Error::Refused)
}

/// `size` bytes of zeroed, physically contiguous RAM aligned to `2^align_log2`, mapped
/// read-write at `dest` in the caller's space; returns the physical address.
pub fn ram(dest: u32, size: u32, align_log2: u32) -> Result<u32, Error> {
    match request(Request::Ram {
        dest,
        size,
        align_log2,
    })? {
        Reply::Ram { phys } => Ok(phys),
        _ => Err(Error::Refused(RootError::BadRequest)),
    }
}

/// `count` thread numbers for this program (version 1 ids).
pub fn threads(count: u32) -> Result<impl Iterator<Item = ThreadId>, Error> {
    match request(Request::Threads { count })? {
        Reply::Threads { first, count } => Ok((first..first + count).map(|n| ThreadId::new(n, 1))),
        _ => Err(Error::Refused(RootError::BadRequest)),
    }
}

/// One thread number for this program.
pub fn thread() -> Result<ThreadId, Error> {
    threads(1)?
        .next()
        .ok_or(Error::Refused(RootError::NoResources))
}

/// Creates thread `id` in the caller's space running `entry(arg)` on its runtime pool
/// stack (as [`rt::spawn`] does for the root task).
pub fn spawn(
    id: ThreadId,
    entry: extern "C" fn(u32),
    arg: u32,
    priority: u32,
    pager: ThreadId,
) -> Result<(), Error> {
    let sp = rt::prepare_pool_stack(id.number(), entry, arg);
    let ip = rt::thread_entry_stub();
    request(Request::CreateThread {
        id,
        space: crate::sys::my_id(),
        pager,
        priority,
        ip,
        sp,
    })
    .map(|_| ())
}

/// Creates thread `id` as the first thread of a new address space, starting at `ip` with
/// stack pointer `sp`; `pager` (a thread of this program) resolves its page faults.
pub fn spawn_space(
    id: ThreadId,
    ip: u32,
    sp: u32,
    priority: u32,
    pager: ThreadId,
) -> Result<(), Error> {
    request(Request::CreateThread {
        id,
        space: id,
        pager,
        priority,
        ip,
        sp,
    })
    .map(|_| ())
}

/// Deletes thread `id` of this program (and its space with its last thread).
pub fn delete_thread(id: ThreadId) -> Result<(), Error> {
    request(Request::DeleteThread { id }).map(|_| ())
}

/// Maps device page `phys` (uncached) at the same address in the caller's space.
pub fn device(phys: u32) -> Result<(), Error> {
    request(Request::Device { phys }).map(|_| ())
}

/// Attaches interrupt line `line` to `handler` (a thread of this program).
pub fn interrupt(line: u32, handler: ThreadId, flags: u32) -> Result<(), Error> {
    request(Request::Interrupt {
        line,
        handler,
        flags,
    })
    .map(|_| ())
}

/// Creates vCPU `id` in a new VM space with the caller as its pager and VMM.
pub fn vcpu(id: ThreadId, priority: u32) -> Result<(), Error> {
    request(Request::Vcpu { id, priority }).map(|_| ())
}

/// Maps the boot-module archive read-only at `dest` (page aligned) and returns it.
pub fn archive(dest: u32) -> Result<&'static [u8], Error> {
    match request(Request::Archive { dest })? {
        Reply::Archive { offset, size } => {
            // SAFETY: the root task mapped `size` bytes from `dest + offset` read-only
            // into this space (the reply says so) and never unmaps them; they are only read.
            Ok(unsafe { core::slice::from_raw_parts((dest + offset) as *const u8, size as usize) })
        }
        _ => Err(Error::Refused(RootError::BadRequest)),
    }
}

/// The first thread of the running program named `name` (its module name), e.g. the
/// fabric service `kestrel-fabric`.
pub fn lookup(name: &str) -> Result<ThreadId, Error> {
    match request(Request::Lookup {
        name: kestrel_abi::root::name_words(name),
    })? {
        Reply::Thread { id } => Ok(id),
        _ => Err(Error::Refused(RootError::BadRequest)),
    }
}

/// Tells the root task this program is done; the root deletes its threads, this one
/// included. Returns only if the root task cannot be reached, by halting the thread.
pub fn exit(code: u32) -> ! {
    let _ = request(Request::Exit { code });
    loop {
        let _ = crate::sys::exchange_registers(
            crate::sys::my_id(),
            kestrel_abi::exreg::HALT,
            0,
            0,
            ThreadId::NIL,
            ThreadId::NIL,
        );
    }
}
