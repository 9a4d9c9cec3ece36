//! Split translation spaces (docs/adr/0012-split-translation-spaces.md): while a guest
//! runs with `MSR[IS]` != `MSR[DS]`, an instruction whose data access falls in the page it
//! is fetched from, under another translation, cannot be served by the hardware TLB
//! (one hardware translation space and PID for fetches and data alike; see
//! `kestrel_vtlb::split_fill`). The kernel performs that one access in software, with
//! the checks the hardware would make, and steps the guest past the instruction.
//!
//! Emulated: every integer and floating-point load and store of the decoder's table
//! (byte, half, word, double, algebraic, byte-reversed, with update, indexed,
//! `lmw`/`stmw`), `dcbz`, and the cache block operations that translate like a load
//! (`dcbst`, `dcbf`, `icbi`: translated and checked, otherwise no-ops, since the
//! kernel's own accesses are coherent). Each piece of the access is translated by the
//! guest TLB (first match in `MSR[DS]`, the guest's permissions in its current mode) and
//! the VM space (the VMM's rights); a guest miss or protection fault is reflected with
//! DEAR and ESR[ST] as the hardware would, device memory goes to the VMM as an MMIO
//! fault and unmapped RAM to the pager as usual, and a store writes nothing unless every
//! piece may be written. An invalid load/store form gets the illegal-instruction program
//! interrupt QEMU's 440 raises for it. Anything else (`lwarx`/`stwcx.`, whose reservation
//! the kernel cannot hand to the hardware, and the string instructions) stops the vCPU
//! with one line naming the instruction: never a silent retry.

use super::{mmu, Kernel};
use crate::api::thread;
use crate::arch::{self, esr, TrapFrame};
use kestrel_vtlb::{Access, FillResult};
use ppc440::decode::{self, opcd, xo31, AccessKind, DataReg, Insn, LoadStore, DCACHE_LINE};

/// Longest access: `lmw`/`stmw` of 32 registers.
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
}

/// Emulates the data access of the instruction at the frame's pc of the running vCPU
/// `vi` (thread `cur`), whose data page collides with its fetch page: reflects the
/// architected exception, forwards MMIO or a page fault, or completes the instruction
/// and advances the pc. Returns the scheduling hint of an IPC it started.
pub fn emulate(k: &mut Kernel, cur: usize, vi: usize, f: &mut TrapFrame) -> Option<usize> {
    let pc = f.regs.ip;
    let Some(word) = mmu::guest_read_u32(k, vi, pc, true) else {
        return unable(k, cur, pc, 0, "cannot read the instruction");
    };
    let gpr = &f.regs.gpr;
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
        i @ Insn::Icbi { .. } => (Op::Touch, i.effective_address(gpr).unwrap_or(0), 1, Access::Read),
        Insn::Other(w)
            if decode::OPCD.get(w) == opcd::X
                && matches!(decode::XO.get(w), xo31::DCBST | xo31::DCBF) =>
        {
            let ra = decode::RA.get(w) as usize;
            let base = if ra == 0 { 0 } else { gpr[ra] };
            let ea = base.wrapping_add(gpr[decode::RB.get(w) as usize]);
            (Op::Touch, ea, 1, Access::Read)
        }
        Insn::Invalid(_) => {
            // An invalid load/store form (update with RA = 0 or RA = RT, `lmw` loading
            // RA): QEMU's 440 raises an illegal-instruction program interrupt for these
            // before any access, so the guest gets the same.
            k.vm.vcpus[vi].s.esr = esr::PIL;
            super::inject(k, vi, f, crate::arch::vector::PROGRAM, pc);
            return None;
        }
        _ => return unable(k, cur, pc, word, "not a load, store or cache operation it emulates"),
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

/// Stops vCPU thread `cur`: the kernel cannot complete the instruction `word` at `pc`.
fn unable(k: &mut Kernel, cur: usize, pc: u32, word: u32, why: &str) -> Option<usize> {
    thread::stop(
        k,
        cur,
        format_args!(
            "guest MSR[IS] != MSR[DS] and the data access of insn {word:#010x} at pc {pc:#010x} \
             is in its own code page under another translation; cannot emulate it: {why}"
        ),
    );
    None
}
