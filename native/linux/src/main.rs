//! `kestrel-linux`: the Linux personality server (docs/adr/0034-linux-personality.md).
//!
//! It runs the static Linux/PowerPC executables named by `linux.run=NAME,...` on the kernel
//! command line (modules of the boot archive), one after the other. For each it loads the
//! ELF image, builds the initial stack (argc, argv, envp, auxv), creates the program's
//! thread in a space of its own through the root task (`CREATE_THREAD`, then `LINUX`,
//! which marks the space a Linux personality space and makes this server its exception
//! handler), and then is its pager (image, stack, heap, `mmap` areas) and answers its
//! Linux system calls ([`syscalls`]). Console output is prefixed with the program's name;
//! a call the server does not know returns ENOSYS with one line per call number; a fault
//! outside the program's memory stops the program with one line naming the address.
//! When a program ends the server lists the files of its in-memory file system
//! ([`fs`]), then starts the next one; after the last it exits with the first non-zero
//! exit code.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod fs;
mod mem;
mod syscalls;

use kestrel_abi::{bootmod, exc, label, ExceptionClass, ThreadId, Timeout, PAGE_SIZE};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::mem::{map_reply, PageFault};
use kestrel_user::pager::RootRam;
use kestrel_user::{loader, println, root, sys};

/// The boot archive in our space (16 MiB aligned, as `ARCHIVE` wants).
const ARCHIVE_VA: u32 = 0x3000_0000;
/// Program images: each segment gets a 16 MiB-aligned block from here.
const IMAGE_VA: u32 = 0x4000_0000;
/// Frames of programs' anonymous memory.
const ANON_FRAMES: (u32, u32) = (0x5000_0000, 0x6000_0000);
/// Frames of the file system.
const FILE_FRAMES: (u32, u32) = (0x6000_0000, 0x6800_0000);
/// The server's own large state (`State`), in RAM from the root task.
const STATE_VA: u32 = 0x6800_0000;
/// Priority of a program's thread: below the server, so replies are never held up.
const PROGRAM_PRIORITY: u32 = kestrel_abi::root::PROGRAM_CEILING - 1;
/// Distinct unknown call numbers reported in full per program.
const ENOSYS_LINES: usize = 16;

/// What the server keeps across programs.
pub struct State {
    pub fs: fs::Fs,
    /// The running program's memory.
    pub space: Option<mem::Space>,
}

/// The running program as the system calls see it.
pub struct Program {
    pub name: &'static str,
    pub tid: ThreadId,
    /// Partial console lines of descriptors 1 and 2.
    pub line: [heapless::Vec<u8, 160>; 2],
    /// Unknown call numbers already reported, and how many calls were not reported.
    pub enosys_seen: heapless::Vec<u32, ENOSYS_LINES>,
    pub enosys_quiet: u32,
    pub tb_hz: u64,
    pub tb_start: u64,
    pub random: u32,
}

/// How a program ended.
pub enum End {
    Exit(u32),
    Killed,
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
    let mut code = 0;
    let mut image_va = IMAGE_VA;
    let mut ran = 0;
    for name in kestrel_abi::root::arg_list(args, "linux.run=") {
        ran += 1;
        let Some(module) = bootmod::find(archive, name) else {
            println!("kestrel-linux: no module \"{name}\" in the boot archive");
            code = code.max(1);
            continue;
        };
        let c = run(state, module.name, module.data, &mut image_va);
        if code == 0 {
            code = c;
        }
        list_files(state);
    }
    if ran == 0 {
        println!("kestrel-linux: no program to run (name them with linux.run=NAME,...)");
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

/// The server's state, placed in RAM from the root task (it is too large for the stack).
fn new_state() -> Option<&'static mut State> {
    ram_block(STATE_VA, core::mem::size_of::<State>() as u32)?;
    let s = State {
        fs: fs::Fs::new(RootRam::new(FILE_FRAMES.0, FILE_FRAMES.1)),
        space: None,
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

/// Loads, starts and serves program `name`; its exit code (128 + 11 when it was stopped
/// for a fault, 127 when it could not be started).
fn run(state: &mut State, name: &'static str, elf: &'static [u8], image_va: &mut u32) -> u32 {
    let image = match loader::load(elf, |bytes| {
        let va = *image_va;
        let size = ram_block(va, bytes)?;
        *image_va = va + size.next_multiple_of(16 << 20);
        Some(va)
    }) {
        Ok(l) => l,
        Err(e) => {
            println!("kestrel-linux: {name}: {e}; not running it");
            return 127;
        }
    };
    let Some((phoff, phnum, phent)) = phdr_info(elf) else {
        return 127;
    };
    let Some((first, image_end)) = load_bounds(elf, phoff, phnum, phent) else {
        println!("kestrel-linux: {name}: no loadable segment; not running it");
        return 127;
    };
    let entry = image.entry;
    state.space = Some(mem::Space::new(
        image,
        image_end,
        RootRam::new(ANON_FRAMES.0, ANON_FRAMES.1),
    ));
    let space = state.space.as_mut().expect("just set");
    let (tb_hz, _) = match sys::kernel_info(kestrel_abi::kinfo::CLOCK) {
        Ok([hz, us, ..]) => (hz as u64, us),
        _ => (400_000_000, 1000),
    };
    let tb_start = sys::timebase();
    let random = (tb_start as u32) ^ 0x9e37_79b9;
    let aux = syscalls::Auxv {
        phdr: first + phoff,
        phent,
        phnum,
        entry,
        random,
    };
    let Some(sp) = syscalls::initial_stack(space, name, &aux) else {
        println!("kestrel-linux: {name}: cannot build its initial stack");
        return 127;
    };
    let tid = match root::thread() {
        Ok(t) => t,
        Err(e) => {
            println!("kestrel-linux: {name}: no thread number: {e:?}");
            return 127;
        }
    };
    // The thread's first instruction fetch faults to us; we answer only after `LINUX`
    // has marked its space, so it never runs an `sc` as a Kestrel program.
    if let Err(e) = root::spawn_space(tid, entry, sp, PROGRAM_PRIORITY, sys::my_id()) {
        println!("kestrel-linux: {name}: cannot create its thread: {e:?}");
        return 127;
    }
    if let Err(e) = root::linux(tid) {
        println!("kestrel-linux: {name}: cannot make it a Linux program: {e:?}");
        let _ = root::delete_thread(tid);
        return 127;
    }
    let mut p = Program {
        name,
        tid,
        line: [heapless::Vec::new(), heapless::Vec::new()],
        enosys_seen: heapless::Vec::new(),
        enosys_quiet: 0,
        tb_hz,
        tb_start,
        random,
    };
    let end = serve(state, &mut p);
    let _ = root::delete_thread(tid);
    syscalls::flush_lines(&mut p);
    state.fs.close_all();
    state.space = None;
    if p.enosys_quiet > 0 {
        println!(
            "kestrel-linux: {name}: {} more calls returned ENOSYS",
            p.enosys_quiet
        );
    }
    match end {
        End::Exit(c) => {
            println!("kestrel-linux: {name} exited with code {c}");
            c
        }
        End::Killed => 128 + 11,
    }
}

/// Answers the program's page faults and system calls until it ends.
fn serve(state: &mut State, p: &mut Program) -> End {
    let mut pending: Option<Msg> = None;
    loop {
        let r = match pending.take() {
            Some(reply) => ipc::reply_wait(p.tid, &reply),
            None => ipc::receive(p.tid, Timeout::NEVER),
        };
        let Ok((from, msg)) = r else { continue };
        if from != p.tid {
            continue;
        }
        if let Some(f) = PageFault::parse(&msg) {
            let space = state.space.as_mut().expect("a program runs");
            match space.resolve(f.addr) {
                Ok((frame, rights)) if rights.contains(f.access) => {
                    // Touch our own page so it is mapped here (the map item's source).
                    // SAFETY: `frame` is a page the root task granted us; reading one byte
                    // changes nothing.
                    unsafe { (frame as *const u8).read_volatile() };
                    pending = Some(map_reply(f.addr, frame, rights));
                }
                Ok(_) | Err(mem::Fault::Outside) => {
                    let kind = match f.access {
                        a if a.contains(kestrel_abi::Rights::W) => "write",
                        a if a.contains(kestrel_abi::Rights::X) => "execute",
                        _ => "read",
                    };
                    syscalls::flush_lines(p);
                    println!(
                        "kestrel-linux: {}: segmentation fault: {kind} at {:#010x} (ip {:#010x}) outside its memory; stopping it",
                        p.name, f.addr, f.ip
                    );
                    return End::Killed;
                }
                Err(mem::Fault::NoMemory) => {
                    syscalls::flush_lines(p);
                    println!(
                        "kestrel-linux: {}: out of memory at {:#010x}; stopping it",
                        p.name, f.addr
                    );
                    return End::Killed;
                }
            }
        } else if msg.label() == label::EXCEPTION
            && msg.mr(exc::CLASS) == ExceptionClass::Syscall as u32
        {
            match syscalls::handle(state, p, &msg) {
                syscalls::Outcome::Reply(r3, err) => {
                    pending = Some(Msg::with_words(
                        0,
                        &[r3, if err { exc::SC_ERROR } else { 0 }],
                    ));
                }
                syscalls::Outcome::End(e) => return e,
            }
        } else if msg.label() == label::EXCEPTION {
            let class = ExceptionClass::from_raw(msg.mr(exc::CLASS))
                .map_or("unknown exception", ExceptionClass::as_str);
            syscalls::flush_lines(p);
            println!(
                "kestrel-linux: {}: {class} at ip {:#010x} (insn {:#010x}); stopping it",
                p.name,
                msg.mr(exc::IP),
                msg.mr(exc::INSN)
            );
            return End::Killed;
        }
    }
}
