//! A Linux process's memory as the personality server keeps it: the ELF image (frames
//! from [`kestrel_user::loader`]), anonymous pages (stack, `brk` heap, `mmap` areas), each a
//! frame of RAM from the root task mapped in the server's own space too, so the server
//! reads and writes the program's memory through its own addresses.
//!
//! Invariant: a program address is backed only if it lies in the image or in one of the
//! regions (stack, heap up to the break, `mmap` areas); any other access is the program's
//! fault, reported and never served.

use kestrel_abi::{Fpage, Rights, PAGE_SIZE};
use kestrel_kcore::pagemap::PageMap;
use kestrel_user::loader::Loaded;
use kestrel_user::pager::{Frames, RootRam};
use kestrel_user::sys;

/// Top of the program's stack (below the UTCB pages at 0x7f00_0000).
pub const STACK_TOP: u32 = 0x7e00_0000;
/// Most stack the program may use.
pub const STACK_MAX: u32 = 8 << 20;
/// Where anonymous `mmap` areas go, upward.
pub const MMAP_BASE: u32 = 0x4000_0000;
pub const MMAP_END: u32 = 0x7000_0000;
/// Most heap (`brk`) past the image.
pub const BRK_MAX: u32 = 256 << 20;
/// Anonymous pages one program may hold (64 MiB).
const MAX_ANON: usize = 16384;
const MAX_AREAS: usize = 64;

const fn page_down(a: u32) -> u32 {
    a & !(PAGE_SIZE - 1)
}
pub const fn page_up(a: u32) -> Option<u32> {
    match a.checked_add(PAGE_SIZE - 1) {
        Some(x) => Some(page_down(x)),
        None => None,
    }
}

/// Why a program address cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Outside every region of the program (or a write to a read-only page).
    Outside,
    /// The server is out of RAM for the program.
    NoMemory,
}

/// The frames of every program's anonymous memory: RAM from the root task, and the
/// frames programs gave back, reused (zeroed) first. One pool serves all programs, so a
/// program that ends leaves its frames to the others. The free frames form a list through
/// their first word (0 ends it).
pub struct Pool {
    root: RootRam,
    free: u32,
}

impl Pool {
    pub const fn new(root: RootRam) -> Pool {
        Pool { root, free: 0 }
    }
}

impl Frames for Pool {
    fn alloc(&mut self) -> Option<u32> {
        if self.free == 0 {
            return self.root.alloc();
        }
        let va = self.free;
        // SAFETY: `va` is a page of RAM the root task granted to this space that came back
        // through `free` (its mappings in programs revoked first); only the pool uses it.
        unsafe {
            self.free = (va as *const u32).read();
            core::ptr::write_bytes(va as *mut u8, 0, PAGE_SIZE as usize);
        }
        Some(va)
    }

    fn free(&mut self, va: u32) {
        // SAFETY: as in `alloc`: the caller gives back a page of ours no program maps.
        unsafe { (va as *mut u32).write(self.free) };
        self.free = va;
    }
}

/// One program's memory map (what it may touch and the frames behind its anonymous pages).
pub struct Space {
    pub image: Loaded,
    pub brk_start: u32,
    pub brk: u32,
    /// `mmap` areas `(start, end)`, page aligned.
    areas: [(u32, u32); MAX_AREAS],
    mmap_next: u32,
    /// The frame of every anonymous page (a hash map: looked up on every fault and every
    /// page of a system call's buffer).
    anon: PageMap<MAX_ANON>,
}

impl Space {
    /// Builds a fresh `Space` at `at` in place (it is too large for the stack).
    ///
    /// # Safety
    /// `at` is valid for writes of a `Space`, aligned, and used by nothing else for the
    /// returned reference's life.
    pub unsafe fn init_at(at: *mut Space, image: Loaded, image_end: u32) -> &'static mut Space {
        let brk_start = page_up(image_end).unwrap_or(image_end);
        // SAFETY: the caller vouches for `at`. Every field is written before the reference
        // is made; the array of `(u32, u32)` and the `PageMap` are valid when zeroed.
        unsafe {
            core::ptr::addr_of_mut!((*at).areas).write_bytes(0, 1);
            core::ptr::addr_of_mut!((*at).anon).write_bytes(0, 1);
            core::ptr::addr_of_mut!((*at).image).write(image);
            core::ptr::addr_of_mut!((*at).brk_start).write(brk_start);
            core::ptr::addr_of_mut!((*at).brk).write(brk_start);
            core::ptr::addr_of_mut!((*at).mmap_next).write(MMAP_BASE);
            &mut *at
        }
    }

    fn in_anon_region(&self, va: u32) -> bool {
        let heap = self.brk_start..page_up(self.brk).unwrap_or(u32::MAX);
        let stack = STACK_TOP - STACK_MAX..STACK_TOP;
        heap.contains(&va)
            || stack.contains(&va)
            || self
                .areas
                .iter()
                .any(|&(s, e)| s != e && (s..e).contains(&va))
    }
}

/// A program's memory with the pool its anonymous pages come from.
pub struct Mem<'a> {
    pub space: &'a mut Space,
    pub pool: &'a mut Pool,
}

impl Mem<'_> {
    /// The server address of program page `va` and its rights, allocating an anonymous
    /// page on first use.
    pub fn resolve(&mut self, va: u32) -> Result<(u32, Rights), Fault> {
        let s = &mut *self.space;
        if let Some(r) = s.image.resolve(va) {
            return Ok(r);
        }
        if !s.in_anon_region(va) {
            return Err(Fault::Outside);
        }
        let page = page_down(va);
        if let Some(f) = s.anon.get(page) {
            return Ok((f, Rights::RW));
        }
        let f = self.pool.alloc().ok_or(Fault::NoMemory)?;
        if !s.anon.insert(page, f) {
            self.pool.free(f);
            return Err(Fault::NoMemory);
        }
        Ok((f, Rights::RW))
    }

    /// Runs `f` on each piece of `[va, va + len)` in the server's space (per page).
    fn pieces(
        &mut self,
        va: u32,
        len: u32,
        write: bool,
        mut f: impl FnMut(u32, usize, usize),
    ) -> Result<(), Fault> {
        va.checked_add(len).ok_or(Fault::Outside)?;
        let mut done = 0u32;
        while done < len {
            let a = va + done;
            let (frame, rights) = self.resolve(a)?;
            if write && !rights.contains(Rights::W) {
                return Err(Fault::Outside);
            }
            let off = a % PAGE_SIZE;
            let n = (PAGE_SIZE - off).min(len - done);
            f(frame + off, done as usize, n as usize);
            done += n;
        }
        Ok(())
    }

    /// Copies program memory at `va` into `buf`.
    pub fn read(&mut self, va: u32, buf: &mut [u8]) -> Result<(), Fault> {
        self.pieces(va, buf.len() as u32, false, |src, at, n| {
            // SAFETY: `src..src + n` lies in one page the server holds (image or anon
            // frame, granted by the root task and mapped in this space).
            let s = unsafe { core::slice::from_raw_parts(src as *const u8, n) };
            buf[at..at + n].copy_from_slice(s);
        })
    }

    /// Copies `buf` into program memory at `va` (writable pages only).
    pub fn write(&mut self, va: u32, buf: &[u8]) -> Result<(), Fault> {
        self.pieces(va, buf.len() as u32, true, |dst, at, n| {
            // SAFETY: as in `read`; the page is the program's and writable for it.
            let d = unsafe { core::slice::from_raw_parts_mut(dst as *mut u8, n) };
            d.copy_from_slice(&buf[at..at + n]);
        })
    }

    pub fn read_u32(&mut self, va: u32) -> Result<u32, Fault> {
        let mut b = [0u8; 4];
        self.read(va, &mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    /// Releases the anonymous pages in `[start, end)`: unmapped from the program (the
    /// server's own mapping stays), then reused.
    fn release(&mut self, start: u32, end: u32) {
        let pool = &mut *self.pool;
        self.space.anon.remove_where(
            |page| (start..end).contains(&page),
            |_, frame| {
                // Revoke the program's mapping, derived from ours; ours stays.
                let _ = sys::unmap(Fpage::page(frame, Rights::RWX), 0);
                pool.free(frame);
            },
        );
    }

    /// Gives every anonymous page back to the pool (the program has ended).
    pub fn release_all(&mut self) {
        self.release(0, u32::MAX);
    }

    /// `brk(addr)`: the new break, or the old one if `addr` is out of range (Linux).
    pub fn set_brk(&mut self, addr: u32) -> u32 {
        if addr < self.space.brk_start || addr - self.space.brk_start > BRK_MAX || addr >= MMAP_BASE
        {
            return self.space.brk;
        }
        let (old_end, new_end) = (page_up(self.space.brk), page_up(addr));
        if let (Some(o), Some(n)) = (old_end, new_end) {
            if n < o {
                self.release(n, o);
            }
        }
        self.space.brk = addr;
        self.space.brk
    }

    /// A new anonymous area of `len` bytes; its address.
    pub fn map_anon(&mut self, len: u32) -> Option<u32> {
        let len = page_up(len)?;
        let start = self.space.mmap_next;
        let end = start.checked_add(len)?;
        if end > MMAP_END || len == 0 {
            return None;
        }
        let slot = self.space.areas.iter().position(|a| a.0 == a.1)?;
        self.space.areas[slot] = (start, end);
        self.space.mmap_next = end;
        Some(start)
    }

    /// Unmaps `[start, start + len)` from the `mmap` areas (trimming or splitting them).
    pub fn unmap(&mut self, start: u32, len: u32) -> bool {
        let Some(end) = page_up(len).and_then(|l| start.checked_add(l)) else {
            return false;
        };
        if !start.is_multiple_of(PAGE_SIZE) {
            return false;
        }
        for i in 0..MAX_AREAS {
            let (s, e) = self.space.areas[i];
            if s == e || e <= start || s >= end {
                continue;
            }
            if start <= s && end >= e {
                self.space.areas[i] = (0, 0);
            } else if start <= s {
                self.space.areas[i].0 = end;
            } else if end >= e {
                self.space.areas[i].1 = start;
            } else {
                let Some(free) = self.space.areas.iter().position(|a| a.0 == a.1) else {
                    return false;
                };
                self.space.areas[i].1 = start;
                self.space.areas[free] = (end, e);
            }
        }
        self.release(start, end);
        true
    }
}
