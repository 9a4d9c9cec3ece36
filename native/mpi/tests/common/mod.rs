//! What the MPI layer's host tests share: an engine with `n` endpoints of one window each.

use kestrel_fabric::{Fabric, FabricApi, VecMemory};
use kestrel_spi::{layout, Coords};

/// Every endpoint's window: the smallest the SPI layout takes.
pub const WINDOW: u64 = layout::MIN_WINDOW as u64;

/// An engine with `n` endpoints attached, and each one's bus address of window offset 0.
pub fn fabric(n: usize) -> (Fabric<VecMemory>, Vec<u64>) {
    let mut f = Fabric::new(VecMemory::new());
    let mut bus = Vec::new();
    for _ in 0..n {
        let (ep, base) = f.attach(WINDOW).unwrap();
        f.grant(ep, kestrel_fabric::Grant::ALL).unwrap();
        f.memory_mut().set_window(ep, WINDOW as usize);
        bus.push(base);
    }
    (f, bus)
}

/// Endpoint `x`'s torus coordinates.
pub fn at(x: u8) -> Coords {
    Coords { x, y: 0, z: 0 }
}
