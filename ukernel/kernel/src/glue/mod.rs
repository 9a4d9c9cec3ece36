//! Where the L4 API meets the PowerPC 440: the kernel entry points called from the
//! exception vectors (trap dispatch, the program-interrupt and IPC fast paths) and boot.
//!
//! Glue may use every other layer (`api`, `virt`, `arch`, `platform`); nothing but the
//! vectors in `arch::entry` (by symbol name) calls into it.

pub mod boot;
pub mod fastpath;
pub mod switch;
pub mod trap;
