//! [`PageMap`]: a fixed-size map from page address to a word (a frame), by open addressing
//! with linear probing and backward-shift deletion, so a lookup costs a few probes however
//! full the map is. All zeros is the empty map (a server may place one in zeroed RAM).
//! Page address 0 is never a key (it marks a free slot).
//!
//! The Linux personality keeps a program's anonymous pages in one (up to 16,384): a linear
//! scan of that table on every page fault and every system-call buffer page had cost about
//! 65,000 instructions per lookup.

/// Up to `N` (a power of two) entries `page -> value`, `page` page aligned and not 0.
#[repr(C)]
pub struct PageMap<const N: usize> {
    slots: [(u32, u32); N],
    /// Entries held.
    count: usize,
}

impl<const N: usize> Default for PageMap<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> PageMap<N> {
    const MASK: usize = {
        assert!(N.is_power_of_two() && N >= 2);
        N - 1
    };

    pub const fn new() -> Self {
        PageMap {
            slots: [(0, 0); N],
            count: 0,
        }
    }

    fn home(page: u32) -> usize {
        ((page >> 12).wrapping_mul(0x9E37_79B1) as usize >> 8) & Self::MASK
    }

    /// The slot holding `page`, if any.
    fn find(&self, page: u32) -> Option<usize> {
        if page == 0 {
            return None;
        }
        let mut i = Self::home(page);
        for _ in 0..N {
            match self.slots[i].0 {
                0 => return None,
                p if p == page => return Some(i),
                _ => i = (i + 1) & Self::MASK,
            }
        }
        None
    }

    /// The value of `page`.
    pub fn get(&self, page: u32) -> Option<u32> {
        self.find(page).map(|i| self.slots[i].1)
    }

    /// Sets `page`'s value; `false` (nothing changed) when `page` is 0 or the map is full.
    /// One slot always stays free, so every probe ends.
    pub fn insert(&mut self, page: u32, value: u32) -> bool {
        if page == 0 {
            return false;
        }
        if let Some(i) = self.find(page) {
            self.slots[i].1 = value;
            return true;
        }
        if self.len() + 1 >= N {
            return false;
        }
        let mut i = Self::home(page);
        while self.slots[i].0 != 0 {
            i = (i + 1) & Self::MASK;
        }
        self.slots[i] = (page, value);
        self.count += 1;
        true
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties slot `i`, moving later entries of its probe run back so every remaining
    /// entry stays reachable from its home slot.
    fn remove_slot(&mut self, mut hole: usize) {
        self.slots[hole] = (0, 0);
        self.count -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & Self::MASK;
            let page = self.slots[j].0;
            if page == 0 {
                return;
            }
            let home = Self::home(page);
            // The entry may move to the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                self.slots[j] = (0, 0);
                hole = j;
            }
        }
    }

    /// Removes `page`; its value, if it was there.
    pub fn remove(&mut self, page: u32) -> Option<u32> {
        let i = self.find(page)?;
        let v = self.slots[i].1;
        self.remove_slot(i);
        Some(v)
    }

    /// Removes every entry whose page `remove` accepts, calling `f(page, value)` for each.
    pub fn remove_where(
        &mut self,
        mut remove: impl FnMut(u32) -> bool,
        mut f: impl FnMut(u32, u32),
    ) {
        let mut i = 0;
        while i < N {
            let (page, value) = self.slots[i];
            if page != 0 && remove(page) {
                f(page, value);
                self.remove_slot(i);
                // An entry from later in the run may have moved here: look again.
                continue;
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u32),
        Remove(u32),
        RemoveRange(u32, u32),
    }

    fn op(pages: u32) -> impl Strategy<Value = Op> {
        // Few distinct pages, so runs collide and wrap around the small table.
        let page = (0u32..pages).prop_map(|p| p << 12);
        prop_oneof![
            (page.clone(), any::<u32>()).prop_map(|(p, v)| Op::Insert(p, v)),
            page.clone().prop_map(Op::Remove),
            (page.clone(), page).prop_map(|(a, b)| Op::RemoveRange(a.min(b), a.max(b))),
        ]
    }

    /// Runs `ops` on a `PageMap<N>` and on a BTreeMap of at most N - 1 entries, which
    /// must agree after every step.
    fn check<const N: usize>(ops: Vec<Op>, pages: u32) -> Result<(), TestCaseError> {
        let mut m = PageMap::<N>::new();
        let mut model = BTreeMap::new();
        for o in ops {
            match o {
                Op::Insert(p, v) => {
                    let room = model.contains_key(&p) || model.len() + 1 < N;
                    let ok = m.insert(p, v);
                    prop_assert_eq!(ok, p != 0 && room);
                    if ok {
                        model.insert(p, v);
                    }
                }
                Op::Remove(p) => prop_assert_eq!(m.remove(p), model.remove(&p)),
                Op::RemoveRange(a, b) => {
                    let mut gone = Vec::new();
                    m.remove_where(|p| (a..b).contains(&p), |p, v| gone.push((p, v)));
                    gone.sort();
                    let want: Vec<_> = model.range(a..b).map(|(&p, &v)| (p, v)).collect();
                    model.retain(|p, _| !(a..b).contains(p));
                    prop_assert_eq!(gone, want);
                }
            }
            prop_assert_eq!(m.len(), model.len());
            prop_assert_eq!(m.slots.iter().filter(|s| s.0 != 0).count(), model.len());
            for p in 0..pages {
                prop_assert_eq!(m.get(p << 12), model.get(&(p << 12)).copied());
            }
        }
        Ok(())
    }

    proptest! {
        /// The map behaves as a BTreeMap, whatever the order of inserts and removals.
        #[test]
        fn behaves_as_a_map(ops in proptest::collection::vec(op(48), 0..300)) {
            check::<32>(ops, 48)?;
        }

        /// The same on a table of 8 slots, where probe runs wrap around its end all the time.
        #[test]
        fn behaves_as_a_map_when_runs_wrap(ops in proptest::collection::vec(op(12), 0..300)) {
            check::<8>(ops, 12)?;
        }
    }

    #[test]
    fn zeroed_is_empty_and_zero_is_never_a_key() {
        let mut m = PageMap::<8>::default();
        assert!(m.is_empty());
        assert!(!m.insert(0, 5));
        assert_eq!(m.get(0), None);
        for p in 1..8u32 {
            assert!(m.insert(p << 12, p));
        }
        assert!(!m.insert(100 << 12, 1), "one slot stays free");
        assert!(
            m.insert(3 << 12, 33),
            "an existing page is updated when full"
        );
        assert_eq!(m.get(3 << 12), Some(33));
    }
}
