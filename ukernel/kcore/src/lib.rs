//! Kestrel's pure kernel logic: the parts of the kernel that need no hardware and are
//! therefore unit- and property-tested on the host.
//!
//! The target kernel (`ukernel/kernel`) owns the locking, the page tables and the TLB; it
//! calls into this crate for decisions and bookkeeping:
//!
//! - [`mapdb`]: the L4 mapping database (who derived which page from whom; revocation);
//! - [`readyq`]: the scheduler's 256 priority run queues with O(1) highest-priority lookup;
//! - [`prio`]: who may set a thread's priority, and how high (schedulers and ceilings);
//! - [`pid`]: the allocator for the PPC440's 8-bit TLB PIDs (TIDs) with stealing;
//! - [`bootinfo`]: board facts (RAM, clocks, UART, UIC, initrd) from QEMU's device tree;
//! - [`elf`]: the validated load plan for the root task's ELF image (and, through
//!   `kestrel_user::loader`, for every program the root task starts);
//! - [`ramalloc`]: the root task's allocator of contiguous, aligned physical blocks;
//! - [`ratelimit`]: the one rate limit for log lines a guest or a program causes (the
//!   VMM's per-guest diagnostics, the root task's lines about its programs).
//!
//! Invariants for the whole crate: `no_std`, no `alloc`, no `unsafe`, no floating point,
//! nothing assumes a 64-bit `usize` (the kernel runs with 32-bit pointers), and no input
//! from a boot loader, a user or an image can make any function here panic.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod bootinfo;
pub mod elf;
pub mod mapdb;
pub mod pagemap;
pub mod pid;
pub mod prio;
pub mod ramalloc;
pub mod ratelimit;
pub mod readyq;

pub use bootinfo::{fdt_total_size, BoardInfo, BootInfoError, UartInfo, UicInfo};
pub use elf::{load_plan, ElfError, LoadPlan, Segment};
pub use mapdb::{MapDb, MapDbError, Node, NodeId, Revoked, NIL_NODE};
pub use pid::{PidAllocator, PidGrant};
pub use readyq::ReadyQueues;
