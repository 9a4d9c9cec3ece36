//! `kestrel-fabric`: the node's interconnect as a native Kestrel service (paper §4.3,
//! `docs/adr/0020-fabric-service.md`). One [`Fabric`] engine (fabric/core) behind one IPC
//! loop serves every client — the VMM for each of its VMs, and native programs — over the
//! protocol of `kestrel_fabric::proto` (its `Server` side).
//!
//! - **Threads.** The first thread serves (it is the one the root task's `Lookup` names);
//!   a second thread, paged by the root task, is its pager: faults in the image are
//!   answered by sharing the image page;
//!   a fault in a client's slot means the client unmapped pages it gave us (or died, which
//!   revokes them): the pager maps a scratch page there so the access completes, and marks
//!   the endpoint revoked; the server detaches it after the call. So no client can stop the
//!   service by taking its memory back.
//! - **Memory.** Endpoint k's window and shared page live in slot k of this space
//!   (`proto::layout`); the receive window is always the lowest free slot, so map items from
//!   any message can only land where no client's pages are. [`WindowMemory`] is the engine's
//!   only way to memory: slot base + offset, bounds-checked.
//! - **Events.** Changed endpoints (the engine's `take_changed`) are announced to each
//!   client's event thread with a zero-timeout `EVENT` message, retried every millisecond,
//!   never to the thread the service is about to answer (it would take the event for its
//!   reply); `TakeChanged` collects them.
//! - **Budget.** An engine call runs at most its per-call DMA budget; what is left
//!   continues at the next call, and the loop polls the engine every millisecond while
//!   anything is pending.
//! - **Liveness.** Every second (the pager thread's tick, so the server itself waits without
//!   a timeout and its IPC takes the kernel's fast path) the service sends each client an
//!   `EVENT` with an empty mask (zero timeout): a client whose thread is gone (its program
//!   ended without detaching, or was stopped) loses its endpoints.
//! - **Grants and quotas** (issue 18, `docs/adr/0033-fabric-grants.md`). At attach the
//!   service asks the root task what the caller's tenant (the program itself, or one of a
//!   VMM's VMs) is granted (`kestrel_abi::grants`): the engine gets its classes and
//!   partitions (`Fabric::grant`), and a program holding its quota of endpoints gets
//!   `FabricErr::Quota`. Every refusal of the engine (a route outside the grant, a packet
//!   to an endpoint out of reach, a direct put the receiver did not allow, a forged source
//!   MAC) is logged under a rate limit per endpoint, naming its program and tenant.
//! - **End.** Holding no endpoint, the service also exits on its tick once the root task's
//!   `RUNNING` says no other program runs (a job that never used the fabric).
//! - **End.** When the last endpoint detaches (after at least one attached) the service
//!   exits, so a run whose programs all end stops the machine; `fabric.linger=1` on the
//!   kernel command line keeps it running.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kestrel_abi::grants::TENANT_SELF;
use kestrel_abi::root::PROGRAM_CEILING;
use kestrel_abi::{
    exreg, map_target, unmapflags, Fpage, IpcError, IpcPhase, Rights, ThreadId, Timeout, Timeouts,
};
use kestrel_bgp::torus::coord_word;
use kestrel_fabric::proto::{
    self, layout, mac_words, mirror, reply, shared, FabricErr, Request, Words, LINE_WORDS,
    MAX_FRAME, TREE_PAYLOAD,
};
use kestrel_fabric::quota::{Holders, QuotaFull};
use kestrel_fabric::{
    EpId, Fabric, FabricApi, FabricError, Grant, MemError, Memory, MAX_ENDPOINTS,
};
use kestrel_kcore::ratelimit::{Policy, RateLimit, Verdict};
use kestrel_user::ipc::{ipc, Msg};
use kestrel_user::mem::{map_reply, PageFault};
use kestrel_user::pager::share_image;
use kestrel_user::{println, root, sys};

const _: () = assert!(MAX_ENDPOINTS == proto::MAX_ENDPOINTS);

/// Slots whose pages faulted (bit k = slot k): the client took them back.
static REVOKED: AtomicU32 = AtomicU32::new(0);
/// With endpoints attached and nothing to do, the service checks this often (µs) that their
/// clients still exist.
const PROBE_US: u32 = 1_000_000;
/// The pager thread's tick to the server (an internal label, never a client's request).
const TICK: u16 = 0x06f1;
/// `fabric.linger=1`: keep running when the last endpoint detaches.
static LINGER: AtomicBool = AtomicBool::new(false);

/// The page the pager maps where a client's page went missing.
#[repr(C, align(4096))]
struct Scratch([u8; 4096]);
static mut SCRATCH: Scratch = Scratch([0; 4096]);

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("fabric");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    if args
        .split_ascii_whitespace()
        .any(|a| a == "fabric.linger=1")
    {
        LINGER.store(true, Ordering::Relaxed);
    }
    // The first thread serves (clients find it through the root task's `Lookup`); a
    // second thread, paged by the root task, becomes its pager.
    let me = sys::my_id();
    let pager_thread = match root::thread() {
        Ok(t) => t,
        Err(e) => {
            println!("no thread number for the pager: {e}");
            return;
        }
    };
    if let Err(e) = root::spawn(pager_thread, pager, me.0, PROGRAM_CEILING, ThreadId::ROOT) {
        println!("cannot start the pager thread: {e}");
        return;
    }
    if let Err(e) = sys::exchange_registers(me, exreg::SET_PAGER, 0, 0, pager_thread, ThreadId::NIL)
    {
        println!(
            "cannot make {pager_thread:?} the server's pager: {}",
            e.as_str()
        );
        return;
    }
    serve(pager_thread)
}

/// Pages the server thread (`server`, the raw id): image pages are shared, a missing client
/// page becomes the scratch page and revokes the client's endpoint.
extern "C" fn pager(server: u32) {
    let server = ThreadId(server);
    let _ = sys::set_name("fabric-pager");
    let scratch = core::ptr::addr_of!(SCRATCH) as u32;
    // SAFETY: touching our own static page maps it (the source of the map items below);
    // nobody reads what the scratch page holds.
    unsafe { (scratch as *mut u8).write_volatile(0) };
    let slots = layout::slot(0)..layout::slot(MAX_ENDPOINTS);
    let resolve = |from: ThreadId, msg: &Msg| -> Option<Msg> {
        let f = PageFault::parse(msg)?;
        if from != server {
            return None;
        }
        if slots.contains(&f.addr) {
            let k = (f.addr - layout::SLOTS_BASE) >> layout::SLOT_LOG2;
            REVOKED.fetch_or(1 << k, Ordering::Relaxed);
            return Some(map_reply(f.addr, scratch, Rights::RW));
        }
        match share_image(&f) {
            Some(m) => Some(m),
            None => {
                println!(
                    "server fault at {:#010x} (ip {:#010x}) outside the image and the slots",
                    f.addr, f.ip
                );
                None
            }
        }
    };
    // Between faults the pager is the server's clock: every PROBE_US it sends the server a
    // TICK (zero timeout: taken only when the server waits), so the server can wait without
    // a timeout (the kernel's IPC fast path) and still check its clients' liveness.
    let mut pending: Option<(ThreadId, Msg)> = None;
    loop {
        let (to, out) = pending.take().unwrap_or((ThreadId::NIL, Msg::new(0)));
        let wait = Timeouts::new(Timeout::ZERO, Timeout::from_us(PROBE_US));
        let (from, msg, r) = ipc(to, ThreadId::ANY, wait, &out);
        match r {
            Ok(()) => pending = resolve(from, &msg).map(|m| (from, m)),
            Err(e) if e.error == IpcError::Timeout && e.phase == IpcPhase::Receive => {
                let _ = kestrel_user::ipc::send(server, &Msg::new(TICK), Timeout::ZERO);
            }
            Err(_) => {}
        }
    }
}

/// The engine's memory: endpoint k's window is slot k of this space.
struct WindowMemory {
    len: [u64; MAX_ENDPOINTS],
}

impl WindowMemory {
    fn at(&self, ep: EpId, offset: u64, n: usize) -> Result<*mut u8, MemError> {
        let k = usize::from(ep.0);
        let len = *self.len.get(k).ok_or(MemError::NoWindow)?;
        if len == 0 || REVOKED.load(Ordering::Relaxed) & (1 << k) != 0 {
            return Err(MemError::NoWindow);
        }
        let end = offset.checked_add(n as u64).ok_or(MemError::OutOfRange)?;
        if end > len {
            return Err(MemError::OutOfRange);
        }
        Ok((layout::slot(k) as u64 + offset) as usize as *mut u8)
    }
}

impl Memory for WindowMemory {
    fn read(&mut self, ep: EpId, offset: u64, buf: &mut [u8]) -> Result<(), MemError> {
        let p = self.at(ep, offset, buf.len())?;
        // SAFETY: `[p, p + len)` lies inside slot k's window (checked by `at`), which the
        // client mapped here at attach; if it unmapped pages since, the pager maps the
        // scratch page instead, so the access completes either way. The client may write
        // the window meanwhile: bytes are copied, never interpreted in place.
        unsafe { core::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&mut self, ep: EpId, offset: u64, data: &[u8]) -> Result<(), MemError> {
        let p = self.at(ep, offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Both windows are mapped here: one copy, no bounce buffer.
    fn copy(
        &mut self,
        from: EpId,
        from_off: u64,
        to: EpId,
        to_off: u64,
        len: u64,
    ) -> Result<(), MemError> {
        let n = usize::try_from(len).map_err(|_| MemError::OutOfRange)?;
        let s = self.at(from, from_off, n)?;
        let d = self.at(to, to_off, n)?;
        // SAFETY: both ranges lie inside windows mapped in this space (checked by `at`;
        // an unmapped page is the pager's scratch page); they do not overlap: different
        // endpoints' windows are different slots, and the engine passes disjoint ranges of
        // one window (`Memory::copy`).
        unsafe { core::ptr::copy_nonoverlapping(s, d, n) };
        Ok(())
    }
}

/// Copies `buf.len()` bytes from endpoint k's shared page at `at`.
fn shared_read(k: usize, at: usize, buf: &mut [u8]) {
    debug_assert!(at + buf.len() <= shared::SIZE);
    let p = (layout::slot(k) + layout::SHARED_OFFSET) as usize as *const u8;
    // SAFETY: the shared page of an attached endpoint is mapped at this address (or the
    // scratch page is, once the client took it back); the range lies inside the page.
    unsafe { core::ptr::copy_nonoverlapping(p.add(at), buf.as_mut_ptr(), buf.len()) };
}

/// Copies `data` to endpoint k's shared page at `at`.
fn shared_write(k: usize, at: usize, data: &[u8]) {
    debug_assert!(at + data.len() <= shared::SIZE);
    let p = (layout::slot(k) + layout::SHARED_OFFSET) as usize as *mut u8;
    // SAFETY: as in `shared_read`.
    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p.add(at), data.len()) };
}

/// The engine's refusal as a wire code.
fn engine_err(e: FabricError) -> FabricErr {
    FabricErr::Engine(proto::error_code(e))
}

/// Who holds each endpoint, and what the clients have not been told yet.
struct Clients {
    /// The thread that attached endpoint k (nil: free).
    owner: [ThreadId; MAX_ENDPOINTS],
    /// Where endpoint k's events go (nil: nowhere).
    event: [ThreadId; MAX_ENDPOINTS],
    /// Bit k: `owner[k]` is not nil; and `event[k]` is not nil. Kept with the arrays (only
    /// [`Clients::set`] writes them) because every call asks, and a walk over 32 endpoints
    /// cost a few hundred instructions a call.
    attached_mask: u32,
    event_mask: u32,
    /// Bit k: endpoint k's owner has called `WaitChanged` (a native program sleeping in
    /// it): it gets no pushed events, the reply to its next `WaitChanged` is the event.
    /// Owners that never call it (the VMM, whose loop receives `EVENT`s) keep getting them.
    self_mask: u32,
    /// Bit k: endpoint k's owner waits in `WaitChanged` for news (its reply is deferred).
    waiters: u32,
    /// Bit k: endpoint k's owner asked for its register mirror (`Mirror`).
    mirrored: u32,
    /// Endpoints changed since their client last collected them.
    changed: u32,
    /// Of those, the ones whose event thread has been told.
    told: u32,
    /// Whether any endpoint was ever attached.
    ever: bool,
    /// The root task's number of the program holding each endpoint (for its quota), and
    /// the tenant endpoint k is for.
    holders: Holders,
    tenant: [u32; MAX_ENDPOINTS],
    /// Endpoint k's refusal lines.
    log: [RateLimit; MAX_ENDPOINTS],
}

/// Refusal lines about one endpoint: 8 in full, then a summary at most once a second.
const REFUSAL_LINES: Policy = Policy {
    first: 8,
    interval: 400_000_000,
};

/// A tenant as log lines name it.
struct TenantName(u32);

impl core::fmt::Display for TenantName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            TENANT_SELF => f.write_str("itself"),
            vm => write!(f, "VM {vm}"),
        }
    }
}

impl Clients {
    /// Endpoint k's owner and event thread (nil, nil: free).
    fn set(&mut self, k: usize, owner: ThreadId, event: ThreadId) {
        self.owner[k] = owner;
        self.event[k] = event;
        let bit = 1u32 << k;
        self.attached_mask = (self.attached_mask & !bit) | if owner.is_nil() { 0 } else { bit };
        self.event_mask = (self.event_mask & !bit) | if event.is_nil() { 0 } else { bit };
        self.self_mask &= !bit;
        self.waiters &= !bit;
        self.mirrored &= !bit;
    }

    fn attached(&self) -> u32 {
        self.attached_mask
    }

    fn owned_by(&self, t: ThreadId) -> u32 {
        (0..MAX_ENDPOINTS)
            .filter(|&k| self.owner[k] == t)
            .fold(0, |m, k| m | 1 << k)
    }

    fn lowest_free(&self) -> Option<usize> {
        let k = (!self.attached_mask).trailing_zeros() as usize;
        (k < MAX_ENDPOINTS).then_some(k)
    }

    /// Endpoints with news for an event thread not yet told (pushed events: owners that
    /// are their own event thread collect theirs with `WaitChanged`).
    fn untold(&self) -> u32 {
        self.event_mask & !self.self_mask & self.changed & !self.told
    }
}

struct Server {
    fabric: Fabric<WindowMemory>,
    clients: Clients,
    /// The thread whose call is being answered (nil: the service's own timer work).
    caller: ThreadId,
}

fn serve(pager_thread: ThreadId) {
    let mut s = Server {
        fabric: Fabric::new(WindowMemory {
            len: [0; MAX_ENDPOINTS],
        }),
        clients: Clients {
            owner: [ThreadId::NIL; MAX_ENDPOINTS],
            event: [ThreadId::NIL; MAX_ENDPOINTS],
            attached_mask: 0,
            event_mask: 0,
            self_mask: 0,
            waiters: 0,
            mirrored: 0,
            changed: 0,
            told: 0,
            ever: false,
            holders: Holders::new(),
            tenant: [TENANT_SELF; MAX_ENDPOINTS],
            log: [RateLimit::new(REFUSAL_LINES); MAX_ENDPOINTS],
        },
        caller: ThreadId::NIL,
    };
    println!(
        "serving up to {MAX_ENDPOINTS} endpoints (thread {:?})",
        sys::my_id()
    );
    let mut reply: Option<(ThreadId, Msg)> = None;
    loop {
        // The last endpoint went, and no other program is left that could attach one (a
        // job's ranks may attach after a VM that powered off detached).
        if s.clients.ever
            && s.clients.attached() == 0
            && !LINGER.load(Ordering::Relaxed)
            && root::running() == Ok(0)
        {
            if let Some((to, m)) = reply.take() {
                let _ = kestrel_user::ipc::send(to, &m, Timeout::ZERO);
            }
            println!("the last endpoint detached; exiting");
            root::exit(0);
        }
        let free = s.clients.lowest_free();
        let window = free
            .and_then(|k| Fpage::new(layout::slot(k), layout::SLOT_LOG2, Rights::RW))
            .unwrap_or(Fpage::NIL);
        kestrel_user::ipc::set_acceptor(window);
        s.tell(reply.as_ref().map(|r| r.0));
        // Untold events are retried, injections the engine's per-call budget cut short
        // are continued, every millisecond.
        let wait = if s.clients.untold() != 0 || s.fabric.has_pending() {
            Timeout::from_us(1000)
        } else {
            Timeout::NEVER
        };
        let (to, out) = reply.take().unwrap_or((ThreadId::NIL, Msg::new(0)));
        let (from, msg, r) = ipc(to, ThreadId::ANY, Timeouts::new(Timeout::ZERO, wait), &out);
        if r.is_ok() && msg.label() == TICK && from == pager_thread {
            // The pager's clock: check the clients are still there; nothing to answer.
            s.probe();
            s.reap_revoked();
            // No endpoint, and no other program left that could attach one (a job whose
            // programs never used the fabric): nothing to serve, so the run can end.
            if s.clients.attached() == 0
                && !LINGER.load(Ordering::Relaxed)
                && root::running() == Ok(0)
            {
                if let Some((to, m)) = reply.take() {
                    let _ = kestrel_user::ipc::send(to, &m, Timeout::ZERO);
                }
                if s.clients.ever {
                    println!("the last endpoint detached; exiting");
                } else {
                    println!("no endpoint and no other program left; exiting");
                }
                root::exit(0);
            }
            continue;
        }
        // A failed reply (the client is gone), a timeout or a failed map: nothing to answer;
        // a map that failed half-way may still have left pages in the free slot.
        let mut keep = false;
        if s.fabric.has_pending() {
            s.fabric.poll();
            s.collect();
            s.log_refusals();
        }
        if r.is_ok() {
            let (answer, attached) = s.handle(from, &msg, free, window);
            // No answer: a `WaitChanged` with nothing new, answered by `tell` later.
            reply = answer.map(|a| (from, a));
            keep = attached;
        }
        if (msg.tag.typed() != 0 || r.is_err()) && !keep {
            if let Some(k) = free {
                s.scrub_slot(k);
            }
        }
        s.reap_revoked();
    }
}

impl Server {
    /// Sends the pending events, except to `except` (the thread about to get its reply).
    fn tell(&mut self, except: Option<ThreadId>) {
        self.answer_waiters();
        let untold = self.clients.untold();
        if untold == 0 {
            return;
        }
        for k in 0..MAX_ENDPOINTS {
            if untold & (1 << k) == 0 || self.clients.told & (1 << k) != 0 {
                continue;
            }
            let to = self.clients.event[k];
            if Some(to) == except {
                continue;
            }
            let mask = (0..MAX_ENDPOINTS)
                .filter(|&j| self.clients.event[j] == to)
                .fold(0u32, |m, j| m | 1 << j)
                & untold;
            let m = Msg::with_words(proto::EVENT, &[mask]);
            match kestrel_user::ipc::send(to, &m, Timeout::ZERO) {
                Ok(()) => self.clients.told |= mask,
                Err(e) if e.error == IpcError::NoPartner => {
                    // The event thread is gone: so is the client; nobody will detach.
                    for j in 0..MAX_ENDPOINTS {
                        if mask & (1 << j) != 0 {
                            println!("endpoint {j}: its event thread {to:?} is gone; detaching");
                            self.detach(j);
                        }
                    }
                }
                Err(_) => {}
            }
        }
    }

    /// Answers the `WaitChanged` calls waiting for endpoints that changed (the reply takes
    /// the change, as `TakeChanged`). A waiter that is gone or gave up (its call timed out)
    /// is no longer waiting either way.
    fn answer_waiters(&mut self) {
        let ready = self.clients.waiters & self.clients.changed;
        if ready == 0 {
            return;
        }
        for k in 0..MAX_ENDPOINTS {
            if ready & (1 << k) == 0 || self.clients.waiters & (1 << k) == 0 {
                continue;
            }
            let to = self.clients.owner[k];
            let own = self.clients.owned_by(to);
            let mask = self.clients.changed & own;
            self.clients.waiters &= !own;
            let m = reply(Ok(reply::WaitChanged { mask }.encode()));
            if kestrel_user::ipc::send(to, &m, Timeout::ZERO).is_ok() {
                self.clients.changed &= !mask;
                self.clients.told &= !mask;
            }
        }
    }

    /// Checks that the clients still exist: a zero-timeout `EVENT` with an empty mask to
    /// each owner ("nothing changed"); an owner that is gone (`NoPartner`: its program ended
    /// or was stopped) loses its endpoints.
    fn probe(&mut self) {
        for k in 0..MAX_ENDPOINTS {
            let t = self.clients.owner[k];
            if t.is_nil() || (0..k).any(|j| self.clients.owner[j] == t) {
                continue;
            }
            // A thread waiting in `WaitChanged` gets its answer, "nothing changed" (an
            // EVENT would be taken as that call's reply); a thread that is gone (its
            // program ended while it waited) cannot take either.
            let m = if self.clients.waiters & (1 << k) != 0 {
                self.clients.waiters &= !self.clients.owned_by(t);
                reply(Ok(reply::WaitChanged { mask: 0 }.encode()))
            } else {
                Msg::with_words(proto::EVENT, &[0])
            };
            if let Err(e) = kestrel_user::ipc::send(t, &m, Timeout::ZERO) {
                if e.error == IpcError::NoPartner {
                    for j in k..MAX_ENDPOINTS {
                        if self.clients.owner[j] == t {
                            println!("endpoint {j}: its client {t:?} is gone; detaching");
                            self.detach(j);
                        }
                    }
                }
            }
        }
    }

    /// Unmaps whatever landed in (free) slot k.
    fn scrub_slot(&mut self, k: usize) {
        if let Some(f) = Fpage::new(layout::slot(k), layout::SLOT_LOG2, Rights::RWX) {
            let _ = sys::unmap(f, unmapflags::FLUSH_OWN);
        }
        REVOKED.fetch_and(!(1 << k), Ordering::Relaxed);
    }

    /// Logs the engine's refusals, naming each endpoint's program and tenant, under the
    /// endpoint's rate limit.
    fn log_refusals(&mut self) {
        if !self.fabric.has_refusals() {
            return;
        }
        let now = sys::timebase();
        let c = &mut self.clients;
        self.fabric.take_refusals(|ep, d, n| {
            let k = usize::from(ep.0);
            let (p, t) = (c.holders.program(ep), TenantName(c.tenant[k]));
            match c.log[k].event(now) {
                Verdict::Log { last } => {
                    println!("endpoint {k} (program {p}, {t}): refused: {d} ({n} refusal(s))");
                    if last {
                        println!("endpoint {k}: further refusals are counted, not logged");
                    }
                }
                Verdict::Summary { suppressed, total } => println!(
                    "endpoint {k} (program {p}, {t}): {suppressed} more refusals not logged ({total} in all)"
                ),
                Verdict::Quiet => {}
            }
        });
    }

    fn detach(&mut self, k: usize) {
        if let Some((suppressed, total)) = self.clients.log[k].finish() {
            println!("endpoint {k}: {suppressed} more refusals not logged ({total} in all)");
        }
        self.clients.log[k] = RateLimit::new(REFUSAL_LINES);
        self.clients.holders.release(EpId(k as u8));
        self.clients.tenant[k] = TENANT_SELF;
        self.fabric.detach(EpId(k as u8));
        self.fabric.memory_mut().len[k] = 0;
        self.clients.set(k, ThreadId::NIL, ThreadId::NIL);
        self.clients.changed &= !(1 << k);
        self.clients.told &= !(1 << k);
        self.scrub_slot(k);
    }

    /// Detaches the endpoints whose client took their pages back.
    fn reap_revoked(&mut self) {
        let r = REVOKED.load(Ordering::Relaxed) & self.clients.attached();
        if r == 0 {
            return;
        }
        for k in 0..MAX_ENDPOINTS {
            if r & (1 << k) != 0 {
                println!(
                    "endpoint {k}: its client ({:?}) unmapped its window or shared page; detaching",
                    self.clients.owner[k]
                );
                self.detach(k);
            }
        }
    }

    /// Collects the engine's changes.
    fn collect(&mut self) {
        self.clients.changed |= self.fabric.take_changed().unwrap_or(0) & self.clients.attached();
        self.refresh_mirrors();
    }

    /// Rewrites the register mirror of every mirrored endpoint the engine touched since the
    /// last refresh (the others are unchanged: `Fabric::take_touched`). A touched endpoint
    /// has news for its owner, as a changed interrupt line is, unless the owner is the
    /// caller: what its own call did is in the mirror it reads on return.
    fn refresh_mirrors(&mut self) {
        let touched = self.fabric.take_touched() & self.clients.mirrored;
        if touched == 0 {
            return;
        }
        for k in kestrel_fabric::bits(touched) {
            self.publish_mirror(k);
        }
        let own = if self.caller.is_nil() {
            0
        } else {
            self.clients.owned_by(self.caller)
        };
        self.clients.changed |= touched & !own;
    }

    fn publish_mirror(&mut self, k: usize) {
        let p = (layout::slot(k) + layout::SHARED_OFFSET) as usize + shared::MIRROR;
        // SAFETY: as in `shared_read`: endpoint k's shared page (or the scratch page) is
        // mapped at this address, and the mirror lies inside it (`shared::MIRROR` asserts
        // so); the page is page aligned, so the words are. Nothing else in this space
        // refers to it, and the client reads it only between its calls.
        let out = unsafe { &mut *(p as *mut [u32; mirror::WORDS]) };
        self.fabric.mirror(EpId(k as u8), out);
    }

    /// Answers one message; the second value says whether it attached an endpoint (whose
    /// items must stay mapped).
    fn handle(
        &mut self,
        from: ThreadId,
        msg: &Msg,
        free: Option<usize>,
        window: Fpage,
    ) -> (Option<Msg>, bool) {
        if self.clients.waiters != 0 {
            // A thread that calls is not waiting in `WaitChanged` any more (that call
            // timed out): a deferred answer now would be taken as this call's reply.
            self.clients.waiters &= !self.clients.owned_by(from);
        }
        let (m, attached) = self.answer(from, msg, free, window);
        if m.is_none() {
            self.clients.waiters |= self.clients.owned_by(from);
        }
        (m, attached)
    }

    /// [`Server::handle`]'s answer; `None` defers a `WaitChanged` with nothing new.
    fn answer(
        &mut self,
        from: ThreadId,
        msg: &Msg,
        free: Option<usize>,
        window: Fpage,
    ) -> (Option<Msg>, bool) {
        let w = msg.words();
        let Some(req) = (if msg.tag.untyped() <= proto::MAX_WORDS {
            Request::decode(w.label, w.words())
        } else {
            None
        }) else {
            return (Some(reply(Err(FabricErr::BadRequest))), false);
        };
        if let Some(ep) = req.ep() {
            let k = usize::from(ep);
            if self.clients.owner[k] != from {
                return (Some(reply(Err(FabricErr::NotOwner))), false);
            }
        }
        let mut call = Call {
            from,
            msg: *msg,
            free,
            window,
        };
        self.caller = from;
        let answer = self.answer_call(from, req, &mut call);
        self.caller = ThreadId::NIL;
        answer
    }

    /// [`Server::answer`] for a decoded request from its endpoints' owner.
    fn answer_call(
        &mut self,
        from: ThreadId,
        req: Request,
        call: &mut Call,
    ) -> (Option<Msg>, bool) {
        if let Request::WaitChanged {} = req {
            self.clients.self_mask |= self.clients.owned_by(from);
            self.collect();
            self.log_refusals();
            let mine = self.clients.changed & self.clients.owned_by(from);
            if mine == 0 && self.clients.owned_by(from) != 0 {
                return (None, false);
            }
        }
        let r = req.serve(self, call);
        if let Request::Attach { .. } = req {
            return (Some(reply(r)), r.is_ok());
        }
        self.collect();
        self.log_refusals();
        // A revoked window or shared page makes the answer worthless.
        if let Some(ep) = req.ep() {
            if REVOKED.load(Ordering::Relaxed) & (1 << ep) != 0 {
                return (Some(reply(Err(FabricErr::Revoked))), false);
            }
        }
        (Some(reply(r)), false)
    }

    /// Attaches an endpoint in slot `free` for `from`, whose message `msg` maps its window
    /// (`len` bytes) and shared page into the receive window `window`.
    #[allow(clippy::too_many_arguments)]
    fn attach_endpoint(
        &mut self,
        from: ThreadId,
        msg: &Msg,
        len: u32,
        event: ThreadId,
        tenant: u32,
        free: Option<usize>,
        window: Fpage,
    ) -> Result<reply::Attach, FabricErr> {
        // What the root task's policy grants this tenant, and the program's quota.
        let g = root::fabric_grant(from, tenant).map_err(|e| {
            println!("attach by {from:?} refused: no fabric grant ({e})");
            FabricErr::NoGrant
        })?;
        if let Err(QuotaFull { held }) = self.clients.holders.admit(g.program_no, g.endpoints) {
            println!(
                "attach by {from:?} (program {}, {}) refused: it holds {held} endpoint(s), its quota",
                g.program_no,
                TenantName(tenant)
            );
            return Err(FabricErr::Quota);
        }
        let k = free.ok_or(FabricErr::NoEndpoint)?;
        if len == 0 || len > layout::WINDOW_MAX || !len.is_multiple_of(kestrel_abi::PAGE_SIZE) {
            return Err(FabricErr::BadWindow);
        }
        // The items must tile [0, len) of the slot and put one page at SHARED_OFFSET.
        let base = layout::slot(k);
        let items = msg.tag.typed() / 2;
        let mut covered = 0u64;
        let mut shared_seen = false;
        let mut ranges = [(0u32, 0u32); kestrel_abi::root::MAX_ITEMS + 1];
        let mut nr = 0;
        for i in 0..items {
            let it = msg.item(i).ok_or(FabricErr::BadWindow)?;
            let (_, dst, log2) =
                map_target(it.fpage, window, it.hot_spot).ok_or(FabricErr::BadWindow)?;
            let off = dst - base;
            let size = 1u32 << log2;
            if off == layout::SHARED_OFFSET && log2 == 12 && !shared_seen {
                shared_seen = true;
                continue;
            }
            if u64::from(off) + u64::from(size) > u64::from(len) || nr == ranges.len() {
                return Err(FabricErr::BadWindow);
            }
            ranges[nr] = (off, size);
            nr += 1;
            covered += u64::from(size);
        }
        let ranges = &mut ranges[..nr];
        ranges.sort_unstable();
        let tiled = ranges.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0);
        if !shared_seen || !tiled || covered != u64::from(len) {
            return Err(FabricErr::BadWindow);
        }
        let (ep, bus) = self.fabric.attach(u64::from(len)).map_err(engine_err)?;
        if usize::from(ep.0) != k {
            // The engine and the slots disagree (cannot happen: both take the lowest free).
            self.fabric.detach(ep);
            return Err(FabricErr::NoEndpoint);
        }
        let grant = Grant {
            classes: g.classes as u16,
            partitions: g.partitions as u16,
        };
        if self.fabric.grant(ep, grant).is_err() {
            self.fabric.detach(ep);
            return Err(FabricErr::NoEndpoint);
        }
        self.fabric.memory_mut().len[k] = u64::from(len);
        REVOKED.fetch_and(!(1 << k), Ordering::Relaxed);
        self.clients.set(k, from, event);
        self.clients.holders.hold(ep, g.program_no);
        self.clients.tenant[k] = tenant;
        self.clients.ever = true;
        self.collect();
        let c = self.fabric.coords(ep);
        println!(
            "endpoint {k} attached by {from:?} (program {}, {}): window {} KiB at bus {bus:#x}, events to {event:?}, classes {:#06x}, partitions {:#06x}",
            g.program_no,
            TenantName(tenant),
            len >> 10,
            grant.classes,
            grant.partitions
        );
        Ok(reply::Attach {
            ep: k as u32,
            bus_base: bus,
            coords: coord_word(c.x, c.y, c.z),
            node_address: self.fabric.node_address(ep),
        })
    }
}

/// What the service knows of a request beside its words: the sender, the message (its map
/// items), and the slot and receive window it arrived in.
struct Call {
    from: ThreadId,
    msg: Msg,
    free: Option<usize>,
    window: Fpage,
}

/// The protocol's operations; `handle` has checked that the caller owns the endpoint a
/// request names.
impl proto::Server for Server {
    type Caller = Call;

    fn attach(
        &mut self,
        c: &mut Call,
        window_len: u32,
        event: u32,
        tenant: u32,
    ) -> Result<reply::Attach, FabricErr> {
        let msg = c.msg;
        self.attach_endpoint(
            c.from,
            &msg,
            window_len,
            ThreadId(event),
            tenant,
            c.free,
            c.window,
        )
    }

    fn detach(&mut self, _: &mut Call, ep: u8) -> Result<reply::Detach, FabricErr> {
        println!("endpoint {ep} detached by its client");
        Server::detach(self, usize::from(ep));
        Ok(reply::Detach {})
    }

    fn info(&mut self, _: &mut Call, ep: u8) -> Result<reply::Info, FabricErr> {
        let (f, e) = (&self.fabric, EpId(ep));
        let c = f.coords(e);
        let (mac_hi, mac_lo) = mac_words(f.frame_mac(e));
        let (bus_base, _) = f.window(e).unwrap_or((0, 0));
        Ok(reply::Info {
            coords: coord_word(c.x, c.y, c.z),
            node_address: f.node_address(e),
            mac_hi,
            mac_lo,
            bus_base,
        })
    }

    fn dma_read(&mut self, _: &mut Call, ep: u8, offset: u32) -> Result<reply::DmaRead, FabricErr> {
        let value = self.fabric.dma_read(EpId(ep), offset).map_err(engine_err)?;
        Ok(reply::DmaRead { value })
    }

    fn dma_write(
        &mut self,
        _: &mut Call,
        ep: u8,
        offset: u32,
        value: u32,
    ) -> Result<reply::DmaWrite, FabricErr> {
        self.fabric
            .dma_write(EpId(ep), offset, value)
            .map_err(engine_err)?;
        Ok(reply::DmaWrite {})
    }

    fn dma_write2(
        &mut self,
        _: &mut Call,
        ep: u8,
        offset: u32,
        value: u32,
        offset2: u32,
        value2: u32,
    ) -> Result<reply::DmaWrite2, FabricErr> {
        let ep = EpId(ep);
        self.fabric
            .dma_write(ep, offset, value)
            .map_err(engine_err)?;
        self.fabric
            .dma_write(ep, offset2, value2)
            .map_err(engine_err)?;
        Ok(reply::DmaWrite2 {})
    }

    fn mirror(&mut self, _: &mut Call, ep: u8) -> Result<reply::Mirror, FabricErr> {
        let k = usize::from(ep);
        self.clients.mirrored |= 1 << k;
        self.publish_mirror(k);
        // What was there before the mirror existed is not news.
        self.clients.changed &= !(1 << k);
        Ok(reply::Mirror {})
    }

    fn dcr_read(&mut self, _: &mut Call, ep: u8, dcr: u32) -> Result<reply::DcrRead, FabricErr> {
        let value = self.fabric.dcr_read(EpId(ep), dcr).map_err(engine_err)?;
        Ok(reply::DcrRead { value })
    }

    fn dcr_write(
        &mut self,
        _: &mut Call,
        ep: u8,
        dcr: u32,
        value: u32,
    ) -> Result<reply::DcrWrite, FabricErr> {
        self.fabric
            .dcr_write(EpId(ep), dcr, value)
            .map_err(engine_err)?;
        Ok(reply::DcrWrite {})
    }

    fn tree_inject(
        &mut self,
        _: &mut Call,
        ep: u8,
        vc: u32,
        header: u32,
    ) -> Result<reply::TreeInject, FabricErr> {
        let mut p = [0u8; TREE_PAYLOAD];
        shared_read(usize::from(ep), shared::PAYLOAD, &mut p);
        self.fabric
            .tree_inject(EpId(ep), vc as usize, header, &p)
            .map_err(engine_err)?;
        Ok(reply::TreeInject {})
    }

    fn tree_receive(
        &mut self,
        _: &mut Call,
        ep: u8,
        vc: u32,
    ) -> Result<reply::TreeReceive, FabricErr> {
        let mut p = [0u8; TREE_PAYLOAD];
        let Ok(Some(header)) = self.fabric.tree_receive(EpId(ep), vc as usize, &mut p) else {
            return Ok(reply::TreeReceive {
                found: 0,
                header: 0,
            });
        };
        shared_write(usize::from(ep), shared::PAYLOAD, &p);
        Ok(reply::TreeReceive { found: 1, header })
    }

    fn tree_status(
        &mut self,
        _: &mut Call,
        ep: u8,
        vc: u32,
    ) -> Result<reply::TreeStatus, FabricErr> {
        let status = self.fabric.tree_status(EpId(ep), vc as usize);
        Ok(reply::TreeStatus { status })
    }

    fn frame_send(
        &mut self,
        _: &mut Call,
        ep: u8,
        len: u32,
    ) -> Result<reply::FrameSend, FabricErr> {
        let len = len as usize;
        if len > MAX_FRAME {
            return Err(FabricErr::BadLength);
        }
        let mut b = [0u8; MAX_FRAME];
        shared_read(usize::from(ep), shared::PAYLOAD, &mut b[..len]);
        self.fabric
            .frame_send(EpId(ep), &b[..len])
            .map_err(engine_err)?;
        Ok(reply::FrameSend {})
    }

    fn frame_receive(&mut self, _: &mut Call, ep: u8) -> Result<reply::FrameReceive, FabricErr> {
        let mut b = [0u8; MAX_FRAME];
        let Ok(Some(n)) = self.fabric.frame_receive(EpId(ep), &mut b) else {
            return Ok(reply::FrameReceive { found: 0, len: 0 });
        };
        let n = n.min(MAX_FRAME);
        shared_write(usize::from(ep), shared::PAYLOAD, &b[..n]);
        Ok(reply::FrameReceive {
            found: 1,
            len: n as u32,
        })
    }

    fn irq_lines(&mut self, _: &mut Call, ep: u8) -> Result<reply::IrqLines, FabricErr> {
        let lines = self.fabric.irq_lines(EpId(ep));
        let mut b = [0u8; 4 * LINE_WORDS];
        for (i, l) in lines.iter().take(LINE_WORDS).enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&l.to_be_bytes());
        }
        shared_write(usize::from(ep), shared::LINES, &b);
        Ok(reply::IrqLines {})
    }

    fn wait_changed(&mut self, c: &mut Call) -> Result<reply::WaitChanged, FabricErr> {
        // Reached when there is news (or the caller holds no endpoint): `handle` defers
        // the others.
        let mask = self.take_changed(c)?.mask;
        Ok(reply::WaitChanged { mask })
    }

    fn take_changed(&mut self, c: &mut Call) -> Result<reply::TakeChanged, FabricErr> {
        self.collect();
        let mine = self.clients.changed & self.clients.owned_by(c.from);
        self.clients.changed &= !mine;
        self.clients.told &= !mine;
        Ok(reply::TakeChanged { mask: mine })
    }

    fn stats(&mut self, _: &mut Call, ep: u8) -> Result<reply::Stats, FabricErr> {
        let counters = proto::stats_words(&self.fabric.stats(EpId(ep)));
        Ok(reply::Stats { counters })
    }

    fn take_diagnostic(
        &mut self,
        _: &mut Call,
        ep: u8,
    ) -> Result<reply::TakeDiagnostic, FabricErr> {
        Ok(match self.fabric.take_diagnostic(EpId(ep)) {
            Some(d) => reply::TakeDiagnostic {
                found: 1,
                diagnostic: proto::diagnostic_words(&d),
            },
            None => reply::TakeDiagnostic {
                found: 0,
                diagnostic: [0; 4],
            },
        })
    }

    fn frames_queued(&mut self, _: &mut Call, ep: u8) -> Result<reply::FramesQueued, FabricErr> {
        let frames = self.fabric.frames_queued(EpId(ep)) as u32;
        Ok(reply::FramesQueued { frames })
    }
}

fn reply(r: Result<Words, FabricErr>) -> Msg {
    Msg::from_words(&r.unwrap_or_else(proto::encode_error))
}
