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

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use kestrel_devices::bus::GuestRam;
use kestrel_devices::collective::{TreeBackend, TreeError, PAYLOAD};
use kestrel_fabric::{Diagnostic, EpId, Fabric, FabricError, MemError, Memory, IRQ_WORDS};
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

/// The fabric as the VMM holds it (the in-process engine; see the module doc).
pub type Node = Rc<RefCell<Fabric<VmMemory>>>;

/// A new fabric with no endpoints.
pub fn node() -> Node {
    Rc::new(RefCell::new(Fabric::new(VmMemory::default())))
}

/// One VM's endpoint: what its device models call.
#[derive(Clone)]
pub struct Port {
    node: Node,
    ep: EpId,
}

impl Port {
    /// Attaches a VM whose RAM (guest-physical 0 up, `len` bytes) is `ram`.
    pub fn attach(node: &Node, ram: &Ram, len: u64) -> Result<Port, FabricError> {
        let mut f = node.borrow_mut();
        let (ep, _bus) = f.attach(len)?;
        let w = &mut f.memory_mut().windows;
        let i = usize::from(ep.0);
        if w.len() <= i {
            w.resize(i + 1, None);
        }
        w[i] = Some(ram.clone());
        drop(f);
        Ok(Port {
            node: node.clone(),
            ep,
        })
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

    /// The BIC lines the fabric asserts for this endpoint.
    pub fn irq_lines(&self) -> [u32; IRQ_WORDS] {
        self.node.borrow().irq_lines(self.ep)
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
        self.node.borrow_mut().tree_receive(self.ep, vc, payload)
    }

    fn status(&self, vc: usize) -> u32 {
        self.node.borrow().tree_status(self.ep, vc)
    }

    fn dcr_read(&mut self, dcr: u32) -> u32 {
        Port::dcr_read(self, dcr).unwrap_or(0)
    }

    fn dcr_write(&mut self, dcr: u32, value: u32) {
        let _ = Port::dcr_write(self, dcr, value);
    }
}
