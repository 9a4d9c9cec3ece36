//! Property tests of the BG/P models and the virtio-net device: arbitrary guest register
//! traffic, host events and ring contents never panic, and each model's invariants hold
//! after every step. The BIC is checked against a per-line reference model written
//! independently of its bit-mask implementation.

use kestrel_devices::bic::{self, Bic};
use kestrel_devices::bus::MmioDevice;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// BIC

#[derive(Clone, Copy, Default)]
struct RefLine {
    status: bool,
    level: bool,
    target: u32,
}

struct RefBic {
    lines: Vec<RefLine>,
}

impl RefBic {
    fn new() -> Self {
        Self {
            lines: vec![RefLine::default(); 480],
        }
    }

    fn line(g: u32, i: u32) -> usize {
        (g * 32 + i) as usize
    }

    fn word(&self, g: u32, f: impl Fn(&RefLine) -> bool) -> u32 {
        (0..32)
            .filter(|&i| f(&self.lines[Self::line(g, i)]))
            .fold(0, |a, i| a | (0x8000_0000u32 >> i))
    }

    /// Whether `target` sends to `core` as class `k` (0 ncrit, 1 crit, 2 mchk).
    fn routed(target: u32, core: u32, k: u32) -> bool {
        target == k + 1 || target == ((k + 1) << 2 | core)
    }

    fn pending(&self, g: u32, core: u32, k: u32) -> u32 {
        self.word(g, |l| l.status && Self::routed(l.target, core, k))
    }

    fn read(&mut self, off: u32) -> u32 {
        if !off.is_multiple_of(4) {
            return 0;
        }
        if off < 15 * 0x80 {
            let (g, r) = (off / 0x80, off % 0x80);
            return match r {
                0 => self.word(g, |l| l.status),
                4 => {
                    let v = self.word(g, |l| l.status);
                    for i in 0..32 {
                        let l = &mut self.lines[Self::line(g, i)];
                        l.status = l.level;
                    }
                    v
                }
                0x10..=0x1C => {
                    let w = (r - 0x10) / 4;
                    (0..8).fold(0, |a, j| {
                        a | self.lines[Self::line(g, w * 8 + j)].target << ((7 - j) * 4)
                    })
                }
                0x20..=0x4C => self.pending(g, (r % 16) / 4, (r - 0x20) / 16),
                _ => 0,
            };
        }
        if (0x780..0x7B0).contains(&off) {
            let k = (off - 0x780) / 16;
            let core = (off % 16) / 4;
            return (0..15)
                .filter(|&g| self.pending(g, core, k) != 0)
                .fold(0, |a, g| a | (0x8000_0000 >> g));
        }
        0
    }

    fn write(&mut self, off: u32, v: u32) {
        if !off.is_multiple_of(4) || off >= 15 * 0x80 {
            return;
        }
        let (g, r) = (off / 0x80, off % 0x80);
        for i in 0..32 {
            let bit = v & (0x8000_0000 >> i) != 0;
            let l = &mut self.lines[Self::line(g, i)];
            match r {
                0 => l.status = bit || l.level,
                8 => l.status = (l.status && !bit) || l.level,
                0xC => l.status |= bit,
                0x10..=0x1C if (i / 8) == (r - 0x10) / 4 => {
                    l.target = (v >> ((7 - i % 8) * 4)) & 0xF
                }
                _ => {}
            }
        }
    }

    fn set_line(&mut self, irq: u32, level: bool) {
        if let Some(l) = self.lines.get_mut(irq as usize) {
            if level {
                l.status = true;
            } else if l.level {
                l.status = false;
            }
            l.level = level;
        }
    }
}

#[derive(Clone, Debug)]
enum BicOp {
    Read(u32),
    Write(u32, u32),
    Line(u32, bool),
    Lines([u32; 15]),
}

fn bic_offset() -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => (0u32..15, 0u32..0x14).prop_map(|(g, r)| g * 0x80 + r * 4),
        2 => (0u32..12).prop_map(|r| 0x780 + r * 4),
        1 => 0u32..0x1000,
        1 => any::<u32>(),
    ]
}

fn bic_value() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => any::<u32>(),
        2 => (0u32..32).prop_map(|i| 0x8000_0000 >> i),
        1 => Just(0x4444_4444),
        1 => Just(u32::MAX),
        1 => Just(0),
    ]
}

fn bic_op() -> impl Strategy<Value = BicOp> {
    prop_oneof![
        4 => bic_offset().prop_map(BicOp::Read),
        4 => (bic_offset(), bic_value()).prop_map(|(o, v)| BicOp::Write(o, v)),
        4 => (prop_oneof![4 => 0u32..480, 1 => any::<u32>()], any::<bool>())
            .prop_map(|(i, l)| BicOp::Line(i, l)),
        1 => prop::array::uniform15(prop_oneof![Just(0u32), any::<u32>()]).prop_map(BicOp::Lines),
    ]
}

fn check_bic(bic: &Bic, reference: &mut RefBic) {
    let mut copy = bic.clone();
    for off in (0..0x1000).step_by(4) {
        if off % 0x80 == 4 && off < 0x780 {
            continue; // RD_CLR_STATUS has a side effect
        }
        assert_eq!(copy.read(off), reference.read(off), "offset {off:#x}");
    }
    assert_eq!(
        &copy, bic,
        "reads other than RD_CLR_STATUS have no side effects"
    );
    for g in 0..15 {
        assert_eq!(
            bic.status(g) & bic.levels(g),
            bic.levels(g),
            "asserted lines pending"
        );
    }
    for core in 0..4 {
        assert_eq!(bic.ncrit_output(core), copy.read(0x780 + 4 * core) != 0);
        assert_eq!(bic.crit_output(core), copy.read(0x790 + 4 * core) != 0);
        assert_eq!(bic.mchk_output(core), copy.read(0x7A0 + 4 * core) != 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bic_matches_the_per_line_model(ops in prop::collection::vec(bic_op(), 1..60)) {
        let mut b = Bic::new();
        let mut r = RefBic::new();
        for op in ops {
            match op {
                BicOp::Read(o) => {
                    let mut w = [0u8; 4];
                    match b.mmio_read(u64::from(o), &mut w) {
                        Ok(()) => assert_eq!(u32::from_be_bytes(w), r.read(o)),
                        Err(_) => assert!(o % 4 != 0 || u64::from(o) >= bic::SIZE),
                    }
                }
                BicOp::Write(o, v) => {
                    if b.mmio_write(u64::from(o), &v.to_be_bytes()).is_ok() {
                        r.write(o, v);
                    }
                }
                BicOp::Line(i, l) => {
                    b.set_line(i, l);
                    r.set_line(i, l);
                }
                BicOp::Lines(words) => {
                    b.set_lines(&words);
                    for irq in 0..480u32 {
                        r.set_line(irq, words[(irq / 32) as usize] & bic::line_mask(irq) != 0);
                    }
                }
            }
            check_bic(&b, &mut r);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Collective

mod coll_props {
    use super::*;
    use kestrel_bgp::coll::*;
    use kestrel_devices::collective::{Collective, TreeBackend, TreeError, PAYLOAD, VC_STRIDE};
    use std::collections::VecDeque;

    /// A loopback backend that records every injected packet.
    #[derive(Default)]
    pub struct Recorder {
        pub queued: [VecDeque<(u32, [u8; PAYLOAD])>; 2],
        pub injected: Vec<(usize, u32)>,
        pub full: bool,
    }

    impl TreeBackend for Recorder {
        fn inject(&mut self, vc: usize, h: u32, p: &[u8; PAYLOAD]) -> Result<(), TreeError> {
            assert!(vc < 2);
            if self.full {
                return Err(TreeError::Full);
            }
            self.injected.push((vc, h));
            if self.queued[vc].len() < 8 {
                self.queued[vc].push_back((h, *p));
            }
            Ok(())
        }
        fn receive(&mut self, vc: usize, p: &mut [u8; PAYLOAD]) -> Option<u32> {
            assert!(vc < 2);
            let (h, q) = self.queued[vc].pop_front()?;
            *p = q;
            Some(h)
        }
        fn status(&self, vc: usize) -> u32 {
            self.queued[vc].len() as u32
        }
        fn dcr_read(&mut self, dcr: u32) -> u32 {
            assert!((DCR_BASE..DCR_BASE + DCR_COUNT).contains(&dcr));
            0
        }
        fn dcr_write(&mut self, dcr: u32, _: u32) {
            assert!((DCR_BASE..DCR_BASE + DCR_COUNT).contains(&dcr));
        }
    }

    #[derive(Clone, Debug)]
    pub enum Op {
        Load(u64, usize),
        Store(u64, usize, u32),
        /// A whole well-formed packet with word stores.
        Packet(usize, u32),
        DcrRead(u32),
        DcrWrite(u32, u32),
        Full(bool),
    }

    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            6 => (0u64..2, 0u64..0x60).prop_map(|(vc, o)| vc * VC_STRIDE + o),
            1 => (0u64..2, 0u64..0x400).prop_map(|(vc, o)| vc * VC_STRIDE + o),
            1 => any::<u64>(),
        ]
    }

    fn width() -> impl Strategy<Value = usize> {
        prop_oneof![4 => Just(4usize), 2 => Just(8usize), 1 => Just(16usize), 1 => 0usize..20]
    }

    pub fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (offset(), width()).prop_map(|(o, w)| Op::Load(o, w)),
            4 => (offset(), width(), any::<u32>()).prop_map(|(o, w, v)| Op::Store(o, w, v)),
            2 => (0usize..2, any::<u32>()).prop_map(|(vc, h)| Op::Packet(vc, h)),
            1 => prop_oneof![0u32..0x80, any::<u32>()].prop_map(Op::DcrRead),
            1 => (prop_oneof![0x44u32..0x4A, any::<u32>()], any::<u32>())
                .prop_map(|(o, v)| Op::DcrWrite(o, v)),
            1 => any::<bool>().prop_map(Op::Full),
        ]
    }

    pub fn run(ops: Vec<Op>) {
        let mut c = Collective::new(Recorder::default());
        let mut headers: [Vec<u32>; 2] = [vec![], vec![]];
        let allowed_prx = PRX_BADADDR0 | PRX_BADADDR1 | PRX_HUR0 | PRX_HUR1 | PRX_PUR0 | PRX_PUR1;
        let allowed_pix = PIX_COLLISION | PIX_POF0 | PIX_POF1 | PIX_HOF0 | PIX_HOF1;
        for op in ops {
            match op {
                Op::Load(o, w) => {
                    let mut buf = vec![0xEEu8; w];
                    let _ = c.mmio_read(o, &mut buf);
                }
                Op::Store(o, w, v) => {
                    let buf: Vec<u8> = (0..w).map(|i| (v >> (8 * (i % 4))) as u8).collect();
                    if c.mmio_write(o, &buf).is_ok() && o % VC_STRIDE == u64::from(HI) && w == 4 {
                        headers[(o / VC_STRIDE) as usize]
                            .push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
                    }
                }
                Op::Packet(vc, h) => {
                    let base = vc as u64 * VC_STRIDE;
                    c.mmio_write(base + u64::from(HI), &h.to_be_bytes())
                        .unwrap();
                    headers[vc].push(h);
                    for i in 0..64u64 {
                        c.mmio_write(base + (i % 4) * 4, &(i as u32).to_be_bytes())
                            .unwrap();
                    }
                }
                Op::DcrRead(o) => {
                    let _ = c.read_dcr(o);
                }
                Op::DcrWrite(o, v) => c.write_dcr(o, v),
                Op::Full(f) => c.backend_mut().full = f,
            }
            let (prx, pix) = c.flags();
            assert_eq!(prx & !allowed_prx, 0);
            assert_eq!(pix & !allowed_pix, 0);
            let mut lines = [0u32; 15];
            c.irq_lines(&mut lines);
            for (g, w) in lines.iter().enumerate() {
                if g != 5 {
                    assert_eq!(*w, 0);
                }
            }
            assert_eq!(lines[5] & !0xF00, 0, "only 0xB4..0xB7");
            for &(vc, h) in &c.backend().injected {
                assert!(
                    headers[vc].contains(&h),
                    "injected header {h:#x} was stored on VC{vc}"
                );
            }
            if let Some((d, n)) = c.take_diagnostic() {
                assert!(n >= 1);
                assert!(!d.to_string().is_empty());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn collective_survives_any_traffic(ops in prop::collection::vec(coll_props::op(), 1..80)) {
        coll_props::run(ops);
    }
}

// ---------------------------------------------------------------------------------------
// Torus DMA

mod torus_props {
    use super::*;
    use kestrel_bgp::dma::*;
    use kestrel_devices::bus::DcrDevice;
    use kestrel_devices::torus::{DmaBackend, TorusDma, DCR_SPAN, TORUS_DCR_BASE};

    pub const SEG: u64 = 0x40_0000; // 4 MiB at guest-physical 0x100_0000
    pub const GPA: u64 = 0x100_0000;
    pub const BUS: u64 = 0x8000_0000;

    /// Records forwarded writes; reads return whatever the test put there.
    #[derive(Default)]
    pub struct Rec {
        pub page: Vec<(u32, u32)>,
        pub dcrs: Vec<(u32, u32)>,
        pub read_value: u32,
    }

    impl DmaBackend for Rec {
        fn read(&mut self, offset: u32) -> u32 {
            assert!(offset < 0x1000 && offset.is_multiple_of(4));
            self.read_value
        }
        fn write(&mut self, offset: u32, value: u32) {
            assert!(offset < 0x1000 && offset.is_multiple_of(4));
            self.page.push((offset, value));
        }
        fn dcr_read(&mut self, dcr: u32) -> u32 {
            assert!((0xC80..0xE00).contains(&dcr));
            self.read_value
        }
        fn dcr_write(&mut self, dcr: u32, value: u32) {
            assert!((0xC80..0xE00).contains(&dcr));
            self.dcrs.push((dcr, value));
        }
    }

    /// Whether the page offset carries an address.
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

    #[derive(Clone, Debug)]
    pub enum Op {
        Read(u64, usize, u32),
        Write(u64, usize, u32),
        DcrRead(u32, u32),
        DcrWrite(u32, u32),
    }

    fn value() -> impl Strategy<Value = u32> {
        let lo = (GPA >> 4) as u32;
        let hi = ((GPA + SEG) >> 4) as u32;
        let bus = (BUS >> 4) as u32;
        prop_oneof![
            4 => lo - 4..hi + 4,
            2 => bus - 4..bus + (SEG >> 4) as u32 + 4,
            2 => any::<u32>(),
            1 => Just(0u32),
        ]
    }

    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => (0u64..0x400).prop_map(|o| o * 4),
            1 => any::<u64>(),
        ]
    }

    pub fn op() -> impl Strategy<Value = Op> {
        let width = prop_oneof![8 => Just(4usize), 1 => 0usize..17];
        let dcr = prop_oneof![4 => 0u32..0x180, 1 => any::<u32>()];
        prop_oneof![
            3 => (offset(), width.clone(), value()).prop_map(|(o, w, v)| Op::Read(o, w, v)),
            5 => (offset(), width, value()).prop_map(|(o, w, v)| Op::Write(o, w, v)),
            1 => (dcr.clone(), value()).prop_map(|(d, v)| Op::DcrRead(d, v)),
            2 => (dcr, value()).prop_map(|(d, v)| Op::DcrWrite(d, v)),
        ]
    }

    pub fn run(ops: Vec<Op>) {
        let mut t = TorusDma::new(Rec::default(), GPA, SEG, BUS);
        let bus_lo = (BUS >> 4) as u32;
        let bus_hi = ((BUS + SEG) >> 4) as u32;
        let g_lo = (GPA >> 4) as u32;
        let g_hi = ((GPA + SEG) >> 4) as u32;
        for op in ops {
            match op {
                Op::Read(o, w, v) => {
                    t.backend_mut().read_value = v;
                    let mut buf = vec![0u8; w];
                    if t.mmio_read(o, &mut buf).is_ok() {
                        let got = u32::from_be_bytes(buf[..4].try_into().unwrap());
                        if is_addr(o as u32) {
                            assert!(got == 0 || (g_lo..=g_hi).contains(&got), "{got:#x}");
                        } else {
                            assert_eq!(got, v);
                        }
                    }
                }
                Op::Write(o, w, v) => {
                    let buf = vec![v as u8; w];
                    let _ = t.mmio_write(o, &buf);
                }
                Op::DcrRead(d, v) => {
                    t.backend_mut().read_value = v;
                    let got = t.dcr_read(d);
                    let abs = d.wrapping_add(TORUS_DCR_BASE);
                    if d < DCR_SPAN && is_window(abs) {
                        assert!(got == 0 || (g_lo..=g_hi).contains(&got));
                    }
                }
                Op::DcrWrite(d, v) => t.dcr_write(d, v),
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
            let fatal = (IRQ_FATAL / 32) as usize;
            for (g, w) in lines.iter().enumerate() {
                assert_eq!(
                    *w & !(if g == fatal {
                        bic::line_mask(IRQ_FATAL)
                    } else {
                        0
                    }),
                    0
                );
            }
            assert_eq!(t.fatal() & !(ERR_RANGE | ERR_DESCRIPTOR), 0);
            if let Some((d, _)) = t.take_diagnostic() {
                assert!(!d.to_string().is_empty());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn torus_never_forwards_an_address_outside_the_segment(
        ops in prop::collection::vec(torus_props::op(), 1..80)
    ) {
        torus_props::run(ops);
    }
}

// ---------------------------------------------------------------------------------------
// virtio-net

mod virtio_props {
    use super::*;
    use kestrel_devices::bus::{GuestRam, OutOfRam};
    use kestrel_devices::virtio_net::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;

    pub const RAM: usize = 0x1_0000;
    pub const RX_DESC: u64 = 0x1000;
    pub const NUM: u16 = 16;
    pub const RX_AVAIL: u64 = RX_DESC + 16 * NUM as u64;
    pub const RX_USED: u64 = 0x2000;
    pub const TX_DESC: u64 = 0x3000;
    pub const TX_AVAIL: u64 = TX_DESC + 16 * NUM as u64;
    pub const TX_USED: u64 = 0x4000;
    const USED_LEN: u64 = 6 + 8 * NUM as u64;

    /// RAM that checks every device write: inside a used ring, or inside a device-writable
    /// descriptor of the RX table as it is at that moment.
    pub struct Ram {
        pub mem: RefCell<Vec<u8>>,
        pub strict: bool,
    }

    impl Ram {
        fn allowed(&self, gpa: u64, len: usize) -> bool {
            let end = gpa + len as u64;
            let inside = |a: u64, l: u64| a <= gpa && end <= a.saturating_add(l);
            if inside(RX_USED, USED_LEN) || inside(TX_USED, USED_LEN) {
                return true;
            }
            let m = self.mem.borrow();
            (0..NUM as usize).any(|i| {
                let d = &m[RX_DESC as usize + 16 * i..][..16];
                let addr = u64::from_le_bytes(d[0..8].try_into().unwrap());
                let l = u32::from_le_bytes(d[8..12].try_into().unwrap());
                let flags = u16::from_le_bytes([d[12], d[13]]);
                flags & VIRTQ_DESC_F_WRITE != 0 && inside(addr, u64::from(l))
            })
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
            if self.strict {
                assert!(
                    self.allowed(gpa, data.len()),
                    "write {gpa:#x}+{} outside posted buffers",
                    data.len()
                );
            }
            self.mem.borrow_mut()[s..e].copy_from_slice(data);
            Ok(())
        }
    }

    #[derive(Default)]
    pub struct Frames {
        pub pending: VecDeque<Vec<u8>>,
        pub sent: usize,
    }

    impl FrameBackend for Frames {
        fn send(&mut self, frame: &[u8]) {
            assert!(frame.len() <= MAX_FRAME);
            self.sent += 1;
        }
        fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
            let f = self.pending.pop_front()?;
            let n = f.len().min(buf.len());
            buf[..n].copy_from_slice(&f[..n]);
            Some(n)
        }
    }

    #[derive(Clone, Debug)]
    pub enum Op {
        /// Descriptor `i` of the RX (false) or TX (true) table.
        Desc(bool, u16, u64, u32, u16, u16),
        /// Available ring: slot, head.
        Slot(bool, u16, u16),
        AvailIdx(bool, u16),
        AvailFlags(bool, u16),
        Kick(u32),
        Frame(usize),
        PollRx,
        Read(u64, usize),
        Write(u64, usize, u32),
    }

    fn addr() -> impl Strategy<Value = u64> {
        prop_oneof![
            6 => 0x5000u64..0xF000,
            1 => 0u64..RAM as u64 + 0x100,
            1 => any::<u64>(),
        ]
    }

    fn len() -> impl Strategy<Value = u32> {
        prop_oneof![4 => 0u32..2000, 1 => any::<u32>()]
    }

    fn idx() -> impl Strategy<Value = u16> {
        prop_oneof![6 => 0u16..NUM, 1 => any::<u16>()]
    }

    pub fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<bool>(), idx(), addr(), len(), 0u16..8, idx())
                .prop_map(|(q, i, a, l, f, n)| Op::Desc(q, i, a, l, f, n)),
            3 => (any::<bool>(), 0u16..NUM, idx()).prop_map(|(q, s, h)| Op::Slot(q, s, h)),
            3 => (any::<bool>(), prop_oneof![4 => 0u16..40, 1 => any::<u16>()])
                .prop_map(|(q, i)| Op::AvailIdx(q, i)),
            1 => (any::<bool>(), 0u16..2).prop_map(|(q, f)| Op::AvailFlags(q, f)),
            3 => prop_oneof![0u32..2, any::<u32>()].prop_map(Op::Kick),
            2 => (0usize..1600).prop_map(Op::Frame),
            2 => Just(Op::PollRx),
            2 => (0u64..0x220, prop_oneof![Just(4usize), 0usize..9]).prop_map(|(o, w)| Op::Read(o, w)),
            1 => (prop_oneof![Just(0x64u64), Just(0x70), 0u64..0x220], prop_oneof![Just(4usize), 0usize..9], any::<u32>())
                .prop_map(|(o, w, v)| Op::Write(o, w, v)),
        ]
    }

    fn w32(d: &mut VirtioNet<Ram, Frames>, off: u32, v: u32) {
        d.mmio_write(u64::from(off), &v.to_le_bytes()).unwrap();
    }

    pub fn device(strict: bool) -> VirtioNet<Ram, Frames> {
        let ram = Ram {
            mem: RefCell::new(vec![0; RAM]),
            strict,
        };
        let mut d = VirtioNet::new(ram, Frames::default(), [6, 0, 0, 0, 0, 0]);
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
        assert_eq!(d.status(), 0xF);
        d
    }

    pub fn run(ops: Vec<Op>) {
        let mut d = device(true);
        for op in ops {
            let poke = |d: &mut VirtioNet<Ram, Frames>, gpa: u64, bytes: &[u8]| {
                d.ram().mem.borrow_mut()[gpa as usize..][..bytes.len()].copy_from_slice(bytes);
            };
            match op {
                Op::Desc(tx, i, a, l, f, n) => {
                    let base = if tx { TX_DESC } else { RX_DESC };
                    let mut b = [0u8; 16];
                    b[0..8].copy_from_slice(&a.to_le_bytes());
                    b[8..12].copy_from_slice(&l.to_le_bytes());
                    b[12..14].copy_from_slice(&f.to_le_bytes());
                    b[14..16].copy_from_slice(&n.to_le_bytes());
                    poke(&mut d, base + 16 * u64::from(i % NUM), &b);
                }
                Op::Slot(tx, s, h) => {
                    let base = if tx { TX_AVAIL } else { RX_AVAIL };
                    poke(&mut d, base + 4 + 2 * u64::from(s), &h.to_le_bytes());
                }
                Op::AvailIdx(tx, i) => {
                    let base = if tx { TX_AVAIL } else { RX_AVAIL };
                    poke(&mut d, base + 2, &i.to_le_bytes());
                }
                Op::AvailFlags(tx, f) => {
                    let base = if tx { TX_AVAIL } else { RX_AVAIL };
                    poke(&mut d, base, &f.to_le_bytes());
                }
                Op::Kick(q) => w32(&mut d, reg::QUEUE_NOTIFY, q),
                Op::Frame(n) => d.backend_mut().pending.push_back(vec![0xA5; n]),
                Op::PollRx => {
                    d.poll_rx();
                }
                Op::Read(o, w) => {
                    let mut b = vec![0u8; w];
                    let _ = d.mmio_read(o, &mut b);
                }
                Op::Write(o, w, v) => {
                    // No queue reconfiguration: the write check knows the rings' places.
                    let o = if (0x30..0x50).contains(&o) || (0x80..0xB0).contains(&o) {
                        0x64
                    } else {
                        o
                    };
                    let b: Vec<u8> = (0..w).map(|i| (v >> (8 * (i % 4))) as u8).collect();
                    let _ = d.mmio_write(o, &b);
                }
            }
            assert_eq!(d.irq(), d.read_reg(reg::INTERRUPT_STATUS) != 0);
            assert_eq!(d.read_reg(reg::INTERRUPT_STATUS) & !3, 0);
            if let Some((diag, _)) = d.take_diagnostic() {
                assert!(!diag.to_string().is_empty());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn virtio_net_writes_only_posted_buffers_and_used_rings(
        ops in prop::collection::vec(virtio_props::op(), 1..100)
    ) {
        virtio_props::run(ops);
    }

    #[test]
    fn virtio_net_survives_any_register_sequence(
        ops in prop::collection::vec((0u64..0x240, 0usize..9, any::<u32>(), any::<bool>()), 1..100)
    ) {
        let ram = virtio_props::Ram { mem: std::cell::RefCell::new(vec![0; virtio_props::RAM]), strict: false };
        let mut d = kestrel_devices::virtio_net::VirtioNet::new(ram, virtio_props::Frames::default(), [0; 6]);
        for (o, w, v, read) in ops {
            // Mostly aligned offsets; unaligned ones only for narrow accesses.
            let o = (o & !3) | ((o & 3) * u64::from(w < 4));
            if read {
                let mut b = vec![0u8; w];
                let _ = d.mmio_read(o, &mut b);
            } else {
                let b = v.to_le_bytes().repeat(3);
                let _ = d.mmio_write(o, &b[..w]);
            }
            d.backend_mut().pending.push_back(vec![1; (v % 2000) as usize]);
            d.poll_rx();
        }
    }
}
