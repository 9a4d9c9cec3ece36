//! The puppet: a thread in a child address space that performs memory and IPC
//! operations on command, so that a test in the root can script what another space
//! does ("read this address", "map this page to that thread", ...).
//!
//! Protocol: the root, or another puppet, calls the puppet with an [`op`] label; the
//! puppet answers with label `lbl::OK` and the words listed per op. Map and grant
//! items sent to a puppet land in its receive window at `SHARED_BASE`. An op that
//! faults on a page the pager refuses never answers: the caller's bounded wait times
//! out, which is how tests observe that a revoked mapping is gone.
//!
//! The first half of this file runs in the child space (only stack, IPC and system
//! calls; no statics); the second half is the root's side.

use crate::common::{
    call_for, ipc_code, ipc_failed, kerr_code, lbl, note, set_name, TestResult, QUIET, WAIT,
};
use crate::layout::{SHARED_BASE, SHARED_LOG2};
use kestrel_abi::{
    exc, irqflags, kinfo, label, spacectl, Fpage, IpcError, IpcPhase, MapItem, Rights, ThreadId,
    Timeout, MAX_THREAD_NO, NUM_MRS,
};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::sys;

/// Command labels.
pub mod op {
    /// MR1 = address → MR1 = the word there.
    pub const READ: u16 = 0x0300;
    /// MR1 = address, MR2 = value → (nothing).
    pub const WRITE: u16 = 0x0301;
    /// Carries map/grant items, which land in the puppet's window → MR1 = typed words.
    pub const TAKE: u16 = 0x0302;
    /// MR1 = destination thread, MR2 = address, MR3 = rights, MR4 = 1 to grant:
    /// sends the page at `address` to the destination as a `TAKE` → MR1 = IPC error code.
    pub const MAP_TO: u16 = 0x0303;
    /// MR1 = address, MR2 = rights, MR3 = unmap flags → MR1 = KError code.
    pub const UNMAP: u16 = 0x0304;
    /// Any words → the same words, each plus one.
    pub const ECHO: u16 = 0x0305;
    /// MR1 = destination thread, MR2 = x: calls the destination with `ECHO [x]`
    /// → MR1 = IPC error code, MR2 = the echoed word.
    pub const RELAY: u16 = 0x0306;
    /// Tries the root-only system calls → MR1..MR8 = KError codes (see `privileged_calls`).
    pub const PRIV: u16 = 0x0307;
    /// MR1 = address, MR2 = length: `KDebug(WRITE)` of that buffer → MR1 = KError code.
    pub const KDEBUG: u16 = 0x0308;
    /// → MR1 = the puppet's id as its UTCB tells it.
    pub const WHOAMI: u16 = 0x0309;
    /// Name thread MR1 `x` (KDebug SET_NAME) → MR1 = status.
    pub const NAME: u16 = 0x030A;
    /// MR1 = destination thread, MR2 = priority, MR3 = timeslice (µs):
    /// `Schedule` → MR1 = KError code.
    pub const SCHEDULE: u16 = 0x030B;
}

/// The window where map items sent to puppets land.
pub fn window() -> Fpage {
    Fpage::new(SHARED_BASE, SHARED_LOG2, Rights::RWX)
        .expect("SHARED_BASE is aligned to the window size")
}

/// Entry point of a puppet thread (in a child space).
pub extern "C" fn puppet_main(_: u32) {
    set_name("puppet");
    ipc::set_acceptor(window());
    let mut pending: Option<(ThreadId, Msg)> = None;
    loop {
        let next = match pending.take() {
            Some((to, reply)) => ipc::reply_wait(to, &reply),
            None => ipc::receive(ThreadId::ANY, Timeout::NEVER),
        };
        // A failed reply (the caller gave up waiting) just means: wait afresh.
        if let Ok((from, msg)) = next {
            pending = Some((from, perform(&msg)));
        }
    }
}

fn perform(m: &Msg) -> Msg {
    let ok = |words: &[u32]| Msg::with_words(lbl::OK, words);
    match m.label() {
        op::READ => {
            // SAFETY: deliberately touches whatever the command names; a bad address
            // becomes a page fault the pager decides about, never undefined behaviour
            // in this thread's own data (it has no Rust objects there).
            ok(&[unsafe { (m.mr(1) as *const u32).read_volatile() }])
        }
        op::WRITE => {
            // SAFETY: as for READ.
            unsafe { (m.mr(1) as *mut u32).write_volatile(m.mr(2)) };
            ok(&[])
        }
        op::TAKE => ok(&[m.tag.typed() as u32]),
        op::MAP_TO => {
            let (dest, addr, rights, grant) = (
                ThreadId(m.mr(1)),
                m.mr(2),
                Rights(m.mr(3) as u8),
                m.mr(4) != 0,
            );
            let page = Fpage::page(addr, rights);
            let mut take = Msg::new(op::TAKE);
            take.push_item(if grant {
                MapItem::grant(addr, page)
            } else {
                MapItem::map(addr, page)
            });
            ok(&[ipc_code(&call_for(dest, &take, WAIT))])
        }
        op::UNMAP => {
            let page = Fpage::page(m.mr(1), Rights(m.mr(2) as u8));
            ok(&[kerr_code(&sys::unmap(page, m.mr(3)))])
        }
        op::ECHO => {
            let n = m.tag.untyped().min(NUM_MRS - 1);
            let mut words = [0u32; NUM_MRS - 1];
            for (i, w) in words.iter_mut().enumerate().take(n) {
                *w = m.mr(i + 1).wrapping_add(1);
            }
            ok(&words[..n])
        }
        op::RELAY => {
            let r = call_for(
                ThreadId(m.mr(1)),
                &Msg::with_words(op::ECHO, &[m.mr(2)]),
                WAIT,
            );
            let echoed = r.as_ref().map(|reply| reply.mr(1)).unwrap_or(0);
            ok(&[ipc_code(&r), echoed])
        }
        op::PRIV => ok(&privileged_calls()),
        op::KDEBUG => ok(&[kerr_code(&sys::kdebug_write_raw(m.mr(1), m.mr(2)))]),
        op::WHOAMI => ok(&[sys::my_id().0]),
        op::NAME => ok(&[kerr_code(&sys::set_thread_name(ThreadId(m.mr(1)), "x"))]),
        op::SCHEDULE => ok(&[kerr_code(&sys::schedule(
            ThreadId(m.mr(1)),
            m.mr(2),
            m.mr(3),
        ))]),
        _ => Msg::new(0),
    }
}

/// Entry point of a greedy thread (in a child space): tries to raise itself to the highest
/// priority, reports `[KError code]` to the root, then spins forever.
pub extern "C" fn greedy_main(_: u32) {
    let me = sys::my_id();
    let code = kerr_code(&sys::schedule(me, kestrel_abi::MAX_PRIORITY, 0));
    crate::common::report(&[code]);
    loop {
        core::hint::spin_loop();
    }
}

/// Every call reserved to the root task, made harmless should the kernel wrongly
/// allow it (except SHUTDOWN, whose success would end the run loudly), followed by
/// two the caller may or may not make.
fn privileged_calls() -> [u32; 8] {
    let me = sys::my_id();
    let nobody = ThreadId::new(MAX_THREAD_NO - 1, 0x3fff);
    [
        // Delete a thread that does not exist.
        kerr_code(&sys::thread_control(
            nobody,
            ThreadId::NIL,
            0,
            ThreadId::NIL,
            0,
        )),
        kerr_code(&sys::space_control(me, spacectl::GET_PID, 0)),
        // Detach the highest interrupt line (attached to nobody).
        kerr_code(&sys::interrupt_control(31, ThreadId::NIL, irqflags::EDGE)),
        kerr_code(&sys::kernel_info(kinfo::MEMORY)),
        sys::shutdown(99) as u32,
        // Allowed to everyone:
        kerr_code(&sys::kernel_info(kinfo::VERSION)),
        // Only within the own space, or by the root (ExchangeRegisters); only by the
        // thread's scheduler, or by the root (Schedule):
        kerr_code(&sys::exchange_registers(
            ThreadId::ROOT,
            0,
            0,
            0,
            ThreadId::NIL,
            ThreadId::NIL,
        )),
        kerr_code(&sys::schedule(
            ThreadId::ROOT,
            kestrel_abi::ROOT_PRIORITY,
            0,
        )),
    ]
}

// ---------------------------------------------------------------------------------
// Root side.
// ---------------------------------------------------------------------------------

/// Sends command `op` with `words` to puppet `p` and returns its answer.
pub fn command(p: ThreadId, op: u16, words: &[u32]) -> Result<Msg, &'static str> {
    send_command(p, &Msg::with_words(op, words))
}

fn send_command(p: ThreadId, m: &Msg) -> Result<Msg, &'static str> {
    let reply = call_for(p, m, WAIT).map_err(|e| ipc_failed("the puppet did not answer", e))?;
    if reply.label() == label::EXCEPTION {
        note(format_args!(
            "puppet {p:?} took exception class {} at ip {:#x} (dear {:#x})",
            reply.mr(exc::CLASS),
            reply.mr(exc::IP),
            reply.mr(exc::DEAR)
        ));
        return Err("the puppet took an exception");
    }
    ensure!(
        reply.label() == lbl::OK,
        "the puppet did not understand a command",
        "label {:#06x}",
        reply.label()
    );
    Ok(reply)
}

pub fn read(p: ThreadId, addr: u32) -> Result<u32, &'static str> {
    Ok(command(p, op::READ, &[addr])?.mr(1))
}

pub fn write(p: ThreadId, addr: u32, value: u32) -> TestResult {
    command(p, op::WRITE, &[addr, value]).map(|_| ())
}

/// Maps the root's page `src` with `rights` to `addr` in puppet `p`.
pub fn give(p: ThreadId, addr: u32, src: u32, rights: Rights) -> TestResult {
    let mut m = Msg::new(op::TAKE);
    m.push_item(MapItem::map(addr, Fpage::page(src, rights)));
    let reply = send_command(p, &m)?;
    ensure!(
        reply.mr(1) == 2,
        "the puppet received no map item",
        "typed words {}",
        reply.mr(1)
    );
    Ok(())
}

/// Maps the root's `2^log2` bytes at `src` (naturally aligned) with `rights` to `addr` in
/// puppet `p`.
pub fn give_block(p: ThreadId, addr: u32, src: u32, log2: u32, rights: Rights) -> TestResult {
    let fp = Fpage::new(src, log2, rights).ok_or("no such fpage")?;
    let mut m = Msg::new(op::TAKE);
    m.push_item(MapItem::map(addr, fp));
    let reply = send_command(p, &m)?;
    ensure!(reply.mr(1) == 2, "the puppet received no map item");
    Ok(())
}

/// Has puppet `p` send its page at `addr` on to puppet `dest`.
pub fn pass_on(p: ThreadId, dest: ThreadId, addr: u32, rights: Rights, grant: bool) -> TestResult {
    let code = command(
        p,
        op::MAP_TO,
        &[dest.0, addr, rights.0 as u32, grant as u32],
    )?
    .mr(1);
    ensure!(
        code == 0,
        "passing a page between puppets failed",
        "IPC error code {code}"
    );
    Ok(())
}

/// Has puppet `p` unmap its own page at `addr`; returns the KError code.
pub fn unmap(p: ThreadId, addr: u32, rights: Rights, flags: u32) -> Result<u32, &'static str> {
    Ok(command(p, op::UNMAP, &[addr, rights.0 as u32, flags])?.mr(1))
}

/// Checks that the command gets no answer: the puppet must be stuck in a page
/// fault that the pager refuses.
fn expect_stuck(p: ThreadId, m: &Msg, what: &'static str) -> TestResult {
    match call_for(p, m, QUIET) {
        Err(e) if e.error == IpcError::Timeout && e.phase == IpcPhase::Receive => Ok(()),
        Err(e) => Err(ipc_failed(what, e)),
        Ok(reply) => {
            note(format_args!(
                "answer label {:#06x}, MR1 {:#x}",
                reply.label(),
                reply.mr(1)
            ));
            Err(what)
        }
    }
}

/// The puppet reading `addr` must block on a page fault.
pub fn read_blocks(p: ThreadId, addr: u32) -> TestResult {
    expect_stuck(
        p,
        &Msg::with_words(op::READ, &[addr]),
        "the puppet could still read the page",
    )
}

/// The puppet writing `addr` must block on a page fault.
pub fn write_blocks(p: ThreadId, addr: u32) -> TestResult {
    expect_stuck(
        p,
        &Msg::with_words(op::WRITE, &[addr, 0xdead]),
        "the puppet could still write the page",
    )
}

/// Has puppet `p` call `dest` with an echo of `x`; returns what came back.
pub fn relay(p: ThreadId, dest: ThreadId, x: u32) -> Result<u32, &'static str> {
    let reply = command(p, op::RELAY, &[dest.0, x])?;
    ensure!(
        reply.mr(1) == 0,
        "the relayed call failed",
        "IPC error code {}",
        reply.mr(1)
    );
    Ok(reply.mr(2))
}

/// Entry address of a puppet, for `Thread::space`.
pub fn entry() -> u32 {
    crate::threads::entry(puppet_main)
}

/// Has puppet `p` call `Schedule(dest, prio, timeslice_us)`; returns the KError code.
pub fn schedule(
    p: ThreadId,
    dest: ThreadId,
    prio: u32,
    timeslice_us: u32,
) -> Result<u32, &'static str> {
    Ok(command(p, op::SCHEDULE, &[dest.0, prio, timeslice_us])?.mr(1))
}
