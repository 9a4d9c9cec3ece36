//! `kestrel-linux`: the Linux personality server (docs/adr/0034-linux-personality.md).
//!
//! It runs static Linux/PowerPC executables (modules of the boot archive) named on the
//! kernel command line: first the programs of `linux.run=NAME,...`, one after the other,
//! then each job of `linux.job=PROG:N,...` in turn, a job being N ranks of module PROG
//! running at once (rank r's argv is `PROG ARGS...`, its environment `KESTREL_RANK=r`
//! and `KESTREL_SIZE=N`; `linux.args=A,B,...` are the ARGS of every program). For each
//! program it loads the ELF image, builds the initial stack (argc, argv, envp, auxv),
//! creates the program's thread in a space of its own through the root task
//! (`CREATE_THREAD`, then `LINUX`, which marks the space a Linux personality space and
//! makes this server its exception handler), and then is its pager (image, stack, heap,
//! `mmap` areas) and answers its Linux system calls ([`syscalls`]). One loop serves every
//! running program: each has its own space, memory map ([`mem::Space`]) and descriptors;
//! a sleeping program waits in the loop's timeout, not in the server.
//!
//! Console output is prefixed with the program's name (`PROG.r` for rank r); a call the
//! server does not know returns ENOSYS with one line per call number; a fault outside the
//! program's memory stops the program with one line naming the address. A rank that is
//! stopped or exits non-zero ends its job: one line names the rank and the cause, the
//! other ranks are stopped. After each program or job the server lists the files of its
//! in-memory file system ([`fs`]); after the last it exits with the first non-zero exit
//! code.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod fs;
mod mem;
mod syscalls;

use core::fmt::Write as _;
use kestrel_abi::ipc::Timeouts;
use kestrel_abi::{bootmod, exc, label, ExceptionClass, ThreadId, Timeout, PAGE_SIZE};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::mem::{map_reply, PageFault};
use kestrel_user::pager::RootRam;
use kestrel_user::{loader, println, root, sys};

/// The boot archive in our space (16 MiB aligned, as `ARCHIVE` wants).
const ARCHIVE_VA: u32 = 0x3000_0000;
/// Program images: each segment gets a block (aligned to its size) from here.
const IMAGE_VA: (u32, u32) = (0x4000_0000, 0x5000_0000);
/// Frames of programs' anonymous memory.
const ANON_FRAMES: (u32, u32) = (0x5000_0000, 0x6000_0000);
/// Frames of the file system.
const FILE_FRAMES: (u32, u32) = (0x6000_0000, 0x6800_0000);
/// The server's own large state (`State`), in RAM from the root task.
const STATE_VA: u32 = 0x6800_0000;
/// The programs' memory maps (`mem::Space`), one per slot, in RAM from the root task.
const SPACES_VA: u32 = 0x6c00_0000;
/// Priority of a program's thread: below the server, so replies are never held up.
const PROGRAM_PRIORITY: u32 = kestrel_abi::root::PROGRAM_CEILING - 1;
/// A program's priority when the personality is an HPC program (`root.hpc=kestrel-linux`):
/// above the vCPUs, below the personality server itself.
const HPC_PRIORITY: u32 = kestrel_abi::root::HPC_CEILING - 1;
/// The programs' priority: [`HPC_PRIORITY`] when `root.hpc=` names kestrel-linux.
static PRIORITY: core::sync::atomic::AtomicU32 =
    core::sync::atomic::AtomicU32::new(PROGRAM_PRIORITY);
/// Distinct unknown call numbers reported in full per program.
const ENOSYS_LINES: usize = 16;
/// Programs (ranks) running at once.
pub const MAX_PROGRAMS: usize = 8;
/// Arguments after argv[0] (`linux.args=`).
const MAX_ARGS: usize = 16;
/// The longest console line a program writes that is printed whole: one kernel write
/// (`kestrel_user::console::LINE`), the most a line can be before the console splits it (the
/// server's prefix and the program's name come on top, and the console continues a longer
/// line unprefixed). Longer lines are cut here.
pub const LINE: usize = kestrel_user::console::LINE;

/// What the server keeps across programs.
pub struct State {
    pub fs: fs::Fs,
    /// Frames of every program's anonymous memory.
    pub pool: mem::Pool,
    /// The memory of the program in each slot.
    pub spaces: [Option<&'static mut mem::Space>; MAX_PROGRAMS],
    /// The slot whose call or fault is being handled.
    pub cur: usize,
}

impl State {
    /// The memory of the program being served.
    pub fn mem(&mut self) -> mem::Mem<'_> {
        mem::Mem {
            space: self.spaces[self.cur]
                .as_deref_mut()
                .expect("a program runs"),
            pool: &mut self.pool,
        }
    }
}

/// A running program as the system calls see it.
pub struct Program {
    /// Console prefix: the module's name, `PROG.r` for rank r of a job.
    pub name: heapless::String<48>,
    pub tid: ThreadId,
    /// Partial console lines of descriptors 1 and 2.
    pub line: [heapless::Vec<u8, LINE>; 2],
    /// Unknown call numbers already reported, and how many calls were not reported.
    pub enosys_seen: heapless::Vec<u32, ENOSYS_LINES>,
    pub enosys_quiet: u32,
    pub tb_hz: u64,
    pub tb_start: u64,
    pub random: u32,
    /// Sleeping until this time-base value (no reply is owed before).
    pub wake: Option<u64>,
}

/// How a program ended.
pub enum End {
    Exit(u32),
    /// Stopped by the server; why (e.g. "segmentation fault: write at ...").
    Killed(heapless::String<160>),
}

/// One program to start: module, its console name, rank and job size.
struct Launch<'a> {
    module: &'static str,
    elf: &'static [u8],
    name: heapless::String<48>,
    /// `(rank, size)` for a rank of a job.
    rank: Option<(u32, u32)>,
    args: &'a [&'a str],
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("kestrel-linux");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let archive = match root::archive(ARCHIVE_VA) {
        Ok(a) => a,
        Err(e) => {
            println!("kestrel-linux: cannot map the boot archive: {e:?}");
            root::exit(1);
        }
    };
    let state = match new_state() {
        Some(s) => s,
        None => {
            println!("kestrel-linux: no RAM for the server's state");
            root::exit(1);
        }
    };
    if kestrel_abi::root::arg_list(args, "root.hpc=").any(|n| n == "kestrel-linux") {
        PRIORITY.store(HPC_PRIORITY, core::sync::atomic::Ordering::Relaxed);
    }
    let mut prog_args = heapless::Vec::<&str, MAX_ARGS>::new();
    for a in kestrel_abi::root::arg_list(args, "linux.args=") {
        if prog_args.push(a).is_err() {
            println!("kestrel-linux: more than {MAX_ARGS} linux.args=; the rest are left out");
            break;
        }
    }
    let mut code = 0;
    let mut image_va = IMAGE_VA.0;
    let mut ran = 0;
    let mut note = |c: u32| {
        if code == 0 {
            code = c;
        }
    };
    for name in kestrel_abi::root::arg_list(args, "linux.run=") {
        ran += 1;
        let Some(module) = bootmod::find(archive, name) else {
            println!("kestrel-linux: no module \"{name}\" in the boot archive");
            note(1);
            continue;
        };
        let mut n = heapless::String::new();
        let _ = n.push_str(module.name);
        let one = [Launch {
            module: module.name,
            elf: module.data,
            name: n,
            rank: None,
            args: &prog_args,
        }];
        note(run_group(state, &one, None, &mut image_va));
        list_files(state);
    }
    for spec in kestrel_abi::root::arg_list(args, "linux.job=") {
        ran += 1;
        let parsed = spec
            .split_once(':')
            .and_then(|(p, n)| Some((p, n.parse::<u32>().ok()?)));
        let Some((prog, size)) = parsed.filter(|&(_, n)| (1..=MAX_PROGRAMS as u32).contains(&n))
        else {
            println!(
                "kestrel-linux: linux.job={spec}: want PROG:N with N from 1 to {MAX_PROGRAMS}"
            );
            note(1);
            continue;
        };
        let Some(module) = bootmod::find(archive, prog) else {
            println!("kestrel-linux: no module \"{prog}\" in the boot archive");
            note(1);
            continue;
        };
        let mut ranks = heapless::Vec::<Launch, MAX_PROGRAMS>::new();
        for r in 0..size {
            let mut n = heapless::String::new();
            let _ = write!(n, "{}.{r}", module.name);
            let _ = ranks.push(Launch {
                module: module.name,
                elf: module.data,
                name: n,
                rank: Some((r, size)),
                args: &prog_args,
            });
        }
        println!("kestrel-linux: job {}: starting {size} ranks", module.name);
        let c = run_group(state, &ranks, Some(module.name), &mut image_va);
        if c == 0 {
            println!(
                "kestrel-linux: job {}: all {size} ranks exited with code 0",
                module.name
            );
        } else {
            println!("kestrel-linux: job {} ended (code {c})", module.name);
        }
        note(c);
        list_files(state);
    }
    if ran == 0 {
        println!(
            "kestrel-linux: no program to run (name them with linux.run=NAME,... or linux.job=PROG:N)"
        );
    }
    root::exit(code);
}

/// At least `bytes` of zeroed RAM from the root task at `va` (which must be aligned to
/// the block): a power-of-two block aligned to its size, so the root grants it in one piece.
fn ram_block(va: u32, bytes: u32) -> Option<u32> {
    let size = bytes.max(PAGE_SIZE).checked_next_power_of_two()?;
    root::ram(va, size, size.trailing_zeros()).ok()?;
    Some(size)
}

/// Bytes between two slots' `Space`s.
const SPACE_STRIDE: u32 = (core::mem::size_of::<mem::Space>() as u32).next_multiple_of(PAGE_SIZE);

/// The server's state, placed in RAM from the root task (it is too large for the stack),
/// and the RAM of every slot's memory map.
fn new_state() -> Option<&'static mut State> {
    ram_block(STATE_VA, core::mem::size_of::<State>() as u32)?;
    ram_block(SPACES_VA, SPACE_STRIDE * MAX_PROGRAMS as u32)?;
    let s = State {
        fs: fs::Fs::new(RootRam::new(FILE_FRAMES.0, FILE_FRAMES.1)),
        pool: mem::Pool::new(RootRam::new(ANON_FRAMES.0, ANON_FRAMES.1)),
        spaces: [const { None }; MAX_PROGRAMS],
        cur: 0,
    };
    let p = STATE_VA as *mut State;
    // SAFETY: the root task granted `size` bytes of zeroed RAM at STATE_VA, aligned to a
    // page and large enough for a `State`; nothing else uses it, and the reference is the
    // only one for the rest of the program.
    unsafe {
        p.write(s);
        Some(&mut *p)
    }
}

/// Prints the in-memory files (the way a user reads back what a program wrote).
fn list_files(state: &State) {
    state.fs.each(4096, |name, len, data| {
        println!("kestrel-linux: file {name} ({len} bytes)");
        for line in data.split(|&b| b == b'\n') {
            if let Ok(s) = core::str::from_utf8(line) {
                if !s.is_empty() {
                    println!("kestrel-linux: | {s}");
                }
            }
        }
    });
}

/// Big-endian ELF32 header fields the auxiliary vector needs: (phdr offset, count, size).
fn phdr_info(elf: &[u8]) -> Option<(u32, u32, u32)> {
    let be16 = |o: usize| Some(u16::from_be_bytes(elf.get(o..o + 2)?.try_into().ok()?) as u32);
    let be32 = |o: usize| Some(u32::from_be_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    Some((be32(28)?, be16(44)?, be16(42)?))
}

/// The lowest address and the end of the PT_LOAD segments (image start, initial break).
fn load_bounds(elf: &[u8], phoff: u32, phnum: u32, phent: u32) -> Option<(u32, u32)> {
    let (mut lo, mut hi) = (u32::MAX, 0u32);
    for i in 0..phnum {
        let o = (phoff + i * phent) as usize;
        let w = |k: usize| {
            Some(u32::from_be_bytes(
                elf.get(o + k..o + k + 4)?.try_into().ok()?,
            ))
        };
        if w(0)? == 1 {
            let (vaddr, offset, memsz) = (w(8)?, w(4)?, w(20)?);
            lo = lo.min(vaddr.checked_sub(offset)?);
            hi = hi.max(vaddr.checked_add(memsz)?);
        }
    }
    (hi > 0).then_some((lo, hi))
}

/// Loads and starts one program in slot `slot`; its `Program`, or the exit code to
/// report (127) when it could not be started (one line says why).
fn start(state: &mut State, slot: usize, l: &Launch, image_va: &mut u32) -> Result<Program, u32> {
    let name = l.name.as_str();
    let image = match loader::load(l.elf, |bytes, at| {
        // Congruent with the program's addresses modulo 64 KiB: large TLB entries.
        let pad = loader::congruent(at);
        let size = (bytes + pad)
            .max(loader::LARGE_PAGE)
            .checked_next_power_of_two()?;
        let va = image_va.next_multiple_of(size);
        if va.checked_add(size)? > IMAGE_VA.1 {
            return None;
        }
        ram_block(va, size)?;
        *image_va = va + size;
        Some(va + pad)
    }) {
        Ok(l) => l,
        Err(e) => {
            println!("kestrel-linux: {name}: {e}; not running it");
            return Err(127);
        }
    };
    let Some((phoff, phnum, phent)) = phdr_info(l.elf) else {
        return Err(127);
    };
    let Some((first, image_end)) = load_bounds(l.elf, phoff, phnum, phent) else {
        println!("kestrel-linux: {name}: no loadable segment; not running it");
        return Err(127);
    };
    let entry = image.entry;
    let at = (SPACES_VA + slot as u32 * SPACE_STRIDE) as *mut mem::Space;
    // SAFETY: slot `slot`'s stride of the RAM granted at SPACES_VA is free (its previous
    // program's reference was dropped when it ended) and large and aligned enough for a
    // `Space`.
    state.spaces[slot] = Some(unsafe { mem::Space::init_at(at, image, image_end) });
    state.cur = slot;
    let (tb_hz, _) = match sys::kernel_info(kestrel_abi::kinfo::CLOCK) {
        Ok([hz, us, ..]) => (hz as u64, us),
        _ => (400_000_000, 1000),
    };
    let tb_start = sys::timebase();
    let random = (tb_start as u32) ^ 0x9e37_79b9 ^ (slot as u32).wrapping_mul(0x85eb_ca6b);
    let aux = syscalls::Auxv {
        phdr: first + phoff,
        phent,
        phnum,
        entry,
        random,
    };
    let mut env = [heapless::String::<32>::new(), heapless::String::new()];
    let mut envp = heapless::Vec::<&str, 2>::new();
    if let Some((r, n)) = l.rank {
        let _ = write!(env[0], "KESTREL_RANK={r}");
        let _ = write!(env[1], "KESTREL_SIZE={n}");
        let _ = envp.push(&env[0]);
        let _ = envp.push(&env[1]);
    }
    let mut argv = heapless::Vec::<&str, { MAX_ARGS + 1 }>::new();
    let _ = argv.push(l.module);
    let _ = argv.extend_from_slice(l.args);
    let fail = |state: &mut State, why: core::fmt::Arguments| {
        println!("kestrel-linux: {name}: {why}");
        state.mem().release_all();
        state.spaces[slot] = None;
        Err(127)
    };
    let Some(sp) = syscalls::initial_stack(&mut state.mem(), &argv, &envp, &aux) else {
        return fail(state, format_args!("cannot build its initial stack"));
    };
    let tid = match root::thread() {
        Ok(t) => t,
        Err(e) => return fail(state, format_args!("no thread number: {e:?}")),
    };
    // The thread's first instruction fetch faults to us; we answer only after `LINUX`
    // has marked its space, so it never runs an `sc` as a Kestrel program.
    // Above the vCPUs when the root task runs the personality there (`root.hpc=`, as a
    // job beside busy VMs needs: HPC programs first, ADR 0034), else among the programs.
    let prio = PRIORITY.load(core::sync::atomic::Ordering::Relaxed);
    if let Err(e) = root::spawn_space(tid, entry, sp, prio, sys::my_id()) {
        return fail(state, format_args!("cannot create its thread: {e:?}"));
    }
    if let Err(e) = root::linux(tid) {
        let _ = root::delete_thread(tid);
        return fail(state, format_args!("cannot make it a Linux program: {e:?}"));
    }
    Ok(Program {
        name: l.name.clone(),
        tid,
        line: [heapless::Vec::new(), heapless::Vec::new()],
        enosys_seen: heapless::Vec::new(),
        enosys_quiet: 0,
        tb_hz,
        tb_start,
        random,
        wake: None,
    })
}

/// Stops the program in `slot` (if it still runs) and frees what it held: its thread,
/// its anonymous frames, its descriptors.
fn finish(state: &mut State, slot: usize, p: &mut Program) {
    let _ = root::delete_thread(p.tid);
    syscalls::flush_lines(p);
    state.cur = slot;
    state.fs.owner = slot;
    state.fs.close_all();
    state.mem().release_all();
    state.spaces[slot] = None;
    if p.enosys_quiet > 0 {
        println!(
            "kestrel-linux: {}: {} more calls returned ENOSYS",
            p.name, p.enosys_quiet
        );
    }
}

/// Starts `members` together (slots 0..) and serves them until all have ended; for a job
/// (`job` = its program), until one rank fails, which stops the others. The first
/// non-zero exit code (128 + 11 for a program stopped by the server, 127 for one that
/// could not be started), else 0.
fn run_group(state: &mut State, members: &[Launch], job: Option<&str>, image_va: &mut u32) -> u32 {
    let mut progs: [Option<Program>; MAX_PROGRAMS] = [const { None }; MAX_PROGRAMS];
    let size = members.len();
    let stop_all = |state: &mut State, progs: &mut [Option<Program>; MAX_PROGRAMS]| {
        for (slot, p) in progs.iter_mut().enumerate() {
            if let Some(mut p) = p.take() {
                finish(state, slot, &mut p);
            }
        }
    };
    for (slot, l) in members.iter().enumerate() {
        match start(state, slot, l, image_va) {
            Ok(p) => progs[slot] = Some(p),
            Err(c) => {
                if let Some(j) = job {
                    println!(
                        "kestrel-linux: job {j}: rank {slot} of {size} ({}) could not be started; stopping the job",
                        l.name
                    );
                }
                stop_all(state, &mut progs);
                return c;
            }
        }
    }
    let mut code = 0;
    let mut pending: Option<(ThreadId, Msg)> = None;
    while progs.iter().any(Option::is_some) {
        // Wake the sleepers whose time has come; wait at most until the next one.
        let now = sys::timebase();
        let mut next: Option<u64> = None;
        let mut hz = 1;
        for p in progs.iter_mut().flatten() {
            hz = p.tb_hz.max(1);
            match p.wake {
                Some(w) if w <= now => {
                    p.wake = None;
                    let _ = ipc::reply(p.tid, &Msg::with_words(0, &[0, 0]));
                }
                Some(w) => next = Some(next.map_or(w, |n: u64| n.min(w))),
                None => {}
            }
        }
        let wait = match next {
            Some(w) => {
                let us = ((w - now) as u128 * 1_000_000).div_ceil(hz as u128);
                Timeout::from_us(us.clamp(1, 6_000_000) as u32)
            }
            None => Timeout::NEVER,
        };
        let (to, reply) = pending.take().unwrap_or((ThreadId::NIL, Msg::new(0)));
        let (from, msg, r) = ipc::ipc(
            to,
            ThreadId::ANY,
            Timeouts::new(Timeout::ZERO, wait),
            &reply,
        );
        if r.is_err() {
            continue;
        }
        let Some(slot) = progs
            .iter()
            .position(|p| p.as_ref().is_some_and(|p| p.tid == from))
        else {
            continue;
        };
        let p = progs[slot].as_mut().expect("found");
        state.cur = slot;
        state.fs.owner = slot;
        let end = match serve_one(state, p, &msg) {
            Step::Reply(m) => {
                pending = Some((from, m));
                continue;
            }
            Step::Sleep(until) => {
                p.wake = Some(until);
                continue;
            }
            Step::End(e) => e,
        };
        let mut p = progs[slot].take().expect("found");
        finish(state, slot, &mut p);
        let c = match &end {
            End::Exit(c) => *c,
            End::Killed(_) => 128 + 11,
        };
        if code == 0 {
            code = c;
        }
        match (job, end) {
            (None, End::Exit(c)) | (Some(_), End::Exit(c @ 0)) => {
                println!("kestrel-linux: {} exited with code {c}", p.name);
            }
            (None, End::Killed(why)) => {
                println!("kestrel-linux: {}: {why}; stopping it", p.name);
            }
            (Some(j), end) => {
                let mut why = heapless::String::<160>::new();
                match end {
                    End::Exit(c) => {
                        let _ = write!(why, "exited with code {c}");
                    }
                    End::Killed(w) => why = w,
                }
                let mut others = heapless::String::<64>::new();
                for (r, _) in progs.iter().enumerate().filter(|(_, p)| p.is_some()) {
                    let _ = write!(others, "{}{r}", if others.is_empty() { "" } else { ", " });
                }
                println!(
                    "kestrel-linux: job {j}: rank {slot} of {size} ({}) {why}; stopping the job",
                    p.name
                );
                if !others.is_empty() {
                    println!("kestrel-linux: job {j}: stopped ranks {others}");
                }
                stop_all(state, &mut progs);
                return c;
            }
        }
    }
    code
}

/// What to do after one message of a program.
enum Step {
    Reply(Msg),
    Sleep(u64),
    End(End),
}

/// Answers one page fault, system call or exception of `p`.
fn serve_one(state: &mut State, p: &mut Program, msg: &Msg) -> Step {
    if let Some(f) = PageFault::parse(msg) {
        match state.mem().resolve(f.addr) {
            Ok((frame, rights)) if rights.contains(f.access) => {
                // Touch our own page so it is mapped here (the map item's source).
                // SAFETY: `frame` is a page the root task granted us; reading one byte
                // changes nothing.
                unsafe { (frame as *const u8).read_volatile() };
                Step::Reply(map_reply(f.addr, frame, rights))
            }
            Ok(_) | Err(mem::Fault::Outside) => {
                let kind = match f.access {
                    a if a.contains(kestrel_abi::Rights::W) => "write",
                    a if a.contains(kestrel_abi::Rights::X) => "execute",
                    _ => "read",
                };
                let mut why = heapless::String::new();
                let _ = write!(
                    why,
                    "segmentation fault: {kind} at {:#010x} (ip {:#010x}) outside its memory",
                    f.addr, f.ip
                );
                Step::End(End::Killed(why))
            }
            Err(mem::Fault::NoMemory) => {
                let mut why = heapless::String::new();
                let _ = write!(why, "out of memory at {:#010x}", f.addr);
                Step::End(End::Killed(why))
            }
        }
    } else if msg.label() == label::EXCEPTION
        && msg.mr(exc::CLASS) == ExceptionClass::Syscall as u32
    {
        match syscalls::handle(state, p, msg) {
            syscalls::Outcome::Reply(r3, err) => Step::Reply(Msg::with_words(
                0,
                &[r3, if err { exc::SC_ERROR } else { 0 }],
            )),
            syscalls::Outcome::Sleep(until) => Step::Sleep(until),
            syscalls::Outcome::End(e) => Step::End(e),
        }
    } else if msg.label() == label::EXCEPTION {
        let class = ExceptionClass::from_raw(msg.mr(exc::CLASS))
            .map_or("unknown exception", ExceptionClass::as_str);
        let mut why = heapless::String::new();
        let _ = write!(
            why,
            "{class} at ip {:#010x} (insn {:#010x})",
            msg.mr(exc::IP),
            msg.mr(exc::INSN)
        );
        Step::End(End::Killed(why))
    } else {
        // Not a message the kernel sends for a Linux program: an empty answer.
        Step::Reply(Msg::new(0))
    }
}
