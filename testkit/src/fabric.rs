//! The fabric engine's guarded memory model: `EPS` windows of `W` bytes with `G` guard bytes
//! around each, in one flat store, every access logged. Used by the engine's property tests
//! (`fabric/core/tests/props.rs`) and the `fabric` fuzz target: an access outside an
//! endpoint's window panics here, and the guards and the log let the caller check that
//! nothing outside the windows (or outside the range-check windows) was touched.

use alloc::vec;
use alloc::vec::Vec;
use kestrel_fabric::{EpId, MemError, Memory};

/// Bytes per endpoint window.
pub const W: usize = 0x2000;
/// Guard bytes before, between and after the windows.
pub const G: usize = 0x100;
/// Endpoints with a window.
pub const EPS: usize = 4;

/// Windows with guard bytes between them; accesses are logged as (endpoint, offset, length,
/// is-write).
pub struct Guarded {
    pub bytes: Vec<u8>,
    pub log: Vec<(EpId, u64, usize, bool)>,
}

impl Default for Guarded {
    fn default() -> Self {
        Self::new()
    }
}

impl Guarded {
    pub fn new() -> Guarded {
        Guarded {
            bytes: vec![0; G + EPS * (W + G)],
            log: Vec::new(),
        }
    }

    /// Index in `bytes` of `len` bytes at `off` in `ep`'s window; panics outside it.
    pub fn at(ep: EpId, off: u64, len: usize) -> usize {
        assert!(
            (ep.0 as usize) < EPS,
            "access for endpoint {ep:?} that has no window"
        );
        assert!(
            off as usize + len <= W,
            "engine accessed {len} bytes at {off:#x} outside {ep:?}'s window"
        );
        G + ep.0 as usize * (W + G) + off as usize
    }

    /// Endpoint `ep`'s window.
    pub fn window(&self, ep: EpId) -> &[u8] {
        let s = G + ep.0 as usize * (W + G);
        &self.bytes[s..s + W]
    }

    /// Every guard byte is still zero.
    pub fn guards_clean(&self) -> bool {
        (0..=EPS).all(|k| {
            let s = k * (W + G);
            self.bytes[s..s + G].iter().all(|&b| b == 0)
        })
    }
}

impl Memory for Guarded {
    fn read(&mut self, ep: EpId, offset: u64, buf: &mut [u8]) -> Result<(), MemError> {
        let a = Self::at(ep, offset, buf.len());
        buf.copy_from_slice(&self.bytes[a..a + buf.len()]);
        self.log.push((ep, offset, buf.len(), false));
        Ok(())
    }

    fn write(&mut self, ep: EpId, offset: u64, data: &[u8]) -> Result<(), MemError> {
        let a = Self::at(ep, offset, data.len());
        self.bytes[a..a + data.len()].copy_from_slice(data);
        self.log.push((ep, offset, data.len(), true));
        Ok(())
    }
}
