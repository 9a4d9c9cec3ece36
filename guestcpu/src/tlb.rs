//! The guest's TLB instructions (`tlbre`, `tlbwe`, `tlbsx[.]`) over the guest-visible TLB
//! of `kestrel_vtlb`. The kernel keeps its shadow in step with what [`tlbwe`] reports
//! ([`TlbWrite`]: the entry's live block before and after the write).

use crate::ppc440::decode::{self, opcd::X, xo31};
use crate::ppc440::{cr, xer};
use kestrel_abi::FrameRegs;
use kestrel_vtlb::{GuestTlb, TlbError};

/// A TLB instruction's operands (GPR numbers; `ws` the word select).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbOp {
    /// `tlbwe RS,RA,WS`: entry (RA), word WS := (RS).
    We { rs: usize, ra: usize, ws: u32 },
    /// `tlbre RT,RA,WS`: RT := entry (RA), word WS (word 0 also sets MMUCR[STID]).
    Re { rt: usize, ra: usize, ws: u32 },
    /// `tlbsx[.] RT,RA,RB`: RT := index of the entry matching (RA|0) + (RB) under
    /// MMUCR[STID, STS]; with Rc, CR0[EQ] says whether one matched.
    Sx {
        rt: usize,
        ra: usize,
        rb: usize,
        rc: bool,
    },
}

impl TlbOp {
    /// The TLB instruction `insn`, if it is one (the kernel's hot path dispatches on the
    /// extended opcode itself and calls [`tlbre`], [`tlbsx`] and [`tlbwe`] with the word).
    #[inline(always)]
    pub fn decode(insn: u32) -> Option<TlbOp> {
        if decode::OPCD.get(insn) != X {
            return None;
        }
        let rt = decode::RT.get(insn) as usize;
        let ra = decode::RA.get(insn) as usize;
        let rb = decode::RB.get(insn);
        Some(match decode::XO.get(insn) {
            xo31::TLBWE => TlbOp::We { rs: rt, ra, ws: rb },
            xo31::TLBRE => TlbOp::Re { rt, ra, ws: rb },
            xo31::TLBSX => TlbOp::Sx {
                rt,
                ra,
                rb: rb as usize,
                rc: decode::RC.get(insn) != 0,
            },
            _ => return None,
        })
    }
}

/// CR after an instruction that sets CR0 = LT GT EQ SO from one condition (`tlbsx.`, and
/// `stwcx.`'s success): EQ = `eq`, SO copied from XER[SO], LT and GT clear.
#[inline(always)]
pub const fn cr0_eq(cr: u32, xer: u32, eq: bool) -> u32 {
    const SO_TO_CR0: u32 = xer::SO.trailing_zeros() - cr::CR0_SO.trailing_zeros();
    let so = (xer & xer::SO) >> SO_TO_CR0;
    let eq = if eq { cr::CR0_EQ } else { 0 };
    (cr & !cr::CR0.mask()) | eq | so
}

/// CR after `tlbsx.`: CR0[EQ] set on a hit, SO from XER[SO].
#[inline(always)]
pub const fn tlbsx_cr(cr: u32, xer: u32, hit: bool) -> u32 {
    cr0_eq(cr, xer, hit)
}

/// `tlbre RT,RA,WS` (the word `insn`): reads the word into RT and, for word 0, the entry's
/// TID into `mmucr`'s STID. Changes nothing on an invalid word.
#[inline(always)]
pub fn tlbre(
    tlb: &GuestTlb,
    mmucr: &mut u32,
    regs: &mut FrameRegs,
    insn: u32,
) -> Result<(), TlbError> {
    let (rt, ra, ws) = (
        decode::RT.get(insn) as usize,
        decode::RA.get(insn) as usize,
        decode::RB.get(insn),
    );
    let (value, m) = tlb.tlbre(regs.gpr[ra], ws, *mmucr)?;
    regs.gpr[rt] = value;
    if let Some(m) = m {
        *mmucr = m;
    }
    Ok(())
}

/// `tlbsx[.] RT,RA,RB` (the word `insn`): the index of the first entry matching (RA|0) +
/// (RB) under `mmucr`'s STID and STS into RT (RT unchanged on a miss), and with Rc the CR.
/// (The fields are decoded where they are used, as the kernel's hot path wants them.)
#[inline(always)]
pub fn tlbsx(tlb: &GuestTlb, mmucr: u32, regs: &mut FrameRegs, insn: u32) {
    let (rt, ra, rb) = (
        decode::RT.get(insn) as usize,
        decode::RA.get(insn) as usize,
        decode::RB.get(insn) as usize,
    );
    let ea = if ra == 0 { 0 } else { regs.gpr[ra] }.wrapping_add(regs.gpr[rb]);
    let hit = tlb.tlbsx(ea, mmucr);
    if let Some(i) = hit {
        regs.gpr[rt] = i;
    }
    if decode::RC.get(insn) != 0 {
        regs.cr = tlbsx_cr(regs.cr, regs.xer, hit.is_some());
    }
}

/// The operands of `tlbwe RS,RA,WS` (the word `insn`): entry (RA), word WS, value (RS).
#[inline(always)]
pub fn tlbwe_operands(regs: &FrameRegs, insn: u32) -> (u32, u32, u32) {
    (
        regs.gpr[decode::RA.get(insn) as usize],
        decode::RB.get(insn),
        regs.gpr[decode::RT.get(insn) as usize],
    )
}

/// What a `tlbwe` changed: the entry and word, and the entry's live block (base, mask)
/// before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbWrite {
    pub index: u32,
    pub word: u32,
    pub old: Option<(u32, u32)>,
    pub new: Option<(u32, u32)>,
}

impl TlbWrite {
    /// The entry was not live and is not now (Linux's flushes write word 0 = 0): nothing
    /// derives from it, it shadows nothing and covers no page.
    #[inline(always)]
    pub const fn is_dead(&self) -> bool {
        self.old.is_none() && self.new.is_none()
    }
}

/// `tlbwe` of `value` to word `word` of entry `index` (the guest's MMUCR supplies the TID
/// of word 0). Changes nothing on an invalid word.
#[inline(always)]
pub fn tlbwe(
    tlb: &mut GuestTlb,
    mmucr: u32,
    index: u32,
    word: u32,
    value: u32,
) -> Result<TlbWrite, TlbError> {
    let old = tlb.live_block(index);
    tlb.tlbwe(index, word, value, mmucr)?;
    let new = if word == 0 {
        tlb.live_block(index)
    } else {
        old
    };
    Ok(TlbWrite {
        index,
        word,
        old,
        new,
    })
}
