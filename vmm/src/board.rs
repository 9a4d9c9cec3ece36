//! The board description: the one list of a VM's devices. It feeds the VMM's buses
//! (which model answers where), the guest's device tree (`kestrel-devtree` writes a node
//! per device) and the kernel's MMIO declarations ([`Board::mmio_declarations`]: the pages
//! the VMM declares device memory with `VcpuControl(DECLARE_MMIO)`).
//!
//! [`BAMBOO`] is QEMU's `-M bamboo` as the VMM models it: UIC0 on DCRs 0xC0..=0xC8 and two
//! 16550 UARTs at 0xEF600300 (UIC input 0) and 0xEF600400 (input 1). Its `device_space`
//! (0xE000_0000..0xF000_0000) is where an OS guest probes: pages there that no device
//! covers are declared on first touch and their accesses get data storage exceptions.

use crate::bus::BusError;
use alloc::vec::Vec;
use kestrel_devices::{UART_REGS, UIC_DCR_BASE, UIC_DCR_COUNT};

/// The 4 KiB page: the granule of MMIO declarations.
pub const PAGE: u64 = 0x1000;

/// Which model a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// A 16550A UART (byte registers), `kestrel_devices::Uart16550`.
    Uart16550,
    /// The PPC440EP UIC, `kestrel_devices::Uic`: the interrupt controller the other
    /// devices' `irq` inputs belong to.
    Uic,
}

/// Where a device answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Guest-physical `[base, base + size)`.
    Mmio { base: u64, size: u64 },
    /// DCRs `base..base + count`.
    Dcr { base: u32, count: u32 },
}

/// One device of a board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Short name for log lines.
    pub name: &'static str,
    pub model: Model,
    pub window: Window,
    /// The UIC input of its interrupt output.
    pub irq: Option<u32>,
}

/// A board: its devices and the device space an OS guest may probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Board {
    pub devices: &'static [Device],
    /// Guest-physical `[start, end)` that traps as device memory for an OS guest even
    /// where no device is (accesses there get data storage exceptions).
    pub device_space: (u64, u64),
}

/// QEMU bamboo's UART0 (the console).
pub const UART0: Device = Device {
    name: "uart0",
    model: Model::Uart16550,
    window: Window::Mmio { base: 0xEF60_0300, size: UART_REGS as u64 },
    irq: Some(0),
};

/// QEMU bamboo's UART1 (no back end: its output is dropped, as with `-serial null`).
pub const UART1: Device = Device {
    name: "uart1",
    model: Model::Uart16550,
    window: Window::Mmio { base: 0xEF60_0400, size: UART_REGS as u64 },
    irq: Some(1),
};

/// UIC0.
pub const UIC0: Device =
    Device { name: "uic0", model: Model::Uic, window: Window::Dcr { base: UIC_DCR_BASE, count: UIC_DCR_COUNT }, irq: None };

/// The virtual bamboo board.
pub const BAMBOO: Board = Board { devices: &[UIC0, UART0, UART1], device_space: (0xE000_0000, 0xF000_0000) };

impl Board {
    /// The devices of model `m`, in board order.
    pub fn of_model(&self, m: Model) -> impl Iterator<Item = &Device> + '_ {
        self.devices.iter().filter(move |d| d.model == m)
    }

    /// Whether guest-physical `gpa` lies in the board's device space.
    pub fn in_device_space(&self, gpa: u64) -> bool {
        (self.device_space.0..self.device_space.1).contains(&gpa)
    }

    /// The guest-physical pages to declare device memory: every MMIO window below 4 GiB,
    /// widened to whole pages, adjacent or overlapping pages merged, as `(base, size)`
    /// sorted by base. (Above 4 GiB every access is device memory already.)
    pub fn mmio_declarations(&self) -> Vec<(u64, u64)> {
        let mut pages: Vec<(u64, u64)> = self
            .devices
            .iter()
            .filter_map(|d| match d.window {
                Window::Mmio { base, size } if base < 1 << 32 => {
                    let start = base & !(PAGE - 1);
                    let end = (base + size).min(1 << 32).next_multiple_of(PAGE);
                    Some((start, end))
                }
                _ => None,
            })
            .collect();
        pages.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (start, end) in pages {
            match out.last_mut() {
                Some(last) if start <= last.0 + last.1 => last.1 = last.1.max(end - last.0),
                _ => out.push((start, end - start)),
            }
        }
        out
    }

    /// Checks that no two windows of one kind overlap, and that every interrupt input
    /// exists: the checks the buses make, before anything is built.
    pub fn check(&self) -> Result<(), BusError> {
        let windows: Vec<(bool, u64, u64, &'static str)> = self
            .devices
            .iter()
            .map(|d| match d.window {
                Window::Mmio { base, size } => (true, base, size, d.name),
                Window::Dcr { base, count } => (false, base as u64, count as u64, d.name),
            })
            .collect();
        for (i, &(mmio, base, size, _)) in windows.iter().enumerate() {
            if size == 0 || base.checked_add(size).is_none() {
                return Err(BusError::BadRange { base, size });
            }
            for &(m2, b2, s2, with) in &windows[..i] {
                if m2 == mmio && base < b2 + s2 && b2 < base + size {
                    return Err(BusError::Overlap { base, size, with });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bamboo_is_consistent() {
        assert_eq!(BAMBOO.check(), Ok(()));
        assert_eq!(BAMBOO.of_model(Model::Uart16550).count(), 2);
        assert_eq!(BAMBOO.of_model(Model::Uic).count(), 1);
        // Both UARTs share one page: one declaration.
        assert_eq!(BAMBOO.mmio_declarations(), [(0xEF60_0000, PAGE)]);
        assert!(BAMBOO.in_device_space(0xEF60_0300) && !BAMBOO.in_device_space(0xF000_0000));
    }

    #[test]
    fn declarations_are_whole_pages_merged_and_below_4g() {
        const D: &[Device] = &[
            Device { name: "a", model: Model::Uart16550, window: Window::Mmio { base: 0x1ff8, size: 0x10 }, irq: None },
            Device { name: "b", model: Model::Uart16550, window: Window::Mmio { base: 0x3000, size: 0x10 }, irq: None },
            Device { name: "c", model: Model::Uart16550, window: Window::Mmio { base: 0x8000, size: 1 }, irq: None },
            Device { name: "bgp", model: Model::Uart16550, window: Window::Mmio { base: 0x6_0000_0000, size: 0x1000 }, irq: None },
        ];
        let b = Board { devices: D, device_space: (0, 0) };
        assert_eq!(b.mmio_declarations(), [(0x1000, 0x3000), (0x8000, PAGE)]);
        assert_eq!(b.check(), Ok(()));
    }

    #[test]
    fn overlapping_windows_are_refused() {
        const D: &[Device] = &[
            Device { name: "a", model: Model::Uart16550, window: Window::Mmio { base: 0x1000, size: 0x10 }, irq: None },
            Device { name: "b", model: Model::Uart16550, window: Window::Mmio { base: 0x100f, size: 0x10 }, irq: None },
            // A DCR window does not collide with an MMIO one at the same number.
            Device { name: "u", model: Model::Uic, window: Window::Dcr { base: 0x1000, count: 9 }, irq: None },
        ];
        let b = Board { devices: D, device_space: (0, 0) };
        assert_eq!(b.check(), Err(BusError::Overlap { base: 0x100f, size: 0x10, with: "a" }));
    }
}
