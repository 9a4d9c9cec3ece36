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

/// The general path behind the virtualization-fault fast path (`__vfault_dcr` below): a
/// vCPU's privileged `mfdcr`/`mtdcr` the fast path declined, with the instruction it
/// fetched.
#[no_mangle]
extern "C" fn kestrel_vfault(frame: *mut TrapFrame, insn: u32) -> *mut TrapFrame {
    // SAFETY: the entry (`__vfault_dcr`) passes the frame it has just completed; the
    // fast path declined before changing anything.
    unsafe {
        super::trap::dispatch(
            frame,
            crate::arch::vector::PROGRAM,
            crate::virt::Insn::Fetched(insn),
        )
    }
}

/// The entry state of the fast path's exit of vCPU `vi` as every kernel entry from a vCPU
/// establishes it (`trap::dispatch`: USPRG0, the exit accounting's start, a SYSCALL_IPC
/// exit until the reply resumes the guest).
#[no_mangle]
extern "C" fn kestrel_vfault_begin(vi: usize) {
    crate::virt::emulate::enter(kernel(), vi, kestrel_abi::TracePoint::SyscallIpc);
}

/// MR0 of the fast path's fault message, as the receiver gets it (`ipc::transfer` clears
/// the flag bits 12..15): an `Instruction` fault in the short form (6 words).
const DCR_FAULT_TAG: u32 = {
    let (tag, _) = VirtFaultMsg {
        class: VirtFault::Instruction,
        pc: 0,
        insn: 0,
        gpa: 0,
        msr: 0,
        mask: 0,
        rs_value: 0,
    }
    .encode();
    tag.0 & !(0xf << 12)
};
// The short form's MR1..MR6 are pc, insn, gpa bits 0..31, guest MSR, mask | gpa bits
// 32..55, RS value: the receiver's r7..r12 (frame offsets 28..48).
const _: () = assert!(
    vfault::PC == 1
        && vfault::INSN == 2
        && vfault::GPA == 3
        && vfault::MSR == 4
        && vfault::MASK == 5
        && vfault::RS_VALUE == 6
        && vfault::SHORT_WORDS == 6
);

use crate::api::{space::Space, thread::Tcb, Kernel};
use crate::virt::Vcpu;
use core::arch::global_asm;
use core::mem::{offset_of, size_of};
use kestrel_abi::{vfault, VcpuState, VirtFault, VirtFaultMsg};
use kestrel_kcore::readyq::ReadyQueues;

type Rq = ReadyQueues<{ crate::api::NTCB }>;
const THREADS: usize = offset_of!(Kernel, threads);
const TB_VCPU: usize = offset_of!(Kernel, vm) + offset_of!(crate::virt::VmState, tb_vcpu);
const SPACE_PID: usize = offset_of!(Kernel, spaces) + offset_of!(Space, pid);
const _: () = assert!(THREADS + size_of::<Tcb>() * crate::api::NTCB < 32768);
// `state`, `halted`, `fault`, `vcpu`: one big-endian word, in this order, one byte each.
const _: () = {
    assert!(offset_of!(Tcb, state) % 4 == 0);
    assert!(offset_of!(Tcb, halted) == offset_of!(Tcb, state) + 1);
    assert!(offset_of!(Tcb, fault) == offset_of!(Tcb, state) + 2);
    assert!(offset_of!(Tcb, vcpu) == offset_of!(Tcb, state) + 3);
    assert!(size_of::<State>() == 1 && size_of::<FaultWait>() == 1);
    assert!(FaultWait::None as u8 == 0 && (State::Receiving as u32) < 128);
};
const VCPUS: usize = offset_of!(Kernel, vm) + offset_of!(crate::virt::VmState, vcpus);
const VSTATE: usize = offset_of!(Vcpu, s);
const _: () = assert!(size_of::<Vcpu>() < 32768 && VSTATE + size_of::<VcpuState>() < 32768);
const _: () = assert!(offset_of!(Vcpu, tb_offset) + 8 < 32768);
// `hw_tid[MSR[PR]]` is what `virt::on_switch` loads into the PID register.
const _: () = assert!(offset_of!(Vcpu, hw_tid) + 8 < 32768 && size_of::<[u32; 2]>() == 8);
const _: () = assert!(offset_of!(Vcpu, pv) < 32768);
// The reply path tests each flag with one `andi.`.
const _: () = assert!(
    (vfault::REPLY_DSI
        | vfault::REPLY_PROGRAM
        | vfault::REPLY_MACHINE_CHECK
        | vfault::REPLY_STOP
        | vfault::REPLY_FPRS
        | vfault::REPLY_SET_GPR
        | vfault::REPLY_IRQ_LOWER
        | vfault::REPLY_IRQ_RAISE
        | vfault::REPLY_CRIT_LOWER
        | vfault::REPLY_CRIT_RAISE)
        >> 16
        == 0
);
// MR1..MR4 of the reply are the caller's r7..r10 (frame offsets 28..40).
const _: () = assert!(vfault::REPLY_PC == 1 && vfault::REPLY_FLAGS == 2);
const _: () = assert!(vfault::REPLY_GPR_INDEX == 3 && vfault::REPLY_GPR_VALUE == 4);

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
    // Tag bits 0..11 are typed << 6 | untyped: at most 6 means no typed words.
    "    lwz 5, 24(3)",
    "    clrlwi 0, 5, 20",
    "    cmplwi 0, 6",
    "    bgt 9f",
    "    lhz 0, 22(3)",
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
    // Thread slot pointers (r12: partner, r7: caller) are `KERNEL + slot * size`; the
    // field operands include the offset of `Kernel::threads`.
    "    mulli 12, 10, {tcb}",
    "    add 12, 12, 11",
    "    lwz 0, {id}(12)",
    "    cmpw 0, 8",
    "    bne 9f",
    // One word: state Receiving, not halted, no fault wait, native (r6 = the word
    // minus the state). A partner waiting for a fault reply: only a vCPU's, from its
    // VMM (below; cr7 stays "ne" on that path).
    "    lwz 6, {state}(12)",
    "    addis 6, 6, -({receiving} << 8)",
    "    cmplwi 7, 6, {no_vcpu}",
    "    bne 7, .Lvf_reply",
    "8:  lwz 0, {deadline}(12)",
    "    lwz 6, {deadline}+4(12)",
    "    or. 0, 0, 6",
    "    bne 9f",
    "    lwz 6, {current}(11)",
    "    mulli 7, 6, {tcb}",
    "    add 7, 7, 11",
    "    lwz 6, {id}(7)",
    "    lwz 0, {partner}(12)",
    "    cmpwi 0, -1",
    "    beq 2f",
    "    cmpw 0, 6",
    "    bne 9f",
    // Nothing may be pending for us, nobody more urgent. (The caller is native, so no
    // guest state is loaded: `VmState::tb_vcpu` is NO_VCPU and `FAST_VCPU` 0, which
    // every switch to a native thread establishes.)
    "2:  lwz 0, {send_head}(7)",
    "    cmpwi 0, -1",
    "    bne 9f",
    "    lwz 0, {irq_pending}(11)",
    "    cmpwi 0, 0",
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
    "3:  bne 7, .Lvf_reply_commit",
    "    lhz 0, {space}(12)",
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
    "    mr 3, 9",
    "    blr",
    "9:  b kestrel_syscall",
    // The reply to a vCPU's virtualization fault (the other half of `kestrel_vfault`):
    // label 0, pc and flags (and the GPR index and value of `REPLY_SET_GPR`), no
    // injection, stop, FP state or register file; `virt::fault::apply_reply` would only set the
    // pc, that GPR and the interrupt input levels. The checks of the receive phase and
    // the switch are the IPC path's (cr7 tells them apart); then the reply is applied and
    // the vCPU's context loaded as `virt::on_switch` loads it, when its time base is the
    // host's and its magic page is not live (`pv_out` is the general path's; else the
    // general path).
    ".Lvf_reply:",
    "    srwi 0, 6, 8",
    "    cmplwi 0, {fw_virt}",
    "    bne 9b",
    "    srwi. 0, 5, 16",
    "    bne 9b",
    "    clrlwi 14, 5, 26",
    "    cmplwi 14, {reply_min}",
    "    blt 9b",
    "    lwz 15, 32(3)",
    "    andi. 0, 15, {reply_slow}",
    "    bne 9b",
    "    clrlwi 16, 6, 24",
    "    mulli 17, 16, {vcpu_size}",
    "    add 17, 17, 11",
    "    addis 17, 17, {vcpus_hi}",
    "    addi 17, 17, {vcpus_lo}",
    "    lbz 0, {pv_live}(17)",
    "    cmpwi 0, 0",
    "    bne 9b",
    "    lwz 0, {tb_offset}(17)",
    "    lwz 9, {tb_offset}+4(17)",
    "    or. 0, 0, 9",
    "    bne 9b",
    "    b 8b",
    ".Lvf_reply_commit:",
    "    lwz 9, {frame}(12)",
    "    lwz 0, 28(3)",
    "    stw 0, 144(9)",
    "    cmplwi 14, {reply_gpr_words}",
    "    blt 1f",
    "    andi. 0, 15, {reply_set_gpr}",
    "    beq 1f",
    "    lwz 0, 36(3)",
    "    rlwinm 0, 0, 2, 25, 29",
    "    lwz 18, 40(3)",
    "    stwx 18, 9, 0",
    "1:  andi. 0, 15, {irq_lower}",
    "    li 0, 0",
    "    bne 2f",
    "    andi. 0, 15, {irq_raise}",
    "    beq 3f",
    "    li 0, 1",
    "2:  stw 0, {irq_line}(17)",
    "3:  andi. 0, 15, {crit_lower}",
    "    li 0, 0",
    "    bne 4f",
    "    andi. 0, 15, {crit_raise}",
    "    beq 5f",
    "    li 0, 1",
    "4:  stw 0, {crit_line}(17)",
    "5:  li 0, 0",
    "    stb 0, {fault}(12)",
    "    li 0, {ready}",
    "    stb 0, {state}(12)",
    "    li 0, {receiving}",
    "    stb 0, {state}(7)",
    "    stw 4, {partner}(7)",
    "    stw 10, {current}(11)",
    "    mtspr {sprg1}, 9",
    "    addis 18, 11, {tb_hi}",
    "    stb 16, {tb_lo}(18)",
    "    lwz 0, {g_dbcr0}(17)",
    "    lis 18, {dbcr0_events_hi}",
    "    ori 18, 18, {dbcr0_events_lo}",
    "    and 0, 0, 18",
    "    mtspr {dbcr0}, 0",
    "    lwz 0, {g_msr}(17)",
    "    rlwinm 0, 0, 32 - {pr_shift} + 2, 29, 29",
    "    add 18, 17, 0",
    "    lwz 0, {hw_tid}(18)",
    "    mtspr {pid}, 0",
    "    lwz 0, {g_sprg4}(17)",
    "    mtspr {sprg4}, 0",
    "    lwz 0, {g_sprg4}+4(17)",
    "    mtspr {sprg5}, 0",
    "    lwz 0, {g_sprg4}+8(17)",
    "    mtspr {sprg6}, 0",
    "    lwz 0, {g_sprg4}+12(17)",
    "    mtspr {sprg7}, 0",
    "    lwz 0, {g_usprg0}(17)",
    "    mtspr {usprg0}, 0",
    "    lis 5, FAST_VCPU@ha",
    "    stw 17, FAST_VCPU@l(5)",
    "    mr 3, 9",
    "    blr",
    // The virtualization-fault fast path, send side: a guest supervisor's mfdcr/mtdcr,
    // which only the VMM emulates. Called (`bl`) by the program interrupt's assembly tier
    // (`virt::fast`'s `.Lvf_dcr`) as `kestrel_vfault` would be: r3 = the vCPU's frame
    // (complete, its MSR as SRR1 had it), r4 = the instruction, r1 a stack below the
    // frame, `ENTRY_TB` the exit's start; returns the frame to resume in r3 and may
    // clobber every other register (the caller resumes from the frame). The short fault
    // message (no register transfer) goes into the VMM's frame as `virt_fault` +
    // `ipc::fault_ipc` + `ipc::transfer` put it there, the vCPU blocks in its fault wait,
    // and the switch to the VMM is direct (`switch_to_native`). Taken when the class's
    // transfer mask is empty and the VMM waits for this vCPU or anyone, without timeout,
    // native, not halted, with nothing more urgent ready and no guest time base to
    // restore; else a tail call of `kestrel_vfault` (the general path) with r3, r4 and
    // LR as they came. Values live across the call of `kestrel_vfault_begin` are in
    // r14-r31.
    "    .global __vfault_dcr",
    "__vfault_dcr:",
    "    lis 14, KERNEL@ha",
    "    addi 14, 14, KERNEL@l",
    "    lwz 0, {current}(14)",
    "    mulli 15, 0, {tcb}",
    "    add 15, 15, 14",
    "    lbz 24, {vcpu_b}(15)",
    "    cmpwi 24, {no_vcpu}",
    "    beq .Lvs_slow",
    "    mulli 17, 24, {vcpu_size}",
    "    add 17, 17, 14",
    "    addis 17, 17, {vcpus_hi}",
    "    addi 17, 17, {vcpus_lo}",
    // Guest supervisor, short form.
    "    lwz 5, {g_msr}(17)",
    "    andi. 5, 5, {msr_pr}",
    "    bne .Lvs_slow",
    "    lwz 5, {insn_mask}(17)",
    "    cmpwi 5, 0",
    "    bne .Lvs_slow",
    // The handler: a thread of that version, not the vCPU, waiting for it.
    "    lwz 21, {exc_handler}(15)",
    "    srwi 20, 21, 14",
    "    addi 20, 20, -{first}",
    "    cmplwi 20, {nthreads}",
    "    bge .Lvs_slow",
    "    cmpw 20, 0",
    "    beq .Lvs_slow",
    "    mulli 16, 20, {tcb}",
    "    add 16, 16, 14",
    "    lwz 5, {id}(16)",
    "    cmpw 5, 21",
    "    bne .Lvs_slow",
    "    lwz 5, {state}(16)",
    "    addis 5, 5, -({receiving} << 8)",
    "    cmplwi 5, {no_vcpu}",
    "    bne .Lvs_slow",
    "    lwz 5, {deadline}(16)",
    "    lwz 6, {deadline}+4(16)",
    "    or. 5, 5, 6",
    "    bne .Lvs_slow",
    "    lwz 19, {id}(15)",
    "    lwz 5, {partner}(16)",
    "    cmpwi 5, -1",
    "    beq 1f",
    "    cmpw 5, 19",
    "    bne .Lvs_slow",
    // Nobody more urgent than the VMM.
    "1:  lwz 5, {rq}(14)",
    "    cmpwi 5, 0",
    "    beq 2f",
    "    cntlzw 5, 5",
    "    subfic 5, 5, 31",
    "    slwi 9, 5, 2",
    "    add 9, 9, 14",
    "    lwz 9, {rq_bitmap}(9)",
    "    cntlzw 9, 9",
    "    subfic 9, 9, 31",
    "    slwi 5, 5, 5",
    "    add 5, 5, 9",
    "    lbz 9, {prio}(16)",
    "    cmplw 5, 9",
    "    bgt .Lvs_slow",
    // Guest time: loaded for this vCPU (or none), and not moved by the guest.
    "2:  addis 26, 14, {tb_hi}",
    "    lbz 5, {tb_lo}(26)",
    "    cmpwi 5, 255",
    "    beq 3f",
    "    cmpw 5, 24",
    "    bne .Lvs_slow",
    "    lwz 5, {tb_offset}(17)",
    "    lwz 6, {tb_offset}+4(17)",
    "    or. 5, 5, 6",
    "    bne .Lvs_slow",
    // The VMM's space must have its hardware PID.
    "3:  lhz 5, {space}(16)",
    "    mulli 25, 5, {space_size}",
    "    add 25, 25, 14",
    "    addis 25, 25, {pid_hi}",
    "    lbz 25, {pid_lo}(25)",
    "    cmpwi 25, 0",
    "    beq .Lvs_slow",
    // Commit. The vCPU's canonical MSR (what it ran with, without QEMU's stray SRR1
    // bits: `virt::sync_frame_msr`'s value), then the entry state and the exit's start.
    "    mr 22, 3",
    "    mr 23, 4",
    "    mflr 31",
    "    lwz 5, 148(22)",
    "    andi. 5, 5, {srr1_keep}",
    "    stw 5, 148(22)",
    "    mr 3, 24",
    "    bl kestrel_vfault_begin",
    // The pending fault (`virt::fault::fault_message`).
    "    li 0, 0",
    "    stw 0, {fault_mask}(17)",
    "    stw 23, {fault_insn}(17)",
    "    mfspr 0, {dear}",
    "    stw 0, {fault_ea}(17)",
    // The message, into the VMM's frame: r3 = sender, r4 = 0, r6 = tag, r7..r12 = pc,
    // insn, gpa 0, guest MSR, mask 0, the RS/RT register's value.
    "    lwz 18, {frame}(16)",
    "    stw 19, 12(18)",
    "    li 0, 0",
    "    stw 0, 16(18)",
    "    stw 0, 36(18)",
    "    stw 0, 44(18)",
    "    lis 0, {tag_hi}",
    "    ori 0, 0, {tag_lo}",
    "    stw 0, 24(18)",
    "    lwz 0, 144(22)",
    "    stw 0, 28(18)",
    "    stw 23, 32(18)",
    "    lwz 0, {g_msr}(17)",
    "    stw 0, 40(18)",
    "    rlwinm 5, 23, 13, 25, 29",
    "    lwzx 0, 22, 5",
    "    stw 0, 48(18)",
    // States: the VMM ready, the vCPU in its fault wait for the handler.
    "    li 0, {ready}",
    "    stb 0, {state}(16)",
    "    li 0, {receiving}",
    "    stb 0, {state}(15)",
    "    li 0, {fw_virt}",
    "    stb 0, {fault}(15)",
    "    stw 21, {partner}(15)",
    // The switch to the VMM (`switch_to_native`, `on_native` with an unmoved time base).
    "    stw 20, {current}(14)",
    "    lbz 0, {tb_lo}(26)",
    "    cmpwi 0, 255",
    "    beq 4f",
    "    li 0, 255",
    "    stb 0, {tb_lo}(26)",
    "    li 0, 0",
    "    mtspr {dbcr0}, 0",
    "4:  lis 5, FAST_VCPU@ha",
    "    li 0, 0",
    "    stw 0, FAST_VCPU@l(5)",
    "    mtspr {sprg1}, 18",
    "    mtspr {pid}, 25",
    "    lwz 0, {utcb_va}(16)",
    "    mtspr {sprg4}, 0",
    "    mr 3, 18",
    "    mtlr 31",
    "    blr",
    ".Lvs_slow:",
    "    b kestrel_vfault",
    frame_msr = const offset_of!(TrapFrame, regs) + offset_of!(kestrel_abi::FrameRegs, msr),
    msr_is = const crate::arch::msr::IS,
    pid = const ppc440::spr::PID,
    sprg1 = const ppc440::spr::SPRG1,
    sprg4 = const ppc440::spr::SPRG4,
    first = const kestrel_abi::FIRST_THREAD_NO,
    nthreads = const crate::api::NTHREADS,
    tcb = const size_of::<Tcb>(),
    id = const THREADS + offset_of!(Tcb, id),
    state = const THREADS + offset_of!(Tcb, state),
    fault = const THREADS + offset_of!(Tcb, fault),
    deadline = const THREADS + offset_of!(Tcb, deadline),
    partner = const THREADS + offset_of!(Tcb, partner),
    send_head = const THREADS + offset_of!(Tcb, send_head),
    prio = const THREADS + offset_of!(Tcb, prio),
    space = const THREADS + offset_of!(Tcb, space),
    frame = const THREADS + offset_of!(Tcb, frame),
    utcb_va = const THREADS + offset_of!(Tcb, utcb_va),
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
    fw_virt = const FaultWait::VirtFault as u8,
    no_vcpu = const crate::virt::NO_VCPU,
    vcpu_b = const THREADS + offset_of!(Tcb, vcpu),
    exc_handler = const THREADS + offset_of!(Tcb, exc_handler),
    dear = const ppc440::spr::DEAR,
    msr_pr = const crate::arch::msr::PR,
    srr1_keep = const crate::virt::VCPU_MSR | crate::arch::msr::FP | crate::arch::msr::DE,
    insn_mask = const offset_of!(Vcpu, masks) + 4 * VirtFault::Instruction as usize,
    fault_mask = const offset_of!(Vcpu, fault_mask),
    fault_insn = const offset_of!(Vcpu, fault_insn),
    fault_ea = const offset_of!(Vcpu, fault_ea),
    tag_hi = const DCR_FAULT_TAG >> 16,
    tag_lo = const DCR_FAULT_TAG & 0xffff,
    vcpu_size = const size_of::<Vcpu>(),
    vcpus_hi = const ha(VCPUS),
    vcpus_lo = const lo(VCPUS),
    pv_live = const offset_of!(Vcpu, pv) + offset_of!(crate::virt::pv::Pv, live),
    hw_tid = const offset_of!(Vcpu, hw_tid),
    pr_shift = const crate::arch::msr::PR.trailing_zeros(),
    tb_offset = const offset_of!(Vcpu, tb_offset),
    reply_min = const vfault::REPLY_FLAGS,
    reply_gpr_words = const vfault::REPLY_GPR_VALUE,
    reply_slow = const vfault::REPLY_DSI
        | vfault::REPLY_PROGRAM
        | vfault::REPLY_MACHINE_CHECK
        | vfault::REPLY_STOP
        | vfault::REPLY_FPRS,
    reply_set_gpr = const vfault::REPLY_SET_GPR,
    irq_lower = const vfault::REPLY_IRQ_LOWER,
    irq_raise = const vfault::REPLY_IRQ_RAISE,
    crit_lower = const vfault::REPLY_CRIT_LOWER,
    crit_raise = const vfault::REPLY_CRIT_RAISE,
    irq_line = const VSTATE + offset_of!(VcpuState, irq_line),
    crit_line = const VSTATE + offset_of!(VcpuState, crit_line),
    g_dbcr0 = const VSTATE + offset_of!(VcpuState, dbcr0),
    g_msr = const VSTATE + offset_of!(VcpuState, msr),
    g_sprg4 = const VSTATE + offset_of!(VcpuState, sprg) + 16,
    g_usprg0 = const VSTATE + offset_of!(VcpuState, usprg0),
    dbcr0_events_hi = const kestrel_guestcpu::spr::DBCR0_EVENTS >> 16,
    dbcr0_events_lo = const kestrel_guestcpu::spr::DBCR0_EVENTS & 0xffff,
    dbcr0 = const ppc440::spr::DBCR0,
    sprg5 = const ppc440::spr::SPRG5,
    sprg6 = const ppc440::spr::SPRG6,
    sprg7 = const ppc440::spr::SPRG7,
    usprg0 = const ppc440::spr::USPRG0,
);
