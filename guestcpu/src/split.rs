//! The access plan of a data access the kernel performs in software while the guest runs
//! with split translation spaces (docs/adr/0012-split-translation-spaces.md): which access
//! an instruction makes, at which address and of how many bytes ([`plan`]), and how the
//! bytes move between memory and the registers ([`load`], [`store`]). The kernel translates
//! the pieces, checks them and touches memory; everything it decides before and after is
//! here.
//!
//! Planned: every integer and floating-point load and store of the decoder's table, the
//! string instructions (`lswi`, `lswx`, `stswi`, `stswx`), `dcbz`, the cache block
//! operations that translate like a load (`dcbst`, `dcbf`, `icbi`), `lwarx` (the
//! kernel-held reservation) and a `stwcx.` that reached the kernel through its data access.
//! Invalid forms get the illegal-instruction program interrupt QEMU's 440 raises for them.

use crate::ppc440::decode::{self, opcd, xo31, AccessKind, DataReg, Insn, LoadStore, DCACHE_LINE};
use crate::tlb::cr0_eq;
use kestrel_abi::FrameRegs;
use kestrel_vtlb::Access;

/// XER[57:63] (the low seven bits): the byte count of `lswx`/`stswx`.
pub const STRING_COUNT: u32 = 0x7F;
/// Longest access: `lmw`/`stmw` of 32 registers, `lswx`/`stswx` of 127 bytes.
pub const MAX_BYTES: usize = 128;

/// What the instruction does with the bytes at its effective address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
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

/// One access to perform: `len` bytes at `ea`, translated for `access`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub op: Op,
    pub ea: u32,
    pub len: u32,
    pub access: Access,
}

/// What the kernel does with the instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Translate and perform the access.
    Access(Plan),
    /// An alignment interrupt with DEAR = `ea` (a `lwarx` not word-aligned).
    Alignment { ea: u32 },
    /// An illegal-instruction program interrupt (ESR[PIL]).
    Illegal,
    /// Completed without an access (the registers are updated): continue at pc + 4.
    Done,
    /// The kernel cannot emulate it: it says why and the VMM stops the VM.
    Unable(&'static str),
}

/// QEMU's rule for string loads (`lsw_reg_in_range`): whether register `r` is among the
/// `n` registers from `start` on, wrapping from r31 to r0.
pub fn in_string_range(start: usize, n: usize, r: usize) -> bool {
    if start + n <= 32 {
        r >= start && r < start + n
    } else {
        r >= start || r < start + n - 32
    }
}

/// The plan of instruction `word` with the guest's registers `regs` (updated for the
/// instructions that complete without an access: an unaligned `stwcx.` fails and sets CR0,
/// a zero-length string does nothing). `debug_events`: the guest uses the hardware debug
/// events itself, which the kernel-held reservation needs.
pub fn plan(word: u32, regs: &mut FrameRegs, debug_events: bool) -> Step {
    let gpr = &regs.gpr;
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
                return Step::Alignment { ea };
            }
            if debug_events {
                return Step::Unable("lwarx while the guest's own debug events are on");
            }
            (Op::Reserve { rt }, ea, 4, Access::Read)
        }
        Insn::Other(_) if is_x && xo == xo31::STWCX => {
            let ea = x_ea();
            if ea & 3 != 0 {
                // No reservation is ever for an unaligned address: the store fails.
                regs.cr = cr0_eq(regs.cr, regs.xer, false);
                return Step::Done;
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
                (x_ea(), regs.xer & STRING_COUNT)
            };
            if n == 0 {
                return Step::Done;
            }
            let load = matches!(xo, xo31::LSWI | xo31::LSWX);
            let count = n.div_ceil(4) as usize;
            let rb = decode::RB.get(word) as usize;
            if load
                && ((ra != 0 || immediate) && in_string_range(rt, count, ra)
                    || !immediate && in_string_range(rt, count, rb))
            {
                // The invalid forms QEMU's 440 rejects with an illegal-instruction interrupt.
                return Step::Illegal;
            }
            if load {
                (Op::StringLoad { rt }, ea, n, Access::Read)
            } else {
                (Op::StringStore { rs: rt }, ea, n, Access::Write)
            }
        }
        // An invalid load/store form (update with RA = 0 or RA = RT, `lmw` loading RA):
        // QEMU's 440 raises an illegal-instruction program interrupt for these before any
        // access, so the guest gets the same.
        Insn::Invalid(_) => return Step::Illegal,
        _ => return Step::Unable("not a load, store or cache operation"),
    };
    Step::Access(Plan {
        op,
        ea,
        len,
        access,
    })
}

/// The big-endian number in `bytes` (at most 8).
#[inline]
pub fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |v, &b| (v << 8) | b as u64)
}

/// Stores the low `out.len()` bytes of `v` big-endian.
#[inline]
pub fn put_be(out: &mut [u8], v: u64) {
    let n = out.len();
    for (i, b) in out.iter_mut().enumerate() {
        *b = (v >> (8 * (n - 1 - i))) as u8;
    }
}

/// The bytes a store-like plan writes (`bytes.len()` = the plan's length): from the
/// registers (`fpr`: the guest's FP registers, current) or zeros. Loads and `Touch` leave
/// `bytes` alone.
pub fn store(op: Op, regs: &FrameRegs, fpr: &[u64; 33], bytes: &mut [u8]) {
    match op {
        Op::Zero => bytes.fill(0),
        Op::Conditional { rs } => put_be(bytes, regs.gpr[rs] as u64),
        Op::StringStore { rs } => {
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                let v = regs.gpr[(rs + i) % 32];
                for (j, b) in chunk.iter_mut().enumerate() {
                    *b = (v >> (24 - 8 * j)) as u8;
                }
            }
        }
        Op::Transfer(ls) if ls.kind() == AccessKind::Store => {
            let width = ls.width().bytes() as usize;
            match ls.data_reg() {
                DataReg::Fpr(fr) => put_be(&mut bytes[..width], ls.fp_store_data(fpr[fr.index()])),
                DataReg::Gpr(rs) => {
                    let first = rs.index();
                    for (i, chunk) in bytes.chunks_mut(width).enumerate() {
                        put_be(chunk, ls.store_data(regs.gpr[first + i]) as u64);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Completes a load-like plan with the `bytes` read: the target registers (`fpr`: the
/// guest's FP registers). Stores and `Touch` change nothing here.
pub fn load(op: Op, bytes: &[u8], regs: &mut FrameRegs, fpr: &mut [u64; 33]) {
    match op {
        Op::Reserve { rt } => regs.gpr[rt] = be(bytes) as u32,
        Op::StringLoad { rt } => {
            // Four bytes per register, big-endian; the last one zero-filled on the right.
            for (i, chunk) in bytes.chunks(4).enumerate() {
                let v = chunk
                    .iter()
                    .enumerate()
                    .fold(0u32, |v, (j, &b)| v | (b as u32) << (24 - 8 * j));
                regs.gpr[(rt + i) % 32] = v;
            }
        }
        Op::Transfer(ls) if ls.kind() == AccessKind::Load => {
            let width = ls.width().bytes() as usize;
            match ls.data_reg() {
                DataReg::Fpr(fr) => fpr[fr.index()] = ls.fp_load_result(be(&bytes[..width])),
                DataReg::Gpr(rt) => {
                    let first = rt.index();
                    for (i, chunk) in bytes.chunks(width).enumerate() {
                        regs.gpr[first + i] = ls.load_result(be(chunk) as u32);
                    }
                }
            }
        }
        _ => {}
    }
}

/// After a completed access of plan `p`: the base register of an update form gets the
/// effective address.
#[inline]
pub fn finish(p: &Plan, regs: &mut FrameRegs) {
    if let Op::Transfer(ls) = p.op {
        if ls.update() {
            regs.gpr[ls.ra().index()] = p.ea;
        }
    }
}

/// Whether the plan reads memory (else it writes, or only translates: `Touch`).
#[inline]
pub const fn reads(op: Op) -> bool {
    match op {
        Op::Reserve { .. } | Op::StringLoad { .. } => true,
        Op::Transfer(ls) => matches!(ls.kind(), AccessKind::Load),
        _ => false,
    }
}

/// Whether the plan writes memory.
#[inline]
pub const fn writes(op: Op) -> bool {
    match op {
        Op::Zero | Op::Conditional { .. } | Op::StringStore { .. } => true,
        Op::Transfer(ls) => matches!(ls.kind(), AccessKind::Store),
        _ => false,
    }
}
