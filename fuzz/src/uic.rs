//! Target `uic`: the PPC440EP UIC model (`kestrel_devices::Uic`) under arbitrary
//! `mfdcr`/`mtdcr` traffic and input-line changes, against the per-line reference model
//! `kestrel_testkit::uic` (plain booleans per line, registers assembled bit by bit; shared
//! with `devices/tests/props.rs`).
//!
//! Input: a polarity byte (`Uic::new` or QEMU's `without_polarity`), then operations:
//! read, write (offsets mostly 0..10, now and then any `u32`), drive a line (mostly
//! 0..32). After every step: every register offset 0..12 reads as the reference says;
//! reads have no side effects; MSR = SR & ER; the outputs follow MSR and CR; VCR bit 30
//! never sticks; asserted level-sensitive lines keep their SR bit; only driven lines are
//! asserted.

use crate::input::{Input, SeedWriter};
use kestrel_devices::Uic;
use kestrel_testkit::uic::{check, RefUic};

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
