//! An index of up to 64 aligned power-of-two blocks of the 32-bit effective address space
//! (guest TLB entries, shadow slots), answering "which members may overlap this aligned
//! block" with a few AND/OR operations on 64-bit member masks instead of a scan.
//!
//! A block is given as `(base, mask)` with `mask = !(size - 1)` (0 for the whole 4 GiB)
//! and `base & !mask == 0`. Members are filed under:
//! - `region[r]`: every block overlapping the 16 MiB region `r` (address bits 31:24);
//! - `bucket[b]`: blocks smaller than 256 KiB, under each 4 KiB page number (address bits
//!   17:12) they cover: one bucket for up to 4 KiB, 4 for 16 KiB, 16 for 64 KiB;
//! - `big`: blocks of 256 KiB and more (they cover all 64 page numbers).
//!
//! Invariant: a query's answer is a superset of the members overlapping the asked block
//! (it may contain more, never less); callers test the candidates exactly.

/// Address bits above a region.
const REGION_SHIFT: u32 = 24;
const REGIONS: usize = 1 << (32 - REGION_SHIFT);
const PAGE_SHIFT: u32 = 12;
const BUCKETS: usize = 64;
/// `!mask` of the smallest block filed as `big` (256 KiB = 64 pages).
const BIG: u32 = (BUCKETS as u32) << PAGE_SHIFT;

/// Removes and returns the position of the lowest set bit of a non-empty mask.
#[inline(always)]
pub(crate) fn pop_lowest(m: &mut u64) -> usize {
    let i = m.trailing_zeros() as usize;
    *m &= *m - 1;
    i
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockIndex {
    region: [u64; REGIONS],
    bucket: [u64; BUCKETS],
    big: u64,
}

impl BlockIndex {
    pub(crate) const fn new() -> BlockIndex {
        BlockIndex {
            region: [0; REGIONS],
            bucket: [0; BUCKETS],
            big: 0,
        }
    }

    /// Files member `i` under the block `(base, mask)` (`set`) or removes it (`!set`).
    /// Removal must name the block the member was filed with. The two common shapes
    /// (at most 4 KiB; 256 KiB up to 16 MiB) are handled inline, the rest out of line.
    #[inline(always)]
    fn file(&mut self, i: usize, base: u32, mask: u32, set: bool) {
        let span = !mask;
        let r = (base >> REGION_SHIFT) as usize;
        let bit = 1u64 << i;
        let m = if span >> PAGE_SHIFT == 0 {
            &mut self.bucket[((base >> PAGE_SHIFT) as usize) & (BUCKETS - 1)]
        } else if span >= BIG && span >> REGION_SHIFT == 0 {
            &mut self.big
        } else {
            return self.file_other(bit, base, span, set);
        };
        if set {
            *m |= bit;
            self.region[r] |= bit;
        } else {
            *m &= !bit;
            self.region[r] &= !bit;
        }
    }

    /// [`BlockIndex::file`] for blocks of 16 or 64 KiB (several buckets) or above 16 MiB
    /// (several regions).
    #[inline(never)]
    fn file_other(&mut self, bit: u64, base: u32, span: u32, set: bool) {
        let apply = |m: &mut u64| if set { *m |= bit } else { *m &= !bit };
        let first = (base >> REGION_SHIFT) as usize;
        let last = ((base | span) >> REGION_SHIFT) as usize;
        for r in &mut self.region[first..=last] {
            apply(r);
        }
        if span < BIG {
            let b = ((base >> PAGE_SHIFT) as usize) & (BUCKETS - 1);
            let n = ((span >> PAGE_SHIFT) as usize) + 1;
            for m in &mut self.bucket[b..b + n] {
                apply(m);
            }
        } else {
            apply(&mut self.big);
        }
    }

    #[inline(always)]
    pub(crate) fn insert(&mut self, i: usize, base: u32, mask: u32) {
        self.file(i, base, mask, true);
    }

    #[inline(always)]
    pub(crate) fn remove(&mut self, i: usize, base: u32, mask: u32) {
        self.file(i, base, mask, false);
    }

    /// Members that may contain `ea`.
    #[inline(always)]
    pub(crate) fn at(&self, ea: u32) -> u64 {
        let b = ((ea >> PAGE_SHIFT) as usize) & (BUCKETS - 1);
        self.region[(ea >> REGION_SHIFT) as usize] & (self.bucket[b] | self.big)
    }

    /// Members that may overlap the aligned block `(base, mask)`; `all` is every member
    /// (the answer for blocks larger than a region).
    #[inline(always)]
    pub(crate) fn overlapping(&self, base: u32, mask: u32, all: u64) -> u64 {
        let span = !mask;
        if span >> PAGE_SHIFT == 0 {
            self.at(base)
        } else if span >> REGION_SHIFT == 0 {
            self.region[(base >> REGION_SHIFT) as usize]
        } else {
            all
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlap(a: (u32, u32), b: (u32, u32)) -> bool {
        (a.0 ^ b.0) & a.1 & b.1 == 0
    }

    /// Random blocks of every size from 1 KiB to 4 GiB, clustered so they overlap; after
    /// every insertion or removal, each query's answer contains every overlapping member,
    /// and removing everything leaves the index empty.
    #[test]
    fn queries_find_every_overlapping_member() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut idx = BlockIndex::new();
        let mut members: [Option<(u32, u32)>; 64] = [None; 64];
        for _ in 0..20_000 {
            let r = next();
            let i = (r % 64) as usize;
            if let Some((base, mask)) = members[i].take() {
                idx.remove(i, base, mask);
            }
            if r >> 6 & 3 != 0 {
                let log = 10 + ((r >> 8) % 23) as u32;
                let mask = if log == 32 { 0 } else { !((1u32 << log) - 1) };
                let anchor = [0u32, 0x0100_0000, 0x1000_0000, 0xC000_0000, 0xFFFF_0000]
                    [((r >> 16) % 5) as usize];
                let base = anchor.wrapping_add((r >> 24) as u32 & 0x00FF_FFFF) & mask;
                idx.insert(i, base, mask);
                members[i] = Some((base, mask));
            }
            let all = members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.is_some())
                .fold(0u64, |m, (i, _)| m | 1 << i);
            for _ in 0..8 {
                let q = next();
                let log = ((q >> 40) % 33) as u32;
                let mask = if log == 32 { 0 } else { !((1u32 << log) - 1) };
                let base = (q as u32) & mask;
                let want = members
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.is_some_and(|b| overlap(b, (base, mask))));
                let got = idx.overlapping(base, mask, all);
                let point = idx.at(q as u32);
                for (j, _) in want {
                    assert!(
                        got & 1 << j != 0,
                        "member {j} {:x?} overlaps {base:#x}/{mask:#x}",
                        members[j]
                    );
                }
                for (j, m) in members.iter().enumerate() {
                    if m.is_some_and(|b| overlap(b, (q as u32, u32::MAX))) {
                        assert!(point & 1 << j != 0, "member {j} contains {:#x}", q as u32);
                    }
                }
            }
        }
        for (i, m) in members.iter().enumerate() {
            if let Some((base, mask)) = *m {
                idx.remove(i, base, mask);
            }
        }
        assert_eq!(idx, BlockIndex::new());
    }
}
