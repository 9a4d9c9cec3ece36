//! The emulation fast paths: the hottest privileged instructions of a guest kernel
//! (mfmsr, mtmsr, wrtee, wrteei, rfi within one translation space,
//! and mfspr/mtspr of plain shadow registers) handled straight from the program-interrupt
//! entry, before the general dispatcher. Anything with a side effect beyond a register
//! copy (timers, PID writes, TLB, a possibly pending interrupt, a change of the guest's
//! privilege level or translation space) takes the full path in `emulate.rs`. Both follow
//! `kestrel_guestcpu` (its SPR field map gives the Rust tier's copies and the assembly's
//! offsets, its MSR rules the checks below); this file only has to be fast and obviously
//! equivalent.
//!
//! Two tiers. `__program_fast` (assembly, below) handles mfmsr, mtmsr, wrtee, wrteei,
//! rfi (when neither MSR[IS], DS, FP nor DE changes, WE stays clear and, if interrupts
//! become enabled, nothing can be pending; a change of MSR[PR] loads the PID register
//! with the TID `mmu` keeps for the current guest PID in the new mode, `Vcpu::hw_tid`), mfspr/mtspr of the SPRs of the
//! `ppc440` table's `Fast` and `Shadow` classes and mfspr PID ([`SPR_SLOTS`]), for a guest
//! in supervisor mode whose instruction page is in the fetch cache. It saves the general
//! registers and CR in the thread's frame (`stmw`: the guest's RT/RS are then frame
//! words), hands tlbre, tlbwe and tlbsx[.] to `__tlb_insn_fast` (Rust, `mmu::tlb_insn`,
//! called with the frame completed as far as it needs: LR, CTR and XER saved around
//! the call), and updates the trace counters itself (docs/adr/0023-exit-accounting.md: the
//! exit runs from the vector's time-base read to the one eleven instructions before the
//! `rfi`, which also starts the next GUEST_RUN, `Vcpu::run_tb`; GUEST_RUN gets the time
//! from the last return to the guest to the entry, as `vcpu::exit_begin` does). Every
//! other case completes the frame and calls `kestrel_program` as the ordinary entry
//! would, where [`program`] (Rust) covers the rest of the hot instructions before the
//! general emulator. The assembly addresses `Vcpu` fields by `offset_of!`, so `Vcpu` is
//! `repr(C)`.
//!
//! `__guest_resume` (also below) ends an exit that went through the general path: every
//! kernel exit path calls it when the frame it resumes is a vCPU's (`arch::entry`).

use super::mmu;
use super::pv;
use super::vcpu::{
    exit_begin, sync_frame_msr, trace_at, vcpu_of, write_through, Insn, Vcpu, GUEST_MSR_MASK,
    NO_VCPU, VCPU_MSR,
};
use crate::api::{kernel, Kernel};
use crate::arch::entry::{
    ABI_FRAME, F_CR, F_CTR, F_GPR, F_IP, F_LR, F_MSR, F_R1, F_R2, F_R3, F_XER,
};
use crate::arch::{esr, msr, spr, tcr, tsr, TrapFrame};
use core::arch::global_asm;
use core::mem::offset_of;
use kestrel_abi::TracePoint;
use kestrel_abi::{TraceCounter, VcpuState};
use kestrel_guestcpu::msr as gmsr;
use kestrel_guestcpu::spr::{self as gspr, offset_of_spr, Rule, SprEffect};
use kestrel_guestcpu::timer::Timers;
use ppc440::decode::{
    self,
    opcd::{X, XL},
    xo19, xo31,
};
use ppc440::spr::{emulation, Emulation, PID, SPRG2, SPRG3, SPRG4, SPRG7, SRR0, SRR1};

/// MSR bits a fast-path MSR write may not change (they need the full path: a new
/// translation space flushes the shadow TLB; FP/DE change the real MSR), plus MSR[PR],
/// which the assembly tier handles on a side path (the PID register), and MSR[FP], which it
/// handles by clearing the real MSR[FP] (`.Lvf_slow_bits`).
const SLOW_MSR_BITS: u32 = msr::IS | msr::DS | msr::FP | msr::DE | msr::PR;

/// The Rust tier: emulates the program interrupt of the running vCPU and returns the
/// frame to resume, or returns what `slow` (the general path) returns for it, handing
/// `slow` the guest instruction it fetched (so the instruction is fetched once per trap).
#[inline(always)]
pub fn program(frame: *mut TrapFrame, slow: impl FnOnce(Insn) -> *mut TrapFrame) -> *mut TrapFrame {
    match program_fast(frame) {
        Ok(f) => f,
        Err(insn) => slow(insn),
    }
}

#[inline(always)]
fn program_fast(frame: *mut TrapFrame) -> Result<*mut TrapFrame, Insn> {
    let k = kernel();
    let cur = k.current;
    let Some(t) = k.threads.get(cur) else {
        return Err(Insn::Unknown);
    };
    let vi = t.vcpu;
    if vi == NO_VCPU {
        return Err(Insn::Unknown);
    }
    let vi = vi as usize;
    // SAFETY: the entry path passes the frame it has just filled.
    let f = unsafe { &mut *frame };
    if f.regs.msr & VCPU_MSR != VCPU_MSR || spr::read::<{ ppc440::spr::ESR }>() & esr::PPR == 0 {
        return Err(Insn::Unknown);
    }
    if k.vm.vcpus[vi].s.msr & msr::PR != 0 {
        return Err(Insn::Unknown);
    }
    let pc = f.regs.ip;
    let Some(insn) = mmu::guest_fetch(k, vi, pc) else {
        return Err(Insn::Unreadable);
    };
    // A live magic page (pv.rs): the fields this tier may touch come from it first.
    let live = pv::live(k, vi);
    if live && !pv::fast_in(k, vi, insn) {
        return Err(Insn::Fetched(insn));
    }
    let old = k.vm.vcpus[vi].s.msr;
    match emulate(k, vi, f, insn, old) {
        Some(tp) => {
            if live {
                pv::fast_out(k, vi, old);
            }
            // The exit ends at the return to the guest (`__guest_resume`).
            exit_begin(k, vi, tp);
            Ok(frame)
        }
        None => Err(Insn::Fetched(insn)),
    }
}

/// Emulates `insn` (fetched at the frame's pc) if it is one the fast tier handles; its
/// trace point when the frame is ready to resume.
#[inline(always)]
fn emulate(
    k: &mut Kernel,
    vi: usize,
    f: &mut TrapFrame,
    insn: u32,
    old: u32,
) -> Option<TracePoint> {
    let pc = f.regs.ip;
    let rs = decode::RT.get(insn) as usize;
    let (new_msr, next, tp) = match (decode::OPCD.get(insn), decode::XO.get(insn)) {
        (X, xo31::MFMSR) => {
            f.regs.gpr[rs] = old;
            (old, pc + 4, TracePoint::EmulMfmsr)
        }
        (X, xo31::MTMSR) => (
            f.regs.gpr[rs] & GUEST_MSR_MASK,
            pc + 4,
            TracePoint::EmulMtmsr,
        ),
        (X, xo31::WRTEE) => (
            gmsr::with_ee(old, f.regs.gpr[rs] & msr::EE != 0),
            pc + 4,
            TracePoint::EmulWrtee,
        ),
        (X, xo31::WRTEEI) => (
            gmsr::with_ee(old, decode::E.get(insn) != 0),
            pc + 4,
            TracePoint::EmulWrteei,
        ),
        (XL, xo19::RFI) => {
            let s = &k.vm.vcpus[vi].s;
            (s.srr1 & GUEST_MSR_MASK, s.srr0, TracePoint::EmulRfi)
        }
        (X, xo31::MFSPR) => {
            // The plain SPRs and PID (whose reads are plain).
            let n = decode::spr_number(insn);
            if !(gspr::is_plain(n) || n == PID) {
                return None;
            }
            f.regs.gpr[rs] = *gspr::field(&k.vm.vcpus[vi].s, n)?;
            (old, pc + 4, TracePoint::EmulMfspr)
        }
        (X, xo31::MTSPR) => {
            let (n, val) = (decode::spr_number(insn), f.regs.gpr[rs]);
            if let Some(v) = gspr::plain_mut(&mut k.vm.vcpus[vi].s, n) {
                *v = val;
            } else if matches!(gspr::rule(n), Some(Rule::Pid | Rule::WriteThrough)) {
                // PID (the shadow TLB's PID switch) and SPRG4-7 (written through): their
                // effects need no timer.
                match gspr::mtspr(&mut k.vm.vcpus[vi].s, n, val, 0).ok()? {
                    SprEffect::PidSwitch => mmu::guest_pid_switch(k, vi),
                    SprEffect::WriteThrough { spr, value } => write_through(spr, value),
                    _ => {}
                }
            } else {
                return None;
            }
            (old, pc + 4, TracePoint::EmulMtspr)
        }
        (X, xo31::TLBRE | xo31::TLBWE | xo31::TLBSX) => {
            (old, pc + 4, mmu::tlb_insn(k, vi, f, insn)?)
        }
        _ => return None,
    };
    // The Rust tier may switch the privilege level (PID), not the translation space.
    if (new_msr ^ old) & (SLOW_MSR_BITS & !msr::PR) != 0 || new_msr & msr::WE != 0 {
        return None;
    }
    // Enabling interrupts with one possibly pending: let the full path deliver it.
    if gmsr::enables_interrupts(old, new_msr)
        && gmsr::maybe_pending(
            &k.vm.vcpus[vi].s,
            k.vm.vcpus[vi].timers.dec_deadline,
            spr::timebase,
        )
    {
        return None;
    }
    k.vm.vcpus[vi].s.msr = new_msr;
    if (new_msr ^ old) & msr::PR != 0 {
        spr::write::<{ ppc440::spr::PID }>(mmu::current_hw_pid(&k.vm.vcpus[vi]));
    }
    f.regs.ip = next;
    // QEMU leaves stray bits (even MSR[WE]) in SRR1 on program interrupts: resume
    // with the vCPU's real MSR, never with what the interrupt saved.
    sync_frame_msr(k, vi, f);
    Some(tp)
}

/// Where the assembly tier finds a shadow SPR: byte offset of the field in `Vcpu`
/// (`kestrel_guestcpu::spr::offset`, the one SPR field map), or 0 (not handled there);
/// [`SPR_READ_ONLY`] set when only reads are plain (PID: a write switches the shadow TLB's
/// PID). The plain SPRs (`kestrel_guestcpu::spr::is_plain`) and PID.
const fn spr_slot(n: u32) -> u16 {
    const S: usize = offset_of!(Vcpu, s);
    let flag = if gspr::is_plain(n) {
        0
    } else if n == PID {
        SPR_READ_ONLY
    } else {
        return 0;
    };
    let off = S + offset_of_spr(n);
    // The offset must stay clear of the read-only flag.
    assert!(off < SPR_READ_ONLY as usize);
    off as u16 | flag
}

/// [`spr_slot`]'s flag: writes take the Rust tier.
const SPR_READ_ONLY: u16 = 0x8000;

/// [`spr_slot`] of every SPR, indexed by the instruction's raw SPR field (bits 11:20,
/// the number's two 5-bit halves swapped), so the assembly needs one `rlwinm` to index
/// it: `SPR_SLOTS[(n & 31) << 5 | n >> 5] == spr_slot(n)`.
#[no_mangle]
static SPR_SLOTS: [u16; 1024] = {
    let mut t = [0u16; 1024];
    let mut n = 0;
    while n < 1024 {
        t[((n & 31) << 5 | n >> 5) as usize] = spr_slot(n);
        n += 1;
    }
    t
};

const _: () = {
    // The slots are exactly the plain SPRs (reads and writes) plus PID (reads only).
    let mut n = 0;
    let mut found = 0;
    while n < 1024 {
        let slot = spr_slot(n);
        if slot != 0 {
            assert!(slot & 3 == 0);
            let plain = matches!(emulation(n), Emulation::Fast | Emulation::Shadow);
            assert!(plain == (slot & SPR_READ_ONLY == 0));
            assert!(plain || n == PID);
            found += 1;
        }
        n += 1;
    }
    let mut plain = 0;
    let mut j = 0;
    while j < ppc440::spr::TABLE.len() {
        if matches!(
            ppc440::spr::TABLE[j].emulation,
            Emulation::Fast | Emulation::Shadow
        ) {
            plain += 1;
        }
        j += 1;
    }
    assert!(found == plain + 1);
};

/// Instructions of an exit that follow its final time-base read, up to and including the
/// `rfi` to the guest: the assembly tier's (`.Lvf_done`, without the rare carry `addi`)
/// and the general exit path's (`__guest_resume` from its read to its `blr`, then
/// `arch::entry`'s restore and `rfi`). They belong to the exit, not to the guest
/// (docs/adr/0023-exit-accounting.md): the read is advanced by the whole time-base ticks
/// they take, so the exit's cost ends at the `rfi` and the next GUEST_RUN starts there.
/// Update them with the assembly.
const TAIL_FAST: u32 = 12;
const TAIL_GENERAL: u32 = 16;

/// Whole time-base ticks of `insns` instructions under `-icount shift=0` (400 MHz time
/// base, one instruction per nanosecond: 2.5 instructions per tick), rounded down, so a
/// GUEST_RUN window (a tail, at least one guest instruction and the next entry's first
/// instructions) never comes out negative.
const fn tail_ticks(insns: u32) -> u32 {
    insns * 2 / 5
}
const _: () = assert!(tail_ticks(TAIL_FAST) == 4 && tail_ticks(TAIL_GENERAL) == 6);

/// Called by `__program_fast` for a `tlbre`, `tlbwe` or `tlbsx[.]` of the running vCPU,
/// with its registers in `frame` (GPRs, CR, LR, CTR, XER): emulates it
/// ([`mmu::tlb_insn`]) and returns the trace point's counter offset in `Vcpu`, or 0 when
/// it changed nothing and the general path must take the instruction.
#[no_mangle]
extern "C" fn __tlb_insn_fast(insn: u32, frame: *mut TrapFrame) -> u32 {
    let k = kernel();
    let Some(vi) = vcpu_of(k, k.current) else {
        return 0;
    };
    // SAFETY: the assembly tier passes the running vCPU's frame, which it has just
    // filled and which nothing else refers to until it resumes the guest from it.
    let f = unsafe { &mut *frame };
    mmu::tlb_insn(k, vi, f, insn).map_or(0, trace_at)
}

/// [`__tlb_insn_fast`] for a vCPU with a live magic page (`TLB_VCPU`, not `FAST_VCPU`):
/// as the Rust tier (`program_fast`), the fields the page shares are synced first and
/// written back after (`fast_in` never refuses a TLB instruction).
#[no_mangle]
extern "C" fn __tlb_insn_fast_live(insn: u32, frame: *mut TrapFrame, vcpu: usize) -> u32 {
    let k = kernel();
    let Some(vi) = vcpu_of(k, k.current) else {
        return 0;
    };
    // The assembly fetched the instruction through `TLB_VCPU`'s fetch cache: only if that
    // is the running vCPU (else the general path fetches it again).
    if vcpu != &k.vm.vcpus[vi] as *const Vcpu as usize {
        return 0;
    }
    // SAFETY: as in `__tlb_insn_fast`.
    let f = unsafe { &mut *frame };
    let live = pv::live(k, vi);
    if live && !pv::fast_in(k, vi, insn) {
        return 0;
    }
    let old = k.vm.vcpus[vi].s.msr;
    let tp = mmu::tlb_insn(k, vi, f, insn);
    if live {
        pv::fast_out(k, vi, old);
    }
    tp.map_or(0, trace_at)
}

const STATE: usize = offset_of!(Vcpu, s);
/// The virtual decrementer's deadline in `Vcpu` (a `u64`: high word first).
const DEC_DEADLINE: usize = offset_of!(Vcpu, timers) + offset_of!(Timers, dec_deadline);
// `.Lvf_mtsprg47` stores SPRG4..7 at `sprg4 + 4 * k`; r29 (4 * RT) indexes the frame's GPRs.
const _: () = assert!(offset_of_spr(SPRG7) == offset_of_spr(SPRG4) + 12 && F_GPR == 0 && F_R1 == 4);

/// The assembly's opcode key of an instruction with primary opcode `opcd`, extended
/// opcode `xo` and Rc = 0: bits 0-5 and 21-31 of the word rotated left by 6, i.e.
/// `XO << 7 | Rc << 6 | OPCD` (`rlwinm 5, insn, 6, 15, 31`).
const fn key(opcd: u32, xo: u32) -> u32 {
    let word = decode::OPCD.put(opcd) | decode::XO.put(xo);
    let k = word.rotate_left(6) & 0x1_ffff;
    assert!(
        k == xo << 7 | opcd && k <= 0xffff,
        "key must fit cmplwi's immediate"
    );
    k
}
const GUEST_RUN: usize = trace_at(TracePoint::GuestRun) as usize;
// The assembly tests these with one `andi.`/`andis.`/`rlwinm.` each.
const _: () = assert!(SLOW_MSR_BITS >> 16 == 0 && msr::WE & 0xffff == 0);
const _: () = assert!(msr::CE & 0xffff == 0 && msr::EE >> 16 == 0);
// `rlwinm. 0, 4, 0, ce_bit, ee_bit` tests CE..EE: nothing else the guest MSR can hold
// lies between them.
const _: () = assert!(
    msr::CE.leading_zeros() < msr::EE.leading_zeros()
        && GUEST_MSR_MASK & ((msr::CE << 1) - 1) & !(msr::EE - 1) & !(msr::CE | msr::EE) == 0
);
// wrteei's E field sits where MSR[EE] does: `andi.` of the instruction is the new EE.
const _: () = assert!(decode::E.mask() == msr::EE);
const _: () = assert!((tsr::DIS | tsr::FIS | tsr::WIS | tcr::FIE | tcr::WIE) & 0xffff == 0);
const _: () = assert!((VCPU_MSR | msr::FP | msr::DE | msr::PR | msr::IS) >> 16 == 0);
// Offsets in `li`/`lwz` displacements; the counter layout the assembly updates.
const _: () = assert!(
    GUEST_RUN + 12 < 32768 && offset_of!(Vcpu, exit_at) < 32768 && offset_of!(Vcpu, hw_tid) < 32768
);
// `Vcpu::hw_tid` is read as two words (kernel mode, user mode), `tids` as bytes at
// `mmu::tid_key(pid, privileged)`, the fetch cache's global flag as a byte.
const _: () = {
    let v = Vcpu::EMPTY;
    let _: [u32; 2] = v.hw_tid;
    let _: [u8; 512] = v.tids;
    let _: bool = v.fetch_global;
    assert!(mmu::tid_key(0x12, false) == 0x24 && mmu::tid_key(0x12, true) == 0x25);
    assert!(offset_of!(Vcpu, tids) + 512 < 32768 && offset_of!(Vcpu, fetch_global) < 32768);
};
// `.Lvf_hwfetch`: MMUCR[STS] is set with one `oris`, STID is its low byte (cleared by
// one `rlwinm`), ERPN fits `andi.`, the RAM window by one `lis`; word 0's SIZE is bits
// 4..7 (`rlwinm 8, 8, 28, 28, 31`) and a page is 1 KiB << 2 * SIZE.
const _: () = assert!(
    ppc440::mmucr::STS.mask() & 0xffff == 0
        && ppc440::mmucr::STID.mask() == 0xff
        && ppc440::tlb::word1::ERPN.mask() <= 0xffff
        && crate::arch::tlb::KERNEL_RAM_WINDOW & 0xffff == 0
        && ppc440::tlb::word0::SIZE.mask() == 0xf0
        && ppc440::tlb::PageSize::K4.bytes() == 1024 << 2
);
const _: () = assert!(
    core::mem::size_of::<TraceCounter>() == 12
        && offset_of!(TraceCounter, count) == 0
        && offset_of!(TraceCounter, sum_lo) == 4
        && offset_of!(TraceCounter, sum_hi) == 8
);

global_asm!(
    // The fetch-cache test of both entries of the tier (`__program_fast` and, for a vCPU
    // with a live magic page, `.Lvf_tlb_only`): r6 = the vCPU. Its fetch cache holds guest
    // page | 1 (`Vcpu::fetch_page`): the xor with pc leaves exactly the valid bit in bits
    // 0-19 and 31 on a hit, so an empty cache never matches page 0. On a hit (from label
    // `fetched` on), r27 = the instruction at pc, read through the host page
    // (`Vcpu::fetch_host`), and r30 = pc + 4; on a miss it branches to `miss` with r30 = pc.
    "    .macro kestrel_vf_fetch miss, fetched",
    "    mfspr 30, {n_srr0}",
    "    lwz 5, {fpage}(6)",
    "    xor 5, 5, 30",
    "    rlwinm 5, 5, 0, 31, 19",
    "    cmplwi 5, 1",
    "    bne- \\miss",
    "\\fetched:",
    "    lwz 5, {fhost}(6)",
    "    rlwinm 4, 30, 0, 20, 31",
    "    lwzx 27, 5, 4",
    "    addi 30, 30, 4",
    "    .endm",
    "    .section .text.vfast, \"ax\"",
    // Entry from the program vector's stub: the general registers are in the frame r1
    // (SPRG1) except r1 (guest r1 in SPRG2, its slot holds the frame address) and r3 (its
    // slot is right, the register holds t0, the time base at the vector).
    "    .global __program_fast",
    "__program_fast:",
    "    mfspr 4, {n_sprg2}",
    "    stw 4, {f_r1}(1)",
    "    mfcr 4",
    "    stw 4, {f_cr}(1)",
    // r28 = SRR1; r6 = the running vCPU if the assembly tier may handle it (else 0),
    // r7 = its guest MSR (guest supervisor only).
    "    mfspr 28, {n_srr1}",
    "    lis 6, FAST_VCPU@ha",
    "    lwz 6, FAST_VCPU@l(6)",
    "    cmpwi 6, 0",
    "    beq- .Lvf_tlb_only",
    "    lwz 7, {msr}(6)",
    "    andi. 0, 7, {msr_pr}",
    "    bne- .Lvf_slow",
    // r27 = the instruction at pc, through the fetch cache (guest page | 1: the xor with
    // pc leaves exactly the valid bit in bits 0-19 and 31 on a hit, so an empty cache
    // never matches page 0); r30 = pc + 4.
    "    kestrel_vf_fetch .Lvf_hwfetch, .Lvf_fetched",
    // r29 = 4 * RT (= RS): the offset of the guest's register in the frame. r5 = the
    // instruction's XO << 7 | Rc << 6 | OPCD (one rotate): each compare below checks the
    // whole opcode at once.
    "    rlwinm 29, 27, 13, 25, 29",
    "    rlwinm 5, 27, 6, 15, 31",
    "    cmplwi 5, {key_mfspr}",
    "    beq .Lvf_mfspr",
    "    cmplwi 5, {key_mtspr}",
    "    beq .Lvf_mtspr",
    "    cmplwi 5, {key_rfi}",
    "    beq .Lvf_rfi",
    "    cmplwi 5, {key_mtmsr}",
    "    beq .Lvf_mtmsr",
    "    cmplwi 5, {key_mfmsr}",
    "    beq .Lvf_mfmsr",
    "    cmplwi 5, {key_wrtee}",
    "    beq .Lvf_wrtee",
    "    cmplwi 5, {key_wrteei}",
    "    beq .Lvf_wrteei",
    // mfdcr/mtdcr go to the VMM: the virtualization-fault fast path (`glue::fastpath`).
    "    cmplwi 5, {key_mfdcr}",
    "    beq .Lvf_dcr",
    "    cmplwi 5, {key_mtdcr}",
    "    beq .Lvf_dcr",
    "    li 26, 0",
    "    b .Lvf_tlb_key",
    // wrteei / wrtee: r5 = the new MSR[EE] (CR0: whether it is set), r8 = the trace
    // point's counter (offset in Vcpu). Only EE changes: clearing it needs no check.
    ".Lvf_wrteei:",
    "    li 8, {tp_wrteei}",
    "    andi. 5, 27, {msr_ee}",
    "    b .Lvf_ee",
    ".Lvf_wrtee:",
    "    lwzx 5, 29, 1",
    "    li 8, {tp_wrtee}",
    "    andi. 5, 5, {msr_ee}",
    ".Lvf_ee:",
    "    rlwinm 4, 7, 0, {ee_bit} + 1, {ee_bit} - 1",
    "    or 5, 5, 4",
    "    beq .Lvf_store_msr",
    "    andc. 4, 5, 7",
    "    bne- .Lvf_pending",
    "    b .Lvf_store_msr",
    ".Lvf_mfmsr:",
    "    stwx 7, 29, 1",
    "    li 8, {tp_mfmsr}",
    "    b .Lvf_done",
    ".Lvf_mfspr:",
    "    rlwinm 4, 27, 22, 21, 30",
    "    lis 5, SPR_SLOTS@ha",
    "    add 4, 4, 5",
    "    lhz 4, SPR_SLOTS@l(4)",
    "    rlwinm. 4, 4, 0, 17, 31",
    "    beq- .Lvf_slow",
    "    lwzx 5, 6, 4",
    "    stwx 5, 29, 1",
    "    li 8, {tp_mfspr}",
    "    b .Lvf_done",
    ".Lvf_mtspr:",
    "    rlwinm 4, 27, 21, 22, 31",
    "    cmplwi 4, {raw_pid}",
    "    beq .Lvf_mtpid",
    "    rlwinm 4, 27, 22, 21, 30",
    "    lis 5, SPR_SLOTS@ha",
    "    add 4, 4, 5",
    "    lha 4, SPR_SLOTS@l(4)",
    "    cmpwi 4, 0",
    "    ble- .Lvf_mtsprg47",
    "    lwzx 5, 29, 1",
    "    stwx 5, 6, 4",
    "    li 8, {tp_mtspr}",
    "    b .Lvf_done",
    // mtspr SPRG4-7 (no slot: write-through): the guest value goes to `VcpuState::sprg`
    // and to the real register, whose user read port the guest reads without a trap
    // (`kestrel_guestcpu::spr::mtspr`'s `SprEffect::WriteThrough`). r4 = raw SPR field -
    // raw(SPRG4): 0, 32, 64 or 96 for SPRG4..7 (their numbers' high halves are equal),
    // anything else takes the general path.
    ".Lvf_mtsprg47:",
    "    rlwinm 4, 27, 21, 22, 31",
    "    subi 4, 4, {raw_sprg4}",
    "    cmplwi 4, 96",
    "    bgt- .Lvf_slow",
    "    andi. 0, 4, 31",
    "    bne- .Lvf_slow",
    "    lwzx 5, 29, 1",
    "    srwi 9, 4, 3",
    "    add 9, 9, 6",
    "    stw 5, {sprg4}(9)",
    "    li 8, {tp_mtspr}",
    "    cmplwi 4, 32",
    "    blt 1f",
    "    beq 2f",
    "    cmplwi 4, 64",
    "    beq 3f",
    "    mtspr {n_sprg7}, 5",
    "    b .Lvf_done",
    "1:  mtspr {n_sprg4}, 5",
    "    b .Lvf_done",
    "2:  mtspr {n_sprg5}, 5",
    "    b .Lvf_done",
    "3:  mtspr {n_sprg6}, 5",
    "    b .Lvf_done",
    // mtspr PID: the guest's address-space switch (KUAP does one around every user
    // access), as `mmu::guest_pid_switch`: load the TIDs `mmu` holds for the new guest
    // PID in both modes (0: none yet, the next access misses and allocates one) into
    // `Vcpu::hw_tid` and the PID register (guest kernel mode), and drop the fetch cache
    // unless its page translates alike under every PID.
    ".Lvf_mtpid:",
    "    lwzx 5, 29, 1",
    "    rlwinm 10, 5, 1, 23, 30",
    "    rlwinm 5, 5, 0, 24, 31",
    "    stw 5, {pid}(6)",
    "    add 10, 10, 6",
    "    lbz 4, {tids} + 1(10)",
    "    lbz 9, {tids}(10)",
    "    stw 4, {hw_tid_kernel}(6)",
    "    stw 9, {hw_tid_user}(6)",
    "    mtspr {n_pid}, 4",
    "    lbz 9, {fglobal}(6)",
    "    li 8, {tp_mtspr}",
    "    cmpwi 9, 0",
    "    bne .Lvf_done",
    "    stw 9, {fpage}(6)",
    "    b .Lvf_done",
    // rfi: continue at SRR0 with MSR = SRR1.
    ".Lvf_rfi:",
    "    lwz 30, {srr0}(6)",
    "    lwz 5, {srr1}(6)",
    "    li 8, {tp_rfi}",
    "    b 1f",
    ".Lvf_mtmsr:",
    "    lwzx 5, 29, 1",
    "    li 8, {tp_mtmsr}",
    "1:  lis 4, {mask_hi}",
    "    ori 4, 4, {mask_lo}",
    "    and 5, 5, 4",
    // A new guest MSR r5 (old r7): only if no slow bit changes (a change of MSR[PR]
    // alone loads the PID register, below), WE stays clear and whatever interrupt it
    // enables cannot be pending.
    "    xor 4, 5, 7",
    "    andi. 0, 4, {slow_lo}",
    "    bne- .Lvf_slow_bits",
    ".Lvf_no_slow_bits:",
    "    andis. 0, 5, {we_hi}",
    "    bne- .Lvf_slow",
    "    andc 4, 5, 7",
    "    rlwinm. 0, 4, 0, {ce_bit}, {ee_bit}",
    "    bne- .Lvf_pending",
    ".Lvf_store_msr:",
    "    stw 5, {msr}(6)",
    // Resume at r30 with the vCPU's MSR (QEMU leaves stray bits, even MSR[WE], in
    // SRR1 on program interrupts), then account: r9 = the exit's cost from t0 (r3) to
    // now; counter r8 gets one exit of that cost, GUEST_RUN one entry and minus the
    // cost. `lmw`/`stmw` move a counter (count, sum low, sum high) in one instruction
    // each; r29-r31 are no longer needed.
    ".Lvf_done:",
    "    mtspr {n_srr0}, 30",
    "    andi. 28, 28, {srr1_keep}",
    "    mtspr {n_srr1}, 28",
    // GUEST_RUN: one more guest run, from the last return to the guest to t0.
    "    add 8, 8, 6",
    "    lwz 9, {run_tb}(6)",
    "    subf 9, 9, 3",
    "    lmw 29, {gr}(6)",
    "    addi 29, 29, 1",
    "    add 30, 30, 9",
    "    cmplw 30, 9",
    "    bge+ 2f",
    "    addi 31, 31, 1",
    "2:  stmw 29, {gr}(6)",
    // The exit: everything that does not need its end time first, so that as few
    // instructions as possible (twelve, with the `rfi`: [`TAIL_FAST`]) follow the
    // time-base read, which is advanced by their whole ticks.
    "    lmw 29, 0(8)",
    "    addi 29, 29, 1",
    "    lwz 0, {f_cr}(1)",
    "    mfspr 9, {n_tbl}",
    "    addi 9, 9, {tail_fast}",
    "    stw 9, {run_tb}(6)",
    "    subf 9, 3, 9",
    "    add 30, 30, 9",
    "    cmplw 30, 9",
    "    bge+ 3f",
    "    addi 31, 31, 1",
    "3:  stmw 29, 0(8)",
    "    mtcr 0",
    "    lwz 0, {f_gpr}(1)",
    "    lmw 2, {f_r2}(1)",
    "    lwz 1, {f_r1}(1)",
    "    rfi",
    // A slow MSR bit changes: fine if it is MSR[PR] alone (guest kernel <-> user: load
    // the PID register with the hardware TID of the current guest PID in the new mode,
    // `Vcpu::hw_tid`, 0 = none yet: the next access misses and allocates one).
    ".Lvf_slow_bits:",
    "    andi. 0, 4, {slow_lo} & ~({msr_pr} | {msr_fp})",
    "    bne- .Lvf_slow",
    "    andis. 0, 5, {we_hi}",
    "    bne- .Lvf_slow",
    // MSR[FP] changes (Linux returns to a user process that used the FPU with FP set):
    // the real MSR[FP] goes to 0 either way. Clearing it is always right for a guest FP
    // of 0; for 1 the guest's next FP instruction traps and the general path hands it
    // the FPU (`emulate::take_fpu`, nothing to do when it already owns it), as for any
    // first FP instruction.
    "    andi. 0, 4, {msr_fp}",
    "    beq+ 5f",
    "    li 9, {msr_fp}",
    "    andc 28, 28, 9",
    "5:  andc 4, 5, 7",
    "    rlwinm. 0, 4, 0, {ce_bit}, {ee_bit}",
    // Interrupts become enabled too (every return to guest user mode): the pending
    // check with CR7[EQ] set, which brings it back to `.Lvf_pr_switch`.
    "    crset 30",
    "    bne- .Lvf_pending_cr7",
    ".Lvf_pr_switch:",
    "    andi. 0, 5, {msr_pr}",
    "    lwz 4, {hw_tid_kernel}(6)",
    "    beq 4f",
    "    lwz 4, {hw_tid_user}(6)",
    "4:  mtspr {n_pid}, 4",
    "    b .Lvf_store_msr",
    // Interrupts become enabled: stay fast only if nothing can be pending.
    ".Lvf_pending:",
    "    crclr 30",
    ".Lvf_pending_cr7:",
    "    lwz 4, {irq}(6)",
    "    lwz 0, {crit}(6)",
    "    or. 4, 4, 0",
    "    bne- .Lvf_slow",
    "    lwz 4, {tsr}(6)",
    "    andis. 4, 4, {tsr_pending_hi}",
    "    bne- .Lvf_slow",
    "    lwz 4, {tcr}(6)",
    "    andis. 4, 4, {tcr_pending_hi}",
    "    bne- .Lvf_slow",
    "    lwz 4, {dec}(6)",
    "    lwz 0, {dec_lo}(6)",
    "    or. 4, 4, 0",
    "    beq .Lvf_pend_ok",
    "    lwz 4, {dec}(6)",
    "    mfspr 0, {n_tbu}",
    "    cmplw 4, 0",
    "    blt- .Lvf_slow",
    "    bgt .Lvf_pend_ok",
    "    lwz 4, {dec_lo}(6)",
    "    mfspr 0, {n_tbl}",
    "    cmplw 4, 0",
    "    ble- .Lvf_slow",
    "    b .Lvf_pend_ok",
    // Nothing can be pending: store the MSR, after loading the PID register when the
    // check came from a change of MSR[PR] (CR7[EQ]).
    ".Lvf_pend_ok:",
    "    beq 7, .Lvf_pr_switch",
    "    b .Lvf_store_msr",
    // A vCPU the tier above leaves alone (a live magic page, pv.rs) may still have its TLB
    // instructions emulated here (`TLB_VCPU`; `__tlb_insn_fast_live` syncs the page as the
    // Rust tier does): the same checks and fetch-cache test as above (a cache miss takes
    // the general path), then only the TLB opcodes.
    ".Lvf_tlb_only:",
    "    andi. 0, 28, {msr_is}",
    "    beq- .Lvf_not_fast",
    "    lis 6, TLB_VCPU@ha",
    "    lwz 6, TLB_VCPU@l(6)",
    "    cmpwi 6, 0",
    "    beq- .Lvf_not_fast",
    "    lwz 7, {msr}(6)",
    "    andi. 0, 7, {msr_pr}",
    "    bne- .Lvf_slow",
    "    kestrel_vf_fetch .Lvf_slow, .Lvf_tlb_fetched",
    "    li 26, 1",
    // tlbre, tlbwe, tlbsx[.] (opcode 31, XO in r4): `__tlb_insn_fast` emulates
    // them in Rust with the frame as the general entry would fill it. The call clobbers
    // the volatile registers, LR, CTR and XER: the guest's LR, CTR, XER go to the frame
    // first and come back from it, t0 waits in r31 and the vCPU in r29 (the guest's are in
    // the frame; `FAST_VCPU`/`TLB_VCPU` are not re-read: the IPC fast path writes only
    // `FAST_VCPU`), r30
    // (pc + 4) and r28 (SRR1) survive the call; it returns the trace point's counter
    // offset (r8 for `.Lvf_done`), or 0, having changed nothing, for the general path.
    ".Lvf_tlb_key:",
    "    rlwinm 4, 27, 6, 26, 31",
    "    cmplwi 4, {opcd_x}",
    "    bne- .Lvf_slow",
    "    rlwinm 4, 27, 31, 22, 31",
    "    cmplwi 4, {xo_tlbsx}",
    "    beq .Lvf_tlb",
    "    cmplwi 4, {xo_tlbwe}",
    "    beq .Lvf_tlb",
    "    cmplwi 4, {xo_tlbre}",
    "    bne- .Lvf_slow",
    ".Lvf_tlb:",
    "    mflr 4",
    "    stw 4, {f_lr}(1)",
    "    mfctr 4",
    "    stw 4, {f_ctr}(1)",
    "    mfxer 4",
    "    stw 4, {f_xer}(1)",
    "    mr 31, 3",
    "    mr 29, 6",
    "    mr 3, 27",
    "    mr 4, 1",
    "    mr 5, 6",
    "    li 0, 0",
    "    stwu 0, -{abi_frame}(1)",
    "    cmpwi 26, 0",
    "    bne- 1f",
    "    bl __tlb_insn_fast",
    "    b 2f",
    "1:  bl __tlb_insn_fast_live",
    "2:  addi 1, 1, {abi_frame}",
    "    mr. 8, 3",
    "    mr 3, 31",
    "    lwz 4, {f_lr}(1)",
    "    mtlr 4",
    "    lwz 4, {f_ctr}(1)",
    "    mtctr 4",
    "    lwz 4, {f_xer}(1)",
    "    mtxer 4",
    "    mr 6, 29",
    "    bne+ .Lvf_done",
    "    b .Lvf_slow",
    // Not for the assembly tier: a native thread or the kernel itself (translation
    // space 0) restores everything and takes the general entry, which picks the right
    // frame; a vCPU continues below.
    ".Lvf_not_fast:",
    "    andi. 0, 28, {msr_is}",
    "    bne .Lvf_slow",
    "    lwz 4, {f_cr}(1)",
    "    mtcr 4",
    "    lwz 3, {f_r3}(1)",
    "    mtspr {n_sprg3}, 3",
    "    lwz 0, {f_gpr}(1)",
    "    lmw 2, {f_r2}(1)",
    "    mfspr 1, {n_sprg2}",
    "    li 3, {vec_program}",
    "    b __program_entry",
    // Fetch-cache miss: the instruction was fetched a moment ago through a hardware
    // entry in translation space 1 under the PID register's TID, and the shadow TLB's
    // invariant (hardware ⊆ guest TLB ∩ VM mappings, docs/adr/0024) makes that entry the
    // guest's translation of pc. `tlbsx` finds it (one instruction, whatever the guest
    // TLB holds), word 0 gives its size and word 1 its real page: the 4 KiB host page of
    // pc goes into the fetch cache (not global: a PID write drops it) and the tier goes
    // on. 1 KiB entries, real addresses outside the kernel's 1:1 RAM window and misses
    // take the general path, which walks the guest TLB in software.
    ".Lvf_hwfetch:",
    "    mfspr 8, {n_mmucr}",
    "    mfspr 9, {n_pid}",
    "    rlwinm 8, 8, 0, 0, 23",
    "    oris 8, 8, {mmucr_sts_hi}",
    "    or 8, 8, 9",
    "    mtspr {n_mmucr}, 8",
    "    tlbsx. 9, 0, 30",
    "    bne- .Lvf_slow",
    "    .long {tlbre_w0}",
    "    .long {tlbre_w1}",
    "    rlwinm. 8, 8, 28, 28, 31",
    "    beq- .Lvf_slow",
    "    andi. 0, 10, {erpn}",
    "    bne- .Lvf_slow",
    "    slwi 8, 8, 1",
    "    li 9, {size_1k}",
    "    slw 9, 9, 8",
    "    addi 9, 9, -1",
    "    andc 10, 10, 9",
    "    and 8, 30, 9",
    "    or 10, 10, 8",
    "    rlwinm 10, 10, 0, 0, 19",
    "    lis 8, {ram_window_hi}",
    "    cmplw 10, 8",
    "    bge- .Lvf_slow",
    "    stw 10, {fhost}(6)",
    "    rlwinm 8, 30, 0, 0, 19",
    "    ori 8, 8, 1",
    "    stw 8, {fpage}(6)",
    "    li 8, 0",
    "    stb 8, {fglobal}(6)",
    "    b .Lvf_fetched",
    // Not ours, from a vCPU: the frame has the GPRs and CR; complete it as the general
    // entry would (nothing above touched LR, CTR or XER), hand the entry time over and
    // call the program-interrupt handler.
    ".Lvf_slow:",
    "    lis 4, ENTRY_TB@ha",
    "    stw 3, ENTRY_TB@l(4)",
    "    mflr 3",
    "    stw 3, {f_lr}(1)",
    "    mfctr 3",
    "    stw 3, {f_ctr}(1)",
    "    mfxer 3",
    "    stw 3, {f_xer}(1)",
    "    mfspr 3, {n_srr0}",
    "    stw 3, {f_ip}(1)",
    "    stw 28, {f_msr}(1)",
    "    mr 3, 1",
    "    li 4, {vec_program}",
    "    li 0, 0",
    "    stwu 0, -{abi_frame}(1)",
    "    bl kestrel_program",
    "    b __program_entry_exit",
    // mfdcr/mtdcr: the same, then `__vfault_dcr` (frame, instruction: `glue::fastpath`),
    // which sends the fault to a waiting VMM directly or takes the general path.
    ".Lvf_dcr:",
    "    lis 4, ENTRY_TB@ha",
    "    stw 3, ENTRY_TB@l(4)",
    "    mflr 3",
    "    stw 3, {f_lr}(1)",
    "    mfctr 3",
    "    stw 3, {f_ctr}(1)",
    "    mfxer 3",
    "    stw 3, {f_xer}(1)",
    "    addi 3, 30, -4",
    "    stw 3, {f_ip}(1)",
    "    stw 28, {f_msr}(1)",
    "    mr 3, 1",
    "    mr 4, 27",
    "    li 0, 0",
    "    stwu 0, -{abi_frame}(1)",
    "    bl __vfault_dcr",
    "    b __program_entry_exit",
    // Called (`bnel`) by every kernel exit path whose frame resumes a vCPU, with r1 = the
    // frame, as late as the exit path can: may clobber r0, r4-r31, CR and LR (restored from
    // the frame afterwards), not XER, CTR or SRR0/1 (restored before).
    // Records the exit in progress (class `exit_at`, from `exit_tb` to now) and starts
    // the next GUEST_RUN now.
    "    .global __guest_resume",
    "__guest_resume:",
    "    lwz 4, {frame_vcpu}(1)",
    "    cmpwi 4, 0",
    "    beqlr-",
    "    lwz 6, {exit_at}(4)",
    "    cmpwi 6, 0",
    "    beq- 1f",
    "    li 7, 0",
    "    stw 7, {exit_at}(4)",
    "    lwz 7, {exit_tb}(4)",
    "    add 6, 6, 4",
    "    lmw 29, 0(6)",
    "    addi 29, 29, 1",
    "    mfspr 5, {n_tbl}",
    "    addi 5, 5, {tail_general}",
    "    stw 5, {run_tb}(4)",
    "    subf 7, 7, 5",
    "    add 30, 30, 7",
    "    cmplw 30, 7",
    "    bge+ 2f",
    "    addi 31, 31, 1",
    "2:  stmw 29, 0(6)",
    "    blr",
    "1:  mfspr 5, {n_tbl}",
    "    addi 5, 5, {tail_general}",
    "    stw 5, {run_tb}(4)",
    "    blr",
    f_gpr = const F_GPR,
    f_r1 = const F_R1,
    f_r2 = const F_R2,
    f_r3 = const F_R3,
    f_cr = const F_CR,
    f_ip = const F_IP,
    f_msr = const F_MSR,
    abi_frame = const ABI_FRAME,
    n_sprg2 = const SPRG2,
    n_sprg3 = const SPRG3,
    n_srr0 = const SRR0,
    n_srr1 = const SRR1,
    n_pid = const PID,
    n_tbl = const ppc440::spr::TBL_R,
    tail_fast = const tail_ticks(TAIL_FAST),
    tail_general = const tail_ticks(TAIL_GENERAL),
    n_tbu = const ppc440::spr::TBU_R,
    msr_is = const msr::IS,
    msr_pr = const msr::PR,
    msr_fp = const msr::FP,
    msr_ee = const msr::EE,
    ee_bit = const msr::EE.leading_zeros(),
    ce_bit = const msr::CE.leading_zeros(),
    slow_lo = const SLOW_MSR_BITS,
    we_hi = const msr::WE >> 16,
    tsr_pending_hi = const (tsr::DIS | tsr::FIS | tsr::WIS) >> 16,
    tcr_pending_hi = const (tcr::FIE | tcr::WIE) >> 16,
    srr1_keep = const VCPU_MSR | msr::FP | msr::DE,
    key_mfmsr = const key(X, xo31::MFMSR),
    key_mtmsr = const key(X, xo31::MTMSR),
    key_wrtee = const key(X, xo31::WRTEE),
    key_wrteei = const key(X, xo31::WRTEEI),
    key_mfspr = const key(X, xo31::MFSPR),
    key_mtspr = const key(X, xo31::MTSPR),
    key_rfi = const key(XL, xo19::RFI),
    opcd_x = const X,
    xo_tlbre = const xo31::TLBRE,
    xo_tlbwe = const xo31::TLBWE,
    xo_tlbsx = const xo31::TLBSX,
    f_lr = const F_LR,
    f_ctr = const F_CTR,
    f_xer = const F_XER,
    key_mfdcr = const key(X, xo31::MFDCR),
    key_mtdcr = const key(X, xo31::MTDCR),
    raw_pid = const (PID & 31) << 5 | PID >> 5,
    pid = const STATE + offset_of_spr(PID),
    tids = const offset_of!(Vcpu, tids),
    fglobal = const offset_of!(Vcpu, fetch_global),
    vec_program = const crate::arch::vector::PROGRAM,
    frame_vcpu = const crate::arch::entry::FRAME_VCPU,
    msr = const STATE + offset_of!(VcpuState, msr),
    fpage = const offset_of!(Vcpu, fetch_page),
    n_mmucr = const ppc440::spr::MMUCR,
    n_sprg4 = const SPRG4,
    n_sprg5 = const ppc440::spr::SPRG5,
    n_sprg6 = const ppc440::spr::SPRG6,
    n_sprg7 = const SPRG7,
    raw_sprg4 = const (SPRG4 & 31) << 5 | SPRG4 >> 5,
    sprg4 = const STATE + offset_of_spr(SPRG4),
    mmucr_sts_hi = const ppc440::mmucr::STS.mask() >> 16,
    tlbre_w0 = const ppc440::encode::tlbre(8, 9, 0),
    tlbre_w1 = const ppc440::encode::tlbre(10, 9, 1),
    erpn = const ppc440::tlb::word1::ERPN.mask(),
    size_1k = const 1024,
    ram_window_hi = const crate::arch::tlb::KERNEL_RAM_WINDOW >> 16,
    fhost = const offset_of!(Vcpu, fetch_host),
    srr0 = const STATE + offset_of_spr(SRR0),
    srr1 = const STATE + offset_of_spr(SRR1),
    irq = const STATE + offset_of!(VcpuState, irq_line),
    crit = const STATE + offset_of!(VcpuState, crit_line),
    tsr = const STATE + offset_of!(VcpuState, tsr),
    tcr = const STATE + offset_of!(VcpuState, tcr),
    dec = const DEC_DEADLINE,
    dec_lo = const DEC_DEADLINE + 4,
    hw_tid_kernel = const offset_of!(Vcpu, hw_tid),
    hw_tid_user = const offset_of!(Vcpu, hw_tid) + 4,
    mask_hi = const GUEST_MSR_MASK >> 16,
    mask_lo = const GUEST_MSR_MASK & 0xffff,
    run_tb = const offset_of!(Vcpu, run_tb),
    exit_tb = const offset_of!(Vcpu, exit_tb),
    exit_at = const offset_of!(Vcpu, exit_at),
    gr = const GUEST_RUN,
    tp_mfmsr = const trace_at(TracePoint::EmulMfmsr),
    tp_mtmsr = const trace_at(TracePoint::EmulMtmsr),
    tp_wrtee = const trace_at(TracePoint::EmulWrtee),
    tp_wrteei = const trace_at(TracePoint::EmulWrteei),
    tp_rfi = const trace_at(TracePoint::EmulRfi),
    tp_mfspr = const trace_at(TracePoint::EmulMfspr),
    tp_mtspr = const trace_at(TracePoint::EmulMtspr),
);
