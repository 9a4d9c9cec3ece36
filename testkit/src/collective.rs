//! A loopback tree back end for the collective model (it checks the VC and DCR numbers it
//! is given and records every injected header) and the collective's invariants, checked
//! after every step by `devices/tests/bgp_props.rs` and the `collective` fuzz target.

use alloc::collections::VecDeque;
use alloc::string::ToString;
use alloc::vec::Vec;
use kestrel_bgp::coll::{
    DCR_BASE, DCR_COUNT, HI, PIX_COLLISION, PIX_HOF0, PIX_HOF1, PIX_POF0, PIX_POF1, PRX_BADADDR0,
    PRX_BADADDR1, PRX_HUR0, PRX_HUR1, PRX_PUR0, PRX_PUR1,
};
use kestrel_devices::bus::MmioDevice;
use kestrel_devices::collective::{Collective, TreeBackend, TreeError, PAYLOAD, VC_STRIDE};

/// Packets a VC of the loopback holds.
pub const QUEUE: usize = 8;

/// The PRXF bits the model documents.
pub const PRX_ALLOWED: u32 =
    PRX_BADADDR0 | PRX_BADADDR1 | PRX_HUR0 | PRX_HUR1 | PRX_PUR0 | PRX_PUR1;
/// The PIXF bits the model documents.
pub const PIX_ALLOWED: u32 = PIX_COLLISION | PIX_POF0 | PIX_POF1 | PIX_HOF0 | PIX_HOF1;

/// Injected packets come back on the same VC ([`QUEUE`] per VC). `full` makes every
/// injection fail; a full queue fails the injection too, or (with `drop_when_queue_full`)
/// accepts and drops the packet.
#[derive(Default)]
pub struct Loopback {
    pub queued: [VecDeque<(u32, [u8; PAYLOAD])>; 2],
    /// Every accepted injection: (VC, header).
    pub injected: Vec<(usize, u32)>,
    pub full: bool,
    pub drop_when_queue_full: bool,
}

impl TreeBackend for Loopback {
    fn inject(&mut self, vc: usize, h: u32, p: &[u8; PAYLOAD]) -> Result<(), TreeError> {
        assert!(vc < 2);
        let queue_full = self.queued[vc].len() >= QUEUE;
        if self.full || (queue_full && !self.drop_when_queue_full) {
            return Err(TreeError::Full);
        }
        self.injected.push((vc, h));
        if !queue_full {
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
        assert!(vc < 2);
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

/// Stores a whole packet on `vc` as a driver does: the header into HI, then 64 word
/// stores into DI (16 quads).
pub fn send(c: &mut Collective<Loopback>, vc: usize, header: u32, payload: &[u8; PAYLOAD]) {
    let base = vc as u64 * VC_STRIDE;
    c.mmio_write(base + u64::from(HI), &header.to_be_bytes())
        .expect("HI decodes");
    for (i, w) in payload.chunks(4).enumerate() {
        c.mmio_write(base + (i as u64 % 4) * 4, w)
            .expect("DI decodes");
    }
}

/// After every step: the model's PRXF/PIXF bits are only the ones it documents; its
/// interrupt lines are only 0xB4..0xB7; every injected packet carries a header the guest
/// stored on that VC (`headers[vc]`); a diagnostic, if any, counts at least one event and
/// says something. Panics on a violation.
pub fn check(c: &mut Collective<Loopback>, headers: &[Vec<u32>; 2]) {
    let (prx, pix) = c.flags();
    assert_eq!(prx & !PRX_ALLOWED, 0);
    assert_eq!(pix & !PIX_ALLOWED, 0);
    let mut lines = [0u32; 15];
    c.irq_lines(&mut lines);
    for (g, w) in lines.iter().enumerate() {
        assert_eq!(*w & !(if g == 5 { 0xF00 } else { 0 }), 0, "only 0xB4..0xB7");
    }
    for &(vc, h) in &c.backend().injected {
        assert!(
            headers[vc].contains(&h),
            "injected header {h:#x} was stored on VC{vc}"
        );
    }
    if let Some((d, n)) = c.take_diagnostic() {
        assert!(n >= 1 && !d.to_string().is_empty());
    }
}
