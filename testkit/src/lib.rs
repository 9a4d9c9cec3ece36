//! Test support shared by the host tests (`devices/tests`, `vtlb/tests`) and the fuzz
//! targets (`fuzz/src`): each reference model, recording back end and per-step invariant
//! check exists once, here, and both kinds of test drive it with their own inputs
//! (proptest strategies on one side, libFuzzer bytes on the other).
//!
//! - [`uic`]: the per-line reference model of the PPC440EP UIC and the UIC invariants.
//! - [`bic`]: the per-line reference model of the BG/P interrupt controller and its checks.
//! - [`collective`]: a loopback tree back end and the collective model's invariants.
//! - [`torus`]: a recording DMA back end, the VM's segment and bus window, and the torus
//!   model's invariants (no bus value outside the window reaches the back end).
//! - [`virtio`]: guest RAM that checks every device write (only posted RX buffers and used
//!   rings), a frame back end, the fixed ring layout and Linux's bring-up.
//! - [`vtlb`]: the reference guest TLB (QEMU's `tlbwe`/`tlbre`/`ppcemb_tlb_check`), the
//!   reference host memory, and the rules every shadow (hardware) entry must obey.
//!
//! Host-only in use: it panics on a broken property (that is its job) and allocates
//! freely. It is `no_std` + `alloc` all the same, like the crates it checks, so that the
//! PowerPC lint (`scripts/lint.sh`, every workspace member but the fuzz crate) compiles it.
#![no_std]

extern crate alloc;

pub mod bic;
pub mod collective;
pub mod fabric;
pub mod torus;
pub mod uic;
pub mod virtio;
pub mod vtlb;
