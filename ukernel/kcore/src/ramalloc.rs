//! The root task's physical-memory bookkeeping (`kestrel-root`): free RAM handed out as
//! contiguous, aligned blocks (a program image, a VM's 16 MiB-aligned guest RAM, a
//! program's 64 KiB chunk). A bump pointer with a short list of holes: the gap an aligned
//! block leaves below itself is kept for later blocks that fit. Nothing is given back
//! (programs run until the machine stops).
//!
//! Invariants, property-tested below: every block lies inside `[start, end)`, is aligned
//! as asked, and no two blocks overlap.

/// Holes remembered at once; a hole that does not fit is forgotten (memory lost, nothing
/// breaks).
pub const MAX_HOLES: usize = 16;

/// Bump allocator with holes over physical addresses `[next, end)`.
#[derive(Clone, Debug)]
pub struct RamAllocator {
    next: u32,
    end: u32,
    holes: heapless::Vec<(u32, u32), MAX_HOLES>,
}

impl RamAllocator {
    /// Free RAM `[start, end)`; `start` is rounded up to `page`-alignment by the caller's
    /// first request, not here.
    pub const fn new(start: u32, end: u32) -> RamAllocator {
        RamAllocator {
            next: start,
            end,
            holes: heapless::Vec::new(),
        }
    }

    /// `size` bytes aligned to `2^align_log2`; returns the start address. `None` if
    /// `size` is zero, the alignment is 32 or more, or no free range fits.
    pub fn alloc(&mut self, size: u32, align_log2: u32) -> Option<u32> {
        if size == 0 {
            return None;
        }
        let align = 1u32.checked_shl(align_log2)?;
        for i in 0..self.holes.len() {
            let (lo, hi) = self.holes[i];
            let Some(start) = lo.checked_next_multiple_of(align) else {
                continue;
            };
            if start.checked_add(size).is_some_and(|e| e <= hi) {
                self.holes.swap_remove(i);
                self.keep_hole(lo, start);
                self.keep_hole(start + size, hi);
                return Some(start);
            }
        }
        let start = self.next.checked_next_multiple_of(align)?;
        let end = start.checked_add(size)?;
        if end > self.end {
            return None;
        }
        self.keep_hole(self.next, start);
        self.next = end;
        Some(start)
    }

    /// Bytes never handed out above the bump pointer.
    pub fn remaining(&self) -> u32 {
        self.end.saturating_sub(self.next)
    }

    fn keep_hole(&mut self, lo: u32, hi: u32) {
        if hi > lo {
            let _ = self.holes.push((lo, hi));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn aligned_block_leaves_a_hole_for_small_ones() {
        let mut r = RamAllocator::new(0x0230_0000, 0x1000_0000);
        let big = r.alloc(64 << 20, 24).unwrap();
        assert_eq!(big, 0x0300_0000);
        // The 13 MiB below the aligned block are still there for small blocks.
        assert_eq!(r.alloc(0x1000, 12), Some(0x0230_0000));
        assert_eq!(r.alloc(0x1_0000, 16), Some(0x0231_0000));
        assert_eq!(r.alloc(0, 12), None);
        assert_eq!(r.alloc(0x1000, 32), None);
        assert_eq!(r.alloc(0x2000_0000, 12), None);
    }

    proptest! {
        #[test]
        fn blocks_are_inside_aligned_and_disjoint(
            start in 0u32..0x0400_0000,
            reqs in proptest::collection::vec((1u32..0x0200_0000, 12u32..26), 1..40),
        ) {
            let end = 0x1000_0000;
            let mut r = RamAllocator::new(start, end);
            let mut got: Vec<(u32, u32)> = Vec::new();
            for (size, align) in reqs {
                let size = size & !0xfff | 0x1000;
                if let Some(a) = r.alloc(size, align) {
                    prop_assert_eq!(a % (1 << align), 0);
                    prop_assert!(a >= start && a + size <= end);
                    for &(b, s) in &got {
                        prop_assert!(a + size <= b || b + s <= a, "overlap");
                    }
                    got.push((a, size));
                }
            }
        }
    }
}
