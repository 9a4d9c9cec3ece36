//! The VMM's side of the node's interconnect (paper §4.3, ISSUE10 "VMM glue"): every VM is
//! one endpoint of the fabric engine (`kestrel_fabric`), with its RAM segment as the
//! endpoint's memory window, and its BG/P device models (`kestrel_devices`) reach the
//! engine through a [`Port`].
//!
//! - [`Node`] is the fabric as the VMM holds it: today the engine itself, in-process,
//!   owned by the VMM (`Rc<RefCell<Fabric<VmMemory>>>`). [`Port`] is the one place that
//!   calls it; moving to the fabric service means changing [`Node`] and [`Port`]'s method
//!   bodies to the service client's calls of the same names, nothing else.
//! - [`VmMemory`] is the engine's `Memory`: endpoint k's window is VM k's RAM segment, read
//!   and written through the same checked [`SegmentRam`] the device models use (the window
//!   starts at guest-physical 0, so a window offset is a guest-physical address).
//! - [`Port`] implements the models' backend traits over the engine for one endpoint.
//! - **Shadow reception FIFOs** (as khvmm's vtree keeps, bgp-interconnect.md 2.2): the
//!   engine's collective reception FIFOs hold 8 packets, as the hardware's do, and drop
//!   what arrives at a full one (the hardware would back-pressure the sender). A guest
//!   driver under trap-and-emulate reads a packet in 66 exits, so a sender's burst (a
//!   1500-byte frame is 7 packets) overruns them before the receiver runs. The VMM
//!   therefore moves every packet the engine delivers to a VM into that VM's shadow FIFO
//!   ([`SHADOW_PACKETS`] per VC) right after the fault that delivered it
//!   ([`Port::drain_tree`]); the collective model reads the shadow, and the status word
//!   and the VC receive lines (0xB6/0xB7) describe the shadow's packets (counts saturate
//!   at the status fields' maxima). The engine's reception watermark flags no longer see
//!   those packets (Linux's kestrel_coll does not use them by default).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use kestrel_bgp::{bic, coll};
use kestrel_devices::bus::GuestRam;
use kestrel_devices::collective::{TreeBackend, TreeError, PAYLOAD};
use kestrel_devices::torus::DmaBackend;
use kestrel_devices::virtio_net::FrameBackend;
use kestrel_fabric::{Diagnostic, EpId, Fabric, FabricError, MemError, Memory, IRQ_WORDS};
use kestrel_fabric_client::service::RemoteFabric;
use kestrel_user::println;
use kestrel_vmm_core::segment::SegmentRam;

/// A VM's guest RAM, shared by its machine, its device models and the fabric.
pub type Ram = Rc<RefCell<SegmentRam<'static, 1>>>;

/// The engine's memory: the VMs' RAM segments, by endpoint.
#[derive(Default)]
pub struct VmMemory {
    windows: Vec<Option<Ram>>,
}

impl VmMemory {
    fn window(&self, ep: EpId) -> Result<&Ram, MemError> {
        self.windows
            .get(usize::from(ep.0))
            .and_then(Option::as_ref)
            .ok_or(MemError::NoWindow)
    }
}

impl Memory for VmMemory {
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

/// The engine behind the VMM's [`Node`]: in-process, or the fabric service
/// (`kestrel-fabric`, ADR 0020) when the kernel command line says `vmm.fabric=service`. Both
/// have the engine's method names and signatures (`kestrel_fabric_client::service::
/// RemoteFabric` mirrors `Fabric`); only attaching differs.
// One `Engine` per VMM, built once at start and never moved: the in-process engine's size
// costs nothing, and boxing it would add an indirection to every device exit.
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    Local(Fabric<VmMemory>),
    Remote(RemoteFabric),
}

/// Where the shared pages of the VMs' service endpoints live in the VMM's space.
const SHARED_PAGES_VA: u32 = 0x7e00_0000;

/// Forwards the engine calls the models make to whichever engine is in use.
macro_rules! forward {
    (ref: $(fn $name:ident($($a:ident: $t:ty),*) -> $r:ty;)*
     mut: $(fn $mname:ident($($ma:ident: $mt:ty),*) -> $mr:ty;)*) => {
        $(pub fn $name(&self, $($a: $t),*) -> $r {
            match self {
                Engine::Local(f) => f.$name($($a),*),
                Engine::Remote(f) => f.$name($($a),*),
            }
        })*
        $(pub fn $mname(&mut self, $($ma: $mt),*) -> $mr {
            match self {
                Engine::Local(f) => f.$mname($($ma),*),
                Engine::Remote(f) => f.$mname($($ma),*),
            }
        })*
    };
}

impl Engine {
    forward! {
        ref:
        fn coords(ep: EpId) -> kestrel_fabric::Coords;
        fn node_address(ep: EpId) -> u32;
        fn irq_lines(ep: EpId) -> [u32; IRQ_WORDS];
        fn tree_status(ep: EpId, vc: usize) -> u32;
        fn frame_mac(ep: EpId) -> [u8; 6];
        fn frames_queued(ep: EpId) -> usize;
        mut:
        fn take_changed() -> u32;
        fn take_diagnostic(ep: EpId) -> Option<Diagnostic>;
        fn dma_read(ep: EpId, offset: u32) -> Result<u32, FabricError>;
        fn dma_write(ep: EpId, offset: u32, value: u32) -> Result<(), FabricError>;
        fn dcr_read(ep: EpId, dcr: u32) -> Result<u32, FabricError>;
        fn dcr_write(ep: EpId, dcr: u32, value: u32) -> Result<(), FabricError>;
        fn tree_inject(ep: EpId, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), FabricError>;
        fn tree_receive(ep: EpId, vc: usize, payload: &mut [u8; PAYLOAD]) -> Option<u32>;
        fn frame_send(ep: EpId, frame: &[u8]) -> Result<(), FabricError>;
        fn frame_receive(ep: EpId, buf: &mut [u8]) -> Option<usize>;
    }

    /// The service thread whose `proto::EVENT` messages say "call take_changed" (none for
    /// the in-process engine, which changes only inside the VMM's own calls).
    pub fn events_from(&self) -> Option<kestrel_abi::ThreadId> {
        match self {
            Engine::Local(_) => None,
            Engine::Remote(f) => Some(f.thread()),
        }
    }

    /// Takes an `EVENT` from the service into account (the next `take_changed` asks it).
    pub fn note_event(&self) {
        if let Engine::Remote(f) = self {
            f.note_event();
        }
    }
}

/// The fabric as the VMM holds it (see [`Engine`]).
pub type Node = Rc<RefCell<Engine>>;

/// A new fabric with no endpoints: the service if `service` (`vmm.fabric=service` on the
/// kernel command line) and the root task knows it, else the engine in-process.
pub fn node(service: bool) -> Node {
    let local = || Engine::Local(Fabric::new(VmMemory::default()));
    let e = if service {
        match RemoteFabric::connect() {
            Ok(f) => {
                println!(
                    "vmm: the VMs' fabric is the service kestrel-fabric ({:?})",
                    f.thread()
                );
                Engine::Remote(f)
            }
            Err(e) => {
                println!("vmm: vmm.fabric=service, but {e}; the engine runs in-process");
                local()
            }
        }
    } else {
        local()
    };
    Rc::new(RefCell::new(e))
}

/// The collective class a VM's bgnet uses (`tree-route` in its device tree).
pub const BGNET_CLASS: u32 = 0;

/// Packets of a VM's shadow collective reception FIFO, per VC.
pub const SHADOW_PACKETS: usize = 128;

/// A VM's shadow reception FIFOs (VC0, VC1): header and payload of each packet.
type Shadow = [VecDeque<(u32, Box<[u8; PAYLOAD]>)>; coll::VCS as usize];

/// One VM's endpoint: what its device models call.
#[derive(Clone)]
pub struct Port {
    node: Node,
    ep: EpId,
    /// The bus address of the VM's guest-physical 0 (its window's base).
    bus_base: u64,
    shadow: Rc<RefCell<Shadow>>,
}

impl Port {
    /// Attaches VM `vm` whose RAM (guest-physical 0 up, `len` bytes) is `ram`, at `first`
    /// in the VMM's space (from where the fabric service maps it).
    pub fn attach(
        node: &Node,
        ram: &Ram,
        first: u32,
        len: u64,
        vm: usize,
    ) -> Result<Port, FabricError> {
        let mut e = node.borrow_mut();
        let (ep, bus_base) = match &mut *e {
            Engine::Local(f) => {
                let (ep, bus_base) = f.attach(len)?;
                // A VM's collective class is bgnet's (its device tree's `tree-route`, class 0):
                // native programs' reductions on other classes do not wait for VMs.
                f.set_routes(ep, 1 << BGNET_CLASS, 1 << BGNET_CLASS)?;
                let w = &mut f.memory_mut().windows;
                let i = usize::from(ep.0);
                if w.len() <= i {
                    w.resize(i + 1, None);
                }
                w[i] = Some(ram.clone());
                (ep, bus_base)
            }
            Engine::Remote(f) => {
                // The endpoint's page for bulk data (collective packets, interrupt lines).
                let shared = SHARED_PAGES_VA + vm as u32 * 4096;
                kestrel_user::root::ram(shared, 4096, 12).map_err(|_| FabricError::BadWindow)?;
                let len = u32::try_from(len).map_err(|_| FabricError::BadWindow)?;
                let (ep, bus_base) = f.attach(first, len, shared, kestrel_user::sys::my_id())?;
                f.set_routes(ep, 1 << BGNET_CLASS, 1 << BGNET_CLASS)?;
                (ep, bus_base)
            }
        };
        drop(e);
        Ok(Port {
            node: node.clone(),
            ep,
            bus_base,
            shadow: Rc::new(RefCell::new([VecDeque::new(), VecDeque::new()])),
        })
    }

    /// The bus address the VM's guest-physical 0 is at (the torus model translates with it).
    pub fn bus_base(&self) -> u64 {
        self.bus_base
    }

    /// The service thread whose events announce changes (see [`Engine::events_from`]).
    pub fn events_from(&self) -> Option<kestrel_abi::ThreadId> {
        self.node.borrow().events_from()
    }

    /// Takes an event from the service into account (the next `take_changed` asks it).
    pub fn note_event(&self) {
        self.node.borrow().note_event();
    }

    /// The endpoint's bit in [`Port::take_changed`]'s word.
    pub fn bit(&self) -> u32 {
        1 << self.ep.0
    }

    /// Collective node address and torus coordinates, for the device tree.
    pub fn place(&self) -> kestrel_devtree::FabricPlace {
        let f = self.node.borrow();
        let c = f.coords(self.ep);
        kestrel_devtree::FabricPlace {
            node_address: f.node_address(self.ep),
            coords: [c.x, c.y, c.z],
        }
    }

    /// Moves the packets the engine received for this endpoint into the shadow FIFOs
    /// (as many as fit).
    pub fn drain_tree(&self) {
        let mut f = self.node.borrow_mut();
        let mut shadow = self.shadow.borrow_mut();
        for (vc, q) in shadow.iter_mut().enumerate() {
            while q.len() < SHADOW_PACKETS && rcv_headers(f.tree_status(self.ep, vc)) > 0 {
                let mut payload = Box::new([0u8; PAYLOAD]);
                match f.tree_receive(self.ep, vc, &mut payload) {
                    Some(header) => q.push_back((header, payload)),
                    None => break,
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

    /// Endpoints whose lines or frame queue changed since the last call (every port of
    /// the node shares the one word).
    pub fn take_changed(&self) -> u32 {
        self.node.borrow_mut().take_changed()
    }

    /// The fabric's last error or drop on this endpoint.
    pub fn take_diagnostic(&self) -> Option<Diagnostic> {
        self.node.borrow_mut().take_diagnostic(self.ep)
    }

    pub fn dcr_read(&self, dcr: u32) -> Result<u32, FabricError> {
        self.node.borrow_mut().dcr_read(self.ep, dcr)
    }

    pub fn dcr_write(&self, dcr: u32, value: u32) -> Result<(), FabricError> {
        self.node.borrow_mut().dcr_write(self.ep, dcr, value)
    }
}

/// The collective model's hardware: the engine's collective for this endpoint.
impl TreeBackend for Port {
    fn inject(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), TreeError> {
        match self
            .node
            .borrow_mut()
            .tree_inject(self.ep, vc, header, payload)
        {
            Ok(()) => Ok(()),
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

    /// The engine's status word with the reception fields counting the shadow's packets
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
        Port::dcr_read(self, dcr).unwrap_or(0)
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        let _ = Port::dcr_write(self, dcr, value);
    }
}

/// The reception header count of a collective status word.
fn rcv_headers(status: u32) -> u32 {
    (status >> coll::ST_RCV_HDRS_SHIFT) & coll::ST_HDRS_MASK
}

/// The virtio NIC's frames: the engine's frame layer for this endpoint. A frame the
/// engine refuses (a bad length) is counted and reported by the engine.
impl FrameBackend for Port {
    fn send(&mut self, frame: &[u8]) {
        let _ = self.node.borrow_mut().frame_send(self.ep, frame);
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut f = self.node.borrow_mut();
        loop {
            let n = f.frame_receive(self.ep, buf)?;
            // A frame longer than the buffer was cut short by the engine: dropped.
            if n <= buf.len() {
                return Some(n);
            }
        }
    }
}

/// The torus model's hardware: the engine's DMA group and DCRs for this endpoint (values
/// are bus addresses; the model translates). A refused access reads 0 and writes nothing;
/// the engine keeps a diagnostic for the log.
impl DmaBackend for Port {
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
        Port::dcr_read(self, dcr).unwrap_or(0)
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        let _ = Port::dcr_write(self, dcr, value);
    }
}

/// A VM's RAM as the virtio model reads and writes it (the shared, checked segment).
pub struct SharedRam(pub Ram);

impl GuestRam for SharedRam {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), kestrel_devices::bus::OutOfRam> {
        self.0.borrow().read(gpa, buf)
    }

    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), kestrel_devices::bus::OutOfRam> {
        self.0.borrow_mut().write(gpa, data)
    }
}
