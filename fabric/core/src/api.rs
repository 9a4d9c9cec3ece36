//! [`FabricApi`]: the fabric's set of calls, written once. The in-process engine
//! ([`Fabric`](crate::Fabric)) implements it, and so does the fabric service's client
//! (`kestrel_fabric_client::service::Service`, an IPC call per method); everything above
//! the fabric (the VMM's BG/P back ends, the SPI, MPI and network layers of native
//! programs) is generic over it and host-tested against the engine.
//!
//! Calls that move data or change state return `Result<_, Self::Error>`; queries of state
//! (status words, interrupt lines, counters, the last diagnostic) return a value, and a
//! client that cannot ask (the service is gone) answers "nothing": zero lines, no
//! packets, empty counters. A dead fabric is a dead device, never a stopped caller.

use crate::coll::PAYLOAD;
use crate::{Coords, Diagnostic, EpId, FabricError, Stats, IRQ_WORDS};
use core::fmt;
use kestrel_bgp::coll;
use kestrel_bgp::torus::MAC_TORUS_KIND;

/// The node's interconnect as its users call it: one endpoint per VM or native program
/// ([`EpId`]), its DMA group and DCRs, the collective's two channels, frames for the
/// paravirtual NIC, interrupt lines, and the caller's own view of its memory window.
pub trait FabricApi {
    /// Why a call failed. It reads as the engine's [`FabricError`] (a client's transport
    /// failure as [`FabricError::NoSuchEndpoint`]: the endpoint is gone for the caller).
    type Error: Copy + fmt::Debug + fmt::Display + Into<FabricError>;

    /// What [`FabricApi::attach`] needs to know of the new endpoint's memory window: its
    /// length for the engine (whose [`Memory`](crate::Memory) holds the bytes); the
    /// client's address range, shared page and event thread for the service.
    type Window;

    /// Attaches a new endpoint with memory window `window`; returns its id and the bus
    /// address of window offset 0 (its registers are at reset).
    fn attach(&mut self, window: Self::Window) -> Result<(EpId, u64), Self::Error>;

    /// Detaches `ep`: drops its queues and pending reduction contributions, frees its
    /// coordinates. Unknown endpoints are ignored.
    fn detach(&mut self, ep: EpId);

    /// The bus range of `ep`'s window: `(base, len)`.
    fn window(&self, ep: EpId) -> Option<(u64, u64)>;

    /// Torus coordinates of `ep`.
    fn coords(&self, ep: EpId) -> Coords;

    /// Collective node address of `ep`.
    fn node_address(&self, ep: EpId) -> u32;

    /// `ep`'s MAC address: 06:00:00:X:Y:Z.
    fn frame_mac(&self, ep: EpId) -> [u8; 6] {
        let c = self.coords(ep);
        [MAC_TORUS_KIND as u8, 0, 0, c.x, c.y, c.z]
    }

    /// Reads a register of `ep`'s DMA group page (offset 0..0x1000, word aligned).
    fn dma_read(&mut self, ep: EpId, offset: u32) -> Result<u32, Self::Error>;

    /// Writes a register of `ep`'s DMA group page; a TAIL or activate write runs the
    /// injection before returning.
    fn dma_write(&mut self, ep: EpId, offset: u32, value: u32) -> Result<(), Self::Error>;

    /// Two [`FabricApi::dma_write`]s, `(offset, value)` each, in order (the second is not
    /// made if the first fails): one call to the fabric service where it is one.
    fn dma_write2(
        &mut self,
        ep: EpId,
        first: (u32, u32),
        second: (u32, u32),
    ) -> Result<(), Self::Error> {
        self.dma_write(ep, first.0, first.1)?;
        self.dma_write(ep, second.0, second.1)
    }

    /// Whether `ep`'s polled registers (`proto::mirror`) are read without a call, their
    /// receive-side changes waking the owner as interrupt lines do: then nothing needs
    /// to re-arm a reception FIFO's threshold interrupt to be woken by the next packet.
    /// False for the engine itself (its callers wait on interrupt lines).
    fn registers_mirrored(&self, ep: EpId) -> bool {
        let _ = ep;
        false
    }

    /// Reads a DCR as `ep` sees it: collective 0xC00..0xC7F, torus 0xC80..0xCFF, DMA
    /// 0xD00..0xDFF. Reading PRXF or PIXF clears it.
    fn dcr_read(&mut self, ep: EpId, dcr: u32) -> Result<u32, Self::Error>;

    /// Writes a DCR as `ep` sees it. Enabling injection FIFOs (or leaving DMA reset) runs
    /// pending injections; a class-route write may complete a reduction.
    fn dcr_write(&mut self, ep: EpId, dcr: u32, value: u32) -> Result<(), Self::Error>;

    /// Injects one collective packet (header + 256 bytes) from `ep` on `vc`.
    fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        header: u32,
        payload: &[u8; PAYLOAD],
    ) -> Result<(), Self::Error>;

    /// Takes the oldest packet received on `vc` into `payload`; returns its header, or
    /// `None` when nothing was received (no flag: the device model in front, which knows
    /// whether the guest read HR or DR, sets the underrun flag).
    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        payload: &mut [u8; PAYLOAD],
    ) -> Result<Option<u32>, Self::Error>;

    /// The status word of `ep`'s `vc` (0 for an unknown endpoint or VC).
    fn tree_status(&self, ep: EpId, vc: usize) -> u32;

    /// Sets `ep`'s class routes at once (bit c of `sources` / `targets` = class c: SRCL /
    /// TGTL in its RDR; the link bits are kept), through the route descriptor DCRs. A VMM
    /// sets its VMs' routes to the class their bgnet driver uses (class 0) this way; only
    /// classes in the endpoint's grant can be set (`Fabric::grant`).
    fn set_routes(&mut self, ep: EpId, sources: u16, targets: u16) -> Result<(), Self::Error> {
        for r in 0..coll::RDR_COUNT {
            let dcr = coll::DCR_BASE + coll::DCR_RDR0 + r;
            let v = self.dcr_read(ep, dcr)?;
            self.dcr_write(ep, dcr, coll::route_word(dcr, v, sources, targets))?;
        }
        Ok(())
    }

    /// Adds the classes in `classes` (bit c = class c) to those `ep` sources and targets,
    /// keeping the others: how a layer joins the class it uses (the MPI layer class 14,
    /// bgnet peers class 0). At attach an endpoint sources and targets nothing, and only
    /// classes its grant holds can be set (the engine clears the rest and reports it).
    fn join_classes(&mut self, ep: EpId, classes: u16) -> Result<(), Self::Error> {
        for r in 0..coll::RDR_COUNT {
            let dcr = coll::DCR_BASE + coll::DCR_RDR0 + r;
            let v = self.dcr_read(ep, dcr)?;
            self.dcr_write(ep, dcr, v | coll::local_route_bits(dcr, classes))?;
        }
        Ok(())
    }

    /// Sends an Ethernet frame (destination MAC first) from `ep`.
    fn frame_send(&mut self, ep: EpId, frame: &[u8]) -> Result<(), Self::Error>;

    /// Takes the oldest frame queued for `ep` into `buf`; returns the frame's length (a
    /// shorter `buf` gets its first bytes), or `None` when the queue is empty.
    fn frame_receive(&mut self, ep: EpId, buf: &mut [u8]) -> Result<Option<usize>, Self::Error>;

    /// Frames queued for `ep`.
    fn frames_queued(&self, ep: EpId) -> usize;

    /// The BIC lines `ep`'s devices assert: bit `31 - i` of word `w` is BIC irq
    /// `w * 32 + i` (MSB first, as the BIC). All zero for an unknown endpoint.
    fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS];

    /// The caller's endpoints whose irq lines or frame queue changed since the last call
    /// (bit k = `EpId(k)`), and forgets them.
    fn take_changed(&mut self) -> Result<u32, Self::Error>;

    /// `ep`'s counters (zero for an unknown endpoint).
    fn stats(&self, ep: EpId) -> Stats;

    /// The last error or drop on `ep` since the previous call, if any.
    fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic>;

    /// Reads the caller's own view of `ep`'s window at `offset` (where a client keeps its
    /// FIFOs, descriptors and buffers).
    fn mem_read(&mut self, ep: EpId, offset: u32, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Writes the caller's own view of `ep`'s window at `offset`.
    fn mem_write(&mut self, ep: EpId, offset: u32, data: &[u8]) -> Result<(), Self::Error>;

    /// The window offset of the caller's memory `[addr, addr + len)` if all of it lies
    /// inside `ep`'s window as the caller sees it, so the DMA can put from it or into it
    /// directly (zero-copy rendezvous). `None` (the default) where the caller's memory is
    /// not the window, as for the in-process engine whose windows are its own.
    fn window_offset_of(&self, ep: EpId, addr: usize, len: usize) -> Option<u32> {
        let _ = (ep, addr, len);
        None
    }
}
