//! The Kestrel microkernel.
//!
//! Layers (after Pistachio): `arch` is the PowerPC 440 core (registers, TLB,
//! exception entry), `platform` the bamboo board (UART, UIC), `generic` the kernel's
//! semantics (threads, spaces, IPC, mapping, scheduling). See docs/ARCHITECTURE.md.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod arch;
pub mod generic;
pub mod platform;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    kprintln!("KERNEL PANIC: {}", info);
    generic::boot::shutdown(2)
}
