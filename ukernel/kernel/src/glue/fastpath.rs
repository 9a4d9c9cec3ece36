//! The IPC fast path: call and reply-and-wait with only register words.
//!
//! Taken when the whole IPC is "copy up to six words to a partner that is already
//! waiting for us, then wait for the partner (call) or for anyone (reply-and-wait)"
//! and nothing else can be pending: no typed items, no UTCB words, no timeouts, no
//! fault reply, no queued senders or interrupts for the caller, and no ready thread
//! of higher priority than the partner. Everything else goes through the general
//! path in `ipc.rs`, which implements the same semantics.
//!
//! `__ipc_fast` is the same check-and-transfer in assembly, called by the system-call
//! entry with the caller's saved frame in r3: it returns the partner's frame (the exit
//! path restores it) or tail-calls `kestrel_syscall`. Every condition it tests is one of
//! `fast_ipc`'s, on fields it reads at `offset_of!` offsets (`Kernel`, `Tcb`, `Space` and
//! `ReadyQueues` are `repr(C)` for this).

use crate::api::{frame_of, kernel, thread::FaultWait, thread::State, thread::NO_SLOT};
use crate::arch::TrapFrame;
use kestrel_abi::{MsgTag, Syscall, ThreadId, FIRST_THREAD_NO};

/// The Rust version of the fast path (and the entry of every other system call); the
/// assembly `__ipc_fast` below tries first.
#[no_mangle]
extern "C" fn kestrel_syscall(frame: *mut TrapFrame) -> *mut TrapFrame {
    // SAFETY: the entry path passes the frame it has just filled.
    let f = unsafe { &mut *frame };
    if f.regs.gpr[0] == Syscall::Ipc as u32 && f.regs.msr & crate::arch::msr::IS == 0 {
        if let Some(next) = fast_ipc(f) {
            return next;
        }
    }
    // SAFETY: the entry path passes the frame it has just filled; `fast_ipc` declined and
    // `f` is not used any more, so nothing else references it.
    unsafe {
        super::trap::dispatch(
            frame,
            crate::arch::vector::SYSCALL,
            crate::virt::Insn::Unknown,
        )
    }
}

#[inline(always)]
fn fast_ipc(f: &TrapFrame) -> Option<*mut TrapFrame> {
    let r = &f.regs.gpr;
    let (to, from, tos, tag) = (ThreadId(r[3]), ThreadId(r[4]), r[5], MsgTag(r[6]));
    // Only untyped words in registers, receive timeout never, call or reply-and-wait.
    if tag.0 & 0xfc0 != 0
        || tag.untyped() > 6
        || tos & 0xffff != 0xffff
        || !(from == to || from.is_any())
    {
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
    Some(super::switch::switch_to_native(k, d))
}

use crate::api::{space::Space, thread::Tcb, Kernel};
use core::arch::global_asm;
use core::mem::{offset_of, size_of};
use kestrel_kcore::readyq::ReadyQueues;

type Rq = ReadyQueues<{ crate::api::NTCB }>;
const THREADS: usize = offset_of!(Kernel, threads);
const TB_VCPU: usize = offset_of!(Kernel, vm) + offset_of!(crate::virt::VmState, tb_vcpu);
const SPACE_PID: usize = offset_of!(Kernel, spaces) + offset_of!(Space, pid);
const _: () = assert!(THREADS + size_of::<Tcb>() * crate::api::NTCB < 32768);

/// High and (signed) low halves of a large offset for `addis` + a 16-bit displacement.
const fn ha(x: usize) -> i32 {
    ((x + 0x8000) >> 16) as i32
}
const fn lo(x: usize) -> i32 {
    x as i32 - (ha(x) << 16)
}

global_asm!(
    "    .section .text.ipcfast, \"ax\"",
    "    .global __ipc_fast",
    "__ipc_fast:",
    // Message shape: Ipc, untyped words only (<= 6), receive timeout never, call or
    // reply-and-wait, from a native thread.
    "    lwz 0, 0(3)",
    "    cmpwi 0, 0",
    "    bne 9f",
    "    lwz 5, 24(3)",
    "    andi. 0, 5, 0xfc0",
    "    bne 9f",
    "    clrlwi 0, 5, 26",
    "    cmplwi 0, 6",
    "    bgt 9f",
    "    lwz 0, 20(3)",
    "    clrlwi 0, 0, 16",
    "    cmplwi 0, 0xffff",
    "    bne 9f",
    "    lwz 8, 12(3)",
    "    lwz 4, 16(3)",
    "    cmpw 4, 8",
    "    beq 1f",
    "    cmpwi 4, -1",
    "    bne 9f",
    "1:  lwz 0, {frame_msr}(3)",
    "    andi. 0, 0, {msr_is}",
    "    bne 9f",
    // The partner: a real thread of that version, waiting for us without timeout.
    "    srwi 10, 8, 14",
    "    addi 10, 10, -{first}",
    "    cmplwi 10, {nthreads}",
    "    bge 9f",
    "    lis 11, KERNEL@ha",
    "    addi 11, 11, KERNEL@l",
    "    mulli 12, 10, {tcb}",
    "    add 12, 12, 11",
    "    addi 12, 12, {threads}",
    "    lwz 0, {id}(12)",
    "    cmpw 0, 8",
    "    bne 9f",
    "    lbz 0, {state}(12)",
    "    cmpwi 0, {receiving}",
    "    bne 9f",
    "    lbz 0, {fault}(12)",
    "    cmpwi 0, 0",
    "    bne 9f",
    "    lbz 0, {halted}(12)",
    "    cmpwi 0, 0",
    "    bne 9f",
    "    lwz 0, {deadline}(12)",
    "    lwz 6, {deadline}+4(12)",
    "    or. 0, 0, 6",
    "    bne 9f",
    "    lwz 6, {current}(11)",
    "    mulli 7, 6, {tcb}",
    "    add 7, 7, 11",
    "    addi 7, 7, {threads}",
    "    lwz 6, {id}(7)",
    "    lwz 0, {partner}(12)",
    "    cmpwi 0, -1",
    "    beq 2f",
    "    cmpw 0, 6",
    "    bne 9f",
    // Nothing may be pending for us, no guest state loaded, nobody more urgent.
    "2:  lwz 0, {send_head}(7)",
    "    cmpwi 0, -1",
    "    bne 9f",
    "    lwz 0, {irq_pending}(11)",
    "    cmpwi 0, 0",
    "    bne 9f",
    "    addis 9, 11, {tb_hi}",
    "    lbz 0, {tb_lo}(9)",
    "    cmpwi 0, 255",
    "    bne 9f",
    "    lwz 0, {rq}(11)",
    "    cmpwi 0, 0",
    "    beq 3f",
    "    cntlzw 0, 0",
    "    subfic 0, 0, 31",
    "    slwi 9, 0, 2",
    "    add 9, 9, 11",
    "    lwz 9, {rq_bitmap}(9)",
    "    cntlzw 9, 9",
    "    subfic 9, 9, 31",
    "    slwi 0, 0, 5",
    "    add 0, 0, 9",
    "    lbz 9, {prio}(12)",
    "    cmplw 0, 9",
    "    bgt 9f",
    // The partner's space must have its hardware PID.
    "3:  lhz 0, {space}(12)",
    "    mulli 9, 0, {space_size}",
    "    add 9, 9, 11",
    "    addis 9, 9, {pid_hi}",
    "    lbz 9, {pid_lo}(9)",
    "    cmpwi 9, 0",
    "    beq 9f",
    "    mtspr {pid}, 9",
    // Commit: message into the partner's frame, states, switch.
    "    lwz 9, {frame}(12)",
    "    stw 6, 12(9)",
    "    li 0, 0",
    "    stw 0, 16(9)",
    "    rlwinm 5, 5, 0, 20, 15",
    "    stw 5, 24(9)",
    "    lmw 26, 28(3)",
    "    stmw 26, 28(9)",
    "    li 0, {ready}",
    "    stb 0, {state}(12)",
    "    li 0, {receiving}",
    "    stb 0, {state}(7)",
    "    stw 4, {partner}(7)",
    "    stw 10, {current}(11)",
    "    mtspr {sprg1}, 9",
    "    lwz 0, {utcb_va}(12)",
    "    mtspr {sprg4}, 0",
    "    lis 5, FAST_VCPU@ha",
    "    li 0, 0",
    "    stw 0, FAST_VCPU@l(5)",
    "    mr 3, 9",
    "    blr",
    "9:  b kestrel_syscall",
    frame_msr = const offset_of!(TrapFrame, regs) + offset_of!(kestrel_abi::FrameRegs, msr),
    msr_is = const crate::arch::msr::IS,
    pid = const ppc440::spr::PID,
    sprg1 = const ppc440::spr::SPRG1,
    sprg4 = const ppc440::spr::SPRG4,
    first = const kestrel_abi::FIRST_THREAD_NO,
    nthreads = const crate::api::NTHREADS,
    tcb = const size_of::<Tcb>(),
    threads = const THREADS,
    id = const offset_of!(Tcb, id),
    state = const offset_of!(Tcb, state),
    fault = const offset_of!(Tcb, fault),
    halted = const offset_of!(Tcb, halted),
    deadline = const offset_of!(Tcb, deadline),
    partner = const offset_of!(Tcb, partner),
    send_head = const offset_of!(Tcb, send_head),
    prio = const offset_of!(Tcb, prio),
    space = const offset_of!(Tcb, space),
    frame = const offset_of!(Tcb, frame),
    utcb_va = const offset_of!(Tcb, utcb_va),
    current = const offset_of!(Kernel, current),
    irq_pending = const offset_of!(Kernel, irq_pending),
    tb_hi = const ha(TB_VCPU),
    tb_lo = const lo(TB_VCPU),
    rq = const offset_of!(Kernel, rq) + Rq::SUMMARY_OFFSET,
    rq_bitmap = const offset_of!(Kernel, rq) + Rq::BITMAP_OFFSET,
    space_size = const size_of::<Space>(),
    pid_hi = const ha(SPACE_PID),
    pid_lo = const lo(SPACE_PID),
    receiving = const State::Receiving as u8,
    ready = const State::Ready as u8,
);
