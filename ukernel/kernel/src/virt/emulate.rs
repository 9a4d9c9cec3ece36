//! Trap-and-emulate for vCPUs: the kernel-side handler of every guest trap, and the
//! emulation of the hot privileged instructions (mfmsr, mtmsr, wrtee, wrteei, rfi,
//! rfci, rfmci, mfspr/mtspr of the shadow SPRs, tlbwe, tlbre, tlbsx, tlbsync, iccci,
//! dccci, dcbi). Everything else becomes a virtualization fault IPC to the VMM, including
//! `mfdcrx`/`mtdcrx`, which the 440x5 raises as illegal instructions (see `indexed_dcr`).
//!
//! Instruction fields follow Book E (MSB-0): opcode 0:5, RS/RT 6:10, RA 11:15,
//! RB 16:20, extended opcode 21:30, Rc 31; the SPR/DCR number is the 10-bit field
//! 11:20 with its two halves swapped.

use super::{
    deliver_pending, exit_begin, exit_class, exit_split, inject, mmu, set_guest_mode, set_timebase,
    sync_frame_msr, update_dec, virt_fault, Insn, GUEST_MSR_MASK, NO_VCPU,
};
use crate::api::Kernel;
use crate::arch::{esr, msr, spr, tcr, tsr, vector, TrapFrame};
use kestrel_abi::{TracePoint, VirtFault};
use kestrel_vtlb::Access;
use ppc440::dbcr0;
use ppc440::decode::{
    self,
    opcd::{X, XL},
    xo19, xo31,
};
use ppc440::spr::{
    Emulation, CCR0, CCR1, CSRR0, CSRR1, DAC1, DAC2, DBCR0, DBCR1, DBCR2, DBSR, DEAR, DEC, DECAR,
    DVC1, DVC2, ESR, IAC1, IAC4, IVOR0, IVOR15, IVPR, MCSR, MCSRR0, MCSRR1, MMUCR, PID, PIR, PVR,
    SPRG0, SPRG4, SPRG5, SPRG6, SPRG7, SRR0, SRR1, TBL_R, TBL_W, TBU_R, TBU_W, TCR, TSR, USPRG0,
};

/// The debug events the kernel passes through to hardware for a guest: DBCR0[IDM] and
/// DBCR0[ICMP] (instruction-completion single step).
pub const DBCR0_EVENTS: u32 = dbcr0::IDM | dbcr0::ICMP;

/// Called first on every kernel entry from vCPU thread `cur` through the general path,
/// before any host event is handled: the guest's USPRG0 is a real user register while
/// it runs, and the exit's accounting starts (`virt::exit_begin`; its class is `tp` until
/// the handler names another).
#[inline(always)]
pub fn enter(k: &mut Kernel, vi: usize, tp: TracePoint) {
    k.vm.vcpus[vi].s.usprg0 = spr::read::<{ ppc440::spr::USPRG0 }>();
    exit_begin(k, vi, tp);
    super::pv::pv_in(k, vi);
}

/// Handles a guest exception of vCPU thread `cur` (vector `vec`, frame `f`): every vector
/// but the host's own events (decrementer, external interrupt), which `glue::trap`
/// handles once for all threads. `insn` is the guest instruction if the program
/// interrupt's fast tier already fetched it.
pub fn guest_trap(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    vec: u32,
    f: &mut TrapFrame,
    insn: Insn,
) -> Option<usize> {
    // The exit's class (its cost runs from the vector to the return to the guest,
    // `virt::exit_begin`); paths that leave it `None` set it themselves (`mmu`).
    let mut tp = None;
    let hint = match vec {
        vector::SYSCALL => 'sc: {
            if let Some((h, t)) = super::pv::hypercall(k, cur, vi, f) {
                tp = Some(t);
                break 'sc h;
            }
            // `sc` in the guest: reflect the system call into the guest kernel.
            let pc = f.regs.ip;
            inject(k, vi, f, vector::SYSCALL, pc);
            tp = Some(TracePoint::ExceptSyscall);
            None
        }
        vector::PROGRAM => {
            let e = spr::read::<{ ppc440::spr::ESR }>();
            if e & esr::PPR != 0 {
                let (h, t) = privileged(k, cur, vi, f, insn);
                tp = t;
                h
            } else if let Some(word) = indexed_dcr(k, vi, f, e, insn) {
                // mfdcrx/mtdcrx: illegal on QEMU's 440, emulated by the VMM (BG/P's DCRs
                // above 1023 need them).
                let (h, t) = privileged(k, cur, vi, f, Insn::Fetched(word));
                tp = t;
                h
            } else {
                // Illegal instruction or trap: the guest's own business.
                k.vm.vcpus[vi].s.esr = e;
                let pc = f.regs.ip;
                inject(k, vi, f, vector::PROGRAM, pc);
                tp = Some(TracePoint::ExceptReflect);
                None
            }
        }
        vector::DTLB_MISS | vector::DSI => {
            let ea = spr::read::<{ ppc440::spr::DEAR }>();
            let e = spr::read::<{ ppc440::spr::ESR }>();
            let access = if e & esr::ST != 0 {
                Access::Write
            } else {
                Access::Read
            };
            mmu::tlb_fault(k, cur, vi, f, ea, access, e)
        }
        vector::ITLB_MISS | vector::ISI => {
            let ea = f.regs.ip;
            mmu::tlb_fault(k, cur, vi, f, ea, Access::Execute, 0)
        }
        vector::ALIGNMENT => {
            // QEMU's 440 sets DEAR but leaves ESR alone on alignment interrupts.
            k.vm.vcpus[vi].s.dear = spr::read::<{ ppc440::spr::DEAR }>();
            let pc = f.regs.ip;
            inject(k, vi, f, vector::ALIGNMENT, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::FP_UNAVAILABLE if k.vm.vcpus[vi].s.msr & msr::FP != 0 => {
            // The guest enabled its FPU: hand it the real one (lazily switched).
            take_fpu(k, vi);
            sync_frame_msr(k, vi, f);
            tp = Some(TracePoint::KernelInternal);
            None
        }
        vector::FP_UNAVAILABLE | vector::AP_UNAVAILABLE => {
            let pc = f.regs.ip;
            inject(k, vi, f, vec, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        vector::DEBUG
            if k.vm.vcpus[vi].step != 0 && !super::guest_debug_events(&k.vm.vcpus[vi].s) =>
        {
            // The kernel's own single step after an emulated lwarx (split.rs).
            let dbsr = spr::read::<{ ppc440::spr::DBSR }>();
            spr::write::<{ ppc440::spr::DBSR }>(dbsr);
            tp = Some(TracePoint::KernelInternal);
            super::split::step(k, cur, vi, f)
        }
        vector::DEBUG => {
            // A hardware debug event the guest asked for (see DBCR0_EVENTS).
            let dbsr = spr::read::<{ ppc440::spr::DBSR }>();
            spr::write::<{ ppc440::spr::DBSR }>(dbsr);
            k.vm.vcpus[vi].s.dbsr |= dbsr & ppc440::dbsr::ICMP;
            let pc = f.regs.ip;
            inject(k, vi, f, vector::DEBUG, pc);
            tp = Some(TracePoint::ExceptReflect);
            None
        }
        _ => {
            let pc = f.regs.ip;
            let insn = mmu::guest_read_u32(k, vi, pc, true).unwrap_or(0);
            tp = Some(TracePoint::SyscallIpc);
            virt_fault(k, cur, vi, VirtFault::Halt, insn, vec as u64)
        }
    };
    if let Some(tp) = tp {
        exit_class(k, vi, tp);
    }
    hint
}

/// Called last on every kernel entry from vCPU thread `cur`, after the guest exception
/// or host event was handled: delivers the virtual interrupts the guest can now take,
/// if the vCPU is still the one to resume. An injection is its own trace point, from
/// here to the return to the guest (`virt::exit_split`).
#[inline(always)]
pub fn leave(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) {
    if k.current == cur && k.threads[cur].runnable() {
        let t = spr::read::<{ TBL_R }>();
        if let Some(tp) = deliver_pending(k, vi, f) {
            exit_split(k, vi, t, tp);
        }
    }
    super::pv::pv_out(k, vi);
}

fn rs(insn: u32) -> usize {
    decode::RT.get(insn) as usize
}
fn ra(insn: u32) -> usize {
    decode::RA.get(insn) as usize
}

/// The word of an illegal-instruction program exception (`ESR[PIL]` in `esr`) if it is
/// `mfdcrx` or `mtdcrx`: the 440x5 lacks them, but BG/P's 450 has them (privileged) and a
/// VM's BG/P devices put DCRs beyond the 10-bit `mfdcr` operand, so the kernel treats them
/// as privileged instructions the VMM emulates (the message's `gpa` carries (RA), the DCR
/// number). Fetches the word only for an illegal instruction (rare).
fn indexed_dcr(k: &mut Kernel, vi: usize, f: &TrapFrame, e: u32, insn: Insn) -> Option<u32> {
    if e & esr::PIL == 0 {
        return None;
    }
    let word = match insn {
        Insn::Fetched(i) => i,
        Insn::Unreadable => return None,
        Insn::Unknown => mmu::guest_fetch(k, vi, f.regs.ip)?,
    };
    let dcrx =
        decode::OPCD.get(word) == X && matches!(decode::XO.get(word), xo31::MFDCRX | xo31::MTDCRX);
    dcrx.then_some(word)
}

/// A privileged-instruction program exception: emulate or send to the VMM.
fn privileged(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    f: &mut TrapFrame,
    insn: Insn,
) -> (Option<usize>, Option<TracePoint>) {
    let pc = f.regs.ip;
    if k.vm.vcpus[vi].s.msr & msr::PR != 0 {
        // A privileged instruction in guest user mode: the guest kernel's business.
        k.vm.vcpus[vi].s.esr = esr::PPR;
        inject(k, vi, f, vector::PROGRAM, pc);
        return (None, Some(TracePoint::ExceptReflect));
    }
    let insn = match insn {
        Insn::Fetched(i) => Some(i),
        Insn::Unreadable => None,
        Insn::Unknown => mmu::guest_fetch(k, vi, pc),
    };
    let Some(insn) = insn else {
        return (
            virt_fault(k, cur, vi, VirtFault::Instruction, 0, 0),
            Some(TracePoint::SyscallIpc),
        );
    };
    let op = decode::OPCD.get(insn);
    let xo = decode::XO.get(insn);
    let next = pc.wrapping_add(4);
    let tp = match (op, xo) {
        (X, xo31::MFMSR) => {
            // mfmsr
            f.regs.gpr[rs(insn)] = k.vm.vcpus[vi].s.msr;
            TracePoint::EmulMfmsr
        }
        (X, xo31::MTMSR) => {
            // mtmsr
            let v = f.regs.gpr[rs(insn)];
            if !set_msr(k, cur, vi, f, v, next) {
                return (
                    virt_fault(k, cur, vi, VirtFault::Idle, insn, 0),
                    Some(TracePoint::GuestIdle),
                );
            }
            return (None, Some(TracePoint::EmulMtmsr));
        }
        (X, xo31::WRTEE) => {
            // wrtee
            let s = &mut k.vm.vcpus[vi].s;
            s.msr = (s.msr & !msr::EE) | (f.regs.gpr[rs(insn)] & msr::EE);
            TracePoint::EmulWrtee
        }
        (X, xo31::WRTEEI) => {
            // wrteei: E is bit 16.
            let s = &mut k.vm.vcpus[vi].s;
            s.msr = (s.msr & !msr::EE) | if decode::E.get(insn) != 0 { msr::EE } else { 0 };
            TracePoint::EmulWrteei
        }
        (X, xo31::MFSPR) => {
            // mfspr
            match read_spr(k, vi, decode::spr_number(insn)) {
                Some(v) => f.regs.gpr[rs(insn)] = v,
                None => {
                    return (
                        virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0),
                        Some(TracePoint::SyscallIpc),
                    )
                }
            }
            TracePoint::EmulMfspr
        }
        (X, xo31::MTSPR) => {
            // mtspr
            let v = f.regs.gpr[rs(insn)];
            match write_spr(k, vi, decode::spr_number(insn), v) {
                SprWrite::Done => sync_frame_msr(k, vi, f),
                SprWrite::Unknown => {
                    return (
                        virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0),
                        Some(TracePoint::SyscallIpc),
                    )
                }
                SprWrite::Reset => {
                    return (
                        virt_fault(k, cur, vi, VirtFault::Halt, insn, 0),
                        Some(TracePoint::SyscallIpc),
                    )
                }
            }
            TracePoint::EmulMtspr
        }
        (X, xo31::TLBWE | xo31::TLBRE | xo31::TLBSX) => match mmu::tlb_insn(k, vi, f, insn) {
            Some(tp) => tp,
            // An invalid word number.
            None => return reflect_illegal(k, vi, f),
        },
        (X, xo31::TLBSYNC | xo31::DCCCI | xo31::ICCCI | xo31::DCBI) => {
            // tlbsync, dccci, iccci, dcbi: no guest-visible effect under emulation
            // (the emulated TLB is coherent, QEMU has no caches to model).
            TracePoint::EmulCacheTlbOp
        }
        (XL, xo19::RFI) => {
            // rfi
            let (pc, m) = (k.vm.vcpus[vi].s.srr0, k.vm.vcpus[vi].s.srr1);
            if !set_msr(k, cur, vi, f, m, pc) {
                return (
                    virt_fault(k, cur, vi, VirtFault::Idle, insn, 0),
                    Some(TracePoint::GuestIdle),
                );
            }
            return (None, Some(TracePoint::EmulRfi));
        }
        (XL, xo19::RFCI | xo19::RFMCI) => {
            // rfci / rfmci
            let (pc, m) = if xo == xo19::RFCI {
                (k.vm.vcpus[vi].s.csrr0, k.vm.vcpus[vi].s.csrr1)
            } else {
                (k.vm.vcpus[vi].s.mcsrr0, k.vm.vcpus[vi].s.mcsrr1)
            };
            if !set_msr(k, cur, vi, f, m, pc) {
                return (
                    virt_fault(k, cur, vi, VirtFault::Idle, insn, 0),
                    Some(TracePoint::GuestIdle),
                );
            }
            return (None, Some(TracePoint::EmulRfciMci));
        }
        (X, xo31::MFDCRX | xo31::MTDCRX) => {
            // The VMM gets the DCR number (RA) with the fault, so neither form needs a
            // register transfer.
            let dcr = f.regs.gpr[ra(insn)] as u64;
            return (
                virt_fault(k, cur, vi, VirtFault::Instruction, insn, dcr),
                Some(TracePoint::SyscallIpc),
            );
        }
        _ => {
            return (
                virt_fault(k, cur, vi, VirtFault::Instruction, insn, 0),
                Some(TracePoint::SyscallIpc),
            )
        }
    };
    f.regs.ip = next;
    (None, Some(tp))
}

/// An emulated instruction with invalid operands: the guest gets an illegal-instruction
/// program exception, as on hardware.
fn reflect_illegal(
    k: &mut Kernel,
    vi: usize,
    f: &mut TrapFrame,
) -> (Option<usize>, Option<TracePoint>) {
    k.vm.vcpus[vi].s.esr = esr::PIL;
    let pc = f.regs.ip;
    inject(k, vi, f, vector::PROGRAM, pc);
    (None, Some(TracePoint::ExceptReflect))
}

/// Installs a new guest MSR and continues at `pc`. Returns false if the guest asked to
/// wait (MSR[WE]) with nothing pending, which the VMM handles.
fn set_msr(k: &mut Kernel, _cur: usize, vi: usize, f: &mut TrapFrame, value: u32, pc: u32) -> bool {
    let old = k.vm.vcpus[vi].s.msr;
    k.vm.vcpus[vi].s.msr = value & GUEST_MSR_MASK & !msr::WE;
    set_guest_mode(k, vi, old, f);
    f.regs.ip = pc;
    if value & msr::WE != 0 {
        return wakeup_pending(k, vi);
    }
    true
}

/// Whether a guest that asks to wait (MSR[WE], the `EV_IDLE` hypercall) has an interrupt
/// pending already, so it need not wait.
pub(super) fn wakeup_pending(k: &mut Kernel, vi: usize) -> bool {
    update_dec(k, vi);
    let s = &k.vm.vcpus[vi].s;
    s.irq_line != 0 || (s.tsr & tsr::DIS != 0 && s.tcr & tcr::DIE != 0)
}

/// CR after `tlbsx.`: CR0 = LT GT EQ SO, EQ set on a hit, SO copied from XER[SO].
#[inline(always)]
pub(super) fn tlbsx_cr(cr: u32, xer: u32, hit: bool) -> u32 {
    const SO_TO_CR0: u32 = ppc440::xer::SO.trailing_zeros() - ppc440::cr::CR0_SO.trailing_zeros();
    let so = (xer & ppc440::xer::SO) >> SO_TO_CR0;
    let eq = if hit { ppc440::cr::CR0_EQ } else { 0 };
    (cr & !ppc440::cr::CR0.mask()) | eq | so
}

/// Whether the kernel emulates guest accesses to SPR `n` at all (the crate's SPR table
/// decides; everything else is the VMM's).
#[inline(always)]
fn kernel_emulates(n: u32) -> bool {
    !matches!(ppc440::spr::emulation(n), Emulation::Vmm | Emulation::User)
}

/// Reads a shadow SPR; `None` for SPRs the kernel does not emulate.
fn read_spr(k: &mut Kernel, vi: usize, n: u32) -> Option<u32> {
    if !kernel_emulates(n) {
        return None;
    }
    update_dec(k, vi);
    let v = &k.vm.vcpus[vi];
    let s = &v.s;
    Some(match n {
        SRR0 => s.srr0,
        SRR1 => s.srr1,
        CSRR0 => s.csrr0,
        CSRR1 => s.csrr1,
        MCSRR0 => s.mcsrr0,
        MCSRR1 => s.mcsrr1,
        MCSR => s.mcsr,
        SPRG0..=SPRG7 => s.sprg[(n - SPRG0) as usize],
        USPRG0 => s.usprg0,
        ESR => s.esr,
        DEAR => s.dear,
        IVPR => s.ivpr,
        IVOR0..=IVOR15 => s.ivor[(n - IVOR0) as usize],
        PID => s.pid,
        MMUCR => s.mmucr,
        DEC => {
            if v.dec_deadline != 0 {
                v.dec_deadline.saturating_sub(spr::timebase()) as u32
            } else {
                s.dec
            }
        }
        DECAR => s.decar,
        TCR => s.tcr,
        TSR => s.tsr,
        DBCR0 => s.dbcr0,
        DBCR1 => s.dbcr1,
        DBCR2 => s.dbcr2,
        DBSR => s.dbsr,
        CCR0 => s.ccr0,
        CCR1 => s.ccr1,
        PVR => spr::read::<{ PVR }>(),
        PIR => 0, // uniprocessor guests are CPU 0
        IAC1..=IAC4 => s.iac[(n - IAC1) as usize],
        DAC1 | DAC2 => s.dac[(n - DAC1) as usize],
        DVC1 | DVC2 => s.dvc[(n - DVC1) as usize],
        TBL_R => spr::read::<{ TBL_R }>(),
        TBU_R => spr::read::<{ TBU_R }>(),
        _ => return None,
    })
}

enum SprWrite {
    Done,
    Unknown,
    Reset,
}

/// mtspr SPRG0-7 (`n` in SPRG0..=SPRG7): the shadow copy; SPRG4-7 are user-readable
/// (their class is `WriteThrough`), so they also go to the real registers, which the
/// guest reads without trapping.
pub(super) fn write_sprg(s: &mut kestrel_abi::VcpuState, n: u32, val: u32) {
    s.sprg[(n - SPRG0) as usize & 7] = val;
    match n {
        SPRG4 => spr::write::<{ SPRG4 }>(val),
        SPRG5 => spr::write::<{ SPRG5 }>(val),
        SPRG6 => spr::write::<{ SPRG6 }>(val),
        SPRG7 => spr::write::<{ SPRG7 }>(val),
        _ => {}
    }
}

/// mtspr PID: a guest address-space switch only loads the hardware TID of the new guest
/// PID (Linux with KUAP does this around every kernel entry and user access); the old
/// PID's shadow entries stay under their own TIDs.
pub(super) fn write_pid(k: &mut Kernel, vi: usize, val: u32) {
    let s = &mut k.vm.vcpus[vi].s;
    if s.pid != val & 0xff {
        s.pid = val & 0xff;
        mmu::guest_pid_switch(k, vi);
    }
}

/// Writes a shadow SPR.
fn write_spr(k: &mut Kernel, vi: usize, n: u32, val: u32) -> SprWrite {
    if !kernel_emulates(n) {
        return SprWrite::Unknown;
    }
    update_dec(k, vi);
    let v = &mut k.vm.vcpus[vi];
    let s = &mut v.s;
    match n {
        SRR0 => s.srr0 = val,
        SRR1 => s.srr1 = val,
        CSRR0 => s.csrr0 = val,
        CSRR1 => s.csrr1 = val,
        MCSRR0 => s.mcsrr0 = val,
        MCSRR1 => s.mcsrr1 = val,
        MCSR => s.mcsr &= !val,
        SPRG0..=SPRG7 => write_sprg(s, n, val),
        ESR => s.esr = val,
        DEAR => s.dear = val,
        IVPR => s.ivpr = val & ppc440::ivor::PREFIX.mask(),
        IVOR0..=IVOR15 => s.ivor[(n - IVOR0) as usize] = val & ppc440::ivor::OFFSET.mask(),
        PID => write_pid(k, vi, val),
        MMUCR => s.mmucr = val,
        DEC => {
            s.dec = val;
            v.dec_deadline = if val == 0 {
                0
            } else {
                spr::timebase() + val as u64
            };
        }
        DECAR => s.decar = val,
        TCR => s.tcr = val,
        TSR => s.tsr &= !val,
        DBCR0 => {
            if val & dbcr0::RST.mask() != 0 {
                return SprWrite::Reset;
            }
            s.dbcr0 = val;
            let events = if val & dbcr0::ICMP != 0 {
                val & DBCR0_EVENTS
            } else {
                0
            };
            spr::write::<{ DBCR0 }>(events);
        }
        IAC1..=IAC4 => s.iac[(n - IAC1) as usize] = val,
        DAC1 | DAC2 => s.dac[(n - DAC1) as usize] = val,
        DVC1 | DVC2 => s.dvc[(n - DVC1) as usize] = val,
        DBCR1 => s.dbcr1 = val,
        DBCR2 => s.dbcr2 = val,
        DBSR => s.dbsr &= !val,
        CCR0 => s.ccr0 = val,
        CCR1 => s.ccr1 = val,
        // Timebase writes: the guest reads the timebase without trapping, so the real
        // one is written and the difference kept as this vCPU's offset, which is taken
        // out again whenever anything else runs (see `virt::on_switch`).
        TBL_W | TBU_W => {
            let before = spr::timebase();
            let after = if n == TBL_W {
                (before & !0xffff_ffff) | val as u64
            } else {
                ((val as u64) << 32) | (before & 0xffff_ffff)
            };
            set_timebase(after);
            v.tb_offset = v.tb_offset.wrapping_add(after.wrapping_sub(before) as i64);
            // The exit in progress started on the old time base: move its start along,
            // so its cost leaves the jump out.
            v.exit_tb = v.exit_tb.wrapping_add(after.wrapping_sub(before) as u32);
            // Deadlines of the virtual decrementer are in guest time: shift them along.
            if v.dec_deadline != 0 {
                v.dec_deadline = v.dec_deadline.wrapping_add(after.wrapping_sub(before));
            }
            k.vm.tb_vcpu = vi as u8;
        }
        _ => return SprWrite::Unknown,
    }
    SprWrite::Done
}

/// Gives vCPU `vi` the real FPU, saving the previous owner's registers.
fn take_fpu(k: &mut Kernel, vi: usize) {
    if k.vm.fp_owner == vi as u8 {
        return;
    }
    if k.vm.fp_owner != NO_VCPU {
        let prev = k.vm.fp_owner as usize;
        crate::arch::fpu::save(&mut k.vm.vcpus[prev].fpr);
        // The previous owner's frame must trap on its next FP instruction.
        let t = k.vm.vcpus[prev].thread;
        crate::api::frame_of(k, t).regs.msr &= !msr::FP;
    }
    crate::arch::fpu::load(&k.vm.vcpus[vi].fpr);
    k.vm.fp_owner = vi as u8;
}
