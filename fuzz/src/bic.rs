//! Target `bic`: the BG/P interrupt controller model (`kestrel_devices::Bic`) under
//! arbitrary MMIO traffic and device-line changes, against the per-line reference model
//! `kestrel_testkit::bic` (a status, a level and a target code per line, the registers
//! assembled bit by bit; shared with `devices/tests/bgp_props.rs`).
//!
//! Input: operations, one selector byte each: read or write (offset: a `u16`, width: a
//! byte, mostly 4), drive one line (mostly 0..480), drive all 15 groups at once. After every
//! step: every register of the window reads as the reference says (RD_CLR_STATUS excepted:
//! it has a side effect), reads have no other side effects, asserted lines are pending,
//! and the three outputs of every core follow the HIER registers.

use crate::input::{Input, SeedWriter};
use kestrel_devices::bic::{Bic, SIZE};
use kestrel_devices::bus::MmioDevice;
use kestrel_testkit::bic::{check, RefBic};

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
                reference.set_lines(&words);
            }
        }
        check(&bic, &mut reference);
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
