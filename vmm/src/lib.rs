//! Kestrel's user-level VMM: the pure, host-tested part.
//!
//! The VMM is a native L4 task (paper §4). The kernel runs a guest's vCPU as a thread in
//! user mode; when the guest executes a sensitive instruction or touches guest-physical
//! memory that is not mapped yet, the kernel turns the trap into a fault IPC to the VMM
//! carrying the vCPU state and the trapping instruction word (§3.1). The VMM decodes the
//! instruction, emulates it against its vCPU and device models, and replies with the
//! updated state and an advanced program counter (§4.1); a page fault on guest RAM is
//! answered with a mapping of the backing page (§4.2).
//!
//! This crate holds the pieces of that loop that need no kernel:
//!
//! - [`segment`]: guest-physical memory as linear segments (§4.2), the checked
//!   translation of a guest-physical access to the VMM memory that backs it, and
//!   [`segment::SegmentRam`], guest RAM as device models read and write it;
//! - [`bus`]: the MMIO and DCR buses that route an access to a device model;
//! - [`board`]: the board description, the one list of devices that feeds the buses, the
//!   guest's device tree and the kernel's MMIO declarations;
//! - [`fabric`]: the VMM's side of the node's interconnect, generic over the fabric's calls
//!   (`kestrel_fabric::FabricApi`): guest RAM as the engine's memory, the BG/P models' back
//!   ends over a VM's endpoint, the shadow reception FIFOs and back-pressure;
//! - [`diag`]: the one rate limit for what the log says about a guest (first lines in full,
//!   then counted summaries);
//! - [`fault`]: the fault loop's decisions: decode the trapped instruction, dispatch it to
//!   the buses, and build the typed reply;
//! - [`trace_mark`]: which guest console line asks for a per-phase trace snapshot
//!   (`kestrel-trace-mark NAME`, with `vmm.trace_marks=on`).
//!
//! The instruction decoder the fault loop uses is `kestrel_ppc440::decode`; the fault loop
//! itself is the `kestrel-vmm` task (`vmm/task`), and the device models are `kestrel-devices`.
//!
//! Invariants for the whole crate: `no_std` (with `alloc` for the buses), no `unsafe`, nothing assumes a
//! 64-bit `usize`, and no guest-controlled value (instruction word, register, address) can
//! make a function here panic.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod board;
pub mod bus;
pub mod diag;
pub mod fabric;
pub mod fault;
pub mod segment;
pub mod trace_mark;

pub use segment::{GuestMemory, GuestPhysAddr, HostAddr, Segment, SegmentError};
