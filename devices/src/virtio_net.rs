//! A virtio-mmio network device (virtio 1.1, MMIO transport version 2, device id 1) for
//! Linux's own `virtio_mmio` and `virtio_net` drivers: the paravirtual NIC of a Kestrel VM
//! (design direction 3.6), backed by the fabric's frame layer through a [`FrameBackend`].
//!
//! # Transport (virtio 1.1 section 4.2.2; registers little-endian, 32-bit)
//!
//! Magic "virt", version 2, device id 1, vendor id [`VENDOR_ID`]; device features
//! `VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS` (64 bits, selected 32 at a
//! time); driver features (the device sets FEATURES_OK only for a subset of its features
//! that contains VERSION_1); queue select / num max / num / ready and the 64-bit
//! descriptor, driver (available) and device (used) area addresses; queue notify;
//! interrupt status / ack (bit 0 used buffer, bit 1 configuration change); device status
//! (0 resets the device); config generation (always 0: the config never changes); the
//! config space at 0x100 (`struct virtio_net_config`: MAC, status = LINK_UP), read with
//! 1, 2, 4 or 8-byte loads. Registers take aligned 32-bit accesses only; everything else
//! is [`Unanswered`]. Writes to read-only registers and config space are ignored. The
//! VMM's fault path byte-swaps `lwbrx`/`stwbrx` (Linux's `readl`/`writel`), so the model
//! sees little-endian register values as memory-order bytes.
//!
//! # Queues (split virtqueues, section 2.6)
//!
//! Queue 0 receives, queue 1 transmits, [`QUEUE_NUM_MAX`] entries each. No ring feature is
//! offered (no indirect descriptors, no event index, no packed ring); the device honours
//! `VIRTQ_AVAIL_F_NO_INTERRUPT`. Every frame carries the 12-byte `virtio_net_hdr` (VERSION_1
//! layout, with `num_buffers`): stripped on transmit, written on receive (all fields 0 but
//! `num_buffers` = 1: no checksum offload or GSO is offered, one buffer per frame).
//!
//! - **TX:** a write of 1 to QueueNotify processes every available chain at once: its
//!   device-readable descriptors are gathered, the header stripped and the frame handed to
//!   [`FrameBackend::send`]; the chain returns to the used ring with length 0. A frame
//!   longer than [`MAX_FRAME`] or shorter than the header is dropped (diagnostic) and its
//!   chain returned.
//! - **RX:** [`VirtioNet::poll_rx`] (called by the VMM when the fabric has frames for the VM,
//!   and by a notify of queue 0) moves pending frames into posted chains of device-writable
//!   descriptors, header first. A frame that does not fit the chain is dropped (diagnostic)
//!   and the chain stays posted.
//!
//! Nothing is processed before the driver sets DRIVER_OK, or while the device needs a
//! reset.
//!
//! # A bad ring
//!
//! Every ring access goes through [`GuestRam`] (checked against the VM's RAM) and every
//! index and descriptor is validated: a queue size that is not a power of two in
//! `1..=QUEUE_NUM_MAX` or misaligned areas (at QueueReady), an available index more than
//! the queue size ahead, a head or `next` index out of range, a chain longer than the queue
//! (a loop), an indirect descriptor, a device-writable descriptor on TX or a device-readable
//! one on RX, and any area or buffer outside RAM. Any of them sets DEVICE_NEEDS_RESET in
//! the status, raises a configuration-change interrupt, stops the queues until the driver
//! resets the device, and leaves a [`Diagnostic`] for the VMM's log. Never a panic, and
//! the device writes guest memory only in posted RX buffers (within their lengths) and in
//! the used rings.

use crate::bus::{GuestRam, MmioDevice, Unanswered};
use core::fmt;

/// "virt", little-endian.
pub const MAGIC: u32 = 0x7472_6976;
/// MMIO transport version (modern).
pub const VERSION: u32 = 2;
/// Device id of a network device.
pub const DEVICE_ID_NET: u32 = 1;
/// Kestrel's vendor id ("KSTL" as a little-endian word; any value is allowed).
pub const VENDOR_ID: u32 = 0x4C54_534B;
/// Size of the MMIO window (registers 0x000..0x100, config space 0x100..0x200).
pub const WINDOW: u64 = 0x200;

/// MMIO register offsets (virtio 1.1 section 4.2.2).
pub mod reg {
    pub const MAGIC_VALUE: u32 = 0x000;
    pub const VERSION: u32 = 0x004;
    pub const DEVICE_ID: u32 = 0x008;
    pub const VENDOR_ID: u32 = 0x00C;
    pub const DEVICE_FEATURES: u32 = 0x010;
    pub const DEVICE_FEATURES_SEL: u32 = 0x014;
    pub const DRIVER_FEATURES: u32 = 0x020;
    pub const DRIVER_FEATURES_SEL: u32 = 0x024;
    pub const QUEUE_SEL: u32 = 0x030;
    pub const QUEUE_NUM_MAX: u32 = 0x034;
    pub const QUEUE_NUM: u32 = 0x038;
    pub const QUEUE_READY: u32 = 0x044;
    pub const QUEUE_NOTIFY: u32 = 0x050;
    pub const INTERRUPT_STATUS: u32 = 0x060;
    pub const INTERRUPT_ACK: u32 = 0x064;
    pub const STATUS: u32 = 0x070;
    pub const QUEUE_DESC_LOW: u32 = 0x080;
    pub const QUEUE_DESC_HIGH: u32 = 0x084;
    pub const QUEUE_DRIVER_LOW: u32 = 0x090;
    pub const QUEUE_DRIVER_HIGH: u32 = 0x094;
    pub const QUEUE_DEVICE_LOW: u32 = 0x0A0;
    pub const QUEUE_DEVICE_HIGH: u32 = 0x0A4;
    pub const CONFIG_GENERATION: u32 = 0x0FC;
    pub const CONFIG: u32 = 0x100;
}

/// Device status bits (section 2.1).
pub mod status {
    pub const ACKNOWLEDGE: u32 = 1;
    pub const DRIVER: u32 = 2;
    pub const DRIVER_OK: u32 = 4;
    pub const FEATURES_OK: u32 = 8;
    pub const DEVICE_NEEDS_RESET: u32 = 64;
    pub const FAILED: u32 = 128;
}

/// Feature bits (sections 5.1.3 and 6).
pub mod feature {
    pub const VIRTIO_NET_F_MAC: u64 = 1 << 5;
    pub const VIRTIO_NET_F_STATUS: u64 = 1 << 16;
    pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
}

/// Interrupt status bits (section 4.2.2).
pub mod isr {
    pub const USED_BUFFER: u32 = 1;
    pub const CONFIG_CHANGE: u32 = 2;
}

/// The features this device offers.
pub const DEVICE_FEATURES: u64 =
    feature::VIRTIO_F_VERSION_1 | feature::VIRTIO_NET_F_MAC | feature::VIRTIO_NET_F_STATUS;
/// Entries per queue.
pub const QUEUE_NUM_MAX: u16 = 256;
/// The receive and transmit queues.
pub const RX_QUEUE: usize = 0;
pub const TX_QUEUE: usize = 1;
const QUEUES: usize = 2;
/// `virtio_net_hdr` with `num_buffers` (VERSION_1), in bytes.
pub const NET_HDR: usize = 12;
/// Offset of `num_buffers` in the header.
const NUM_BUFFERS: usize = 10;
/// Largest Ethernet frame carried (1514 + a 4-byte VLAN tag; the fabric's frame limit).
pub const MAX_FRAME: usize = 1518;
/// `virtio_net_config.status`: link up.
pub const VIRTIO_NET_S_LINK_UP: u16 = 1;
/// Descriptor flags and the available ring flag (section 2.6.5, 2.6.6).
pub const VIRTQ_DESC_F_NEXT: u16 = 1;
pub const VIRTQ_DESC_F_WRITE: u16 = 2;
pub const VIRTQ_DESC_F_INDIRECT: u16 = 4;
pub const VIRTQ_AVAIL_F_NO_INTERRUPT: u16 = 1;
const DESC_SIZE: u64 = 16;

/// Where frames go and come from (the VMM implements it over the fabric's frame layer).
pub trait FrameBackend {
    /// Sends one Ethernet frame (without the virtio header).
    fn send(&mut self, frame: &[u8]);
    /// Takes the next frame for this device into `buf`: its length, or `None` when there is
    /// none. A frame longer than `buf` is the backend's to drop.
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize>;
}

/// Why a queue was found broken (the device then needs a reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// QueueNum is not a power of two in 1..=QUEUE_NUM_MAX.
    BadSize(u32),
    /// An area is not aligned as the split ring requires.
    Misaligned(u64),
    /// A ring or buffer access outside the VM's RAM.
    OutOfRam { gpa: u64, len: usize },
    /// The available index ran more than the queue size ahead.
    AvailIndex { idx: u16, last: u16 },
    /// A head or next descriptor index outside the table.
    DescIndex(u16),
    /// A chain longer than the queue (a loop).
    ChainLoop,
    /// A descriptor with a flag the device does not accept here (indirect, or the wrong
    /// direction for the queue).
    DescFlags(u16),
}

/// A guest error or a dropped frame, for the VMM's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// Queue `queue` is broken; the device needs a reset.
    BadRing { queue: usize, error: RingError },
    /// A TX frame of `len` bytes (with header) was too long or too short; dropped.
    TxFrameDropped { len: usize },
    /// An RX frame of `len` bytes (with header) did not fit the posted chain of `room`.
    RxFrameDropped { len: usize, room: usize },
    /// The driver asked for features the device does not offer (or without VERSION_1).
    FeaturesRefused { driver: u64 },
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Diagnostic::BadRing { queue, error } => {
                write!(
                    f,
                    "virtio-net: queue {queue} broken ({error:?}); device needs reset"
                )
            }
            Diagnostic::TxFrameDropped { len } => {
                write!(
                    f,
                    "virtio-net: TX chain of {len} bytes dropped (header + 0..={MAX_FRAME})"
                )
            }
            Diagnostic::RxFrameDropped { len, room } => write!(
                f,
                "virtio-net: RX frame of {len} bytes dropped: the posted buffer holds {room}"
            ),
            Diagnostic::FeaturesRefused { driver } => {
                write!(f, "virtio-net: driver features {driver:#x} refused")
            }
        }
    }
}

/// One split virtqueue's configuration and the device's indices.
#[derive(Clone, Copy, Debug, Default)]
struct Queue {
    num: u32,
    ready: bool,
    desc: u64,
    avail: u64,
    used: u64,
    last_avail: u16,
    used_idx: u16,
}

/// A descriptor as read from the table.
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// The device: transport registers, queues, config, and its RAM and frame back end.
pub struct VirtioNet<M: GuestRam, B: FrameBackend> {
    ram: M,
    backend: B,
    mac: [u8; 6],
    device_features_sel: u32,
    driver_features_sel: u32,
    driver_features: u64,
    queue_sel: u32,
    queues: [Queue; QUEUES],
    interrupt_status: u32,
    status: u32,
    /// Header + frame staging buffer (TX gather, RX scatter).
    buf: [u8; NET_HDR + MAX_FRAME],
    diag: Option<Diagnostic>,
    diags: u32,
}

impl<M: GuestRam, B: FrameBackend> VirtioNet<M, B> {
    /// A device in its reset state with MAC address `mac`.
    pub fn new(ram: M, backend: B, mac: [u8; 6]) -> Self {
        Self {
            ram,
            backend,
            mac,
            device_features_sel: 0,
            driver_features_sel: 0,
            driver_features: 0,
            queue_sel: 0,
            queues: [Self::fresh_queue(); QUEUES],
            interrupt_status: 0,
            status: 0,
            buf: [0; NET_HDR + MAX_FRAME],
            diag: None,
            diags: 0,
        }
    }

    fn fresh_queue() -> Queue {
        Queue {
            num: u32::from(QUEUE_NUM_MAX),
            ..Queue::default()
        }
    }

    pub fn ram(&self) -> &M {
        &self.ram
    }

    pub fn ram_mut(&mut self) -> &mut M {
        &mut self.ram
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The interrupt output (level): some interrupt status bit is set.
    pub fn irq(&self) -> bool {
        self.interrupt_status != 0
    }

    /// The device status register.
    pub fn status(&self) -> u32 {
        self.status
    }

    /// The most recent diagnostic since the last call and how many there were in all.
    pub fn take_diagnostic(&mut self) -> Option<(Diagnostic, u32)> {
        let d = self.diag.take()?;
        Some((d, core::mem::replace(&mut self.diags, 0)))
    }

    fn report(&mut self, d: Diagnostic) {
        self.diag = Some(d);
        self.diags = self.diags.saturating_add(1);
    }

    /// Resets the device (a write of 0 to Status).
    fn reset(&mut self) {
        self.device_features_sel = 0;
        self.driver_features_sel = 0;
        self.driver_features = 0;
        self.queue_sel = 0;
        self.queues = [Self::fresh_queue(); QUEUES];
        self.interrupt_status = 0;
        self.status = 0;
    }

    fn running(&self) -> bool {
        self.status & status::DRIVER_OK != 0 && self.status & status::DEVICE_NEEDS_RESET == 0
    }

    fn broken(&mut self, queue: usize, error: RingError) {
        self.status |= status::DEVICE_NEEDS_RESET;
        if self.status & status::DRIVER_OK != 0 {
            self.interrupt_status |= isr::CONFIG_CHANGE;
        }
        self.report(Diagnostic::BadRing { queue, error });
    }

    fn selected(&mut self) -> Option<&mut Queue> {
        self.queues.get_mut(self.queue_sel as usize)
    }

    /// The config space (`struct virtio_net_config`: mac, status, max_virtqueue_pairs).
    fn config(&self) -> [u8; 10] {
        let mut c = [0u8; 10];
        c[..6].copy_from_slice(&self.mac);
        c[6..8].copy_from_slice(&VIRTIO_NET_S_LINK_UP.to_le_bytes());
        c[8..10].copy_from_slice(&1u16.to_le_bytes());
        c
    }

    /// A 32-bit register load.
    pub fn read_reg(&mut self, offset: u32) -> u32 {
        let q = self.queues.get(self.queue_sel as usize).copied();
        match offset {
            reg::MAGIC_VALUE => MAGIC,
            reg::VERSION => VERSION,
            reg::DEVICE_ID => DEVICE_ID_NET,
            reg::VENDOR_ID => VENDOR_ID,
            reg::DEVICE_FEATURES => match self.device_features_sel {
                0 => DEVICE_FEATURES as u32,
                1 => (DEVICE_FEATURES >> 32) as u32,
                _ => 0,
            },
            reg::QUEUE_NUM_MAX => q.map_or(0, |_| u32::from(QUEUE_NUM_MAX)),
            reg::QUEUE_READY => q.map_or(0, |q| q.ready as u32),
            reg::INTERRUPT_STATUS => self.interrupt_status,
            reg::STATUS => self.status,
            reg::CONFIG_GENERATION => 0,
            _ => 0,
        }
    }

    /// A 32-bit register store.
    pub fn write_reg(&mut self, offset: u32, value: u32) {
        match offset {
            reg::DEVICE_FEATURES_SEL => self.device_features_sel = value,
            reg::DRIVER_FEATURES_SEL => self.driver_features_sel = value,
            reg::DRIVER_FEATURES => {
                if self.status & status::FEATURES_OK == 0 {
                    match self.driver_features_sel {
                        0 => {
                            self.driver_features =
                                (self.driver_features & !0xFFFF_FFFF) | u64::from(value)
                        }
                        1 => {
                            self.driver_features =
                                (self.driver_features & 0xFFFF_FFFF) | (u64::from(value) << 32)
                        }
                        _ => {}
                    }
                }
            }
            reg::QUEUE_SEL => self.queue_sel = value,
            reg::QUEUE_NUM => self.set_queue(|q| q.num = value),
            reg::QUEUE_DESC_LOW => self.set_queue(|q| q.desc = lo(q.desc, value)),
            reg::QUEUE_DESC_HIGH => self.set_queue(|q| q.desc = hi(q.desc, value)),
            reg::QUEUE_DRIVER_LOW => self.set_queue(|q| q.avail = lo(q.avail, value)),
            reg::QUEUE_DRIVER_HIGH => self.set_queue(|q| q.avail = hi(q.avail, value)),
            reg::QUEUE_DEVICE_LOW => self.set_queue(|q| q.used = lo(q.used, value)),
            reg::QUEUE_DEVICE_HIGH => self.set_queue(|q| q.used = hi(q.used, value)),
            reg::QUEUE_READY => self.set_ready(value & 1 != 0),
            reg::QUEUE_NOTIFY => match value as usize {
                TX_QUEUE => self.process_tx(),
                RX_QUEUE => {
                    self.poll_rx();
                }
                _ => {}
            },
            reg::INTERRUPT_ACK => self.interrupt_status &= !value,
            reg::STATUS => self.write_status(value),
            _ => {}
        }
    }

    /// Applies `f` to the selected queue while it is not ready (the driver must not change
    /// a ready queue's configuration; such writes are ignored).
    fn set_queue(&mut self, f: impl FnOnce(&mut Queue)) {
        if let Some(q) = self.selected() {
            if !q.ready {
                f(q);
            }
        }
    }

    fn set_ready(&mut self, ready: bool) {
        let sel = self.queue_sel as usize;
        let Some(q) = self.queues.get(sel).copied() else {
            return;
        };
        if !ready {
            self.queues[sel].ready = false;
            return;
        }
        if q.ready {
            return;
        }
        let error = if q.num == 0 || q.num > u32::from(QUEUE_NUM_MAX) || !q.num.is_power_of_two() {
            Some(RingError::BadSize(q.num))
        } else if q.desc % 16 != 0 {
            Some(RingError::Misaligned(q.desc))
        } else if q.avail % 2 != 0 {
            Some(RingError::Misaligned(q.avail))
        } else if q.used % 4 != 0 {
            Some(RingError::Misaligned(q.used))
        } else {
            None
        };
        match error {
            Some(e) => self.broken(sel, e),
            None => {
                let q = &mut self.queues[sel];
                q.ready = true;
                q.last_avail = 0;
                q.used_idx = 0;
            }
        }
    }

    fn write_status(&mut self, value: u32) {
        if value == 0 {
            self.reset();
            return;
        }
        let mut value = value & 0xFF & !status::DEVICE_NEEDS_RESET;
        if value & status::FEATURES_OK != 0 && self.status & status::FEATURES_OK == 0 {
            let d = self.driver_features;
            if d & !DEVICE_FEATURES != 0 || d & feature::VIRTIO_F_VERSION_1 == 0 {
                value &= !status::FEATURES_OK;
                self.report(Diagnostic::FeaturesRefused { driver: d });
            }
        }
        self.status = value | (self.status & status::DEVICE_NEEDS_RESET);
        if self.running() {
            self.process_tx();
            self.poll_rx();
        }
    }

    // ---- ring access -------------------------------------------------------------------

    fn read_ram(&self, gpa: u64, buf: &mut [u8]) -> Result<(), RingError> {
        self.ram.read(gpa, buf).map_err(|e| RingError::OutOfRam {
            gpa: e.gpa,
            len: e.len,
        })
    }

    fn write_ram(&mut self, gpa: u64, data: &[u8]) -> Result<(), RingError> {
        self.ram.write(gpa, data).map_err(|e| RingError::OutOfRam {
            gpa: e.gpa,
            len: e.len,
        })
    }

    fn read_u16(&self, gpa: u64) -> Result<u16, RingError> {
        let mut b = [0u8; 2];
        self.read_ram(gpa, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// The next available head of queue `qi`, if any (without consuming it), and whether
    /// the driver suppressed interrupts.
    fn next_avail(&self, qi: usize) -> Result<(Option<u16>, bool), RingError> {
        let q = &self.queues[qi];
        let flags = self.read_u16(q.avail)?;
        let idx = self.read_u16(q.avail.wrapping_add(2))?;
        let pending = idx.wrapping_sub(q.last_avail);
        if u32::from(pending) > q.num {
            return Err(RingError::AvailIndex {
                idx,
                last: q.last_avail,
            });
        }
        let quiet = flags & VIRTQ_AVAIL_F_NO_INTERRUPT != 0;
        if pending == 0 {
            return Ok((None, quiet));
        }
        let slot = u64::from(u32::from(q.last_avail) % q.num);
        let head = self.read_u16(q.avail.wrapping_add(4 + 2 * slot))?;
        Ok((Some(head), quiet))
    }

    fn desc(&self, qi: usize, i: u16) -> Result<Desc, RingError> {
        let q = &self.queues[qi];
        if u32::from(i) >= q.num {
            return Err(RingError::DescIndex(i));
        }
        let mut b = [0u8; DESC_SIZE as usize];
        self.read_ram(q.desc.wrapping_add(DESC_SIZE * u64::from(i)), &mut b)?;
        let le16 = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        Ok(Desc {
            addr: u64::from_le_bytes(b[0..8].try_into().unwrap_or([0; 8])),
            len: u32::from_le_bytes(b[8..12].try_into().unwrap_or([0; 4])),
            flags: le16(12),
            next: le16(14),
        })
    }

    /// Walks the chain at `head` of queue `qi`, calling `f` on each descriptor; every
    /// descriptor must have exactly the direction `writable`.
    fn walk(
        &mut self,
        qi: usize,
        head: u16,
        writable: bool,
        mut f: impl FnMut(&mut Self, &Desc) -> Result<(), RingError>,
    ) -> Result<(), RingError> {
        let mut i = head;
        for _ in 0..self.queues[qi].num {
            let d = self.desc(qi, i)?;
            let bad = VIRTQ_DESC_F_INDIRECT | if writable { 0 } else { VIRTQ_DESC_F_WRITE };
            if d.flags & bad != 0 || (writable && d.flags & VIRTQ_DESC_F_WRITE == 0) {
                return Err(RingError::DescFlags(d.flags));
            }
            f(self, &d)?;
            if d.flags & VIRTQ_DESC_F_NEXT == 0 {
                return Ok(());
            }
            i = d.next;
        }
        Err(RingError::ChainLoop)
    }

    /// Returns chain `head` of queue `qi` to the used ring with `len` bytes written.
    fn push_used(&mut self, qi: usize, head: u16, len: u32) -> Result<(), RingError> {
        let q = self.queues[qi];
        let slot = u64::from(u32::from(q.used_idx) % q.num);
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&u32::from(head).to_le_bytes());
        e[4..].copy_from_slice(&len.to_le_bytes());
        self.write_ram(q.used.wrapping_add(4 + 8 * slot), &e)?;
        let idx = q.used_idx.wrapping_add(1);
        self.write_ram(q.used.wrapping_add(2), &idx.to_le_bytes())?;
        let q = &mut self.queues[qi];
        q.used_idx = idx;
        q.last_avail = q.last_avail.wrapping_add(1);
        Ok(())
    }

    // ---- TX ----------------------------------------------------------------------------

    /// Sends every frame the driver made available on the TX queue.
    fn process_tx(&mut self) {
        if !self.running() || !self.queues[TX_QUEUE].ready {
            return;
        }
        if let Err(e) = self.tx_all() {
            self.broken(TX_QUEUE, e);
        }
    }

    fn tx_all(&mut self) -> Result<(), RingError> {
        let mut sent = false;
        let mut quiet = false;
        for _ in 0..self.queues[TX_QUEUE].num {
            let (head, q) = self.next_avail(TX_QUEUE)?;
            quiet = q;
            let Some(head) = head else { break };
            let mut total = 0usize;
            self.walk(TX_QUEUE, head, false, |dev, d| {
                let len = d.len as usize;
                let room = dev.buf.len().saturating_sub(total);
                let take = len.min(room);
                if take > 0 {
                    let mut tmp = [0u8; NET_HDR + MAX_FRAME];
                    dev.read_ram(d.addr, &mut tmp[..take])?;
                    dev.buf[total..total + take].copy_from_slice(&tmp[..take]);
                }
                if take < len {
                    // Longer than any frame: still check the rest is RAM.
                    let mut probe = [0u8; 1];
                    dev.read_ram(d.addr.wrapping_add(len as u64 - 1), &mut probe)?;
                }
                total = total.saturating_add(len);
                Ok(())
            })?;
            if (NET_HDR..=NET_HDR + MAX_FRAME).contains(&total) {
                let (backend, buf) = (&mut self.backend, &self.buf);
                backend.send(&buf[NET_HDR..total]);
            } else {
                self.report(Diagnostic::TxFrameDropped { len: total });
            }
            self.push_used(TX_QUEUE, head, 0)?;
            sent = true;
        }
        if sent && !quiet {
            self.interrupt_status |= isr::USED_BUFFER;
        }
        Ok(())
    }

    // ---- RX ----------------------------------------------------------------------------

    /// Delivers pending frames from the backend into posted RX buffers; returns how many.
    /// The VMM calls it when the fabric has frames for this VM.
    pub fn poll_rx(&mut self) -> usize {
        if !self.running() || !self.queues[RX_QUEUE].ready {
            return 0;
        }
        match self.rx_all() {
            Ok(n) => n,
            Err((n, e)) => {
                self.broken(RX_QUEUE, e);
                n
            }
        }
    }

    fn rx_all(&mut self) -> Result<usize, (usize, RingError)> {
        let mut delivered = 0;
        let mut quiet = false;
        // Each pass either delivers a frame or drops one (the backend's queue is finite).
        for _ in 0..2 * self.queues[RX_QUEUE].num {
            let (head, q) = self.next_avail(RX_QUEUE).map_err(|e| (delivered, e))?;
            quiet = q;
            let Some(head) = head else { break };
            let mut room = 0usize;
            self.walk(RX_QUEUE, head, true, |dev, d| {
                // Validate the whole buffer against RAM before anything is written.
                if d.len > 0 {
                    let mut probe = [0u8; 1];
                    dev.read_ram(d.addr, &mut probe)?;
                    dev.read_ram(d.addr.wrapping_add(u64::from(d.len) - 1), &mut probe)?;
                }
                room = room.saturating_add(d.len as usize);
                Ok(())
            })
            .map_err(|e| (delivered, e))?;
            let Some(n) = self.backend.receive(&mut self.buf[NET_HDR..]) else {
                break;
            };
            let len = NET_HDR + n.min(MAX_FRAME);
            if len > room {
                self.report(Diagnostic::RxFrameDropped { len, room });
                continue;
            }
            self.buf[..NET_HDR].fill(0);
            self.buf[NUM_BUFFERS..NET_HDR].copy_from_slice(&1u16.to_le_bytes());
            let mut done = 0usize;
            self.walk(RX_QUEUE, head, true, |dev, d| {
                let k = (d.len as usize).min(len - done);
                if k > 0 {
                    let mut tmp = [0u8; NET_HDR + MAX_FRAME];
                    tmp[..k].copy_from_slice(&dev.buf[done..done + k]);
                    dev.write_ram(d.addr, &tmp[..k])?;
                    done += k;
                }
                Ok(())
            })
            .map_err(|e| (delivered, e))?;
            self.push_used(RX_QUEUE, head, len as u32)
                .map_err(|e| (delivered, e))?;
            delivered += 1;
        }
        if delivered > 0 && !quiet {
            self.interrupt_status |= isr::USED_BUFFER;
        }
        Ok(delivered)
    }
}

fn lo(v: u64, w: u32) -> u64 {
    (v & !0xFFFF_FFFF) | u64::from(w)
}

fn hi(v: u64, w: u32) -> u64 {
    (v & 0xFFFF_FFFF) | (u64::from(w) << 32)
}

impl<M: GuestRam, B: FrameBackend> MmioDevice for VirtioNet<M, B> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let len = data.len();
        if offset >= WINDOW || !matches!(len, 1 | 2 | 4 | 8) || !offset.is_multiple_of(len as u64) {
            return Err(Unanswered);
        }
        let off = offset as u32;
        if off >= reg::CONFIG {
            let c = self.config();
            let start = (off - reg::CONFIG) as usize;
            for (i, b) in data.iter_mut().enumerate() {
                *b = c.get(start + i).copied().unwrap_or(0);
            }
            return Ok(());
        }
        if len != 4 {
            return Err(Unanswered);
        }
        data.copy_from_slice(&self.read_reg(off).to_le_bytes());
        Ok(())
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let len = data.len();
        if offset >= WINDOW || !matches!(len, 1 | 2 | 4 | 8) || !offset.is_multiple_of(len as u64) {
            return Err(Unanswered);
        }
        let off = offset as u32;
        if off >= reg::CONFIG {
            return Ok(());
        }
        if len != 4 {
            return Err(Unanswered);
        }
        let mut w = [0u8; 4];
        w.copy_from_slice(data);
        self.write_reg(off, u32::from_le_bytes(w));
        Ok(())
    }
}
