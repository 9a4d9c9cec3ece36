//! How the engine reaches memory: [`Memory`], one window per endpoint, addressed by the
//! offset inside that window; and [`VecMemory`], a window per endpoint in a `Vec`, for
//! tests and for the fabric service's host tests.
//!
//! The engine range-checks every access against the endpoint's window and range-check
//! windows before it calls [`Memory`]; an implementation still returns [`MemError`] for an
//! access it cannot serve (the engine then treats it as a range-check failure), and never
//! panics.

use crate::EpId;
use alloc::vec;
use alloc::vec::Vec;

/// A memory access the back end refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The endpoint has no window here (not attached, or the window was withdrawn).
    NoWindow,
    /// The access reaches outside the endpoint's window.
    OutOfRange,
}

/// The endpoints' DMA-able memory, as the engine sees it.
pub trait Memory {
    /// Reads `buf.len()` bytes at `offset` inside endpoint `ep`'s window.
    fn read(&mut self, ep: EpId, offset: u64, buf: &mut [u8]) -> Result<(), MemError>;
    /// Writes `data` at `offset` inside endpoint `ep`'s window.
    fn write(&mut self, ep: EpId, offset: u64, data: &[u8]) -> Result<(), MemError>;

    /// Copies `len` bytes from `from`'s window at `from_offset` to `to`'s at `to_offset`
    /// (the engine passes ranges that do not overlap): a local direct put in one go. The
    /// default goes through a small buffer, a read and a write at a time; a back end
    /// that sees both windows copies directly. On an error part may have been copied.
    fn copy(
        &mut self,
        from: EpId,
        from_offset: u64,
        to: EpId,
        to_offset: u64,
        len: u64,
    ) -> Result<(), MemError> {
        let mut buf = [0u8; 256];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            self.read(from, from_offset + done, &mut buf[..n])?;
            self.write(to, to_offset + done, &buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }
}

/// Plain memory: one zeroed `Vec<u8>` per endpoint, sized by [`VecMemory::set_window`].
#[derive(Clone, Debug, Default)]
pub struct VecMemory {
    windows: Vec<Vec<u8>>,
}

impl VecMemory {
    pub fn new() -> VecMemory {
        VecMemory::default()
    }

    /// Gives endpoint `ep` a zeroed window of `len` bytes (replacing any earlier one).
    pub fn set_window(&mut self, ep: EpId, len: usize) {
        let i = usize::from(ep.0);
        if self.windows.len() <= i {
            self.windows.resize(i + 1, Vec::new());
        }
        self.windows[i] = vec![0; len];
    }

    /// Endpoint `ep`'s window (empty if it has none).
    pub fn window(&self, ep: EpId) -> &[u8] {
        self.windows
            .get(usize::from(ep.0))
            .map_or(&[], |w| w.as_slice())
    }

    /// Endpoint `ep`'s window, writable (empty if it has none).
    pub fn window_mut(&mut self, ep: EpId) -> &mut [u8] {
        self.windows
            .get_mut(usize::from(ep.0))
            .map_or(&mut [], |w| w.as_mut_slice())
    }

    fn range(&self, ep: EpId, offset: u64, len: usize) -> Result<(usize, usize), MemError> {
        let w = self
            .windows
            .get(usize::from(ep.0))
            .ok_or(MemError::NoWindow)?;
        let start = usize::try_from(offset).map_err(|_| MemError::OutOfRange)?;
        let end = start.checked_add(len).ok_or(MemError::OutOfRange)?;
        if end > w.len() {
            return Err(MemError::OutOfRange);
        }
        Ok((start, end))
    }
}

impl Memory for VecMemory {
    fn read(&mut self, ep: EpId, offset: u64, buf: &mut [u8]) -> Result<(), MemError> {
        let (s, e) = self.range(ep, offset, buf.len())?;
        buf.copy_from_slice(&self.windows[usize::from(ep.0)][s..e]);
        Ok(())
    }

    fn write(&mut self, ep: EpId, offset: u64, data: &[u8]) -> Result<(), MemError> {
        let (s, e) = self.range(ep, offset, data.len())?;
        self.windows[usize::from(ep.0)][s..e].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_memory_checks_ranges() {
        let mut m = VecMemory::new();
        m.set_window(EpId(2), 64);
        assert_eq!(m.write(EpId(2), 60, &[1, 2, 3, 4]), Ok(()));
        assert_eq!(
            m.write(EpId(2), 61, &[1, 2, 3, 4]),
            Err(MemError::OutOfRange)
        );
        assert_eq!(m.write(EpId(0), 0, &[1]), Err(MemError::OutOfRange));
        assert_eq!(m.write(EpId(7), 0, &[1]), Err(MemError::NoWindow));
        assert_eq!(
            m.read(EpId(2), u64::MAX, &mut [0]),
            Err(MemError::OutOfRange)
        );
        let mut b = [0; 4];
        m.read(EpId(2), 60, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(m.window(EpId(2))[63], 4);
    }
}
