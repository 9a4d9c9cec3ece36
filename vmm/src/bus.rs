//! The VMM's device buses: which device answers a guest-physical address (the MMIO bus)
//! or a DCR number (the DCR bus).
//!
//! A [`Bus`] holds disjoint, non-empty ranges of a 64-bit address space (guest-physical
//! addresses below 2^36 on the 440, BG/P's devices included; DCR numbers below 2^10), each
//! with a shared device. Inserting a range that overlaps one already there, is empty or
//! wraps around is refused, so the dispatch of an address is unambiguous. An access is
//! routed only if all of its bytes lie in one device's range; the device gets the offset
//! from its base.
//!
//! [`MmioBus`] dispatches loads and stores of every width the 440 (and BG/P's quad FP
//! unit) can issue: 1, 2, 4, 8 and 16 bytes. Any other width, an address no device
//! covers, or an access the device refuses is an error the VMM turns into a data
//! storage exception; [`DcrBus`] errors become machine checks.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;
use kestrel_devices::bus::{DcrDevice, MmioDevice, Unanswered};

/// Why a range was not inserted or an access not dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusError {
    /// The range is empty or runs past the end of the address space.
    BadRange { base: u64, size: u64 },
    /// The range overlaps the range of device `with`.
    Overlap {
        base: u64,
        size: u64,
        with: &'static str,
    },
    /// No device covers the access (or it straddles a device's end).
    Unmapped { addr: u64, len: usize },
    /// Not a width the bus dispatches (1, 2, 4, 8 or 16 bytes).
    Width(usize),
    /// The device did not decode the access (`name`).
    Refused { name: &'static str, offset: u64 },
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BusError::BadRange { base, size } => {
                write!(f, "range {base:#x}+{size:#x} is empty or wraps")
            }
            BusError::Overlap { base, size, with } => {
                write!(f, "range {base:#x}+{size:#x} overlaps {with}")
            }
            BusError::Unmapped { addr, len } => write!(f, "no device at {addr:#x} ({len} bytes)"),
            BusError::Width(n) => write!(f, "{n}-byte access"),
            BusError::Refused { name, offset } => write!(
                f,
                "{name} does not decode offset {offset:#x} with that width"
            ),
        }
    }
}

struct Entry<D: ?Sized> {
    base: u64,
    size: u64,
    name: &'static str,
    dev: Rc<RefCell<D>>,
}

/// Disjoint address ranges, each with a device, sorted by base.
pub struct Bus<D: ?Sized> {
    entries: Vec<Entry<D>>,
}

impl<D: ?Sized> Default for Bus<D> {
    fn default() -> Self {
        Bus {
            entries: Vec::new(),
        }
    }
}

impl<D: ?Sized> Bus<D> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `dev` at `[base, base + size)` under `name` (for log lines).
    pub fn insert(
        &mut self,
        base: u64,
        size: u64,
        name: &'static str,
        dev: Rc<RefCell<D>>,
    ) -> Result<(), BusError> {
        if size == 0 || base.checked_add(size - 1).is_none() {
            return Err(BusError::BadRange { base, size });
        }
        let at = self.entries.partition_point(|e| e.base < base);
        // Only the neighbours can overlap: the entries are disjoint and sorted.
        let prev = at.checked_sub(1).map(|i| &self.entries[i]);
        if let Some(p) = prev.filter(|p| base - p.base < p.size) {
            return Err(BusError::Overlap {
                base,
                size,
                with: p.name,
            });
        }
        if let Some(n) = self.entries.get(at).filter(|n| n.base - base < size) {
            return Err(BusError::Overlap {
                base,
                size,
                with: n.name,
            });
        }
        self.entries.insert(
            at,
            Entry {
                base,
                size,
                name,
                dev,
            },
        );
        Ok(())
    }

    /// The device covering all of `[addr, addr + len)`, with the offset of `addr` in it.
    pub fn find(&self, addr: u64, len: u64) -> Option<Routed<'_, D>> {
        let i = self
            .entries
            .partition_point(|e| e.base <= addr)
            .checked_sub(1)?;
        let e = &self.entries[i];
        let offset = addr - e.base;
        (offset < e.size && len <= e.size - offset).then_some((e.name, &e.dev, offset))
    }

    /// `(base, size, name)` of every range, by base.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, &'static str)> + '_ {
        self.entries.iter().map(|e| (e.base, e.size, e.name))
    }
}

/// Where an access goes: the device's name, the device and the offset in it.
pub type Routed<'a, D> = (&'static str, &'a Rc<RefCell<D>>, u64);

/// Devices in guest-physical space.
pub type MmioBus = Bus<dyn MmioDevice>;
/// Devices on the DCR bus (addresses are DCR numbers).
pub type DcrBus = Bus<dyn DcrDevice>;

/// Whether the bus dispatches an access of `len` bytes.
pub const fn is_access_width(len: usize) -> bool {
    matches!(len, 1 | 2 | 4 | 8 | 16)
}

impl Bus<dyn MmioDevice> {
    /// A load of `data.len()` bytes at guest-physical `addr` (guest byte order).
    pub fn read(&self, addr: u64, data: &mut [u8]) -> Result<(), BusError> {
        let (name, dev, offset) = self.route(addr, data.len())?;
        dev.borrow_mut()
            .mmio_read(offset, data)
            .map_err(|Unanswered| BusError::Refused { name, offset })
    }

    /// A store of `data` at guest-physical `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), BusError> {
        let (name, dev, offset) = self.route(addr, data.len())?;
        dev.borrow_mut()
            .mmio_write(offset, data)
            .map_err(|Unanswered| BusError::Refused { name, offset })
    }

    fn route(&self, addr: u64, len: usize) -> Result<Routed<'_, dyn MmioDevice>, BusError> {
        if !is_access_width(len) {
            return Err(BusError::Width(len));
        }
        self.find(addr, len as u64)
            .ok_or(BusError::Unmapped { addr, len })
    }
}

impl Bus<dyn DcrDevice> {
    /// `mfdcr` of DCR `dcr`.
    pub fn read(&self, dcr: u32) -> Result<u32, BusError> {
        let (_, dev, offset) = self.find(dcr as u64, 1).ok_or(BusError::Unmapped {
            addr: dcr as u64,
            len: 4,
        })?;
        Ok(dev.borrow_mut().dcr_read(offset as u32))
    }

    /// `mtdcr` of `value` to DCR `dcr`.
    pub fn write(&self, dcr: u32, value: u32) -> Result<(), BusError> {
        let (_, dev, offset) = self.find(dcr as u64, 1).ok_or(BusError::Unmapped {
            addr: dcr as u64,
            len: 4,
        })?;
        dev.borrow_mut().dcr_write(offset as u32, value);
        Ok(())
    }
}

/// A device seen through a window that starts `by` bytes (or DCRs) into it, so that one
/// model answers several windows with its own offsets (the collective's VC1 window is
/// offset `VC1_BASE - VC0_BASE` of the model that spans both VCs; the DMA DCRs are 0x80
/// DCRs into the torus model).
pub struct Shifted<D: ?Sized> {
    pub dev: Rc<RefCell<D>>,
    pub by: u64,
}

impl<D: MmioDevice + ?Sized> MmioDevice for Shifted<D> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let o = offset.checked_add(self.by).ok_or(Unanswered)?;
        self.dev.borrow_mut().mmio_read(o, data)
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let o = offset.checked_add(self.by).ok_or(Unanswered)?;
        self.dev.borrow_mut().mmio_write(o, data)
    }
}

/// The same for DCRs: one model behind several DCR windows (the torus model spans the
/// torus and the DMA DCRs).
impl<D: DcrDevice + ?Sized> DcrDevice for Shifted<D> {
    fn dcr_read(&mut self, offset: u32) -> u32 {
        self.dev
            .borrow_mut()
            .dcr_read(offset.wrapping_add(self.by as u32))
    }

    fn dcr_write(&mut self, offset: u32, value: u32) {
        self.dev
            .borrow_mut()
            .dcr_write(offset.wrapping_add(self.by as u32), value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    /// A device of `size` bytes of plain memory that records its accesses.
    struct Ram {
        bytes: Vec<u8>,
        log: Vec<(bool, u64, usize)>,
    }

    impl MmioDevice for Ram {
        fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
            self.log.push((false, offset, data.len()));
            let o = offset as usize;
            data.copy_from_slice(self.bytes.get(o..o + data.len()).ok_or(Unanswered)?);
            Ok(())
        }
        fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
            self.log.push((true, offset, data.len()));
            let o = offset as usize;
            self.bytes
                .get_mut(o..o + data.len())
                .ok_or(Unanswered)?
                .copy_from_slice(data);
            Ok(())
        }
    }

    fn ram(size: usize) -> Rc<RefCell<Ram>> {
        Rc::new(RefCell::new(Ram {
            bytes: vec![0; size],
            log: Vec::new(),
        }))
    }

    #[test]
    fn every_width_reaches_the_device_with_its_offset() {
        let mut bus = MmioBus::new();
        let dev = ram(64);
        // BG/P's devices sit above 4 GiB.
        bus.insert(0x7_3000_0000, 64, "ram", dev.clone()).unwrap();
        for (i, w) in [1usize, 2, 4, 8, 16].into_iter().enumerate() {
            let data: Vec<u8> = (0..w as u8).map(|b| b + 1).collect();
            bus.write(0x7_3000_0010, &data).unwrap();
            let mut back = vec![0; w];
            bus.read(0x7_3000_0010, &mut back).unwrap();
            assert_eq!(back, data);
            assert_eq!(dev.borrow().log[2 * i], (true, 0x10, w));
        }
        for w in [0usize, 3, 5, 32] {
            assert_eq!(
                bus.read(0x7_3000_0000, &mut vec![0; w]),
                Err(BusError::Width(w))
            );
        }
    }

    #[test]
    fn a_shifted_window_reaches_the_model_further_in() {
        let mut bus = MmioBus::new();
        let dev = ram(0x20);
        bus.insert(0x1000, 0x10, "lo", dev.clone()).unwrap();
        let hi: Rc<RefCell<dyn MmioDevice>> = Rc::new(RefCell::new(Shifted {
            dev: dev.clone(),
            by: 0x10,
        }));
        bus.insert(0x9000, 0x10, "hi", hi).unwrap();
        bus.write(0x9004, &[7]).unwrap();
        assert_eq!(dev.borrow().bytes[0x14], 7);
        assert_eq!(dev.borrow().log.last(), Some(&(true, 0x14, 1)));
        let mut b = [0];
        bus.read(0x9004, &mut b).unwrap();
        assert_eq!(b, [7]);
        // Past the model's end: refused by the model.
        let mut s = Shifted { dev, by: u64::MAX };
        assert_eq!(s.mmio_read(1, &mut b), Err(Unanswered));
        // DCRs: window 0xd00 is 2 DCRs into the model at 0xcfe.
        let regs: Rc<RefCell<dyn DcrDevice>> = Rc::new(RefCell::new(Regs([0; 4])));
        let mut bus = DcrBus::new();
        bus.insert(0xcfe, 2, "lo", regs.clone()).unwrap();
        let hi: Rc<RefCell<dyn DcrDevice>> = Rc::new(RefCell::new(Shifted { dev: regs, by: 2 }));
        bus.insert(0xd00, 2, "hi", hi).unwrap();
        bus.write(0xd01, 5).unwrap();
        assert_eq!(bus.read(0xd01), Ok(5));
        assert_eq!(bus.read(0xcff), Ok(0));
    }

    #[test]
    fn unmapped_and_straddling_accesses_fail() {
        let mut bus = MmioBus::new();
        bus.insert(0x1000, 0x10, "a", ram(0x10)).unwrap();
        assert_eq!(
            bus.read(0xfff, &mut [0]),
            Err(BusError::Unmapped {
                addr: 0xfff,
                len: 1
            })
        );
        assert_eq!(
            bus.read(0x1010, &mut [0]),
            Err(BusError::Unmapped {
                addr: 0x1010,
                len: 1
            })
        );
        assert_eq!(
            bus.read(0x100c, &mut [0; 8]),
            Err(BusError::Unmapped {
                addr: 0x100c,
                len: 8
            })
        );
        assert!(bus.read(0x1008, &mut [0; 8]).is_ok());
    }

    #[test]
    fn overlaps_and_bad_ranges_are_refused() {
        let mut bus = MmioBus::new();
        bus.insert(0x1000, 0x100, "a", ram(1)).unwrap();
        assert_eq!(
            bus.insert(0x10ff, 1, "b", ram(1)),
            Err(BusError::Overlap {
                base: 0x10ff,
                size: 1,
                with: "a"
            })
        );
        assert_eq!(
            bus.insert(0xf00, 0x101, "b", ram(1)),
            Err(BusError::Overlap {
                base: 0xf00,
                size: 0x101,
                with: "a"
            })
        );
        assert_eq!(
            bus.insert(0x2000, 0, "b", ram(1)),
            Err(BusError::BadRange {
                base: 0x2000,
                size: 0
            })
        );
        assert_eq!(
            bus.insert(u64::MAX, 2, "b", ram(1)),
            Err(BusError::BadRange {
                base: u64::MAX,
                size: 2
            })
        );
        bus.insert(0xf00, 0x100, "below", ram(1)).unwrap();
        bus.insert(0x1100, 0x100, "above", ram(1)).unwrap();
        bus.insert(u64::MAX, 1, "last", ram(1)).unwrap();
        let names: Vec<_> = bus.ranges().map(|r| r.2).collect();
        assert_eq!(names, ["below", "a", "above", "last"]);
    }

    struct Regs([u32; 4]);
    impl DcrDevice for Regs {
        fn dcr_read(&mut self, offset: u32) -> u32 {
            self.0[offset as usize]
        }
        fn dcr_write(&mut self, offset: u32, value: u32) {
            self.0[offset as usize] = value;
        }
    }

    #[test]
    fn dcr_bus_dispatches_by_number() {
        let mut bus = DcrBus::new();
        let d: Rc<RefCell<dyn DcrDevice>> = Rc::new(RefCell::new(Regs([0; 4])));
        bus.insert(0xc0, 4, "regs", d).unwrap();
        bus.write(0xc2, 7).unwrap();
        assert_eq!(bus.read(0xc2), Ok(7));
        assert!(bus.read(0xc4).is_err());
        assert!(bus.write(0xbf, 0).is_err());
    }

    proptest! {
        /// Against a model (a list of ranges): an insert succeeds exactly when the range
        /// is valid and disjoint from all others, and every address finds the range that
        /// contains it.
        #[test]
        fn bus_matches_a_model(ranges in proptest::collection::vec((0u64..0x1_0000, 1u64..0x400), 1..24),
                               probes in proptest::collection::vec(0u64..0x1_0400, 32)) {
            let mut bus = MmioBus::new();
            let mut model: Vec<(u64, u64)> = Vec::new();
            for (base, size) in ranges {
                let disjoint = model.iter().all(|&(b, s)| base + size <= b || b + s <= base);
                let r = bus.insert(base, size, "d", ram(1));
                prop_assert_eq!(r.is_ok(), disjoint);
                if disjoint {
                    model.push((base, size));
                }
            }
            for a in probes {
                let want = model.iter().find(|&&(b, s)| a >= b && a < b + s).map(|&(b, _)| a - b);
                prop_assert_eq!(bus.find(a, 1).map(|f| f.2), want);
            }
        }
    }
}
