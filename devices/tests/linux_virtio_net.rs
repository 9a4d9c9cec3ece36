//! The virtio-net device driven register by register as Linux 6.1's `virtio_mmio` +
//! `virtio_net` drive it: probe (magic, version 2, device id), reset, status handshake,
//! 64-bit feature negotiation, config reads of the MAC (byte loads) and link status,
//! queue setup (select, ready == 0, num max, num, the three areas, ready), DRIVER_OK, RX
//! buffers posted and kicked, a TX chain of header + frame and a notify, the interrupt
//! handler (status, ack), frames received into posted buffers; then the guest errors: a
//! bad ring needs a reset and the driver recovers; features refused; undecodable accesses.

use kestrel_devices::bus::{GuestRam, MmioDevice, Unanswered};
use kestrel_devices::virtio_net::{
    feature, isr, reg, status, Diagnostic, RingError, VirtioNet, VENDOR_ID, VIRTIO_NET_S_LINK_UP,
    VIRTQ_AVAIL_F_NO_INTERRUPT, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE,
    WINDOW,
};
use kestrel_testkit::virtio::{Frames, Ram};

/// Guest RAM: 1 MiB, plain (the buffers are placed where Linux would, not in the
/// testkit's checked layout).
const RAM: usize = 1 << 20;

const MAC: [u8; 6] = [0x06, 0, 0, 1, 0, 0];

/// The driver's side of one split virtqueue in guest memory.
struct Vq {
    index: u32,
    num: u16,
    desc: u64,
    avail: u64,
    used: u64,
    free: u16,
    avail_idx: u16,
    last_used: u16,
}

struct Driver {
    dev: VirtioNet<Ram, Frames>,
}

impl Driver {
    fn new() -> Self {
        Driver {
            dev: VirtioNet::new(Ram::plain(RAM), Frames::default(), MAC),
        }
    }

    fn readl(&mut self, off: u32) -> u32 {
        let mut b = [0u8; 4];
        self.dev.mmio_read(u64::from(off), &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn writel(&mut self, off: u32, v: u32) {
        self.dev
            .mmio_write(u64::from(off), &v.to_le_bytes())
            .unwrap();
    }

    fn mem_w16(&mut self, gpa: u64, v: u16) {
        self.dev.ram_mut().write(gpa, &v.to_le_bytes()).unwrap();
    }

    fn mem_r16(&self, gpa: u64) -> u16 {
        let mut b = [0u8; 2];
        self.dev.ram().read(gpa, &mut b).unwrap();
        u16::from_le_bytes(b)
    }

    fn mem_r32(&self, gpa: u64) -> u32 {
        let mut b = [0u8; 4];
        self.dev.ram().read(gpa, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    /// virtio_mmio_probe + virtio_dev_probe + virtnet_probe up to the queues.
    fn probe(&mut self) -> [u8; 6] {
        assert_eq!(self.readl(reg::MAGIC_VALUE), 0x7472_6976);
        assert_eq!(self.readl(reg::VERSION), 2);
        assert_eq!(self.readl(reg::DEVICE_ID), 1);
        assert_eq!(self.readl(reg::VENDOR_ID), VENDOR_ID);
        self.writel(reg::STATUS, 0);
        self.writel(reg::STATUS, status::ACKNOWLEDGE);
        self.writel(reg::STATUS, status::ACKNOWLEDGE | status::DRIVER);
        self.writel(reg::DEVICE_FEATURES_SEL, 1);
        let mut f = u64::from(self.readl(reg::DEVICE_FEATURES)) << 32;
        self.writel(reg::DEVICE_FEATURES_SEL, 0);
        f |= u64::from(self.readl(reg::DEVICE_FEATURES));
        assert_eq!(
            f,
            feature::VIRTIO_F_VERSION_1 | feature::VIRTIO_NET_F_MAC | feature::VIRTIO_NET_F_STATUS
        );
        self.writel(reg::DRIVER_FEATURES_SEL, 1);
        self.writel(reg::DRIVER_FEATURES, (f >> 32) as u32);
        self.writel(reg::DRIVER_FEATURES_SEL, 0);
        self.writel(reg::DRIVER_FEATURES, f as u32);
        let s = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK;
        self.writel(reg::STATUS, s);
        assert_eq!(self.readl(reg::STATUS), s, "FEATURES_OK accepted");
        // virtio_cread_bytes of the MAC: byte loads; the link status: a 16-bit load.
        let mut mac = [0u8; 6];
        for (i, b) in mac.iter_mut().enumerate() {
            let mut x = [0u8; 1];
            self.dev
                .mmio_read(u64::from(reg::CONFIG) + i as u64, &mut x)
                .unwrap();
            *b = x[0];
        }
        let mut w = [0u8; 2];
        self.dev
            .mmio_read(u64::from(reg::CONFIG) + 6, &mut w)
            .unwrap();
        assert_eq!(u16::from_le_bytes(w), VIRTIO_NET_S_LINK_UP);
        assert_eq!(self.readl(reg::CONFIG_GENERATION), 0);
        mac
    }

    /// vm_setup_vq with the ring laid out at `base` as vring_init does (align 4096).
    fn setup_vq(&mut self, index: u32, base: u64) -> Vq {
        self.writel(reg::QUEUE_SEL, index);
        assert_eq!(self.readl(reg::QUEUE_READY), 0);
        let num = self.readl(reg::QUEUE_NUM_MAX) as u16;
        assert_eq!(num, 256);
        let desc = base;
        let avail = desc + 16 * u64::from(num);
        let used = (avail + 6 + 2 * u64::from(num) + 4095) & !4095;
        // vring_create_virtqueue hands out zeroed memory.
        let end = used + 6 + 8 * u64::from(num);
        self.dev
            .ram_mut()
            .write(desc, &vec![0u8; (end - desc) as usize])
            .unwrap();
        self.writel(reg::QUEUE_NUM, u32::from(num));
        self.writel(reg::QUEUE_DESC_LOW, desc as u32);
        self.writel(reg::QUEUE_DESC_HIGH, (desc >> 32) as u32);
        self.writel(reg::QUEUE_DRIVER_LOW, avail as u32);
        self.writel(reg::QUEUE_DRIVER_HIGH, 0);
        self.writel(reg::QUEUE_DEVICE_LOW, used as u32);
        self.writel(reg::QUEUE_DEVICE_HIGH, 0);
        self.writel(reg::QUEUE_READY, 1);
        assert_eq!(self.readl(reg::QUEUE_READY), 1);
        Vq {
            index,
            num,
            desc,
            avail,
            used,
            free: 0,
            avail_idx: 0,
            last_used: 0,
        }
    }

    fn driver_ok(&mut self) {
        let s = self.readl(reg::STATUS);
        self.writel(reg::STATUS, s | status::DRIVER_OK);
    }

    fn write_desc(&mut self, vq: &Vq, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.dev
            .ram_mut()
            .write(vq.desc + 16 * u64::from(i), &d)
            .unwrap();
    }

    /// virtqueue_add_*: a chain of `bufs` (addr, len, writable) made available.
    fn add(&mut self, vq: &mut Vq, bufs: &[(u64, u32, bool)]) -> u16 {
        let head = vq.free;
        for (k, &(addr, len, w)) in bufs.iter().enumerate() {
            let i = (head + k as u16) % vq.num;
            let mut flags = if w { VIRTQ_DESC_F_WRITE } else { 0 };
            if k + 1 < bufs.len() {
                flags |= VIRTQ_DESC_F_NEXT;
            }
            self.write_desc(vq, i, addr, len, flags, (i + 1) % vq.num);
        }
        vq.free = (head + bufs.len() as u16) % vq.num;
        let slot = u64::from(vq.avail_idx % vq.num);
        self.mem_w16(vq.avail + 4 + 2 * slot, head);
        vq.avail_idx = vq.avail_idx.wrapping_add(1);
        self.mem_w16(vq.avail + 2, vq.avail_idx);
        head
    }

    fn kick(&mut self, vq: &Vq) {
        self.writel(reg::QUEUE_NOTIFY, vq.index);
    }

    /// virtqueue_get_buf: the used entries since the last call.
    fn get_used(&mut self, vq: &mut Vq) -> Vec<(u32, u32)> {
        let idx = self.mem_r16(vq.used + 2);
        let mut out = vec![];
        while vq.last_used != idx {
            let slot = u64::from(vq.last_used % vq.num);
            out.push((
                self.mem_r32(vq.used + 4 + 8 * slot),
                self.mem_r32(vq.used + 8 + 8 * slot),
            ));
            vq.last_used = vq.last_used.wrapping_add(1);
        }
        out
    }

    /// vm_interrupt: read the status, ack it.
    fn interrupt(&mut self) -> u32 {
        let s = self.readl(reg::INTERRUPT_STATUS);
        self.writel(reg::INTERRUPT_ACK, s);
        s
    }

    /// A whole bring-up: probe, RX and TX queues, DRIVER_OK, `n` RX buffers posted.
    fn up(n: u16) -> (Self, Vq, Vq) {
        let mut d = Self::new();
        assert_eq!(d.probe(), MAC);
        let mut rx = d.setup_vq(0, 0x1_0000);
        let tx = d.setup_vq(1, 0x2_0000);
        d.driver_ok();
        for k in 0..n {
            d.add(&mut rx, &[(rx_buf(k), 1530, true)]);
        }
        d.kick(&rx);
        (d, rx, tx)
    }
}

fn rx_buf(k: u16) -> u64 {
    0x4_0000 + 0x800 * u64::from(k)
}

fn frame(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

#[test]
fn bring_up_and_transmit() {
    let (mut d, _rx, mut tx) = Driver::up(8);
    assert!(!d.dev.irq());
    let f = frame(1514, 7);
    // Header and frame in two descriptors (virtio_net's xmit_skb with a separate header).
    d.dev.ram_mut().write(0x8_0000, &[0u8; 12]).unwrap();
    d.dev.ram_mut().write(0x8_1000, &f).unwrap();
    let head = d.add(
        &mut tx,
        &[(0x8_0000, 12, false), (0x8_1000, f.len() as u32, false)],
    );
    d.kick(&tx);
    assert_eq!(d.dev.backend().sent, vec![f.clone()]);
    assert!(d.dev.irq());
    assert_eq!(d.interrupt(), isr::USED_BUFFER);
    assert!(!d.dev.irq());
    assert_eq!(d.get_used(&mut tx), vec![(u32::from(head), 0)]);
    // Header and frame in one descriptor (the header pushed in front of the data).
    let mut one = vec![0u8; 12];
    one.extend_from_slice(&f[..60]);
    d.dev.ram_mut().write(0x9_0000, &one).unwrap();
    d.add(&mut tx, &[(0x9_0000, one.len() as u32, false)]);
    d.kick(&tx);
    assert_eq!(d.dev.backend().sent[1], f[..60].to_vec());
    assert_eq!(d.dev.take_diagnostic(), None);
}

#[test]
fn receive_into_posted_buffers() {
    let (mut d, mut rx, _tx) = Driver::up(2);
    d.dev
        .backend_mut()
        .pending
        .extend([frame(60, 1), frame(1514, 2), frame(100, 3)]);
    assert_eq!(d.dev.poll_rx(), 2, "two buffers posted");
    assert_eq!(d.interrupt(), isr::USED_BUFFER);
    let used = d.get_used(&mut rx);
    assert_eq!(used, vec![(0, 12 + 60), (1, 12 + 1514)]);
    let mut hdr = [0u8; 12];
    d.dev.ram().read(rx_buf(0), &mut hdr).unwrap();
    assert_eq!(hdr, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0], "num_buffers = 1");
    let mut got = vec![0u8; 1514];
    d.dev.ram().read(rx_buf(1) + 12, &mut got).unwrap();
    assert_eq!(got, frame(1514, 2));
    // The third frame waits for a buffer; a refill and kick delivers it.
    assert_eq!(d.dev.poll_rx(), 0);
    d.add(&mut rx, &[(rx_buf(2), 1530, true)]);
    d.kick(&rx);
    assert_eq!(d.get_used(&mut rx), vec![(2, 112)]);
    // Interrupt suppression (virtqueue_disable_cb) is honoured.
    d.interrupt();
    d.mem_w16(rx.avail, VIRTQ_AVAIL_F_NO_INTERRUPT);
    d.add(&mut rx, &[(rx_buf(3), 1530, true)]);
    d.dev.backend_mut().pending.push_back(frame(64, 4));
    assert_eq!(d.dev.poll_rx(), 1);
    assert!(!d.dev.irq());
}

#[test]
fn rx_chain_of_header_and_data_buffers_and_a_too_small_buffer() {
    let (mut d, mut rx, _tx) = Driver::up(0);
    d.add(&mut rx, &[(rx_buf(0), 12, true), (rx_buf(1), 1518, true)]);
    d.dev.backend_mut().pending.push_back(frame(200, 9));
    assert_eq!(d.dev.poll_rx(), 1);
    let mut got = vec![0u8; 200];
    d.dev.ram().read(rx_buf(1), &mut got).unwrap();
    assert_eq!(got, frame(200, 9));
    // A 100-byte buffer cannot take a 200-byte frame: dropped, the buffer stays posted.
    d.add(&mut rx, &[(rx_buf(4), 100, true)]);
    d.dev.backend_mut().pending.push_back(frame(200, 1));
    d.dev.backend_mut().pending.push_back(frame(50, 2));
    assert_eq!(d.dev.poll_rx(), 1);
    assert_eq!(
        d.dev.take_diagnostic(),
        Some((
            Diagnostic::RxFrameDropped {
                len: 212,
                room: 100
            },
            1
        ))
    );
    assert_eq!(d.get_used(&mut rx), vec![(0, 212), (2, 62)]);
}

#[test]
fn bad_rings_need_a_reset_and_the_driver_recovers() {
    let (mut d, _rx, mut tx) = Driver::up(1);
    // A descriptor pointing outside RAM.
    d.add(&mut tx, &[(RAM as u64 - 4, 64, false)]);
    d.kick(&tx);
    assert_ne!(d.readl(reg::STATUS) & status::DEVICE_NEEDS_RESET, 0);
    assert_eq!(d.interrupt() & isr::CONFIG_CHANGE, isr::CONFIG_CHANGE);
    assert!(matches!(
        d.dev.take_diagnostic(),
        Some((
            Diagnostic::BadRing {
                queue: 1,
                error: RingError::OutOfRam { .. }
            },
            1
        ))
    ));
    assert!(d.dev.backend().sent.is_empty());
    // Stopped until reset: further kicks do nothing.
    d.kick(&tx);
    assert_eq!(d.dev.take_diagnostic(), None);
    // virtnet_restore-style recovery: reset, probe again, new queues.
    let (mut d2, _rx2, mut tx2) = {
        d.writel(reg::STATUS, 0);
        assert_eq!(d.readl(reg::STATUS), 0);
        assert_eq!(d.probe(), MAC);
        let rx = d.setup_vq(0, 0x1_0000);
        let tx = d.setup_vq(1, 0x2_0000);
        d.driver_ok();
        (d, rx, tx)
    };
    d2.dev.ram_mut().write(0x8_0000, &[0u8; 80]).unwrap();
    d2.add(&mut tx2, &[(0x8_0000, 80, false)]);
    d2.kick(&tx2);
    assert_eq!(d2.dev.backend().sent.len(), 1);
}

#[test]
fn each_ring_error_is_caught() {
    type Setup = fn(&mut Driver, &mut Vq);
    type Want = fn(&RingError) -> bool;
    let cases: [(Setup, Want); 5] = [
        // Available index far ahead.
        (
            |d, vq| d.mem_w16(vq.avail + 2, 1000),
            |e| matches!(e, RingError::AvailIndex { .. }),
        ),
        // Head out of range.
        (
            |d, vq| {
                d.mem_w16(vq.avail + 4, 300);
                d.mem_w16(vq.avail + 2, 1);
            },
            |e| matches!(e, RingError::DescIndex(300)),
        ),
        // A loop.
        (
            |d, vq| {
                d.write_desc(vq, 0, 0x8_0000, 16, VIRTQ_DESC_F_NEXT, 1);
                d.write_desc(vq, 1, 0x8_0000, 16, VIRTQ_DESC_F_NEXT, 0);
                d.mem_w16(vq.avail + 4, 0);
                d.mem_w16(vq.avail + 2, 1);
            },
            |e| matches!(e, RingError::ChainLoop),
        ),
        // Indirect descriptors are not offered.
        (
            |d, vq| {
                d.write_desc(vq, 0, 0x8_0000, 16, VIRTQ_DESC_F_INDIRECT, 0);
                d.mem_w16(vq.avail + 4, 0);
                d.mem_w16(vq.avail + 2, 1);
            },
            |e| matches!(e, RingError::DescFlags(_)),
        ),
        // A device-writable buffer on TX.
        (
            |d, vq| {
                d.write_desc(vq, 0, 0x8_0000, 64, VIRTQ_DESC_F_WRITE, 0);
                d.mem_w16(vq.avail + 4, 0);
                d.mem_w16(vq.avail + 2, 1);
            },
            |e| matches!(e, RingError::DescFlags(_)),
        ),
    ];
    for (i, (setup, want)) in cases.iter().enumerate() {
        let (mut d, _rx, mut tx) = Driver::up(0);
        setup(&mut d, &mut tx);
        d.kick(&tx);
        let Some((Diagnostic::BadRing { queue: 1, error }, _)) = d.dev.take_diagnostic() else {
            panic!("case {i}: no bad-ring diagnostic");
        };
        assert!(want(&error), "case {i}: {error:?}");
        assert_ne!(d.dev.status() & status::DEVICE_NEEDS_RESET, 0);
    }
}

#[test]
fn queue_setup_errors() {
    let mut d = Driver::new();
    d.probe();
    d.writel(reg::QUEUE_SEL, 0);
    d.writel(reg::QUEUE_NUM, 100);
    d.writel(reg::QUEUE_READY, 1);
    assert_eq!(d.readl(reg::QUEUE_READY), 0);
    assert_eq!(
        d.dev.take_diagnostic(),
        Some((
            Diagnostic::BadRing {
                queue: 0,
                error: RingError::BadSize(100)
            },
            1
        ))
    );
    d.writel(reg::STATUS, 0);
    d.writel(reg::QUEUE_SEL, 1);
    d.writel(reg::QUEUE_DESC_LOW, 0x1008);
    d.writel(reg::QUEUE_READY, 1);
    assert_eq!(
        d.dev.take_diagnostic(),
        Some((
            Diagnostic::BadRing {
                queue: 1,
                error: RingError::Misaligned(0x1008)
            },
            1
        ))
    );
    // A queue that does not exist.
    d.writel(reg::STATUS, 0);
    d.writel(reg::QUEUE_SEL, 2);
    assert_eq!(d.readl(reg::QUEUE_NUM_MAX), 0);
    d.writel(reg::QUEUE_READY, 1);
    assert_eq!(d.readl(reg::QUEUE_READY), 0);
}

#[test]
fn features_outside_the_offer_are_refused() {
    let mut d = Driver::new();
    d.writel(reg::STATUS, status::ACKNOWLEDGE | status::DRIVER);
    d.writel(reg::DRIVER_FEATURES_SEL, 0);
    d.writel(reg::DRIVER_FEATURES, feature::VIRTIO_NET_F_MAC as u32);
    d.writel(
        reg::STATUS,
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
    );
    assert_eq!(
        d.readl(reg::STATUS) & status::FEATURES_OK,
        0,
        "no VERSION_1"
    );
    d.writel(reg::DRIVER_FEATURES_SEL, 1);
    d.writel(reg::DRIVER_FEATURES, 1 | 2);
    d.writel(
        reg::STATUS,
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
    );
    assert_eq!(
        d.readl(reg::STATUS) & status::FEATURES_OK,
        0,
        "bit 33 not offered"
    );
    assert!(matches!(
        d.dev.take_diagnostic(),
        Some((Diagnostic::FeaturesRefused { .. }, 2))
    ));
}

#[test]
fn nothing_moves_before_driver_ok_and_accesses_decode() {
    let mut d = Driver::new();
    d.probe();
    let mut rx = d.setup_vq(0, 0x1_0000);
    d.add(&mut rx, &[(rx_buf(0), 1530, true)]);
    d.dev.backend_mut().pending.push_back(frame(60, 0));
    assert_eq!(d.dev.poll_rx(), 0);
    d.driver_ok();
    assert_eq!(d.get_used(&mut rx).len(), 1, "DRIVER_OK runs the queues");
    let mut b = [0u8; 4];
    assert_eq!(d.dev.mmio_read(2, &mut b[..2]), Err(Unanswered));
    assert_eq!(d.dev.mmio_read(1, &mut b[..1]), Err(Unanswered));
    assert_eq!(d.dev.mmio_read(WINDOW, &mut b), Err(Unanswered));
    assert_eq!(d.dev.mmio_read(0x102, &mut b[..2]), Ok(()));
    assert_eq!(b[..2], MAC[2..4]);
    assert_eq!(
        d.dev.mmio_write(0x100, &[1, 2, 3, 4]),
        Ok(()),
        "config writes ignored"
    );
    assert_eq!(d.probe(), MAC);
}
