//! The root task's physical memory: the free RAM the kernel reports, handed out as
//! contiguous, aligned blocks by `kestrel_kcore::ramalloc` (host-tested there), and
//! reached (for zeroing, and as the source of grants) through the root's sigma0 window.

use kestrel_abi::{kinfo, unmapflags, Fpage, Rights, PAGE_SIZE};
use kestrel_kcore::ramalloc::RamAllocator;
use kestrel_user::sys::{self, kernel_info};

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

    /// Drops the root's own mappings of the window block `[va, va + size)` (page aligned):
    /// the ones zeroing it created and a grant did not take away (a grant that failed, a
    /// piece it did not reach, a request refused after zeroing). The kernel recreates them
    /// on the next touch (sigma0), so nothing is lost but mapping-database nodes, which the
    /// root would otherwise keep for every block it gave out unsuccessfully.
    pub fn release(&self, va: u32, size: u32) {
        let end = va.wrapping_add(size);
        let mut a = va;
        while a != end {
            // The largest naturally aligned fpage at `a` that stays inside the block.
            let log2 = a.trailing_zeros().min(end.wrapping_sub(a).ilog2()).min(31);
            if let Some(f) = Fpage::new(a, log2, Rights::RWX) {
                let _ = sys::unmap(f, unmapflags::FLUSH_OWN);
            }
            a = a.wrapping_add(1 << log2);
        }
    }

    /// [`Ram::alloc`] and [`Ram::zero`]: the window address of a zeroed block.
    pub fn alloc_zeroed(&mut self, size: u32, align_log2: u32) -> Option<u32> {
        let phys = self.alloc(size, align_log2)?;
        Some(self.zero(phys, size))
    }
}
