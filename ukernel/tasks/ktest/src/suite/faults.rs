//! Adversarial children: privileged and illegal instructions, jumps into and stores
//! to kernel memory, and a fault with nobody to handle it. Each child runs in its
//! own space with the root as exception handler; the kernel must turn every fault
//! into an exception message (or stop the thread) and keep the system running.

use crate::children::{exc_landing, faulter, stubs, wait_then_touch, STOPPED};
use crate::common::{
    call_failed, expect_ipc_error, ipc_failed, lbl, note, recv_from, TestResult, WAIT,
};
use crate::layout::{KERNEL_ADDR, UNMAPPED};
use crate::pager;
use crate::threads::{entry, wait_for_state, Thread};
use kestrel_abi::{exc, exreg, label, ExceptionClass, IpcError, IpcPhase, ThreadId};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::sys;

/// ESR bits (Book E, PPC440 UM §6.4): illegal and privileged instruction.
const ESR_PIL: u32 = 1 << 27;
const ESR_PPR: u32 = 1 << 26;

/// Receives the child's exception message and checks its class and ip.
fn expect_exception(t: &Thread, class: ExceptionClass, ip: u32) -> Result<Msg, &'static str> {
    let m = recv_from(t.id())?;
    if m.label() != label::EXCEPTION {
        note(format_args!("label {:#06x}, MR1 {:#x}", m.label(), m.mr(1)));
        if let Ok(s) = pager::stats(t.id()) {
            note(format_args!(
                "pager saw {} faults, last at {:#x}",
                s.faults, s.last_addr
            ));
        }
        return Err("no exception message");
    }
    let got = m.mr(exc::CLASS);
    ensure!(
        got == class as u32,
        "wrong exception class",
        "class {got} ({}), expected {class:?}",
        ExceptionClass::from_raw(got)
            .map(ExceptionClass::as_str)
            .unwrap_or("unknown")
    );
    ensure!(
        m.mr(exc::IP) == ip,
        "wrong exception ip",
        "ip {:#x}, expected {ip:#x}",
        m.mr(exc::IP)
    );
    Ok(m)
}

/// Stops the child through its handler's KILL reply and checks it stays stopped.
fn kill(t: &Thread) -> TestResult {
    ipc::send(t.id(), &Msg::new(label::KILL), WAIT).map_err(|e| ipc_failed("KILL reply", e))?;
    let state = wait_for_state(t.id(), STOPPED)?;
    ensure!(
        state & (exreg::STATE_SENDING | exreg::STATE_RECEIVING) == 0,
        "the killed thread is still in an IPC",
        "state {state:#x}"
    );
    Ok(())
}

/// `mfmsr` in user mode is a privileged-instruction program exception; a reply with
/// ip and sp resumes the thread there.
pub fn privileged_instruction() -> TestResult {
    let t = Thread::space(entry(faulter), stubs::MFMSR)?;
    let m = expect_exception(&t, ExceptionClass::Program, stubs::mfmsr())?;
    ensure!(
        m.mr(exc::ESR) & ESR_PPR != 0,
        "ESR does not say privileged",
        "esr {:#x}",
        m.mr(exc::ESR)
    );
    ensure!(
        m.mr(exc::INSN) == stubs::MFMSR_R3,
        "the reported instruction is wrong",
        "{:#010x}",
        m.mr(exc::INSN)
    );
    let resume = Msg::with_words(
        0,
        &[exc_landing as *const () as usize as u32, m.mr(exc::SP)],
    );
    ipc::send(t.id(), &resume, WAIT).map_err(|e| ipc_failed("resume reply", e))?;
    let landed = recv_from(t.id())?;
    ensure!(
        landed.label() == lbl::LANDED,
        "the thread did not resume where told",
        "label {:#06x}",
        landed.label()
    );
    Ok(())
}

/// An all-zero word is an illegal instruction; KILL stops the thread.
pub fn illegal_instruction() -> TestResult {
    let t = Thread::space(entry(faulter), stubs::ILLEGAL)?;
    let m = expect_exception(&t, ExceptionClass::Program, stubs::illegal())?;
    ensure!(
        m.mr(exc::ESR) & ESR_PIL != 0,
        "ESR does not say illegal",
        "esr {:#x}",
        m.mr(exc::ESR)
    );
    ensure!(
        m.mr(exc::INSN) == 0,
        "the reported instruction is wrong",
        "{:#010x}",
        m.mr(exc::INSN)
    );
    kill(&t)
}

/// Jumping into the kernel is an instruction storage exception at the target.
pub fn jump_into_kernel() -> TestResult {
    let t = Thread::space(entry(faulter), stubs::JUMP_KERNEL)?;
    expect_exception(&t, ExceptionClass::InstructionStorage, KERNEL_ADDR)?;
    kill(&t)
}

/// Storing to kernel memory is a data storage exception naming the address.
pub fn store_into_kernel() -> TestResult {
    let t = Thread::space(entry(faulter), stubs::STORE_KERNEL)?;
    let m = expect_exception(&t, ExceptionClass::DataStorage, stubs::store_kernel_insn())?;
    ensure!(
        m.mr(exc::DEAR) == KERNEL_ADDR,
        "DEAR is not the kernel address",
        "dear {:#x}",
        m.mr(exc::DEAR)
    );
    ensure!(
        m.mr(exc::INSN) == stubs::STW_R12_0_R12,
        "the reported instruction is wrong",
        "{:#010x}",
        m.mr(exc::INSN)
    );
    kill(&t)
}

/// A thread with neither pager nor exception handler that faults is stopped; the
/// kernel keeps running and reports the thread as gone to IPC partners.
pub fn fault_without_pager_stops_thread() -> TestResult {
    let t = Thread::space(entry(wait_then_touch), UNMAPPED)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    let control = exreg::SET_PAGER | exreg::SET_EXC_HANDLER;
    sys::exchange_registers(t.id(), control, 0, 0, ThreadId::NIL, ThreadId::NIL)
        .map_err(|e| call_failed("ExchangeRegisters (clear pager)", e))?;
    ipc::send(t.id(), &Msg::new(lbl::GO), WAIT).map_err(|e| ipc_failed("GO", e))?;
    let state = wait_for_state(t.id(), STOPPED)?;
    ensure!(
        state & (exreg::STATE_SENDING | exreg::STATE_RECEIVING) == 0,
        "the stopped thread is still in an IPC",
        "state {state:#x}"
    );
    let s = pager::stats(t.id())?;
    ensure!(s.last_addr != UNMAPPED, "the fault went to the old pager");
    let r = ipc::send(t.id(), &Msg::new(lbl::REPORT), WAIT);
    expect_ipc_error(
        "send to the stopped thread",
        r,
        IpcError::NoPartner,
        IpcPhase::Send,
    )
}
