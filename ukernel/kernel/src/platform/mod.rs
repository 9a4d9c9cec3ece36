//! The bamboo board (PPC440EP as QEMU models it): console UART and the UIC.

pub mod uart;
pub mod uic;

/// Stops the machine: under QEMU with `-no-reboot` the requested system reset ends the
/// emulator.
pub fn shutdown(code: u32) -> ! {
    crate::kprintln!("kestrel: shutdown (code {})", code);
    crate::arch::system_reset()
}
