//! Cross-checks the decoder against GNU binutils: every word in `vectors/vectors.txt`
//! (hand-written instructions from `vectors/insns.s` plus seeded fuzz words, disassembled by
//! `powerpc-linux-gnu-objdump -M440,raw`; regenerate with `vectors/gen.py`) must decode to
//! the instruction objdump printed, or be classified consistently when objdump rejects it.
//!
//! Known, deliberate differences from objdump, each handled below:
//! - objdump rejects (prints `.long`) words with reserved bits set; the decoder ignores
//!   reserved fields as Book E specifies, so such words decode to the instruction with
//!   those bits cleared.
//! - objdump decodes Power ISA fields the 440 does not have and prints them: `mtmsr`'s L
//!   bit 15, `sc`'s LEV bits 20-26. For the 440 these are reserved bits. objdump also
//!   ignores the other reserved bits of `sc` and `mbar`, and the RB field of
//!   `mfdcrx`/`mtdcrx`.
//! - objdump's `-M440` accepts Book E instructions the 440x5 core lacks (`tlbivax`); the
//!   decoder leaves them `Other`. (`mfdcrx`/`mtdcrx`, which the 440x5 lacks too, are
//!   modelled: Kestrel's VMM emulates them for BG/P's DCRs above 1023.)
//! - objdump prints `iccci`/`dccci` RA as a register even when it is r0; the decoder prints
//!   `(RA|0)` operands as `0`, like objdump does for `dcbi` and the loads.
//! - objdump does not check the reserved WS values of `tlbre`/`tlbwe` (above 2), which the
//!   decoder calls `Invalid`.

use kestrel_ppc440::decode::{decode, encode, try_decode, Insn, InsnError};
use std::collections::BTreeSet;

const VECTORS: &str = include_str!("vectors/vectors.txt");

/// Mnemonics of the instructions the 440x5 lacks but objdump `-M440` decodes.
const NOT_ON_440: &[&str] = &["tlbivax"];

/// Instructions for which objdump accepts some reserved bits: it decodes the Power ISA
/// fields `mtmsr` L and `sc` LEV, and ignores the rest of `sc`'s and `mbar`'s, and the RB
/// field of `mfdcrx`/`mtdcrx`.
const OBJDUMP_ACCEPTS_RESERVED: &[&str] = &["mtmsr", "sc", "mbar", "mfdcrx", "mtdcrx"];

struct Vector<'a> {
    line: usize,
    word: u32,
    text: &'a str,
}

fn vectors() -> Vec<Vector<'static>> {
    VECTORS
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| {
            let (hex, text) = l.split_once('\t').expect("vector line has a tab");
            let word = u32::from_str_radix(hex, 16).expect("vector word is hex");
            Vector {
                line: i + 1,
                word,
                text,
            }
        })
        .collect()
}

/// objdump's text rewritten into the decoder's syntax where the two differ on purpose.
fn normalize(text: &str) -> String {
    let (mnemonic, operands) = text.split_once(' ').unwrap_or((text, ""));
    let operands = match mnemonic {
        // The 440's mtmsr has no L operand; sc has no LEV.
        "mtmsr" => operands.split(',').next().unwrap_or("").to_string(),
        "sc" => String::new(),
        // (RA|0) operands print r0 as 0.
        "iccci" | "dccci" if operands.starts_with("r0,") => format!("0,{}", &operands[3..]),
        _ => operands.to_string(),
    };
    if operands.is_empty() {
        mnemonic.to_string()
    } else {
        format!("{mnemonic} {operands}")
    }
}

fn modeled_mnemonics() -> BTreeSet<&'static str> {
    let mut set: BTreeSet<&'static str> = [
        "mfmsr", "mtmsr", "wrtee", "wrteei", "rfi", "rfci", "rfmci", "mfspr", "mtspr", "mfdcr",
        "mtdcr", "mfdcrx", "mtdcrx", "tlbwe", "tlbre", "tlbsx", "tlbsx.", "tlbsync", "iccci",
        "dccci", "dcbi", "dcread", "icread", "icbi", "dcbz", "isync", "msync", "mbar", "sc",
    ]
    .into_iter()
    .collect();
    set.extend(
        kestrel_ppc440::decode::LsOp::ALL
            .iter()
            .map(|op| op.mnemonic()),
    );
    set
}

#[test]
fn decoder_agrees_with_objdump_on_every_vector() {
    let modeled = modeled_mnemonics();
    let mut failures = Vec::new();
    let all = vectors();
    assert!(
        all.len() > 2000,
        "vectors.txt looks truncated: {} vectors",
        all.len()
    );
    for v in &all {
        let ours = decode(v.word);
        let theirs = normalize(v.text);
        let their_mnemonic = theirs.split(' ').next().unwrap_or("");
        let ok = match ours {
            Insn::Other(_) => !modeled.contains(their_mnemonic),
            Insn::Invalid(_) => match try_decode(v.word) {
                // objdump checks the load/store invalid forms itself.
                Err(InsnError::UpdateWithRaZero)
                | Err(InsnError::UpdateWithRaIsRt)
                | Err(InsnError::LoadMultipleLoadsRa) => their_mnemonic == ".long",
                Err(InsnError::ReservedTlbWord) => {
                    their_mnemonic == ".long"
                        || their_mnemonic == "tlbwe"
                        || their_mnemonic == "tlbre"
                }
                _ => false,
            },
            insn => {
                let reserved = v.word & insn.reserved_mask();
                if reserved == 0 {
                    insn.to_string() == theirs && encode(&insn) == v.word
                } else {
                    // objdump rejects the word, or decodes a Power ISA field there.
                    let objdump_ok = their_mnemonic == ".long"
                        || (OBJDUMP_ACCEPTS_RESERVED.contains(&their_mnemonic)
                            && insn.mnemonic() == their_mnemonic);
                    objdump_ok
                        && decode(v.word & !insn.reserved_mask()) == insn
                        && encode(&insn) == v.word & !insn.reserved_mask()
                }
            }
        };
        if !ok {
            failures.push(format!(
                "line {}: {:08x}: objdump `{}`, decoder `{}` ({:?})",
                v.line, v.word, v.text, ours, ours
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn hand_written_vectors_cover_every_modeled_mnemonic() {
    let seen: BTreeSet<&str> = vectors()
        .iter()
        .map(|v| decode(v.word))
        .filter(|i| !matches!(i, Insn::Other(_) | Insn::Invalid(_)))
        .map(|i| i.mnemonic())
        .collect();
    let missing: Vec<_> = modeled_mnemonics().difference(&seen).copied().collect();
    assert!(missing.is_empty(), "no vector for {missing:?}");
}

#[test]
fn instructions_the_440_lacks_stay_other() {
    let lacking: Vec<_> = vectors()
        .into_iter()
        .filter(|v| {
            NOT_ON_440
                .iter()
                .any(|m| v.text.starts_with(&format!("{m} ")))
        })
        .collect();
    assert!(lacking.len() >= NOT_ON_440.len());
    for v in lacking {
        assert_eq!(
            decode(v.word),
            Insn::Other(v.word),
            "line {}: {}",
            v.line,
            v.text
        );
    }
    // `wait` (0x7c00007c) is rejected by `as -m440`, so insns.s has it as a .long.
    assert_eq!(decode(0x7c00_007c), Insn::Other(0x7c00_007c));
}
