//! Target `torus`: the torus DMA model (`kestrel_devices::torus`, the Fig. 6 front) under
//! arbitrary group-page and DCR traffic, with values clustered around the VM's segment and
//! its bus window, and arbitrary values from the backend.
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
use kestrel_bgp::bic::line_mask;
use kestrel_bgp::dma::{ERR_DESCRIPTOR, ERR_RANGE, IRQ_FATAL};
use kestrel_devices::bus::{DcrDevice, MmioDevice};
use kestrel_devices::torus::{DmaBackend, TorusDma, TORUS_DCR_BASE};

/// 4 MiB at guest-physical 16 MiB, bus 2 GiB.
pub const GPA: u64 = 0x100_0000;
pub const SEG: u64 = 0x40_0000;
pub const BUS: u64 = 0x8000_0000;

/// Records forwarded writes; reads return `value`, or what was last written there.
#[derive(Default)]
struct Rec {
    page: Vec<(u32, u32)>,
    dcrs: Vec<(u32, u32)>,
    value: Option<u32>,
}

impl DmaBackend for Rec {
    fn read(&mut self, offset: u32) -> u32 {
        assert!(offset < 0x1000 && offset.is_multiple_of(4));
        self.value.unwrap_or_else(|| {
            self.page
                .iter()
                .rev()
                .find(|w| w.0 == offset)
                .map_or(0, |w| w.1)
        })
    }
    fn write(&mut self, offset: u32, value: u32) {
        assert!(offset < 0x1000 && offset.is_multiple_of(4));
        self.page.push((offset, value));
    }
    fn dcr_read(&mut self, dcr: u32) -> u32 {
        assert!((0xC80..0xE00).contains(&dcr));
        self.value.unwrap_or(0)
    }
    fn dcr_write(&mut self, dcr: u32, value: u32) {
        assert!((0xC80..0xE00).contains(&dcr));
        self.dcrs.push((dcr, value));
    }
}

fn is_addr(off: u32) -> bool {
    let reg = off % 16;
    off < 0x200
        || (0x800..0x890).contains(&off)
        || ((0x400..0x800).contains(&off) && reg == 8)
        || (off >= 0xC00 && reg >= 8)
}

fn is_window(dcr: u32) -> bool {
    (0xD02..0xD12).contains(&dcr) || (0xD14..0xD24).contains(&dcr)
}

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
    let mut t = TorusDma::new(Rec::default(), GPA, SEG, BUS);
    let (bus_lo, bus_hi) = ((BUS >> 4) as u32, ((BUS + SEG) >> 4) as u32);
    let (g_lo, g_hi) = ((GPA >> 4) as u32, ((GPA + SEG) >> 4) as u32);
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
                        assert!(got == 0 || (g_lo..=g_hi).contains(&got), "{got:#x}");
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
                    assert!(got == 0 || (g_lo..=g_hi).contains(&got));
                }
                t.backend_mut().value = None;
            }
            _ => {
                let d = u32::from(input.u16());
                let v = value(&mut input);
                t.dcr_write(d, v);
            }
        }
        for &(off, v) in &t.backend().page {
            if is_addr(off) {
                assert!((bus_lo..=bus_hi).contains(&v), "page {off:#x} = {v:#x}");
            }
        }
        for &(dcr, v) in &t.backend().dcrs {
            if is_window(dcr) {
                assert!((bus_lo..bus_hi).contains(&v), "window {dcr:#x} = {v:#x}");
            }
        }
        let mut lines = [0u32; 15];
        t.irq_lines(&mut lines);
        let g = (IRQ_FATAL / 32) as usize;
        for (i, w) in lines.iter().enumerate() {
            assert_eq!(*w & !(if i == g { line_mask(IRQ_FATAL) } else { 0 }), 0);
        }
        assert_eq!(t.fatal() & !(ERR_RANGE | ERR_DESCRIPTOR), 0);
        if let Some((d, _)) = t.take_diagnostic() {
            assert!(!d.to_string().is_empty());
        }
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
