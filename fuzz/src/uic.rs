//! Target `uic`: the PPC440EP UIC model (`kestrel_devices::Uic`) under arbitrary
//! `mfdcr`/`mtdcr` traffic and input-line changes, against the per-line reference model
//! of `devices/tests/props.rs` (plain booleans per line, registers assembled bit by bit).
//!
//! Input: a polarity byte (`Uic::new` or QEMU's `without_polarity`), then operations:
//! read, write (offsets mostly 0..10, now and then any `u32`), drive a line (mostly
//! 0..32). After every step: every register offset 0..12 reads as the reference says;
//! reads have no side effects; MSR = SR & ER; the outputs follow MSR and CR; VCR bit 30
//! never sticks; asserted level-sensitive lines keep their SR bit; only driven lines are
//! asserted.

use crate::input::{Input, SeedWriter};
use kestrel_devices::uic::reg;
use kestrel_devices::Uic;

#[derive(Clone, Copy, Default)]
struct RefLine {
    status: bool,
    enabled: bool,
    critical: bool,
    active_high: bool,
    edge: bool,
    input: bool,
    driven: bool,
}

struct RefUic {
    lines: [RefLine; 32],
    vcr: u32,
    polarity: bool,
}

/// Register bit for line `n`: the manual numbers bits from the most significant end.
fn bit_of(value: u32, n: usize) -> bool {
    value & (0x8000_0000 >> n) != 0
}

impl RefUic {
    fn new(polarity: bool) -> Self {
        Self {
            lines: [RefLine::default(); 32],
            vcr: 0,
            polarity,
        }
    }

    fn asserted(&self, l: &RefLine) -> bool {
        l.driven
            && if self.polarity {
                l.input == l.active_high
            } else {
                l.input
            }
    }

    fn gather(&self, f: impl Fn(&RefLine) -> bool) -> u32 {
        (0..32)
            .filter(|&n| f(&self.lines[n]))
            .fold(0, |a, n| a | (0x8000_0000u32 >> n))
    }

    fn read(&self, offset: u32) -> u32 {
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

    fn write(&mut self, offset: u32, value: u32) {
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

    fn set_input(&mut self, line: u32, level: bool) {
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

/// Operation selectors, for [`seed`].
pub mod op {
    pub const READ: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const INPUT: u8 = 2;
    pub const COUNT: u8 = 3;
}

/// A small number mostly below `n`, `0xFF` escaping to any `u32`.
fn small(input: &mut Input, n: u32) -> u32 {
    match input.u8() {
        0xFF => input.u32(),
        b => u32::from(b) % n,
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let polarity = input.bool();
    let mut uic = if polarity {
        Uic::new()
    } else {
        Uic::without_polarity()
    };
    let mut reference = RefUic::new(polarity);
    check(&uic, &reference);
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::READ => {
                let offset = small(&mut input, 10);
                assert_eq!(
                    uic.read_dcr(offset),
                    reference.read(offset),
                    "read {offset}"
                );
            }
            op::WRITE => {
                let offset = small(&mut input, 10);
                let value = input.u32();
                uic.write_dcr(offset, value);
                reference.write(offset, value);
            }
            _ => {
                let line = small(&mut input, 32);
                let level = input.bool();
                uic.set_input(line, level);
                reference.set_input(line, level);
            }
        }
        check(&uic, &reference);
    }
}

fn check(uic: &Uic, reference: &RefUic) {
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
        "asserted lines"
    );
}

/// One operation of a seed.
pub enum Op {
    Read(u32),
    Write(u32, u32),
    Input(u32, bool),
}

/// Encodes `ops` (with `polarity`) as an input of this target.
pub fn seed(polarity: bool, ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    w.bool(polarity);
    let put_small = |w: &mut SeedWriter, v: u32, n: u32| {
        if v < n {
            w.u8(v as u8);
        } else {
            w.u8(0xFF).u32(v);
        }
    };
    for o in ops {
        match *o {
            Op::Read(off) => {
                w.u8(op::READ);
                put_small(&mut w, off, 10);
            }
            Op::Write(off, v) => {
                w.u8(op::WRITE);
                put_small(&mut w, off, 10);
                w.u32(v);
            }
            Op::Input(line, level) => {
                w.u8(op::INPUT);
                put_small(&mut w, line, 32);
                w.bool(level);
            }
        }
    }
    w.bytes
}
