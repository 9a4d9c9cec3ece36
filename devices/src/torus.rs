//! The BG/P torus DMA as a guest sees it in a Kestrel VM: its one DMA group's 4 KiB register
//! page (the guest sees it as group `kestrel_bgp::dma::VM_GROUP`) and the torus and DMA DCRs
//! 0xC80..0xDFF (bgp-interconnect.md 2.3; every number from `kestrel_bgp::dma` and
//! `kestrel_bgp::torus`).
//!
//! This is the front of the paper's Fig. 6 (section 4.3): the model knows the VM's memory
//! segment, guest-physical `[seg_base, seg_base + seg_len)`, which the fabric sees as bus
//! `[bus_base, bus_base + seg_len)`. Every register that carries an address (in 16-byte
//! units, address >> 4) is validated and translated guest-physical -> bus on write and
//! bus -> guest-physical on read; everything else goes to the [`DmaBackend`] unchanged
//! (the VMM implements it over the fabric engine's `dma_read`/`dma_write`/`dcr_read`/
//! `dcr_write`). The guest never sees a bus address.
//!
//! # Address-carrying registers
//!
//! | register | accepted guest value (address = value << 4) |
//! |---|---|
//! | injection FIFO f START, reception FIFO f / header FIFO START | in `[seg_base, seg_end)` |
//! | the same FIFOs' END (exclusive) | in `(seg_base, seg_end]` |
//! | the same FIFOs' HEAD, TAIL | inside the FIFO: `[START, END)` as the guest set them |
//! | injection counter BASE, reception counter BASE | in `[seg_base, seg_end)` |
//! | reception counter LIMIT (last valid quad) | in `[seg_base, seg_end)` |
//! | range-check windows (DCRs `DCR_INJ_MIN + 2w (+1)`, `DCR_RCV_MIN + 2w (+1)`) | any: **clamped** to the segment's first and last quad |
//! | `DCR_BAD_ADDRESS` (read-only) | translated back on read |
//!
//! A write outside its range (or a FIFO pointer outside its FIFO, or a pointer written
//! before START < END is set) is **not forwarded**. Like the hardware's range check, it
//! sets a bit in the fatal status (`ERR_RANGE` for an address outside the segment, with the
//! guest's value as the bad address; `ERR_DESCRIPTOR` for a FIFO pointer outside its FIFO)
//! and, while that bit is enabled in `DCR_FATAL_ENABLE`, asserts `IRQ_FATAL`
//! ([`TorusDma::irq_lines`]); the model keeps a [`Diagnostic`] for the VMM's log. The
//! model's status bits are ORed into the backend's `DCR_FATAL_STATUS` on read and cleared
//! by the guest's write-1-to-clear (which is also forwarded); `DCR_BAD_ADDRESS` reads the
//! model's bad address while its `ERR_RANGE` is set, otherwise the backend's translated.
//! Clamping a range window is not an error (diagnostic only): the guest's window simply
//! ends at its memory.
//!
//! A bus value the backend reports outside the VM's window (a register never written, still
//! at its reset value) reads as 0.
//!
//! # Accesses
//!
//! Aligned 32-bit loads and stores in the 4 KiB page; anything else is [`Unanswered`].
//! DCRs: [`DcrDevice`] on `0xC80..0xE00` (offset from the torus DCR base; the torus and DMA
//! DCR ranges are contiguous), forwarded with absolute DCR numbers.

use crate::bus::{DcrDevice, MmioDevice, Unanswered};
use core::fmt;
use kestrel_bgp::bic::{line_mask, GROUPS, LINES_PER_GROUP};
use kestrel_bgp::dma::{COUNTERS, DCR_BASE as DMA_DCR_BASE, DCR_COUNT as DMA_DCR_COUNT};
pub use kestrel_bgp::dma::{
    CTR_BASE, CTR_LIMIT, DCR_BAD_ADDRESS, DCR_FATAL_ENABLE, DCR_FATAL_STATUS, DCR_INJ_MIN,
    DCR_RCV_MIN, ERR_DESCRIPTOR, ERR_RANGE, FIFO_END, FIFO_HEAD, FIFO_START, FIFO_STRIDE,
    FIFO_TAIL, GROUP_SIZE, INJ_CTR, INJ_FIFO, INJ_FIFOS, IRQ_FATAL, RANGE_WINDOWS, RCV_CTR,
    RCV_FIFO, RCV_FIFOS, RCV_HDR_FIFO,
};
pub use kestrel_bgp::torus::DCR_BASE as TORUS_DCR_BASE;

/// DCRs the model decodes, from [`TORUS_DCR_BASE`] (torus 0xC80..0xCFF, DMA 0xD00..0xDFF).
pub const DCR_SPAN: u32 = DMA_DCR_BASE + DMA_DCR_COUNT - TORUS_DCR_BASE;

/// FIFOs with shadowed bounds: 32 injection, 8 reception, 1 reception header.
const NFIFO: usize = (INJ_FIFOS + RCV_FIFOS + 1) as usize;

/// The node's torus DMA hardware behind the model (implemented by the VMM over the fabric).
/// Offsets are inside the group page; addresses in values are bus addresses >> 4.
pub trait DmaBackend {
    /// Reads the register at `offset` of the VM's DMA group page.
    fn read(&mut self, offset: u32) -> u32;
    /// Writes the register at `offset` (a TAIL or activate write runs the injection).
    fn write(&mut self, offset: u32, value: u32);
    /// `mfdcr` of the torus or DMA DCR `dcr` (absolute number, 0xC80..0xDFF).
    fn dcr_read(&mut self, dcr: u32) -> u32;
    /// `mtdcr` of `value` to the torus or DMA DCR `dcr` (absolute number).
    fn dcr_write(&mut self, dcr: u32, value: u32);
}

/// Where an address-carrying value was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The register at this offset of the group page.
    Register(u32),
    /// This DCR (absolute number).
    Dcr(u32),
}

/// A guest error (or correction) the VMM should log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// An address (`value << 4`) outside the VM's segment; not forwarded, `ERR_RANGE`.
    OutsideSegment { target: Target, value: u32 },
    /// A FIFO pointer outside its FIFO `[start, end)`; not forwarded, `ERR_DESCRIPTOR`.
    OutsideFifo {
        offset: u32,
        value: u32,
        start: u32,
        end: u32,
    },
    /// A range-check window bound clamped to the segment (no flag).
    WindowClamped { dcr: u32, value: u32, clamped: u32 },
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Diagnostic::OutsideSegment { target, value } => {
                let addr = u64::from(value) << 4;
                match target {
                    Target::Register(o) => write!(
                        f,
                        "torus DMA: register {o:#x} = {value:#x} (address {addr:#x}) outside the VM's memory; not written"
                    ),
                    Target::Dcr(d) => write!(
                        f,
                        "torus DMA: DCR {d:#x} = {value:#x} (address {addr:#x}) outside the VM's memory; not written"
                    ),
                }
            }
            Diagnostic::OutsideFifo {
                offset,
                value,
                start,
                end,
            } => write!(
                f,
                "torus DMA: register {offset:#x} = {value:#x} outside its FIFO [{start:#x}, {end:#x}); not written"
            ),
            Diagnostic::WindowClamped {
                dcr,
                value,
                clamped,
            } => write!(
                f,
                "torus DMA: range window DCR {dcr:#x} = {value:#x} clamped to the VM's memory ({clamped:#x})"
            ),
        }
    }
}

/// How a register's value is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An address in `[seg_base, seg_end)`.
    Inside,
    /// An exclusive end in `(seg_base, seg_end]`.
    End,
    /// A pointer inside FIFO n's `[START, END)`.
    Pointer(usize),
}

/// The guest's view of its DMA group and the torus/DMA DCRs.
pub struct TorusDma<B: DmaBackend> {
    backend: B,
    /// Guest-physical segment `[seg_base, seg_base + seg_len)` and its bus base.
    seg_base: u64,
    seg_len: u64,
    bus_base: u64,
    /// Guest values of each shadowed FIFO's START and END (0 until accepted).
    bounds: [(u32, u32); NFIFO],
    /// Fatal status bits the model raised, and the guest value that caused `ERR_RANGE`.
    fatal: u32,
    bad_address: u32,
    /// The guest's DCR_FATAL_ENABLE (also forwarded).
    fatal_enable: u32,
    diag: Option<Diagnostic>,
    diags: u32,
}

impl<B: DmaBackend> TorusDma<B> {
    /// The model for a VM whose memory is guest-physical `[seg_base, seg_base + seg_len)`,
    /// seen by the fabric at bus `bus_base`. The fatal enable shadow starts at the
    /// backend's value.
    pub fn new(mut backend: B, seg_base: u64, seg_len: u64, bus_base: u64) -> Self {
        let fatal_enable = backend.dcr_read(DMA_DCR_BASE + DCR_FATAL_ENABLE);
        Self {
            backend,
            seg_base,
            seg_len,
            bus_base,
            bounds: [(0, 0); NFIFO],
            fatal: 0,
            bad_address: 0,
            fatal_enable,
            diag: None,
            diags: 0,
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The most recent diagnostic since the last call and how many there were in all.
    pub fn take_diagnostic(&mut self) -> Option<(Diagnostic, u32)> {
        let d = self.diag.take()?;
        Some((d, core::mem::replace(&mut self.diags, 0)))
    }

    /// The fatal status bits the model raised and the guest has not cleared.
    pub fn fatal(&self) -> u32 {
        self.fatal
    }

    /// ORs the lines the model asserts into `lines` (BIC `set_lines` layout): `IRQ_FATAL`
    /// while one of its fatal status bits is enabled.
    pub fn irq_lines(&self, lines: &mut [u32; GROUPS as usize]) {
        if self.fatal & self.fatal_enable != 0 {
            if let Some(w) = lines.get_mut((IRQ_FATAL / LINES_PER_GROUP) as usize) {
                *w |= line_mask(IRQ_FATAL);
            }
        }
    }

    fn report(&mut self, d: Diagnostic) {
        self.diag = Some(d);
        self.diags = self.diags.saturating_add(1);
    }

    fn seg_end(&self) -> u64 {
        self.seg_base.saturating_add(self.seg_len)
    }

    /// Guest value (address >> 4) -> bus value, if the address is in `[seg_base, seg_end]`
    /// and the bus address fits 36 bits.
    fn to_bus(&self, value: u32) -> Option<u32> {
        let gpa = u64::from(value) << 4;
        if gpa < self.seg_base || gpa > self.seg_end() {
            return None;
        }
        let bus = (gpa - self.seg_base).checked_add(self.bus_base)?;
        u32::try_from(bus >> 4).ok()
    }

    /// Bus value -> guest value; 0 for a bus address outside the VM's window.
    fn to_guest(&self, value: u32) -> u32 {
        let bus = u64::from(value) << 4;
        if bus < self.bus_base || bus - self.bus_base > self.seg_len {
            return 0;
        }
        let gpa = bus - self.bus_base + self.seg_base;
        u32::try_from(gpa >> 4).unwrap_or(0)
    }

    /// Whether `value` is acceptable for a register of kind `k`.
    fn accepts(&self, k: Kind, value: u32) -> bool {
        let gpa = u64::from(value) << 4;
        match k {
            Kind::Inside => gpa >= self.seg_base && gpa < self.seg_end(),
            Kind::End => gpa > self.seg_base && gpa <= self.seg_end(),
            Kind::Pointer(n) => {
                let (s, e) = self.bounds[n];
                s < e && (s..e).contains(&value)
            }
        }
    }

    /// The address-carrying register at `offset`, if any: its kind, and the shadowed FIFO
    /// and whether it is START (`Some(true)`) or END (`Some(false)`).
    fn classify(offset: u32) -> Option<(Kind, Option<(usize, bool)>)> {
        let fifo = |n: usize, reg: u32| match reg {
            FIFO_START => Some((Kind::Inside, Some((n, true)))),
            FIFO_END => Some((Kind::End, Some((n, false)))),
            _ => Some((Kind::Pointer(n), None)),
        };
        let reg = offset % FIFO_STRIDE;
        let inj_end = INJ_FIFO + INJ_FIFOS * FIFO_STRIDE;
        let rcv_end = RCV_FIFO + RCV_FIFOS * FIFO_STRIDE;
        let ctrs = COUNTERS * FIFO_STRIDE;
        if (INJ_FIFO..inj_end).contains(&offset) {
            fifo(((offset - INJ_FIFO) / FIFO_STRIDE) as usize, reg)
        } else if (RCV_FIFO..rcv_end).contains(&offset) {
            fifo(
                (INJ_FIFOS + (offset - RCV_FIFO) / FIFO_STRIDE) as usize,
                reg,
            )
        } else if (RCV_HDR_FIFO..RCV_HDR_FIFO + FIFO_STRIDE).contains(&offset) {
            fifo(NFIFO - 1, reg)
        } else if ((INJ_CTR..INJ_CTR + ctrs).contains(&offset) && reg == CTR_BASE)
            || ((RCV_CTR..RCV_CTR + ctrs).contains(&offset)
                && (reg == CTR_BASE || reg == CTR_LIMIT))
        {
            // Injection counter BASE, reception counter BASE and LIMIT.
            Some((Kind::Inside, None))
        } else {
            None
        }
    }

    /// Guest load of the group page register at `offset` (aligned, in the page).
    pub fn read(&mut self, offset: u32) -> u32 {
        let v = self.backend.read(offset);
        if Self::classify(offset).is_some() {
            self.to_guest(v)
        } else {
            v
        }
    }

    /// Guest store of `value` to the group page register at `offset`.
    pub fn write(&mut self, offset: u32, value: u32) {
        let Some((kind, bound)) = Self::classify(offset) else {
            self.backend.write(offset, value);
            return;
        };
        let bus = if self.accepts(kind, value) {
            self.to_bus(value)
        } else {
            None
        };
        let Some(bus) = bus else {
            match kind {
                Kind::Pointer(n) => {
                    let (start, end) = self.bounds[n];
                    self.fatal |= ERR_DESCRIPTOR;
                    self.report(Diagnostic::OutsideFifo {
                        offset,
                        value,
                        start,
                        end,
                    });
                }
                _ => {
                    self.fatal |= ERR_RANGE;
                    self.bad_address = value;
                    self.report(Diagnostic::OutsideSegment {
                        target: Target::Register(offset),
                        value,
                    });
                }
            }
            return;
        };
        if let Some((n, start)) = bound {
            if start {
                self.bounds[n].0 = value;
            } else {
                self.bounds[n].1 = value;
            }
        }
        self.backend.write(offset, bus);
    }

    /// Whether DMA DCR offset `o` (from 0xD00) is a range-check window bound.
    fn is_window(o: u32) -> bool {
        let n = 2 * RANGE_WINDOWS;
        (DCR_INJ_MIN..DCR_INJ_MIN + n).contains(&o) || (DCR_RCV_MIN..DCR_RCV_MIN + n).contains(&o)
    }

    /// `mfdcr` of DCR `TORUS_DCR_BASE + offset`.
    pub fn read_dcr(&mut self, offset: u32) -> u32 {
        if offset >= DCR_SPAN {
            return 0;
        }
        let dcr = TORUS_DCR_BASE + offset;
        let v = self.backend.dcr_read(dcr);
        let Some(o) = dcr.checked_sub(DMA_DCR_BASE) else {
            return v;
        };
        match o {
            DCR_FATAL_STATUS => v | self.fatal,
            DCR_BAD_ADDRESS if self.fatal & ERR_RANGE != 0 => self.bad_address,
            DCR_BAD_ADDRESS => self.to_guest(v),
            _ if Self::is_window(o) => self.to_guest(v),
            _ => v,
        }
    }

    /// `mtdcr` of `value` to DCR `TORUS_DCR_BASE + offset`.
    pub fn write_dcr(&mut self, offset: u32, value: u32) {
        if offset >= DCR_SPAN {
            return;
        }
        let dcr = TORUS_DCR_BASE + offset;
        let Some(o) = dcr.checked_sub(DMA_DCR_BASE) else {
            self.backend.dcr_write(dcr, value);
            return;
        };
        let mut value = value;
        match o {
            DCR_FATAL_STATUS => self.fatal &= !value,
            DCR_FATAL_ENABLE => self.fatal_enable = value,
            _ if Self::is_window(o) => {
                let Some((clamped, bus)) = self.clamp_window(value) else {
                    self.fatal |= ERR_RANGE;
                    self.bad_address = value;
                    self.report(Diagnostic::OutsideSegment {
                        target: Target::Dcr(dcr),
                        value,
                    });
                    return;
                };
                if clamped != value {
                    self.report(Diagnostic::WindowClamped {
                        dcr,
                        value,
                        clamped,
                    });
                }
                value = bus;
            }
            _ => {}
        }
        self.backend.dcr_write(dcr, value);
    }

    /// A window bound clamped to the segment's first..=last quad, and its bus value; `None`
    /// when the segment has no whole quad or its bus address does not fit.
    fn clamp_window(&self, value: u32) -> Option<(u32, u32)> {
        let first = self.seg_base.div_ceil(16);
        let last = (self.seg_end() / 16).checked_sub(1)?;
        if first > last {
            return None;
        }
        let clamped = u32::try_from(u64::from(value).clamp(first, last)).ok()?;
        Some((clamped, self.to_bus(clamped)?))
    }
}

/// The group page: aligned 32-bit accesses only.
impl<B: DmaBackend> MmioDevice for TorusDma<B> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let off = decode(offset, data.len())?;
        data.copy_from_slice(&self.read(off).to_be_bytes());
        Ok(())
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let off = decode(offset, data.len())?;
        let mut w = [0u8; 4];
        w.copy_from_slice(data);
        self.write(off, u32::from_be_bytes(w));
        Ok(())
    }
}

fn decode(offset: u64, len: usize) -> Result<u32, Unanswered> {
    if len != 4 || !offset.is_multiple_of(4) || offset >= GROUP_SIZE {
        return Err(Unanswered);
    }
    Ok(offset as u32)
}

/// The torus and DMA DCRs, offset from [`TORUS_DCR_BASE`] (0..[`DCR_SPAN`]).
impl<B: DmaBackend> DcrDevice for TorusDma<B> {
    fn dcr_read(&mut self, offset: u32) -> u32 {
        self.read_dcr(offset)
    }

    fn dcr_write(&mut self, offset: u32, value: u32) {
        self.write_dcr(offset, value)
    }
}
