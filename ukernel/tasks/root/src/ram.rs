//! The root task's physical memory: the free RAM the kernel reports, handed out as
//! contiguous, aligned blocks by `kestrel_kcore::ramalloc` (host-tested there), and
//! reached (for zeroing, and as the source of grants) through the root's sigma0 window.

use kestrel_abi::{kinfo, PAGE_SIZE};
use kestrel_kcore::ramalloc::RamAllocator;
use kestrel_user::sys::kernel_info;

pub struct Ram {
    alloc: RamAllocator,
    /// Base of the root's sigma0 window: physical `p` is at `window + p`.
    window: u32,
}

impl Ram {
    pub fn from_kernel() -> Option<Ram> {
        let [first, end, window, _] = kernel_info(kinfo::MEMORY).ok()?;
        Some(Ram {
            alloc: RamAllocator::new(first.next_multiple_of(PAGE_SIZE), end),
            window,
        })
    }

    pub fn window(&self) -> u32 {
        self.window
    }

    /// `size` bytes (page multiple) aligned to `2^align_log2`; returns the physical address.
    pub fn alloc(&mut self, size: u32, align_log2: u32) -> Option<u32> {
        self.alloc.alloc(size, align_log2)
    }

    /// Zeroes `[phys, phys + size)` through the window; returns the window address.
    pub fn zero(&mut self, phys: u32, size: u32) -> u32 {
        let va = self.window + phys;
        // SAFETY: the block was just taken from the free RAM the kernel reported, which
        // the root space reaches through its sigma0 window (mapped on first touch); no
        // one else has it yet.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, size as usize) };
        va
    }

    /// [`Ram::alloc`] and [`Ram::zero`]: the window address of a zeroed block.
    pub fn alloc_zeroed(&mut self, size: u32, align_log2: u32) -> Option<u32> {
        let phys = self.alloc(size, align_log2)?;
        Some(self.zero(phys, size))
    }
}
