//! The root task's physical memory: the free RAM the kernel reports, handed out as
//! contiguous, aligned blocks (a program image, a VM's 16 MiB-aligned guest RAM, a
//! program's 64 KiB chunk). A bump pointer with a short list of holes: the gap an
//! aligned block leaves below itself is kept for later small blocks. Memory is not taken
//! back (programs run until the machine stops).

use kestrel_abi::{kinfo, PAGE_SIZE};
use kestrel_user::sys::kernel_info;

pub struct Ram {
    next: u32,
    end: u32,
    /// Base of the root's sigma0 window: physical `p` is at `window + p`.
    window: u32,
    holes: heapless::Vec<(u32, u32), 16>,
}

impl Ram {
    pub fn from_kernel() -> Option<Ram> {
        let [first, end, window, _] = kernel_info(kinfo::MEMORY).ok()?;
        Some(Ram { next: first.next_multiple_of(PAGE_SIZE), end, window, holes: heapless::Vec::new() })
    }

    pub fn window(&self) -> u32 {
        self.window
    }

    /// `size` bytes (page multiple) aligned to `2^align_log2`; returns the physical address.
    pub fn alloc(&mut self, size: u32, align_log2: u32) -> Option<u32> {
        let align = 1u32.checked_shl(align_log2)?;
        for i in 0..self.holes.len() {
            let (lo, hi) = self.holes[i];
            let start = lo.checked_next_multiple_of(align)?;
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

    fn keep_hole(&mut self, lo: u32, hi: u32) {
        if hi > lo {
            // A full list forgets the hole: the memory is lost, nothing breaks.
            let _ = self.holes.push((lo, hi));
        }
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
