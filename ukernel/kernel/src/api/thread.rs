//! Thread control blocks and thread management (ThreadControl, ExchangeRegisters).
//!
//! A TCB slot `i` holds thread number `FIRST_THREAD_NO + i`; the slot's version
//! must match the id's version, so stale ids are rejected. The thread's user frame
//! lives at the top of its kernel stack (`frame_slot(i)`).

use super::{frame_of, frame_slot, hooks, ipc, sched, space, Kernel, IDLE, NTHREADS};
use crate::arch::{msr, TrapFrame};
use kestrel_abi::{
    exreg, tcflags, KError, ThreadId, Utcb, DEFAULT_TIMESLICE_US, FIRST_THREAD_NO, MAX_PRIORITY,
    PAGE_SIZE, THREAD_NAME_LEN,
};
use kestrel_kcore::prio;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum State {
    /// Slot unused.
    Free,
    /// Created, never started.
    Inactive,
    /// Runnable (queued or current).
    Ready,
    /// Blocked sending to `partner`.
    Sending,
    /// Blocked receiving from `partner` (or any).
    Receiving,
    /// Stopped by the kernel after an unhandled fault; kept until deleted.
    Dead,
}

/// What the thread is waiting for when blocked in an IPC the kernel started for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum FaultWait {
    None,
    PageFault,
    Exception,
    /// A Linux system call reflected to the exception handler (`syscall::reflect_linux`).
    LinuxSyscall,
    /// A vCPU waiting for the VMM's reply to a virtualization fault.
    VirtFault,
}

/// Hot IPC fields first (`repr(C)` keeps the order).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Tcb {
    /// The thread's global id (number and version), cached for the IPC paths.
    pub id: ThreadId,
    pub version: u32,
    pub state: State,
    /// Halted by ExchangeRegisters: not scheduled even when Ready.
    pub halted: bool,
    /// The message is kernel-synthesised (fault/exception) and lives in `fault_msg`.
    pub fault: FaultWait,
    /// The thread's vCPU record (an index virtualization gives out), or [`NO_VCPU`] for
    /// native threads. (`state`, `halted`, `fault` and `vcpu` are one word, which the
    /// IPC fast path tests at once: `glue::fastpath`.)
    pub vcpu: u8,
    pub space: u16,
    pub prio: u8,
    pub timeslice_ticks: u32,
    pub remaining_ticks: u32,
    pub pager: ThreadId,
    pub exc_handler: ThreadId,
    /// The thread whose space may `Schedule` this thread (L4 X.2's scheduler); named by
    /// `ThreadControl` (default: its caller). NIL: only the root space may.
    pub scheduler: ThreadId,
    pub utcb_va: u32,
    pub utcb_pa: u32,
    /// Saved frame (for user threads: always the frame at the top of the stack).
    pub frame: usize,
    // --- IPC state ---
    /// Partner of a blocked IPC (destination when sending, source spec when receiving).
    pub partner: ThreadId,
    /// After the send phase completes, receive from this (NIL = send only).
    pub then_receive: ThreadId,
    /// Receive timeout (raw `Timeout`) for the receive phase after a blocked send.
    pub recv_timeout: u16,
    /// Absolute tick at which the current block times out (0 = none).
    pub deadline: u64,
    /// Senders blocked on this thread (slot indices, FIFO, `NO_SLOT` terminated).
    pub send_head: usize,
    pub send_tail: usize,
    pub send_next: usize,
    pub fault_msg: [u32; 7],
    pub name: [u8; THREAD_NAME_LEN],
}

pub const NO_SLOT: usize = usize::MAX;
/// `Tcb::vcpu` of a native thread.
pub const NO_VCPU: u8 = 0xff;

impl Tcb {
    pub const FREE: Tcb = Tcb {
        id: ThreadId::NIL,
        version: 0,
        state: State::Free,
        halted: false,
        space: 0,
        prio: 0,
        timeslice_ticks: 10,
        remaining_ticks: 10,
        pager: ThreadId::NIL,
        exc_handler: ThreadId::NIL,
        scheduler: ThreadId::NIL,
        utcb_va: 0,
        utcb_pa: 0,
        frame: 0,
        partner: ThreadId::NIL,
        then_receive: ThreadId::NIL,
        recv_timeout: 0xffff,
        deadline: 0,
        send_head: NO_SLOT,
        send_tail: NO_SLOT,
        send_next: NO_SLOT,
        fault: FaultWait::None,
        fault_msg: [0; 7],
        name: [0; THREAD_NAME_LEN],
        vcpu: NO_VCPU,
    };

    pub fn name(&self) -> &str {
        let n = self
            .name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(THREAD_NAME_LEN);
        core::str::from_utf8(&self.name[..n]).unwrap_or("?")
    }

    pub fn is_vcpu(&self) -> bool {
        self.vcpu != NO_VCPU
    }

    pub fn runnable(&self) -> bool {
        self.state == State::Ready && !self.halted
    }
}

/// The slot of thread `id` if it exists with that version.
pub fn lookup(k: &Kernel, id: ThreadId) -> Option<usize> {
    if !id.is_thread() {
        return None;
    }
    let i = (id.number() - FIRST_THREAD_NO) as usize;
    let t = &k.threads[i];
    if t.state != State::Free && t.version == id.version() {
        Some(i)
    } else {
        None
    }
}

/// The global id of slot `i`.
pub fn id_of(k: &Kernel, i: usize) -> ThreadId {
    if i >= NTHREADS {
        return ThreadId::NIL;
    }
    ThreadId::new(i as u32 + FIRST_THREAD_NO, k.threads[i].version)
}

/// The UTCB of thread slot `i` (which must be in use): the one place the kernel turns a
/// thread's UTCB address into a reference.
#[inline(always)]
pub fn utcb(k: &Kernel, i: usize) -> &'static mut Utcb {
    let pa = k.threads[i].utcb_pa;
    debug_assert!(pa != 0 && pa.is_multiple_of(PAGE_SIZE));
    // SAFETY: `utcb_pa` of a thread in use is the page-aligned kernel pool frame that
    // `create` (space::map_utcb) or `create_vcpu` (kmem) gave it, freed only by `delete`;
    // RAM is mapped 1:1 for the kernel, so the address is valid for a `Utcb` (4 KiB). The
    // kernel runs on one CPU and is not re-entered, and the callers hold at most one
    // reference per thread at a time (two threads' UTCBs are distinct frames), so the
    // reference is not aliased while it lives (it does not outlive the kernel entry).
    unsafe { &mut *(pa as *mut Utcb) }
}

/// Writes the thread's id into its UTCB.
fn init_utcb(k: &Kernel, i: usize) {
    utcb(k, i).my_global_id = id_of(k, i).0;
}

/// Creates thread slot `i` (version `version`) in space `sid`.
pub fn create(
    k: &mut Kernel,
    i: usize,
    version: u32,
    sid: u16,
    prio: u8,
    pager: ThreadId,
    utcb_va: u32,
) -> Result<(), KError> {
    let utcb_pa = space::map_utcb(k, sid, utcb_va)?;
    install(k, i, version, sid, prio, pager, utcb_va, utcb_pa);
    frame_of(k, i).regs.msr = msr::USER;
    Ok(())
}

/// Fills TCB slot `i` for a new, inactive thread of space `sid` with a clean frame and
/// counts it in the space.
#[allow(clippy::too_many_arguments)]
fn install(
    k: &mut Kernel,
    i: usize,
    version: u32,
    sid: u16,
    prio: u8,
    pager: ThreadId,
    utcb_va: u32,
    utcb_pa: u32,
) {
    let ticks = ticks_for_us(k, DEFAULT_TIMESLICE_US);
    k.threads[i] = Tcb {
        id: ThreadId::new(i as u32 + FIRST_THREAD_NO, version),
        version,
        state: State::Inactive,
        space: sid,
        prio,
        timeslice_ticks: ticks,
        remaining_ticks: ticks,
        pager,
        utcb_va,
        utcb_pa,
        frame: frame_slot(i) as usize,
        ..Tcb::FREE
    };
    *frame_of(k, i) = TrapFrame::default();
    super::fpu::forget(k, i);
    k.spaces[sid as usize].nthreads += 1;
    init_utcb(k, i);
}

pub fn ticks_for_us(k: &Kernel, us: u32) -> u32 {
    us.div_ceil(k.mem.tick_us).max(1)
}

/// Deletes thread slot `i`: cancels IPC partners, detaches interrupts, frees the UTCB
/// and, with the last thread, the whole space.
pub fn delete(k: &mut Kernel, i: usize) {
    let me = id_of(k, i);
    sched::dequeue(k, i);
    ipc::cancel_all(k, i, me);
    for line in 0..k.irqs.len() {
        if k.irqs[line].handler == i {
            k.irqs[line].handler = usize::MAX;
            k.set_irq_pending(line, false);
        }
    }
    if k.threads[i].deadline != 0 {
        k.threads[i].deadline = 0;
        k.timeouts_armed -= 1;
    }
    let sid = k.threads[i].space;
    if k.threads[i].is_vcpu() {
        hooks::delete_vcpu(k, i);
        k.kmem.free(k.threads[i].utcb_pa);
    } else {
        space::unmap_utcb(k, sid, k.threads[i].utcb_va);
    }
    super::fpu::forget(k, i);
    let version = k.threads[i].version;
    k.threads[i] = Tcb::FREE;
    // Keep the version so a re-created thread is distinguishable only by its new id.
    k.threads[i].version = version;
    k.threads[i].state = State::Free;
    let s = &mut k.spaces[sid as usize];
    s.nthreads -= 1;
    if s.nthreads == 0 {
        space::destroy(k, sid);
    }
}

/// Stops a thread that faulted with nobody to tell, printing one line.
pub fn stop(k: &mut Kernel, i: usize, cause: core::fmt::Arguments) {
    let id = id_of(k, i);
    crate::kprintln!(
        "kestrel: thread {:?} ({}) stopped: {}",
        id,
        k.threads[i].name(),
        cause
    );
    sched::dequeue(k, i);
    ipc::cancel_all(k, i, id);
    k.threads[i].state = State::Dead;
    if id == ThreadId::ROOT {
        crate::kprintln!("kestrel: the root task is gone; stopping the machine");
        crate::platform::shutdown(1);
    }
}

/// `ThreadControl(dest, space_spec, priority, pager, utcb, flags, scheduler, ceiling)`.
///
/// `scheduler` nil names the caller. A new space gets the ceiling in `ceiling` with
/// `tcflags::CEILING`, else its scheduler's space's ceiling, and never more than that
/// (`kcore::prio::new_space_ceiling`); a thread's priority never exceeds its space's ceiling.
pub fn sys_thread_control(k: &mut Kernel, cur: usize, r: &[u32; 8]) -> Result<(), KError> {
    if !k.spaces[k.threads[cur].space as usize].privileged {
        return Err(KError::NoPrivilege);
    }
    let dest = ThreadId(r[0]);
    let space_spec = ThreadId(r[1]);
    let prio = r[2];
    let pager = ThreadId(r[3]);
    let utcb = r[4];
    let flags = r[5];
    let named_scheduler = ThreadId(r[6]);
    let ceiling = (flags & tcflags::CEILING != 0).then_some(r[7]);
    if flags & !tcflags::ALL != 0 {
        return Err(KError::InvalidParam);
    }
    if !dest.is_thread() {
        return Err(KError::InvalidThread);
    }
    let i = (dest.number() - FIRST_THREAD_NO) as usize;
    if space_spec.is_nil() {
        // Delete.
        let j = lookup(k, dest).ok_or(KError::InvalidThread)?;
        if j == cur {
            return Err(KError::InvalidThread);
        }
        delete(k, j);
        return Ok(());
    }
    if prio > MAX_PRIORITY {
        return Err(KError::InvalidScheduler);
    }
    // The scheduler: nil = the caller; otherwise a live thread.
    let scheduler = if named_scheduler.is_nil() {
        id_of(k, cur)
    } else {
        lookup(k, named_scheduler).ok_or(KError::InvalidThread)?;
        named_scheduler
    };
    if k.threads[i].state != State::Free {
        if flags & tcflags::VCPU != 0 {
            return Err(KError::Busy);
        }
        // Modify an existing thread: pager, scheduler, priority, its space's ceiling.
        let j = lookup(k, dest).ok_or(KError::Busy)?;
        let sid = k.threads[j].space as usize;
        if k.spaces[sid].privileged && ceiling.is_some() {
            // The root space's ceiling is the highest priority and stays so.
            return Err(KError::InvalidSpace);
        }
        let new_ceiling = match ceiling {
            Some(c) => prio::fits_ceiling(c, MAX_PRIORITY as u8)?,
            None => k.spaces[sid].ceiling,
        };
        let prio = prio::fits_ceiling(prio, new_ceiling)?;
        k.threads[j].pager = pager;
        if !named_scheduler.is_nil() {
            k.threads[j].scheduler = scheduler;
        }
        if ceiling.is_some() {
            set_space_ceiling(k, sid as u16, new_ceiling);
        }
        sched::set_priority(k, j, prio);
        return Ok(());
    }
    // The ceiling of the space of the new thread's scheduler bounds a new space's.
    let sched_ceiling = lookup(k, scheduler)
        .map(|s| k.spaces[k.threads[s].space as usize].ceiling)
        .ok_or(KError::InvalidThread)?;
    if flags & tcflags::VCPU != 0 {
        if space_spec != dest {
            return Err(KError::InvalidSpace);
        }
        let c = prio::new_space_ceiling(ceiling, sched_ceiling, prio)?;
        create_vcpu(k, i, dest.version(), prio as u8, pager)?;
        k.spaces[k.threads[i].space as usize].ceiling = c;
        k.threads[i].scheduler = scheduler;
        return Ok(());
    }
    let (sid, new_space) = if space_spec == dest {
        let c = prio::new_space_ceiling(ceiling, sched_ceiling, prio)?;
        let sid = space::create(k, false).ok_or(KError::OutOfMemory)?;
        k.spaces[sid as usize].ceiling = c;
        (sid, true)
    } else {
        if ceiling.is_some() {
            // A ceiling belongs to a new space; an existing one is changed on its threads.
            return Err(KError::InvalidParam);
        }
        let j = lookup(k, space_spec).ok_or(KError::InvalidSpace)?;
        let sid = k.threads[j].space;
        prio::fits_ceiling(prio, k.spaces[sid as usize].ceiling)?;
        (sid, false)
    };
    match create(k, i, dest.version(), sid, prio as u8, pager, utcb) {
        Ok(()) => {
            k.threads[i].scheduler = scheduler;
            Ok(())
        }
        Err(e) => {
            if new_space && k.spaces[sid as usize].nthreads == 0 {
                space::destroy(k, sid);
            }
            Err(e)
        }
    }
}

/// Sets the ceiling of space `sid` and lowers every thread of it that is above it.
fn set_space_ceiling(k: &mut Kernel, sid: u16, ceiling: u8) {
    k.spaces[sid as usize].ceiling = ceiling;
    for j in 0..NTHREADS {
        let t = &k.threads[j];
        if j != IDLE && t.state != State::Free && t.space == sid && t.prio > ceiling {
            sched::set_priority(k, j, ceiling);
        }
    }
}

/// `ExchangeRegisters(dest, control, sp, ip, pager, exc_handler)` -> old values.
pub fn sys_exchange_registers(
    k: &mut Kernel,
    cur: usize,
    r: &[u32; 6],
) -> Result<[u32; 5], KError> {
    let dest = ThreadId(r[0]);
    let control = r[1];
    if control & !exreg::ALL != 0 {
        return Err(KError::InvalidParam);
    }
    let j = reachable(k, cur, dest)?;
    let t = k.threads[j];
    let mut state = 0;
    if t.halted {
        state |= exreg::STATE_HALTED;
    }
    match t.state {
        State::Inactive => state |= exreg::STATE_INACTIVE,
        State::Sending => state |= exreg::STATE_SENDING,
        State::Receiving => state |= exreg::STATE_RECEIVING,
        State::Dead => state |= exreg::STATE_DEAD,
        _ => {}
    }
    let old = {
        let f = frame_of(k, j);
        [state, f.regs.gpr[1], f.regs.ip, t.pager.0, t.exc_handler.0]
    };
    if control & (exreg::GET_FRAME | exreg::SET_FRAME) != 0 && j == cur {
        return Err(KError::Busy);
    }
    if control & exreg::GET_FRAME != 0 {
        let regs = frame_of(k, j).regs;
        utcb(k, cur).frame = regs;
    }
    if control & exreg::SET_FRAME != 0 {
        let regs = utcb(k, cur).frame;
        let f = frame_of(k, j);
        let keep_msr = f.regs.msr;
        f.regs = regs;
        // Only the condition/fixed-point state is user-controlled; the MSR stays.
        f.regs.msr = keep_msr;
    }
    {
        let f = frame_of(k, j);
        if control & exreg::SET_SP != 0 {
            f.regs.gpr[1] = r[2];
        }
        if control & exreg::SET_IP != 0 {
            f.regs.ip = r[3];
        }
    }
    if control & exreg::SET_PAGER != 0 {
        k.threads[j].pager = ThreadId(r[4]);
    }
    if control & exreg::SET_EXC_HANDLER != 0 {
        k.threads[j].exc_handler = ThreadId(r[5]);
    }
    if control & exreg::ABORT_IPC != 0
        && matches!(k.threads[j].state, State::Sending | State::Receiving)
    {
        let phase = if k.threads[j].state == State::Sending {
            kestrel_abi::IpcPhase::Send
        } else {
            kestrel_abi::IpcPhase::Receive
        };
        ipc::abort(k, j, kestrel_abi::IpcError::Aborted, phase);
    }
    if control & exreg::HALT != 0 {
        k.threads[j].halted = true;
        sched::dequeue(k, j);
    }
    if control & exreg::START != 0 {
        k.threads[j].halted = false;
        if k.threads[j].state == State::Inactive {
            k.threads[j].state = State::Ready;
        }
        if k.threads[j].runnable() && j != cur {
            sched::make_ready(k, j);
        }
    }
    Ok(old)
}

/// The thread `dest` names, if `cur` may control it: a thread of the caller's own space,
/// any thread for the privileged (root) space, or a vCPU the caller's space drives. This
/// is who `ExchangeRegisters` and `KDebug(SET_NAME)` reach (docs/SECURITY.md).
pub fn reachable(k: &Kernel, cur: usize, dest: ThreadId) -> Result<usize, KError> {
    let j = lookup(k, dest).ok_or(KError::InvalidThread)?;
    let cs = k.threads[cur].space;
    if k.threads[j].space != cs && !k.spaces[cs as usize].privileged && !drives_vcpu(k, cs, j) {
        return Err(KError::NoPrivilege);
    }
    Ok(j)
}

/// True if thread `j` is a vCPU whose exception handler (its VMM) lives in space `cs`: a
/// VMM that is not the root task starts, stops and reads its own vCPUs, as `VcpuControl`
/// already allows it (the root task created the vCPU for it, see `kestrel_abi::root`).
fn drives_vcpu(k: &Kernel, cs: u16, j: usize) -> bool {
    k.threads[j].vcpu != NO_VCPU
        && lookup(k, k.threads[j].exc_handler).is_some_and(|h| k.threads[h].space == cs)
}

/// `Schedule(dest, priority, timeslice_us)`: only by `dest`'s scheduler (a thread of its
/// scheduler's space) or the root space, within the ceilings (`kcore::prio::schedule`).
pub fn sys_schedule(k: &mut Kernel, cur: usize, r: &[u32; 3]) -> Result<(), KError> {
    let j = lookup(k, ThreadId(r[0])).ok_or(KError::InvalidThread)?;
    let cs = k.threads[cur].space;
    let is_scheduler = lookup(k, k.threads[j].scheduler).is_some_and(|s| k.threads[s].space == cs);
    let caller = prio::Caller {
        privileged: k.spaces[cs as usize].privileged,
        is_scheduler,
        ceiling: k.spaces[cs as usize].ceiling,
    };
    let target_ceiling = k.spaces[k.threads[j].space as usize].ceiling;
    let prio = prio::schedule(caller, target_ceiling, r[1], r[2])?;
    if r[2] != 0 {
        let ticks = ticks_for_us(k, r[2]);
        k.threads[j].timeslice_ticks = ticks;
        k.threads[j].remaining_ticks = ticks;
    }
    sched::set_priority(k, j, prio);
    Ok(())
}

/// Marks the idle slot as a kernel-mode thread running `idle_loop`.
pub fn init_idle(k: &mut Kernel, idle_loop: usize) {
    let f = frame_slot(IDLE);
    k.threads[IDLE] = Tcb {
        version: 1,
        state: State::Ready,
        frame: f as usize,
        ..Tcb::FREE
    };
    let fr = frame_of(k, IDLE);
    *fr = TrapFrame::default();
    fr.regs.ip = idle_loop as u32;
    fr.regs.msr = msr::IDLE;
    fr.regs.gpr[1] = (f as u32) - 16;
}

/// Creates a vCPU thread in a new VM space (ThreadControl with `tcflags::VCPU`). Its
/// UTCB is kernel-only: the VM space's addresses all belong to the guest.
pub fn create_vcpu(
    k: &mut Kernel,
    i: usize,
    version: u32,
    prio: u8,
    pager: ThreadId,
) -> Result<(), KError> {
    let sid = space::create(k, false).ok_or(KError::OutOfMemory)?;
    k.spaces[sid as usize].vm = true;
    let Some(utcb_pa) = k.kmem.alloc() else {
        space::destroy(k, sid);
        return Err(KError::OutOfMemory);
    };
    install(k, i, version, sid, prio, pager, 0, utcb_pa);
    k.threads[i].exc_handler = pager;
    if let Err(e) = hooks::create_vcpu(k, i) {
        // Not a vCPU yet: undo by hand (its UTCB is a bare pool page, not mapped).
        k.kmem.free(utcb_pa);
        k.threads[i] = Tcb {
            version,
            ..Tcb::FREE
        };
        space::destroy(k, sid);
        return Err(e);
    }
    Ok(())
}
