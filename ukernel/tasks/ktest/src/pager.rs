//! The test pager: one thread in the root space that resolves the page faults of
//! every child space, owns the physical frames, and serves the tests' requests.
//!
//! Fault policy, by region (see `layout`), with the pager helpers every Kestrel pager
//! shares (`kestrel_user::pager`):
//! - this task's image: mapped 1:1 from the root's own pages, code RX and the rest
//!   RW, so child threads can run functions of this binary (`share_image`);
//! - child stacks and the heap region: a fresh zeroed frame per (thread, page);
//! - the read-only region: one pattern page, read-only;
//! - anything else, or an access the region does not allow: refused.
//!
//! A refused fault is counted and left unanswered: the faulter stays blocked until
//! its test deletes it, and the test learns about the fault from [`stats`]. Every
//! fault updates the faulter's [`Stats`], keyed by thread number.
//!
//! Requests (labels in [`req`]) are accepted from the root thread only and always
//! answered, with label `lbl::OK` or [`REFUSED`].

use crate::common::{call_for, ipc_failed, lbl, set_name, WAIT};
use crate::layout::{is_private, is_read_only, stack_top, RO_PATTERN};
use core::cell::UnsafeCell;
use kestrel_abi::{
    Fpage, KError, Rights, ThreadId, FIRST_THREAD_NO, MAX_THREAD_NO, PAGE_SIZE, SIGMA0_WINDOW,
    SIGMA0_WINDOW_SIZE,
};
use kestrel_user::ipc::Msg;
use kestrel_user::mem::{self, FrameAllocator, PageFault};
use kestrel_user::pager::{image, share_image, Frames, PrivatePages};
use kestrel_user::{println, rt, sys};

/// The pager's thread id: the first number after the root's, reserved for it.
pub const PAGER: ThreadId = ThreadId::new(FIRST_THREAD_NO + 1, 1);
/// Above every test thread, so faults are served as soon as they happen.
const PAGER_PRIORITY: u32 = 200;

/// Request labels (root → pager).
pub mod req {
    /// → MR1 = a zeroed frame (its address in the root's sigma0 window).
    pub const ALLOC: u16 = 0x0100;
    /// MR1 = frame from `ALLOC`: revoke its mappings in other spaces and free it.
    pub const FREE: u16 = 0x0101;
    /// MR1 = thread number, MR2 = entry, MR3 = argument → MR1 = initial stack pointer.
    /// Puts `entry, arg` where the runtime's thread-start stub expects them on the
    /// thread's (not yet mapped) stack, and forgets the number's old state.
    pub const PREPARE: u16 = 0x0102;
    /// MR1 = thread number: revoke and free its private frames, clear its stats.
    pub const FORGET: u16 = 0x0103;
    /// MR1 = thread number → MR1..MR6 = [`super::Stats`] words.
    pub const STATS: u16 = 0x0104;
}

/// Reply label for a request the pager could not carry out.
pub const REFUSED: u16 = 0x0002;

/// What the pager saw of one thread's page faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Page faults received.
    pub faults: u32,
    /// Faults resolved with a private (stack or heap) frame.
    pub private: u32,
    /// Faults refused (the thread is still blocked on the last one).
    pub refused: u32,
    pub last_addr: u32,
    /// Access of the last fault: r = 4, w = 2, x = 1.
    pub last_access: u32,
    pub last_ip: u32,
}

impl Stats {
    const fn words(&self) -> [u32; 6] {
        [
            self.faults,
            self.private,
            self.refused,
            self.last_addr,
            self.last_access,
            self.last_ip,
        ]
    }
    fn from_msg(m: &Msg) -> Stats {
        Stats {
            faults: m.mr(1),
            private: m.mr(2),
            refused: m.mr(3),
            last_addr: m.mr(4),
            last_access: m.mr(5),
            last_ip: m.mr(6),
        }
    }
    /// True if the last fault was a write.
    pub const fn last_was_write(&self) -> bool {
        self.last_access & Rights::W.0 as u32 != 0
    }
}

// ---------------------------------------------------------------------------------
// Root side: starting the pager and talking to it.
// ---------------------------------------------------------------------------------

/// Starts the pager thread. Called once, before any test.
pub fn start() -> Result<(), KError> {
    rt::spawn(PAGER, pager_main, 0, PAGER_PRIORITY, ThreadId::NIL)
}

fn request(label: u16, words: &[u32]) -> Result<Msg, &'static str> {
    let reply = call_for(PAGER, &Msg::with_words(label, words), WAIT)
        .map_err(|e| ipc_failed("the pager did not answer", e))?;
    ensure!(
        reply.label() == lbl::OK,
        "the pager refused a request",
        "request {label:#06x}"
    );
    Ok(reply)
}

/// Prepares the stack of child thread number `n` so that it starts in `entry(arg)`
/// through the runtime's thread-start stub; returns the initial stack pointer.
pub fn prepare_stack(n: u32, entry: u32, arg: u32) -> Result<u32, &'static str> {
    Ok(request(req::PREPARE, &[n, entry, arg])?.mr(1))
}

/// Frees the private memory of thread number `n` and clears its stats.
pub fn forget(n: u32) -> Result<(), &'static str> {
    request(req::FORGET, &[n]).map(|_| ())
}

/// The pager's record of `thread`'s page faults.
pub fn stats(thread: ThreadId) -> Result<Stats, &'static str> {
    Ok(Stats::from_msg(&request(req::STATS, &[thread.number()])?))
}

/// A zeroed physical frame, visible to the root at [`Frame::va`]; its mappings in
/// other spaces are revoked and the frame returned to the pager when dropped.
pub struct Frame {
    va: u32,
}

impl Frame {
    pub fn alloc() -> Result<Frame, &'static str> {
        Ok(Frame {
            va: request(req::ALLOC, &[])?.mr(1),
        })
    }

    /// The frame's address in the root space (the source of map items).
    pub fn va(&self) -> u32 {
        self.va
    }

    fn word(&self, offset: u32) -> *mut u32 {
        assert!(
            offset < PAGE_SIZE && offset.is_multiple_of(4),
            "frame offset out of range"
        );
        (self.va + offset) as *mut u32
    }

    pub fn read(&self, offset: u32) -> u32 {
        // SAFETY: `word` stays inside this frame, which the pager handed to us alone;
        // it is RAM in the root's sigma0 window. Volatile: children write it through
        // their own mappings.
        unsafe { self.word(offset).read_volatile() }
    }

    pub fn write(&self, offset: u32, value: u32) {
        // SAFETY: as in `read`.
        unsafe { self.word(offset).write_volatile(value) }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Err(why) = request(req::FREE, &[self.va]) {
            println!("ktest:   frame {:#x} not freed: {}", self.va, why);
        }
    }
}

// ---------------------------------------------------------------------------------
// Pager side.
// ---------------------------------------------------------------------------------

/// Private frames remembered at once (all live child threads together).
const RECORDS: usize = 256;
const SLOTS: usize = (MAX_THREAD_NO - FIRST_THREAD_NO) as usize;

/// Private pages are owned by `slot` (thread number − FIRST_THREAD_NO) + 1.
struct Tables {
    records: PrivatePages<RECORDS>,
    stats: [Stats; SLOTS],
}

/// State that only the pager thread touches. It is a static rather than locals of
/// `pager_main` because it is larger than a runtime pool stack.
struct PagerOnly(UnsafeCell<Tables>);

// SAFETY: the contents are used only by `pager_main`, which runs on one thread.
unsafe impl Sync for PagerOnly {}

static TABLES: PagerOnly = PagerOnly(UnsafeCell::new(Tables {
    records: PrivatePages::new(),
    stats: [Stats {
        faults: 0,
        private: 0,
        refused: 0,
        last_addr: 0,
        last_access: 0,
        last_ip: 0,
    }; SLOTS],
}));

struct Pager {
    t: &'static mut Tables,
    frames: FrameAllocator,
    /// The frame shown read-only in the read-only region.
    pattern: u32,
}

extern "C" fn pager_main(_: u32) {
    set_name("pager");
    let Some(mut frames) = FrameAllocator::from_kernel() else {
        println!("pager: KernelInfo(MEMORY) failed; no frames to hand out");
        return;
    };
    let Some(pattern) = frames.alloc() else {
        println!("pager: out of memory at start");
        return;
    };
    for off in (0..PAGE_SIZE).step_by(4) {
        // SAFETY: `pattern` is a frame we just allocated, in our sigma0 window.
        unsafe { ((pattern + off) as *mut u32).write_volatile(RO_PATTERN) };
    }
    // SAFETY: this function runs once, on the pager thread, the only user of TABLES.
    let t = unsafe { &mut *TABLES.0.get() };
    let mut pager = Pager { t, frames, pattern };
    mem::pager_loop(move |from, msg| pager.handle(from, msg))
}

/// The stats slot of a thread number, if it is one.
fn slot_of(n: u32) -> Option<usize> {
    (FIRST_THREAD_NO..MAX_THREAD_NO)
        .contains(&n)
        .then(|| (n - FIRST_THREAD_NO) as usize)
}

fn ok(words: &[u32]) -> Msg {
    Msg::with_words(lbl::OK, words)
}

impl Pager {
    fn handle(&mut self, from: ThreadId, msg: &Msg) -> Option<Msg> {
        if let Some(fault) = PageFault::parse(msg) {
            return self.fault(from, fault);
        }
        // Requests come from the test thread only; anyone else gets no answer.
        if from != ThreadId::ROOT {
            return None;
        }
        Some(self.request(msg).unwrap_or(Msg::new(REFUSED)))
    }

    fn fault(&mut self, from: ThreadId, f: PageFault) -> Option<Msg> {
        let slot = slot_of(from.number())?;
        let s = &mut self.t.stats[slot];
        s.faults += 1;
        s.last_addr = f.addr;
        s.last_access = f.access.0 as u32;
        s.last_ip = f.ip;
        let page = f.addr & !(PAGE_SIZE - 1);
        let (start, _, end) = image();
        if (start..end).contains(&page) {
            let reply = share_image(&f);
            if reply.is_none() {
                // An access the image page does not allow would only fault again.
                self.t.stats[slot].refused += 1;
            }
            return reply;
        }
        let (src, rights, private) = if is_private(page) {
            match self.private_frame(slot, page) {
                Some(frame) => (frame, Rights::RW, true),
                None => (0, Rights::NONE, false),
            }
        } else if is_read_only(page) {
            (self.pattern, Rights::R, false)
        } else {
            (0, Rights::NONE, false)
        };
        let s = &mut self.t.stats[slot];
        // An access the mapping would not allow would only fault again: refuse it.
        if rights.is_empty() || !rights.contains(f.access) {
            s.refused += 1;
            return None;
        }
        if private {
            s.private += 1;
        }
        Some(mem::map_reply(f.addr, src, rights))
    }

    /// The frame behind private `page` of thread slot `slot`, allocated on first use.
    fn private_frame(&mut self, slot: usize, page: u32) -> Option<u32> {
        self.t
            .records
            .get_or_alloc(slot as u32 + 1, page, &mut self.frames)
    }

    fn request(&mut self, m: &Msg) -> Result<Msg, ()> {
        match m.label() {
            req::ALLOC => Ok(ok(&[self.frames.alloc().ok_or(())?])),
            req::FREE => {
                let va = m.mr(1);
                let in_window = va >= SIGMA0_WINDOW && va - SIGMA0_WINDOW < SIGMA0_WINDOW_SIZE;
                if !in_window || !va.is_multiple_of(PAGE_SIZE) {
                    return Err(());
                }
                self.release(va)?;
                Ok(ok(&[]))
            }
            req::PREPARE => {
                let (n, entry, arg) = (m.mr(1), m.mr(2), m.mr(3));
                let slot = slot_of(n).ok_or(())?;
                self.forget(slot)?;
                let top = stack_top(n);
                let frame = self.private_frame(slot, top - PAGE_SIZE).ok_or(())?;
                let sp = top - 16;
                // SAFETY: `frame` is a private frame we own (in our sigma0 window) that
                // no thread has mapped yet; the two words are the last 16 bytes of it,
                // where `sp` will point in the child.
                unsafe {
                    let p = (frame + PAGE_SIZE - 16) as *mut u32;
                    p.write_volatile(entry);
                    p.add(1).write_volatile(arg);
                }
                Ok(ok(&[sp]))
            }
            req::FORGET => {
                self.forget(slot_of(m.mr(1)).ok_or(())?)?;
                Ok(ok(&[]))
            }
            req::STATS => Ok(ok(&self.t.stats[slot_of(m.mr(1)).ok_or(())?].words())),
            _ => Err(()),
        }
    }

    /// Revokes every mapping derived from our frame `va` and frees it.
    fn release(&mut self, va: u32) -> Result<(), ()> {
        if !revoke(va) {
            return Err(());
        }
        Frames::free(&mut self.frames, va);
        Ok(())
    }

    fn forget(&mut self, slot: usize) -> Result<(), ()> {
        if !self
            .t
            .records
            .forget(slot as u32 + 1, &mut self.frames, revoke)
        {
            return Err(());
        }
        self.t.stats[slot] = Stats::default();
        Ok(())
    }
}

/// Revokes every mapping derived from our frame `va`; false (and one line) if the kernel
/// refused, in which case the frame is kept rather than handed out while another space may
/// still see it.
fn revoke(va: u32) -> bool {
    match sys::unmap(Fpage::page(va, Rights::RWX), 0) {
        Ok(()) => true,
        Err(e) => {
            println!("pager: cannot revoke frame {va:#x}: Unmap failed with {e:?}");
            false
        }
    }
}
