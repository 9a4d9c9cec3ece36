//! Building blocks for pagers, shared by the root task, ktest and the demo (each had its
//! own copy before):
//!
//! - [`Frames`]: where zeroed 4 KiB frames come from: the root task's sigma0 window
//!   ([`crate::mem::FrameAllocator`]) or, for a program the root task started, RAM asked
//!   from the root task ([`RootRam`]);
//! - [`image`] and [`share_image`]: the policy "child spaces run functions of this
//!   binary": a fault in the pager's own image is answered with that page, code RX and
//!   the rest RW;
//! - [`PrivatePages`]: a fresh frame per (owner, page), looked up or allocated on a
//!   fault and released per owner (stacks, heaps).
//!
//! The loop itself is [`crate::mem::pager_loop`].

use crate::ipc::Msg;
use crate::mem::{map_reply, FrameAllocator, PageFault};
use kestrel_abi::{Rights, PAGE_SIZE};

/// A source of zeroed 4 KiB frames, named by their address in the pager's own space.
pub trait Frames {
    /// A zeroed frame.
    fn alloc(&mut self) -> Option<u32>;
    /// Gives a frame back (its mappings elsewhere must be revoked first).
    fn free(&mut self, va: u32);
}

impl Frames for FrameAllocator {
    fn alloc(&mut self) -> Option<u32> {
        FrameAllocator::alloc(self)
    }
    fn free(&mut self, va: u32) {
        FrameAllocator::free(self, va)
    }
}

/// Frames for a program that is not the root task: blocks of [`RootRam::CHUNK`] bytes
/// asked from the root task ([`crate::root::ram`]) into the virtual range
/// `[next, end)` of this space, handed out page by page, with a small free list.
pub struct RootRam {
    next: u32,
    end: u32,
    /// End of the block received last; `next..chunk_end` is still unused.
    chunk_end: u32,
    free: [u32; 32],
    nfree: usize,
}

impl RootRam {
    /// Bytes asked from the root task at once.
    pub const CHUNK: u32 = 64 << 10;

    /// Frames will live in `[base, end)` of this space (CHUNK aligned, otherwise unused).
    pub const fn new(base: u32, end: u32) -> RootRam {
        RootRam {
            next: base,
            end,
            chunk_end: base,
            free: [0; 32],
            nfree: 0,
        }
    }
}

impl Frames for RootRam {
    fn alloc(&mut self) -> Option<u32> {
        if self.nfree > 0 {
            self.nfree -= 1;
            let va = self.free[self.nfree];
            // SAFETY: `va` is a page of RAM the root task granted to this space and that
            // this allocator owns again (freed after its other mappings were revoked).
            unsafe { core::ptr::write_bytes(va as *mut u8, 0, PAGE_SIZE as usize) };
            return Some(va);
        }
        if self.next == self.chunk_end {
            if self.chunk_end.checked_add(Self::CHUNK)? > self.end {
                return None;
            }
            crate::root::ram(self.chunk_end, Self::CHUNK, Self::CHUNK.trailing_zeros()).ok()?;
            self.chunk_end += Self::CHUNK;
        }
        let va = self.next;
        self.next += PAGE_SIZE;
        // The root task hands out zeroed RAM.
        Some(va)
    }

    fn free(&mut self, va: u32) {
        if self.nfree < self.free.len() {
            self.free[self.nfree] = va;
            self.nfree += 1;
        }
    }
}

extern "C" {
    /// First byte of this task's image (`user.ld`).
    static __image_start: u8;
    /// End of the code, page aligned (`user.ld`).
    static __text_end: u8;
    /// One past the image (`user.ld`), page aligned.
    static __image_end: u8;
}

/// This task's image bounds: `(start, text_end, end)`.
pub fn image() -> (u32, u32, u32) {
    (
        &raw const __image_start as u32,
        &raw const __text_end as u32,
        &raw const __image_end as u32,
    )
}

/// The reply sharing this task's own image page with a faulting child space: code RX,
/// everything else RW. `None` if the fault is outside the image or asks for an access
/// the page does not allow (it would only fault again).
pub fn share_image(f: &PageFault) -> Option<Msg> {
    let page = f.addr & !(PAGE_SIZE - 1);
    let (start, text_end, end) = image();
    if !(start..end).contains(&page) {
        return None;
    }
    let rights = if page < text_end {
        Rights::RX
    } else {
        Rights::RW
    };
    if !rights.contains(f.access) {
        return None;
    }
    // SAFETY: the page belongs to our own image; touching it makes sure it is mapped
    // in our space (the source of the map item), and reading one byte changes nothing.
    unsafe { (page as *const u8).read_volatile() };
    Some(map_reply(f.addr, page, rights))
}

/// Private pages: a frame per `(owner, page)`, `owner != 0` (e.g. thread number + 1).
pub struct PrivatePages<const N: usize> {
    /// `(owner, page, frame)`; owner 0 marks a free record.
    records: [(u32, u32, u32); N],
}

impl<const N: usize> PrivatePages<N> {
    pub const fn new() -> Self {
        PrivatePages {
            records: [(0, 0, 0); N],
        }
    }

    /// The frame behind `page` of `owner`, allocated from `frames` on first use.
    pub fn get_or_alloc(&mut self, owner: u32, page: u32, frames: &mut impl Frames) -> Option<u32> {
        let page = page & !(PAGE_SIZE - 1);
        if let Some(r) = self.records.iter().find(|r| r.0 == owner && r.1 == page) {
            return Some(r.2);
        }
        let free = self.records.iter().position(|r| r.0 == 0)?;
        let frame = frames.alloc()?;
        self.records[free] = (owner, page, frame);
        Some(frame)
    }

    /// Pages held, all owners together.
    pub fn len(&self) -> usize {
        self.records.iter().filter(|r| r.0 != 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases every page of `owner`: `revoke(frame)` must remove the frame's mappings
    /// elsewhere; a frame it fails on stays recorded (and is not reused). Returns whether
    /// all were released.
    pub fn forget(
        &mut self,
        owner: u32,
        frames: &mut impl Frames,
        mut revoke: impl FnMut(u32) -> bool,
    ) -> bool {
        let mut all = true;
        for r in self.records.iter_mut().filter(|r| r.0 == owner) {
            if revoke(r.2) {
                frames.free(r.2);
                *r = (0, 0, 0);
            } else {
                all = false;
            }
        }
        all
    }
}

impl<const N: usize> Default for PrivatePages<N> {
    fn default() -> Self {
        Self::new()
    }
}
