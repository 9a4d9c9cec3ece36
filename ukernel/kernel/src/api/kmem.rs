//! The kernel's own page pool: leaf page tables and UTCB pages.
//!
//! A contiguous physical range reserved at boot, handed out as zeroed 4 KiB frames
//! through a free list threaded through the free frames themselves. RAM is mapped
//! 1:1 for the kernel, so a frame's physical address is also its kernel address.

use kestrel_abi::PAGE_SIZE;

pub struct FramePool {
    next: u32,
    end: u32,
    free_head: u32,
    pub in_use: u32,
}

impl FramePool {
    pub const fn empty() -> FramePool {
        FramePool {
            next: 0,
            end: 0,
            free_head: 0,
            in_use: 0,
        }
    }

    pub fn init(&mut self, start: u32, end: u32) {
        self.next = start.next_multiple_of(PAGE_SIZE);
        self.end = end & !(PAGE_SIZE - 1);
        self.free_head = 0;
        self.in_use = 0;
    }

    /// A zeroed frame, or `None` when the pool is exhausted.
    pub fn alloc(&mut self) -> Option<u32> {
        let f = if self.free_head != 0 {
            let f = self.free_head;
            // SAFETY: free frames are kernel-owned pool memory whose first word links the
            // free list (written by `free`).
            self.free_head = unsafe { (f as *const u32).read() };
            f
        } else if self.next < self.end {
            let f = self.next;
            self.next += PAGE_SIZE;
            f
        } else {
            return None;
        };
        // SAFETY: `f` is a pool frame no longer on the free list; nobody else refers to it.
        unsafe { core::ptr::write_bytes(f as *mut u8, 0, PAGE_SIZE as usize) };
        self.in_use += 1;
        Some(f)
    }

    pub fn free(&mut self, f: u32) {
        // SAFETY: the caller gives back a frame obtained from `alloc` that nothing
        // references any more; we reuse its first word as the free-list link.
        unsafe { (f as *mut u32).write(self.free_head) };
        self.free_head = f;
        self.in_use -= 1;
    }

    /// Frames still available.
    pub fn available(&self) -> u32 {
        (self.end - self.next) / PAGE_SIZE
    }
}
