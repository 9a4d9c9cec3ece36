//! Loading an ELF program into frames of the loader's own space, to be paged into the
//! program's space afterwards (the root task loads every program it starts this way).
//!
//! The plan comes from `kestrel_kcore::elf::load_plan` (every header checked, see there).
//! Each segment gets one physically and virtually contiguous run of zeroed frames from
//! the caller's allocator, and its file bytes are copied in; a page two segments share at
//! their boundary belongs to the first and gets the union of their rights (as the
//! kernel does for the root task). [`Loaded::resolve`] then answers page faults.

use kestrel_abi::{Rights, PAGE_SIZE, USER_BASE, USER_END};
use kestrel_kcore::elf::{self, ElfError, MAX_SEGMENTS};

/// Why a program cannot be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The ELF image is not loadable.
    Elf(ElfError),
    /// Out of memory for the program's image.
    NoMemory,
    /// A segment's last page lies in a page of an earlier segment (segments out of order).
    Layout,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoadError::Elf(e) => write!(f, "bad ELF image: {e}"),
            LoadError::NoMemory => f.write_str("out of memory for its image"),
            LoadError::Layout => f.write_str("ELF segments are not in address order"),
        }
    }
}

/// One segment's pages: `pages` pages from virtual `first` in the program, backed by
/// the frames at `frames` in the loader's space.
#[derive(Clone, Copy, Debug)]
struct Run {
    first: u32,
    pages: u32,
    frames: u32,
    rights: Rights,
}

/// A loaded program: its entry point and where each of its pages is.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub entry: u32,
    runs: heapless::Vec<Run, MAX_SEGMENTS>,
}

impl Loaded {
    /// The loader-space frame and the rights for program page `va`, if it is part of the
    /// image.
    pub fn resolve(&self, va: u32) -> Option<(u32, Rights)> {
        let page = va & !(PAGE_SIZE - 1);
        self.runs.iter().find_map(|r| {
            let i = page.wrapping_sub(r.first) / PAGE_SIZE;
            (page >= r.first && i < r.pages).then(|| (r.frames + i * PAGE_SIZE, r.rights))
        })
    }

    /// [`Loaded::resolve`] for the whole `LARGE_PAGE` block around `va`, when one run of
    /// the image holds all of it in a block of frames aligned alike: the block's address,
    /// its frames and rights (a pager maps it in one go, and the kernel with one large TLB
    /// entry).
    pub fn resolve_block(&self, va: u32) -> Option<(u32, u32, Rights)> {
        let base = va & !(LARGE_PAGE - 1);
        self.runs.iter().find_map(|r| {
            let end = r.first + r.pages * PAGE_SIZE;
            let frames = r.frames.wrapping_add(base.wrapping_sub(r.first));
            (base >= r.first && base + LARGE_PAGE <= end && frames % LARGE_PAGE == 0)
                .then_some((base, frames, r.rights))
        })
    }

    /// Bytes of frames the image occupies.
    pub fn bytes(&self) -> u32 {
        self.runs.iter().map(|r| r.pages * PAGE_SIZE).sum()
    }
}

/// The block the kernel's large native TLB entries cover.
pub const LARGE_PAGE: u32 = 64 << 10;

/// Where in a block of `LARGE_PAGE`-aligned memory the pages for `va` go so that they lie at
/// the same offset in a 64 KiB block as `va` (for [`load`]'s `alloc`: take that many bytes
/// more, aligned to `LARGE_PAGE`, and start this far in).
pub const fn congruent(va: u32) -> u32 {
    va & (LARGE_PAGE - 1)
}

/// Loads `image`: `alloc(bytes, va)` returns the loader-space address of that many bytes of
/// zeroed, contiguous, page-aligned memory for the pages from `va` on. Memory at the same
/// offset in a 64 KiB block as `va` ([`congruent`]) lets the kernel map the image's full
/// blocks with 64 KiB TLB entries.
pub fn load(
    image: &[u8],
    mut alloc: impl FnMut(u32, u32) -> Option<u32>,
) -> Result<Loaded, LoadError> {
    let plan = elf::load_plan(image, USER_BASE, USER_END).map_err(LoadError::Elf)?;
    let mut loaded = Loaded {
        entry: plan.entry,
        runs: heapless::Vec::new(),
    };
    for seg in plan.segments.iter() {
        let first = seg.vaddr & !(PAGE_SIZE - 1);
        let last = (seg.end() - 1) & !(PAGE_SIZE - 1);
        let mut own_first = first;
        if let Some(r) = loaded
            .runs
            .iter_mut()
            .find(|r| first >= r.first && first < r.first + r.pages * PAGE_SIZE)
        {
            r.rights = Rights(r.rights.0 | seg.rights.0);
            own_first = first + PAGE_SIZE;
        }
        if own_first <= last {
            if loaded.resolve(last).is_some() {
                return Err(LoadError::Layout);
            }
            let pages = (last - own_first) / PAGE_SIZE + 1;
            let frames = alloc(pages * PAGE_SIZE, own_first).ok_or(LoadError::NoMemory)?;
            let run = Run {
                first: own_first,
                pages,
                frames,
                rights: seg.rights,
            };
            loaded.runs.push(run).map_err(|_| LoadError::Layout)?;
        }
        // Copy the file bytes page by page (a segment may start in a shared page).
        let mut va = seg.vaddr;
        let end = seg.vaddr + seg.filesz;
        while va < end {
            let chunk = (PAGE_SIZE - (va & (PAGE_SIZE - 1))).min(end - va);
            let (frame, _) = loaded.resolve(va).ok_or(LoadError::Layout)?;
            let off = (seg.file_offset + (va - seg.vaddr)) as usize;
            let src = &image[off..off + chunk as usize];
            // SAFETY: `frame` is a page of the loader's own memory from `alloc` (or from an
            // earlier segment's run), and `[va % PAGE_SIZE, + chunk)` stays inside it; the
            // source range was bounds-checked by `load_plan`.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    (frame + (va & (PAGE_SIZE - 1))) as *mut u8,
                    chunk as usize,
                )
            };
            va += chunk;
        }
    }
    Ok(loaded)
}
