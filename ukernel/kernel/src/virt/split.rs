//! Split translation spaces (docs/adr/0012-split-translation-spaces.md): while a guest
//! runs with `MSR[IS]` != `MSR[DS]`, an instruction whose data access falls in the page it
//! is fetched from, under another translation, cannot be served by the hardware TLB
//! (one hardware translation space and PID for fetches and data alike; see
//! `kestrel_vtlb::split_fill`). The kernel performs that one access in software, with
//! the checks the hardware would make, and steps the guest past the instruction. What
//! the access is (address, length, direction) and how its bytes move between memory and
//! registers is `kestrel_guestcpu::split`'s plan; this file translates, checks and touches
//! memory.
//!
//! Emulated: every integer and floating-point load and store of the decoder's table
//! (byte, half, word, double, algebraic, byte-reversed, with update, indexed,
//! `lmw`/`stmw`), the string instructions (`lswi`, `lswx`, `stswi`, `stswx`), `dcbz`, and
//! the cache block operations that translate like a load (`dcbst`, `dcbf`, `icbi`:
//! translated and checked, otherwise no-ops, since the kernel's own accesses are
//! coherent). Each piece of the access is translated by the guest TLB (first match in
//! `MSR[DS]`, the guest's permissions in its current mode) and the VM space (the VMM's
//! rights); a guest miss or protection fault is reflected with DEAR and ESR[ST] as the
//! hardware would, device memory goes to the VMM as an MMIO fault and unmapped RAM to the
//! pager as usual, and a store writes nothing unless every piece may be written. Invalid
//! forms get the illegal-instruction program interrupt QEMU's 440 raises for them.
//!
//! `lwarx`/`stwcx.`: the reservation lives in the hardware, and QEMU drops it on every
//! interrupt and every `rfi`, while its `stwcx.` without a matching reservation fails
//! without accessing memory. So an emulated `lwarx` takes a reservation the kernel holds
//! and single-steps the guest until its `stwcx.` ([`start_reservation`]); a `stwcx.` that
//! traps on its data access had the hardware's reservation and stores. Anything else that
//! could fault on data (nothing on the 440 as QEMU models it), and a `lwarx` while the
//! guest uses the debug events itself, is reported in one kernel line naming the
//! instruction and the cause, and the VMM gets a `Halt` fault, on which it stops the VM:
//! never a silent retry.

use super::fault::{guest_fault, phys_miss, virt_fault};
use super::inject::inject;
use super::mmu;
use super::vcpu::{guest_debug_events, sync_frame_msr};
use crate::api::{thread, Kernel};
use crate::arch::{self, esr, TrapFrame};
use kestrel_abi::VirtFault;
use kestrel_guestcpu::split::{self as plan, Op, Step, MAX_BYTES};
use kestrel_guestcpu::spr::{dbcr0_events, DBCR0_EVENTS};
use kestrel_guestcpu::tlb::cr0_eq;
use kestrel_vtlb::{Access, FillResult};
use ppc440::decode::{self, opcd, xo31};

/// Pieces an access can span: guest pages are at least 1 KiB, and no access is longer
/// than [`MAX_BYTES`], so two; one more for safety of the bound below.
const MAX_PIECES: usize = 3;

/// Emulates the data access of the instruction at the frame's pc of the running vCPU
/// `vi` (thread `cur`), whose data page collides with its fetch page: reflects the
/// architected exception, forwards MMIO or a page fault, or completes the instruction
/// and advances the pc. Returns the scheduling hint of an IPC it started.
#[cold]
#[inline(never)]
pub fn emulate(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) -> Option<usize> {
    let pc = f.regs.ip;
    let Some(word) = mmu::guest_read_u32(k, vi, pc, true) else {
        return unable(k, cur, pc, 0, "cannot read the instruction");
    };
    let debug = guest_debug_events(&k.vm.vcpus[vi].s);
    let p = match plan::plan(word, &mut f.regs, debug) {
        Step::Access(p) => p,
        Step::Alignment { ea } => {
            k.vm.vcpus[vi].s.dear = ea;
            inject(k, vi, f, crate::arch::vector::ALIGNMENT, pc);
            return None;
        }
        Step::Illegal => {
            k.vm.vcpus[vi].s.esr = esr::PIL;
            inject(k, vi, f, crate::arch::vector::PROGRAM, pc);
            return None;
        }
        Step::Done => {
            f.regs.ip = pc.wrapping_add(4);
            return None;
        }
        Step::Unable(why) => return unable(k, cur, pc, word, why),
    };
    let (ea, len, access) = (p.ea, p.len, p.access);

    // Translate every piece before touching memory.
    let mut pieces = [(0u32, 0u32); MAX_PIECES];
    let mut count = 0;
    let mut off = 0u32;
    while off < len {
        let a = ea.wrapping_add(off);
        match mmu::data_fill(k, vi, a, access) {
            FillResult::Hit { hw, .. } => {
                let into = a.wrapping_sub(hw.epn);
                let n = (hw.bytes() - into).min(len - off);
                if count == MAX_PIECES {
                    return unable(k, cur, pc, word, "the access spans too many pages");
                }
                pieces[count] = (hw.rpn_base.wrapping_add(into), n);
                count += 1;
                off += n;
            }
            FillResult::PhysMiss { gpa } => return phys_miss(k, cur, vi, f, gpa, access),
            other => {
                let st = if access == Access::Write { esr::ST } else { 0 };
                guest_fault(k, vi, f, a, access, st, other);
                return None;
            }
        }
    }
    let pieces = &pieces[..count];
    let ram_end = k.mem.ram_end;
    let mut buf = [0u8; MAX_BYTES];
    let bytes = &mut buf[..len as usize];

    // FP registers live in the FPU while the guest owns it.
    let fp = matches!(p.op, Op::Transfer(ls) if ls.is_fp()) && k.vm.fp_owner == vi as u8;
    if fp {
        arch::fpu::save(&mut k.vm.vcpus[vi].fpr);
    }
    if plan::reads(p.op) {
        if !read(pieces, bytes, ram_end) {
            return unable(k, cur, pc, word, "its data is not in RAM");
        }
        plan::load(p.op, bytes, &mut f.regs, &mut k.vm.vcpus[vi].fpr);
        if fp {
            arch::fpu::load(&k.vm.vcpus[vi].fpr);
        }
    } else if plan::writes(p.op) {
        plan::store(p.op, &f.regs, &k.vm.vcpus[vi].fpr, bytes);
        if !write(pieces, bytes, ram_end) {
            return unable(k, cur, pc, word, "its data is not in RAM");
        }
    }
    plan::finish(&p, &mut f.regs);
    f.regs.ip = pc.wrapping_add(4);
    match p.op {
        Op::Reserve { .. } => {
            start_reservation(k, vi, f, ea);
            next_for_reservation(k, cur, vi, f)
        }
        Op::Conditional { .. } => {
            f.regs.cr = cr0_eq(f.regs.cr, f.regs.xer, true);
            end_reservation(k, vi, f);
            None
        }
        _ => None,
    }
}

/// Guest instructions the kernel single-steps after an emulated `lwarx`, looking for the
/// `stwcx.` that completes it (real sequences are a few instructions long).
const STEP_BUDGET: u8 = 16;

/// An emulated `lwarx` at `ea` took the reservation: the kernel holds it
/// (`Vcpu::resv`) and single-steps the guest (DBCR0[IDM, ICMP] with MSR[DE]) so that it
/// sees the `stwcx.` before the hardware runs it. The hardware's own reservation cannot
/// be used: QEMU drops it on every interrupt and `rfi`, and a `stwcx.` without it fails
/// without touching memory, so it would never trap.
fn start_reservation(k: &mut Kernel, vi: usize, f: &mut TrapFrame, ea: u32) {
    let v = &mut k.vm.vcpus[vi];
    v.resv = ea | 1;
    v.step = STEP_BUDGET;
    arch::spr::write::<{ ppc440::spr::DBCR0 }>(DBCR0_EVENTS);
    f.regs.msr |= crate::arch::msr::DE;
}

/// Drops the kernel-held reservation of the running vCPU `vi` and stops stepping.
fn end_reservation(k: &mut Kernel, vi: usize, f: &mut TrapFrame) {
    let v = &mut k.vm.vcpus[vi];
    if v.step == 0 && v.resv == 0 {
        return;
    }
    v.step = 0;
    v.resv = 0;
    arch::spr::write::<{ ppc440::spr::DBCR0 }>(dbcr0_events(&v.s));
    sync_frame_msr(k, vi, f);
}

/// A single-step debug event of the running vCPU `vi` while the kernel holds a
/// reservation (the caller cleared DBSR): looks at the next instruction.
/// Cold and never inlined, so that it costs the hot trap dispatcher nothing.
#[cold]
#[inline(never)]
pub fn step(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) -> Option<usize> {
    next_for_reservation(k, cur, vi, f)
}

/// The next instruction of vCPU `vi` while the kernel holds a reservation: a `stwcx.` is
/// performed here (it stores only if the reservation is for its address) and ends the
/// stepping; anything else runs, one step of the budget; an exhausted budget drops the
/// reservation (so a `stwcx.` after it fails in hardware, as after an interrupt).
fn next_for_reservation(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) -> Option<usize> {
    let pc = f.regs.ip;
    let word = mmu::guest_read_u32(k, vi, pc, true).unwrap_or(0);
    if decode::OPCD.get(word) != opcd::X || decode::XO.get(word) != xo31::STWCX {
        let v = &mut k.vm.vcpus[vi];
        v.step = v.step.saturating_sub(1);
        if v.step == 0 {
            end_reservation(k, vi, f);
        }
        return None;
    }
    let ra = decode::RA.get(word) as usize;
    let base = if ra == 0 { 0 } else { f.regs.gpr[ra] };
    let ea = base.wrapping_add(f.regs.gpr[decode::RB.get(word) as usize]);
    if k.vm.vcpus[vi].resv != ea | 1 {
        // No reservation for this address: fails without touching memory.
        end_reservation(k, vi, f);
        f.regs.cr = cr0_eq(f.regs.cr, f.regs.xer, false);
        f.regs.ip = pc.wrapping_add(4);
        return None;
    }
    end_reservation(k, vi, f);
    match mmu::data_fill(k, vi, ea, Access::Write) {
        FillResult::Hit { hw, .. } => {
            let host = hw.rpn_base.wrapping_add(ea.wrapping_sub(hw.epn));
            let mut bytes = [0u8; 4];
            plan::put_be(&mut bytes, f.regs.gpr[decode::RT.get(word) as usize] as u64);
            if !write(&[(host, 4)], &bytes, k.mem.ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
            f.regs.cr = cr0_eq(f.regs.cr, f.regs.xer, true);
            f.regs.ip = pc.wrapping_add(4);
            None
        }
        // The reservation is gone with the fault; the guest's retry of the `stwcx.` fails.
        FillResult::PhysMiss { gpa } => phys_miss(k, cur, vi, f, gpa, Access::Write),
        other => {
            guest_fault(k, vi, f, ea, Access::Write, esr::ST, other);
            None
        }
    }
}

/// Reads the pieces (host address, length) into `buf` in order.
fn read(pieces: &[(u32, u32)], buf: &mut [u8], ram_end: u32) -> bool {
    let mut at = 0;
    pieces.iter().all(|&(host, n)| {
        let ok = arch::read_phys_bytes(host, &mut buf[at..at + n as usize], ram_end);
        at += n as usize;
        ok
    })
}

/// Writes `buf` to the pieces in order, only if all of them are RAM.
fn write(pieces: &[(u32, u32)], buf: &[u8], ram_end: u32) -> bool {
    if !pieces
        .iter()
        .all(|&(host, n)| host as u64 + n as u64 <= ram_end as u64)
    {
        return false;
    }
    let mut at = 0;
    for &(host, n) in pieces {
        arch::write_phys_bytes(host, &buf[at..at + n as usize], ram_end);
        at += n as usize;
    }
    true
}

/// The kernel cannot complete the instruction `word` at `pc` of vCPU thread `cur`: says
/// why on the console, then hands the VMM a `Halt` fault, which stops the VM (and, with
/// no VMM, the thread stops with virt_fault's own line).
fn unable(k: &mut Kernel, cur: usize, pc: u32, word: u32, why: &str) -> Option<usize> {
    crate::kprintln!(
        "kestrel: thread {:?} ({}) halted: guest MSR[IS] != MSR[DS] and the data access of insn \
         {word:#010x} at pc {pc:#010x} is in its own code page under another translation; \
         cannot emulate it: {why}",
        thread::id_of(k, cur),
        k.threads[cur].name(),
    );
    let vi = k.threads[cur].vcpu as usize;
    virt_fault(k, cur, vi, VirtFault::Halt, word, 0)
}
