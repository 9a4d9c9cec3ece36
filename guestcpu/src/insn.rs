//! The privileged instructions a guest supervisor traps on, decoded into what the kernel
//! does with them (Book E instruction fields, MSB-0: opcode 0:5, RS/RT 6:10, RA 11:15,
//! RB 16:20, extended opcode 21:30, Rc 31; the SPR number is the 10-bit field 11:20 with its
//! two halves swapped).

use crate::msr::Return;
use crate::ppc440::decode::{
    self,
    opcd::{X, XL},
    xo19, xo31,
};
use crate::tlb::TlbOp;

/// A privileged instruction, by what the kernel does with it. Register fields are GPR
/// numbers (0..=31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Privileged {
    Mfmsr {
        rt: usize,
    },
    Mtmsr {
        rs: usize,
    },
    Wrtee {
        rs: usize,
    },
    Wrteei {
        e: bool,
    },
    Mfspr {
        rt: usize,
        spr: u32,
    },
    Mtspr {
        rs: usize,
        spr: u32,
    },
    /// `tlbre`, `tlbwe`, `tlbsx[.]`.
    Tlb(TlbOp),
    /// `tlbsync`, `dccci`, `iccci`, `dcbi`: no guest-visible effect under emulation (the
    /// emulated TLB is coherent; QEMU has no caches to model).
    NoEffect,
    /// `rfi`, `rfci`, `rfmci`.
    Return(Return),
    /// `mfdcrx`/`mtdcrx`: the VMM's, with (RA) (the DCR number) in the fault.
    IndexedDcr {
        ra: usize,
    },
    /// Anything else (`mfdcr`, `mtdcr`, unknown encodings): the VMM's.
    Other,
}

/// Decodes the privileged instruction `insn`.
#[inline]
pub fn classify(insn: u32) -> Privileged {
    let rt = decode::RT.get(insn) as usize;
    let ra = decode::RA.get(insn) as usize;
    match (decode::OPCD.get(insn), decode::XO.get(insn)) {
        (X, xo31::MFMSR) => Privileged::Mfmsr { rt },
        (X, xo31::MTMSR) => Privileged::Mtmsr { rs: rt },
        (X, xo31::WRTEE) => Privileged::Wrtee { rs: rt },
        (X, xo31::WRTEEI) => Privileged::Wrteei {
            e: decode::E.get(insn) != 0,
        },
        (X, xo31::MFSPR) => Privileged::Mfspr {
            rt,
            spr: decode::spr_number(insn),
        },
        (X, xo31::MTSPR) => Privileged::Mtspr {
            rs: rt,
            spr: decode::spr_number(insn),
        },
        (X, xo31::TLBWE | xo31::TLBRE | xo31::TLBSX) => match TlbOp::decode(insn) {
            Some(op) => Privileged::Tlb(op),
            None => Privileged::Other,
        },
        (X, xo31::TLBSYNC | xo31::DCCCI | xo31::ICCCI | xo31::DCBI) => Privileged::NoEffect,
        (XL, xo19::RFI) => Privileged::Return(Return::Rfi),
        (XL, xo19::RFCI) => Privileged::Return(Return::Rfci),
        (XL, xo19::RFMCI) => Privileged::Return(Return::Rfmci),
        (X, xo31::MFDCRX | xo31::MTDCRX) => Privileged::IndexedDcr { ra },
        _ => Privileged::Other,
    }
}

/// Whether the word of an illegal-instruction program interrupt is `mfdcrx` or `mtdcrx`:
/// the 440x5 lacks them, but BG/P's 450 has them (privileged) and a VM's BG/P devices put
/// DCRs beyond the 10-bit `mfdcr` operand, so the kernel treats them as privileged
/// instructions the VMM emulates.
#[inline]
pub fn is_indexed_dcr(word: u32) -> bool {
    decode::OPCD.get(word) == X && matches!(decode::XO.get(word), xo31::MFDCRX | xo31::MTDCRX)
}
