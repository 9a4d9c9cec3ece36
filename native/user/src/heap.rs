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
//! backs a root task's `.bss` page by page at load time. A task that needs more gives the
//! heap one more region of its own memory (RAM from the root task) with [`add_region`];
//! allocations then come from that region first and from the arena when it is full.
//! Allocation failure ends in Rust's default allocation-error handler (a panic, hence the
//! task's panic handler).

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
    heap: UnsafeCell<Heap>,
    /// The region [`add_region`] gave (empty until then).
    more: UnsafeCell<Heap>,
}

// SAFETY: `heap` and `more` are only reached through a `HeapGuard`, which `lock` hands to
// one thread at a time (the lock word names it) and whose drop gives the lock back.
unsafe impl Sync for KestrelHeap {}

#[global_allocator]
static GLOBAL: KestrelHeap = KestrelHeap {
    owner: AtomicU32::new(ThreadId::NIL.0),
    heap: UnsafeCell::new(Heap::empty()),
    more: UnsafeCell::new(Heap::empty()),
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
        let heap = &mut *guard;
        if heap.size() == 0 {
            // SAFETY: the arena is static, `HEAP_BYTES` long and used by nothing else; it is
            // handed to the heap exactly once (the heap is empty only before), under the lock.
            unsafe { heap.init(ARENA.0.get().cast::<u8>(), HEAP_BYTES) };
        }
        Some(guard)
    }
}

/// The heap lock, held: the only way to reach the [`Heap`]; dropping it unlocks.
struct HeapGuard<'a> {
    owner: &'a KestrelHeap,
}

impl Deref for HeapGuard<'_> {
    type Target = Heap;
    fn deref(&self) -> &Heap {
        // SAFETY: the guard exists only while its thread holds the lock, so no other
        // reference to the heap exists but the ones borrowed from this guard.
        unsafe { &*self.owner.heap.get() }
    }
}

impl DerefMut for HeapGuard<'_> {
    fn deref_mut(&mut self) -> &mut Heap {
        // SAFETY: as in `deref`; `&mut self` makes this borrow the guard's only one.
        unsafe { &mut *self.owner.heap.get() }
    }
}

impl HeapGuard<'_> {
    /// The added region's heap.
    fn more(&mut self) -> &mut Heap {
        // SAFETY: as in `deref_mut`: the guard holds the lock, and `&mut self` makes this
        // borrow its only one.
        unsafe { &mut *self.owner.more.get() }
    }
}

impl Drop for HeapGuard<'_> {
    fn drop(&mut self) {
        self.owner.owner.store(ThreadId::NIL.0, Ordering::Release);
    }
}

// SAFETY: allocations come from the arena through `Heap`, which never hands out overlapping
// live blocks and honours the layout's size and alignment; `lock` serialises all access.
unsafe impl GlobalAlloc for KestrelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(mut heap) = self.lock() else {
            return ptr::null_mut();
        };
        let more = heap.more().allocate_first_fit(layout);
        more.or_else(|()| heap.allocate_first_fit(layout))
            .map_or(ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let Some(p) = NonNull::new(p) else { return };
        // Re-entry (impossible short of a bug) leaks the block rather than deadlocking.
        let Some(mut heap) = self.lock() else { return };
        let more = heap.more();
        if (more.bottom()..more.top()).contains(&p.as_ptr()) {
            // SAFETY: the caller passes a block `alloc` returned for this same `layout`,
            // and it lies in the added region, so that heap gave it.
            unsafe { more.deallocate(p, layout) };
        } else {
            // SAFETY: as above; outside the added region, the arena's heap gave it.
            unsafe { heap.deallocate(p, layout) };
        }
    }
}

/// `(used, free)` bytes of the arena and the added region.
pub fn usage() -> (usize, usize) {
    match GLOBAL.lock() {
        Some(mut heap) => {
            let (u, f) = (heap.used(), heap.free());
            let more = heap.more();
            (u + more.used(), f + more.free())
        }
        None => (0, HEAP_BYTES),
    }
}

/// Gives the heap `len` more bytes at `start` (once: `false` if it already has a region,
/// or if the calling thread holds the heap's lock).
///
/// # Safety
///
/// `[start, start + len)` is memory of this space, mapped read-write, used by nothing else
/// for as long as the task lives (RAM the root task granted, say), and `len` is at least a
/// few dozen bytes.
pub unsafe fn add_region(start: *mut u8, len: usize) -> bool {
    let Some(mut heap) = GLOBAL.lock() else {
        return false;
    };
    let more = heap.more();
    if more.size() != 0 {
        return false;
    }
    // SAFETY: the caller's promise: the region is ours, mapped and unused, for good.
    unsafe { more.init(start, len) };
    true
}
