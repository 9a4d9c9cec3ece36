//! The client side of the root task's protocol (`kestrel_abi::root`): what a program
//! started by `kestrel-root` calls instead of the privileged system calls.
//!
//! Every function is one IPC call to the root task. The requests that hand out memory
//! open the caller's receive window to the whole address space for the duration of the
//! call (the root task only maps at the `dest` the caller names).

use crate::ipc::{call_words, IpcErr};
use crate::rt;
use crate::sys::utcb;
use kestrel_abi::idl::{Transport, Words};
use kestrel_abi::root::{op, Client, RootError, LABEL};
use kestrel_abi::{Fpage, MapItem, Rights, ThreadId};

/// Why a request to the root task failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The IPC itself failed (no root task, or it died).
    Ipc(IpcErr),
    /// The root task refused.
    Refused(RootError),
}

impl From<RootError> for Error {
    fn from(e: RootError) -> Error {
        Error::Refused(e)
    }
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

/// The root task as the transport of its protocol's calls
/// ([`kestrel_abi::root::Client`]): one IPC call to [`ThreadId::ROOT`].
pub struct Root;

impl Transport<RootError> for Root {
    type Error = Error;
    fn call(&self, request: &Words, items: &[MapItem]) -> Result<Words, Error> {
        let maps = [op::RAM, op::DEVICE, op::ARCHIVE]
            .iter()
            .any(|&o| request.label == LABEL + o);
        let old = utcb().acceptor;
        if maps {
            utcb().acceptor = Fpage::complete(Rights::RWX).0;
        }
        let reply = call_words(ThreadId::ROOT, request, items);
        if maps {
            utcb().acceptor = old;
        }
        reply.map_err(Error::Ipc)
    }
}

/// `size` bytes of zeroed, physically contiguous RAM aligned to `2^align_log2`, mapped
/// read-write at `dest` in the caller's space; returns the physical address.
pub fn ram(dest: u32, size: u32, align_log2: u32) -> Result<u32, Error> {
    Root.ram(dest, size, align_log2).map(|r| r.phys)
}

/// `count` thread numbers for this program (version 1 ids).
pub fn threads(count: u32) -> Result<impl Iterator<Item = ThreadId>, Error> {
    let r = Root.threads(count)?;
    Ok((r.first..r.first + r.count).map(|n| ThreadId::new(n, 1)))
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
    Root.create_thread(id, crate::sys::my_id(), pager, priority, ip, sp)
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
    Root.create_thread(id, id, pager, priority, ip, sp)
        .map(|_| ())
}

/// Deletes thread `id` of this program (and its space with its last thread).
pub fn delete_thread(id: ThreadId) -> Result<(), Error> {
    Root.delete_thread(id).map(|_| ())
}

/// Maps device page `phys` (uncached) at the same address in the caller's space.
pub fn device(phys: u32) -> Result<(), Error> {
    Root.device(phys).map(|_| ())
}

/// Attaches interrupt line `line` to `handler` (a thread of this program).
pub fn interrupt(line: u32, handler: ThreadId, flags: u32) -> Result<(), Error> {
    Root.interrupt(line, handler, flags).map(|_| ())
}

/// Creates vCPU `id` in a new VM space with the caller as its pager and VMM.
pub fn vcpu(id: ThreadId, priority: u32) -> Result<(), Error> {
    Root.vcpu(id, priority).map(|_| ())
}

/// Maps the boot-module archive read-only at `dest` (page aligned) and returns it.
pub fn archive(dest: u32) -> Result<&'static [u8], Error> {
    let r = Root.archive(dest)?;
    // SAFETY: the root task mapped `size` bytes from `dest + offset` read-only into this
    // space (the reply says so) and never unmaps them; they are only read.
    Ok(unsafe { core::slice::from_raw_parts((dest + r.offset) as *const u8, r.size as usize) })
}

/// The first thread of the running program named `name` (its module name), e.g. the
/// fabric service `kestrel-fabric`.
pub fn lookup(name: &str) -> Result<ThreadId, Error> {
    Root.lookup(kestrel_abi::root::name_words(name))
        .map(|r| r.id)
}

/// What tenant `tenant` (a VM number, or `kestrel_abi::grants::TENANT_SELF`) of the
/// program of thread `program` may do on the fabric (`kestrel_abi::grants`).
pub fn fabric_grant(
    program: ThreadId,
    tenant: u32,
) -> Result<kestrel_abi::root::reply::FabricGrant, Error> {
    Root.fabric_grant(program, tenant)
}

/// Makes thread `id` of this program (alone in its space) a Linux personality thread with
/// the caller as its exception handler (needs the Linux right, `root.linux=`).
pub fn linux(id: ThreadId) -> Result<(), Error> {
    Root.linux(id).map(|_| ())
}

/// How many other programs the root task started are still running.
pub fn running() -> Result<u32, Error> {
    Root.running().map(|r| r.others)
}

/// Tells the root task this program is done; the root deletes its threads, this one
/// included. Returns only if the root task cannot be reached, by halting the thread.
pub fn exit(code: u32) -> ! {
    let _ = Root.exit(code);
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
