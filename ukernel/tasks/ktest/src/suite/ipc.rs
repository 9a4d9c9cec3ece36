//! IPC: every shape of the `Ipc` call, long messages, partners in the same and in
//! other address spaces, and the three kinds of timeout.

use crate::children::{echo_once, echo_server, late_echo, late_sender, send_tag};
use crate::common::{
    call_for, elapsed_us, expect_ipc_error, ipc_failed, lbl, report_from, timebase_hz, TestResult,
    WAIT,
};
use crate::pager::PAGER;
use crate::puppet::{self, op};
use crate::threads::{block_forever, wait_for_state, Thread, CHILD_PRIORITY};
use kestrel_abi::{exreg, IpcError, IpcPhase, ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::sys;

/// The receiver is already waiting when the root sends.
pub fn send_to_waiting_receiver() -> TestResult {
    let t = Thread::local(echo_once, 0, CHILD_PRIORITY)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    ipc::send(t.id(), &Msg::with_words(lbl::REPORT, &[41]), WAIT)
        .map_err(|e| ipc_failed("send", e))?;
    let m = report_from(t.id())?;
    ensure!(
        m.mr(1) == 42,
        "the receiver got the wrong word",
        "echoed {}",
        m.mr(1)
    );
    Ok(())
}

/// The sender blocks first and is released by the receive.
pub fn send_blocks_until_received() -> TestResult {
    let t = Thread::local(late_echo, 10_000, CHILD_PRIORITY)?;
    ipc::send(t.id(), &Msg::with_words(lbl::REPORT, &[41]), WAIT)
        .map_err(|e| ipc_failed("send", e))?;
    let m = report_from(t.id())?;
    ensure!(
        m.mr(1) == 42,
        "the receiver got the wrong word",
        "echoed {}",
        m.mr(1)
    );
    ensure!(
        m.mr(2) & exreg::STATE_SENDING != 0,
        "the root was not seen blocked in its send",
        "root state {:#x}",
        m.mr(2)
    );
    Ok(())
}

/// `call` sends and receives the reply in one system call.
pub fn call_and_reply() -> TestResult {
    let server = Thread::local(echo_server, 0, CHILD_PRIORITY)?;
    let reply = call_for(server.id(), &Msg::with_words(7, &[1, 2, 3]), WAIT)
        .map_err(|e| ipc_failed("call", e))?;
    ensure!(
        reply.label() == 1,
        "the reply has the wrong label",
        "label {}",
        reply.label()
    );
    ensure!(
        reply.tag.untyped() == 3,
        "the reply has the wrong length",
        "{} words",
        reply.tag.untyped()
    );
    ensure!(
        (reply.mr(1), reply.mr(2), reply.mr(3)) == (2, 3, 4),
        "the reply has the wrong words",
        "{} {} {}",
        reply.mr(1),
        reply.mr(2),
        reply.mr(3)
    );
    Ok(())
}

/// A `reply_wait` server answers one call and is immediately ready for the next.
pub fn reply_wait_serves_repeatedly() -> TestResult {
    let server = Thread::local(echo_server, 0, CHILD_PRIORITY)?;
    for round in 1..=3u32 {
        let reply = call_for(server.id(), &Msg::with_words(7, &[round * 10]), WAIT)
            .map_err(|e| ipc_failed("call", e))?;
        ensure!(
            reply.label() as u32 == round && reply.mr(1) == round * 10 + 1,
            "a reply belongs to the wrong request",
            "round {round}: label {}, MR1 {}",
            reply.label(),
            reply.mr(1)
        );
        let state = wait_for_state(server.id(), exreg::STATE_RECEIVING)?;
        ensure!(
            state & exreg::STATE_SENDING == 0,
            "the server is stuck in its reply"
        );
    }
    Ok(())
}

/// A receive naming one sender takes that sender's message, even though another
/// sender has been waiting longer.
pub fn receive_from_specific_sender() -> TestResult {
    let first = Thread::local(send_tag, 1, CHILD_PRIORITY)?;
    wait_for_state(first.id(), exreg::STATE_SENDING)?;
    let second = Thread::local(send_tag, 2, CHILD_PRIORITY)?;
    wait_for_state(second.id(), exreg::STATE_SENDING)?;
    let (from, m) =
        ipc::receive(second.id(), WAIT).map_err(|e| ipc_failed("receive from the second", e))?;
    ensure!(
        from == second.id() && m.mr(1) == 2,
        "got a message from the wrong sender",
        "from {from:?}, tag {}",
        m.mr(1)
    );
    let state = crate::threads::registers(first.id())?.state;
    ensure!(
        state & exreg::STATE_SENDING != 0,
        "the first sender was released by someone else's receive"
    );
    let (from, m) =
        ipc::receive(first.id(), WAIT).map_err(|e| ipc_failed("receive from the first", e))?;
    ensure!(
        from == first.id() && m.mr(1) == 1,
        "got a message from the wrong sender",
        "from {from:?}, tag {}",
        m.mr(1)
    );
    Ok(())
}

/// An open receive takes messages from any sender and names each sender correctly.
pub fn receive_from_any_sender() -> TestResult {
    let a = Thread::local(send_tag, 1, CHILD_PRIORITY)?;
    let b = Thread::local(send_tag, 2, CHILD_PRIORITY)?;
    wait_for_state(a.id(), exreg::STATE_SENDING)?;
    wait_for_state(b.id(), exreg::STATE_SENDING)?;
    let mut seen = 0;
    for _ in 0..2 {
        let (from, m) =
            ipc::receive(ThreadId::ANY, WAIT).map_err(|e| ipc_failed("open receive", e))?;
        ensure!(
            from.0 == m.mr(2),
            "the kernel named the wrong sender",
            "from {from:?}, sender says {:#x}",
            m.mr(2)
        );
        ensure!(
            from == a.id() || from == b.id(),
            "a message from an unexpected thread",
            "from {from:?}"
        );
        seen |= m.mr(1);
    }
    ensure!(seen == 3, "did not get one message from each sender");
    expect_ipc_error(
        "a third open receive",
        ipc::receive(ThreadId::ANY, Timeout::ZERO),
        IpcError::Timeout,
        IpcPhase::Receive,
    )
}

/// Twenty words: MR7 and up travel through the UTCBs.
fn long_words() -> [u32; 20] {
    core::array::from_fn(|i| 0x1111_0000 + (i as u32) * 0x0101)
}

fn check_long_reply(reply: &Msg) -> TestResult {
    ensure!(
        reply.tag.untyped() == 20,
        "the long reply has the wrong length",
        "{} words",
        reply.tag.untyped()
    );
    for (i, w) in long_words().iter().enumerate() {
        ensure!(
            reply.mr(i + 1) == w + 1,
            "a word of the long message was corrupted",
            "MR{}: expected {:#x}, got {:#x}",
            i + 1,
            w + 1,
            reply.mr(i + 1)
        );
    }
    Ok(())
}

/// A 20-word message to a thread of the same space and its 20-word reply.
pub fn long_message_same_space() -> TestResult {
    let server = Thread::local(echo_server, 0, CHILD_PRIORITY)?;
    let reply = call_for(server.id(), &Msg::with_words(7, &long_words()), WAIT)
        .map_err(|e| ipc_failed("call", e))?;
    check_long_reply(&reply)
}

/// The same across address spaces (root ↔ puppet).
pub fn long_message_across_spaces() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    check_long_reply(&puppet::command(p.id(), op::ECHO, &long_words())?)
}

/// Two child spaces call each other; two threads of one child space too.
pub fn ipc_between_child_spaces() -> TestResult {
    let a = Thread::space(puppet::entry(), 0)?;
    let b = Thread::space(puppet::entry(), 0)?;
    let x = puppet::relay(a.id(), b.id(), 99)?;
    ensure!(x == 100, "the relayed echo is wrong", "got {x}");
    let a2 = Thread::in_space_of(&a, puppet::entry(), 0)?;
    let x = puppet::relay(a2.id(), a.id(), 7)?;
    ensure!(
        x == 8,
        "the echo within the child space is wrong",
        "got {x}"
    );
    Ok(())
}

/// A send with timeout zero to a thread that is not waiting for us fails at once.
pub fn send_timeout_zero() -> TestResult {
    // It waits, but for the pager, not for us.
    let t = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    let r = ipc::send(t.id(), &Msg::with_words(lbl::REPORT, &[1]), Timeout::ZERO);
    expect_ipc_error("zero-timeout send", r, IpcError::Timeout, IpcPhase::Send)
}

/// A receive with timeout zero and nothing pending fails at once.
pub fn receive_timeout_zero() -> TestResult {
    expect_ipc_error(
        "open receive",
        ipc::receive(ThreadId::ANY, Timeout::ZERO),
        IpcError::Timeout,
        IpcPhase::Receive,
    )?;
    expect_ipc_error(
        "receive from the pager",
        ipc::receive(PAGER, Timeout::ZERO),
        IpcError::Timeout,
        IpcPhase::Receive,
    )
}

/// Relative timeouts expire, and not before the time asked for.
pub fn relative_timeouts_expire() -> TestResult {
    let hz = timebase_hz()?;
    let t0 = sys::timebase();
    let r = ipc::receive(PAGER, Timeout::from_us(20_000));
    let waited = elapsed_us(t0, sys::timebase(), hz);
    expect_ipc_error("20 ms receive", r, IpcError::Timeout, IpcPhase::Receive)?;
    ensure!(
        waited >= 20_000,
        "the receive timed out early",
        "after {waited} us"
    );
    ensure!(
        waited < 500_000,
        "the receive timed out far too late",
        "after {waited} us"
    );

    let t = Thread::local(block_forever, 0, CHILD_PRIORITY)?;
    wait_for_state(t.id(), exreg::STATE_RECEIVING)?;
    let t0 = sys::timebase();
    let r = ipc::send(
        t.id(),
        &Msg::with_words(lbl::REPORT, &[1]),
        Timeout::from_us(10_000),
    );
    let waited = elapsed_us(t0, sys::timebase(), hz);
    expect_ipc_error("10 ms send", r, IpcError::Timeout, IpcPhase::Send)?;
    ensure!(
        waited >= 10_000,
        "the send timed out early",
        "after {waited} us"
    );
    ensure!(
        waited < 500_000,
        "the send timed out far too late",
        "after {waited} us"
    );
    Ok(())
}

/// A receive without timeout waits as long as it takes (here ~15 ms).
pub fn never_timeout_completes() -> TestResult {
    let t = Thread::local(late_sender, 15_000, CHILD_PRIORITY)?;
    let (from, m) = ipc::receive(t.id(), Timeout::NEVER).map_err(|e| ipc_failed("receive", e))?;
    ensure!(
        from == t.id() && m.mr(1) == 15_000,
        "got the wrong message",
        "from {from:?}, MR1 {}",
        m.mr(1)
    );
    Ok(())
}
