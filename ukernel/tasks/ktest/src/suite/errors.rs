//! Error paths: bad destinations, malformed messages, refused mappings, unknown
//! system calls, privilege checks, invalid thread ids and bad user buffers.

use crate::children::{echo_once, nil_acceptor_receiver};
use crate::common::{
    call_failed, expect_ipc_error, expect_kerror, lbl, note, raw_msg, report_from, TestResult, WAIT,
};
use crate::layout::{KERNEL_ADDR, SHARED_BASE, UNMAPPED};
use crate::pager::{self, Frame};
use crate::puppet::{self, op};
use crate::threads::{block_forever, wait_for_state, Thread, CHILD_PRIORITY};
use core::arch::asm;
use kestrel_abi::{
    exreg, kdebug, kinfo, unmapflags, Fpage, IpcError, IpcPhase, KError, MapItem, MsgTag, Rights,
    Syscall, ThreadId, Timeout, Timeouts, ABI_VERSION, MAX_THREAD_NO,
};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{rt, sys};

fn send_zero(to: ThreadId) -> Result<(), kestrel_user::ipc::IpcErr> {
    ipc::send(to, &Msg::with_words(lbl::REPORT, &[1]), Timeout::ZERO)
}

/// Destinations that name no thread: the IPC fails with NoPartner. (A nil
/// destination is not an error: it means "no send phase", which plain receives
/// rely on.)
pub fn invalid_destinations() -> TestResult {
    let (_, _, r) = ipc::ipc(
        ThreadId::NIL,
        ThreadId::NIL,
        Timeouts::new(Timeout::ZERO, Timeout::ZERO),
        &Msg::new(1),
    );
    ensure!(
        r.is_ok(),
        "an IPC with neither send nor receive phase failed"
    );

    let no_partner =
        |what, to| expect_ipc_error(what, send_zero(to), IpcError::NoPartner, IpcPhase::Send);
    no_partner("send to 'any'", ThreadId::ANY)?;
    no_partner(
        "send beyond the last thread number",
        ThreadId::new(MAX_THREAD_NO + 5, 1),
    )?;
    no_partner("send to an interrupt nobody attached", ThreadId::irq(5))?;
    let unused = Thread::reserve()?;
    no_partner("send to an unused thread number", unused.id())?;
    let live = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    let stale = ThreadId::new(live.id().number(), live.id().version() + 1);
    no_partner("send to a stale version", stale)?;
    // A long timeout must not turn a missing partner into a wait.
    expect_ipc_error(
        "send with a timeout",
        ipc::send(stale, &Msg::new(1), WAIT),
        IpcError::NoPartner,
        IpcPhase::Send,
    )
}

/// Typed words must come in pairs, and a message must fit in MR1..MR63.
pub fn malformed_tags() -> TestResult {
    let t = Thread::local(echo_once, 0, CHILD_PRIORITY)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    for (what, tag) in [
        ("odd typed-word count", MsgTag::new(lbl::REPORT, 1, 1)),
        ("64 words", MsgTag::new(lbl::REPORT, 62, 2)),
        ("63 untyped + 2 typed", MsgTag::new(lbl::REPORT, 63, 2)),
    ] {
        expect_ipc_error(
            what,
            ipc::send(t.id(), &raw_msg(tag), Timeout::ZERO),
            IpcError::MsgOverflow,
            IpcPhase::Send,
        )?;
    }
    let state = crate::threads::registers(t.id())?.state;
    ensure!(
        state & exreg::STATE_RECEIVING != 0,
        "a malformed message was delivered"
    );
    Ok(())
}

/// A map item to a thread without a receive window fails for both sides.
pub fn map_without_acceptor() -> TestResult {
    let frame = Frame::alloc()?;
    let t = Thread::local(nil_acceptor_receiver, 0, CHILD_PRIORITY)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    let mut m = Msg::new(lbl::REPORT);
    m.push_item(MapItem::map(0, Fpage::page(frame.va(), Rights::R)));
    expect_ipc_error(
        "map to a nil acceptor",
        ipc::send(t.id(), &m, WAIT),
        IpcError::MapFailed,
        IpcPhase::Send,
    )?;
    let code = report_from(t.id())?.mr(1);
    ensure!(
        code == IpcError::MapFailed as u32,
        "the receiver did not see the failed map",
        "its IPC result {code}"
    );
    Ok(())
}

/// `sc` with a number the kernel does not know.
fn raw_syscall(nr: u32) -> u32 {
    let mut r3 = 0u32;
    // SAFETY: the kernel answers an unknown system call with a status in r3 and
    // changes nothing but r0 and r3..r12 (the ABI's syscall convention).
    unsafe {
        asm!(
            "sc",
            inout("r0") nr => _, inout("r3") r3 => r3,
            out("r4") _, out("r5") _, out("r6") _, out("r7") _, out("r8") _,
            out("r9") _, out("r10") _, out("r11") _, out("r12") _,
            options(nostack)
        );
    }
    r3
}

pub fn unknown_syscall() -> TestResult {
    for nr in [Syscall::TraceControl as u32 + 1, 42, u32::MAX] {
        let r = raw_syscall(nr);
        ensure!(
            r == KError::NoSyscall as u32,
            "an unknown system call did not fail with NoSyscall",
            "number {nr:#x}: status {r}"
        );
    }
    Ok(())
}

/// A thread outside the root space may not use the root's calls.
pub fn no_privilege_outside_root() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    let r = puppet::command(p.id(), op::PRIV, &[])?;
    let names = [
        "ThreadControl",
        "SpaceControl",
        "InterruptControl",
        "KernelInfo(MEMORY)",
        "KDebug(SHUTDOWN)",
        "KernelInfo(VERSION)",
        "ExchangeRegisters on the root",
        "Schedule of the root",
    ];
    let no = KError::NoPrivilege as u32;
    let expected = [no, no, no, no, no, 0, no, KError::NotScheduler as u32];
    let mut ok = true;
    for (i, name) in names.iter().enumerate() {
        if r.mr(i + 1) != expected[i] {
            note(format_args!(
                "{name} from a child space: status {}, expected {}",
                r.mr(i + 1),
                expected[i]
            ));
            ok = false;
        }
    }
    ensure!(ok, "a child space passed a privilege check");
    Ok(())
}

/// ThreadControl rejects ids it cannot create or delete.
pub fn thread_control_invalid_ids() -> TestResult {
    let tc = |dest: ThreadId, space: ThreadId, prio: u32, utcb: u32| {
        sys::thread_control(dest, space, prio, pager::PAGER, utcb)
    };
    let nil = ThreadId::NIL;
    expect_kerror("delete nil", tc(nil, nil, 0, 0), &[KError::InvalidThread])?;
    expect_kerror(
        "delete an interrupt id",
        tc(ThreadId::irq(3), nil, 0, 0),
        &[KError::InvalidThread],
    )?;
    let far = ThreadId::new(MAX_THREAD_NO + 1, 1);
    expect_kerror(
        "create beyond the last number",
        tc(far, far, 100, rt::utcb_addr_for(1)),
        &[KError::InvalidThread, KError::InvalidParam],
    )?;
    let unused = Thread::reserve()?;
    let other = Thread::reserve()?;
    let (u, o) = (unused.id(), other.id());
    let utcb = rt::utcb_addr_for(u.number());
    expect_kerror(
        "delete an unused number",
        tc(u, nil, 0, 0),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "create in the space of no thread",
        tc(u, o, 100, utcb),
        &[KError::InvalidSpace],
    )?;
    expect_kerror(
        "create with priority 300",
        tc(u, u, 300, utcb),
        &[KError::InvalidScheduler],
    )?;
    expect_kerror(
        "create with a misaligned UTCB",
        tc(u, u, 100, utcb + 0x800),
        &[KError::UtcbArea],
    )?;
    let live = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    let stale = ThreadId::new(live.id().number(), live.id().version() + 1);
    expect_kerror(
        "delete a stale version",
        tc(stale, nil, 0, 0),
        &[KError::InvalidThread],
    )?;
    // The failed calls must not have left a thread behind.
    let probe = sys::exchange_registers(u, 0, 0, 0, nil, nil);
    expect_kerror(
        "ExchangeRegisters on the id of the failed creations",
        probe,
        &[KError::InvalidThread],
    )
}

/// A page its owner may write but gave up the read right of (`Unmap` of `R` alone, with
/// `FLUSH_OWN`) is still readable: the 440 has no write-only pages, the TLB gets `UR` with
/// `UW`. The TLB refill and the kernel's own reads of user buffers agree: the thread reads
/// it without a fault (with no pager, a fault would stop it), and KDebug prints from it.
/// (Found by the syscall fuzzer: KDebug refused such a buffer with `InvalidBuffer`, so a
/// program that had done this to its stack lost every console line it printed from there,
/// and a read faulted or not depending on whether the TLB still held the entry.)
pub fn kdebug_reads_write_only_page() -> TestResult {
    const TEXT: &[u8; 32] = b"ktest:   (from a W-only page)  \n";
    let f = Frame::alloc()?;
    for (i, w) in TEXT.chunks_exact(4).enumerate() {
        f.write(4 * i as u32, u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let page = |r| Fpage::page(f.va(), r);
    sys::unmap(page(Rights::R), unmapflags::FLUSH_OWN).map_err(|_| "Unmap of R failed")?;
    let printed = sys::kdebug_write_raw(f.va(), TEXT.len() as u32);
    // Still writable, and readable by the thread itself (the unmap flushed the TLB entry).
    let first = f.read(0);
    f.write(0, first);
    // Give the page back whole: the next touch maps it again through the sigma0 window.
    sys::unmap(page(Rights::RWX), unmapflags::FLUSH_OWN).map_err(|_| "Unmap of RWX failed")?;
    ensure!(
        printed.is_ok(),
        "KDebug refused a buffer its caller can read",
        "KDebug WRITE from a writable page without R: {printed:?}"
    );
    Ok(())
}

/// KDebug output from a buffer that is not mapped, or is kernel memory, or longer than
/// `WRITE_MAX`, fails cleanly (no fault, nothing printed), in the root and in a child.
pub fn kdebug_rejects_bad_buffers() -> TestResult {
    for (what, addr, len) in [
        ("unmapped buffer", UNMAPPED, 8),
        ("kernel buffer", KERNEL_ADDR, 8),
        ("buffer wrapping around", 0xffff_fff8, 16),
    ] {
        expect_kerror(
            what,
            sys::kdebug_write_raw(addr, len),
            &[KError::InvalidBuffer],
        )?;
    }
    // A valid buffer longer than one write may print is refused before anything is
    // printed (a huge length used to keep the kernel printing for as long as the caller
    // had memory mapped).
    static LONG: [u8; kdebug::WRITE_MAX as usize + 1] = [b'x'; kdebug::WRITE_MAX as usize + 1];
    for len in [kdebug::WRITE_MAX + 1, u32::MAX] {
        expect_kerror(
            "KDebug WRITE longer than WRITE_MAX",
            sys::kdebug_write_raw(LONG.as_ptr() as u32, len),
            &[KError::InvalidParam],
        )?;
    }
    let r = sys::syscall(
        Syscall::KDebug,
        [kdebug::SET_NAME, KERNEL_ADDR, 4, 0, 0, 0, 0, 0, 0, 0],
    );
    expect_kerror(
        "SET_NAME from kernel memory",
        KError::check(r[0]),
        &[KError::InvalidBuffer],
    )?;

    let p = Thread::space(puppet::entry(), 0)?;
    let code = puppet::command(p.id(), op::KDEBUG, &[SHARED_BASE, 8])?.mr(1);
    ensure!(
        code == KError::InvalidBuffer as u32,
        "a child's unmapped buffer was not rejected",
        "status {code}"
    );
    let s = pager::stats(p.id())?;
    ensure!(
        s.refused == 0,
        "validating a KDebug buffer caused a page fault",
        "fault at {:#x}",
        s.last_addr
    );
    Ok(())
}

/// KDebug SET_NAME names another thread only where ExchangeRegisters reaches it: the
/// root names a child's thread; a child may not name the root; a name for a thread that
/// does not exist is refused.
pub fn kdebug_names_only_reachable_threads() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    sys::set_thread_name(p.id(), "puppet")
        .map_err(|e| call_failed("SET_NAME of a child's thread by the root", e))?;
    let nobody = ThreadId::new(MAX_THREAD_NO - 1, 0x3fff);
    expect_kerror(
        "SET_NAME of a thread that does not exist",
        sys::set_thread_name(nobody, "x"),
        &[KError::InvalidThread],
    )?;
    let code = puppet::command(p.id(), op::NAME, &[ThreadId::ROOT.0])?.mr(1);
    ensure!(
        code == KError::NoPrivilege as u32,
        "a child named the root task's thread",
        "status {code}"
    );
    let code = puppet::command(p.id(), op::NAME, &[p.id().0])?.mr(1);
    ensure!(
        code == 0,
        "a thread could not name itself by id",
        "status {code}"
    );
    Ok(())
}

/// KernelInfo facts, and the kernel's timebase agreeing with the user-readable one.
pub fn kernel_info_and_timebase() -> TestResult {
    let [version, max, ..] =
        sys::kernel_info(kinfo::VERSION).map_err(|e| call_failed("KernelInfo(VERSION)", e))?;
    ensure!(
        version == ABI_VERSION && max == MAX_THREAD_NO,
        "KernelInfo(VERSION) is wrong",
        "{version} {max}"
    );
    let [hz, tick_us, ..] =
        sys::kernel_info(kinfo::CLOCK).map_err(|e| call_failed("KernelInfo(CLOCK)", e))?;
    ensure!(
        hz > 0 && tick_us > 0,
        "KernelInfo(CLOCK) is wrong",
        "{hz} Hz, tick {tick_us} us"
    );
    let [first, end, window, _] =
        sys::kernel_info(kinfo::MEMORY).map_err(|e| call_failed("KernelInfo(MEMORY)", e))?;
    ensure!(
        first < end && window == kestrel_abi::SIGMA0_WINDOW,
        "KernelInfo(MEMORY) is wrong",
        "{first:#x}..{end:#x} at {window:#x}"
    );
    expect_kerror(
        "KernelInfo(99)",
        sys::kernel_info(99),
        &[KError::InvalidParam],
    )?;
    let before = sys::timebase();
    let r = sys::syscall(
        Syscall::KDebug,
        [kdebug::TIMEBASE, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    let after = sys::timebase();
    KError::check(r[0]).map_err(|e| call_failed("KDebug(TIMEBASE)", e))?;
    let kernel = ((r[1] as u64) << 32) | r[2] as u64;
    ensure!(
        before <= kernel && kernel <= after,
        "the kernel's timebase disagrees with the user's",
        "{before} <= {kernel} <= {after}"
    );
    Ok(())
}
