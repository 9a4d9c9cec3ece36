//! The Linux system calls of a Linux-personality program (ppc32 numbers and structure
//! layouts, big-endian), and its initial stack.
//!
//! Every pointer argument is checked page by page against the program's memory
//! (`mem::Space`): a bad one returns EFAULT, as Linux does.

use crate::fs::errno::*;
use crate::mem::{self, Mem, STACK_TOP};
use crate::{End, Program, State};
use kestrel_abi::exc;
use kestrel_user::ipc::Msg;
use kestrel_user::{print, println, sys};

/// What to do after a call.
pub enum Outcome {
    /// Reply: r3 and whether it is an error (CR0[SO]).
    Reply(u32, bool),
    /// Reply 0 when the time base reaches this value (a sleep; the server goes on).
    Sleep(u64),
    End(End),
}

/// Linux ppc32 system-call numbers (`asm/unistd_32.h`).
mod nr {
    pub const EXIT: u32 = 1;
    pub const READ: u32 = 3;
    pub const WRITE: u32 = 4;
    pub const OPEN: u32 = 5;
    pub const CLOSE: u32 = 6;
    pub const UNLINK: u32 = 10;
    pub const TIME: u32 = 13;
    pub const LSEEK: u32 = 19;
    pub const GETPID: u32 = 20;
    pub const GETUID: u32 = 24;
    pub const BRK: u32 = 45;
    pub const GETGID: u32 = 47;
    pub const GETEUID: u32 = 49;
    pub const GETEGID: u32 = 50;
    pub const IOCTL: u32 = 54;
    pub const GETTIMEOFDAY: u32 = 78;
    pub const MMAP: u32 = 90;
    pub const MUNMAP: u32 = 91;
    pub const UNAME: u32 = 122;
    pub const MPROTECT: u32 = 125;
    pub const LLSEEK: u32 = 140;
    pub const WRITEV: u32 = 146;
    pub const NANOSLEEP: u32 = 162;
    pub const UGETRLIMIT: u32 = 190;
    pub const MMAP2: u32 = 192;
    pub const GETTID: u32 = 207;
    pub const SET_TID_ADDRESS: u32 = 232;
    pub const EXIT_GROUP: u32 = 234;
    pub const CLOCK_GETTIME: u32 = 246;
    pub const CLOCK_NANOSLEEP: u32 = 248;
    pub const OPENAT: u32 = 286;
    pub const UNLINKAT: u32 = 292;
    pub const PRLIMIT64: u32 = 325;
    pub const GETRANDOM: u32 = 359;
    pub const STATX: u32 = 383;
    pub const CLOCK_GETTIME64: u32 = 403;
    pub const CLOCK_NANOSLEEP_TIME64: u32 = 407;
}

/// `openat`'s "current directory" descriptor.
const AT_FDCWD: u32 = -100i32 as u32;
const AT_EMPTY_PATH: u32 = 0x1000;
const MAP_ANONYMOUS: u32 = 0x20;
const MAP_FIXED: u32 = 0x10;
/// The program's process id (one process per program).
const PID: u32 = 1;

/// What the auxiliary vector says about the image.
pub struct Auxv {
    pub phdr: u32,
    pub phent: u32,
    pub phnum: u32,
    pub entry: u32,
    pub random: u32,
}

/// Auxiliary-vector keys (`elf.h`, `asm/auxvec.h` for PowerPC).
mod at {
    pub const NULL: u32 = 0;
    pub const PHDR: u32 = 3;
    pub const PHENT: u32 = 4;
    pub const PHNUM: u32 = 5;
    pub const PAGESZ: u32 = 6;
    pub const BASE: u32 = 7;
    pub const FLAGS: u32 = 8;
    pub const ENTRY: u32 = 9;
    pub const UID: u32 = 11;
    pub const EUID: u32 = 12;
    pub const GID: u32 = 13;
    pub const EGID: u32 = 14;
    pub const PLATFORM: u32 = 15;
    pub const HWCAP: u32 = 16;
    pub const CLKTCK: u32 = 17;
    pub const DCACHEBSIZE: u32 = 19;
    pub const ICACHEBSIZE: u32 = 20;
    pub const UCACHEBSIZE: u32 = 21;
    pub const SECURE: u32 = 23;
    pub const RANDOM: u32 = 25;
    pub const EXECFN: u32 = 31;
}
/// PPC_FEATURE_32 | HAS_FPU | HAS_MMU | BOOKE (`asm/cputable.h`).
const HWCAP: u32 = 0x8000_0000 | 0x0800_0000 | 0x0400_0000 | 0x0000_8000;
/// The 440's cache line.
const CACHE_LINE: u32 = 32;

/// Builds the initial stack below `STACK_TOP` (System V ABI, PowerPC supplement: argc,
/// argv, NULL, envp, NULL, auxv pairs, AT_NULL; strings above) and returns the stack
/// pointer, which points at argc.
pub fn initial_stack(s: &mut Mem, argv: &[&str], envp: &[&str], a: &Auxv) -> Option<u32> {
    let mut top = STACK_TOP;
    let mut push_bytes = |s: &mut Mem, b: &[u8]| -> Option<u32> {
        top -= b.len() as u32;
        s.write(top, b).ok()?;
        Some(top)
    };
    let mut push_str = |s: &mut Mem, t: &str| -> Option<u32> {
        push_bytes(s, &[0])?;
        push_bytes(s, t.as_bytes())
    };
    let mut argv_p = heapless::Vec::<u32, 24>::new();
    for t in argv {
        argv_p.push(push_str(s, t)?).ok()?;
    }
    let mut envp_p = heapless::Vec::<u32, 8>::new();
    for t in envp {
        envp_p.push(push_str(s, t)?).ok()?;
    }
    let argv0 = *argv_p.first()?;
    let platform = push_str(s, "ppc440")?;
    let mut rnd = [0u8; 16];
    let mut x = a.random | 1;
    for b in rnd.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    top &= !3;
    top -= rnd.len() as u32;
    s.write(top, &rnd).ok()?;
    let random = top;
    let auxv: [(u32, u32); 20] = [
        (at::PHDR, a.phdr),
        (at::PHENT, a.phent),
        (at::PHNUM, a.phnum),
        (at::PAGESZ, kestrel_abi::PAGE_SIZE),
        (at::BASE, 0),
        (at::FLAGS, 0),
        (at::ENTRY, a.entry),
        (at::UID, 0),
        (at::EUID, 0),
        (at::GID, 0),
        (at::EGID, 0),
        (at::PLATFORM, platform),
        (at::HWCAP, HWCAP),
        (at::CLKTCK, 100),
        (at::DCACHEBSIZE, CACHE_LINE),
        (at::ICACHEBSIZE, CACHE_LINE),
        (at::UCACHEBSIZE, 0),
        (at::SECURE, 0),
        (at::RANDOM, random),
        (at::EXECFN, argv0),
    ];
    // argc, argv, NULL, envp, NULL, auxv, AT_NULL pair.
    let mut w = heapless::Vec::<u32, 96>::new();
    w.push(argv_p.len() as u32).ok()?;
    w.extend_from_slice(&argv_p).ok()?;
    w.push(0).ok()?;
    w.extend_from_slice(&envp_p).ok()?;
    w.push(0).ok()?;
    for (k, v) in auxv {
        w.extend_from_slice(&[k, v]).ok()?;
    }
    w.extend_from_slice(&[at::NULL, 0]).ok()?;
    let sp = (top - w.len() as u32 * 4) & !15;
    for (i, v) in w.iter().enumerate() {
        s.write(sp + 4 * i as u32, &v.to_be_bytes()).ok()?;
    }
    Some(sp)
}

fn space(state: &mut State) -> Mem<'_> {
    state.mem()
}

/// Console output of descriptor 1 or 2: whole lines, each prefixed with the program's name.
fn console(p: &mut Program, fd: u32, bytes: &[u8]) {
    let line = &mut p.line[fd as usize - 1];
    for &b in bytes {
        if b == b'\n' || line.is_full() {
            emit(&p.name, line);
            if b == b'\n' {
                continue;
            }
        }
        let _ = line.push(b);
    }
}

fn emit(name: &str, line: &mut heapless::Vec<u8, { crate::LINE }>) {
    match core::str::from_utf8(line) {
        Ok(s) => println!("{name}: {s}"),
        Err(_) => {
            print!("{name}: ");
            let _ = sys::kdebug_write(line);
            println!();
        }
    }
    line.clear();
}

/// Prints the partial lines left (at the program's end or before a server line).
pub fn flush_lines(p: &mut Program) {
    for line in p.line.iter_mut() {
        if !line.is_empty() {
            emit(&p.name, line);
        }
    }
}

/// A NUL-terminated path from program memory.
fn path(s: &mut Mem, va: u32) -> Result<heapless::Vec<u8, 256>, u32> {
    let mut out = heapless::Vec::new();
    for i in 0..256 {
        let mut b = [0u8];
        s.read(va.wrapping_add(i), &mut b).map_err(|_| EFAULT)?;
        if b[0] == 0 {
            return Ok(out);
        }
        out.push(b[0]).map_err(|_| ENAMETOOLONG)?;
    }
    Err(ENAMETOOLONG)
}

/// `write` of `len` bytes at `buf` to `fd`.
fn write(state: &mut State, p: &mut Program, fd: u32, buf: u32, len: u32) -> Result<u32, u32> {
    let mut done = 0;
    let mut chunk = [0u8; 512];
    while done < len {
        let n = (len - done).min(chunk.len() as u32) as usize;
        space(state)
            .read(buf.wrapping_add(done), &mut chunk[..n])
            .map_err(|_| EFAULT)?;
        match fd {
            1 | 2 => console(p, fd, &chunk[..n]),
            0 => return Err(EBADF),
            _ => {
                state.fs.write(fd, &chunk[..n])?;
            }
        }
        done += n as u32;
    }
    Ok(len)
}

fn read(state: &mut State, fd: u32, buf: u32, len: u32) -> Result<u32, u32> {
    match fd {
        // The console has no input: end of file.
        0 => return Ok(0),
        1 | 2 => return Err(EBADF),
        _ => {}
    }
    let mut done = 0;
    let mut chunk = [0u8; 512];
    while done < len {
        let n = (len - done).min(chunk.len() as u32) as usize;
        let got = state.fs.read(fd, &mut chunk[..n])?;
        space(state)
            .write(buf.wrapping_add(done), &chunk[..got])
            .map_err(|_| EFAULT)?;
        done += got as u32;
        if got < n {
            break;
        }
    }
    Ok(done)
}

/// Nanoseconds since the program started, from the time base.
fn now_ns(p: &Program) -> u64 {
    let ticks = sys::timebase().wrapping_sub(p.tb_start);
    (ticks as u128 * 1_000_000_000 / p.tb_hz.max(1) as u128) as u64
}

/// `statx` result for a console descriptor or a file of `size` bytes.
fn statx_buf(size: Option<u32>) -> [u8; 256] {
    let mut b = [0u8; 256];
    let put32 =
        |b: &mut [u8; 256], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    put32(&mut b, 0, 0x7ff); // STATX_BASIC_STATS
    put32(&mut b, 4, 4096); // blksize
    put32(&mut b, 16, 1); // nlink
    let mode: u16 = match size {
        Some(_) => 0o100644,
        None => 0o20620,
    };
    b[28..30].copy_from_slice(&mode.to_be_bytes());
    let sz = size.unwrap_or(0) as u64;
    b[40..48].copy_from_slice(&sz.to_be_bytes());
    b[48..56].copy_from_slice(&sz.div_ceil(512).to_be_bytes());
    b
}

/// The time-base value `ns` nanoseconds from now (a sleep's end).
fn wake_after(p: &Program, ns: u64) -> u64 {
    let ticks = (ns as u128 * p.tb_hz as u128).div_ceil(1_000_000_000);
    sys::timebase().saturating_add(ticks.min(u64::MAX as u128) as u64)
}

fn read_timespec32(s: &mut Mem, va: u32) -> Result<u64, u32> {
    let mut b = [0u8; 8];
    s.read(va, &mut b).map_err(|_| EFAULT)?;
    let sec = i32::from_be_bytes(b[..4].try_into().expect("4 bytes"));
    let nsec = i32::from_be_bytes(b[4..].try_into().expect("4 bytes"));
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(EINVAL);
    }
    Ok(sec as u64 * 1_000_000_000 + nsec as u64)
}

fn read_timespec64(s: &mut Mem, va: u32) -> Result<u64, u32> {
    let mut b = [0u8; 16];
    s.read(va, &mut b).map_err(|_| EFAULT)?;
    let sec = i64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    let nsec = i64::from_be_bytes(b[8..].try_into().expect("8 bytes"));
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(EINVAL);
    }
    Ok(sec as u64 * 1_000_000_000 + nsec as u64)
}

/// `nanosleep(req, ..)`: how long to sleep.
fn nanosleep_ns(state: &mut State, req: u32) -> Result<u64, u32> {
    let mut b = [0u8; 8];
    space(state).read(req, &mut b).map_err(|_| EFAULT)?;
    let sec = u32::from_be_bytes(b[..4].try_into().expect("4 bytes"));
    let nsec = u32::from_be_bytes(b[4..].try_into().expect("4 bytes"));
    if nsec >= 1_000_000_000 {
        return Err(EINVAL);
    }
    Ok(sec as u64 * 1_000_000_000 + nsec as u64)
}

/// `clock_nanosleep(clock, flags, req, ..)` (32- or 64-bit timespec by call `n`): how long
/// to sleep; flags TIMER_ABSTIME (1) means until that time on the clock.
fn clock_nanosleep_ns(
    state: &mut State,
    p: &Program,
    n: u32,
    flags: u32,
    req: u32,
) -> Result<u64, u32> {
    let t = if n == nr::CLOCK_NANOSLEEP {
        read_timespec32(&mut space(state), req)?
    } else {
        read_timespec64(&mut space(state), req)?
    };
    Ok(if flags & 1 != 0 {
        t.saturating_sub(now_ns(p))
    } else {
        t
    })
}

/// A sleep of `ns` (or its error): the reply waits in the server's loop.
fn sleep(p: &Program, ns: Result<u64, u32>) -> Outcome {
    match ns {
        Ok(ns) => Outcome::Sleep(wake_after(p, ns)),
        Err(e) => Outcome::Reply(e, true),
    }
}

/// Handles one Linux system call of `p` (the `Syscall` exception message `m`).
pub fn handle(state: &mut State, p: &mut Program, m: &Msg) -> Outcome {
    let n = m.mr(exc::SC_NR);
    let a: [u32; 6] = core::array::from_fn(|i| m.mr(exc::SC_ARG0 + i));
    let r: Result<u32, u32> = match n {
        nr::EXIT | nr::EXIT_GROUP => return Outcome::End(End::Exit(a[0] & 0xff)),
        nr::WRITE => write(state, p, a[0], a[1], a[2]),
        nr::WRITEV => (|| {
            let mut total = 0u32;
            for i in 0..a[2].min(1024) {
                let mut s = space(state);
                let base = s.read_u32(a[1].wrapping_add(8 * i)).map_err(|_| EFAULT)?;
                let len = s
                    .read_u32(a[1].wrapping_add(8 * i + 4))
                    .map_err(|_| EFAULT)?;
                total += write(state, p, a[0], base, len)?;
            }
            Ok(total)
        })(),
        nr::READ => read(state, a[0], a[1], a[2]),
        nr::OPEN | nr::OPENAT => {
            let (dirfd, pa, flags) = if n == nr::OPEN {
                (AT_FDCWD, a[0], a[1])
            } else {
                (a[0], a[1], a[2])
            };
            path(&mut space(state), pa).and_then(|pth| {
                if dirfd != AT_FDCWD && pth.first() != Some(&b'/') {
                    return Err(EBADF);
                }
                state.fs.open(&pth, flags)
            })
        }
        nr::CLOSE => match a[0] {
            0..=2 => Ok(0),
            fd => state.fs.close(fd).map(|_| 0),
        },
        nr::UNLINK | nr::UNLINKAT => {
            let pa = if n == nr::UNLINK { a[0] } else { a[1] };
            path(&mut space(state), pa).and_then(|pth| state.fs.unlink(&pth).map(|_| 0))
        }
        nr::LSEEK => match a[0] {
            0..=2 => Err(ESPIPE),
            fd => state.fs.seek(fd, a[1] as i32 as i64, a[2]),
        },
        nr::LLSEEK => match a[0] {
            0..=2 => Err(ESPIPE),
            fd => {
                let off = ((a[1] as u64) << 32 | a[2] as u64) as i64;
                state.fs.seek(fd, off, a[4]).and_then(|pos| {
                    space(state)
                        .write(a[3], &(pos as u64).to_be_bytes())
                        .map(|_| 0)
                        .map_err(|_| EFAULT)
                })
            }
        },
        nr::STATX => (|| {
            let pth = path(&mut space(state), a[1])?;
            let size = if pth.is_empty() && a[2] & AT_EMPTY_PATH != 0 {
                match a[0] {
                    0..=2 => None,
                    fd => Some(state.fs.size_of_fd(fd)?),
                }
            } else {
                Some(state.fs.size_of_path(&pth)?)
            };
            space(state)
                .write(a[4], &statx_buf(size))
                .map_err(|_| EFAULT)?;
            Ok(0)
        })(),
        // No descriptor is a terminal.
        nr::IOCTL => Err(ENOTTY),
        nr::BRK => Ok(space(state).set_brk(a[0])),
        nr::MMAP | nr::MMAP2 => {
            if a[3] & MAP_ANONYMOUS == 0 || a[3] & MAP_FIXED != 0 {
                // File mappings and fixed addresses are not supported.
                Err(ENOSYS)
            } else {
                space(state).map_anon(a[1]).ok_or(ENOMEM)
            }
        }
        nr::MUNMAP => {
            if space(state).unmap(a[0], a[1]) {
                Ok(0)
            } else {
                Err(EINVAL)
            }
        }
        // Pages keep the rights their region has (image segments, RW anonymous memory).
        nr::MPROTECT => Ok(0),
        nr::GETPID | nr::GETTID | nr::SET_TID_ADDRESS => Ok(PID),
        nr::GETUID | nr::GETEUID | nr::GETGID | nr::GETEGID => Ok(0),
        nr::UNAME => {
            let mut u = [0u8; 6 * 65];
            let fields: [&[u8]; 6] = [
                b"Linux",
                b"kestrel",
                b"6.1.0-kestrel",
                b"#1 Kestrel light-weight kernel personality",
                b"ppc",
                b"(none)",
            ];
            for (i, f) in fields.iter().enumerate() {
                u[i * 65..i * 65 + f.len()].copy_from_slice(f);
            }
            space(state).write(a[0], &u).map(|_| 0).map_err(|_| EFAULT)
        }
        nr::GETRANDOM => (|| {
            let mut x = p.random | 1;
            for i in 0..a[1] {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                space(state)
                    .write(a[0].wrapping_add(i), &[x as u8])
                    .map_err(|_| EFAULT)?;
            }
            p.random = x;
            Ok(a[1])
        })(),
        nr::UGETRLIMIT | nr::PRLIMIT64 => {
            // Everything unlimited (the stack: its real limit).
            let (res, out) = if n == nr::UGETRLIMIT {
                (a[0], a[1])
            } else {
                (a[1], a[3])
            };
            let cur = if res == 3 {
                mem::STACK_MAX as u64
            } else {
                u64::MAX
            };
            if out == 0 {
                Ok(0)
            } else if n == nr::UGETRLIMIT {
                let c = cur.min(u32::MAX as u64) as u32;
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&c.to_be_bytes());
                b[4..].copy_from_slice(&c.to_be_bytes());
                space(state).write(out, &b).map(|_| 0).map_err(|_| EFAULT)
            } else {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&cur.to_be_bytes());
                b[8..].copy_from_slice(&cur.to_be_bytes());
                space(state).write(out, &b).map(|_| 0).map_err(|_| EFAULT)
            }
        }
        nr::CLOCK_GETTIME | nr::CLOCK_GETTIME64 => {
            // Every clock counts from the program's start (there is no wall clock).
            let t = now_ns(p);
            let (sec, nsec) = (t / 1_000_000_000, t % 1_000_000_000);
            let r = if n == nr::CLOCK_GETTIME64 {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&sec.to_be_bytes());
                b[8..].copy_from_slice(&nsec.to_be_bytes());
                space(state).write(a[1], &b)
            } else {
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&(sec as u32).to_be_bytes());
                b[4..].copy_from_slice(&(nsec as u32).to_be_bytes());
                space(state).write(a[1], &b)
            };
            r.map(|_| 0).map_err(|_| EFAULT)
        }
        nr::GETTIMEOFDAY => {
            let t = now_ns(p);
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_be_bytes());
            b[4..].copy_from_slice(&((t % 1_000_000_000 / 1000) as u32).to_be_bytes());
            if a[0] == 0 {
                Ok(0)
            } else {
                space(state).write(a[0], &b).map(|_| 0).map_err(|_| EFAULT)
            }
        }
        nr::TIME => {
            let t = (now_ns(p) / 1_000_000_000) as u32;
            if a[0] != 0 && space(state).write(a[0], &t.to_be_bytes()).is_err() {
                Err(EFAULT)
            } else {
                Ok(t)
            }
        }
        nr::NANOSLEEP => return sleep(p, nanosleep_ns(state, a[0])),
        nr::CLOCK_NANOSLEEP | nr::CLOCK_NANOSLEEP_TIME64 => {
            return sleep(p, clock_nanosleep_ns(state, p, n, a[1], a[2]))
        }
        _ => {
            if p.enosys_seen.contains(&n) || p.enosys_seen.is_full() {
                p.enosys_quiet += 1;
            } else {
                let _ = p.enosys_seen.push(n);
                flush_lines(p);
                println!(
                    "kestrel-linux: {}: system call {n} not implemented; returning ENOSYS",
                    p.name
                );
            }
            Err(ENOSYS)
        }
    };
    match r {
        Ok(v) => Outcome::Reply(v, false),
        Err(e) => Outcome::Reply(e, true),
    }
}
