//! Target `bic`: the BG/P interrupt controller model (`kestrel_devices::Bic`) under
//! arbitrary MMIO traffic and device-line changes, against a per-line reference model (the
//! one of `devices/tests/bgp_props.rs`: a status, a level and a target code per line, the
//! registers assembled bit by bit).
//!
//! Input: operations, one selector byte each: read or write (offset: a `u16`, width: a
//! byte, mostly 4), drive one line (mostly 0..480), drive all 15 groups at once. After every
//! step: every register of the window reads as the reference says (RD_CLR_STATUS excepted:
//! it has a side effect), reads have no other side effects, asserted lines are pending,
//! and the three outputs of every core follow the HIER registers.

use crate::input::{Input, SeedWriter};
use kestrel_devices::bic::{line_mask, Bic, SIZE};
use kestrel_devices::bus::MmioDevice;

#[derive(Clone, Copy, Default)]
struct RefLine {
    status: bool,
    level: bool,
    target: u32,
}

struct RefBic {
    lines: Vec<RefLine>,
}

impl RefBic {
    fn new() -> Self {
        Self {
            lines: vec![RefLine::default(); 480],
        }
    }

    fn word(&self, g: u32, f: impl Fn(&RefLine) -> bool) -> u32 {
        (0..32)
            .filter(|&i| f(&self.lines[(g * 32 + i) as usize]))
            .fold(0, |a, i| a | (0x8000_0000u32 >> i))
    }

    /// Whether `target` sends to `core` as class `k` (0 non-critical, 1 critical, 2 mchk).
    fn routed(target: u32, core: u32, k: u32) -> bool {
        target == k + 1 || target == ((k + 1) << 2 | core)
    }

    fn pending(&self, g: u32, core: u32, k: u32) -> u32 {
        self.word(g, |l| l.status && Self::routed(l.target, core, k))
    }

    fn read(&mut self, off: u32) -> u32 {
        if !off.is_multiple_of(4) {
            return 0;
        }
        if off < 15 * 0x80 {
            let (g, r) = (off / 0x80, off % 0x80);
            return match r {
                0 => self.word(g, |l| l.status),
                4 => {
                    let v = self.word(g, |l| l.status);
                    for l in &mut self.lines[(g * 32) as usize..][..32] {
                        l.status = l.level;
                    }
                    v
                }
                0x10..=0x1C => {
                    let w = (r - 0x10) / 4;
                    (0..8).fold(0, |a, j| {
                        a | self.lines[(g * 32 + w * 8 + j) as usize].target << ((7 - j) * 4)
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

    fn write(&mut self, off: u32, v: u32) {
        if !off.is_multiple_of(4) || off >= 15 * 0x80 {
            return;
        }
        let (g, r) = (off / 0x80, off % 0x80);
        for i in 0..32 {
            let bit = v & (0x8000_0000 >> i) != 0;
            let l = &mut self.lines[(g * 32 + i) as usize];
            match r {
                0 => l.status = bit || l.level,
                8 => l.status = (l.status && !bit) || l.level,
                0xC => l.status |= bit,
                0x10..=0x1C if i / 8 == (r - 0x10) / 4 => l.target = (v >> ((7 - i % 8) * 4)) & 0xF,
                _ => {}
            }
        }
    }

    fn set_line(&mut self, irq: u32, level: bool) {
        if let Some(l) = self.lines.get_mut(irq as usize) {
            if level {
                l.status = true;
            } else if l.level {
                l.status = false;
            }
            l.level = level;
        }
    }
}

/// Operation selectors, for [`seed`].
pub mod op {
    pub const READ: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const LINE: u8 = 2;
    pub const LINES: u8 = 3;
    pub const COUNT: u8 = 4;
}

/// An access width: mostly 4.
fn width(input: &mut Input) -> usize {
    match input.u8() {
        b @ 0..=7 => usize::from(b),
        _ => 4,
    }
}

/// A line number: mostly 0..480, `0xFFFF` escaping to any `u32`.
fn line(input: &mut Input) -> u32 {
    match input.u16() {
        0xFFFF => input.u32(),
        v => u32::from(v) % 480,
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut bic = Bic::new();
    let mut reference = RefBic::new();
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::READ => {
                let off = input.u16();
                let w = width(&mut input);
                let mut buf = vec![0u8; w];
                match bic.mmio_read(u64::from(off), &mut buf) {
                    Ok(()) => {
                        let got = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
                        assert_eq!(got, reference.read(u32::from(off)), "read {off:#x}");
                    }
                    Err(_) => assert!(w != 4 || !off.is_multiple_of(4) || u64::from(off) >= SIZE),
                }
            }
            op::WRITE => {
                let off = input.u16();
                let w = width(&mut input);
                let v = input.u32();
                let mut buf = v.to_be_bytes().to_vec();
                buf.resize(w, 0);
                if bic.mmio_write(u64::from(off), &buf).is_ok() {
                    reference.write(u32::from(off), v);
                }
            }
            op::LINE => {
                let irq = line(&mut input);
                let level = input.bool();
                bic.set_line(irq, level);
                reference.set_line(irq, level);
            }
            _ => {
                let mut words = [0u32; 15];
                for w in &mut words {
                    *w = input.u32();
                }
                bic.set_lines(&words);
                for irq in 0..480u32 {
                    reference.set_line(irq, words[(irq / 32) as usize] & line_mask(irq) != 0);
                }
            }
        }
        check(&bic, &mut reference);
    }
}

fn check(bic: &Bic, reference: &mut RefBic) {
    let mut copy = bic.clone();
    for off in (0..SIZE as u32).step_by(4) {
        if off % 0x80 == 4 && off < 0x780 {
            continue;
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

/// One operation of a seed.
pub enum Op {
    Read(u16),
    Write(u16, u32),
    Line(u32, bool),
    Lines([u32; 15]),
}

/// Encodes `ops` as an input of this target (4-byte accesses).
pub fn seed(ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    for o in ops {
        match *o {
            Op::Read(off) => {
                w.u8(op::READ).u16(off).u8(4);
            }
            Op::Write(off, v) => {
                w.u8(op::WRITE).u16(off).u8(4).u32(v);
            }
            Op::Line(irq, level) => {
                w.u8(op::LINE).u16(irq as u16).bool(level);
            }
            Op::Lines(words) => {
                w.u8(op::LINES);
                for x in words {
                    w.u32(x);
                }
            }
        }
    }
    w.bytes
}
