//! The small in-memory file system of Linux-personality programs: flat names, regular
//! files only, data in RAM pages from the root task. It outlives each program, so a later
//! program (or the user, from the listing printed at exit) can read what one wrote.

use kestrel_abi::PAGE_SIZE;
use kestrel_user::pager::{Frames, RootRam};

pub const MAX_FILES: usize = 16;
const NAME_LEN: usize = 64;
/// Largest file: 1 MiB.
const FILE_PAGES: usize = 256;
pub const MAX_FDS: usize = 32;
/// Programs that may run at once, each with descriptors of its own.
pub const MAX_OWNERS: usize = crate::MAX_PROGRAMS;

/// Linux errno values used here.
pub mod errno {
    pub const ENOENT: u32 = 2;
    pub const EBADF: u32 = 9;
    pub const ENOMEM: u32 = 12;
    pub const EFAULT: u32 = 14;
    pub const EEXIST: u32 = 17;
    pub const EISDIR: u32 = 21;
    pub const EINVAL: u32 = 22;
    pub const EMFILE: u32 = 24;
    pub const ENOTTY: u32 = 25;
    pub const EFBIG: u32 = 27;
    pub const ENOSPC: u32 = 28;
    pub const ESPIPE: u32 = 29;
    pub const ENAMETOOLONG: u32 = 36;
    pub const ENOSYS: u32 = 38;
}
use errno::*;

/// Linux/PowerPC open flags.
pub mod oflag {
    pub const ACCMODE: u32 = 3;
    pub const WRONLY: u32 = 1;
    pub const CREAT: u32 = 0o100;
    pub const EXCL: u32 = 0o200;
    pub const TRUNC: u32 = 0o1000;
    pub const APPEND: u32 = 0o2000;
    pub const DIRECTORY: u32 = 0o40000;
}

pub struct File {
    name: [u8; NAME_LEN],
    name_len: usize,
    pub len: u32,
    pages: [u32; FILE_PAGES],
    /// Open descriptors; an unlinked file lives until the last is closed.
    opens: u32,
    linked: bool,
}

#[derive(Clone, Copy)]
pub struct Fd {
    pub file: usize,
    pub pos: u32,
    pub flags: u32,
}

pub struct Fs {
    files: [Option<File>; MAX_FILES],
    /// Each program's descriptors 3 and up (0..2 are the console), by program slot.
    fds: [[Option<Fd>; MAX_FDS]; MAX_OWNERS],
    /// The program slot whose descriptors the calls name (set before each call).
    pub owner: usize,
    pub frames: RootRam,
}

/// A path as the file system names it: without leading "/" or "./".
fn normalize(path: &[u8]) -> &[u8] {
    let mut p = path;
    loop {
        if let Some(r) = p.strip_prefix(b"./") {
            p = r;
        } else if let Some(r) = p.strip_prefix(b"/") {
            p = r;
        } else {
            return p;
        }
    }
}

impl Fs {
    pub const fn new(frames: RootRam) -> Fs {
        Fs {
            files: [const { None }; MAX_FILES],
            fds: [[None; MAX_FDS]; MAX_OWNERS],
            owner: 0,
            frames,
        }
    }

    fn lookup(&self, name: &[u8]) -> Option<usize> {
        self.files.iter().position(|f| {
            f.as_ref()
                .is_some_and(|f| f.linked && &f.name[..f.name_len] == name)
        })
    }

    pub fn fd(&self, fd: u32) -> Result<Fd, u32> {
        let i = (fd as usize).checked_sub(3).ok_or(EBADF)?;
        self.fds[self.owner].get(i).copied().flatten().ok_or(EBADF)
    }

    fn set_pos(&mut self, fd: u32, pos: u32) {
        if let Some(Some(d)) = self.fds[self.owner].get_mut(fd as usize - 3) {
            d.pos = pos;
        }
    }

    pub fn open(&mut self, path: &[u8], flags: u32) -> Result<u32, u32> {
        let name = normalize(path);
        if name.is_empty() || flags & oflag::DIRECTORY != 0 {
            return Err(if name.is_empty() { EISDIR } else { ENOENT });
        }
        if name.len() > NAME_LEN {
            return Err(ENAMETOOLONG);
        }
        let slot = self.fds[self.owner]
            .iter()
            .position(|d| d.is_none())
            .ok_or(EMFILE)?;
        let file = match self.lookup(name) {
            Some(_) if flags & oflag::CREAT != 0 && flags & oflag::EXCL != 0 => return Err(EEXIST),
            Some(i) => i,
            None if flags & oflag::CREAT == 0 => return Err(ENOENT),
            None => {
                let i = self.files.iter().position(|f| f.is_none()).ok_or(ENOSPC)?;
                let mut f = File {
                    name: [0; NAME_LEN],
                    name_len: name.len(),
                    len: 0,
                    pages: [0; FILE_PAGES],
                    opens: 0,
                    linked: true,
                };
                f.name[..name.len()].copy_from_slice(name);
                self.files[i] = Some(f);
                i
            }
        };
        let writable = flags & oflag::ACCMODE != 0;
        if flags & oflag::TRUNC != 0 && writable {
            self.truncate(file);
        }
        if let Some(f) = self.files[file].as_mut() {
            f.opens += 1;
        }
        self.fds[self.owner][slot] = Some(Fd {
            file,
            pos: 0,
            flags,
        });
        Ok(slot as u32 + 3)
    }

    fn truncate(&mut self, file: usize) {
        let Some(f) = self.files[file].as_mut() else {
            return;
        };
        for p in f.pages.iter_mut().filter(|p| **p != 0) {
            self.frames.free(*p);
            *p = 0;
        }
        f.len = 0;
    }

    fn drop_if_unused(&mut self, file: usize) {
        if self.files[file]
            .as_ref()
            .is_some_and(|f| !f.linked && f.opens == 0)
        {
            self.truncate(file);
            self.files[file] = None;
        }
    }

    pub fn close(&mut self, fd: u32) -> Result<(), u32> {
        let d = self.fd(fd)?;
        self.fds[self.owner][fd as usize - 3] = None;
        if let Some(f) = self.files[d.file].as_mut() {
            f.opens -= 1;
        }
        self.drop_if_unused(d.file);
        Ok(())
    }

    pub fn unlink(&mut self, path: &[u8]) -> Result<(), u32> {
        let i = self.lookup(normalize(path)).ok_or(ENOENT)?;
        if let Some(f) = self.files[i].as_mut() {
            f.linked = false;
        }
        self.drop_if_unused(i);
        Ok(())
    }

    /// Reads up to `buf.len()` bytes at the descriptor's position.
    pub fn read(&mut self, fd: u32, buf: &mut [u8]) -> Result<usize, u32> {
        let d = self.fd(fd)?;
        if d.flags & oflag::ACCMODE == oflag::WRONLY {
            return Err(EBADF);
        }
        let f = self.files[d.file].as_ref().ok_or(EBADF)?;
        let n = (f.len.saturating_sub(d.pos) as usize).min(buf.len());
        for (i, b) in buf.iter_mut().enumerate().take(n) {
            let at = d.pos as usize + i;
            let page = f.pages[at / PAGE_SIZE as usize];
            *b = if page == 0 {
                0
            } else {
                // SAFETY: `page` is a frame of this file, granted by the root task and
                // mapped in the server's space; `at % PAGE_SIZE` stays inside it.
                unsafe { ((page as usize + at % PAGE_SIZE as usize) as *const u8).read() }
            };
        }
        self.set_pos(fd, d.pos + n as u32);
        Ok(n)
    }

    /// Writes `buf` at the descriptor's position (its end with O_APPEND).
    pub fn write(&mut self, fd: u32, buf: &[u8]) -> Result<usize, u32> {
        let d = self.fd(fd)?;
        if d.flags & oflag::ACCMODE == 0 {
            return Err(EBADF);
        }
        let f = self.files[d.file].as_mut().ok_or(EBADF)?;
        let pos = if d.flags & oflag::APPEND != 0 {
            f.len
        } else {
            d.pos
        };
        let end = pos as usize + buf.len();
        if end > FILE_PAGES * PAGE_SIZE as usize {
            return Err(EFBIG);
        }
        for (i, &b) in buf.iter().enumerate() {
            let at = pos as usize + i;
            let slot = &mut f.pages[at / PAGE_SIZE as usize];
            if *slot == 0 {
                *slot = self.frames.alloc().ok_or(ENOSPC)?;
            }
            // SAFETY: as in `read`; the frame is this file's alone.
            unsafe { ((*slot as usize + at % PAGE_SIZE as usize) as *mut u8).write(b) };
        }
        f.len = f.len.max(end as u32);
        self.set_pos(fd, end as u32);
        Ok(buf.len())
    }

    /// `lseek`: the new position.
    pub fn seek(&mut self, fd: u32, off: i64, whence: u32) -> Result<u32, u32> {
        let d = self.fd(fd)?;
        let len = self.files[d.file].as_ref().ok_or(EBADF)?.len;
        let base = match whence {
            0 => 0,
            1 => d.pos as i64,
            2 => len as i64,
            _ => return Err(EINVAL),
        };
        let pos = base + off;
        if !(0..=u32::MAX as i64).contains(&pos) {
            return Err(EINVAL);
        }
        self.set_pos(fd, pos as u32);
        Ok(pos as u32)
    }

    /// Size of the file behind `fd`, or of the file named `path`.
    pub fn size_of_fd(&self, fd: u32) -> Result<u32, u32> {
        let d = self.fd(fd)?;
        Ok(self.files[d.file].as_ref().ok_or(EBADF)?.len)
    }
    pub fn size_of_path(&self, path: &[u8]) -> Result<u32, u32> {
        let i = self.lookup(normalize(path)).ok_or(ENOENT)?;
        Ok(self.files[i].as_ref().map_or(0, |f| f.len))
    }

    /// Closes every descriptor of the current owner (the program is gone).
    pub fn close_all(&mut self) {
        for fd in 3..MAX_FDS as u32 + 3 {
            let _ = self.close(fd);
        }
    }

    /// Each file: its name, length and first `max` bytes (for the listing at exit).
    pub fn each(&self, max: usize, mut f: impl FnMut(&str, u32, &[u8])) {
        let mut buf = [0u8; 4096];
        for file in self.files.iter().flatten().filter(|f| f.linked) {
            let n = (file.len as usize).min(max).min(buf.len());
            for (i, b) in buf.iter_mut().enumerate().take(n) {
                let page = file.pages[i / PAGE_SIZE as usize];
                *b = if page == 0 {
                    0
                } else {
                    // SAFETY: as in `read`.
                    unsafe { ((page as usize + i % PAGE_SIZE as usize) as *const u8).read() }
                };
            }
            let name = core::str::from_utf8(&file.name[..file.name_len]).unwrap_or("?");
            f(name, file.len, &buf[..n]);
        }
    }
}
