//! Kestrel's guest device models: pure register-level state machines, tested on the host.
//!
//! - [`uart`]: the 16550A UART that QEMU's `-M bamboo` puts at 0xEF600300 and 0xEF600400
//!   (byte registers, regshift 0).
//! - [`uic`]: the PPC440EP Universal Interrupt Controller on DCRs 0xC0..=0xC8.
//! - [`bic`]: the Blue Gene/P interrupt controller (a cascade on UIC0 input 30 in a VM).
//! - [`collective`]: the BG/P collective network's two virtual channels and DCRs, in front
//!   of a [`collective::TreeBackend`] (the fabric).
//! - [`torus`]: the VM's torus DMA group and the torus/DMA DCRs, validating and translating
//!   every address guest-physical <-> bus in front of a [`torus::DmaBackend`] (the fabric).
//! - [`virtio_net`]: a virtio-mmio (version 2) network device for Linux's virtio_mmio and
//!   virtio_net drivers, over [`bus::GuestRam`] and a [`virtio_net::FrameBackend`].
//! - [`bus`]: the traits a VMM attaches models through ([`bus::MmioDevice`],
//!   [`bus::DcrDevice`], [`bus::IrqLine`], [`bus::GuestRam`]) and the attachments of the
//!   two models above.
//!
//! A model knows nothing about its transport: the VMM decodes a trapped load/store or
//! `mfdcr`/`mtdcr`, calls `read`/`write` (or `read_dcr`/`write_dcr`) with the register
//! offset, and samples the interrupt outputs (`irq()`, `irq_output()`, `crit_output()`)
//! afterwards. Back ends are plain callbacks or methods (`tx`, `push_input`, `set_input`).
//! No model allocates, blocks, or panics on any guest- or host-supplied value.
//!
//! The behaviour follows QEMU 7.2 (`hw/char/serial.c`, `hw/intc/ppc-uic.c`), which is what
//! Linux 6.1's drivers were checked against on this board. Where a model departs from
//! QEMU, the module documentation says so and why.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod bic;
pub mod bus;
pub mod collective;
pub mod torus;
pub mod uart;
pub mod uic;
pub mod virtio_net;

pub use bic::{Bic, BicCascade};
pub use uart::{Uart16550, UART_REGS};
pub use uic::{Uic, UIC_DCR_BASE, UIC_DCR_COUNT, UIC_LINES};
