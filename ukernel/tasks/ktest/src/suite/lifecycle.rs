//! Threads: creation and deletion, what deletion does to IPC partners, and
//! ExchangeRegisters (read, halt/start, frames, aborting IPC).

use crate::children::{
    frame_target, report_receive_from, report_send_to, send_tag, spin_counter, SPINS,
};
use crate::common::{call_failed, expect_ipc_error, expect_kerror, lbl, report_from, TestResult};
use crate::layout;
use crate::pager::PAGER;
use crate::threads::{block_forever, registers, sleep_us, wait_for_state, Thread, CHILD_PRIORITY};
use core::sync::atomic::Ordering::Relaxed;
use kestrel_abi::{exreg, IpcError, IpcPhase, KError, ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{rt, sys};

/// Priority below the root's, for threads that spin.
const SPIN_PRIORITY: u32 = CHILD_PRIORITY - 10;
/// MSR[PR]: the thread runs in user mode.
const MSR_PR: u32 = kestrel_ppc440::msr::PR;

fn exregs(id: ThreadId, control: u32) -> Result<sys::ExRegs, &'static str> {
    sys::exchange_registers(id, control, 0, 0, ThreadId::NIL, ThreadId::NIL)
        .map_err(|e| call_failed("ExchangeRegisters", e))
}

/// A created thread runs and knows its id; once deleted its id is dead, and its
/// number comes back with a new version.
pub fn thread_create_delete() -> TestResult {
    let t = Thread::local(send_tag, 7, CHILD_PRIORITY)?;
    let id = t.id();
    let m = report_from(id)?;
    ensure!(
        m.mr(1) == 7 && m.mr(2) == id.0,
        "the new thread reported wrongly",
        "tag {}, id {:#x}",
        m.mr(1),
        m.mr(2)
    );
    drop(t);
    expect_kerror(
        "ExchangeRegisters on a deleted thread",
        sys::exchange_registers(id, 0, 0, 0, ThreadId::NIL, ThreadId::NIL),
        &[KError::InvalidThread],
    )?;
    let r = ipc::send(id, &Msg::new(lbl::REPORT), Timeout::ZERO);
    expect_ipc_error(
        "send to a deleted thread",
        r,
        IpcError::NoPartner,
        IpcPhase::Send,
    )?;
    let again = Thread::local(send_tag, 8, CHILD_PRIORITY)?;
    ensure!(
        again.id().number() == id.number() && again.id() != id,
        "the number was not reused with a new version",
        "{id:?} then {:?}",
        again.id()
    );
    ensure!(
        report_from(again.id())?.mr(1) == 8,
        "the successor reported wrongly"
    );
    expect_kerror(
        "ExchangeRegisters with the old version",
        sys::exchange_registers(id, 0, 0, 0, ThreadId::NIL, ThreadId::NIL),
        &[KError::InvalidThread],
    )
}

/// Deleting a thread fails the IPC of everyone blocked on it: a receiver waiting
/// for it gets Canceled, a sender waiting to reach it Canceled (or NoPartner).
pub fn delete_cancels_blocked_partners() -> TestResult {
    let victim = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    wait_for_state(victim.id(), exreg::STATE_RECEIVING)?;
    let receiver = Thread::local(report_receive_from, victim.id().0, CHILD_PRIORITY)?;
    wait_for_state(receiver.id(), exreg::STATE_RECEIVING)?;
    let sender = Thread::local(report_send_to, victim.id().0, CHILD_PRIORITY)?;
    wait_for_state(sender.id(), exreg::STATE_SENDING)?;
    drop(victim);
    let r = report_from(receiver.id())?.mr(1);
    ensure!(
        r == IpcError::Canceled as u32,
        "the waiting receiver was not canceled",
        "IPC result {r}"
    );
    let s = report_from(sender.id())?.mr(1);
    ensure!(
        s == IpcError::Canceled as u32 || s == IpcError::NoPartner as u32,
        "the waiting sender was not canceled",
        "IPC result {s}"
    );
    Ok(())
}

/// The ip and sp of a blocked thread read back sensibly, and so do its pager
/// and exception handler.
pub fn exreg_reads_blocked_thread() -> TestResult {
    let t = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    let state = wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    ensure!(
        state & (exreg::STATE_HALTED | exreg::STATE_SENDING) == 0,
        "a receiving thread has other state bits",
        "{state:#x}"
    );
    let r = registers(t.id())?;
    ensure!(
        layout::is_text(r.ip),
        "the ip is not in the code",
        "ip {:#x}",
        r.ip
    );
    let top = rt::pool_stack_top(t.id().number());
    ensure!(
        r.sp < top && r.sp > top - rt::STACK_SIZE as u32,
        "the sp is not on the thread's stack",
        "sp {:#x}, stack top {top:#x}",
        r.sp
    );
    ensure!(
        r.pager == PAGER && r.exc_handler.is_nil(),
        "pager or handler read back wrongly",
        "{:?} {:?}",
        r.pager,
        r.exc_handler
    );
    expect_kerror(
        "undefined control bits",
        sys::exchange_registers(t.id(), 1 << 20, 0, 0, ThreadId::NIL, ThreadId::NIL),
        &[KError::InvalidParam],
    )
}

/// HALT stops a spinning thread; START lets it go on.
pub fn exreg_halt_and_resume() -> TestResult {
    SPINS.store(0, Relaxed);
    let t = Thread::local(spin_counter, 0, SPIN_PRIORITY)?;
    sleep_us(5_000);
    ensure!(SPINS.load(Relaxed) > 0, "the spinning thread never ran");
    exregs(t.id(), exreg::HALT)?;
    let state = registers(t.id())?.state;
    ensure!(
        state & exreg::STATE_HALTED != 0,
        "a halted thread does not say so",
        "state {state:#x}"
    );
    let halted = SPINS.load(Relaxed);
    sleep_us(5_000);
    ensure!(
        SPINS.load(Relaxed) == halted,
        "the halted thread kept running"
    );
    exregs(t.id(), exreg::START)?;
    sleep_us(5_000);
    ensure!(
        SPINS.load(Relaxed) > halted,
        "the restarted thread did not run"
    );
    Ok(())
}

/// GET_FRAME shows a halted thread's registers; SET_FRAME sends it elsewhere with
/// other arguments.
pub fn exreg_get_and_set_frame() -> TestResult {
    let t = Thread::local(spin_counter, 0, SPIN_PRIORITY)?;
    sleep_us(2_000);
    exregs(t.id(), exreg::HALT)?;
    let r = registers(t.id())?;
    let mut frame = sys::get_frame(t.id()).map_err(|e| call_failed("GET_FRAME", e))?;
    ensure!(
        frame.ip == r.ip && frame.gpr[1] == r.sp,
        "the frame disagrees with ip/sp",
        "frame {:#x}/{:#x}, regs {:#x}/{:#x}",
        frame.ip,
        frame.gpr[1],
        r.ip,
        r.sp
    );
    ensure!(
        frame.msr & MSR_PR != 0,
        "the thread's MSR is not user mode",
        "msr {:#x}",
        frame.msr
    );
    frame.ip = frame_target as *const () as usize as u32;
    frame.gpr[3] = 0x5eed_0001;
    frame.gpr[1] = rt::pool_stack_top(t.id().number()) - 256;
    sys::set_frame(t.id(), &frame).map_err(|e| call_failed("SET_FRAME", e))?;
    exregs(t.id(), exreg::START)?;
    let v = report_from(t.id())?.mr(1);
    ensure!(
        v == 0x5eed_0001,
        "the thread did not resume with the new frame",
        "reported {v:#x}"
    );
    expect_kerror(
        "GET_FRAME on oneself",
        sys::get_frame(sys::my_id()),
        &[KError::Busy],
    )
}

/// ABORT_IPC ends a blocked receive and a blocked send with Aborted.
pub fn exreg_abort_ipc() -> TestResult {
    let receiver = Thread::local(report_receive_from, PAGER.0, CHILD_PRIORITY)?;
    wait_for_state(receiver.id(), exreg::STATE_RECEIVING)?;
    exregs(receiver.id(), exreg::ABORT_IPC)?;
    let r = report_from(receiver.id())?.mr(1);
    ensure!(
        r == IpcError::Aborted as u32,
        "the aborted receive did not say Aborted",
        "IPC result {r}"
    );

    let busy = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    wait_for_state(busy.id(), exreg::STATE_RECEIVING)?;
    let sender = Thread::local(report_send_to, busy.id().0, CHILD_PRIORITY)?;
    wait_for_state(sender.id(), exreg::STATE_SENDING)?;
    exregs(sender.id(), exreg::ABORT_IPC)?;
    let s = report_from(sender.id())?.mr(1);
    ensure!(
        s == IpcError::Aborted as u32,
        "the aborted send did not say Aborted",
        "IPC result {s}"
    );
    Ok(())
}
