//! Target `virtio_net`: the virtio-mmio network device (`kestrel_devices::virtio_net`)
//! brought up as Linux does (features, two 16-entry queues, DRIVER_OK), then driven with
//! arbitrary ring contents (descriptors, available slots, indices and flags), kicks, frames
//! from the backend, polls and register traffic (resets included, but no queue
//! reconfiguration: the write check knows the rings at their fixed places). The guest RAM,
//! its write check, the frame back end and the bring-up are `kestrel_testkit::virtio`'s
//! (shared with `devices/tests/bgp_props.rs` and `linux_virtio_net.rs`).
//!
//! After every step, and at every device write into guest memory: the write lies in a used
//! ring or inside a device-writable descriptor of the RX table as it is at that moment (the
//! device never writes anywhere else); sent frames are at most `MAX_FRAME` bytes; the
//! interrupt output follows the interrupt status, which has only bits 0 and 1. A fresh
//! device given one well-formed TX chain sends exactly that frame.

use crate::input::{Input, SeedWriter};
use kestrel_devices::bus::MmioDevice;
use kestrel_devices::virtio_net::{reg, MAX_FRAME};
use kestrel_testkit::virtio::{
    check, desc_bytes, device, reconfigures_queues, w32, Ram, NUM, RX_AVAIL, RX_DESC, TX_AVAIL,
    TX_DESC,
};

/// The MAC the device is brought up with.
const MAC: [u8; 6] = [6, 0, 0, 1, 0, 0];

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
    let mut d = device(Ram::checked(), MAC);
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
                d.backend_mut().pending.push_back(vec![0x5A; n]);
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
                    o if reconfigures_queues(o) => o % 4 + u64::from(reg::INTERRUPT_ACK),
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
                let mut f = device(Ram::checked(), MAC);
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
        check(&mut d);
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
