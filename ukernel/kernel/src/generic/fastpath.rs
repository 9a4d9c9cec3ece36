//! The IPC fast path: call and reply-and-wait with only register words.
//!
//! Taken when the whole IPC is "copy up to six words to a partner that is already
//! waiting for us, then wait for the partner (call) or for anyone (reply-and-wait)"
//! and nothing else can be pending: no typed items, no UTCB words, no timeouts, no
//! fault reply, no queued senders or interrupts for the caller, and no ready thread
//! of higher priority than the partner. Everything else goes through the general
//! path in `ipc.rs`, which implements the same semantics.

use super::{frame_of, kernel, sched, thread::FaultWait, thread::State, thread::NO_SLOT};
use crate::arch::TrapFrame;
use kestrel_abi::{MsgTag, Syscall, ThreadId, FIRST_THREAD_NO};

#[no_mangle]
extern "C" fn kestrel_syscall(frame: *mut TrapFrame) -> *mut TrapFrame {
    // SAFETY: the entry path passes the frame it has just filled.
    let f = unsafe { &mut *frame };
    if f.regs.gpr[0] == Syscall::Ipc as u32 && f.regs.msr & crate::arch::msr::IS == 0 {
        if let Some(next) = fast_ipc(f) {
            return next;
        }
    }
    super::trap::trap_slow(frame, crate::arch::vector::SYSCALL)
}

#[inline(always)]
fn fast_ipc(f: &TrapFrame) -> Option<*mut TrapFrame> {
    let r = &f.regs.gpr;
    let (to, from, tos, tag) = (ThreadId(r[3]), ThreadId(r[4]), r[5], MsgTag(r[6]));
    // Only untyped words in registers, receive timeout never, call or reply-and-wait.
    if tag.0 & 0xfc0 != 0 || tag.untyped() > 6 || tos & 0xffff != 0xffff || !(from == to || from.is_any()) {
        return None;
    }
    if !to.is_thread() {
        return None;
    }
    let k = kernel();
    let cur = k.current;
    let d = (to.number() - FIRST_THREAD_NO) as usize;
    let me = k.threads[cur].id;
    {
        let dt = &k.threads[d];
        if dt.id != to
            || dt.state != State::Receiving
            || dt.fault != FaultWait::None
            || dt.deadline != 0
            || dt.halted
            || !(dt.partner.is_any() || dt.partner == me)
        {
            return None;
        }
        if k.threads[cur].send_head != NO_SLOT || k.irq_pending != 0 {
            return None;
        }
        if matches!(k.rq.highest_priority(), Some(p) if p > dt.prio) {
            return None;
        }
    }
    let df = frame_of(k, d);
    df.regs.gpr[3] = me.0;
    df.regs.gpr[4] = 0;
    df.regs.gpr[6] = tag.0 & !(0xf << 12);
    df.regs.gpr[7..13].copy_from_slice(&r[7..13]);
    k.threads[d].state = State::Ready;
    let c = &mut k.threads[cur];
    c.state = State::Receiving;
    c.partner = from;
    Some(sched::switch_to_native(k, d))
}
