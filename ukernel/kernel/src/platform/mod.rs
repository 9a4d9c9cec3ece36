//! The bamboo board (PPC440EP as QEMU models it): console UART and the UIC.

pub mod uart;
pub mod uic;
