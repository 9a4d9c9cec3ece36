//! The emulation fast paths: the hottest privileged instructions of a guest kernel
//! (mfmsr, mtmsr, wrtee, wrteei, rfi within one translation space, and mfspr/mtspr of
//! plain shadow registers) handled straight from the program-interrupt entry, before
//! the general dispatcher. Anything with a side effect beyond a register copy (timers,
//! PID, TLB, a possibly pending interrupt) returns `None` and takes the full path in
//! `emulate.rs`, which has the same semantics; this file only has to be fast and
//! obviously equivalent.
//!
//! Two tiers: `__program_fast` (assembly, below) handles mfmsr, mtmsr, wrtee, wrteei,
//! rfi (when no translation-space/FP/debug/wait bit changes and, if interrupts become
//! enabled, nothing can be pending) and mfspr/mtspr of SPRG0-3, SRR0/1, ESR, DEAR, for a
//! guest in
//! supervisor mode whose instruction page is in the fetch cache, saving only the four
//! five registers it uses in the thread's frame area, and updates the trace counters. Every
//! other case restores them and enters the ordinary program-interrupt path, where
//! [`program`] (Rust) covers mtmsr, wrtee, rfi and the rest before the general emulator.
//! The assembly addresses `Vcpu` fields by `offset_of!`, so `Vcpu` is `repr(C)`.

use super::{mmu, Insn, Vcpu, NO_VCPU, VCPU_MSR};
use crate::api::{kernel, Kernel};
use crate::arch::{esr, msr, spr, tcr, tsr, TrapFrame};
use core::arch::global_asm;
use core::mem::offset_of;
use kestrel_abi::TracePoint;
use kestrel_abi::VcpuState;
use ppc440::decode::{
    self,
    opcd::{X, XL},
    xo19, xo31,
};
use ppc440::spr::{
    emulation, Emulation, CSRR0, CSRR1, DEAR, ESR, MCSRR0, MCSRR1, MMUCR, PID, SPRG0, SPRG1, SPRG2,
    SPRG3, SPRG4, SPRG7, SRR0, SRR1,
};

/// MSR bits a fast-path MSR write may not change (they need the full path: a new
/// translation space flushes the shadow TLB; FP/DE change the real MSR).
const SLOW_MSR_BITS: u32 = msr::IS | msr::DS | msr::FP | msr::DE | msr::WE;

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
    let t0 = spr::read::<{ ppc440::spr::TBL_R }>();
    let old = k.vm.vcpus[vi].s.msr;
    if old & msr::PR != 0 {
        return Err(Insn::Unknown);
    }
    let pc = f.regs.ip;
    let Some(insn) = mmu::guest_fetch(k, vi, pc) else {
        return Err(Insn::Unreadable);
    };
    // A live magic page (pv.rs): the fields this tier may touch come from it first.
    let live = super::pv::live(k, vi);
    if live && !super::pv::fast_in(k, vi, insn) {
        return Err(Insn::Fetched(insn));
    }
    let old = k.vm.vcpus[vi].s.msr;
    match emulate(k, vi, f, insn, old, t0) {
        Some(()) => {
            if live {
                super::pv::fast_out(k, vi, old);
            }
            Ok(frame)
        }
        None => Err(Insn::Fetched(insn)),
    }
}

/// Emulates `insn` (fetched at the frame's pc) if it is one the fast tier handles; true
/// when the frame is ready to resume.
#[inline(always)]
fn emulate(
    k: &mut Kernel,
    vi: usize,
    f: &mut TrapFrame,
    insn: u32,
    old: u32,
    t0: u32,
) -> Option<()> {
    let pc = f.regs.ip;
    let rs = decode::RT.get(insn) as usize;
    let (new_msr, next, tp) = match (decode::OPCD.get(insn), decode::XO.get(insn)) {
        (X, xo31::MFMSR) => {
            f.regs.gpr[rs] = old;
            (old, pc + 4, TracePoint::EmulMfmsr)
        }
        (X, xo31::MTMSR) => (
            f.regs.gpr[rs] & super::GUEST_MSR_MASK,
            pc + 4,
            TracePoint::EmulMtmsr,
        ),
        (X, xo31::WRTEE) => (
            (old & !msr::EE) | (f.regs.gpr[rs] & msr::EE),
            pc + 4,
            TracePoint::EmulWrtee,
        ),
        (X, xo31::WRTEEI) => (
            (old & !msr::EE) | if decode::E.get(insn) != 0 { msr::EE } else { 0 },
            pc + 4,
            TracePoint::EmulWrteei,
        ),
        (XL, xo19::RFI) => {
            let s = &k.vm.vcpus[vi].s;
            (s.srr1 & super::GUEST_MSR_MASK, s.srr0, TracePoint::EmulRfi)
        }
        (X, xo31::MFSPR) if decode::spr_number(insn) == PID => {
            f.regs.gpr[rs] = k.vm.vcpus[vi].s.pid;
            (old, pc + 4, TracePoint::EmulMfspr)
        }
        (X, xo31::MFSPR) => {
            let v = plain_spr(&mut k.vm.vcpus[vi].s, decode::spr_number(insn))?;
            f.regs.gpr[rs] = *v;
            (old, pc + 4, TracePoint::EmulMfspr)
        }
        (X, xo31::MTSPR) if decode::spr_number(insn) == PID => {
            super::emulate::write_pid(k, vi, f.regs.gpr[rs]);
            (old, pc + 4, TracePoint::EmulMtspr)
        }
        (X, xo31::MTSPR) if (SPRG4..=SPRG7).contains(&decode::spr_number(insn)) => {
            super::emulate::write_sprg(
                &mut k.vm.vcpus[vi].s,
                decode::spr_number(insn),
                f.regs.gpr[rs],
            );
            (old, pc + 4, TracePoint::EmulMtspr)
        }
        (X, xo31::MTSPR) => {
            let val = f.regs.gpr[rs];
            let v = plain_spr(&mut k.vm.vcpus[vi].s, decode::spr_number(insn))?;
            *v = val;
            (old, pc + 4, TracePoint::EmulMtspr)
        }
        (X, xo31::TLBRE) => {
            // tlbre RT,RA,WS
            let (index, word) = (
                f.regs.gpr[decode::RA.get(insn) as usize],
                decode::RB.get(insn),
            );
            let v = &mut k.vm.vcpus[vi];
            let (val, mmucr) = v.tlb.tlbre(index, word, v.s.mmucr).ok()?;
            f.regs.gpr[rs] = val;
            if let Some(m) = mmucr {
                v.s.mmucr = m;
            }
            (old, pc + 4, TracePoint::EmulTlbre)
        }
        (X, xo31::TLBSX) => {
            // tlbsx[.] RT,RA,RB
            let ra = decode::RA.get(insn) as usize;
            let ea = if ra == 0 { 0 } else { f.regs.gpr[ra] }
                .wrapping_add(f.regs.gpr[decode::RB.get(insn) as usize]);
            let hit = k.vm.vcpus[vi].tlb.tlbsx(ea, k.vm.vcpus[vi].s.mmucr);
            if let Some(i) = hit {
                f.regs.gpr[rs] = i;
            }
            if decode::RC.get(insn) != 0 {
                f.regs.cr = super::emulate::tlbsx_cr(f.regs.cr, f.regs.xer, hit.is_some());
            }
            (old, pc + 4, TracePoint::EmulTlbsx)
        }
        (X, xo31::TLBWE) => {
            // tlbwe RS,RA,WS
            let (index, word) = (
                f.regs.gpr[decode::RA.get(insn) as usize],
                decode::RB.get(insn),
            );
            mmu::guest_tlbwe(k, vi, index, word, f.regs.gpr[rs]).ok()?;
            (old, pc + 4, TracePoint::EmulTlbwe)
        }
        _ => return None,
    };
    if (new_msr ^ old) & SLOW_MSR_BITS != 0 {
        return None;
    }
    // Enabling interrupts with one possibly pending: let the full path deliver it.
    if new_msr & !old & (msr::EE | msr::CE) != 0
        && maybe_pending(&k.vm.vcpus[vi].s, k.vm.vcpus[vi].dec_deadline)
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
    super::sync_frame_msr(k, vi, f);
    let cost = spr::read::<{ ppc440::spr::TBL_R }>().wrapping_sub(t0);
    super::trace(k, vi, tp, cost);
    Some(())
}

/// Shadow SPRs whose reads and writes are plain copies (no side effects): exactly the
/// crate's SPR table's classes `Fast` and `Shadow` ([`PLAIN_SPRS`], checked at compile
/// time); this only says where each lives.
#[inline(always)]
fn plain_spr(s: &mut kestrel_abi::VcpuState, n: u32) -> Option<&mut u32> {
    Some(match n {
        SRR0 => &mut s.srr0,
        SRR1 => &mut s.srr1,
        CSRR0 => &mut s.csrr0,
        CSRR1 => &mut s.csrr1,
        MCSRR0 => &mut s.mcsrr0,
        MCSRR1 => &mut s.mcsrr1,
        SPRG0..=SPRG3 => &mut s.sprg[(n - SPRG0) as usize],
        ESR => &mut s.esr,
        DEAR => &mut s.dear,
        MMUCR => &mut s.mmucr,
        _ => return None,
    })
}

/// The SPRs [`plain_spr`] copies: the table's `Fast` and `Shadow` classes.
const PLAIN_SPRS: [u32; 13] = [
    SRR0, SRR1, CSRR0, CSRR1, MCSRR0, MCSRR1, SPRG0, SPRG1, SPRG2, SPRG3, ESR, DEAR, MMUCR,
];
/// The SPRs the assembly tier copies (`VF_SPR_OFFSET`): the table's `Fast` class.
const ASM_SPRS: [u32; 8] = [SPRG0, SPRG1, SPRG2, SPRG3, SRR0, SRR1, ESR, DEAR];

/// Whether `list` is exactly the SPRs of the table whose class is `a` or `b`.
const fn is_class_set(list: &[u32], a: Emulation, b: Emulation) -> bool {
    const fn is(e: Emulation, a: Emulation, b: Emulation) -> bool {
        e as u8 == a as u8 || e as u8 == b as u8
    }
    let mut count = 0;
    let mut j = 0;
    while j < ppc440::spr::TABLE.len() {
        if is(ppc440::spr::TABLE[j].emulation, a, b) {
            count += 1;
        }
        j += 1;
    }
    let mut i = 0;
    while i < list.len() {
        if !is(emulation(list[i]), a, b) {
            return false;
        }
        i += 1;
    }
    count == list.len()
}

const _: () = {
    assert!(
        is_class_set(&ASM_SPRS, Emulation::Fast, Emulation::Fast),
        "asm tier != Fast class"
    );
    assert!(
        is_class_set(&PLAIN_SPRS, Emulation::Fast, Emulation::Shadow),
        "Rust tier != Fast + Shadow classes"
    );
    // VF_SPR_OFFSET maps SPRG0-3 by subtraction from SPRG0.
    assert!(SPRG1 == SPRG0 + 1 && SPRG2 == SPRG0 + 2 && SPRG3 == SPRG0 + 3);
};

/// Whether an interrupt could become deliverable when the guest enables interrupts.
fn maybe_pending(s: &kestrel_abi::VcpuState, dec_deadline: u64) -> bool {
    s.irq_line != 0
        || s.crit_line != 0
        || s.tsr & (tsr::DIS | tsr::FIS | tsr::WIS) != 0
        || s.tcr & (tcr::FIE | tcr::WIE) != 0
        || (dec_deadline != 0 && dec_deadline <= spr::timebase())
}

/// Address of the running vCPU's `Vcpu`, or 0 when a native thread runs; read by
/// `__program_fast`.
#[no_mangle]
static mut FAST_VCPU: usize = 0;

/// Records which vCPU runs (called on every switch).
#[inline(always)]
pub fn set_current(v: Option<&Vcpu>) {
    // A vCPU with a live magic page takes the full path (pv.rs).
    let a = v
        .filter(|v| !v.pv.live)
        .map_or(0, |v| v as *const Vcpu as usize);
    // SAFETY: single CPU, interrupts off in the kernel; only the scheduler writes it
    // and only `__program_fast` (running with interrupts off) reads it.
    unsafe { *core::ptr::addr_of_mut!(FAST_VCPU) = a };
}

const STATE: usize = offset_of!(Vcpu, s);
// The assembly tests these with one `andi.`/`andis.` each: each mask must sit in one half.
const _: () = assert!(SLOW_MSR_BITS & 0xffff & !(msr::FP | msr::DE | msr::IS | msr::DS) == 0);
const _: () = assert!(SLOW_MSR_BITS >> 16 << 16 == msr::WE);
const _: () = assert!(msr::CE & 0xffff == 0 && esr::PPR & 0xffff == 0 && msr::EE >> 16 == 0);
const _: () = assert!((tsr::DIS | tsr::FIS | tsr::WIS | tcr::FIE | tcr::WIE) & 0xffff == 0);
const _: () = assert!((VCPU_MSR | msr::FP | msr::DE | msr::PR | msr::IS) >> 16 == 0);
const _: () = assert!(
    offset_of!(Vcpu, trace) < 32768 && core::mem::size_of::<kestrel_abi::TraceCounter>() == 20
);

global_asm!(
    "    .section .text.vfast, \"ax\"",
    // VF_SPR_OFFSET: r3 = instruction; r4 = offset of the named shadow SPR in `Vcpu`
    // (SPRG0-3, SRR0/1, ESR, DEAR), or leave for the slow path. Clobbers r5.
    // VF_READ_RS: r3 = instruction; jumps through `.Lvf_rtab` with the value of the
    // instruction's RS register in r5, continuing at `.Lvf_have_rs`. Clobbers r3, r4, CTR.
    "    .macro VF_READ_RS",
    "    rlwinm 4, 3, 11, 27, 31",
    "    slwi 4, 4, 3",
    "    lis 3, .Lvf_rtab@ha",
    "    addi 3, 3, .Lvf_rtab@l",
    "    add 4, 4, 3",
    "    mtctr 4",
    "    bctr",
    "    .endm",
    "    .macro VF_SPR_OFFSET",
    "    rlwinm 4, 3, 21, 27, 31",
    "    rlwinm 5, 3, 16, 27, 31",
    "    rlwimi 5, 4, 5, 22, 26",
    "    addi 4, 5, -{n_sprg0}",
    "    cmplwi 4, 3",
    "    bgt 1f",
    "    slwi 4, 4, 2",
    "    addi 4, 4, {sprg0}",
    "    b 2f",
    "1:  cmpwi 5, {n_srr0}",
    "    li 4, {srr0}",
    "    beq 2f",
    "    cmpwi 5, {n_srr1}",
    "    li 4, {srr1}",
    "    beq 2f",
    "    cmpwi 5, {n_esr}",
    "    li 4, {esr}",
    "    beq 2f",
    "    cmpwi 5, {n_dear}",
    "    li 4, {dear}",
    "    beq 2f",
    "    b .Lvf_slow",
    "2:",
    "    .endm",
    "    .global __program_fast",
    "__program_fast:",
    "    mfspr 1, {n_sprg1}",
    "    stw 4, 16(1)",
    "    stw 5, 20(1)",
    "    stw 6, 24(1)",
    "    stw 7, 28(1)",
    "    mfcr 4",
    "    stw 4, 128(1)",
    "    mfctr 4",
    "    stw 4, 136(1)",
    "    mfspr 4, {n_tbl}",
    "    stw 4, 32(1)",
    "    mfspr 4, {n_srr1}",
    "    andi. 4, 4, {pr_is}",
    "    cmpwi 4, {pr_is}",
    "    bne .Lvf_slow",
    "    mfspr 4, {n_esr}",
    "    andis. 4, 4, {esr_ppr_hi}",
    "    beq .Lvf_slow",
    "    lis 6, FAST_VCPU@ha",
    "    lwz 6, FAST_VCPU@l(6)",
    "    cmpwi 6, 0",
    "    beq .Lvf_slow",
    "    lwz 4, {msr}(6)",
    "    andi. 4, 4, {msr_pr}",
    "    bne .Lvf_slow",
    "    mfspr 3, {n_srr0}",
    "    addi 5, 3, 4",
    "    stw 5, 44(1)",
    "    rlwinm 4, 3, 0, 0, 19",
    "    ori 4, 4, 1",
    "    lwz 5, {fpage}(6)",
    "    cmpw 4, 5",
    "    bne .Lvf_slow",
    "    lwz 5, {fhost}(6)",
    "    rlwinm 4, 3, 0, 20, 31",
    "    lwzx 3, 5, 4",
    "    rlwinm 4, 3, 6, 26, 31",
    "    cmpwi 4, {op_xl}",
    "    beq .Lvf_op19",
    "    cmpwi 4, {op_x}",
    "    bne .Lvf_slow",
    "    rlwinm 4, 3, 31, 22, 31",
    "    cmpwi 4, {xo_mfmsr}",
    "    beq .Lvf_mfmsr",
    "    cmpwi 4, {xo_mfspr}",
    "    beq .Lvf_mfspr",
    "    cmpwi 4, {xo_mtspr}",
    "    beq .Lvf_mtspr",
    "    cmpwi 4, {xo_wrteei}",
    "    beq .Lvf_wrteei",
    "    cmpwi 4, {xo_mtmsr}",
    "    beq .Lvf_mtmsr",
    "    cmpwi 4, {xo_wrtee}",
    "    beq .Lvf_wrtee",
    // mfdcr/mtdcr go to the VMM: the virtualization-fault fast path (`glue::fastpath`).
    "    cmpwi 4, {xo_mfdcr}",
    "    beq .Lvf_dcr",
    "    cmpwi 4, {xo_mtdcr}",
    "    bne .Lvf_slow",
    ".Lvf_dcr:",
    "    b __vfault_dcr",
    ".Lvf_op19:",
    "    rlwinm 4, 3, 31, 22, 31",
    "    cmpwi 4, {xo_rfi}",
    "    bne .Lvf_slow",
    "    lwz 5, {srr0}(6)",
    "    stw 5, 44(1)",
    "    li 4, {tp_rfi}",
    "    stw 4, 36(1)",
    "    lwz 7, {msr}(6)",
    "    lwz 5, {srr1}(6)",
    "    lis 4, {mask_hi}",
    "    ori 4, 4, {mask_lo}",
    "    and 5, 5, 4",
    "    b .Lvf_newmsr",
    ".Lvf_mfmsr:",
    "    li 4, {tp_mfmsr}",
    "    stw 4, 36(1)",
    "    lwz 5, {msr}(6)",
    "    b .Lvf_write_rt",
    ".Lvf_mfspr:",
    "",
    "    VF_SPR_OFFSET",
    "    lwzx 5, 6, 4",
    "    li 4, {tp_mfspr}",
    "    stw 4, 36(1)",
    "    b .Lvf_write_rt",
    ".Lvf_mtspr:",
    "",
    "    VF_SPR_OFFSET",
    "    stw 4, 40(1)",
    "    li 4, {tp_mtspr}",
    "    stw 4, 36(1)",
    "",
    "    VF_READ_RS",
    ".Lvf_mtmsr:",
    "    li 4, -1",
    "    stw 4, 40(1)",
    "    li 4, {tp_mtmsr}",
    "    stw 4, 36(1)",
    "",
    "    VF_READ_RS",
    ".Lvf_wrtee:",
    "    li 4, -2",
    "    stw 4, 40(1)",
    "    li 4, {tp_wrtee}",
    "    stw 4, 36(1)",
    "",
    "    VF_READ_RS",
    ".Lvf_have_rs:",
    "    lwz 4, 40(1)",
    "    cmpwi 4, 0",
    "    blt 1f",
    "    stwx 5, 6, 4",
    "    b .Lvf_finish",
    "1:  lwz 7, {msr}(6)",
    "    cmpwi 4, -1",
    "    bne 2f",
    "    lis 4, {mask_hi}",
    "    ori 4, 4, {mask_lo}",
    "    and 5, 5, 4",
    "    b .Lvf_newmsr",
    "2:  andi. 5, 5, {msr_ee}",
    "    rlwinm 4, 7, 0, {ee_bit} + 1, {ee_bit} - 1",
    "    or 5, 5, 4",
    ".Lvf_newmsr:",
    "    xor 4, 5, 7",
    "    andi. 3, 4, {slow_lo}",
    "    bne .Lvf_slow",
    "    andis. 3, 5, {slow_hi}",
    "    bne .Lvf_slow",
    "    andc 3, 5, 7",
    "    andi. 4, 3, {msr_ee}",
    "    bne .Lvf_pending",
    "    andis. 4, 3, {msr_ce_hi}",
    "    beq .Lvf_store_msr",
    ".Lvf_pending:",
    "    lwz 3, {irq}(6)",
    "    lwz 4, {crit}(6)",
    "    or. 3, 3, 4",
    "    bne .Lvf_slow",
    "    lwz 3, {tsr}(6)",
    "    andis. 3, 3, {tsr_pending_hi}",
    "    bne .Lvf_slow",
    "    lwz 3, {tcr}(6)",
    "    andis. 3, 3, {tcr_pending_hi}",
    "    bne .Lvf_slow",
    "    lwz 3, {dec}(6)",
    "    lwz 4, {dec_lo}(6)",
    "    or. 3, 3, 4",
    "    beq .Lvf_store_msr",
    "    lwz 3, {dec}(6)",
    "    mfspr 4, {n_tbu}",
    "    cmplw 3, 4",
    "    blt .Lvf_slow",
    "    bgt .Lvf_store_msr",
    "    lwz 3, {dec_lo}(6)",
    "    mfspr 4, {n_tbl}",
    "    cmplw 3, 4",
    "    ble .Lvf_slow",
    ".Lvf_store_msr:",
    "    stw 5, {msr}(6)",
    "    xor 4, 5, 7",
    "    andi. 4, 4, {msr_pr}",
    "    beq .Lvf_finish",
    "    andi. 4, 5, {msr_pr}",
    "    lwz 4, {hw_tid_kernel}(6)",
    "    beq 1f",
    "    lwz 4, {hw_tid_user}(6)",
    "1:  mtspr {n_pid}, 4",
    "    b .Lvf_finish",
    ".Lvf_wrteei:",
    "    andi. 4, 3, {wrteei_e}",
    "    lwz 5, {msr}(6)",
    "    beq 1f",
    "    andi. 4, 5, {msr_ee}",
    "    bne 2f",
    "    b .Lvf_slow",
    "1:  rlwinm 5, 5, 0, {ee_bit} + 1, {ee_bit} - 1",
    "    stw 5, {msr}(6)",
    "2:  li 4, {tp_wrteei}",
    "    stw 4, 36(1)",
    "    b .Lvf_finish",
    ".Lvf_write_rt:",
    "    rlwinm 4, 3, 11, 27, 31",
    "    slwi 4, 4, 3",
    "    lis 3, .Lvf_wtab@ha",
    "    addi 3, 3, .Lvf_wtab@l",
    "    add 4, 4, 3",
    "    mtctr 4",
    "    bctr",
    ".Lvf_finish:",
    "    lwz 5, 44(1)",
    "    mtspr {n_srr0}, 5",
    "    mfspr 5, {n_srr1}",
    "    andi. 5, 5, {srr1_keep}",
    "    mtspr {n_srr1}, 5",
    "    lwz 4, 36(1)",
    "    mulli 4, 4, 20",
    "    add 4, 4, 6",
    "    addi 4, 4, {trace}",
    "    mfspr 5, {n_tbl}",
    "    lwz 3, 32(1)",
    "    subf 5, 3, 5",
    "    lwz 3, 0(4)",
    "    cmpwi 3, 0",
    "    addi 3, 3, 1",
    "    stw 3, 0(4)",
    "    beq 1f",
    "    lwz 3, 4(4)",
    "    cmplw 5, 3",
    "    bge 2f",
    "1:  stw 5, 4(4)",
    "2:  lwz 3, 8(4)",
    "    cmplw 5, 3",
    "    ble 3f",
    "    stw 5, 8(4)",
    "3:  lwz 3, 12(4)",
    "    add 3, 3, 5",
    "    stw 3, 12(4)",
    "    cmplw 3, 5",
    "    bge 4f",
    "    lwz 3, 16(4)",
    "    addi 3, 3, 1",
    "    stw 3, 16(4)",
    "4:  lwz 4, 136(1)",
    "    mtctr 4",
    "    lwz 4, 128(1)",
    "    mtcr 4",
    "    lwz 4, 16(1)",
    "    lwz 5, 20(1)",
    "    lwz 6, 24(1)",
    "    lwz 7, 28(1)",
    "    mfspr 3, {n_sprg3}",
    "    mfspr 1, {n_sprg2}",
    "    rfi",
    ".Lvf_slow:",
    "    lwz 4, 128(1)",
    "    mtcr 4",
    "    lwz 4, 136(1)",
    "    mtctr 4",
    "    lwz 4, 16(1)",
    "    lwz 5, 20(1)",
    "    lwz 6, 24(1)",
    "    lwz 7, 28(1)",
    "    mfspr 1, {n_sprg2}",
    "    li 3, {vec_program}",
    "    b __program_entry",
    "    .balign 8",
    ".Lvf_rtab:",
    "    mr 5, 0",
    "    b .Lvf_have_rs",
    "    mfspr 5, {n_sprg2}",
    "    b .Lvf_have_rs",
    "    mr 5, 2",
    "    b .Lvf_have_rs",
    "    mfspr 5, {n_sprg3}",
    "    b .Lvf_have_rs",
    "    lwz 5, 16(1)",
    "    b .Lvf_have_rs",
    "    lwz 5, 20(1)",
    "    b .Lvf_have_rs",
    "    lwz 5, 24(1)",
    "    b .Lvf_have_rs",
    "    lwz 5, 28(1)",
    "    b .Lvf_have_rs",
    "    mr 5, 8",
    "    b .Lvf_have_rs",
    "    mr 5, 9",
    "    b .Lvf_have_rs",
    "    mr 5, 10",
    "    b .Lvf_have_rs",
    "    mr 5, 11",
    "    b .Lvf_have_rs",
    "    mr 5, 12",
    "    b .Lvf_have_rs",
    "    mr 5, 13",
    "    b .Lvf_have_rs",
    "    mr 5, 14",
    "    b .Lvf_have_rs",
    "    mr 5, 15",
    "    b .Lvf_have_rs",
    "    mr 5, 16",
    "    b .Lvf_have_rs",
    "    mr 5, 17",
    "    b .Lvf_have_rs",
    "    mr 5, 18",
    "    b .Lvf_have_rs",
    "    mr 5, 19",
    "    b .Lvf_have_rs",
    "    mr 5, 20",
    "    b .Lvf_have_rs",
    "    mr 5, 21",
    "    b .Lvf_have_rs",
    "    mr 5, 22",
    "    b .Lvf_have_rs",
    "    mr 5, 23",
    "    b .Lvf_have_rs",
    "    mr 5, 24",
    "    b .Lvf_have_rs",
    "    mr 5, 25",
    "    b .Lvf_have_rs",
    "    mr 5, 26",
    "    b .Lvf_have_rs",
    "    mr 5, 27",
    "    b .Lvf_have_rs",
    "    mr 5, 28",
    "    b .Lvf_have_rs",
    "    mr 5, 29",
    "    b .Lvf_have_rs",
    "    mr 5, 30",
    "    b .Lvf_have_rs",
    "    mr 5, 31",
    "    b .Lvf_have_rs",
    ".Lvf_wtab:",
    "    mr 0, 5",
    "    b .Lvf_finish",
    "    mtspr {n_sprg2}, 5",
    "    b .Lvf_finish",
    "    mr 2, 5",
    "    b .Lvf_finish",
    "    mtspr {n_sprg3}, 5",
    "    b .Lvf_finish",
    "    stw 5, 16(1)",
    "    b .Lvf_finish",
    "    stw 5, 20(1)",
    "    b .Lvf_finish",
    "    stw 5, 24(1)",
    "    b .Lvf_finish",
    "    stw 5, 28(1)",
    "    b .Lvf_finish",
    "    mr 8, 5",
    "    b .Lvf_finish",
    "    mr 9, 5",
    "    b .Lvf_finish",
    "    mr 10, 5",
    "    b .Lvf_finish",
    "    mr 11, 5",
    "    b .Lvf_finish",
    "    mr 12, 5",
    "    b .Lvf_finish",
    "    mr 13, 5",
    "    b .Lvf_finish",
    "    mr 14, 5",
    "    b .Lvf_finish",
    "    mr 15, 5",
    "    b .Lvf_finish",
    "    mr 16, 5",
    "    b .Lvf_finish",
    "    mr 17, 5",
    "    b .Lvf_finish",
    "    mr 18, 5",
    "    b .Lvf_finish",
    "    mr 19, 5",
    "    b .Lvf_finish",
    "    mr 20, 5",
    "    b .Lvf_finish",
    "    mr 21, 5",
    "    b .Lvf_finish",
    "    mr 22, 5",
    "    b .Lvf_finish",
    "    mr 23, 5",
    "    b .Lvf_finish",
    "    mr 24, 5",
    "    b .Lvf_finish",
    "    mr 25, 5",
    "    b .Lvf_finish",
    "    mr 26, 5",
    "    b .Lvf_finish",
    "    mr 27, 5",
    "    b .Lvf_finish",
    "    mr 28, 5",
    "    b .Lvf_finish",
    "    mr 29, 5",
    "    b .Lvf_finish",
    "    mr 30, 5",
    "    b .Lvf_finish",
    "    mr 31, 5",
    "    b .Lvf_finish",
    n_sprg0 = const SPRG0,
    n_sprg1 = const SPRG1,
    n_sprg2 = const SPRG2,
    n_sprg3 = const SPRG3,
    n_srr0 = const SRR0,
    n_srr1 = const SRR1,
    n_esr = const ESR,
    n_dear = const DEAR,
    n_pid = const PID,
    n_tbl = const ppc440::spr::TBL_R,
    n_tbu = const ppc440::spr::TBU_R,
    pr_is = const msr::PR | msr::IS,
    msr_pr = const msr::PR,
    msr_ee = const msr::EE,
    msr_ce_hi = const msr::CE >> 16,
    ee_bit = const msr::EE.leading_zeros(),
    slow_lo = const SLOW_MSR_BITS & 0xffff,
    slow_hi = const SLOW_MSR_BITS >> 16,
    esr_ppr_hi = const esr::PPR >> 16,
    tsr_pending_hi = const (tsr::DIS | tsr::FIS | tsr::WIS) >> 16,
    tcr_pending_hi = const (tcr::FIE | tcr::WIE) >> 16,
    srr1_keep = const VCPU_MSR | msr::FP | msr::DE,
    hw_tid_kernel = const offset_of!(Vcpu, hw_tid),
    hw_tid_user = const offset_of!(Vcpu, hw_tid) + 4,
    wrteei_e = const decode::E.mask(),
    op_x = const X,
    op_xl = const XL,
    xo_mfmsr = const xo31::MFMSR,
    xo_mtmsr = const xo31::MTMSR,
    xo_wrtee = const xo31::WRTEE,
    xo_wrteei = const xo31::WRTEEI,
    xo_mfspr = const xo31::MFSPR,
    xo_mtspr = const xo31::MTSPR,
    xo_rfi = const xo19::RFI,
    xo_mfdcr = const xo31::MFDCR,
    xo_mtdcr = const xo31::MTDCR,
    vec_program = const crate::arch::vector::PROGRAM,
    msr = const STATE + offset_of!(VcpuState, msr),
    fpage = const offset_of!(Vcpu, fetch_page),
    fhost = const offset_of!(Vcpu, fetch_host),
    sprg0 = const STATE + offset_of!(VcpuState, sprg),
    srr0 = const STATE + offset_of!(VcpuState, srr0),
    srr1 = const STATE + offset_of!(VcpuState, srr1),
    esr = const STATE + offset_of!(VcpuState, esr),
    dear = const STATE + offset_of!(VcpuState, dear),
    irq = const STATE + offset_of!(VcpuState, irq_line),
    crit = const STATE + offset_of!(VcpuState, crit_line),
    tsr = const STATE + offset_of!(VcpuState, tsr),
    tcr = const STATE + offset_of!(VcpuState, tcr),
    dec = const offset_of!(Vcpu, dec_deadline),
    dec_lo = const offset_of!(Vcpu, dec_deadline) + 4,
    mask_hi = const super::GUEST_MSR_MASK >> 16,
    mask_lo = const super::GUEST_MSR_MASK & 0xffff,
    trace = const offset_of!(Vcpu, trace),
    tp_mfmsr = const TracePoint::EmulMfmsr as u32,
    tp_mtmsr = const TracePoint::EmulMtmsr as u32,
    tp_wrtee = const TracePoint::EmulWrtee as u32,
    tp_wrteei = const TracePoint::EmulWrteei as u32,
    tp_rfi = const TracePoint::EmulRfi as u32,
    tp_mfspr = const TracePoint::EmulMfspr as u32,
    tp_mtspr = const TracePoint::EmulMtspr as u32,
);
