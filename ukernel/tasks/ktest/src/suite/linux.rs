//! The Linux personality's kernel half: in a space marked `spacectl::LINUX`, `sc` with a
//! Linux number goes to the exception handler as a `Syscall` exception message, whose
//! reply sets r3 and CR0[SO]; Kestrel's calls stay reachable (docs/adr/0034).

use crate::common::{ipc_failed, lbl, recv_from, report, report_from, TestResult, WAIT};
use crate::threads::{entry, Thread};
use core::arch::asm;
use kestrel_abi::{
    exc, kinfo, label, spacectl, ExceptionClass, Syscall, ThreadId, ABI_VERSION, SYSCALL_BASE,
};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::sys;

/// CR0[SO], Linux ppc32's error flag (CR bit 3, MSB-0).
const CR0_SO: u32 = 1 << 28;
/// Linux ppc32 `getpid`.
const NR_GETPID: u32 = 20;
/// A number no Linux has.
const NR_BOGUS: u32 = 4000;
const ENOSYS: u32 = 38;

/// `sc` with r0 = `nr`, r3..r5 = `a`: returns (r3, CR, r4) as a Linux program sees them.
fn linux_sc(nr: u32, a: [u32; 3]) -> (u32, u32, u32) {
    let (r3, r4, cr): (u32, u32, u32);
    // SAFETY: a system call; the kernel preserves every register but r3..r12 (declared
    // clobbered) and CR, which is read right after.
    unsafe {
        asm!(
            "sc",
            "mfcr {cr}",
            cr = out(reg) cr,
            inout("r0") nr => _,
            inout("r3") a[0] => r3,
            inout("r4") a[1] => r4,
            inout("r5") a[2] => _,
            out("r6") _, out("r7") _, out("r8") _, out("r9") _, out("r10") _,
            out("r11") _, out("r12") _, out("cr0") _,
            options(nostack)
        );
    }
    (r3, cr, r4)
}

/// Child: on GO, makes a Linux `getpid` and a bogus call, then a Kestrel call through
/// `SYSCALL_BASE`, and reports r3 and CR0[SO] of each and the Kestrel result.
extern "C" fn linux_child(_: u32) {
    if ipc::receive(ThreadId::ROOT, WAIT).is_err() {
        return;
    }
    let (pid, cr1, _) = linux_sc(NR_GETPID, [11, 22, 33]);
    let (err, cr2, _) = linux_sc(NR_BOGUS, [1, 2, 3]);
    let (status, _, version) = linux_sc(
        SYSCALL_BASE + Syscall::KernelInfo as u32,
        [kinfo::VERSION, 0, 0],
    );
    report(&[
        pid,
        (cr1 & CR0_SO != 0) as u32,
        err,
        (cr2 & CR0_SO != 0) as u32,
        status,
        version,
    ]);
}

/// Receives a reflected call from `t` and checks number and first arguments.
fn expect_call(t: &Thread, nr: u32, args: [u32; 3]) -> TestResult {
    let m = recv_from(t.id())?;
    ensure!(
        m.label() == label::EXCEPTION && m.mr(exc::CLASS) == ExceptionClass::Syscall as u32,
        "no Syscall exception message",
        "label {:#x} class {}",
        m.label(),
        m.mr(exc::CLASS)
    );
    ensure!(
        m.tag.untyped() == exc::SYSCALL_WORDS as usize,
        "wrong message length",
        "{} words",
        m.tag.untyped()
    );
    let got = [
        m.mr(exc::SC_ARG0),
        m.mr(exc::SC_ARG0 + 1),
        m.mr(exc::SC_ARG0 + 2),
    ];
    ensure!(
        m.mr(exc::SC_NR) == nr && got == args,
        "wrong number or arguments",
        "nr {} args {:?}",
        m.mr(exc::SC_NR),
        got
    );
    Ok(())
}

/// Linux calls reach the handler, replies set r3 and CR0[SO], Kestrel's calls still work.
pub fn syscalls_reflected() -> TestResult {
    let t = Thread::space(entry(linux_child), 0)?;
    sys::space_control(t.id(), spacectl::LINUX, 0)
        .map_err(|e| crate::common::call_failed("SpaceControl(LINUX)", e))?;
    ipc::send(t.id(), &Msg::with_words(lbl::GO, &[]), WAIT).map_err(|e| ipc_failed("GO", e))?;
    let reply = |words: &[u32]| {
        ipc::send(t.id(), &Msg::with_words(0, words), WAIT).map_err(|e| ipc_failed("reply", e))
    };
    expect_call(&t, NR_GETPID, [11, 22, 33])?;
    reply(&[4242, 0])?;
    expect_call(&t, NR_BOGUS, [1, 2, 3])?;
    reply(&[ENOSYS, exc::SC_ERROR])?;
    let m = report_from(t.id())?;
    let got = [m.mr(1), m.mr(2), m.mr(3), m.mr(4), m.mr(5), m.mr(6)];
    ensure!(
        got == [4242, 0, ENOSYS, 1, 0, ABI_VERSION],
        "wrong results in the Linux space",
        "pid {} so {} err {} so {} kestrel status {} version {}",
        got[0],
        got[1],
        got[2],
        got[3],
        got[4],
        got[5]
    );
    Ok(())
}

/// The root space cannot become a Linux space (its calls must stay Kestrel's).
pub fn root_space_refused() -> TestResult {
    let r = sys::space_control(ThreadId::ROOT, spacectl::LINUX, 0);
    ensure!(r.is_err(), "the root space became a Linux space");
    Ok(())
}
