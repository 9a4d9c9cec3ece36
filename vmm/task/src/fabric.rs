//! Which fabric the VMs' endpoints belong to, and how a VM attaches to it: the node's fabric
//! service (`kestrel-fabric`, ADR 0020), shared with the native programs (the default
//! whenever it runs, ADR 0032), or a private in-process engine (`vmm.fabric=local` on the
//! kernel command line, or no service on the node). Both implement the fabric's calls
//! (`kestrel_fabric::FabricApi`); the VMM's back ends, shadow FIFOs and BG/P models over
//! them are `kestrel_vmm_core::fabric`'s, and the VMM is generic over [`VmFabric`] (its loop
//! is built once per fabric, and `main` picks one at start).

use alloc::rc::Rc;
use core::cell::RefCell;
use kestrel_abi::ThreadId;
use kestrel_fabric::{EpId, Fabric, FabricApi, FabricError, Grant};
use kestrel_fabric_client::service::{Service, Window};
use kestrel_vmm_core::fabric::{attach_ram, VmMemory};
use kestrel_vmm_core::segment::SegmentRam;

/// A VM's guest RAM, shared by its machine, its device models and the fabric.
pub type Ram = Rc<RefCell<SegmentRam<'static, 1>>>;

/// The in-process engine: the VMs' RAM segments are its memory.
pub type Local = Fabric<VmMemory<SegmentRam<'static, 1>>>;

/// What the VMM needs of a fabric beyond its calls: attaching a VM's RAM, and the service's
/// events.
pub trait VmFabric: FabricApi + 'static {
    /// Attaches VM `vm` whose RAM (guest-physical 0 up, `len` bytes) is `ram`, at `first`
    /// in the VMM's space; returns the endpoint and its window's bus base.
    fn attach_vm(
        &mut self,
        ram: &Ram,
        first: u32,
        len: u64,
        vm: usize,
    ) -> Result<(EpId, u64), FabricError>;

    /// The service thread whose `proto::EVENT` messages say "call take_changed" (none for
    /// the in-process engine, which changes only inside the VMM's own calls).
    fn events_from(&self) -> Option<ThreadId> {
        None
    }

    /// Takes an `EVENT` from the service into account (the next `take_changed` asks it).
    fn note_event(&self) {}

    /// Whether DMA work of some endpoint waits for the VMM's timer ([`VmFabric::run_pending`]):
    /// the in-process engine's injections that the per-call budget cut short. The service
    /// runs its own timer, so never for it.
    fn pending_work(&self) -> bool {
        false
    }

    /// The VMM's timer for the in-process engine: continues the pending work of every
    /// endpoint (`Fabric::poll`), each within its budget, outside any VM's exit.
    fn run_pending(&mut self) {}
}

impl VmFabric for Local {
    fn attach_vm(
        &mut self,
        ram: &Ram,
        _first: u32,
        len: u64,
        vm: usize,
    ) -> Result<(EpId, u64), FabricError> {
        // The VMM hosts this engine; what each VM may do on it is still the root task's
        // fabric policy (kestrel_abi::grants), as on the node's service.
        let g = kestrel_user::root::fabric_grant(kestrel_user::sys::my_id(), vm as u32)
            .map(|g| Grant {
                classes: g.classes as u16,
                partitions: g.partitions as u16,
            })
            .unwrap_or(Grant::NONE);
        attach_ram(self, ram, len, g)
    }

    fn pending_work(&self) -> bool {
        Fabric::has_pending(self)
    }

    fn run_pending(&mut self) {
        Fabric::poll(self);
    }
}

/// Where the shared pages of the VMs' service endpoints live in the VMM's space.
const SHARED_PAGES_VA: u32 = 0x7e00_0000;

impl VmFabric for Service {
    /// Maps the VM's RAM segment and a page of its own per VM (at 0x7e00_0000 + 4 KiB x VM,
    /// for bulk data: collective packets, interrupt lines) to the service, with the VMM's
    /// thread as event thread, as tenant `vm` of the VMM (the root task's grant for that VM
    /// applies).
    fn attach_vm(
        &mut self,
        _ram: &Ram,
        first: u32,
        len: u64,
        vm: usize,
    ) -> Result<(EpId, u64), FabricError> {
        let shared = SHARED_PAGES_VA + vm as u32 * 4096;
        kestrel_user::root::ram(shared, 4096, 12).map_err(|_| FabricError::BadWindow)?;
        let len = u32::try_from(len).map_err(|_| FabricError::BadWindow)?;
        // The service asks the root task what VM `vm` of this program is granted.
        self.attach(Window::new(first, len, shared).for_tenant(vm as u32))
            .map_err(Into::into)
    }

    fn events_from(&self) -> Option<ThreadId> {
        Some(self.thread())
    }

    fn note_event(&self) {
        Service::note_event(self)
    }
}
