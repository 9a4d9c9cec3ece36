//! The Kestrel microkernel.
//!
//! Layers (after Pistachio), one folder each:
//! - `arch`: the PowerPC 440 core alone (SPR access, TLB, exception entry, FPU);
//! - `platform`: the bamboo board (console UART, UIC);
//! - `api`: the kernel's L4 semantics (threads, spaces, IPC, mapping, scheduling, system
//!   calls);
//! - `glue`: where the API meets the CPU (trap dispatch, the IPC fast path, boot);
//! - `virt`: virtualization (vCPUs, trap-and-emulate, the virtual TLB).
//!
//! See docs/adr/0010-kernel-layering.md for the allowed dependency directions.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

/// Every PowerPC 440 number (SPRs, register bits, TLB words, vectors, DCRs) comes from
/// this crate; the kernel defines none of its own.
extern crate kestrel_ppc440 as ppc440;

pub mod api;
pub mod arch;
pub mod glue;
pub mod platform;
pub mod virt;

/// The virtualization the L4 core is built with: the one binding of
/// [`api::hooks::Virtualization`]; only `api::hooks` names it.
pub type Virtualization = virt::Virt;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    kprintln!("KERNEL PANIC: {}", info);
    platform::shutdown(2)
}
