//! Target `virtio_net`: the virtio-mmio network device (`kestrel_devices::virtio_net`)
//! brought up as Linux does (features, two 16-entry queues, DRIVER_OK), then driven with
//! arbitrary ring contents (descriptors, available slots, indices and flags), kicks, frames
//! from the backend, polls and register traffic (resets included, but no queue
//! reconfiguration: the write check below knows the rings at their fixed places).
//!
//! After every step, and at every device write into guest memory: the write lies in a used
//! ring or inside a device-writable descriptor of the RX table as it is at that moment (the
//! device never writes anywhere else); sent frames are at most `MAX_FRAME` bytes; the
//! interrupt output follows the interrupt status, which has only bits 0 and 1. A fresh
//! device given one well-formed TX chain sends exactly that frame.

use crate::input::{Input, SeedWriter};
use kestrel_devices::bus::{GuestRam, MmioDevice, OutOfRam};
use kestrel_devices::virtio_net::{
    reg, status, FrameBackend, VirtioNet, MAX_FRAME, VIRTQ_DESC_F_WRITE,
};
use std::cell::RefCell;
use std::collections::VecDeque;

const RAM: usize = 0x1_0000;
const NUM: u16 = 16;
const RX_DESC: u64 = 0x1000;
const RX_AVAIL: u64 = RX_DESC + 16 * NUM as u64;
const RX_USED: u64 = 0x2000;
const TX_DESC: u64 = 0x3000;
const TX_AVAIL: u64 = TX_DESC + 16 * NUM as u64;
const TX_USED: u64 = 0x4000;
const USED_LEN: u64 = 6 + 8 * NUM as u64;

struct Ram {
    mem: RefCell<Vec<u8>>,
}

impl Ram {
    fn allowed(&self, gpa: u64, len: usize) -> bool {
        let end = gpa + len as u64;
        let inside = |a: u64, l: u64| a <= gpa && end <= a.saturating_add(l);
        if inside(RX_USED, USED_LEN) || inside(TX_USED, USED_LEN) {
            return true;
        }
        let m = self.mem.borrow();
        (0..usize::from(NUM)).any(|i| {
            let d = &m[RX_DESC as usize + 16 * i..][..16];
            let addr = u64::from_le_bytes(d[0..8].try_into().expect("8 bytes"));
            let l = u32::from_le_bytes(d[8..12].try_into().expect("4 bytes"));
            let flags = u16::from_le_bytes([d[12], d[13]]);
            flags & VIRTQ_DESC_F_WRITE != 0 && inside(addr, u64::from(l))
        })
    }

    fn poke(&self, gpa: u64, bytes: &[u8]) {
        self.mem.borrow_mut()[gpa as usize..][..bytes.len()].copy_from_slice(bytes);
    }
}

impl GuestRam for Ram {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), OutOfRam> {
        let bad = OutOfRam {
            gpa,
            len: buf.len(),
        };
        let s = usize::try_from(gpa).map_err(|_| bad)?;
        let m = self.mem.borrow();
        buf.copy_from_slice(m.get(s..s.checked_add(buf.len()).ok_or(bad)?).ok_or(bad)?);
        Ok(())
    }
    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), OutOfRam> {
        let bad = OutOfRam {
            gpa,
            len: data.len(),
        };
        let s = usize::try_from(gpa).map_err(|_| bad)?;
        let e = s.checked_add(data.len()).ok_or(bad)?;
        if e > RAM {
            return Err(bad);
        }
        assert!(
            self.allowed(gpa, data.len()),
            "device wrote {gpa:#x}+{}",
            data.len()
        );
        self.mem.borrow_mut()[s..e].copy_from_slice(data);
        Ok(())
    }
}

#[derive(Default)]
struct Frames {
    pending: VecDeque<usize>,
    sent: Vec<Vec<u8>>,
}

impl FrameBackend for Frames {
    fn send(&mut self, frame: &[u8]) {
        assert!(frame.len() <= MAX_FRAME);
        self.sent.push(frame.to_vec());
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let n = self.pending.pop_front()?.min(buf.len());
        buf[..n].fill(0x5A);
        Some(n)
    }
}

type Dev = VirtioNet<Ram, Frames>;

fn w32(d: &mut Dev, off: u32, v: u32) {
    d.mmio_write(u64::from(off), &v.to_le_bytes())
        .expect("register decodes");
}

/// The device after Linux's bring-up with 16-entry queues at fixed places.
fn device() -> Dev {
    let ram = Ram {
        mem: RefCell::new(vec![0; RAM]),
    };
    let mut d = VirtioNet::new(ram, Frames::default(), [6, 0, 0, 1, 0, 0]);
    w32(&mut d, reg::STATUS, status::ACKNOWLEDGE | status::DRIVER);
    w32(&mut d, reg::DRIVER_FEATURES_SEL, 1);
    w32(&mut d, reg::DRIVER_FEATURES, 1);
    w32(
        &mut d,
        reg::STATUS,
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
    );
    for (q, desc, avail, used) in [
        (0, RX_DESC, RX_AVAIL, RX_USED),
        (1, TX_DESC, TX_AVAIL, TX_USED),
    ] {
        w32(&mut d, reg::QUEUE_SEL, q);
        w32(&mut d, reg::QUEUE_NUM, u32::from(NUM));
        w32(&mut d, reg::QUEUE_DESC_LOW, desc as u32);
        w32(&mut d, reg::QUEUE_DRIVER_LOW, avail as u32);
        w32(&mut d, reg::QUEUE_DEVICE_LOW, used as u32);
        w32(&mut d, reg::QUEUE_READY, 1);
    }
    w32(&mut d, reg::STATUS, 0xF);
    assert_eq!(d.status(), 0xF, "bring-up accepted");
    d
}

fn desc_bytes(addr: u64, len: u32, flags: u16, next: u16) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&addr.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..14].copy_from_slice(&flags.to_le_bytes());
    b[14..16].copy_from_slice(&next.to_le_bytes());
    b
}

/// Operation selectors, for [`seed`].
pub mod op {
    pub const DESC: u8 = 0;
    pub const SLOT: u8 = 1;
    pub const AVAIL_IDX: u8 = 2;
    pub const AVAIL_FLAGS: u8 = 3;
    pub const KICK: u8 = 4;
    pub const FRAME: u8 = 5;
    pub const POLL: u8 = 6;
    pub const READ: u8 = 7;
    pub const WRITE: u8 = 8;
    pub const TX_ONCE: u8 = 9;
    pub const COUNT: u8 = 10;
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut d = device();
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::DESC => {
                let tx = input.bool();
                let i = input.u16() % NUM;
                let addr = match input.u8() % 4 {
                    0 => input.u64(),
                    _ => 0x5000 + u64::from(input.u16()) % 0xB000,
                };
                let len = match input.u8() % 4 {
                    0 => input.u32(),
                    _ => u32::from(input.u16()) % 2048,
                };
                let (flags, next) = (input.u16() % 8, input.u16());
                let base = if tx { TX_DESC } else { RX_DESC };
                d.ram().poke(
                    base + 16 * u64::from(i),
                    &desc_bytes(addr, len, flags, next),
                );
            }
            op::SLOT => {
                let base = if input.bool() { TX_AVAIL } else { RX_AVAIL };
                let slot = input.u16() % NUM;
                d.ram()
                    .poke(base + 4 + 2 * u64::from(slot), &input.u16().to_le_bytes());
            }
            op::AVAIL_IDX => {
                let base = if input.bool() { TX_AVAIL } else { RX_AVAIL };
                d.ram().poke(base + 2, &input.u16().to_le_bytes());
            }
            op::AVAIL_FLAGS => {
                let base = if input.bool() { TX_AVAIL } else { RX_AVAIL };
                d.ram().poke(base, &(input.u16() % 2).to_le_bytes());
            }
            op::KICK => {
                let q = u32::from(input.u8() % 3);
                w32(&mut d, reg::QUEUE_NOTIFY, q);
            }
            op::FRAME => {
                let n = usize::from(input.u16()) % 1600;
                d.backend_mut().pending.push_back(n);
            }
            op::POLL => {
                d.poll_rx();
            }
            op::READ => {
                let off = u64::from(input.u16() % 0x240);
                let mut b = vec![0u8; usize::from(input.u8() % 9)];
                let _ = d.mmio_read(off, &mut b);
            }
            op::WRITE => {
                // The write check knows the rings at their fixed places: register writes
                // leave the queue configuration (select, size, ready, areas) alone.
                let off = match u64::from(input.u16() % 0x240) {
                    o @ (0x30..=0x4F | 0x80..=0xAF) => o % 4 + u64::from(reg::INTERRUPT_ACK),
                    o => o,
                };
                let w = usize::from(input.u8() % 9);
                let v = input.u32();
                let b: Vec<u8> = v.to_le_bytes().iter().copied().cycle().take(w).collect();
                let _ = d.mmio_write(off, &b);
            }
            _ => {
                // A fresh device sends one well-formed chain exactly.
                let n = usize::from(input.u16()) % (MAX_FRAME + 1);
                let mut f = device();
                let frame: Vec<u8> = (0..n).map(|i| i as u8).collect();
                f.ram().poke(0x8000, &[0; 12]);
                f.ram().poke(0x8000 + 12, &frame);
                f.ram()
                    .poke(TX_DESC, &desc_bytes(0x8000, 12 + n as u32, 0, 0));
                f.ram().poke(TX_AVAIL + 4, &0u16.to_le_bytes());
                f.ram().poke(TX_AVAIL + 2, &1u16.to_le_bytes());
                w32(&mut f, reg::QUEUE_NOTIFY, 1);
                assert_eq!(f.backend().sent, vec![frame]);
                assert!(f.irq());
            }
        }
        let isr = d.read_reg(reg::INTERRUPT_STATUS);
        assert_eq!(d.irq(), isr != 0);
        assert_eq!(isr & !3, 0);
        if let Some((diag, _)) = d.take_diagnostic() {
            assert!(!diag.to_string().is_empty());
        }
    }
}

/// One operation of a seed.
pub enum Op {
    /// (tx, index, addr, len, flags, next)
    Desc(bool, u16, u16, u16, u16, u16),
    Slot(bool, u16, u16),
    AvailIdx(bool, u16),
    Kick(u8),
    Frame(u16),
    Poll,
    TxOnce(u16),
}

/// Encodes `ops` as an input of this target (addresses as offsets from 0x5000).
pub fn seed(ops: &[Op]) -> Vec<u8> {
    let mut w = SeedWriter::default();
    for o in ops {
        match *o {
            Op::Desc(tx, i, addr, len, flags, next) => {
                w.u8(op::DESC)
                    .bool(tx)
                    .u16(i)
                    .u8(1)
                    .u16(addr)
                    .u8(1)
                    .u16(len)
                    .u16(flags)
                    .u16(next);
            }
            Op::Slot(tx, s, h) => {
                w.u8(op::SLOT).bool(tx).u16(s).u16(h);
            }
            Op::AvailIdx(tx, i) => {
                w.u8(op::AVAIL_IDX).bool(tx).u16(i);
            }
            Op::Kick(q) => {
                w.u8(op::KICK).u8(q);
            }
            Op::Frame(n) => {
                w.u8(op::FRAME).u16(n);
            }
            Op::Poll => {
                w.u8(op::POLL);
            }
            Op::TxOnce(n) => {
                w.u8(op::TX_ONCE).u16(n);
            }
        }
    }
    w.bytes
}
