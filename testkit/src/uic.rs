//! The PPC440EP UIC's per-line reference model (plain booleans per line, registers
//! assembled bit by bit, written independently of `kestrel_devices::Uic`'s bit masks) and
//! the UIC's invariants, checked after every step by `devices/tests/props.rs` and the
//! `uic` fuzz target.

use kestrel_devices::uic::reg;
use kestrel_devices::Uic;

/// One input line of the reference.
#[derive(Clone, Copy, Default)]
pub struct RefLine {
    pub status: bool,
    pub enabled: bool,
    pub critical: bool,
    pub active_high: bool,
    pub edge: bool,
    pub input: bool,
    pub driven: bool,
}

/// The reference UIC: lines indexed by their number, registers assembled bit by bit.
pub struct RefUic {
    pub lines: [RefLine; 32],
    pub vcr: u32,
    /// Whether PR applies (`Uic::new`) or inputs are taken as they are
    /// (`Uic::without_polarity`, QEMU's behaviour).
    pub polarity: bool,
}

/// Register bit for line `n`: the manual numbers bits from the most significant end.
fn bit_of(value: u32, n: usize) -> bool {
    value & (0x8000_0000 >> n) != 0
}

impl RefUic {
    pub fn new(polarity: bool) -> Self {
        Self {
            lines: [RefLine::default(); 32],
            vcr: 0,
            polarity,
        }
    }

    /// Whether line `l` is at its active level (only driven lines can be).
    pub fn asserted(&self, l: &RefLine) -> bool {
        l.driven
            && if self.polarity {
                l.input == l.active_high
            } else {
                l.input
            }
    }

    /// The register word whose bit `n` is `f(line n)`.
    pub fn gather(&self, f: impl Fn(&RefLine) -> bool) -> u32 {
        (0..32)
            .filter(|&n| f(&self.lines[n]))
            .fold(0, |a, n| a | (0x8000_0000u32 >> n))
    }

    pub fn read(&self, offset: u32) -> u32 {
        match offset {
            0 | 1 => self.gather(|l| l.status),
            2 => self.gather(|l| l.enabled),
            3 => self.gather(|l| l.critical),
            4 => self.gather(|l| l.active_high),
            5 => self.gather(|l| l.edge),
            6 => self.gather(|l| l.status && l.enabled),
            7 => self.vector(),
            8 => self.vcr,
            _ => 0,
        }
    }

    /// QEMU's vector search: from the least significant bit up, unless PRO is set.
    fn vector(&self) -> u32 {
        let cr = self.gather(|l| l.status && l.enabled && l.critical);
        if cr == 0 {
            return 0;
        }
        let base = self.vcr & 0xFFFF_FFFC;
        if self.vcr & 1 != 0 {
            return base;
        }
        base.wrapping_add(cr.trailing_zeros() * 512)
    }

    pub fn write(&mut self, offset: u32, value: u32) {
        for n in 0..32 {
            let v = bit_of(value, n);
            let before = self.asserted(&self.lines[n]);
            let l = &mut self.lines[n];
            match offset {
                0 => l.status &= !v,
                1 => l.status |= v,
                2 => l.enabled = v,
                3 => l.critical = v,
                4 => l.active_high = v,
                5 => l.edge = v,
                _ => {}
            }
            let now = self.asserted(&self.lines[n]);
            let l = &mut self.lines[n];
            if matches!(offset, 0 | 4 | 5) && !l.edge {
                if now {
                    l.status = true;
                } else if before {
                    l.status = false;
                }
            }
        }
        if offset == 8 {
            self.vcr = value & 0xFFFF_FFFD;
        }
    }

    pub fn set_input(&mut self, line: u32, level: bool) {
        let Ok(n) = usize::try_from(line) else { return };
        if n >= 32 {
            return;
        }
        let before = self.asserted(&self.lines[n]);
        self.lines[n].input = level;
        self.lines[n].driven = true;
        let now = self.asserted(&self.lines[n]);
        let l = &mut self.lines[n];
        if l.edge {
            if now && !before {
                l.status = true;
            }
        } else {
            l.status = now;
        }
    }
}

/// The UIC's invariants, and agreement with `reference` on every register offset 0..12:
/// reads have no side effects; MSR = SR & ER; the outputs follow MSR and CR; VCR bit 30
/// never sticks; asserted level-sensitive lines keep their SR bit; only driven lines are
/// asserted. Panics on a violation.
pub fn check(uic: &Uic, reference: &RefUic) {
    let mut copy = uic.clone();
    let sr = copy.read_dcr(reg::SR);
    let er = copy.read_dcr(reg::ER);
    let cr = copy.read_dcr(reg::CR);
    let msr = copy.read_dcr(reg::MSR);
    assert_eq!(&copy, uic, "DCR reads have no side effects");
    assert_eq!(msr, sr & er, "MSR == SR & ER");
    assert_eq!(copy.read_dcr(reg::SRS), sr);
    assert_eq!(uic.masked_status(), msr);
    assert_eq!(uic.irq_output(), msr & !cr != 0);
    assert_eq!(uic.crit_output(), msr & cr != 0);
    assert_eq!(copy.read_dcr(reg::VCR) & 0x2, 0, "VCR bit 30 never sticks");
    for offset in 0..12 {
        assert_eq!(
            copy.read_dcr(offset),
            reference.read(offset),
            "offset {offset}"
        );
    }
    let tr = copy.read_dcr(reg::TR);
    let asserted = uic.asserted();
    assert_eq!(
        sr & asserted & !tr,
        asserted & !tr,
        "asserted level lines keep SR"
    );
    assert_eq!(
        asserted,
        reference.gather(|l| reference.asserted(l)),
        "only driven lines are asserted"
    );
}
