//! The scheduler's run queues: one FIFO per priority (0 lowest, 255 highest) and a
//! 256-bit summary bitmap for O(1) "highest runnable priority" (L4's strict priority
//! round robin; Pistachio `kernel/include/generic/sched.h`).
//!
//! Threads are named by their slot index (`idx < N`) in the kernel's thread table; the
//! queue links live here, in arrays indexed by that slot, so enqueueing never allocates.
//!
//! Invariants:
//! - a slot is in at most one queue, and `queued[idx]` says whether it is;
//! - bit `p % 32` of `bitmap[p / 32]` is set exactly when level `p` is non-empty;
//! - `count[p]` is the length of level `p`; `head`/`tail` and `next`/`prev` form a
//!   consistent doubly linked list per level.
//!
//! Links are stored as `idx + 1` with 0 meaning "none", so a fresh set of queues is all
//! zero bytes and a `static` of it lands in `.bss`.

/// Number of priority levels.
pub const NUM_PRIORITIES: usize = 256;

/// Largest number of thread slots a [`ReadyQueues`] can link.
pub const MAX_SLOTS: usize = u16::MAX as usize - 1;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Slot(u16);

impl Slot {
    const NONE: Slot = Slot(0);
    const fn to(idx: usize) -> Slot {
        Slot(idx as u16 + 1)
    }
    const fn index(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0 as usize - 1)
        }
    }
}

/// Run queues for `N` thread slots.
///
/// `repr(C)` with the summary word first and the bitmap after it, so that a kernel's
/// assembly fast path can find the highest ready priority ([`Self::SUMMARY_OFFSET`],
/// [`Self::BITMAP_OFFSET`]); the layout of the other fields is private.
#[repr(C)]
pub struct ReadyQueues<const N: usize> {
    /// Bit `w` set iff `bitmap[w] != 0`: two `cntlzw`s find the highest level.
    summary: u32,
    bitmap: [u32; 8],
    head: [Slot; NUM_PRIORITIES],
    tail: [Slot; NUM_PRIORITIES],
    count: [u16; NUM_PRIORITIES],
    next: [Slot; N],
    prev: [Slot; N],
    prio: [u8; N],
    queued: [bool; N],
}

impl<const N: usize> Default for ReadyQueues<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> ReadyQueues<N> {
    /// Byte offset of the summary word (bit `w` set iff bitmap word `w` is non-zero).
    pub const SUMMARY_OFFSET: usize = 0;
    /// Byte offset of the 8-word priority bitmap (bit `p % 32` of word `p / 32`).
    pub const BITMAP_OFFSET: usize = 4;

    /// Empty queues. `const` so that they can initialise a `static`.
    pub const fn new() -> Self {
        const { assert!(N <= MAX_SLOTS, "ReadyQueues links at most MAX_SLOTS slots") };
        ReadyQueues {
            summary: 0,
            bitmap: [0; 8],
            head: [Slot::NONE; NUM_PRIORITIES],
            tail: [Slot::NONE; NUM_PRIORITIES],
            count: [0; NUM_PRIORITIES],
            next: [Slot::NONE; N],
            prev: [Slot::NONE; N],
            prio: [0; N],
            queued: [false; N],
        }
    }

    /// Appends slot `idx` to level `prio` (behind threads of equal priority). A slot that
    /// is already queued is moved.
    ///
    /// Panics if `idx >= N`: slot indices come from the kernel's own thread table.
    pub fn enqueue(&mut self, idx: usize, prio: u8) {
        self.remove(idx);
        let p = prio as usize;
        self.prio[idx] = prio;
        self.queued[idx] = true;
        self.next[idx] = Slot::NONE;
        self.prev[idx] = self.tail[p];
        match self.tail[p].index() {
            Some(t) => self.next[t] = Slot::to(idx),
            None => self.head[p] = Slot::to(idx),
        }
        self.tail[p] = Slot::to(idx);
        self.added(p);
    }

    /// Puts slot `idx` at the head of level `prio` (it runs next among its equals), as
    /// for a thread preempted before its timeslice ran out. A queued slot is moved.
    ///
    /// Panics if `idx >= N`.
    pub fn enqueue_front(&mut self, idx: usize, prio: u8) {
        self.remove(idx);
        let p = prio as usize;
        self.prio[idx] = prio;
        self.queued[idx] = true;
        self.prev[idx] = Slot::NONE;
        self.next[idx] = self.head[p];
        match self.head[p].index() {
            Some(h) => self.prev[h] = Slot::to(idx),
            None => self.tail[p] = Slot::to(idx),
        }
        self.head[p] = Slot::to(idx);
        self.added(p);
    }

    /// Takes slot `idx` off its queue; does nothing if it is not queued.
    pub fn remove(&mut self, idx: usize) {
        if !self.contains(idx) {
            return;
        }
        let p = self.prio[idx] as usize;
        let (prev, next) = (self.prev[idx], self.next[idx]);
        match prev.index() {
            Some(q) => self.next[q] = next,
            None => self.head[p] = next,
        }
        match next.index() {
            Some(n) => self.prev[n] = prev,
            None => self.tail[p] = prev,
        }
        self.next[idx] = Slot::NONE;
        self.prev[idx] = Slot::NONE;
        self.queued[idx] = false;
        self.count[p] -= 1;
        if self.count[p] == 0 {
            self.bitmap[p / 32] &= !(1 << (p % 32));
            if self.bitmap[p / 32] == 0 {
                self.summary &= !(1 << (p / 32));
            }
        }
    }

    /// True if slot `idx` is queued (false for any `idx >= N`).
    pub fn contains(&self, idx: usize) -> bool {
        self.queued.get(idx).copied().unwrap_or(false)
    }

    /// The priority slot `idx` is queued at, if it is queued.
    pub fn priority_of(&self, idx: usize) -> Option<u8> {
        if self.contains(idx) {
            Some(self.prio[idx])
        } else {
            None
        }
    }

    /// The head of the highest non-empty level and that level, without dequeuing it.
    #[inline]
    pub fn highest(&self) -> Option<(usize, u8)> {
        let p = self.highest_priority()?;
        Some((self.head[p as usize].index()?, p))
    }

    /// The highest non-empty level, in O(1) (two leading-zero counts).
    #[inline]
    pub fn highest_priority(&self) -> Option<u8> {
        if self.summary == 0 {
            return None;
        }
        let w = 31 - self.summary.leading_zeros() as usize;
        let bits = self.bitmap[w & 7];
        Some((w * 32 + (31 - bits.leading_zeros() as usize)) as u8)
    }

    /// Moves the head of level `prio` behind its other threads (end of a timeslice).
    pub fn rotate(&mut self, prio: u8) {
        let p = prio as usize;
        if self.count[p] < 2 {
            return;
        }
        if let Some(h) = self.head[p].index() {
            self.enqueue(h, prio);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bitmap.iter().all(|&w| w == 0)
    }

    /// Number of threads queued at `prio`.
    pub fn len_at(&self, prio: u8) -> usize {
        self.count[prio as usize] as usize
    }

    /// The slots queued at `prio`, head first.
    pub fn iter_at(&self, prio: u8) -> LevelIter<'_, N> {
        LevelIter {
            q: self,
            next: self.head[prio as usize],
        }
    }

    fn added(&mut self, p: usize) {
        self.count[p] += 1;
        self.bitmap[p / 32] |= 1 << (p % 32);
        self.summary |= 1 << (p / 32);
    }
}

/// Iterator over one priority level, head first.
pub struct LevelIter<'a, const N: usize> {
    q: &'a ReadyQueues<N>,
    next: Slot,
}

impl<const N: usize> Iterator for LevelIter<'_, N> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let i = self.next.index()?;
        self.next = self.q.next[i];
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::vec::Vec;

    #[test]
    fn highest_priority_wins_and_bitmap_words_are_crossed() {
        let mut q = ReadyQueues::<8>::new();
        assert!(q.is_empty());
        assert_eq!(q.highest(), None);
        q.enqueue(0, 0);
        q.enqueue(1, 31);
        q.enqueue(2, 32);
        q.enqueue(3, 255);
        assert_eq!(q.highest(), Some((3, 255)));
        q.remove(3);
        assert_eq!(q.highest(), Some((2, 32)));
        q.remove(2);
        assert_eq!(q.highest(), Some((1, 31)));
        q.remove(1);
        assert_eq!(q.highest(), Some((0, 0)));
        q.remove(0);
        q.remove(0);
        assert!(q.is_empty());
        assert!(!q.contains(100));
    }

    #[test]
    fn round_robin_among_equals_is_fair() {
        let mut q = ReadyQueues::<8>::new();
        for t in [4, 5, 6] {
            q.enqueue(t, 100);
        }
        q.enqueue(7, 10);
        let mut order = Vec::new();
        for _ in 0..9 {
            let (t, p) = q.highest().unwrap();
            order.push(t);
            q.rotate(p);
        }
        assert_eq!(order, [4, 5, 6, 4, 5, 6, 4, 5, 6]);
        // A higher-priority arrival preempts; the preempted thread resumes first.
        let (cur, p) = q.highest().unwrap();
        q.enqueue(1, 200);
        assert_eq!(q.highest(), Some((1, 200)));
        q.remove(1);
        q.enqueue_front(cur, p);
        assert_eq!(q.highest(), Some((cur, p)));
        assert_eq!(q.len_at(100), 3);
        assert_eq!(q.iter_at(10).collect::<Vec<_>>(), [7]);
    }

    #[test]
    fn enqueue_moves_a_queued_slot() {
        let mut q = ReadyQueues::<4>::new();
        q.enqueue(0, 5);
        q.enqueue(1, 5);
        q.enqueue(0, 9);
        assert_eq!(q.len_at(5), 1);
        assert_eq!(q.priority_of(0), Some(9));
        q.enqueue_front(1, 9);
        assert_eq!(q.iter_at(9).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(q.len_at(5), 0);
    }

    #[test]
    fn static_queues_are_const() {
        static Q: ReadyQueues<192> = ReadyQueues::new();
        assert!(Q.is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enqueue(usize, u8),
        Front(usize, u8),
        Remove(usize),
        Rotate(u8),
    }

    const SLOTS: usize = 12;

    fn prio() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(0u8),
            Just(31),
            Just(32),
            Just(63),
            Just(64),
            Just(200),
            Just(255),
            any::<u8>()
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..SLOTS, prio()).prop_map(|(i, p)| Op::Enqueue(i, p)),
            1 => (0..SLOTS, prio()).prop_map(|(i, p)| Op::Front(i, p)),
            2 => (0..SLOTS + 2).prop_map(Op::Remove),
            2 => prio().prop_map(Op::Rotate),
        ]
    }

    proptest! {
        #[test]
        fn matches_reference_model(ops in proptest::collection::vec(op(), 1..200)) {
            let mut q = ReadyQueues::<SLOTS>::new();
            let mut model: Vec<VecDeque<usize>> = (0..NUM_PRIORITIES).map(|_| VecDeque::new()).collect();
            let unqueue = |m: &mut Vec<VecDeque<usize>>, i: usize| {
                for level in m.iter_mut() {
                    level.retain(|&x| x != i);
                }
            };
            for op in ops {
                match op {
                    Op::Enqueue(i, p) => {
                        q.enqueue(i, p);
                        unqueue(&mut model, i);
                        model[p as usize].push_back(i);
                    }
                    Op::Front(i, p) => {
                        q.enqueue_front(i, p);
                        unqueue(&mut model, i);
                        model[p as usize].push_front(i);
                    }
                    Op::Remove(i) => {
                        q.remove(i);
                        unqueue(&mut model, i);
                    }
                    Op::Rotate(p) => {
                        q.rotate(p);
                        let level = &mut model[p as usize];
                        if let Some(h) = level.pop_front() {
                            level.push_back(h);
                        }
                    }
                }
                let want = model.iter().enumerate().rev().find(|(_, l)| !l.is_empty()).map(|(p, l)| (l[0], p as u8));
                prop_assert_eq!(q.highest(), want);
                prop_assert_eq!(q.is_empty(), want.is_none());
                for (p, level) in model.iter().enumerate() {
                    prop_assert_eq!(q.len_at(p as u8), level.len());
                    prop_assert_eq!(q.iter_at(p as u8).collect::<Vec<_>>(), level.iter().copied().collect::<Vec<_>>());
                }
                for i in 0..SLOTS {
                    let at = model.iter().position(|l| l.contains(&i));
                    prop_assert_eq!(q.contains(i), at.is_some());
                    prop_assert_eq!(q.priority_of(i), at.map(|p| p as u8));
                }
            }
        }
    }
}
