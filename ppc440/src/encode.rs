//! The instruction encoder for code that emits PPC440 instructions as data: guests built
//! on the fly by tests (ktest's tiny VMM), and `.long` words in inline assembly where LLVM
//! cannot be trusted (it assembles `tlbwe rS,rA,1|2` and `tlbre rT,rA,1|2` as word 0
//! without a warning, see the platform notes).
//!
//! Every function is a `const fn` taking plain register numbers, so results can be
//! `const` operands of `asm!`; an out-of-range register or SPR number fails at compile
//! time there. The modeled instructions go through the decoder's [`encode`] and are tested
//! by round trip against [`decode`](crate::decode::decode); the few the decoder does not
//! model (`addi`, `addis`, branches) are checked against GNU as in the tests below.

use crate::decode::{encode, AddrMode, Dcr, Fpr, Gpr, Insn, LoadStore, LsOp, Spr, TlbWord};

/// GPR `n`; panics (at compile time in a `const`) unless `n < 32`.
const fn gpr(n: u32) -> Gpr {
    assert!(n < 32, "GPR numbers are 0-31");
    match Gpr::new(n as u8) {
        Some(g) => g,
        None => panic!("GPR numbers are 0-31"),
    }
}

/// FPR `n`; panics (at compile time in a `const`) unless `n < 32`.
const fn fpr(n: u32) -> Fpr {
    assert!(n < 32, "FPR numbers are 0-31");
    match Fpr::new(n as u8) {
        Some(f) => f,
        None => panic!("FPR numbers are 0-31"),
    }
}

/// TLB word `ws`; panics unless `ws <= 2`.
const fn tlb_word(ws: u32) -> TlbWord {
    match TlbWord::new(ws) {
        Some(w) => w,
        None => panic!("tlbwe/tlbre word select is 0, 1 or 2"),
    }
}

/// A D-form load or store; panics on an invalid form.
const fn d_form(op: LsOp, rt_rs: u32, d: i16, ra: u32) -> u32 {
    match LoadStore::new(op, gpr(rt_rs), gpr(ra), AddrMode::D { d }) {
        Ok(ls) => encode(&Insn::LoadStore(ls)),
        Err(_) => panic!("invalid load/store form"),
    }
}

/// `mfmsr rT`.
pub const fn mfmsr(rt: u32) -> u32 {
    encode(&Insn::Mfmsr { rt: gpr(rt) })
}

/// `mtmsr rS`.
pub const fn mtmsr(rs: u32) -> u32 {
    encode(&Insn::Mtmsr { rs: gpr(rs) })
}

/// `wrtee rS`.
pub const fn wrtee(rs: u32) -> u32 {
    encode(&Insn::Wrtee { rs: gpr(rs) })
}

/// `wrteei E`.
pub const fn wrteei(e: bool) -> u32 {
    encode(&Insn::Wrteei { e })
}

/// `mfspr rT,SPRN` (`spr` from [`crate::spr`]).
pub const fn mfspr(rt: u32, spr: u32) -> u32 {
    encode(&Insn::Mfspr {
        rt: gpr(rt),
        spr: Spr::of(spr),
    })
}

/// `mtspr SPRN,rS` (`spr` from [`crate::spr`]).
pub const fn mtspr(spr: u32, rs: u32) -> u32 {
    encode(&Insn::Mtspr {
        spr: Spr::of(spr),
        rs: gpr(rs),
    })
}

/// `mtctr rS` (`mtspr CTR,rS`).
pub const fn mtctr(rs: u32) -> u32 {
    mtspr(crate::spr::CTR, rs)
}

/// `mfdcr rT,DCRN` (`dcr` from [`crate::dcr`]).
pub const fn mfdcr(rt: u32, dcr: u32) -> u32 {
    encode(&Insn::Mfdcr {
        rt: gpr(rt),
        dcr: Dcr::of(dcr),
    })
}

/// `mtdcr DCRN,rS`.
pub const fn mtdcr(dcr: u32, rs: u32) -> u32 {
    encode(&Insn::Mtdcr {
        dcr: Dcr::of(dcr),
        rs: gpr(rs),
    })
}

/// `tlbwe rS,rA,WS`.
pub const fn tlbwe(rs: u32, ra: u32, ws: u32) -> u32 {
    encode(&Insn::Tlbwe {
        rs: gpr(rs),
        ra: gpr(ra),
        ws: tlb_word(ws),
    })
}

/// `tlbre rT,rA,WS`.
pub const fn tlbre(rt: u32, ra: u32, ws: u32) -> u32 {
    encode(&Insn::Tlbre {
        rt: gpr(rt),
        ra: gpr(ra),
        ws: tlb_word(ws),
    })
}

/// `tlbsx[.] rT,rA,rB`.
pub const fn tlbsx(rt: u32, ra: u32, rb: u32, record: bool) -> u32 {
    encode(&Insn::Tlbsx {
        rt: gpr(rt),
        ra: gpr(ra),
        rb: gpr(rb),
        rc: record,
    })
}

/// `rfi`.
pub const RFI: u32 = encode(&Insn::Rfi);
/// `sc`.
pub const SC: u32 = encode(&Insn::Sc);
/// `isync`.
pub const ISYNC: u32 = encode(&Insn::Isync);

/// A D-form floating-point load or store; panics on an invalid form.
const fn d_form_fp(op: LsOp, frt_frs: u32, d: i16, ra: u32) -> u32 {
    match LoadStore::new_fp(op, fpr(frt_frs), gpr(ra), AddrMode::D { d }) {
        Ok(ls) => encode(&Insn::LoadStore(ls)),
        Err(_) => panic!("invalid load/store form"),
    }
}

/// `lfd frT,d(rA)` (the kernel's FPU switch, assembled without hard-float).
pub const fn lfd(frt: u32, d: i16, ra: u32) -> u32 {
    d_form_fp(LsOp::Lfd, frt, d, ra)
}

/// `stfd frS,d(rA)`.
pub const fn stfd(frs: u32, d: i16, ra: u32) -> u32 {
    d_form_fp(LsOp::Stfd, frs, d, ra)
}

/// `lwz rT,d(rA)`.
pub const fn lwz(rt: u32, d: i16, ra: u32) -> u32 {
    d_form(LsOp::Lwz, rt, d, ra)
}

/// `stw rS,d(rA)`.
pub const fn stw(rs: u32, d: i16, ra: u32) -> u32 {
    d_form(LsOp::Stw, rs, d, ra)
}

// Instructions the decoder does not model (they never trap to an emulator). Book E
// D-form: opcode 0:5, RT 6:10, RA 11:15, SI/UI 16:31; B-form: BO 6:10, BI 11:15, BD 16:29.

/// Primary opcode of `addi`.
const ADDI: u32 = 14;
/// Primary opcode of `addis`.
const ADDIS: u32 = 15;
/// Primary opcode of `bc`.
const BC: u32 = 16;
/// Primary opcode of `b`.
const B: u32 = 18;

/// Primary opcode of the FPSCR moves (Book E X-/XFL-form, opcode 63).
const FP63: u32 = 63;

/// `mffs frT` (Book E: opcode 63, XO 583).
pub const fn mffs(frt: u32) -> u32 {
    use crate::field::Field;
    Field::bits(0, 5).put(FP63)
        | Field::bits(6, 10).put(fpr(frt).number() as u32)
        | Field::bits(21, 30).put(583)
}

/// `mtfsf FLM,frB` (Book E XFL-form: opcode 63, FLM 7:14, FRB 16:20, XO 711).
pub const fn mtfsf(flm: u8, frb: u32) -> u32 {
    use crate::field::Field;
    Field::bits(0, 5).put(FP63)
        | Field::bits(7, 14).put(flm as u32)
        | Field::bits(16, 20).put(fpr(frb).number() as u32)
        | Field::bits(21, 30).put(711)
}

/// A D-form word with an immediate.
const fn d_imm(opcd: u32, rt: u32, ra: u32, imm: u16) -> u32 {
    use crate::field::Field;
    Field::bits(0, 5).put(opcd)
        | Field::bits(6, 10).put(gpr(rt).number() as u32)
        | Field::bits(11, 15).put(gpr(ra).number() as u32)
        | Field::bits(16, 31).put(imm as u32)
}

/// `li rT,imm` (`addi rT,0,imm`).
pub const fn li(rt: u32, imm: i16) -> u32 {
    d_imm(ADDI, rt, 0, imm as u16)
}

/// `lis rT,imm` (`addis rT,0,imm`).
pub const fn lis(rt: u32, imm: u16) -> u32 {
    d_imm(ADDIS, rt, 0, imm)
}

/// `addi rT,rA,imm`.
pub const fn addi(rt: u32, ra: u32, imm: i16) -> u32 {
    d_imm(ADDI, rt, ra, imm as u16)
}

/// `b .`: a branch to itself.
pub const B_SELF: u32 = crate::field::Field::bits(0, 5).put(B);
/// `bdnz .`: decrement CTR, branch to itself while it is not zero (BO = 0b10000).
pub const BDNZ_SELF: u32 =
    crate::field::Field::bits(0, 5).put(BC) | crate::field::Field::bits(6, 10).put(0b10000);
/// An all-zero word: primary opcode 0 is illegal on the 440.
pub const ILLEGAL: u32 = 0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode;
    use crate::{dcr, spr};
    use proptest::prelude::*;

    /// Encodings checked against `powerpc-linux-gnu-as -m440` + `objdump -d`.
    #[test]
    fn fp_encodings() {
        // GNU as (powerpc-linux-gnu-as -mbooke) for the kernel's FPU switch.
        assert_eq!(stfd(0, 0, 3), 0xD803_0000);
        assert_eq!(stfd(31, 248, 3), 0xDBE3_00F8);
        assert_eq!(lfd(0, 256, 3), 0xC803_0100);
        assert_eq!(lfd(17, 136, 3), 0xCA23_0088);
        assert_eq!(mffs(0), 0xFC00_048E);
        assert_eq!(mtfsf(0xff, 0), 0xFDFE_058E);
    }

    #[test]
    fn known_encodings() {
        assert_eq!(mfmsr(3), 0x7C60_00A6);
        assert_eq!(mfmsr(5), 0x7CA0_00A6);
        assert_eq!(mtmsr(3), 0x7C60_0124);
        assert_eq!(li(3, 42), 0x3860_002A);
        assert_eq!(li(6, 0x1234), 0x38C0_1234);
        assert_eq!(lis(3, 0x3000), 0x3C60_3000);
        assert_eq!(lis(7, 0x1000), 0x3CE0_1000);
        assert_eq!(addi(8, 8, 24), 0x3908_0018);
        assert_eq!(mtspr(spr::SPRG0, 3), 0x7C70_43A6);
        assert_eq!(mfspr(4, spr::SPRG0), 0x7C90_42A6);
        assert_eq!(mfdcr(6, dcr::UIC0_BASE), 0x7CC0_3286);
        assert_eq!(mtdcr(dcr::UIC0_BASE, 5), 0x7CA0_3386);
        assert_eq!(mtspr(spr::DBCR0, 3), 0x7C74_4BA6);
        assert_eq!(mtspr(spr::IVPR, 3), 0x7C7F_0BA6);
        assert_eq!(mtspr(spr::IVOR6, 3), 0x7C76_63A6);
        assert_eq!(mfspr(3, spr::DEAR), 0x7C7D_0AA6);
        assert_eq!(mfspr(3, spr::DEC), 0x7C76_02A6);
        assert_eq!(wrteei(true), 0x7C00_8146);
        assert_eq!(wrteei(false), 0x7C00_0146);
        assert_eq!(lwz(3, 0, 3), 0x8063_0000);
        assert_eq!(stw(4, 4, 3), 0x9083_0004);
        assert_eq!(mtctr(7), 0x7CE9_03A6);
        assert_eq!(tlbwe(4, 3, 0), 0x7C83_07A4);
        assert_eq!(tlbwe(5, 3, 1), 0x7CA3_0FA4);
        assert_eq!(tlbwe(6, 3, 2), 0x7CC3_17A4);
        assert_eq!(tlbre(4, 3, 0), 0x7C83_0764);
        assert_eq!(tlbre(5, 3, 1), 0x7CA3_0F64);
        assert_eq!(tlbre(6, 3, 2), 0x7CC3_1764);
        assert_eq!(tlbre(7, 9, 1), 0x7CE9_0F64);
        assert_eq!(tlbwe(7, 9, 0), 0x7CE9_07A4);
        assert_eq!(SC, 0x4400_0002);
        assert_eq!(RFI, 0x4C00_0064);
        assert_eq!(B_SELF, 0x4800_0000);
        assert_eq!(BDNZ_SELF, 0x4200_0000);
    }

    #[test]
    fn unmodeled_words_stay_other() {
        for w in [
            li(3, 1),
            lis(31, 0x3000),
            addi(1, 1, -16),
            B_SELF,
            BDNZ_SELF,
        ] {
            assert_eq!(decode(w), Insn::Other(w));
        }
    }

    proptest! {
        /// Every builder produces the instruction it names (round trip through the decoder).
        #[test]
        fn builders_round_trip(r in 0u32..32, s in 0u32..32, n in 0u32..1024, ws in 0u32..3,
                               e in any::<bool>(), d in any::<i16>()) {
            let g = |n: u32| Gpr::new(n as u8).unwrap();
            let w = TlbWord::new(ws).unwrap();
            prop_assert_eq!(decode(mfmsr(r)), Insn::Mfmsr { rt: g(r) });
            prop_assert_eq!(decode(mtmsr(r)), Insn::Mtmsr { rs: g(r) });
            prop_assert_eq!(decode(wrtee(r)), Insn::Wrtee { rs: g(r) });
            prop_assert_eq!(decode(wrteei(e)), Insn::Wrteei { e });
            prop_assert_eq!(decode(mfspr(r, n)), Insn::Mfspr { rt: g(r), spr: Spr::of(n) });
            prop_assert_eq!(decode(mtspr(n, r)), Insn::Mtspr { spr: Spr::of(n), rs: g(r) });
            prop_assert_eq!(decode(mfdcr(r, n)), Insn::Mfdcr { rt: g(r), dcr: Dcr::of(n) });
            prop_assert_eq!(decode(mtdcr(n, r)), Insn::Mtdcr { dcr: Dcr::of(n), rs: g(r) });
            prop_assert_eq!(decode(tlbwe(r, s, ws)), Insn::Tlbwe { rs: g(r), ra: g(s), ws: w });
            prop_assert_eq!(decode(tlbre(r, s, ws)), Insn::Tlbre { rt: g(r), ra: g(s), ws: w });
            prop_assert_eq!(decode(tlbsx(r, s, n & 31, e)),
                            Insn::Tlbsx { rt: g(r), ra: g(s), rb: g(n & 31), rc: e });
            let lw = LoadStore::new(LsOp::Lwz, g(r), g(s), AddrMode::D { d }).unwrap();
            prop_assert_eq!(decode(lwz(r, d, s)), Insn::LoadStore(lw));
            let sw = LoadStore::new(LsOp::Stw, g(r), g(s), AddrMode::D { d }).unwrap();
            prop_assert_eq!(decode(stw(r, d, s)), Insn::LoadStore(sw));
        }

        /// `li`/`lis`/`addi` put their operands where Book E's D-form says.
        #[test]
        fn immediates(r in 0u32..32, a in 0u32..32, imm in any::<i16>()) {
            prop_assert_eq!(li(r, imm), addi(r, 0, imm));
            prop_assert_eq!(addi(r, a, imm) >> 26, 14);
            prop_assert_eq!((addi(r, a, imm) >> 21) & 31, r);
            prop_assert_eq!((addi(r, a, imm) >> 16) & 31, a);
            prop_assert_eq!(addi(r, a, imm) as u16, imm as u16);
            prop_assert_eq!(lis(r, imm as u16) >> 26, 15);
        }
    }
}
