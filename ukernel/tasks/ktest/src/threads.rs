//! Thread numbers, creating and deleting test threads, and bounded waiting.
//!
//! Thread numbers are reused: the allocator hands out the lowest free number with a
//! new version each time, so a stale id of a deleted thread never names its
//! successor. A [`Thread`] deletes its thread (and with the last thread, its
//! space), frees its private memory in the pager and releases its number when
//! dropped, so a test cleans up on every path, including early `?` returns.

use crate::common::{call_failed, note, WAIT};
use crate::pager::{self, PAGER};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::{
    exreg, tcflags, KError, ThreadId, Timeout, FIRST_THREAD_NO, MAX_THREAD_NO, ROOT_PRIORITY,
};
use kestrel_user::sys::{self, ExRegs};
use kestrel_user::{ipc, rt};

/// Priority of ordinary test threads: the root's, so they run whenever it blocks.
pub const CHILD_PRIORITY: u32 = ROOT_PRIORITY;

const NUMBERS: usize = (MAX_THREAD_NO - FIRST_THREAD_NO) as usize;
/// Numbers the tests never get: the root's and the pager's.
const RESERVED: u32 = 2;

// Only the root thread allocates; atomics are simply the safe way to have statics.
static IN_USE: [AtomicU32; NUMBERS / 32] = [const { AtomicU32::new(0) }; NUMBERS / 32];
static VERSION: [AtomicU32; NUMBERS] = [const { AtomicU32::new(0) }; NUMBERS];

fn alloc_id() -> Result<ThreadId, &'static str> {
    for i in RESERVED as usize..NUMBERS {
        let (word, bit) = (&IN_USE[i / 32], 1u32 << (i % 32));
        if word.load(Relaxed) & bit == 0 {
            word.store(word.load(Relaxed) | bit, Relaxed);
            // Versions are 14 bits and never 0 (ThreadId::new maps 0 to 1).
            let v = VERSION[i].load(Relaxed) % 0x3fff + 1;
            VERSION[i].store(v, Relaxed);
            return Ok(ThreadId::new(FIRST_THREAD_NO + i as u32, v));
        }
    }
    Err("out of thread numbers (earlier tests leaked threads)")
}

fn release(id: ThreadId) {
    let i = (id.number() - FIRST_THREAD_NO) as usize;
    IN_USE[i / 32].fetch_and(!(1 << (i % 32)), Relaxed);
}

/// Thread numbers currently held by tests.
pub fn numbers_in_use() -> u32 {
    IN_USE.iter().map(|w| w.load(Relaxed).count_ones()).sum()
}

/// A thread created by a test, deleted when dropped.
pub struct Thread {
    id: ThreadId,
}

impl Thread {
    /// Reserves a fresh id without creating a thread (for tests that need an id
    /// nobody uses, or create the thread themselves).
    pub fn reserve() -> Result<Thread, &'static str> {
        Ok(Thread { id: alloc_id()? })
    }

    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// A thread in the root space running `entry(arg)` on its runtime pool stack,
    /// paged by the test pager, without an exception handler.
    pub fn local(
        entry: extern "C" fn(u32),
        arg: u32,
        priority: u32,
    ) -> Result<Thread, &'static str> {
        let t = Thread::reserve()?;
        rt::spawn(t.id, entry, arg, priority, PAGER)
            .map_err(|e| call_failed("spawn in the root space", e))?;
        Ok(t)
    }

    /// The first thread of a new address space, starting in the function at `entry`
    /// with `arg`; its stack and code come from the pager through page faults, and
    /// the root is its exception handler.
    pub fn space(entry: u32, arg: u32) -> Result<Thread, &'static str> {
        let t = Thread::reserve()?;
        t.start_in(t.id, entry, arg)?;
        Ok(t)
    }

    /// A further thread in the address space of `peer`, otherwise like [`Thread::space`].
    pub fn in_space_of(peer: &Thread, entry: u32, arg: u32) -> Result<Thread, &'static str> {
        let t = Thread::reserve()?;
        t.start_in(peer.id, entry, arg)?;
        Ok(t)
    }

    /// The first thread of a new address space like [`Thread::space`], at `priority`,
    /// scheduled by `scheduler` (nil: the root), with the space's priority ceiling
    /// `ceiling` (`None`: the ceiling of the scheduler's space). The kernel's refusal comes
    /// back as it is.
    pub fn space_with(
        entry: u32,
        arg: u32,
        priority: u32,
        scheduler: ThreadId,
        ceiling: Option<u32>,
    ) -> Result<Thread, Result<KError, &'static str>> {
        let t = Thread::reserve().map_err(Err)?;
        let n = t.id.number();
        let sp = pager::prepare_stack(n, entry, arg).map_err(Err)?;
        let (flags, c) = match ceiling {
            Some(c) => (tcflags::CEILING, c),
            None => (0, 0),
        };
        let utcb = rt::utcb_addr_for(n);
        sys::thread_control_all(t.id, t.id, priority, PAGER, utcb, flags, scheduler, c)
            .map_err(Ok)?;
        t.start(sp).map_err(Err)?;
        Ok(t)
    }

    fn start_in(&self, space: ThreadId, entry: u32, arg: u32) -> Result<(), &'static str> {
        let n = self.id.number();
        let sp = pager::prepare_stack(n, entry, arg)?;
        sys::thread_control(self.id, space, CHILD_PRIORITY, PAGER, rt::utcb_addr_for(n))
            .map_err(|e| call_failed("ThreadControl (create)", e))?;
        self.start(sp)
    }

    /// Starts the created thread at the runtime's entry stub with stack `sp`, the root as
    /// its exception handler.
    fn start(&self, sp: u32) -> Result<(), &'static str> {
        let control = exreg::START | exreg::SET_IP | exreg::SET_SP | exreg::SET_EXC_HANDLER;
        sys::exchange_registers(
            self.id,
            control,
            sp,
            rt::thread_entry_stub(),
            ThreadId::NIL,
            ThreadId::ROOT,
        )
        .map_err(|e| call_failed("ExchangeRegisters (start)", e))?;
        Ok(())
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        let gone = match sys::thread_control(self.id, ThreadId::NIL, 0, ThreadId::NIL, 0) {
            // InvalidThread: never created (a reserved id, or creation failed).
            Ok(()) | Err(kestrel_abi::KError::InvalidThread) => true,
            Err(e) => {
                note(format_args!(
                    "cannot delete thread {:?}: {:?}; its number stays taken",
                    self.id, e
                ));
                false
            }
        };
        if let Err(why) = pager::forget(self.id.number()) {
            note(format_args!(
                "pager could not forget thread {:?}: {}",
                self.id, why
            ));
        }
        if gone {
            release(self.id);
        }
    }
}

/// The address of an `extern "C" fn(u32)`, as a thread entry point.
pub fn entry(f: extern "C" fn(u32)) -> u32 {
    f as usize as u32
}

/// Reads `id`'s registers without changing anything.
pub fn registers(id: ThreadId) -> Result<ExRegs, &'static str> {
    sys::exchange_registers(id, 0, 0, 0, ThreadId::NIL, ThreadId::NIL)
        .map_err(|e| call_failed("ExchangeRegisters (read)", e))
}

/// Blocks for about `us` microseconds: a receive from a thread that never sends to
/// us (the pager only ever replies) ends in its timeout.
pub fn sleep_us(us: u32) {
    let _ = ipc::receive(PAGER, Timeout::from_us(us));
}

/// Waits (at most about [`WAIT`]) until `id`'s state has one of the `mask` bits
/// (`exreg::STATE_*`); returns the state.
pub fn wait_for_state(id: ThreadId, mask: u32) -> Result<u32, &'static str> {
    for _ in 0..WAIT.as_us() / 1000 {
        let state = registers(id)?.state;
        if state & mask != 0 {
            return Ok(state);
        }
        sleep_us(1000);
    }
    note(format_args!(
        "thread {id:?} never reached state mask {mask:#x}"
    ));
    Err("thread did not reach the expected state")
}

/// A thread entry that blocks forever in a receive nobody answers.
pub extern "C" fn block_forever(_: u32) {
    loop {
        let _ = ipc::receive(PAGER, Timeout::NEVER);
    }
}
