//! The BG/P collective (tree) network as a guest sees it in a Kestrel VM: one node's two
//! virtual channels (VC0 and VC1, each a 0x400-byte MMIO window) and the collective DCRs
//! 0xC00..0xC7F (bgp-interconnect.md 2.2; every number from `kestrel_bgp::coll`).
//!
//! The model assembles whole packets (one header word + 256 bytes of payload) from the
//! guest's stores and hands each complete packet to a [`TreeBackend`]; it takes received
//! packets from the backend one at a time and serves them to the guest's loads. The backend
//! is the node's collective hardware: the VMM implements it over the fabric engine
//! (`Fabric::tree_inject`, `tree_receive`, `tree_status`, `dcr_read`/`dcr_write`). The model
//! knows nothing about routing, class routes or the ALU.
//!
//! # Registers of a VC window (offset from the VC's base)
//!
//! | off | name | model |
//! |---|---|---|
//! | 0x00..0x0F | DI | payload quad, built from stores (see below) |
//! | 0x10 | HI | a 32-bit store starts a packet |
//! | 0x20..0x2F | DR | payload loads of the received packet, in order |
//! | 0x30 | HR | 32-bit load: the received packet's header |
//! | 0x40 | S | status of this VC |
//! | 0x50 | SO | status of the other VC |
//!
//! **Deviation forced by the 440 (no Double Hummer, bgp-interconnect.md 2.2/3.7):** BG/P
//! writes a payload quad with one 16-byte `stfpdx`, which a 440 does not have. Here a quad
//! is built from 4-byte stores at DI+0, +4, +8, +12 or 8-byte stores (`stfd`) at DI+0, +8
//! (16-byte stores at DI+0 are accepted too), in increasing order: each store must continue
//! the quad where the previous one stopped. Loads from DR may be 4, 8 or 16 bytes wide at
//! an aligned offset in DR..DR+16; they return the next bytes of the packet whatever the
//! offset (a load only consumes). 16 quads complete the packet.
//!
//! A packet is injected when its 16th quad completes. The model holds one packet in
//! assembly per VC; it does not queue headers ahead of their payloads (on BG/P the header
//! and payload FIFOs are separate; Linux's drivers write a header, then its 16 quads).
//!
//! On reception the model holds one packet per VC "in hand": HR returns its header and DR
//! its payload, in either order. Reading HR again, or DR past the packet, takes the next
//! packet from the backend. Abandoning a packet half read drops the rest of it (diagnostic,
//! no hardware flag).
//!
//! Status words (S, SO) are the backend's for the VC plus what the model holds: the
//! injection header and complete quads of a packet in assembly, and the unread header and
//! remaining quads of the packet in hand (field-wise, saturating at the field's maximum;
//! `ST_RCV_IRQ` also when the unread header in hand has `HDR_IRQ`).
//!
//! # Errors a guest can cause (a hardware flag, and a [`Diagnostic`] for the VMM's log)
//!
//! | guest action | flag |
//! |---|---|
//! | payload store without a header | PIXF `PIX_COLLISION` (the data is dropped) |
//! | a store that does not continue the quad | PIXF `PIX_COLLISION` (the packet is dropped) |
//! | a header store while a packet is incomplete | PIXF `PIX_COLLISION` (the old one is dropped, the new header starts a packet) |
//! | a packet the backend cannot take ([`TreeError::Full`]) | PIXF `PIX_POFn` + `PIX_HOFn` (dropped) |
//! | HR load with nothing received | PRXF `PRX_HURn` (reads 0) |
//! | DR load with nothing received | PRXF `PRX_PURn` (reads 0) |
//! | an access of a valid width to an undefined offset of the window, or a non-word access to HI/HR/S/SO | PRXF `PRX_BADADDRn` (loads read 0) |
//!
//! Widths other than 4, 8 or 16 bytes, offsets not aligned to the width, and offsets past
//! the window are [`Unanswered`] (the VMM injects a data storage exception).
//!
//! The model's flags are ORed into the PRXF/PIXF values the backend reports, and a read of
//! PRXF/PIXF clears both (the backend's by its own DCR read). The model's flags raise the
//! exception lines (`IRQ_INJ_EXC`, `IRQ_RCV_EXC`) when the guest enabled them in
//! PIXEN/PRXEN (shadowed here, and forwarded); see [`Collective::irq_lines`].

use crate::bus::{DcrDevice, MmioDevice, Unanswered};
use core::fmt;
use kestrel_bgp::bic::{line_mask, GROUPS, LINES_PER_GROUP};
pub use kestrel_bgp::coll::{
    DCR_BASE, DCR_COUNT, DCR_PIXEN, DCR_PIXF, DCR_PRXEN, DCR_PRXF, DI, DR, HDR_IRQ, HI, HR,
    IRQ_INJ_EXC, IRQ_RCV_EXC, IRQ_RCV_VC0, IRQ_RCV_VC1, PAYLOAD_BYTES, PAYLOAD_QUADS,
    PIX_COLLISION, PIX_HOF0, PIX_HOF1, PIX_POF0, PIX_POF1, PRX_BADADDR0, PRX_BADADDR1, PRX_HUR0,
    PRX_HUR1, PRX_PUR0, PRX_PUR1, S, SO, ST_HDRS_MASK, ST_INJ_HDRS_SHIFT, ST_INJ_QUADS_SHIFT,
    ST_QUADS_MASK, ST_RCV_HDRS_SHIFT, ST_RCV_IRQ, ST_RCV_QUADS_SHIFT, VC0_BASE, VC1_BASE, VCS,
    VC_SIZE,
};

/// Bytes of one packet's payload.
pub const PAYLOAD: usize = PAYLOAD_BYTES as usize;
const QUAD: usize = 16;
const NVC: usize = VCS as usize;

/// Why the backend did not take a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeError {
    /// The VC's injection FIFO is full: the guest sees the overflow flags.
    Full,
    /// The fabric refused the packet for a reason the guest cannot see on BG/P (the
    /// endpoint is detached, ...): dropped with a diagnostic only.
    Refused,
}

/// The node's collective hardware behind the model (implemented by the VMM over the fabric).
pub trait TreeBackend {
    /// Injects one whole packet on `vc` (0 or 1).
    fn inject(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), TreeError>;
    /// Takes the next received packet of `vc`: its payload into `payload`, its header
    /// returned; `None` when nothing was received.
    fn receive(&mut self, vc: usize, payload: &mut [u8; PAYLOAD]) -> Option<u32>;
    /// The status word of `vc` (layout of the S register).
    fn status(&self, vc: usize) -> u32;
    /// `mfdcr` of the collective DCR `dcr` (absolute number, `DCR_BASE..DCR_BASE+DCR_COUNT`).
    fn dcr_read(&mut self, dcr: u32) -> u32;
    /// `mtdcr` of `value` to the collective DCR `dcr` (absolute number).
    fn dcr_write(&mut self, dcr: u32, value: u32);
}

/// A guest error the VMM should log (the guest also sees a hardware flag, except where
/// noted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// A payload store on `vc` without a header first.
    PayloadWithoutHeader { vc: usize },
    /// A payload store at DI+`offset` where the quad continues at DI+`expected`.
    QuadOutOfOrder {
        vc: usize,
        offset: u32,
        expected: u32,
    },
    /// A header store while `bytes` of the previous packet's payload had been written.
    HeaderInterruptsPacket { vc: usize, bytes: u32 },
    /// The backend's injection FIFO was full; the packet was dropped.
    InjectionFull { vc: usize },
    /// The backend refused the packet (no guest flag).
    InjectionRefused { vc: usize },
    /// HR load with nothing received.
    HeaderUnderrun { vc: usize },
    /// DR load with nothing received.
    PayloadUnderrun { vc: usize },
    /// A received packet was abandoned with `bytes` of payload unread (no guest flag).
    PayloadAbandoned { vc: usize, bytes: u32 },
    /// An access to an undefined register (or with the wrong width) at `offset`.
    BadAddress { vc: usize, offset: u32, len: u32 },
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Diagnostic::PayloadWithoutHeader { vc } => {
                write!(f, "collective VC{vc}: payload store without a header")
            }
            Diagnostic::QuadOutOfOrder {
                vc,
                offset,
                expected,
            } => write!(
                f,
                "collective VC{vc}: payload store at DI+{offset:#x}, quad continues at DI+{expected:#x}; packet dropped"
            ),
            Diagnostic::HeaderInterruptsPacket { vc, bytes } => write!(
                f,
                "collective VC{vc}: header store after {bytes} payload bytes of an incomplete packet; packet dropped"
            ),
            Diagnostic::InjectionFull { vc } => {
                write!(f, "collective VC{vc}: injection FIFO full, packet dropped")
            }
            Diagnostic::InjectionRefused { vc } => {
                write!(f, "collective VC{vc}: the fabric refused the packet")
            }
            Diagnostic::HeaderUnderrun { vc } => {
                write!(f, "collective VC{vc}: HR read with nothing received")
            }
            Diagnostic::PayloadUnderrun { vc } => {
                write!(f, "collective VC{vc}: DR read with nothing received")
            }
            Diagnostic::PayloadAbandoned { vc, bytes } => write!(
                f,
                "collective VC{vc}: next packet taken with {bytes} payload bytes unread; dropped"
            ),
            Diagnostic::BadAddress { vc, offset, len } => write!(
                f,
                "collective VC{vc}: {len}-byte access to undefined offset {offset:#x}"
            ),
        }
    }
}

/// A packet in assembly on one VC.
#[derive(Clone)]
struct Injector {
    header: Option<u32>,
    payload: [u8; PAYLOAD],
    /// Payload bytes written so far (0..PAYLOAD).
    filled: usize,
}

/// The received packet in hand on one VC.
#[derive(Clone)]
struct InHand {
    header: u32,
    header_read: bool,
    payload: [u8; PAYLOAD],
    /// Payload bytes read so far.
    pos: usize,
}

/// The guest's view of one node's collective network.
pub struct Collective<B: TreeBackend> {
    backend: B,
    inj: [Injector; NVC],
    rcv: [Option<InHand>; NVC],
    /// PRXF/PIXF bits raised by the model (sticky until the guest reads the register).
    prxf: u32,
    pixf: u32,
    /// The guest's PRXEN/PIXEN (also forwarded to the backend).
    prxen: u32,
    pixen: u32,
    diag: Option<Diagnostic>,
    diags: u32,
}

impl<B: TreeBackend> Collective<B> {
    pub fn new(backend: B) -> Self {
        const EMPTY: Injector = Injector {
            header: None,
            payload: [0; PAYLOAD],
            filled: 0,
        };
        Self {
            backend,
            inj: [EMPTY, EMPTY],
            rcv: [None, None],
            prxf: 0,
            pixf: 0,
            prxen: 0,
            pixen: 0,
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

    /// The most recent guest error since the last call, and how many errors there were in
    /// all since then (the VMM logs the first, rate-limited).
    pub fn take_diagnostic(&mut self) -> Option<(Diagnostic, u32)> {
        let d = self.diag.take()?;
        let n = core::mem::replace(&mut self.diags, 0);
        Some((d, n))
    }

    /// The PRXF and PIXF bits the model has raised and the guest has not read yet.
    pub fn flags(&self) -> (u32, u32) {
        (self.prxf, self.pixf)
    }

    /// ORs the interrupt lines the model asserts into `lines` (the BIC's `set_lines`
    /// layout): the exception lines for its enabled flags, and a VC's receive line while an
    /// unread header with `HDR_IRQ` is in hand (the backend no longer counts that packet).
    /// The VMM combines them with the fabric's `irq_lines` before driving the BIC.
    pub fn irq_lines(&self, lines: &mut [u32; GROUPS as usize]) {
        let mut raise = |irq: u32| {
            if let Some(w) = lines.get_mut((irq / LINES_PER_GROUP) as usize) {
                *w |= line_mask(irq);
            }
        };
        if self.pixf & self.pixen != 0 {
            raise(IRQ_INJ_EXC);
        }
        if self.prxf & self.prxen != 0 {
            raise(IRQ_RCV_EXC);
        }
        for (vc, irq) in [(0, IRQ_RCV_VC0), (1, IRQ_RCV_VC1)] {
            if let Some(p) = &self.rcv[vc] {
                if !p.header_read && p.header & HDR_IRQ != 0 {
                    raise(irq);
                }
            }
        }
    }

    fn report(&mut self, d: Diagnostic) {
        self.diag = Some(d);
        self.diags = self.diags.saturating_add(1);
    }

    /// The status word of `vc` as S reads it.
    pub fn status(&self, vc: usize) -> u32 {
        if vc >= NVC {
            return 0;
        }
        let mut st = self.backend.status(vc);
        let add = |st: &mut u32, shift: u32, mask: u32, n: u32| {
            let v = ((*st >> shift) & mask).saturating_add(n).min(mask);
            *st = (*st & !(mask << shift)) | (v << shift);
        };
        let inj = &self.inj[vc];
        if inj.header.is_some() {
            add(&mut st, ST_INJ_HDRS_SHIFT, ST_HDRS_MASK, 1);
        }
        add(
            &mut st,
            ST_INJ_QUADS_SHIFT,
            ST_QUADS_MASK,
            (inj.filled / QUAD) as u32,
        );
        if let Some(p) = &self.rcv[vc] {
            if !p.header_read {
                add(&mut st, ST_RCV_HDRS_SHIFT, ST_HDRS_MASK, 1);
                if p.header & HDR_IRQ != 0 {
                    st |= ST_RCV_IRQ;
                }
            }
            let quads = (PAYLOAD - p.pos).div_ceil(QUAD) as u32;
            add(&mut st, ST_RCV_QUADS_SHIFT, ST_QUADS_MASK, quads);
        }
        st
    }

    /// A store of `data` at `offset` of VC `vc`'s window.
    pub fn vc_write(&mut self, vc: usize, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let (off, len) = Self::decode(vc, offset, data.len())?;
        if (DI..DI + QUAD as u32).contains(&off) {
            self.payload_store(vc, off - DI, data);
        } else if off == HI && len == 4 {
            self.header_store(vc, be32(data));
        } else {
            self.bad_address(vc, off, len);
        }
        Ok(())
    }

    /// A load of `data.len()` bytes at `offset` of VC `vc`'s window.
    pub fn vc_read(&mut self, vc: usize, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let (off, len) = Self::decode(vc, offset, data.len())?;
        if (DR..DR + QUAD as u32).contains(&off) {
            self.payload_load(vc, data);
            return Ok(());
        }
        let word = match off {
            HR if len == 4 => self.header_load(vc),
            S if len == 4 => self.status(vc),
            SO if len == 4 => self.status(1 - vc),
            _ => {
                self.bad_address(vc, off, len);
                data.fill(0);
                return Ok(());
            }
        };
        data.copy_from_slice(&word.to_be_bytes());
        Ok(())
    }

    /// `(offset, len)` of a decodable access: VC 0 or 1, inside the window, a width of 4, 8
    /// or 16 bytes, aligned to it.
    fn decode(vc: usize, offset: u64, len: usize) -> Result<(u32, u32), Unanswered> {
        let ok_len = matches!(len, 4 | 8 | 16);
        if vc >= NVC || !ok_len || offset >= VC_SIZE || !offset.is_multiple_of(len as u64) {
            return Err(Unanswered);
        }
        Ok((offset as u32, len as u32))
    }

    fn bad_address(&mut self, vc: usize, offset: u32, len: u32) {
        self.prxf |= [PRX_BADADDR0, PRX_BADADDR1][vc];
        self.report(Diagnostic::BadAddress { vc, offset, len });
    }

    fn header_store(&mut self, vc: usize, header: u32) {
        let inj = &mut self.inj[vc];
        let dropped = inj.header.is_some().then_some(inj.filled as u32);
        inj.header = Some(header);
        inj.filled = 0;
        if let Some(bytes) = dropped {
            self.pixf |= PIX_COLLISION;
            self.report(Diagnostic::HeaderInterruptsPacket { vc, bytes });
        }
    }

    fn payload_store(&mut self, vc: usize, offset: u32, data: &[u8]) {
        let inj = &mut self.inj[vc];
        if inj.header.is_none() {
            self.pixf |= PIX_COLLISION;
            self.report(Diagnostic::PayloadWithoutHeader { vc });
            return;
        }
        let expected = (inj.filled % QUAD) as u32;
        if offset != expected || inj.filled + data.len() > PAYLOAD {
            inj.header = None;
            inj.filled = 0;
            self.pixf |= PIX_COLLISION;
            self.report(Diagnostic::QuadOutOfOrder {
                vc,
                offset,
                expected,
            });
            return;
        }
        inj.payload[inj.filled..inj.filled + data.len()].copy_from_slice(data);
        inj.filled += data.len();
        if inj.filled < PAYLOAD {
            return;
        }
        let header = inj.header.take().unwrap_or(0);
        inj.filled = 0;
        let payload = inj.payload;
        match self.backend.inject(vc, header, &payload) {
            Ok(()) => {}
            Err(TreeError::Full) => {
                self.pixf |= [PIX_POF0 | PIX_HOF0, PIX_POF1 | PIX_HOF1][vc];
                self.report(Diagnostic::InjectionFull { vc });
            }
            Err(TreeError::Refused) => self.report(Diagnostic::InjectionRefused { vc }),
        }
    }

    /// Takes the next packet of `vc` from the backend into the hand (dropping the one held).
    fn next_packet(&mut self, vc: usize) -> bool {
        if let Some(p) = &self.rcv[vc] {
            if p.pos < PAYLOAD {
                let bytes = (PAYLOAD - p.pos) as u32;
                self.report(Diagnostic::PayloadAbandoned { vc, bytes });
            }
        }
        let mut payload = [0u8; PAYLOAD];
        self.rcv[vc] = self.backend.receive(vc, &mut payload).map(|header| InHand {
            header,
            header_read: false,
            payload,
            pos: 0,
        });
        self.rcv[vc].is_some()
    }

    /// Drops the packet in hand once both its header and its payload have been read.
    fn retire(&mut self, vc: usize) {
        if matches!(&self.rcv[vc], Some(p) if p.header_read && p.pos >= PAYLOAD) {
            self.rcv[vc] = None;
        }
    }

    fn header_load(&mut self, vc: usize) -> u32 {
        let fresh = matches!(&self.rcv[vc], Some(p) if !p.header_read);
        if !fresh && !self.next_packet(vc) {
            self.prxf |= [PRX_HUR0, PRX_HUR1][vc];
            self.report(Diagnostic::HeaderUnderrun { vc });
            return 0;
        }
        let Some(p) = self.rcv[vc].as_mut() else {
            return 0;
        };
        p.header_read = true;
        let h = p.header;
        self.retire(vc);
        h
    }

    fn payload_load(&mut self, vc: usize, data: &mut [u8]) {
        let more = matches!(&self.rcv[vc], Some(p) if p.pos < PAYLOAD);
        if !more && !self.next_packet(vc) {
            self.prxf |= [PRX_PUR0, PRX_PUR1][vc];
            self.report(Diagnostic::PayloadUnderrun { vc });
            data.fill(0);
            return;
        }
        let Some(p) = self.rcv[vc].as_mut() else {
            data.fill(0);
            return;
        };
        // A packet's payload is a whole number of quads, and loads are 4, 8 or 16 bytes:
        // a load that would run past the end takes what is left and zero-fills.
        let n = data.len().min(PAYLOAD - p.pos);
        data[..n].copy_from_slice(&p.payload[p.pos..p.pos + n]);
        data[n..].fill(0);
        p.pos += n;
        self.retire(vc);
    }

    /// `mfdcr` of collective DCR `DCR_BASE + offset`.
    pub fn read_dcr(&mut self, offset: u32) -> u32 {
        if offset >= DCR_COUNT {
            return 0;
        }
        let v = self.backend.dcr_read(DCR_BASE + offset);
        match offset {
            DCR_PRXF => v | core::mem::take(&mut self.prxf),
            DCR_PIXF => v | core::mem::take(&mut self.pixf),
            _ => v,
        }
    }

    /// `mtdcr` of `value` to collective DCR `DCR_BASE + offset`.
    pub fn write_dcr(&mut self, offset: u32, value: u32) {
        if offset >= DCR_COUNT {
            return;
        }
        match offset {
            DCR_PRXEN => self.prxen = value,
            DCR_PIXEN => self.pixen = value,
            _ => {}
        }
        self.backend.dcr_write(DCR_BASE + offset, value);
    }
}

fn be32(data: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&data[..4]);
    u32::from_be_bytes(w)
}

/// Distance from VC0's window to VC1's.
pub const VC_STRIDE: u64 = VC1_BASE - VC0_BASE;

/// The collective as one MMIO device spanning `[VC0_BASE, VC1_BASE + VC_SIZE)`: offset
/// `vc * VC_STRIDE + reg`. Accesses between the two windows are [`Unanswered`].
impl<B: TreeBackend> MmioDevice for Collective<B> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let vc = (offset / VC_STRIDE) as usize;
        self.vc_read(vc, offset % VC_STRIDE, data)
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let vc = (offset / VC_STRIDE) as usize;
        self.vc_write(vc, offset % VC_STRIDE, data)
    }
}

/// The collective DCRs (offset from [`DCR_BASE`]).
impl<B: TreeBackend> DcrDevice for Collective<B> {
    fn dcr_read(&mut self, offset: u32) -> u32 {
        self.read_dcr(offset)
    }

    fn dcr_write(&mut self, offset: u32, value: u32) {
        self.write_dcr(offset, value)
    }
}
