//! Split translation spaces (docs/adr/0012-split-translation-spaces.md): while a guest
//! runs with `MSR[IS]` != `MSR[DS]`, an instruction whose data access falls in the page it
//! is fetched from, under another translation, cannot be served by the hardware TLB
//! (one hardware translation space and PID for fetches and data alike; see
//! `kestrel_vtlb::split_fill`). The kernel performs that one access in software, with
//! the checks the hardware would make, and steps the guest past the instruction.
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

use super::{mmu, Kernel};
use crate::api::thread;
use crate::arch::{self, esr, TrapFrame};
use kestrel_abi::VirtFault;
use kestrel_vtlb::{Access, FillResult};
use ppc440::decode::{self, opcd, xo31, AccessKind, DataReg, Insn, LoadStore, DCACHE_LINE};

/// XER[57:63] (the low seven bits): the byte count of `lswx`/`stswx`.
const STRING_COUNT: u32 = 0x7F;
/// Longest access: `lmw`/`stmw` of 32 registers, `lswx`/`stswx` of 127 bytes.
const MAX_BYTES: usize = 128;
/// Pieces an access can span: guest pages are at least 1 KiB, and no access is longer
/// than [`MAX_BYTES`], so two; one more for safety of the bound below.
const MAX_PIECES: usize = 3;

/// What the instruction does with the bytes at its effective address.
enum Op {
    /// A load or store of the decoder's table.
    Transfer(LoadStore),
    /// `dcbz`: [`DCACHE_LINE`] zero bytes.
    Zero,
    /// `dcbst`, `dcbf`, `icbi`: translated like a one-byte load, nothing transferred.
    Touch,
    /// `lwarx RT`: a word load that takes the kernel-held reservation.
    Reserve { rt: usize },
    /// `stwcx. RS` that reached the kernel through its data access: the hardware held the
    /// reservation (QEMU's `stwcx.` touches memory only then), so it stores.
    Conditional { rs: usize },
    /// `lswi`/`lswx`: bytes into registers from `rt` on.
    StringLoad { rt: usize },
    /// `stswi`/`stswx`: bytes from registers from `rs` on.
    StringStore { rs: usize },
}

/// QEMU's rule for string loads (`lsw_reg_in_range`): whether register `r` is among the
/// `n` registers from `start` on, wrapping from r31 to r0.
fn in_string_range(start: usize, n: usize, r: usize) -> bool {
    if start + n <= 32 {
        r >= start && r < start + n
    } else {
        r >= start || r < start + n - 32
    }
}

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
    let gpr = &f.regs.gpr;
    // (RA|0) + (RB) of the X-form operations the decoder leaves as `Other`.
    let x_ea = || {
        let ra = decode::RA.get(word) as usize;
        let base = if ra == 0 { 0 } else { gpr[ra] };
        base.wrapping_add(gpr[decode::RB.get(word) as usize])
    };
    let rt = decode::RT.get(word) as usize;
    let xo = decode::XO.get(word);
    let is_x = decode::OPCD.get(word) == opcd::X;
    let (op, ea, len, access) = match decode::decode(word) {
        Insn::LoadStore(ls) => {
            let access = match ls.kind() {
                AccessKind::Load => Access::Read,
                AccessKind::Store => Access::Write,
            };
            (
                Op::Transfer(ls),
                ls.effective_address(gpr),
                ls.access_len(),
                access,
            )
        }
        i @ Insn::Dcbz { .. } => {
            let ea = i.effective_address(gpr).unwrap_or(0) & !(DCACHE_LINE - 1);
            (Op::Zero, ea, DCACHE_LINE, Access::Write)
        }
        i @ Insn::Icbi { .. } => (
            Op::Touch,
            i.effective_address(gpr).unwrap_or(0),
            1,
            Access::Read,
        ),
        Insn::Other(_) if is_x && matches!(xo, xo31::DCBST | xo31::DCBF) => {
            (Op::Touch, x_ea(), 1, Access::Read)
        }
        Insn::Other(_) if is_x && xo == xo31::LWARX => {
            let ea = x_ea();
            if ea & 3 != 0 {
                // A word-aligned address only (QEMU: an alignment interrupt, DEAR set).
                k.vm.vcpus[vi].s.dear = ea;
                super::inject(k, vi, f, crate::arch::vector::ALIGNMENT, pc);
                return None;
            }
            if super::guest_debug_events(&k.vm.vcpus[vi].s) {
                return unable(
                    k,
                    cur,
                    pc,
                    word,
                    "lwarx while the guest's own debug events are on",
                );
            }
            (Op::Reserve { rt }, ea, 4, Access::Read)
        }
        Insn::Other(_) if is_x && xo == xo31::STWCX => {
            let ea = x_ea();
            if ea & 3 != 0 {
                // No reservation is ever for an unaligned address: the store fails.
                f.regs.cr = super::emulate::tlbsx_cr(f.regs.cr, f.regs.xer, false);
                f.regs.ip = pc.wrapping_add(4);
                return None;
            }
            (Op::Conditional { rs: rt }, ea, 4, Access::Write)
        }
        Insn::Other(_)
            if is_x && matches!(xo, xo31::LSWI | xo31::LSWX | xo31::STSWI | xo31::STSWX) =>
        {
            let ra = decode::RA.get(word) as usize;
            let immediate = matches!(xo, xo31::LSWI | xo31::STSWI);
            let (ea, n) = if immediate {
                let nb = decode::RB.get(word);
                (
                    if ra == 0 { 0 } else { gpr[ra] },
                    if nb == 0 { 32 } else { nb },
                )
            } else {
                (x_ea(), f.regs.xer & STRING_COUNT)
            };
            if n == 0 {
                f.regs.ip = pc.wrapping_add(4);
                return None;
            }
            let load = matches!(xo, xo31::LSWI | xo31::LSWX);
            let regs = n.div_ceil(4) as usize;
            let rb = decode::RB.get(word) as usize;
            if load
                && ((ra != 0 || immediate) && in_string_range(rt, regs, ra)
                    || !immediate && in_string_range(rt, regs, rb))
            {
                // The invalid forms QEMU's 440 rejects with an illegal-instruction interrupt.
                k.vm.vcpus[vi].s.esr = esr::PIL;
                super::inject(k, vi, f, crate::arch::vector::PROGRAM, pc);
                return None;
            }
            if load {
                (Op::StringLoad { rt }, ea, n, Access::Read)
            } else {
                (Op::StringStore { rs: rt }, ea, n, Access::Write)
            }
        }
        Insn::Invalid(_) => {
            // An invalid load/store form (update with RA = 0 or RA = RT, `lmw` loading
            // RA): QEMU's 440 raises an illegal-instruction program interrupt for these
            // before any access, so the guest gets the same.
            k.vm.vcpus[vi].s.esr = esr::PIL;
            super::inject(k, vi, f, crate::arch::vector::PROGRAM, pc);
            return None;
        }
        _ => return unable(k, cur, pc, word, "not a load, store or cache operation"),
    };

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
            FillResult::PhysMiss { gpa } => return mmu::phys_miss(k, cur, vi, f, gpa, access),
            other => {
                let st = if access == Access::Write { esr::ST } else { 0 };
                mmu::guest_fault(k, vi, f, a, access, st, other);
                return None;
            }
        }
    }
    let pieces = &pieces[..count];
    let ram_end = k.mem.ram_end;
    let mut buf = [0u8; MAX_BYTES];
    let bytes = &mut buf[..len as usize];

    match op {
        Op::Touch => {}
        Op::Zero => {
            if !write(pieces, bytes, ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
        }
        Op::Reserve { rt } => {
            if !read(pieces, bytes, ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
            f.regs.gpr[rt] = be(bytes) as u32;
            f.regs.ip = pc.wrapping_add(4);
            start_reservation(k, vi, f, ea);
            return next_for_reservation(k, cur, vi, f);
        }
        Op::Conditional { rs } => {
            put_be(bytes, f.regs.gpr[rs] as u64);
            if !write(pieces, bytes, ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
            f.regs.cr = super::emulate::tlbsx_cr(f.regs.cr, f.regs.xer, true);
            end_reservation(k, vi, f);
        }
        Op::StringLoad { rt } => {
            if !read(pieces, bytes, ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
            // Four bytes per register, big-endian; the last one zero-filled on the right.
            for (i, chunk) in bytes.chunks(4).enumerate() {
                let v = chunk
                    .iter()
                    .enumerate()
                    .fold(0u32, |v, (j, &b)| v | (b as u32) << (24 - 8 * j));
                f.regs.gpr[(rt + i) % 32] = v;
            }
        }
        Op::StringStore { rs } => {
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                let v = f.regs.gpr[(rs + i) % 32];
                for (j, b) in chunk.iter_mut().enumerate() {
                    *b = (v >> (24 - 8 * j)) as u8;
                }
            }
            if !write(pieces, bytes, ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
        }
        Op::Transfer(ls) => {
            let fp_owner = k.vm.fp_owner == vi as u8;
            if ls.is_fp() && fp_owner {
                arch::fpu::save(&mut k.vm.vcpus[vi].fpr);
            }
            let width = ls.width().bytes() as usize;
            match ls.kind() {
                AccessKind::Load => {
                    if !read(pieces, bytes, ram_end) {
                        return unable(k, cur, pc, word, "its data is not in RAM");
                    }
                    match ls.data_reg() {
                        DataReg::Fpr(fr) => {
                            let raw = be(&bytes[..width]);
                            k.vm.vcpus[vi].fpr[fr.index()] = ls.fp_load_result(raw);
                        }
                        DataReg::Gpr(rt) => {
                            let first = rt.index();
                            for (i, chunk) in bytes.chunks(width).enumerate() {
                                f.regs.gpr[first + i] = ls.load_result(be(chunk) as u32);
                            }
                        }
                    }
                }
                AccessKind::Store => {
                    match ls.data_reg() {
                        DataReg::Fpr(fr) => {
                            let v = ls.fp_store_data(k.vm.vcpus[vi].fpr[fr.index()]);
                            put_be(&mut bytes[..width], v);
                        }
                        DataReg::Gpr(rs) => {
                            let first = rs.index();
                            for (i, chunk) in bytes.chunks_mut(width).enumerate() {
                                let v = ls.store_data(f.regs.gpr[first + i]);
                                put_be(chunk, v as u64);
                            }
                        }
                    }
                    if !write(pieces, bytes, ram_end) {
                        return unable(k, cur, pc, word, "its data is not in RAM");
                    }
                }
            }
            if ls.is_fp() && fp_owner && ls.kind() == AccessKind::Load {
                arch::fpu::load(&k.vm.vcpus[vi].fpr);
            }
            if ls.update() {
                f.regs.gpr[ls.ra().index()] = ea;
            }
        }
    }
    f.regs.ip = pc.wrapping_add(4);
    None
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
    arch::spr::write::<{ ppc440::spr::DBCR0 }>(super::emulate::DBCR0_EVENTS);
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
    arch::spr::write::<{ ppc440::spr::DBCR0 }>(super::guest_dbcr0_events(&v.s));
    super::sync_frame_msr(k, vi, f);
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
        f.regs.cr = super::emulate::tlbsx_cr(f.regs.cr, f.regs.xer, false);
        f.regs.ip = pc.wrapping_add(4);
        return None;
    }
    end_reservation(k, vi, f);
    match mmu::data_fill(k, vi, ea, Access::Write) {
        FillResult::Hit { hw, .. } => {
            let host = hw.rpn_base.wrapping_add(ea.wrapping_sub(hw.epn));
            let mut bytes = [0u8; 4];
            put_be(&mut bytes, f.regs.gpr[decode::RT.get(word) as usize] as u64);
            if !write(&[(host, 4)], &bytes, k.mem.ram_end) {
                return unable(k, cur, pc, word, "its data is not in RAM");
            }
            f.regs.cr = super::emulate::tlbsx_cr(f.regs.cr, f.regs.xer, true);
            f.regs.ip = pc.wrapping_add(4);
            None
        }
        // The reservation is gone with the fault; the guest's retry of the `stwcx.` fails.
        FillResult::PhysMiss { gpa } => mmu::phys_miss(k, cur, vi, f, gpa, Access::Write),
        other => {
            mmu::guest_fault(k, vi, f, ea, Access::Write, esr::ST, other);
            None
        }
    }
}

/// The big-endian number in `bytes` (at most 8).
fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |v, &b| (v << 8) | b as u64)
}

/// Stores the low `out.len()` bytes of `v` big-endian.
fn put_be(out: &mut [u8], v: u64) {
    let n = out.len();
    for (i, b) in out.iter_mut().enumerate() {
        *b = (v >> (8 * (n - 1 - i))) as u8;
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
    super::virt_fault(k, cur, vi, VirtFault::Halt, word, 0)
}
