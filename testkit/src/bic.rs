//! The BG/P interrupt controller's per-line reference model (a status, a level and a
//! target code per line, the registers assembled bit by bit, written independently of
//! `kestrel_devices::Bic`'s masks) and the BIC's invariants, checked after every step by
//! `devices/tests/bgp_props.rs` and the `bic` fuzz target.

use alloc::vec;
use alloc::vec::Vec;
use kestrel_devices::bic::{line_mask, Bic, SIZE};

/// One of the 480 lines of the reference.
#[derive(Clone, Copy, Default)]
pub struct RefLine {
    pub status: bool,
    pub level: bool,
    pub target: u32,
}

/// The reference BIC: 15 groups of 32 lines.
pub struct RefBic {
    pub lines: Vec<RefLine>,
}

impl Default for RefBic {
    fn default() -> Self {
        Self::new()
    }
}

impl RefBic {
    pub fn new() -> Self {
        Self {
            lines: vec![RefLine::default(); 480],
        }
    }

    fn line(g: u32, i: u32) -> usize {
        (g * 32 + i) as usize
    }

    fn word(&self, g: u32, f: impl Fn(&RefLine) -> bool) -> u32 {
        (0..32)
            .filter(|&i| f(&self.lines[Self::line(g, i)]))
            .fold(0, |a, i| a | (0x8000_0000u32 >> i))
    }

    /// Whether `target` sends to `core` as class `k` (0 non-critical, 1 critical, 2 mchk).
    fn routed(target: u32, core: u32, k: u32) -> bool {
        target == k + 1 || target == ((k + 1) << 2 | core)
    }

    fn pending(&self, g: u32, core: u32, k: u32) -> u32 {
        self.word(g, |l| l.status && Self::routed(l.target, core, k))
    }

    /// A 4-byte read at `off` (RD_CLR_STATUS has its side effect).
    pub fn read(&mut self, off: u32) -> u32 {
        if !off.is_multiple_of(4) {
            return 0;
        }
        if off < 15 * 0x80 {
            let (g, r) = (off / 0x80, off % 0x80);
            return match r {
                0 => self.word(g, |l| l.status),
                4 => {
                    let v = self.word(g, |l| l.status);
                    for i in 0..32 {
                        let l = &mut self.lines[Self::line(g, i)];
                        l.status = l.level;
                    }
                    v
                }
                0x10..=0x1C => {
                    let w = (r - 0x10) / 4;
                    (0..8).fold(0, |a, j| {
                        a | self.lines[Self::line(g, w * 8 + j)].target << ((7 - j) * 4)
                    })
                }
                0x20..=0x4C => self.pending(g, (r % 16) / 4, (r - 0x20) / 16),
                _ => 0,
            };
        }
        if (0x780..0x7B0).contains(&off) {
            let (k, core) = ((off - 0x780) / 16, (off % 16) / 4);
            return (0..15)
                .filter(|&g| self.pending(g, core, k) != 0)
                .fold(0, |a, g| a | (0x8000_0000 >> g));
        }
        0
    }

    /// A 4-byte write of `v` at `off`.
    pub fn write(&mut self, off: u32, v: u32) {
        if !off.is_multiple_of(4) || off >= 15 * 0x80 {
            return;
        }
        let (g, r) = (off / 0x80, off % 0x80);
        for i in 0..32 {
            let bit = v & (0x8000_0000 >> i) != 0;
            let l = &mut self.lines[Self::line(g, i)];
            match r {
                0 => l.status = bit || l.level,
                8 => l.status = (l.status && !bit) || l.level,
                0xC => l.status |= bit,
                0x10..=0x1C if i / 8 == (r - 0x10) / 4 => l.target = (v >> ((7 - i % 8) * 4)) & 0xF,
                _ => {}
            }
        }
    }

    /// A device drives line `irq` (out of range: ignored).
    pub fn set_line(&mut self, irq: u32, level: bool) {
        if let Some(l) = self.lines.get_mut(irq as usize) {
            if level {
                l.status = true;
            } else if l.level {
                l.status = false;
            }
            l.level = level;
        }
    }

    /// All 15 groups driven at once (bit `line_mask(irq)` of word `irq / 32`).
    pub fn set_lines(&mut self, words: &[u32; 15]) {
        for irq in 0..480u32 {
            self.set_line(irq, words[(irq / 32) as usize] & line_mask(irq) != 0);
        }
    }
}

/// After every step: every register of the window reads as the reference says
/// (RD_CLR_STATUS excepted: it has a side effect), reads have no other side effects,
/// asserted lines are pending, and the three outputs of every core follow the HIER
/// registers. Panics on a violation.
pub fn check(bic: &Bic, reference: &mut RefBic) {
    let mut copy = bic.clone();
    for off in (0..SIZE as u32).step_by(4) {
        if off % 0x80 == 4 && off < 0x780 {
            continue; // RD_CLR_STATUS has a side effect
        }
        assert_eq!(copy.read(off), reference.read(off), "offset {off:#x}");
    }
    assert_eq!(
        &copy, bic,
        "reads other than RD_CLR_STATUS have no side effects"
    );
    for g in 0..15 {
        assert_eq!(
            bic.status(g) & bic.levels(g),
            bic.levels(g),
            "asserted lines pending"
        );
    }
    for core in 0..4 {
        assert_eq!(bic.ncrit_output(core), copy.read(0x780 + 4 * core) != 0);
        assert_eq!(bic.crit_output(core), copy.read(0x790 + 4 * core) != 0);
        assert_eq!(bic.mchk_output(core), copy.read(0x7A0 + 4 * core) != 0);
    }
}
