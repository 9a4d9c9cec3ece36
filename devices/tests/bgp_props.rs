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
        if off % 4 != 0 {
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
        if off % 4 != 0 || off >= 15 * 0x80 {
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
    assert_eq!(&copy, bic, "reads other than RD_CLR_STATUS have no side effects");
    for g in 0..15 {
        assert_eq!(bic.status(g) & bic.levels(g), bic.levels(g), "asserted lines pending");
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
                        headers[(o / VC_STRIDE) as usize].push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
                    }
                }
                Op::Packet(vc, h) => {
                    let base = vc as u64 * VC_STRIDE;
                    c.mmio_write(base + u64::from(HI), &h.to_be_bytes()).unwrap();
                    headers[vc].push(h);
                    for i in 0..64u64 {
                        c.mmio_write(base + (i % 4) * 4, &(i as u32).to_be_bytes()).unwrap();
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
                assert!(headers[vc].contains(&h), "injected header {h:#x} was stored on VC{vc}");
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
            assert!(offset < 0x1000 && offset % 4 == 0);
            self.read_value
        }
        fn write(&mut self, offset: u32, value: u32) {
            assert!(offset < 0x1000 && offset % 4 == 0);
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
                assert_eq!(*w & !(if g == fatal { bic::line_mask(IRQ_FATAL) } else { 0 }), 0);
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
