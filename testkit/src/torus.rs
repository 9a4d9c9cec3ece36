//! A recording DMA back end for the torus model, the VM's segment and bus window the tests
//! use, and the torus model's invariants (the Fig. 6 translation never lets a bus value
//! outside the window reach the back end), checked after every step by
//! `devices/tests/bgp_props.rs` and the `torus` fuzz target.

use alloc::string::ToString;
use alloc::vec::Vec;
use kestrel_bgp::bic::line_mask;
use kestrel_bgp::dma::{ERR_DESCRIPTOR, ERR_RANGE, IRQ_FATAL};
use kestrel_devices::torus::{DmaBackend, TorusDma};

/// The VM's segment: 4 MiB at guest-physical 16 MiB, at bus address 2 GiB.
pub const GPA: u64 = 0x100_0000;
pub const SEG: u64 = 0x40_0000;
pub const BUS: u64 = 0x8000_0000;

/// The segment as register values (addresses >> 4), both ends included.
pub const GUEST_LO: u32 = (GPA >> 4) as u32;
pub const GUEST_HI: u32 = ((GPA + SEG) >> 4) as u32;
/// The bus window as register values (addresses >> 4), both ends included.
pub const BUS_LO: u32 = (BUS >> 4) as u32;
pub const BUS_HI: u32 = ((BUS + SEG) >> 4) as u32;

/// The model over a fresh [`Rec`] for the segment above.
pub fn torus() -> TorusDma<Rec> {
    TorusDma::new(Rec::default(), GPA, SEG, BUS)
}

/// Records forwarded writes; reads return `value`, or (page registers, `value` None) what
/// was last written there.
#[derive(Default)]
pub struct Rec {
    pub page: Vec<(u32, u32)>,
    pub dcrs: Vec<(u32, u32)>,
    pub value: Option<u32>,
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

/// Whether the group-page offset carries an address.
pub fn is_addr(off: u32) -> bool {
    let reg = off % 16;
    off < 0x200
        || (0x800..0x890).contains(&off)
        || ((0x400..0x800).contains(&off) && reg == 8)
        || (off >= 0xC00 && reg >= 8)
}

/// Whether the (absolute) DCR is a range-check window bound.
pub fn is_window(dcr: u32) -> bool {
    (0xD02..0xD12).contains(&dcr) || (0xD14..0xD24).contains(&dcr)
}

/// What a guest may read from an address register or window: 0 or inside its segment.
pub fn guest_value_ok(v: u32) -> bool {
    v == 0 || (GUEST_LO..=GUEST_HI).contains(&v)
}

/// After every step: no address register reached the back end with a bus value outside
/// the window, no window bound outside its last quad; the model's only line is
/// `IRQ_FATAL` and its fatal bits are `ERR_RANGE`/`ERR_DESCRIPTOR` only; a diagnostic
/// says something. Panics on a violation.
pub fn check(t: &mut TorusDma<Rec>) {
    for &(off, v) in &t.backend().page {
        if is_addr(off) {
            assert!((BUS_LO..=BUS_HI).contains(&v), "page {off:#x} = {v:#x}");
        }
    }
    for &(dcr, v) in &t.backend().dcrs {
        if is_window(dcr) {
            assert!((BUS_LO..BUS_HI).contains(&v), "window {dcr:#x} = {v:#x}");
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
