//! Target `decode`: the instruction decoder (`kestrel_ppc440::decode`), which the kernel's
//! emulator and the VMM's fault path run on every word a guest traps with.
//!
//! Input: big-endian instruction words; each word also rotates into one register of a
//! register file the effective-address checks use. Checked for every word:
//! - `decode` and `try_decode` agree, and `Invalid` comes only from `try_decode` errors;
//! - the round trip: `encode(decode(w)) == w & !reserved_mask` for modeled words, with
//!   the reserved bits really ignored, and `Other`/`Invalid` keep the word as it is;
//! - `Display` starts with the mnemonic and never panics;
//! - loads and stores: `writes_memory` says store exactly for the stores, the effective
//!   address is `(RA|0) + d` or `(RA|0) + (RB)`, results and store data fit their width
//!   (sign extension only for `lha*`), byte reversal is an involution.

use crate::input::Input;
use kestrel_ppc440::decode::{
    decode, encode, try_decode, writes_memory, AccessKind, AddrMode, Insn, Width,
};

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut gpr = [0u32; 32];
    let mut n = 0u32;
    while !input.is_empty() {
        let word = input.u32();
        check_word(word, &gpr);
        gpr[(n % 32) as usize] = word.rotate_left(n % 32);
        n = n.wrapping_add(1);
    }
}

/// Every property of one word, with register file `gpr`.
pub fn check_word(word: u32, gpr: &[u32; 32]) {
    let insn = decode(word);
    match try_decode(word) {
        Ok(i) => {
            assert_eq!(i, insn, "{word:#010x}: decode and try_decode disagree");
            assert!(
                !matches!(i, Insn::Invalid(_)),
                "{word:#010x}: try_decode gave Invalid"
            );
        }
        Err(e) => {
            assert_eq!(insn, Insn::Invalid(word), "{word:#010x}: {e}");
            assert!(!e.as_str().is_empty());
        }
    }
    let text = insn.to_string();
    assert!(text.starts_with(insn.mnemonic()), "{word:#010x}: {text}");
    let _ = insn.is_privileged();
    match insn {
        Insn::Other(w) | Insn::Invalid(w) => {
            assert_eq!(w, word);
            assert_eq!(
                encode(&insn),
                word,
                "{word:#010x}: unmodeled words encode as is"
            );
            assert_eq!(insn.reserved_mask(), 0);
        }
        _ => {
            let reserved = insn.reserved_mask();
            let canonical = encode(&insn);
            assert_eq!(
                canonical,
                word & !reserved,
                "{word:#010x} ({text}): round trip"
            );
            assert_eq!(
                decode(canonical),
                insn,
                "{word:#010x}: canonical form decodes"
            );
            assert_eq!(
                decode(word | reserved),
                insn,
                "{word:#010x}: reserved bits ignored"
            );
        }
    }
    if matches!(insn, Insn::Dcbz { .. }) {
        assert!(writes_memory(word), "{word:#010x}: dcbz writes");
    }
    let ea = insn.effective_address(gpr);
    let Insn::LoadStore(ls) = insn else {
        return;
    };
    assert_eq!(ea, Some(ls.effective_address(gpr)));
    assert_eq!(
        writes_memory(word),
        ls.kind() == AccessKind::Store,
        "{word:#010x} ({text}): writes_memory"
    );
    let base = if ls.ra().number() == 0 {
        0
    } else {
        gpr[ls.ra().index()]
    };
    let offset = match ls.addr() {
        AddrMode::D { d } => d as i32 as u32,
        AddrMode::X { rb } => gpr[rb.index()],
    };
    assert_eq!(ls.effective_address(gpr), base.wrapping_add(offset));
    assert!(
        (1..=128).contains(&ls.access_len()),
        "{text}: access length"
    );
    if ls.update() {
        assert_ne!(
            ls.ra().number(),
            0,
            "{text}: update form with RA = 0 decoded"
        );
    }
    if ls.is_fp() || ls.op().multiple() {
        let _ = (
            ls.fp_load_result(u64::from(word)),
            ls.fp_store_data(u64::from(word)),
        );
        return;
    }
    let bits = 8 * ls.width().bytes();
    assert!(bits <= 32, "{text}: integer access wider than a GPR");
    let raw = gpr[(word % 32) as usize];
    let result = ls.load_result(raw);
    let stored = ls.store_data(raw);
    if bits < 32 {
        let fits = |v: u32| v >> bits == 0;
        assert!(
            fits(stored),
            "{text}: store data {stored:#x} wider than {bits} bits"
        );
        if ls.sign_extend() {
            assert_eq!(ls.width(), Width::Half, "{text}: only lha* sign-extend");
            let signed = result as i32;
            assert!((-0x8000..0x8000).contains(&signed), "{text}: {result:#x}");
        } else {
            assert!(
                fits(result),
                "{text}: load result {result:#x} wider than {bits} bits"
            );
        }
    }
    if ls.byte_reverse() && !ls.sign_extend() {
        // A byte-reversed load of a byte-reversed store gives the register back.
        let mask = if bits == 32 {
            u32::MAX
        } else {
            (1 << bits) - 1
        };
        assert_eq!(ls.load_result(ls.store_data(raw)), raw & mask, "{text}");
    }
}
