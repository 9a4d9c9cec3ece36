//! The task's global allocator (cargo feature `heap`): `alloc::vec::Vec`, `Box`, `String` and
//! friends over a static arena of [`HEAP_BYTES`] in the task's `.bss`.
//!
//! A task enables it with `kestrel-user = { path = "...", features = ["heap"] }` and
//! `extern crate alloc;`; nothing needs initialising. The arena is managed by
//! `linked_list_allocator`'s first-fit [`Heap`] (no `std`, no lock of its own). Threads of a
//! task share it under a lock that, when taken, donates the caller's time slice to the
//! holder (`thread_switch(holder)`, as in L4) instead of spinning: a higher-priority thread
//! waiting for a lower-priority holder would otherwise spin forever under a strict-priority
//! scheduler. The lock word is one `AtomicU32` (lwarx/stwcx. on the 440).
//!
//! The arena costs `HEAP_BYTES` of `.bss` in every task that turns the feature on: the kernel
//! backs a root task's `.bss` page by page at load time. A task that needs more (a benchmark
//! moving multi-megabyte messages) adds up to [`MAX_REGIONS`] regions of its own RAM at run
//! time with [`add_region`] (e.g. from `root::ram`), so the arena stays small for every other
//! task. An allocation tries the arena first, then each region in the order added; a block
//! goes back to the heap whose range holds it. Allocation failure ends in Rust's
//! default allocation-error handler (a panic, hence the task's panic handler).

use crate::sys::{my_id, thread_switch};
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};
use kestrel_abi::ThreadId;
use linked_list_allocator::Heap;

/// Bytes in the heap arena (2 MiB).
pub const HEAP_BYTES: usize = 2 << 20;
/// Regions a task may add besides the arena ([`add_region`]).
pub const MAX_REGIONS: usize = 4;
/// The smallest region [`add_region`] takes (room for the allocator's own bookkeeping).
pub const MIN_REGION: usize = 4096;

/// Why [`add_region`] refused a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// [`MAX_REGIONS`] regions were added already.
    Full,
    /// Shorter than [`MIN_REGION`], not 16-byte aligned, or wrapping around the address space.
    BadRegion,
    /// The region overlaps the arena or a region added before.
    Overlaps,
    /// Called while this thread holds the heap lock (from inside an allocation).
    Busy,
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RegionError::Full => "the heap has all the regions it can take",
            RegionError::BadRegion => "a heap region must be 16-byte aligned and at least 4 KiB",
            RegionError::Overlaps => "the region overlaps the heap's memory",
            RegionError::Busy => "the heap is locked by this thread",
        })
    }
}

/// The arena's heap and the regions added at run time.
struct Heaps {
    arena: Heap,
    more: [Heap; MAX_REGIONS],
    added: usize,
}

impl Heaps {
    /// The arena, then the regions added.
    fn each(&mut self) -> impl Iterator<Item = &mut Heap> {
        core::iter::once(&mut self.arena).chain(self.more[..self.added].iter_mut())
    }

    fn holding(&mut self, p: *mut u8) -> Option<&mut Heap> {
        self.each().find(|h| h.bottom() <= p && p < h.top())
    }
}

#[repr(C, align(16))]
struct Arena(UnsafeCell<MaybeUninit<[u8; HEAP_BYTES]>>);

// SAFETY: the arena is only handed to `Heap::init`, once, under the allocator's lock;
// afterwards it is reached only through pointers the heap gives out.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new(MaybeUninit::uninit()));

/// The allocator: a first-fit heap behind a holder-donation lock.
pub struct KestrelHeap {
    /// Thread id of the lock holder, `ThreadId::NIL` (0) when free.
    owner: AtomicU32,
    heap: UnsafeCell<Heaps>,
}

// SAFETY: `heap` is only reached through a `HeapGuard`, which `lock` hands to one thread
// at a time (the lock word names it) and whose drop gives the lock back.
unsafe impl Sync for KestrelHeap {}

#[global_allocator]
static GLOBAL: KestrelHeap = KestrelHeap {
    owner: AtomicU32::new(ThreadId::NIL.0),
    heap: UnsafeCell::new(Heaps {
        arena: Heap::empty(),
        more: [const { Heap::empty() }; MAX_REGIONS],
        added: 0,
    }),
};

impl KestrelHeap {
    /// Takes the lock; `None` if the calling thread already holds it (re-entry would
    /// deadlock, so that allocation fails instead). Dropping the guard gives it back.
    fn lock(&self) -> Option<HeapGuard<'_>> {
        let me = my_id().0;
        loop {
            match self.owner.compare_exchange(
                ThreadId::NIL.0,
                me,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(holder) if holder == me => return None,
                // Run the holder (whatever its priority) until it gives the lock back.
                Err(holder) => thread_switch(ThreadId(holder)),
            }
        }
        let mut guard = HeapGuard { owner: self };
        let heap = &mut guard.arena;
        if heap.size() == 0 {
            // SAFETY: the arena is static, `HEAP_BYTES` long and used by nothing else; it is
            // handed to the heap exactly once (the heap is empty only before), under the lock.
            unsafe { heap.init(ARENA.0.get().cast::<u8>(), HEAP_BYTES) };
        }
        Some(guard)
    }
}

/// The heap lock, held: the only way to reach the [`Heaps`]; dropping it unlocks.
struct HeapGuard<'a> {
    owner: &'a KestrelHeap,
}

impl Deref for HeapGuard<'_> {
    type Target = Heaps;
    fn deref(&self) -> &Heaps {
        // SAFETY: the guard exists only while its thread holds the lock, so no other
        // reference to the heap exists but the ones borrowed from this guard.
        unsafe { &*self.owner.heap.get() }
    }
}

impl DerefMut for HeapGuard<'_> {
    fn deref_mut(&mut self) -> &mut Heaps {
        // SAFETY: as in `deref`; `&mut self` makes this borrow the guard's only one.
        unsafe { &mut *self.owner.heap.get() }
    }
}

impl Drop for HeapGuard<'_> {
    fn drop(&mut self) {
        self.owner.owner.store(ThreadId::NIL.0, Ordering::Release);
    }
}

// SAFETY: allocations come from the arena or an added region through `Heap`, which never
// hands out overlapping live blocks and honours the layout's size and alignment; the heaps'
// memory is disjoint (`add_region` checks), so a block goes back to the one heap holding it;
// `lock` serialises all access.
unsafe impl GlobalAlloc for KestrelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(mut heaps) = self.lock() else {
            return ptr::null_mut();
        };
        let block = heaps.each().find_map(|h| h.allocate_first_fit(layout).ok());
        block.map_or(ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let Some(p) = NonNull::new(p) else { return };
        // Re-entry (impossible short of a bug) leaks the block rather than deadlocking.
        let Some(mut heaps) = self.lock() else { return };
        if let Some(heap) = heaps.holding(p.as_ptr()) {
            // SAFETY: the caller passes a block `alloc` returned for this same `layout`, and
            // it came from this heap, the only one whose memory holds it.
            unsafe { heap.deallocate(p, layout) };
        }
    }
}

/// Adds `[start, start + len)` to the heap: allocations the arena cannot satisfy come from
/// there (for tasks that need more than [`HEAP_BYTES`]).
///
/// # Safety
/// The memory must be mapped read-write in this space for the rest of the task's life and
/// used by nothing else: from now on the allocator owns it.
pub unsafe fn add_region(start: *mut u8, len: usize) -> Result<(), RegionError> {
    let a = start as usize;
    if len < MIN_REGION || !a.is_multiple_of(16) || a.checked_add(len).is_none() {
        return Err(RegionError::BadRegion);
    }
    let mut heaps = GLOBAL.lock().ok_or(RegionError::Busy)?;
    if heaps.added == MAX_REGIONS {
        return Err(RegionError::Full);
    }
    let end = a + len;
    let overlaps = heaps
        .each()
        .any(|h| (h.bottom() as usize) < end && a < h.top() as usize);
    if overlaps {
        return Err(RegionError::Overlaps);
    }
    let k = heaps.added;
    // SAFETY: the caller gives mapped memory nobody else uses; it overlaps no heap's
    // memory (checked above), and this heap slot is empty (slots fill in order).
    unsafe { heaps.more[k].init(start, len) };
    heaps.added += 1;
    Ok(())
}

/// `(used, free)` bytes of the arena and the regions added.
pub fn usage() -> (usize, usize) {
    match GLOBAL.lock() {
        Some(mut heaps) => {
            let sums = heaps
                .each()
                .fold((0, 0), |(u, f), h| (u + h.used(), f + h.free()));
            sums
        }
        None => (0, HEAP_BYTES),
    }
}
