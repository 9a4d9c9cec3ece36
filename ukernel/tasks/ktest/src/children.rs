//! Code that runs in the threads the tests create: helper threads in the root space
//! (entry `extern "C" fn(u32)` for `rt::spawn`), functions for child spaces, and the
//! hand-written instruction sequences of the fault tests.
//!
//! Helpers talk to the root through IPC only and report with `common::report`.
//! Functions meant for child spaces use nothing but their stack, IPC and system
//! calls: the statics below are shared memory of the root space and only root-space
//! helpers touch them.

use crate::common::{ipc_code, lbl, report, set_name, WAIT};
use crate::layout::UART1_BASE;
use crate::threads::sleep_us;
use core::arch::global_asm;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::{exreg, label, ThreadId, Timeout, Timeouts, NUM_MRS};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{rt, sys};

// ---------------------------------------------------------------------------------
// IPC helpers (root space).
// ---------------------------------------------------------------------------------

/// Words of `m`, each plus one, into `out`; returns how many.
fn incremented(m: &Msg, out: &mut [u32; NUM_MRS - 1]) -> usize {
    let n = m.tag.untyped().min(NUM_MRS - 1);
    for (i, w) in out.iter_mut().enumerate().take(n) {
        *w = m.mr(i + 1).wrapping_add(1);
    }
    n
}

/// Receives one message from the root and reports its words plus one.
pub extern "C" fn echo_once(_: u32) {
    if let Ok((_, m)) = ipc::receive(ThreadId::ROOT, WAIT) {
        let mut words = [0; NUM_MRS - 1];
        let n = incremented(&m, &mut words);
        report(&words[..n]);
    }
}

/// Sleeps `delay_us`, notes whether the root is blocked sending, then receives one
/// message from the root → reports `[MR1 + 1, root's state]`.
pub extern "C" fn late_echo(delay_us: u32) {
    sleep_us(delay_us);
    let root_state = sys::exchange_registers(ThreadId::ROOT, 0, 0, 0, ThreadId::NIL, ThreadId::NIL)
        .map(|r| r.state)
        .unwrap_or(0);
    if let Ok((_, m)) = ipc::receive(ThreadId::ROOT, WAIT) {
        report(&[m.mr(1).wrapping_add(1), root_state]);
    }
}

/// A server in the `reply_wait` style: answers each call with the words plus one,
/// labelled with the number of requests served so far.
pub extern "C" fn echo_server(_: u32) {
    let mut served: u16 = 0;
    let mut next = ipc::receive(ThreadId::ANY, Timeout::NEVER);
    loop {
        next = match next {
            Ok((from, m)) => {
                served = served.wrapping_add(1);
                let mut words = [0; NUM_MRS - 1];
                let n = incremented(&m, &mut words);
                ipc::reply_wait(from, &Msg::with_words(served, &words[..n]))
            }
            Err(_) => ipc::receive(ThreadId::ANY, Timeout::NEVER),
        };
    }
}

/// Reports `[tag, own id]`.
pub extern "C" fn send_tag(tag: u32) {
    report(&[tag, sys::my_id().0]);
}

/// Sleeps `delay_us`, then sends `[delay_us]` to the root with an infinite timeout.
pub extern "C" fn late_sender(delay_us: u32) {
    sleep_us(delay_us);
    let _ = ipc::send(
        ThreadId::ROOT,
        &Msg::with_words(lbl::REPORT, &[delay_us]),
        Timeout::NEVER,
    );
}

/// Receives from thread `id` without timeout → reports `[IPC error code]`.
pub extern "C" fn report_receive_from(id: u32) {
    let r = ipc::receive(ThreadId(id), Timeout::NEVER);
    report(&[ipc_code(&r)]);
}

/// Sends to thread `id` without timeout → reports `[IPC error code]`.
pub extern "C" fn report_send_to(id: u32) {
    let r = ipc::send(
        ThreadId(id),
        &Msg::with_words(lbl::REPORT, &[1]),
        Timeout::NEVER,
    );
    report(&[ipc_code(&r)]);
}

/// Receives from the root with no receive window for mappings → reports
/// `[IPC error code]`.
pub extern "C" fn nil_acceptor_receiver(_: u32) {
    ipc::set_acceptor(kestrel_abi::Fpage::NIL);
    let r = ipc::receive(ThreadId::ROOT, WAIT);
    report(&[ipc_code(&r)]);
}

/// The target of a SET_FRAME: reports `[arg]`, then ends (halts).
pub extern "C" fn frame_target(arg: u32) -> ! {
    report(&[arg]);
    rt::exit(0)
}

// ---------------------------------------------------------------------------------
// Scheduling helpers (root space).
// ---------------------------------------------------------------------------------

/// Incremented for ever by [`spin_counter`].
pub static SPINS: AtomicU32 = AtomicU32::new(0);

/// Spins, counting in [`SPINS`].
pub extern "C" fn spin_counter(_: u32) {
    loop {
        SPINS.fetch_add(1, Relaxed);
    }
}

/// Counts loop iterations until the low timebase word passes `deadline`, then
/// reports `[count]`. The count measures the CPU time this thread got.
pub extern "C" fn fair_spinner(deadline: u32) {
    let mut count = 0u32;
    // Wrapping difference: the window is far shorter than the low word's period.
    while ((sys::timebase() as u32).wrapping_sub(deadline) as i32) < 0 {
        count += 1;
    }
    report(&[count]);
}

/// Hands out the order in which threads first ran.
pub static ORDER: AtomicU32 = AtomicU32::new(0);

/// Takes the next number from [`ORDER`] and reports `[it]`.
pub extern "C" fn ticket(_: u32) {
    report(&[ORDER.fetch_add(1, Relaxed)]);
}

/// Who ran, in order, for the yield test (`YIELD_LOG[..YIELD_LEN]`).
pub static YIELD_LOG: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];
pub static YIELD_LEN: AtomicU32 = AtomicU32::new(0);
/// Rounds each yielder logs.
pub const YIELD_ROUNDS: u32 = 3;

/// Logs `tag` and yields with `ThreadSwitch(nil)`, [`YIELD_ROUNDS`] times; reports `[]`.
pub extern "C" fn yielder(tag: u32) {
    for _ in 0..YIELD_ROUNDS {
        let i = YIELD_LEN.fetch_add(1, Relaxed) as usize;
        if let Some(slot) = YIELD_LOG.get(i) {
            slot.store(tag, Relaxed);
        }
        sys::thread_switch(ThreadId::NIL);
    }
    report(&[]);
}

// ---------------------------------------------------------------------------------
// Interrupts (root space: only it can reach the device window).
// ---------------------------------------------------------------------------------

/// 16550 register offsets and bits (National PC16550D data sheet).
mod uart {
    pub const IER: u32 = 1;
    pub const IIR: u32 = 2;
    pub const LCR: u32 = 3;
    pub const SCR: u32 = 7;
    /// IER: transmitter holding register empty interrupt.
    pub const IER_THRI: u8 = 0x02;
    /// LCR: 8 data bits, no parity, 1 stop bit, divisor latch off.
    pub const LCR_8N1: u8 = 0x03;
}

fn uart1_read(reg: u32) -> u8 {
    // SAFETY: the root space reaches device pages 1:1 (uncached, guarded) in the
    // device window; UART1 is not used by the kernel, and only this thread touches it.
    unsafe { ((UART1_BASE + reg) as *const u8).read_volatile() }
}

fn uart1_write(reg: u32, value: u8) {
    // SAFETY: as in `uart1_read`.
    unsafe { ((UART1_BASE + reg) as *mut u8).write_volatile(value) }
}

/// Outcome codes of [`uart1_handler`] (MR2 of its report).
pub mod irq_status {
    pub const DONE: u32 = 0;
    /// The scratch register did not keep a value: no UART at that address.
    pub const NO_UART: u32 = 1;
    /// An expected interrupt did not arrive (MR3 = IPC error code).
    pub const MISSED: u32 = 2;
}

/// Waits for the root's GO, then makes UART1 raise its transmitter-empty interrupt
/// `wanted` times, acknowledging each; reports `[interrupts, status, error]`.
///
/// The device side (QEMU's 16550): enabling IER.THRI while the transmitter is empty
/// raises the line; reading IIR while it says "THR empty" clears the condition.
/// Each round lowers the line and raises it again *before* acknowledging, so the
/// next interrupt is pending in the controller the moment the kernel unmasks it.
pub extern "C" fn uart1_handler(wanted: u32) {
    let irq = ThreadId::irq(crate::layout::UART1_IRQ);
    if ipc::receive(ThreadId::ROOT, WAIT).is_err() {
        return;
    }
    uart1_write(uart::SCR, 0xa5);
    if uart1_read(uart::SCR) != 0xa5 {
        report(&[0, irq_status::NO_UART, 0]);
        return;
    }
    uart1_write(uart::LCR, uart::LCR_8N1);
    uart1_write(uart::IER, 0);
    uart1_write(uart::IER, uart::IER_THRI);
    let mut count = 0;
    let mut next = ipc::receive(irq, WAIT);
    let error = loop {
        match next {
            Ok((from, m)) if from == irq && m.label() == label::INTERRUPT => {}
            Ok(_) => break u32::MAX,
            Err(e) => break e.error as u32,
        }
        count += 1;
        let _ = uart1_read(uart::IIR);
        uart1_write(uart::IER, 0);
        if count >= wanted {
            // Acknowledge the last one without waiting for more.
            let _ = ipc::send(irq, &Msg::new(0), Timeout::ZERO);
            break 0;
        }
        uart1_write(uart::IER, uart::IER_THRI);
        // Acknowledge (unmask) and wait for the next interrupt in one call.
        let (from, m, r) = ipc::ipc(irq, irq, Timeouts::new(Timeout::ZERO, WAIT), &Msg::new(0));
        next = r.map(|()| (from, m));
    };
    uart1_write(uart::IER, 0);
    let status = if error == 0 {
        irq_status::DONE
    } else {
        irq_status::MISSED
    };
    report(&[count, status, error]);
}

// ---------------------------------------------------------------------------------
// Child-space functions.
// ---------------------------------------------------------------------------------

/// Bytes of stack the toucher dirties: four pages.
pub const TOUCH_PAGES: u32 = 4;

/// Writes one byte in each of [`TOUCH_PAGES`] stack pages → reports `[sum of them]`.
pub extern "C" fn stack_toucher(_: u32) {
    let mut buf = [0u8; TOUCH_PAGES as usize * 4096];
    for p in 0..TOUCH_PAGES as usize {
        buf[p * 4096] = p as u8 + 1;
    }
    let buf = core::hint::black_box(&buf);
    let sum: u32 = (0..TOUCH_PAGES as usize)
        .map(|p| buf[p * 4096] as u32)
        .sum();
    report(&[sum]);
}

/// Waits for the root's GO, then reads `addr` → reports `[value]` (if it survives).
pub extern "C" fn wait_then_touch(addr: u32) {
    set_name("no-pager");
    if ipc::receive(ThreadId::ROOT, Timeout::NEVER).is_ok() {
        // SAFETY: deliberately touches an address nobody maps; the kernel must stop
        // this thread, which has neither pager nor exception handler by then.
        let v = unsafe { (addr as *const u32).read_volatile() };
        report(&[v]);
    }
}

/// Where an exception handler resumes a thread: tells the root, then halts.
pub extern "C" fn exc_landing() -> ! {
    let _ = ipc::send(
        ThreadId::ROOT,
        &Msg::with_words(lbl::LANDED, &[sys::my_id().0]),
        WAIT,
    );
    rt::exit(0)
}

// Fault stubs. Each faults on its first interesting instruction; the label names
// the instruction the kernel must report. Nothing after the fault runs unless an
// exception handler resumes the thread elsewhere.
global_asm!(
    r#"
    .section .text.ktest_faults, "ax"
    .balign 4
    .global ktest_mfmsr
ktest_mfmsr:
    mfmsr 3
1:  b 1b

    .global ktest_illegal
ktest_illegal:
    .long 0
2:  b 2b

    .global ktest_jump_kernel
ktest_jump_kernel:
    lis 12, 0x0010
    mtctr 12
    bctr

    .global ktest_store_kernel
ktest_store_kernel:
    lis 12, 0x0010
    .global ktest_store_kernel_insn
ktest_store_kernel_insn:
    stw 12, 0(12)
3:  b 3b
    "#
);

extern "C" {
    fn ktest_mfmsr();
    fn ktest_illegal();
    fn ktest_jump_kernel();
    fn ktest_store_kernel();
    fn ktest_store_kernel_insn();
}

/// The fault stubs: which one a [`faulter`] runs, their addresses, and the
/// encodings the kernel must report as the faulting instruction (MR6).
pub mod stubs {
    pub const MFMSR: u32 = 0;
    pub const ILLEGAL: u32 = 1;
    pub const JUMP_KERNEL: u32 = 2;
    pub const STORE_KERNEL: u32 = 3;

    pub fn mfmsr() -> u32 {
        super::ktest_mfmsr as *const () as usize as u32
    }
    pub fn illegal() -> u32 {
        super::ktest_illegal as *const () as usize as u32
    }
    /// The faulting store inside the store stub.
    pub fn store_kernel_insn() -> u32 {
        super::ktest_store_kernel_insn as *const () as usize as u32
    }
    pub const MFMSR_R3: u32 = kestrel_ppc440::encode::mfmsr(3);
    pub const STW_R12_0_R12: u32 = kestrel_ppc440::encode::stw(12, 0, 12);
}

/// A child that names itself (so the kernel's messages about it are readable) and
/// then runs fault stub `which` (see [`stubs`]).
pub extern "C" fn faulter(which: u32) {
    set_name("faulter");
    // SAFETY: the stubs take no arguments and touch no memory of ours; they fault,
    // and the exception handler decides where (if anywhere) the thread goes next.
    unsafe {
        match which {
            stubs::MFMSR => ktest_mfmsr(),
            stubs::ILLEGAL => ktest_illegal(),
            stubs::JUMP_KERNEL => ktest_jump_kernel(),
            stubs::STORE_KERNEL => ktest_store_kernel(),
            _ => {}
        }
    }
}

/// `exreg` state bits meaning "not running and not going to": used after a kill.
pub const STOPPED: u32 = exreg::STATE_HALTED | exreg::STATE_DEAD | exreg::STATE_INACTIVE;
