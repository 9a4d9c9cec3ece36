//! Target `torus`: the torus DMA model (`kestrel_devices::torus`, the Fig. 6 front) under
//! arbitrary group-page and DCR traffic, with values clustered around the VM's segment and
//! its bus window, and arbitrary values from the backend (`kestrel_testkit::torus`: the
//! recorder and the window checks, shared with `devices/tests/bgp_props.rs`).
//!
//! Input: operations, one selector byte each: page read or write (offset `u16`, width byte,
//! value), DCR read or write (offset `u16` from 0xC80, value); a read also sets what the
//! backend returns. After every step: no address-carrying register or range window ever
//! reached the backend with a bus value outside the VM's window (windows: inside its last
//! quad); a guest read of an address register or window is 0 or guest-physical inside the
//! segment, and any other register reads as the backend said; the model's fatal bits are
//! `ERR_RANGE`/`ERR_DESCRIPTOR` only and its only line is `IRQ_FATAL`; and an address
//! register written with an in-segment value reads back that value.

use crate::input::{Input, SeedWriter};
use kestrel_devices::bus::{DcrDevice, MmioDevice};
use kestrel_devices::torus::TORUS_DCR_BASE;
use kestrel_testkit::torus::{check, guest_value_ok, is_addr, is_window, torus};
pub use kestrel_testkit::torus::{BUS, GPA, SEG};

/// Operation selectors, for [`seed`].
pub mod op {
    pub const READ: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const DCR_READ: u8 = 2;
    pub const DCR_WRITE: u8 = 3;
    pub const COUNT: u8 = 4;
}

/// A value: near the segment (selector 0), near the bus window (1), or any (2, 3).
fn value(input: &mut Input) -> u32 {
    let sel = input.u8() % 4;
    let v = input.u32();
    let near = |base: u64| (base >> 4) as u32 - 4 + v % ((SEG >> 4) as u32 + 8);
    match sel {
        0 => near(GPA),
        1 => near(BUS),
        _ => v,
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut t = torus();
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::READ => {
                let off = input.u16();
                let w = match input.u8() {
                    b @ 0..=8 => usize::from(b),
                    _ => 4,
                };
                let v = value(&mut input);
                t.backend_mut().value = input.bool().then_some(v);
                let mut buf = vec![0u8; w];
                if t.mmio_read(u64::from(off), &mut buf).is_ok() {
                    let got = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
                    if is_addr(u32::from(off)) {
                        assert!(guest_value_ok(got), "{got:#x}");
                    } else if let Some(v) = t.backend().value {
                        assert_eq!(got, v);
                    }
                }
                t.backend_mut().value = None;
            }
            op::WRITE => {
                let off = u32::from(input.u16());
                let v = value(&mut input);
                let before = t.backend().page.len();
                if t.mmio_write(u64::from(off), &v.to_be_bytes()).is_ok()
                    && is_addr(off)
                    && t.backend().page.len() > before
                {
                    assert_eq!(t.read(off), v, "an accepted address reads back");
                }
            }
            op::DCR_READ => {
                let d = u32::from(input.u16());
                let v = value(&mut input);
                t.backend_mut().value = Some(v);
                let got = t.dcr_read(d);
                if d < 0x180 && is_window(d + TORUS_DCR_BASE) {
                    assert!(guest_value_ok(got), "{got:#x}");
                }
                t.backend_mut().value = None;
            }
            _ => {
                let d = u32::from(input.u16());
                let v = value(&mut input);
                t.dcr_write(d, v);
            }
        }
        check(&mut t);
    }
}

/// One operation of a seed (values given raw: selector 2).
pub enum Op {
    Write(u16, u32),
    Read(u16),
    DcrWrite(u16, u32),
    DcrRead(u16),
}

/// Encodes `ops` as an input of this target.
pub fn seed(ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    for o in ops {
        match *o {
            Op::Write(off, v) => {
                w.u8(op::WRITE).u16(off).u8(2).u32(v);
            }
            Op::Read(off) => {
                w.u8(op::READ).u16(off).u8(4).u8(2).u32(0).bool(false);
            }
            Op::DcrWrite(d, v) => {
                w.u8(op::DCR_WRITE).u16(d).u8(2).u32(v);
            }
            Op::DcrRead(d) => {
                w.u8(op::DCR_READ).u16(d).u8(2).u32(0);
            }
        }
    }
    w.bytes
}
