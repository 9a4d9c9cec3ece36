//! The VMM's side of the node's interconnect (paper §4.3, docs/adr/0019): every VM is one
//! endpoint of the fabric, with its RAM as the endpoint's memory window, and its BG/P device
//! models (`kestrel_devices`) reach the fabric through a [`VmEndpoint`]. Everything here is
//! generic over the fabric's calls ([`FabricApi`]: the in-process engine or the fabric
//! service's client) and over guest RAM ([`GuestRam`]: the VM's `SegmentRam` on the target),
//! so it is host-tested against the real engine (`vmm/tests/fabric_models.rs`).
//!
//! - [`VmMemory`] is the in-process engine's `Memory`: endpoint k's window is VM k's RAM,
//!   read and written through the same checked [`GuestRam`] the device models use (the
//!   window starts at guest-physical 0, so a window offset is a guest-physical address);
//!   [`attach_ram`] attaches a VM to such an engine.
//! - [`VmEndpoint`] implements the models' back-end traits (collective, torus DMA, frames)
//!   over the fabric for one endpoint.
//! - **Shadow reception FIFOs** (as khvmm's vtree keeps, bgp-interconnect.md 2.2): the
//!   engine's collective reception FIFOs hold 8 packets, as the hardware's do, and drop
//!   what arrives at a full one (the hardware would back-pressure the sender). A guest
//!   driver under trap-and-emulate reads a packet in 66 exits, so a sender's burst (a
//!   1500-byte frame is 7 packets) overruns them before the receiver runs. The VMM
//!   therefore moves every packet the engine delivers to a VM into that VM's shadow FIFO
//!   ([`SHADOW_PACKETS`] per VC) right after the fault that delivered it
//!   ([`VmEndpoint::drain_tree`]); the collective model reads the shadow, and the status
//!   word and the VC receive lines (0xB6/0xB7) describe the shadow's packets (counts
//!   saturate at the status fields' maxima). The engine's reception watermark flags no
//!   longer see those packets (Linux's kestrel_coll does not use them by default).
//! - **Back-pressure, per receiver**: a VM whose store to a VC window completed a packet
//!   waits while a VM that receives that packet and can drain has a full shadow on its VC
//!   ([`stall_after`], [`still_stalled`]); the VMM's loop holds its reply (for a bounded
//!   time). A full VM slows only the VMs that send to it, and only once a packet.
//! - [`BgpDevices`]: a VM's BIC, collective, torus DMA and virtio NIC in front of its
//!   endpoint (attached through the board description, `Board::attach_vm`), and
//!   [`BgpDevices::update`], what the VMM does after a fault that touched them: drain,
//!   interrupt lines into the BIC and UIC, diagnostics to the log.

use crate::board::{self, Board, Window};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt;
use kestrel_abi::{VirtFault, VirtFaultMsg};
use kestrel_bgp::{bic, coll};
use kestrel_devices::bus::{GuestRam, OutOfRam, UicInput};
use kestrel_devices::collective::{Collective, TreeBackend, TreeError, PAYLOAD};
use kestrel_devices::torus::{DmaBackend, TorusDma};
use kestrel_devices::virtio_net::{FrameBackend, VirtioNet};
use kestrel_devices::{BicCascade, Uic};
use kestrel_fabric::{
    Coords, Diagnostic, EpId, Fabric, FabricApi, FabricError, Grant, Link, MemError, Memory,
    IRQ_WORDS,
};
use kestrel_ppc440::decode::{decode, AccessKind, Insn};

/// Guest RAM shared by a VM's machine, its device models and the fabric.
pub type Ram<R> = Rc<RefCell<R>>;

/// The fabric as the VMM holds it: one for every VM.
pub type Node<F> = Rc<RefCell<F>>;

/// The in-process engine's memory: the VMs' RAM, by endpoint.
pub struct VmMemory<R> {
    windows: Vec<Option<Ram<R>>>,
}

impl<R> Default for VmMemory<R> {
    fn default() -> Self {
        VmMemory {
            windows: Vec::new(),
        }
    }
}

impl<R: GuestRam> VmMemory<R> {
    fn window(&self, ep: EpId) -> Result<&Ram<R>, MemError> {
        self.windows
            .get(usize::from(ep.0))
            .and_then(Option::as_ref)
            .ok_or(MemError::NoWindow)
    }
}

impl<R: GuestRam> Memory for VmMemory<R> {
    fn read(&mut self, ep: EpId, offset: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.window(ep)?
            .borrow()
            .read(offset, buf)
            .map_err(|_| MemError::OutOfRange)
    }

    fn write(&mut self, ep: EpId, offset: u64, data: &[u8]) -> Result<(), MemError> {
        self.window(ep)?
            .borrow_mut()
            .write(offset, data)
            .map_err(|_| MemError::OutOfRange)
    }
}

/// Attaches a VM whose RAM (guest-physical 0 up, `len` bytes) is `ram` to an in-process
/// engine with `grant` (what the root task's fabric policy grants the VM): the endpoint's
/// window is that RAM. Returns the endpoint and its bus base.
pub fn attach_ram<R: GuestRam, L: Link>(
    f: &mut Fabric<VmMemory<R>, L>,
    ram: &Ram<R>,
    len: u64,
    grant: Grant,
) -> Result<(EpId, u64), FabricError> {
    let (ep, bus_base) = f.attach(len)?;
    f.grant(ep, grant)?;
    let w = &mut f.memory_mut().windows;
    let i = usize::from(ep.0);
    if w.len() <= i {
        w.resize_with(i + 1, || None);
    }
    w[i] = Some(ram.clone());
    Ok((ep, bus_base))
}

/// The collective class a VM's bgnet uses (`tree-route` in its device tree).
pub use kestrel_bgp::coll::BGNET_CLASS;

/// Packets of a VM's shadow collective reception FIFO, per VC.
pub const SHADOW_PACKETS: usize = 128;

/// A VM's shadow reception FIFOs (VC0, VC1): header and payload of each packet.
type Shadow = [VecDeque<(u32, Box<[u8; PAYLOAD]>)>; coll::VCS as usize];

/// One VM's endpoint: what its device models call (every model of the VM holds a clone;
/// they share the fabric and the shadow FIFOs).
pub struct VmEndpoint<F> {
    node: Node<F>,
    ep: EpId,
    /// The bus address of the VM's guest-physical 0 (its window's base).
    bus_base: u64,
    shadow: Rc<RefCell<Shadow>>,
    /// The packet the collective model injected last and the VMM has not looked at.
    sent: Rc<Cell<Option<Stall>>>,
}

impl<F> Clone for VmEndpoint<F> {
    fn clone(&self) -> Self {
        VmEndpoint {
            node: self.node.clone(),
            ep: self.ep,
            bus_base: self.bus_base,
            shadow: self.shadow.clone(),
            sent: self.sent.clone(),
        }
    }
}

impl<F: FabricApi> VmEndpoint<F> {
    /// The VM's end of endpoint `ep` (attached, window at `bus_base`), limited to bgnet's
    /// collective class (its device tree's `tree-route`, class 0), so native programs'
    /// reductions on other classes do not wait for VMs.
    pub fn new(node: &Node<F>, ep: EpId, bus_base: u64) -> Result<Self, F::Error> {
        node.borrow_mut()
            .set_routes(ep, 1 << BGNET_CLASS, 1 << BGNET_CLASS)?;
        Ok(VmEndpoint {
            node: node.clone(),
            ep,
            bus_base,
            shadow: Rc::new(RefCell::new([VecDeque::new(), VecDeque::new()])),
            sent: Rc::new(Cell::new(None)),
        })
    }

    /// The fabric this endpoint belongs to.
    pub fn node(&self) -> &Node<F> {
        &self.node
    }

    /// The endpoint.
    pub fn ep(&self) -> EpId {
        self.ep
    }

    /// The bus address the VM's guest-physical 0 is at (the torus model translates with it).
    pub fn bus_base(&self) -> u64 {
        self.bus_base
    }

    /// The endpoint's bit in [`VmEndpoint::take_changed`]'s word.
    pub fn bit(&self) -> u32 {
        1 << self.ep.0
    }

    /// Torus coordinates (for the device tree).
    pub fn coords(&self) -> Coords {
        self.node.borrow().coords(self.ep)
    }

    /// Collective node address (for the device tree).
    pub fn node_address(&self) -> u32 {
        self.node.borrow().node_address(self.ep)
    }

    /// Moves the packets the fabric received for this endpoint into the shadow FIFOs (as
    /// many as fit).
    pub fn drain_tree(&self) {
        let mut f = self.node.borrow_mut();
        let mut shadow = self.shadow.borrow_mut();
        for (vc, q) in shadow.iter_mut().enumerate() {
            while q.len() < SHADOW_PACKETS && rcv_headers(f.tree_status(self.ep, vc)) > 0 {
                let mut payload = Box::new([0u8; PAYLOAD]);
                match f.tree_receive(self.ep, vc, &mut payload) {
                    Ok(Some(header)) => q.push_back((header, payload)),
                    _ => break,
                }
            }
        }
    }

    /// Whether the endpoint's collective reception of VC0 or VC1 is full: its shadow FIFO
    /// (then the engine's fills and drops).
    pub fn tree_rcv_full(&self) -> bool {
        self.shadow
            .borrow()
            .iter()
            .any(|q| q.len() >= SHADOW_PACKETS)
    }

    /// Whether the shadow reception FIFO of `vc` is full.
    pub fn shadow_full(&self, vc: usize) -> bool {
        self.shadow
            .borrow()
            .get(vc)
            .is_some_and(|q| q.len() >= SHADOW_PACKETS)
    }

    /// The packet the collective model injected since the last call (the store that
    /// completed it is the fault being served), as its VC and header.
    pub fn take_sent(&self) -> Option<(usize, u32)> {
        self.sent.take().map(|s| (s.vc, s.header))
    }

    /// Whether this endpoint receives packet (`vc`, `header`) injected by `from`, by the
    /// engine's routing rule (`kestrel_fabric::coll::reaches`) over this endpoint's class
    /// routes and VCFG as the fabric reports them.
    pub fn receives(&self, from: EpId, vc: usize, header: u32) -> bool {
        kestrel_fabric::coll::reaches(header, vc, from, self.ep, |o| self.dcr(coll::DCR_BASE + o))
    }

    /// The BIC lines the fabric asserts for this endpoint, with the VC receive lines of
    /// the shadow FIFOs.
    pub fn irq_lines(&self) -> [u32; IRQ_WORDS] {
        let mut lines = self.node.borrow().irq_lines(self.ep);
        for (q, irq) in self
            .shadow
            .borrow()
            .iter()
            .zip([coll::IRQ_RCV_VC0, coll::IRQ_RCV_VC1])
        {
            if q.iter().any(|(h, _)| h & coll::HDR_IRQ != 0) {
                lines[(irq / bic::LINES_PER_GROUP) as usize] |= bic::line_mask(irq);
            }
        }
        lines
    }

    /// The endpoint's MAC (06:00:00:X:Y:Z), the virtio NIC's.
    pub fn frame_mac(&self) -> [u8; 6] {
        self.node.borrow().frame_mac(self.ep)
    }

    /// Frames the fabric holds for this endpoint.
    pub fn frames_queued(&self) -> usize {
        self.node.borrow().frames_queued(self.ep)
    }

    /// Endpoints whose lines or frame queue changed since the last call (every endpoint of
    /// the node shares the one word); 0 if the fabric cannot be asked.
    pub fn take_changed(&self) -> u32 {
        self.node.borrow_mut().take_changed().unwrap_or(0)
    }

    /// The fabric's last error or drop on this endpoint.
    pub fn take_diagnostic(&self) -> Option<Diagnostic> {
        self.node.borrow_mut().take_diagnostic(self.ep)
    }

    fn dcr(&self, dcr: u32) -> u32 {
        self.node.borrow_mut().dcr_read(self.ep, dcr).unwrap_or(0)
    }

    fn set_dcr(&self, dcr: u32, value: u32) {
        let _ = self.node.borrow_mut().dcr_write(self.ep, dcr, value);
    }
}

/// The collective model's hardware: the fabric's collective for this endpoint, received
/// packets through the shadow FIFOs.
impl<F: FabricApi> TreeBackend for VmEndpoint<F> {
    fn inject(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), TreeError> {
        let r = self
            .node
            .borrow_mut()
            .tree_inject(self.ep, vc, header, payload);
        match r.map_err(Into::into) {
            Ok(()) => {
                self.sent.set(Some(Stall { vc, header }));
                Ok(())
            }
            Err(FabricError::InjectionFull) => Err(TreeError::Full),
            Err(_) => Err(TreeError::Refused),
        }
    }

    fn receive(&mut self, vc: usize, payload: &mut [u8; PAYLOAD]) -> Option<u32> {
        if self.shadow.borrow().get(vc)?.is_empty() {
            self.drain_tree();
        }
        let (header, p) = self.shadow.borrow_mut().get_mut(vc)?.pop_front()?;
        payload.copy_from_slice(&*p);
        Some(header)
    }

    /// The fabric's status word with the reception fields counting the shadow's packets
    /// too (saturated at the fields' maxima).
    fn status(&self, vc: usize) -> u32 {
        let s = self.node.borrow().tree_status(self.ep, vc);
        let shadow = self.shadow.borrow();
        let Some(q) = shadow.get(vc) else {
            return s;
        };
        let n = rcv_headers(s) + q.len() as u32;
        let hdrs = n.min(coll::ST_HDRS_MASK);
        let quads = (n * coll::PAYLOAD_QUADS).min(coll::ST_QUADS_MASK);
        let irq = q.iter().any(|(h, _)| h & coll::HDR_IRQ != 0);
        s & !(coll::ST_HDRS_MASK << coll::ST_RCV_HDRS_SHIFT)
            & !(coll::ST_QUADS_MASK << coll::ST_RCV_QUADS_SHIFT)
            | hdrs << coll::ST_RCV_HDRS_SHIFT
            | quads << coll::ST_RCV_QUADS_SHIFT
            | if irq { coll::ST_RCV_IRQ } else { 0 }
    }

    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.dcr(dcr)
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        self.set_dcr(dcr, value)
    }
}

/// The reception header count of a collective status word.
fn rcv_headers(status: u32) -> u32 {
    (status >> coll::ST_RCV_HDRS_SHIFT) & coll::ST_HDRS_MASK
}

/// The virtio NIC's frames: the fabric's frame layer for this endpoint. A frame the
/// fabric refuses (a bad length) is counted and reported by the fabric.
impl<F: FabricApi> FrameBackend for VmEndpoint<F> {
    fn send(&mut self, frame: &[u8]) {
        let _ = self.node.borrow_mut().frame_send(self.ep, frame);
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut f = self.node.borrow_mut();
        loop {
            let n = f.frame_receive(self.ep, buf).ok().flatten()?;
            // A frame longer than the buffer was cut short by the fabric: dropped.
            if n <= buf.len() {
                return Some(n);
            }
        }
    }
}

/// The torus model's hardware: the fabric's DMA group and DCRs for this endpoint (values
/// are bus addresses; the model translates). A refused access reads 0 and writes nothing;
/// the fabric keeps a diagnostic for the log.
impl<F: FabricApi> DmaBackend for VmEndpoint<F> {
    fn read(&mut self, offset: u32) -> u32 {
        self.node
            .borrow_mut()
            .dma_read(self.ep, offset)
            .unwrap_or(0)
    }

    fn write(&mut self, offset: u32, value: u32) {
        let _ = self.node.borrow_mut().dma_write(self.ep, offset, value);
    }

    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.dcr(dcr)
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        self.set_dcr(dcr, value)
    }
}

/// A VM's RAM as the virtio model reads and writes it (the shared, checked RAM).
pub struct SharedRam<R>(pub Ram<R>);

impl<R: GuestRam> GuestRam for SharedRam<R> {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), OutOfRam> {
        self.0.borrow().read(gpa, buf)
    }

    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), OutOfRam> {
        self.0.borrow_mut().write(gpa, data)
    }
}

/// The virtual BIC, cascaded into UIC0.
pub type VBic = BicCascade<UicInput>;
/// The virtual collective network.
pub type VColl<F> = Collective<VmEndpoint<F>>;
/// The virtual torus DMA group.
pub type VTorus<F> = TorusDma<VmEndpoint<F>>;
/// The paravirtual NIC.
pub type VNet<F, R> = VirtioNet<SharedRam<R>, VmEndpoint<F>>;

/// A VM's BG/P devices and its endpoint of the fabric, as `Board::attach_vm` made them.
pub struct BgpDevices<F: FabricApi, R: GuestRam> {
    pub endpoint: VmEndpoint<F>,
    pub bic: Rc<RefCell<VBic>>,
    pub coll: Option<Rc<RefCell<VColl<F>>>>,
    pub torus: Option<Rc<RefCell<VTorus<F>>>>,
    pub net: Option<Nic<F, R>>,
}

/// The virtio NIC of a VM and the UIC0 input of its interrupt.
pub struct Nic<F: FabricApi, R: GuestRam> {
    pub model: Rc<RefCell<VNet<F, R>>>,
    pub uic_input: u32,
}

impl<F: FabricApi, R: GuestRam> BgpDevices<F, R> {
    /// Brings the BIC's device lines (and so UIC0 input 30) and the NIC's UIC input up to
    /// date with the fabric and the models, and hands `log` one line per report of the
    /// fabric or a model about this VM. Called after every fault that touched a BG/P device
    /// ([`touches_bgp`]), and for every VM whose endpoint the fabric says changed.
    pub fn update(&mut self, uic: &RefCell<Uic>, log: &mut dyn FnMut(fmt::Arguments)) {
        // Packets the fabric delivered go to the shadow FIFOs at once.
        self.endpoint.drain_tree();
        let mut lines = self.endpoint.irq_lines();
        if let Some(c) = &self.coll {
            let mut c = c.borrow_mut();
            c.irq_lines(&mut lines);
            if let Some((d, n)) = c.take_diagnostic() {
                log(format_args!("{d} ({n} since the last report)"));
            }
        }
        if let Some(t) = &self.torus {
            let mut t = t.borrow_mut();
            t.irq_lines(&mut lines);
            if let Some((d, n)) = t.take_diagnostic() {
                log(format_args!("{d} ({n} since the last report)"));
            }
        }
        self.bic.borrow_mut().set_lines(&lines);
        if let Some(nic) = &self.net {
            let mut n = nic.model.borrow_mut();
            if self.endpoint.frames_queued() > 0 {
                n.poll_rx();
            }
            uic.borrow_mut().set_input(nic.uic_input, n.irq());
            if let Some((d, k)) = n.take_diagnostic() {
                log(format_args!("virtio-net: {d} ({k} since the last report)"));
            }
        }
        if let Some(d) = self.endpoint.take_diagnostic() {
            log(format_args!("fabric: {d}"));
        }
    }

    /// Whether this VM's collective reception FIFO (its shadow) of either VC is full.
    pub fn collective_rcv_full(&self) -> bool {
        self.coll.is_some() && self.endpoint.tree_rcv_full()
    }
}

/// Whether fault `f` may have reached a BG/P device or the virtio NIC: an MMIO access
/// above 4 GiB or in the NIC's page, or `mfdcrx`/`mtdcrx` (the BG/P DCRs are above 1023).
/// The UART and UIC exits do not pay for the fabric's bookkeeping.
pub fn touches_bgp(f: &VirtFaultMsg) -> bool {
    match f.class {
        VirtFault::Mmio => {
            f.gpa > u32::MAX as u64
                || (board::VIRTIO_NET_GPA..board::VIRTIO_NET_GPA + board::VIRTIO_NET_SIZE)
                    .contains(&f.gpa)
        }
        VirtFault::Instruction => {
            use kestrel_ppc440::decode::{opcd, xo31, OPCD, XO};
            OPCD.get(f.insn) == opcd::X && matches!(XO.get(f.insn), xo31::MFDCRX | xo31::MTDCRX)
        }
        _ => false,
    }
}

/// Whether fault `f` is a store to one of `board`'s collective VC windows (it may complete
/// a packet: the VMM applies back-pressure after it).
pub fn is_collective_store(board: &Board, f: &VirtFaultMsg) -> bool {
    if f.class != VirtFault::Mmio {
        return false;
    }
    let in_vc = board
        .of_model(board::Model::Collective)
        .any(|d| match d.window {
            Window::Mmio { base, size } => (base..base + size).contains(&f.gpa),
            Window::Dcr { .. } => false,
        });
    in_vc && matches!(decode(f.insn), Insn::LoadStore(ls) if ls.kind() == AccessKind::Store)
}

/// What a VM held by the collective's back-pressure waits for: room at the receivers of
/// the packet its store completed (its VC and header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    vc: usize,
    header: u32,
}

/// The collective's back-pressure, per receiver, after fault `f` of the VM whose
/// endpoint is `sender`: `Some` when the VMM must hold its reply. Only a store to a VC
/// window that completed a packet ([`VmEndpoint::take_sent`]: the collective model injects
/// on the 64th payload store, never on the header or an earlier one) can be held, and
/// only while a VM that receives that packet (its class routes, the point-to-point
/// address, RCVALL: [`VmEndpoint::receives`]) has a full shadow FIFO on its VC. `vms` is
/// every VM of the node as `(can_drain, endpoint)` (the sender may be among them: it is
/// skipped): a VM can drain when it is running or idle (not stopped, and not stalled
/// itself, so two VMs never wait for each other).
pub fn stall_after<'a, F: FabricApi + 'a>(
    board: &Board,
    f: &VirtFaultMsg,
    sender: &VmEndpoint<F>,
    vms: impl IntoIterator<Item = (bool, &'a VmEndpoint<F>)>,
) -> Option<Stall> {
    // Taken whatever the fault, so no packet stays recorded for a later one.
    let (vc, header) = sender.take_sent()?;
    if !is_collective_store(board, f) {
        return None;
    }
    let stall = Stall { vc, header };
    still_stalled(stall, sender, vms).then_some(stall)
}

/// Whether the VM whose endpoint is `sender`, held for `stall`, must still wait: a VM
/// other than the sender that can drain and receives the packet has a full shadow FIFO
/// on its VC (`vms` as for [`stall_after`]). The engine's DCRs are read only for a VM
/// whose shadow is full.
pub fn still_stalled<'a, F: FabricApi + 'a>(
    stall: Stall,
    sender: &VmEndpoint<F>,
    vms: impl IntoIterator<Item = (bool, &'a VmEndpoint<F>)>,
) -> bool {
    vms.into_iter().any(|(drains, e)| {
        e.ep != sender.ep
            && drains
            && e.shadow_full(stall.vc)
            && e.receives(sender.ep, stall.vc, stall.header)
    })
}
