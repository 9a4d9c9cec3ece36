//! Interrupts as IPC: a handler thread receives UART1's interrupts from its
//! interrupt-thread id and acknowledges each one.

use crate::children::{irq_status, uart1_handler};
use crate::common::{call_failed, ipc_failed, lbl, note, recv_from, TestResult, WAIT};
use crate::layout::UART1_IRQ;
use crate::threads::Thread;
use kestrel_abi::{exc, exreg, label, ThreadId};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::sys;

/// Interrupts the handler must see.
const WANTED: u32 = 3;
/// Above the root: the handler reacts as soon as an interrupt is delivered.
const HANDLER_PRIORITY: u32 = 150;

/// An attached interrupt line, detached again when dropped.
struct Attached(u32);

impl Attached {
    fn new(line: u32, handler: ThreadId) -> Result<Attached, &'static str> {
        sys::interrupt_control(line, handler, 0)
            .map_err(|e| call_failed("InterruptControl (attach)", e))?;
        Ok(Attached(line))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Err(e) = sys::interrupt_control(self.0, ThreadId::NIL, 0) {
            note(format_args!(
                "interrupt line {} not detached: {e:?}",
                self.0
            ));
        }
    }
}

/// UART1's transmitter-empty interrupt arrives three times, each after the
/// previous one was acknowledged.
pub fn uart1_interrupts() -> TestResult {
    let h = Thread::local(uart1_handler, WANTED, HANDLER_PRIORITY)?;
    // If the device is missing and the access traps, the root hears about it.
    sys::exchange_registers(
        h.id(),
        exreg::SET_EXC_HANDLER,
        0,
        0,
        ThreadId::NIL,
        ThreadId::ROOT,
    )
    .map_err(|e| call_failed("ExchangeRegisters (set handler)", e))?;
    let _line = Attached::new(UART1_IRQ, h.id())?;
    ipc::send(h.id(), &Msg::new(lbl::GO), WAIT)
        .map_err(|e| ipc_failed("starting the handler", e))?;
    let m = recv_from(h.id())?;
    if m.label() == label::EXCEPTION {
        note(format_args!(
            "exception class {} at ip {:#x}, dear {:#x}",
            m.mr(exc::CLASS),
            m.mr(exc::IP),
            m.mr(exc::DEAR)
        ));
        return Err("touching UART1 raised an exception");
    }
    ensure!(
        m.label() == lbl::REPORT,
        "unexpected message from the handler",
        "label {:#06x}",
        m.label()
    );
    let (count, status, error) = (m.mr(1), m.mr(2), m.mr(3));
    ensure!(
        status != irq_status::NO_UART,
        "UART1 is not there (QEMU creates it only with a second -serial option)"
    );
    ensure!(
        status == irq_status::DONE && count == WANTED,
        "the interrupts did not all arrive",
        "{count} of {WANTED} interrupts, then IPC result {error:#x}"
    );
    Ok(())
}
