//! Kestrel's virtual TLB: pure logic, no hardware access, tested on the host.
//!
//! - [`guest`]: the guest-visible PowerPC 440 TLB that the kernel's instruction emulator
//!   drives on trapped `tlbwe`, `tlbre` and `tlbsx` (one [`guest::GuestTlb`] per vCPU).
//! - [`shadow`]: the paper's §3.2 policy that merges the guest TLB and the VM's
//!   guest-physical mappings into hardware TLB entries (tagged by the kernel with a
//!   hardware TID per vCPU, guest PID and guest mode), says when they must be flushed, and
//!   keeps the exact record of the hardware slots that native refills and guest fills
//!   share ([`ShadowTlb`]).
//! - `index` (private): the block index both use, so that no operation scans all 64
//!   guest entries or all shadow slots (the kernel runs them on every guest `tlbwe` and
//!   TLB miss).
//!
//! Invariant for the whole crate: a hardware entry produced here never grants more than
//! the guest TLB (first match, current guest mode) and the VMM's mapping both allow, over
//! every address it covers. `tests/model.rs` checks this against a reference model.
#![no_std]
#![forbid(unsafe_code)]

pub mod guest;
mod index;
pub mod shadow;

pub use guest::{GuestEntry, GuestTlb, PageSize, Perms, TlbError, Wimge};
pub use shadow::{
    mode_rights, needs_flush, shadow_fill, split_fill, Access, Event, FillResult, GuestPhysMap,
    HostPage, HwEntry, Placement, ShadowTlb, Slot, SlotMask, SplitFill, OWNERS, SPLIT_PAGE,
    UNTAGGED,
};
