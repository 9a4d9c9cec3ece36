//! Target `collective`: the collective network model (`kestrel_devices::collective`) under
//! arbitrary loads and stores in its two VC windows, DCR traffic and a backend that fills
//! up, with the checks of `kestrel_testkit::collective` (shared with
//! `devices/tests/bgp_props.rs`).
//!
//! Input: operations, one selector byte each: load or store (VC, offset `u16`, width byte:
//! mostly 4, 8 or 16), a whole well-formed packet (header + 64 word stores), DCR read or
//! write, backend full or not. The backend is the testkit's loopback (8 packets per VC,
//! refusing a ninth) that checks the VC and DCR numbers it is given. After every step: the
//! model's PRXF/PIXF bits are only the ones it documents; its interrupt lines are only
//! 0xB4..0xB7; every packet injected carries a header the guest stored on that VC; and a
//! packet sent whole while the backend had room comes back byte for byte through HR and DR.

use crate::input::{Input, SeedWriter};
use kestrel_bgp::coll::HI;
use kestrel_devices::bus::MmioDevice;
use kestrel_devices::collective::{Collective, PAYLOAD, VC_STRIDE};
use kestrel_testkit::collective::{check, send, Loopback};

/// Operation selectors, for [`seed`].
pub mod op {
    pub const LOAD: u8 = 0;
    pub const STORE: u8 = 1;
    pub const PACKET: u8 = 2;
    pub const ROUND_TRIP: u8 = 3;
    pub const DCR_READ: u8 = 4;
    pub const DCR_WRITE: u8 = 5;
    pub const FULL: u8 = 6;
    pub const COUNT: u8 = 7;
}

fn width(input: &mut Input) -> usize {
    match input.u8() {
        b @ 0..=16 => usize::from(b),
        b => [4, 8, 16][usize::from(b % 3)],
    }
}

fn address(input: &mut Input) -> u64 {
    let vc = u64::from(input.u8() % 3);
    vc * VC_STRIDE + u64::from(input.u16())
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut c = Collective::new(Loopback::default());
    let mut headers: [Vec<u32>; 2] = [vec![], vec![]];
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::LOAD => {
                let a = address(&mut input);
                let w = width(&mut input);
                let mut buf = vec![0u8; w];
                let _ = c.mmio_read(a, &mut buf);
            }
            op::STORE => {
                let a = address(&mut input);
                let w = width(&mut input);
                let v = input.u32();
                let buf: Vec<u8> = v.to_be_bytes().iter().copied().cycle().take(w).collect();
                if c.mmio_write(a, &buf).is_ok() && a % VC_STRIDE == u64::from(HI) && w == 4 {
                    headers[(a / VC_STRIDE) as usize].push(v);
                }
            }
            op::PACKET => {
                let vc = usize::from(input.u8() % 2);
                let h = input.u32();
                headers[vc].push(h);
                send(&mut c, vc, h, &[input.u8(); PAYLOAD]);
            }
            op::ROUND_TRIP => {
                // A fresh model: what goes in whole comes out whole.
                let vc = usize::from(input.u8() % 2);
                let h = input.u32();
                let mut p = [0u8; PAYLOAD];
                for (i, b) in p.iter_mut().enumerate() {
                    *b = input.u8() ^ i as u8;
                }
                let mut fresh = Collective::new(Loopback::default());
                send(&mut fresh, vc, h, &p);
                let base = vc as u64 * VC_STRIDE;
                let mut w = [0u8; 4];
                fresh.mmio_read(base + 0x30, &mut w).expect("HR decodes");
                assert_eq!(u32::from_be_bytes(w), h);
                let mut got = [0u8; PAYLOAD];
                for q in got.chunks_mut(8) {
                    fresh.mmio_read(base + 0x20, q).expect("DR decodes");
                }
                assert_eq!(got, p);
                assert_eq!(fresh.flags(), (0, 0));
                assert!(fresh.take_diagnostic().is_none());
            }
            op::DCR_READ => {
                let o = input.u32() % 0x100;
                let _ = c.read_dcr(o);
            }
            op::DCR_WRITE => {
                let o = input.u32() % 0x100;
                let v = input.u32();
                c.write_dcr(o, v);
            }
            _ => c.backend_mut().full = input.bool(),
        }
        check(&mut c, &headers);
    }
}

/// One operation of a seed.
pub enum Op {
    Load(u8, u16, u8),
    Store(u8, u16, u8, u32),
    Packet(u8, u32, u8),
    RoundTrip(u8, u32),
    DcrRead(u32),
    DcrWrite(u32, u32),
    Full(bool),
}

/// Encodes `ops` as an input of this target.
pub fn seed(ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    for o in ops {
        match *o {
            Op::Load(vc, off, width) => {
                w.u8(op::LOAD).u8(vc).u16(off).u8(width);
            }
            Op::Store(vc, off, width, v) => {
                w.u8(op::STORE).u8(vc).u16(off).u8(width).u32(v);
            }
            Op::Packet(vc, h, fill) => {
                w.u8(op::PACKET).u8(vc).u32(h).u8(fill);
            }
            Op::RoundTrip(vc, h) => {
                w.u8(op::ROUND_TRIP).u8(vc).u32(h);
                for i in 0..PAYLOAD {
                    w.u8(i as u8);
                }
            }
            Op::DcrRead(o) => {
                w.u8(op::DCR_READ).u32(o);
            }
            Op::DcrWrite(o, v) => {
                w.u8(op::DCR_WRITE).u32(o).u32(v);
            }
            Op::Full(f) => {
                w.u8(op::FULL).bool(f);
            }
        }
    }
    w.bytes
}
