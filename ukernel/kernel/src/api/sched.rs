//! Scheduling: fixed priorities with round-robin inside a level, decrementer-driven
//! timeslices, and direct switches to the IPC partner.
//!
//! The running thread is never in the run queue. A thread woken by an IPC is passed
//! to [`pick_next`] as a "hint" instead of being queued, so the common call/reply
//! path switches directly without touching the queues.
//!
//! The switch itself (loading the chosen thread's hardware context) is
//! `glue::switch::switch_to`.

use super::{thread::State, Kernel, IDLE};

pub fn make_ready(k: &mut Kernel, i: usize) {
    if i != k.current && k.threads[i].runnable() && !k.rq.contains(i) {
        k.rq.enqueue(i, k.threads[i].prio);
    }
}

pub fn dequeue(k: &mut Kernel, i: usize) {
    k.rq.remove(i);
}

pub fn set_priority(k: &mut Kernel, i: usize, prio: u8) {
    let queued = k.rq.contains(i);
    if queued {
        k.rq.remove(i);
    }
    k.threads[i].prio = prio;
    if queued {
        k.rq.enqueue(i, prio);
    }
}

/// Makes blocked thread `i` runnable again. The first thread woken during a kernel
/// entry becomes the direct-switch hint; any further ones are queued.
pub fn wake(k: &mut Kernel, i: usize, hint: &mut Option<usize>) {
    k.threads[i].state = State::Ready;
    if k.threads[i].deadline != 0 {
        k.threads[i].deadline = 0;
        k.timeouts_armed -= 1;
    }
    if !k.threads[i].runnable() {
        return;
    }
    match hint {
        None => *hint = Some(i),
        Some(_) => make_ready(k, i),
    }
}

/// True if the running thread `cur` stays on the CPU when nothing was woken: it is
/// runnable and no ready thread has a higher priority.
#[inline(always)]
pub fn keeps_cpu(k: &Kernel, cur: usize) -> bool {
    k.threads[cur].runnable()
        && !matches!(k.rq.highest_priority(), Some(p) if p > k.threads[cur].prio)
}

/// Chooses the thread to run next, given the thread woken by this kernel entry.
pub fn pick_next(k: &mut Kernel, hint: Option<usize>) -> usize {
    let cur = k.current;
    let cur_runs = cur != IDLE && k.threads[cur].runnable();
    if cur_runs {
        let cp = k.threads[cur].prio;
        if let Some(h) = hint {
            if k.threads[h].prio > cp {
                k.rq.enqueue_front(cur, cp);
                return h;
            }
            k.rq.enqueue(h, k.threads[h].prio);
        }
        if let Some((top, p)) = k.rq.highest() {
            if p > cp {
                k.rq.remove(top);
                k.rq.enqueue_front(cur, cp);
                return top;
            }
        }
        return cur;
    }
    if let Some(h) = hint {
        let hp = k.threads[h].prio;
        match k.rq.highest() {
            Some((_, p)) if p > hp => k.rq.enqueue(h, hp),
            _ => return h,
        }
    }
    match k.rq.highest() {
        Some((top, _)) => {
            k.rq.remove(top);
            top
        }
        None => IDLE,
    }
}

/// Decrementer tick: expire timeouts and charge the running thread's timeslice.
#[inline(never)]
pub fn tick(k: &mut Kernel) -> Option<usize> {
    k.ticks += 1;
    let mut hint = None;
    if k.timeouts_armed > 0 {
        super::ipc::expire_timeouts(k, &mut hint);
    }
    let cur = k.current;
    if cur != IDLE && k.threads[cur].runnable() {
        let t = &mut k.threads[cur];
        t.remaining_ticks = t.remaining_ticks.saturating_sub(1);
        if t.remaining_ticks == 0 {
            t.remaining_ticks = t.timeslice_ticks;
            let p = t.prio;
            // Round robin: go behind every other ready thread of the same priority.
            // With no current thread, `pick_next` takes the head of the queue.
            if matches!(k.rq.highest(), Some((_, top)) if top >= p) {
                k.rq.enqueue(cur, p);
                k.current = IDLE;
            }
        }
    }
    hint
}
