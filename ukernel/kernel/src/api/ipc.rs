//! Synchronous IPC (L4 X.2 style): send and receive phases, message transfer with
//! map/grant items, timeouts, kernel-synthesised fault messages, and interrupts
//! delivered as IPC.
//!
//! Register results for the caller (see `kestrel_abi`): r3 = partner, r4 = error
//! code (`IpcError::encode`), r6 = received tag (error flag set on failure),
//! r7..r12 = MR1..MR6. A send-only IPC returns tag 0 on success.

use super::{frame_of, sched, space, thread, thread::FaultWait, thread::State, Kernel};
use crate::platform::{self, IrqController};
use kestrel_abi::{
    label, Fpage, IpcError, IpcPhase, MapItem, MsgTag, Rights, ThreadId, Timeout, REG_MRS,
};
use thread::NO_SLOT as NO_SLOT_T;

/// Outcome of a transfer into a thread waiting for a fault reply.
enum Delivered {
    Normal,
    /// The handler asked the kernel to stop the faulting thread.
    Killed,
}

use thread::utcb;

/// Message register `n` of sender `s` (MR0 = tag).
fn src_mr(k: &Kernel, s: usize, n: usize) -> u32 {
    if k.threads[s].fault != FaultWait::None && k.threads[s].state != State::Receiving {
        // Kernel-synthesised message: registers from `fault_msg`, the rest (vCPU
        // state) was written into the faulting thread's UTCB.
        return if n < REG_MRS {
            k.threads[s].fault_msg[n]
        } else {
            utcb(k, s).mr[n]
        };
    }
    if n < REG_MRS {
        frame_of(k, s).regs.gpr[6 + n]
    } else {
        utcb(k, s).mr[n]
    }
}

/// Writes IPC results into thread `i`'s frame.
fn set_result(k: &Kernel, i: usize, partner: ThreadId, err: Option<(IpcError, IpcPhase)>) {
    let f = frame_of(k, i);
    f.regs.gpr[3] = partner.0;
    match err {
        None => f.regs.gpr[4] = 0,
        Some((e, p)) => {
            f.regs.gpr[4] = e.encode(p);
            f.regs.gpr[6] = MsgTag::FLAG_ERROR;
        }
    }
}

/// Fails the IPC of the (current, not blocked) thread `i`.
fn fail(k: &mut Kernel, i: usize, partner: ThreadId, e: IpcError, p: IpcPhase) {
    set_result(k, i, partner, Some((e, p)));
}

fn accepts(k: &Kernel, d: usize, from: ThreadId) -> bool {
    let t = &k.threads[d];
    t.state == State::Receiving && (t.partner.is_any() || t.partner == from)
}

/// Copies the message of `s` to `d` and performs its map/grant items.
fn transfer(k: &mut Kernel, s: usize, d: usize) -> Result<Delivered, IpcError> {
    let tag = MsgTag(src_mr(k, s, 0));
    let words = tag.words();
    let sid = k.threads[s].space;
    let did = k.threads[d].space;
    let fault = k.threads[d].fault;
    let window = if fault != FaultWait::None {
        Fpage::complete(Rights::RWX)
    } else {
        Fpage(utcb(k, d).acceptor)
    };
    // Typed items first: if one fails, nothing else is delivered. An item is MR n and n + 1.
    let mut n = tag.untyped() + 1;
    #[allow(
        clippy::int_plus_one,
        reason = "`n < words` (or counting items) is equivalent but makes this IPC path slower: \
                  +1 (+4) instructions on bench/exits.py's VMM round trip"
    )]
    while n + 1 <= words {
        let item =
            MapItem::decode(src_mr(k, s, n), src_mr(k, s, n + 1)).ok_or(IpcError::MapFailed)?;
        if window.is_nil() || !item.fpage.is_mappable() {
            return Err(IpcError::MapFailed);
        }
        space::map_item(k, sid, did, item, window)?;
        n += 2;
    }
    if fault == FaultWait::VirtFault {
        k.threads[d].fault = FaultWait::None;
        if tag.label() == label::KILL {
            return Ok(Delivered::Killed);
        }
        let mut regs = [0u32; REG_MRS];
        regs.copy_from_slice(&frame_of(k, s).regs.gpr[6..6 + REG_MRS]);
        let resume = super::hooks::fault_reply(k, d, tag, &regs, utcb(k, s));
        return Ok(if resume {
            Delivered::Normal
        } else {
            Delivered::Killed
        });
    }
    if fault != FaultWait::None {
        // Reply to a thread blocked in a kernel-synthesised fault IPC.
        k.threads[d].fault = FaultWait::None;
        if tag.label() == label::KILL {
            return Ok(Delivered::Killed);
        }
        if fault == FaultWait::Exception && tag.untyped() >= kestrel_abi::exc::REPLY_WORDS as usize
        {
            let ip = src_mr(k, s, 1);
            let sp = src_mr(k, s, 2);
            let f = frame_of(k, d);
            f.regs.ip = ip;
            f.regs.gpr[1] = sp;
        }
        if fault == FaultWait::LinuxSyscall
            && tag.untyped() >= kestrel_abi::exc::SYSCALL_REPLY_WORDS as usize
        {
            // Linux ppc32: r3 = result, CR0[SO] (CR bit 3, MSB-0) set on error.
            const CR0_SO: u32 = 1 << 28;
            let (r3, flags) = (src_mr(k, s, 1), src_mr(k, s, 2));
            let f = frame_of(k, d);
            f.regs.gpr[3] = r3;
            f.regs.cr = if flags & kestrel_abi::exc::SC_ERROR != 0 {
                f.regs.cr | CR0_SO
            } else {
                f.regs.cr & !CR0_SO
            };
        }
        return Ok(Delivered::Normal);
    }
    let from = thread::id_of(k, s);
    let mut regs = [0u32; REG_MRS];
    for (n, r) in regs.iter_mut().enumerate() {
        *r = src_mr(k, s, n);
    }
    // Flags are the kernel's to set (error bit), never the sender's.
    regs[0] &= !(0xf << 12);
    frame_of(k, d).regs.gpr[6..6 + REG_MRS].copy_from_slice(&regs);
    if words >= REG_MRS {
        let (su, du) = (utcb(k, s), utcb(k, d));
        du.mr[REG_MRS..=words].copy_from_slice(&su.mr[REG_MRS..=words]);
    }
    if k.threads[s].fault == FaultWait::VirtFault {
        super::hooks::fault_delivered(k, s, d);
    }
    set_result(k, d, from, None);
    Ok(Delivered::Normal)
}

fn ticks_for(k: &Kernel, t: Timeout) -> u64 {
    // +1: a relative timeout never expires before at least that much time passed.
    (t.as_us().div_ceil(k.mem.tick_us)) as u64 + 1
}

fn arm(k: &mut Kernel, i: usize, t: Timeout) {
    if t.is_never() || t.is_zero() {
        return;
    }
    let d = k.ticks + ticks_for(k, t);
    if k.threads[i].deadline == 0 {
        k.timeouts_armed += 1;
    }
    k.threads[i].deadline = d;
}

fn disarm(k: &mut Kernel, i: usize) {
    if k.threads[i].deadline != 0 {
        k.threads[i].deadline = 0;
        k.timeouts_armed -= 1;
    }
}

fn enqueue_sender(k: &mut Kernel, d: usize, s: usize) {
    k.threads[s].send_next = NO_SLOT_T;
    if k.threads[d].send_tail == NO_SLOT_T {
        k.threads[d].send_head = s;
    } else {
        let t = k.threads[d].send_tail;
        k.threads[t].send_next = s;
    }
    k.threads[d].send_tail = s;
}

fn remove_sender(k: &mut Kernel, d: usize, s: usize) {
    let mut prev = NO_SLOT_T;
    let mut c = k.threads[d].send_head;
    while c != NO_SLOT_T {
        if c == s {
            let next = k.threads[c].send_next;
            if prev == NO_SLOT_T {
                k.threads[d].send_head = next;
            } else {
                k.threads[prev].send_next = next;
            }
            if k.threads[d].send_tail == s {
                k.threads[d].send_tail = prev;
            }
            k.threads[s].send_next = NO_SLOT_T;
            return;
        }
        prev = c;
        c = k.threads[c].send_next;
    }
}

/// The `Ipc` system call of thread `cur`. Returns the thread it woke, if any. Inlined
/// into the system-call dispatcher (its one caller): the slow IPC path is hot for VMMs.
#[inline(always)]
pub fn sys_ipc(k: &mut Kernel, cur: usize) -> Option<usize> {
    let (to, from, tos, tag) = {
        let f = &frame_of(k, cur).regs;
        (
            ThreadId(f.gpr[3]),
            ThreadId(f.gpr[4]),
            kestrel_abi::Timeouts(f.gpr[5]),
            MsgTag(f.gpr[6]),
        )
    };
    let mut hint = None;
    if !to.is_nil() {
        if let Some(line) = to.irq_line() {
            // Interrupt-thread ids cover more numbers than the board has lines.
            if k.irqs
                .get(line as usize)
                .is_none_or(|irq| irq.handler != cur)
            {
                fail(k, cur, to, IpcError::NoPartner, IpcPhase::Send);
                return None;
            }
            let irq = &mut k.irqs[line as usize];
            if irq.in_service {
                irq.in_service = false;
                let pic = platform::irq_controller();
                pic.ack(line);
                pic.unmask(line);
            }
        } else {
            if let Err(e) = tag.validate() {
                fail(k, cur, to, e, IpcPhase::Send);
                return None;
            }
            let Some(d) = thread::lookup(k, to) else {
                fail(k, cur, to, IpcError::NoPartner, IpcPhase::Send);
                return None;
            };
            let me = thread::id_of(k, cur);
            if accepts(k, d, me) {
                match transfer(k, cur, d) {
                    Ok(Delivered::Normal) => sched::wake(k, d, &mut hint),
                    Ok(Delivered::Killed) => {
                        thread::stop(k, d, format_args!("killed by its fault handler {:?}", me));
                    }
                    Err(e) => {
                        fail(k, cur, to, e, IpcPhase::Send);
                        set_result(k, d, me, Some((e, IpcPhase::Receive)));
                        sched::wake(k, d, &mut hint);
                        return hint;
                    }
                }
            } else if tos.send().is_zero() || k.threads[d].state == State::Dead {
                let e = if tos.send().is_zero() {
                    IpcError::Timeout
                } else {
                    IpcError::NoPartner
                };
                fail(k, cur, to, e, IpcPhase::Send);
                return None;
            } else {
                let t = &mut k.threads[cur];
                t.state = State::Sending;
                t.partner = to;
                t.then_receive = from;
                t.recv_timeout = tos.recv().0;
                enqueue_sender(k, d, cur);
                arm(k, cur, tos.send());
                return None;
            }
        }
    }
    if from.is_nil() {
        set_result(k, cur, to, None);
        frame_of(k, cur).regs.gpr[6] = 0;
        return hint;
    }
    receive(k, cur, from, tos.recv(), &mut hint);
    hint
}

/// Receive phase of thread `r` (which may be blocked-sending until now).
fn receive(k: &mut Kernel, r: usize, from: ThreadId, timeout: Timeout, hint: &mut Option<usize>) {
    // Pending interrupts attached to `r`.
    if k.irq_pending != 0 && (from.is_any() || from.is_irq()) {
        for line in 0..k.irqs.len() {
            let irq = k.irqs[line];
            if irq.handler == r
                && irq.pending
                && (from.is_any() || from.irq_line() == Some(line as u32))
            {
                k.set_irq_pending(line, false);
                k.irqs[line].in_service = true;
                deliver_irq_msg(k, r, line as u32);
                if r != k.current {
                    sched::wake(k, r, hint);
                }
                return;
            }
        }
    }
    // A blocked sender we accept.
    let mut s = k.threads[r].send_head;
    while s != NO_SLOT_T {
        if from.is_any() || thread::id_of(k, s) == from {
            break;
        }
        s = k.threads[s].send_next;
    }
    if s != NO_SLOT_T {
        remove_sender(k, r, s);
        disarm(k, s);
        let sender_id = thread::id_of(k, s);
        let me = thread::id_of(k, r);
        match transfer(k, s, r) {
            Ok(_) => {
                if r != k.current {
                    sched::wake(k, r, hint);
                } else {
                    k.threads[r].state = State::Ready;
                }
                send_completed(k, s, me, hint);
            }
            Err(e) => {
                set_result(k, s, me, Some((e, IpcPhase::Send)));
                k.threads[s].fault = FaultWait::None;
                sched::wake(k, s, hint);
                set_result(k, r, sender_id, Some((e, IpcPhase::Receive)));
                if r != k.current {
                    sched::wake(k, r, hint);
                } else {
                    k.threads[r].state = State::Ready;
                }
            }
        }
        return;
    }
    if timeout.is_zero() {
        set_result(k, r, from, Some((IpcError::Timeout, IpcPhase::Receive)));
        if r != k.current {
            sched::wake(k, r, hint);
        }
        return;
    }
    let t = &mut k.threads[r];
    t.state = State::Receiving;
    t.partner = from;
    arm(k, r, timeout);
}

/// A blocked sender's message was delivered: continue with its receive phase.
fn send_completed(k: &mut Kernel, s: usize, to: ThreadId, hint: &mut Option<usize>) {
    let then = k.threads[s].then_receive;
    if k.threads[s].fault != FaultWait::None {
        // Fault IPC: wait for the handler's reply, no timeout.
        let t = &mut k.threads[s];
        t.state = State::Receiving;
        t.partner = to;
        return;
    }
    if then.is_nil() {
        set_result(k, s, to, None);
        frame_of(k, s).regs.gpr[6] = 0;
        sched::wake(k, s, hint);
        return;
    }
    k.threads[s].state = State::Ready;
    let timeout = Timeout(k.threads[s].recv_timeout);
    receive(k, s, then, timeout, hint);
}

/// A fault message could not be delivered: its handler does not exist, is dead or is the
/// faulting thread itself, or the handler waiting for it refused the message (its transfer
/// failed). The caller stops the faulting thread; there is nobody to tell more to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFaultHandler;

/// Sends a kernel-synthesised fault message for the current thread `cur` to
/// `handler` and blocks it until the reply. Returns the woken thread.
pub fn fault_ipc(
    k: &mut Kernel,
    cur: usize,
    kind: FaultWait,
    handler: ThreadId,
    msg: [u32; 7],
) -> Result<Option<usize>, NoFaultHandler> {
    let Some(d) = thread::lookup(k, handler) else {
        return Err(NoFaultHandler);
    };
    if d == cur || k.threads[d].state == State::Dead {
        return Err(NoFaultHandler);
    }
    let mut hint = None;
    let t = &mut k.threads[cur];
    t.fault = kind;
    t.fault_msg = msg;
    let me = thread::id_of(k, cur);
    if accepts(k, d, me) {
        match transfer(k, cur, d) {
            Ok(_) => {}
            Err(_) => {
                k.threads[cur].fault = FaultWait::None;
                return Err(NoFaultHandler);
            }
        }
        sched::wake(k, d, &mut hint);
        let t = &mut k.threads[cur];
        t.state = State::Receiving;
        t.partner = handler;
    } else {
        let t = &mut k.threads[cur];
        t.state = State::Sending;
        t.partner = handler;
        t.then_receive = handler;
        enqueue_sender(k, d, cur);
    }
    Ok(hint)
}

/// Writes an interrupt message from `line` into receiver `r`'s frame.
fn deliver_irq_msg(k: &mut Kernel, r: usize, line: u32) {
    let f = frame_of(k, r);
    f.regs.gpr[3] = ThreadId::irq(line).0;
    f.regs.gpr[4] = 0;
    f.regs.gpr[6] = MsgTag::new(label::INTERRUPT, 0, 0).0;
}

/// An interrupt fired on `line`: mask it and send it to its handler.
pub fn raise_irq(k: &mut Kernel, line: u32, hint: &mut Option<usize>) {
    let pic = platform::irq_controller();
    pic.disable(line);
    pic.ack(line);
    let h = k.irqs[line as usize].handler;
    if h == usize::MAX {
        crate::kprintln!("kestrel: interrupt {} has no handler; line masked", line);
        return;
    }
    k.set_irq_pending(line as usize, true);
    if accepts(k, h, ThreadId::irq(line)) {
        k.set_irq_pending(line as usize, false);
        k.irqs[line as usize].in_service = true;
        disarm(k, h);
        deliver_irq_msg(k, h, line);
        sched::wake(k, h, hint);
    }
}

/// Aborts the blocked IPC of thread `j` with `e`.
pub fn abort(k: &mut Kernel, j: usize, e: IpcError, phase: IpcPhase) {
    if k.threads[j].state == State::Sending {
        let to = k.threads[j].partner;
        if let Some(d) = thread::lookup(k, to) {
            remove_sender(k, d, j);
        }
    }
    disarm(k, j);
    let partner = k.threads[j].partner;
    if k.threads[j].fault != FaultWait::None {
        // The faulting instruction simply runs again (and faults again if needed).
        k.threads[j].fault = FaultWait::None;
    } else {
        set_result(k, j, partner, Some((e, phase)));
    }
    k.threads[j].state = State::Ready;
    sched::make_ready(k, j);
}

/// Thread `i` (id `me`) is going away: fail everyone blocked on it.
pub fn cancel_all(k: &mut Kernel, i: usize, me: ThreadId) {
    if matches!(k.threads[i].state, State::Sending) {
        let to = k.threads[i].partner;
        if let Some(d) = thread::lookup(k, to) {
            remove_sender(k, d, i);
        }
    }
    disarm(k, i);
    while k.threads[i].send_head != NO_SLOT_T {
        let s = k.threads[i].send_head;
        remove_sender(k, i, s);
        k.threads[s].state = State::Sending;
        k.threads[s].partner = ThreadId::NIL;
        abort(k, s, IpcError::Canceled, IpcPhase::Send);
    }
    for j in 0..super::NTHREADS {
        if j != i && k.threads[j].state == State::Receiving && k.threads[j].partner == me {
            abort(k, j, IpcError::Canceled, IpcPhase::Receive);
        }
    }
}

/// Timeout expiry, called on each tick while any timeout is armed.
pub fn expire_timeouts(k: &mut Kernel, hint: &mut Option<usize>) {
    let now = k.ticks;
    for j in 0..super::NTHREADS {
        let d = k.threads[j].deadline;
        if d != 0 && d <= now {
            let phase = if k.threads[j].state == State::Sending {
                IpcPhase::Send
            } else {
                IpcPhase::Receive
            };
            abort(k, j, IpcError::Timeout, phase);
            if hint.is_none() && k.threads[j].runnable() {
                sched::dequeue(k, j);
                *hint = Some(j);
            }
        }
    }
}
