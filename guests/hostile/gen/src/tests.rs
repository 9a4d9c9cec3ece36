//! Host tests of the generator's invariants over many seeds: no excluded opcode, every
//! memory access based on a base register, branches forward to an operation boundary or
//! the end stub, and every sensitive write loaded with a masked value just before it.

use super::*;
use kestrel_ppc440::decode::{decode, AddrMode, Insn};
use proptest::prelude::{any, prop_assert, prop_assert_eq, proptest};
use std::vec::Vec;

pub(crate) const LAYOUT: Layout = Layout {
    scratch_start: 16 << 20,
    scratch_end: 32 << 20,
    ivpr: 0x0080_0000,
    end_stub: 0x0081_0040,
    devices: None,
};
pub(crate) const BASE: u32 = 0x0090_0000;

fn opcd(w: u32) -> u32 {
    w >> 26
}

/// The value a `lis r; ori r,r` pair ending just before index `i` loads into `r`.
fn loaded(b: &Block, i: usize, r: u32) -> Option<u32> {
    if i < 2 {
        return None;
    }
    let (hi, lo) = (b.words[i - 2], b.words[i - 1]);
    (hi == e::lis(r, (hi & 0xffff) as u16) && lo == e::ori(r, r, lo as u16))
        .then_some(((hi & 0xffff) << 16) | (lo & 0xffff))
}

fn boundaries(b: &Block, layout: &Layout) -> Vec<u32> {
    let mut v: Vec<u32> = b.starts[..b.nops]
        .iter()
        .map(|&s| BASE + 4 * s as u32)
        .collect();
    v.push(BASE + 4 * (b.len as u32 - 1));
    v.push(layout.end_stub);
    v
}

fn check(seed: u64, blocks: usize) {
    check_with(&LAYOUT, seed, blocks)
}

/// The invariants over `blocks` blocks from `seed` under `layout`. With devices, a memory
/// access whose base is not a base register must land in a device window, at the address
/// the `lis`/`ori` (and `li` index) just before it loaded.
pub(crate) fn check_with(layout: &Layout, seed: u64, blocks: usize) {
    let mut rng = Rng::new(seed);
    let mut b = Block::default();
    for _ in 0..blocks {
        generate(&mut rng, layout, BASE, &mut b);
        let mut known: [Option<u32>; 32] = [None; 32];
        assert!(b.len >= 2 && b.len <= MAX_WORDS);
        let last = b.words[b.len - 1];
        assert_eq!(
            last,
            e::b(
                layout.end_stub.wrapping_sub(BASE + 4 * (b.len as u32 - 1)) as i32,
                false
            )
        );
        let bounds = boundaries(&b, layout);
        for i in 0..b.len {
            let w = b.words[i];
            let pc = BASE + 4 * i as u32;
            assert!(!EXCLUDED_OPCODES.contains(&opcd(w)), "word {w:#010x}");
            match decode(w) {
                Insn::LoadStore(ls) if ls.ra().number() as u32 == CODE_BASE_REG => {
                    assert!(
                        matches!(ls.kind(), kestrel_ppc440::decode::AccessKind::Load)
                            && !ls.update(),
                        "{w:#010x}: only plain loads from the code base"
                    );
                }
                Insn::LoadStore(ls) if BASE_REGS.contains(&(ls.ra().number() as u32)) => {
                    if let AddrMode::X { rb } = ls.addr() {
                        assert!(INDEX_REGS.contains(&(rb.number() as u32)), "{w:#010x}");
                    }
                }
                Insn::LoadStore(ls) => {
                    let ra = ls.ra().number() as usize;
                    let base = if ra == 0 { Some(0) } else { known[ra] };
                    let ea = match ls.addr() {
                        AddrMode::D { d } => base.map(|a| a.wrapping_add(d as i32 as u32)),
                        AddrMode::X { rb } => base
                            .zip(known[rb.number() as usize])
                            .map(|(a, x)| a.wrapping_add(x)),
                    };
                    let ea = ea.unwrap_or_else(|| panic!("{w:#010x}: base not loaded just before"));
                    assert!(
                        devices::in_window(layout, ea),
                        "{w:#010x}: {ea:#x} is not in a device window"
                    );
                }
                Insn::Mtmsr { rs } => {
                    let v = loaded(&b, i, rs.number() as u32).expect("mtmsr after lis/ori");
                    assert_eq!(v & (msr::WE | msr::ME), msr::ME, "{v:#x}");
                }
                Insn::Mtspr { spr: s, rs } => {
                    let v = loaded(&b, i, rs.number() as u32);
                    match s.number() as u32 {
                        spr::IVPR => assert_eq!(v, Some(LAYOUT.ivpr)),
                        spr::TCR => assert_eq!(v.expect("tcr") & tcr::WRC.mask(), 0),
                        spr::DBCR0 => assert_eq!(v.expect("dbcr0") & dbcr0::RST.mask(), 0),
                        _ => {}
                    }
                }
                Insn::Tlbwe { rs, ra, ws } => {
                    // li/lis+ori of the index at the start of the sequence: check via the
                    // word values written (the index register is never the word register).
                    assert_ne!(rs.number(), ra.number());
                    let _ = ws;
                }
                Insn::Rfi | Insn::Rfci | Insn::Rfmci => {
                    // mtspr xSRR0 (target), lis/ori msr, mtspr xSRR1 just before.
                    let m = decode(b.words[i - 1]);
                    let Insn::Mtspr { rs, .. } = m else {
                        panic!("rf*i after mtspr")
                    };
                    let v = loaded(&b, i - 1, rs.number() as u32).expect("msr loaded");
                    assert_eq!(v & (msr::WE | msr::ME), msr::ME);
                    let Insn::Mtspr { rs: rt, .. } = decode(b.words[i - 4]) else {
                        panic!("target mtspr")
                    };
                    let t = loaded(&b, i - 4, rt.number() as u32).expect("target loaded") & !3;
                    assert!(
                        bounds.contains(&t) && t > pc || t == LAYOUT.end_stub,
                        "{t:#x}"
                    );
                }
                _ => {}
            }
            match opcd(w) {
                18 => {
                    let disp = ((w & 0x03ff_fffc) << 6) as i32 >> 6;
                    let t = pc.wrapping_add(disp as u32);
                    assert!(
                        bounds.contains(&t) && (t > pc || t == LAYOUT.end_stub),
                        "b {t:#x}"
                    );
                }
                16 => {
                    let disp = (w & 0xfffc) as i16 as i32;
                    let t = pc.wrapping_add(disp as u32);
                    assert!(bounds.contains(&t) && t > pc, "bc {t:#x}");
                }
                19 if (w >> 1) & 0x3ff == 16 || (w >> 1) & 0x3ff == 528 => {
                    // bclr/bcctr: mtlr/mtctr of a loaded forward target just before.
                    let Insn::Mtspr { rs, spr: s } = decode(b.words[i - 1]) else {
                        panic!("bclr/bcctr after mtspr")
                    };
                    let want = if (w >> 1) & 0x3ff == 16 {
                        spr::LR
                    } else {
                        spr::CTR
                    };
                    assert_eq!(s.number() as u32, want);
                    let t = loaded(&b, i - 1, rs.number() as u32).expect("target loaded") & !3;
                    assert!(bounds.contains(&t) && (t > pc || t == LAYOUT.end_stub));
                }
                _ => {}
            }
            if writes_memory_or_cache(w) {
                assert_ne!(
                    (w >> 16) & 31,
                    CODE_BASE_REG,
                    "{w:#010x} stores through the code base"
                );
            }
            // Nothing writes a base or index register except update forms.
            if let Some(rt) = writes_gpr(w) {
                assert!(
                    !(BASE_REGS.contains(&rt) || INDEX_REGS.contains(&rt) || rt == CODE_BASE_REG),
                    "{w:#010x} writes r{rt}"
                );
            }
            track(&mut known, &b, i);
        }
    }
}

/// Follows the values `lis`/`ori` and `li` load (the device accesses' addresses); any
/// other write to a register forgets its value.
fn track(known: &mut [Option<u32>; 32], b: &Block, i: usize) {
    let w = b.words[i];
    let (rt, ra) = (((w >> 21) & 31) as usize, ((w >> 16) & 31) as usize);
    match opcd(w) {
        15 if ra == 0 => known[rt] = Some((w & 0xffff) << 16),
        14 if ra == 0 => known[rt] = Some(w as i16 as i32 as u32),
        24 if ra == rt => known[ra] = known[ra].map(|v| v | (w & 0xffff)),
        _ => {
            if let Some(r) = writes_gpr(w) {
                known[r as usize] = None;
            }
            // Update forms, multiples and strings write registers writes_gpr does not name.
            if let Insn::LoadStore(ls) = decode(w) {
                if ls.update() {
                    known[ls.ra().index()] = None;
                }
                if ls.op().multiple() {
                    known[ls.rt_rs().index()..].fill(None);
                }
            }
            if opcd(w) == 31 && matches!((w >> 1) & 0x3ff, 597 | 533) {
                known[rt..].fill(None);
            }
        }
    }
}

/// The GPR a generated word writes through its RT field (or RA for the logical forms),
/// for the opcodes the generator uses; None when it writes none or only memory/SPRs.
fn writes_gpr(w: u32) -> Option<u32> {
    let rt = (w >> 21) & 31;
    let ra = (w >> 16) & 31;
    match opcd(w) {
        7 | 8 | 12 | 13 | 14 | 15 => Some(rt),
        20 | 21 | 23 | 24..=29 => Some(ra),
        32..=47 if matches!(opcd(w), 32..=35 | 40..=43 | 46) => Some(rt),
        31 => {
            let xo = (w >> 1) & 0x3ff;
            match xo {
                // lwarx, lbzx.., lhzx.., mfcr, mfmsr, mfspr, mfdcr, tlbre, tlbsx, dcread,
                // XO arithmetic (9-bit XO with OE).
                20 | 23 | 55 | 87 | 119 | 279 | 311 | 343 | 375 | 534 | 790 | 19 | 83 | 339
                | 323 | 946 | 914 | 486 | 259 | 533 | 597 => Some(rt),
                24 | 26 | 28 | 60 | 124 | 284 | 316 | 412 | 444 | 476 | 536 | 792 | 824 | 922
                | 954 => Some(ra),
                _ if matches!(
                    xo & 0x1ff,
                    8 | 10
                        | 11
                        | 40
                        | 75
                        | 104
                        | 136
                        | 138
                        | 200
                        | 202
                        | 232
                        | 234
                        | 235
                        | 266
                        | 459
                        | 491
                ) =>
                {
                    Some(rt)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Stores, `dcbz`, `dcbi`, `dccci`, `stwcx.`, string stores: what may not use the code base.
fn writes_memory_or_cache(w: u32) -> bool {
    let xo = (w >> 1) & 0x3ff;
    kestrel_ppc440::decode::writes_memory(w)
        || (opcd(w) == 31 && matches!(xo, 470 | 454 | 725 | 661 | 150 | 1014))
}

#[test]
fn fixed_seeds() {
    for seed in [0, 1, 42, 0xdead_beef] {
        check(seed, 5000);
    }
}

#[test]
fn same_seed_same_blocks() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    let (mut x, mut y) = (Block::default(), Block::default());
    for _ in 0..100 {
        generate(&mut a, &LAYOUT, BASE, &mut x);
        generate(&mut b, &LAYOUT, BASE, &mut y);
        assert_eq!(x.words[..x.len], y.words[..y.len]);
    }
}

#[test]
fn tlb_entries_stay_in_scratch_or_identity_or_high_or_never_executable() {
    let mut rng = Rng::new(3);
    for _ in 0..100_000 {
        let (w0, w1, w2) = tlb_entry(&mut rng, &LAYOUT);
        let code = word0::SIZE.get(w0);
        let epn = w0 & word0::EPN.mask();
        let rpn = w1 & word1::RPN.mask();
        if word1::ERPN.get(w1) != 0 {
            continue;
        }
        match code {
            0..=5 | 7 => {
                let size = 1024u32 << (2 * code);
                assert!(rpn >= LAYOUT.scratch_start && rpn + size <= LAYOUT.scratch_end);
                if epn < LAYOUT.scratch_start {
                    assert!(
                        word0::TS.get(w0) == 1 && w2 & (word2::SX.mask() | word2::UX.mask()) == 0
                    );
                }
                assert_eq!(epn % size, 0);
            }
            _ => {
                assert_eq!(rpn, 0);
                assert!(epn == 0 || epn >= 1 << 28);
            }
        }
    }
}

#[test]
fn every_class_appears() {
    let mut rng = Rng::new(11);
    let mut b = Block::default();
    let mut ops = [0u32; CLASSES];
    for _ in 0..2000 {
        generate(&mut rng, &LAYOUT, BASE, &mut b);
        for (o, n) in ops.iter_mut().zip(b.ops) {
            *o += n;
        }
    }
    // The device classes have no weight without devices (tests_devices covers them).
    assert!(ops[..13].iter().all(|&n| n > 0), "{ops:?}");
}

proptest! {
    #[test]
    fn invariants_hold_for_any_seed(seed in any::<u64>()) {
        check(seed, 200);
    }

    #[test]
    fn initial_base_registers_are_scratch(seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let r = initial_regs(&mut rng, &LAYOUT, BASE);
        for &b in BASE_REGS.iter() {
            let a = r.gpr[b as usize];
            prop_assert!((LAYOUT.scratch_start + MARGIN..LAYOUT.scratch_end - MARGIN).contains(&a));
        }
        for &i in INDEX_REGS.iter() {
            let v = r.gpr[i as usize] as i32;
            prop_assert!((-INDEX_RANGE..INDEX_RANGE).contains(&v));
        }
        prop_assert_eq!(r.msr & (msr::WE | msr::ME), msr::ME);
    }
}
