//! Guest RAM for the virtio-net device that checks every device write (inside a used ring,
//! or inside a device-writable descriptor of the RX table as it is at that moment), a
//! frame back end, the fixed ring layout of the tests, Linux's bring-up, and the device's
//! per-step invariants: used by `devices/tests/bgp_props.rs`,
//! `devices/tests/linux_virtio_net.rs` and the `virtio_net` fuzz target.

use alloc::collections::VecDeque;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use kestrel_devices::bus::{GuestRam, MmioDevice, OutOfRam};
use kestrel_devices::virtio_net::{
    reg, status, FrameBackend, VirtioNet, MAX_FRAME, VIRTQ_DESC_F_WRITE,
};

/// Guest RAM of the checked layout.
pub const RAM: usize = 0x1_0000;
/// Entries per queue.
pub const NUM: u16 = 16;
pub const RX_DESC: u64 = 0x1000;
pub const RX_AVAIL: u64 = RX_DESC + 16 * NUM as u64;
pub const RX_USED: u64 = 0x2000;
pub const TX_DESC: u64 = 0x3000;
pub const TX_AVAIL: u64 = TX_DESC + 16 * NUM as u64;
pub const TX_USED: u64 = 0x4000;
const USED_LEN: u64 = 6 + 8 * NUM as u64;

/// Guest RAM from address 0. With `strict`, every device write must lie in a used ring of
/// the fixed layout above, or inside a device-writable descriptor of the RX table as it
/// is at that moment (else: panic).
pub struct Ram {
    pub mem: RefCell<Vec<u8>>,
    pub strict: bool,
}

impl Ram {
    /// [`RAM`] bytes, every device write checked.
    pub fn checked() -> Self {
        Self {
            mem: RefCell::new(vec![0; RAM]),
            strict: true,
        }
    }

    /// `len` bytes, no write check.
    pub fn plain(len: usize) -> Self {
        Self {
            mem: RefCell::new(vec![0; len]),
            strict: false,
        }
    }

    /// Whether the device may write `len` bytes at `gpa` (the strict layout).
    pub fn allowed(&self, gpa: u64, len: usize) -> bool {
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

    /// The driver's store: `bytes` at `gpa`, unchecked.
    pub fn poke(&self, gpa: u64, bytes: &[u8]) {
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
        if e > self.mem.borrow().len() {
            return Err(bad);
        }
        if self.strict {
            assert!(
                self.allowed(gpa, data.len()),
                "device wrote {gpa:#x}+{} outside posted buffers and used rings",
                data.len()
            );
        }
        self.mem.borrow_mut()[s..e].copy_from_slice(data);
        Ok(())
    }
}

/// Frames the device sent (each at most `MAX_FRAME` bytes, else: panic) and frames
/// waiting to be received (cut to the device's buffer).
#[derive(Default)]
pub struct Frames {
    pub pending: VecDeque<Vec<u8>>,
    pub sent: Vec<Vec<u8>>,
}

impl FrameBackend for Frames {
    fn send(&mut self, frame: &[u8]) {
        assert!(frame.len() <= MAX_FRAME);
        self.sent.push(frame.to_vec());
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let f = self.pending.pop_front()?;
        let n = f.len().min(buf.len());
        buf[..n].copy_from_slice(&f[..n]);
        Some(n)
    }
}

/// The device the tests drive.
pub type Dev = VirtioNet<Ram, Frames>;

/// A 32-bit register write (little-endian, as virtio-mmio) that must decode.
pub fn w32(d: &mut Dev, off: u32, v: u32) {
    d.mmio_write(u64::from(off), &v.to_le_bytes())
        .expect("register decodes");
}

/// The device over `ram` after Linux's bring-up (features, two 16-entry queues at the
/// fixed places above, DRIVER_OK).
pub fn device(ram: Ram, mac: [u8; 6]) -> Dev {
    let mut d = VirtioNet::new(ram, Frames::default(), mac);
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

/// A split-virtqueue descriptor as it lies in guest memory.
pub fn desc_bytes(addr: u64, len: u32, flags: u16, next: u16) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&addr.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..14].copy_from_slice(&flags.to_le_bytes());
    b[14..16].copy_from_slice(&next.to_le_bytes());
    b
}

/// Whether a register write at `off` reconfigures a queue (select, size, ready, areas):
/// the strict write check knows the rings only at their fixed places.
pub fn reconfigures_queues(off: u64) -> bool {
    (0x30..0x50).contains(&off) || (0x80..0xB0).contains(&off)
}

/// After every step: the interrupt output follows the interrupt status, which has only
/// bits 0 and 1; a diagnostic says something. Panics on a violation.
pub fn check(d: &mut Dev) {
    let isr = d.read_reg(reg::INTERRUPT_STATUS);
    assert_eq!(d.irq(), isr != 0);
    assert_eq!(isr & !3, 0);
    if let Some((diag, _)) = d.take_diagnostic() {
        assert!(!diag.to_string().is_empty());
    }
}
