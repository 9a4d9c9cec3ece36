//! A Linux process's memory as the personality server keeps it: the ELF image (frames
//! from [`kestrel_user::loader`]), anonymous pages (stack, `brk` heap, `mmap` areas), each a
//! frame of RAM from the root task mapped in the server's own space too, so the server
//! reads and writes the program's memory through its own addresses.
//!
//! Invariant: a program address is backed only if it lies in the image or in one of the
//! regions (stack, heap up to the break, `mmap` areas); any other access is the program's
//! fault, reported and never served.

use kestrel_abi::{Fpage, Rights, PAGE_SIZE};
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

pub struct Space {
    pub image: Loaded,
    pub brk_start: u32,
    pub brk: u32,
    /// `mmap` areas `(start, end)`, page aligned.
    areas: [(u32, u32); MAX_AREAS],
    mmap_next: u32,
    /// `(page, frame)` of every anonymous page, 0 page = free slot.
    anon: [(u32, u32); MAX_ANON],
    pub frames: RootRam,
}

impl Space {
    pub fn new(image: Loaded, image_end: u32, frames: RootRam) -> Space {
        let brk_start = page_up(image_end).unwrap_or(image_end);
        Space {
            image,
            brk_start,
            brk: brk_start,
            areas: [(0, 0); MAX_AREAS],
            mmap_next: MMAP_BASE,
            anon: [(0, 0); MAX_ANON],
            frames,
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

    /// The server address of program page `va` and its rights, allocating an anonymous
    /// page on first use.
    pub fn resolve(&mut self, va: u32) -> Result<(u32, Rights), Fault> {
        if let Some(r) = self.image.resolve(va) {
            return Ok(r);
        }
        if !self.in_anon_region(va) {
            return Err(Fault::Outside);
        }
        let page = page_down(va);
        if let Some(&(_, f)) = self.anon.iter().find(|a| a.0 == page) {
            return Ok((f, Rights::RW));
        }
        let slot = self
            .anon
            .iter()
            .position(|a| a.0 == 0)
            .ok_or(Fault::NoMemory)?;
        let f = self.frames.alloc().ok_or(Fault::NoMemory)?;
        self.anon[slot] = (page, f);
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
        for a in self.anon.iter_mut() {
            if a.0 != 0 && (start..end).contains(&a.0) {
                // Revoke the program's mapping, derived from ours; ours stays.
                let _ = sys::unmap(Fpage::page(a.1, Rights::RWX), 0);
                self.frames.free(a.1);
                *a = (0, 0);
            }
        }
    }

    /// `brk(addr)`: the new break, or the old one if `addr` is out of range (Linux).
    pub fn set_brk(&mut self, addr: u32) -> u32 {
        if addr < self.brk_start || addr - self.brk_start > BRK_MAX || addr >= MMAP_BASE {
            return self.brk;
        }
        let (old_end, new_end) = (page_up(self.brk), page_up(addr));
        if let (Some(o), Some(n)) = (old_end, new_end) {
            if n < o {
                self.release(n, o);
            }
        }
        self.brk = addr;
        self.brk
    }

    /// A new anonymous area of `len` bytes; its address.
    pub fn map_anon(&mut self, len: u32) -> Option<u32> {
        let len = page_up(len)?;
        let start = self.mmap_next;
        let end = start.checked_add(len)?;
        if end > MMAP_END || len == 0 {
            return None;
        }
        let slot = self.areas.iter().position(|a| a.0 == a.1)?;
        self.areas[slot] = (start, end);
        self.mmap_next = end;
        Some(start)
    }

    /// Unmaps `[start, start + len)` from the `mmap` areas (trimming or splitting them).
    pub fn unmap(&mut self, start: u32, len: u32) -> bool {
        let Some(end) = page_up(len).and_then(|l| start.checked_add(l)) else {
            return false;
        };
        if start % PAGE_SIZE != 0 {
            return false;
        }
        for i in 0..MAX_AREAS {
            let (s, e) = self.areas[i];
            if s == e || e <= start || s >= end {
                continue;
            }
            if start <= s && end >= e {
                self.areas[i] = (0, 0);
            } else if start <= s {
                self.areas[i].0 = end;
            } else if end >= e {
                self.areas[i].1 = start;
            } else {
                let Some(free) = self.areas.iter().position(|a| a.0 == a.1) else {
                    return false;
                };
                self.areas[i].1 = start;
                self.areas[free] = (end, e);
            }
        }
        self.release(start, end);
        true
    }
}
