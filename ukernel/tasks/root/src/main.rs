//! `kestrel-root`: the root task (sigma0's role, paper §2). The kernel starts it from the
//! first module of the boot-module archive; it
//!
//! - starts the programs named by `root.start=NAME,NAME,...` on the kernel command line
//!   (modules of the archive), each in its own address space, loaded with
//!   [`kestrel_user::loader`], with its module name in r3..r8 (its console prefix);
//! - is the pager and exception handler of each program's first thread: faults in the
//!   image are answered from the loaded frames, anything else stops the thread with one
//!   line naming the program;
//! - serves the protocol of `kestrel_abi::root` (RAM, thread numbers, threads, device
//!   pages, interrupt lines, vCPUs, the archive, exit, looking up a program by name), checking the caller's rights and
//!   performing the privileged system calls on its behalf;
//! - stops the machine when every program it started has exited.
//!
//! Rights: device pages and interrupt lines go only to the programs named by
//! `root.devices=NAME,...` (default `kestrel-vmm`), each page and line to the first of them
//! that asks (exclusively): a device's registers can reach memory (DMA), so holding one is
//! a privilege, not a resource (docs/SECURITY.md); the vCPU right to the programs named by `root.vcpu=NAME,...` (default
//! `kestrel-vmm`), and with it the higher priority ceiling `VMM_CEILING` (the others get
//! `PROGRAM_CEILING`, the vCPUs' priority; programs named by `root.hpc=NAME,...` get
//! `HPC_CEILING`, above the vCPUs and below the VMM: the ranks of an HPC job). See `docs/adr/0009-root-task.md` and
//! `docs/adr/0013-priorities.md`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod ram;

use kestrel_abi::root::{self as proto, pieces, reply, Request, RootError};
use kestrel_abi::{
    bootmod, exreg, fault::exc, kinfo, label, tcflags, Fpage, FrameRegs, MapItem, Rights, ThreadId,
    Timeout, DEVICE_WINDOW, DEVICE_WINDOW_END, FIRST_THREAD_NO, MAX_THREAD_NO, PAGE_SIZE,
};
use kestrel_kcore::ratelimit::{Policy, RateLimit, Verdict};
use kestrel_user::ipc::{ipc, receive, Msg};
use kestrel_user::loader::{self, Loaded};
use kestrel_user::mem::{boot_modules, map_reply, PageFault};
use kestrel_user::{println, rt, sys};
use ram::Ram;

/// Most programs the root task runs (an 8-rank native MPI job is 9 with the fabric
/// service).
const MAX_PROGRAMS: usize = 16;
/// The program that gets the vCPU and device rights when `root.vcpu=` and
/// `root.devices=` are not given.
const DEFAULT_VMM: &str = "kestrel-vmm";
/// The program that gets the fabric right when `root.fabric=` is not given.
const DEFAULT_FABRIC: &str = "kestrel-fabric";
/// The program that gets the Linux right (the personality server) when `root.linux=` is
/// not given.
const DEFAULT_LINUX: &str = "kestrel-linux";
/// Lines about one program the root prints in full (refusals, faults outside its image,
/// exceptions) before it only counts them: a program decides how many there are.
const LOG_LINES_IN_FULL: u32 = 8;
/// `owner` entry of a thread number nobody has.
const FREE: u8 = 0;
/// `owner` entry of the root's own number.
const ROOT_OWNER: u8 = 0xff;
const SLOTS: usize = (MAX_THREAD_NO - FIRST_THREAD_NO) as usize;

struct Program {
    name: &'static str,
    image: Loaded,
    main: ThreadId,
    vcpu_right: bool,
    /// May own device pages and interrupt lines (`root.devices=`).
    device_right: bool,
    /// May ask for any program's fabric grant (`root.fabric=`).
    fabric_right: bool,
    /// Runs above the vCPUs (`root.hpc=`, [`proto::HPC_CEILING`]).
    hpc_right: bool,
    /// May make its threads Linux personality threads (`root.linux=`).
    linux_right: bool,
    running: bool,
    /// The limit on the root's lines the program causes (refusals, faults, exceptions).
    log: RateLimit,
}

impl Program {
    /// The ceiling of the program's first space and the priority of its first thread
    /// (`kestrel_abi::root`): below the root task, so the root's answers are never held
    /// up by a program, and for programs that are no VMM at most their vCPUs' priority.
    fn ceiling(&self) -> u32 {
        if self.vcpu_right {
            proto::VMM_CEILING
        } else if self.hpc_right {
            proto::HPC_CEILING
        } else {
            proto::PROGRAM_CEILING
        }
    }
}

struct Root {
    archive: &'static [u8],
    /// Physical placement of the archive (for [`Request::Archive`]).
    archive_phys: (u32, u32),
    ram: Ram,
    programs: heapless::Vec<Program, MAX_PROGRAMS>,
    /// Per thread number: [`FREE`], [`ROOT_OWNER`] or program index + 1.
    owner: [u8; SLOTS],
    /// Per interrupt line: [`FREE`] or program index + 1.
    irq_owner: [u8; FIRST_THREAD_NO as usize],
    /// Device pages handed out: `(page, program index + 1)`.
    devices: heapless::Vec<(u32, u8), 32>,
    /// The window block `(va, size)` zeroed for the `Ram` request being answered: once the
    /// answer's grants are done (or failed), the root drops its own mappings of it
    /// ([`Ram::release`]), so a program cannot pile up the root's mapping-database nodes
    /// with RAM requests whose grants fail.
    granting: Option<(u32, u32)>,
    /// First non-zero exit code of a program.
    code: u32,
    /// The programs' log limits: lines in full, then a summary at most once a second.
    log_policy: Policy,
    /// The node's fabric policy (`kestrel_abi::grants`): the archive's `fabric-policy`
    /// module, or the default policy when there is none.
    fabric_policy: Option<&'static str>,
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("root");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let Some(archive) = boot_modules() else {
        println!("root: cannot read the boot modules (KernelInfo failed)");
        return;
    };
    let Ok([mphys, msize, _, _]) = sys::kernel_info(kinfo::BOOT_MODULE) else {
        return;
    };
    let Some(ram) = Ram::from_kernel() else {
        println!("root: cannot query physical memory");
        return;
    };
    let mut root = Root {
        archive,
        archive_phys: (mphys, msize),
        ram,
        programs: heapless::Vec::new(),
        owner: [FREE; SLOTS],
        irq_owner: [FREE; FIRST_THREAD_NO as usize],
        devices: heapless::Vec::new(),
        granting: None,
        code: 0,
        fabric_policy: fabric_policy(archive),
        log_policy: Policy {
            first: LOG_LINES_IN_FULL,
            interval: match sys::kernel_info(kinfo::CLOCK) {
                Ok([hz, ..]) if hz > 0 => hz as u64,
                _ => 400_000_000,
            },
        },
    };
    root.owner[0] = ROOT_OWNER;
    // A right goes to the programs its key names, or to the VMM when the key is absent.
    let has_right = |key: &str, default: &str, name: &str| {
        let mut list = proto::arg_list(args, key).peekable();
        let absent = list.peek().is_none();
        list.chain(absent.then_some(default)).any(|v| v == name)
    };
    for name in proto::arg_list(args, "root.start=") {
        root.start(
            name,
            ProgramRights {
                vcpu: has_right("root.vcpu=", DEFAULT_VMM, name),
                devices: has_right("root.devices=", DEFAULT_VMM, name),
                fabric: has_right("root.fabric=", DEFAULT_FABRIC, name),
                hpc: proto::arg_list(args, "root.hpc=").any(|v| v == name),
                linux: has_right("root.linux=", DEFAULT_LINUX, name),
            },
        );
    }
    if !root.programs.iter().any(|p| p.running) {
        println!("root: no program running (name them with root.start=NAME,... on the kernel command line)");
        return;
    }
    root.serve()
}

/// The rights a program is started with.
struct ProgramRights {
    vcpu: bool,
    devices: bool,
    fabric: bool,
    hpc: bool,
    linux: bool,
}

/// The archive's fabric policy module, its problems reported once.
fn fabric_policy(archive: &'static [u8]) -> Option<&'static str> {
    let m = bootmod::find(archive, kestrel_abi::grants::MODULE)?;
    let Ok(text) = core::str::from_utf8(m.data) else {
        println!("root: the fabric-policy module is not UTF-8 text; using the default policy");
        return None;
    };
    kestrel_abi::grants::problems(text, |p| println!("root: fabric-policy: {p}"));
    println!("root: fabric policy from the fabric-policy module");
    Some(text)
}

impl Root {
    /// Loads and starts module `name`; one line and nothing else on failure.
    fn start(&mut self, name: &str, rights: ProgramRights) {
        let (vcpu_right, device_right) = (rights.vcpu, rights.devices);
        let Some(module) = bootmod::find(self.archive, name) else {
            println!("root: no module \"{name}\" in the boot-module archive; not starting it");
            return;
        };
        if self.programs.is_full() {
            println!("root: {name}: more than {MAX_PROGRAMS} programs; not starting it");
            return;
        }
        let ram = &mut self.ram;
        let image = match loader::load(module.data, |bytes, va| {
            // Congruent with the image's addresses modulo 64 KiB: large TLB entries.
            let pad = loader::congruent(va);
            let at = ram.alloc_zeroed(bytes + pad, loader::LARGE_PAGE.trailing_zeros())?;
            Some(at + pad)
        }) {
            Ok(l) => l,
            Err(e) => {
                println!("root: {name}: {e}; not starting it");
                return;
            }
        };
        let index = self.programs.len() as u8;
        let Some(main) = self.alloc_threads(index + 1, 1) else {
            println!("root: {name}: no thread number left; not starting it");
            return;
        };
        let main = ThreadId::new(main, 1);
        let entry = image.entry;
        let kib = image.bytes() >> 10;
        // `module.name` lives in the archive, which stays mapped: a 'static name.
        let _ = self.programs.push(Program {
            name: module.name,
            image,
            main,
            vcpu_right,
            device_right,
            fabric_right: rights.fabric,
            hpc_right: rights.hpc,
            linux_right: rights.linux,
            running: true,
            log: RateLimit::new(self.log_policy),
        });
        let ceiling = self.programs[index as usize].ceiling();
        if let Err(e) = start_thread(main, entry, module.name, ceiling) {
            println!(
                "root: {name}: cannot start its first thread: {}; not starting it",
                e.as_str()
            );
            self.programs[index as usize].running = false;
            return;
        }
        println!(
            "root: started {name} (thread {main:?}, {kib} KiB image{}{}{})",
            if vcpu_right { ", may create vCPUs" } else { "" },
            if rights.hpc { ", above the vCPUs" } else { "" },
            if device_right {
                ", may own devices"
            } else {
                ""
            }
        );
    }

    /// `count` consecutive free thread numbers for `owner`.
    fn alloc_threads(&mut self, owner: u8, count: u32) -> Option<u32> {
        let count = count as usize;
        let start = (0..SLOTS.checked_sub(count)? + 1)
            .find(|&s| self.owner[s..s + count].iter().all(|&o| o == FREE))?;
        self.owner[start..start + count].fill(owner);
        Some(FIRST_THREAD_NO + start as u32)
    }

    /// The program (index) owning thread `t`.
    fn program_of(&self, t: ThreadId) -> Option<usize> {
        if !t.is_thread() || t.version() != 1 {
            return None;
        }
        match self.owner[(t.number() - FIRST_THREAD_NO) as usize] {
            FREE | ROOT_OWNER => None,
            o => Some(o as usize - 1),
        }
    }

    fn owns(&self, p: usize, t: ThreadId) -> bool {
        self.program_of(t) == Some(p)
    }

    fn serve(&mut self) -> ! {
        let mut pending: Option<(ThreadId, Msg)> = None;
        loop {
            let r = match pending.take() {
                Some((to, reply)) => {
                    let (from, msg, r) = ipc(
                        to,
                        ThreadId::ANY,
                        kestrel_abi::Timeouts::new(Timeout::ZERO, Timeout::NEVER),
                        &reply,
                    );
                    r.map(|()| (from, msg))
                }
                None => receive(ThreadId::ANY, Timeout::NEVER),
            };
            // The answer's send phase is over: what it granted is gone from our window,
            // what it did not grant we no longer need mapped.
            if let Some((va, size)) = self.granting.take() {
                self.ram.release(va, size);
            }
            let Ok((from, msg)) = r else { continue };
            let Some(p) = self.program_of(from) else {
                if msg.label() >= proto::LABEL && msg.label() <= proto::LABEL + proto::op::RUNNING {
                    pending = Some((
                        from,
                        Msg::from_words(&proto::encode_error(RootError::UnknownCaller)),
                    ));
                }
                continue;
            };
            pending = if let Some(f) = PageFault::parse(&msg) {
                Some((from, self.page_fault(p, from, &f)))
            } else if msg.label() == label::EXCEPTION {
                let class = msg.mr(exc::CLASS);
                self.log(
                    p,
                    format_args!(
                        "thread {from:?}: exception (class {class}, ip {:#010x}, ESR {:#010x}); stopping it",
                        msg.mr(exc::IP),
                        msg.mr(exc::ESR)
                    ),
                );
                self.thread_killed(p, from);
                Some((from, Msg::new(label::KILL)))
            } else {
                let w = msg.words();
                match Request::decode(w.label, w.words()) {
                    Some(Request::Exit { code }) => {
                        self.exit(p, code);
                        None
                    }
                    Some(req) => Some((from, self.request(p, from, req))),
                    None => Some((
                        from,
                        Msg::from_words(&proto::encode_error(RootError::BadRequest)),
                    )),
                }
            };
        }
    }

    fn page_fault(&mut self, p: usize, from: ThreadId, f: &PageFault) -> Msg {
        let image = &self.programs[p].image;
        if let Some((base, frames, rights)) = image.resolve_block(f.addr) {
            if let (true, Some(fp)) = (
                rights.contains(f.access),
                Fpage::new(frames, loader::LARGE_PAGE.trailing_zeros(), rights),
            ) {
                // The whole 64 KiB block: one fault instead of sixteen, one TLB entry.
                let mut m = Msg::new(0);
                m.push_item(MapItem::map(base, fp));
                return m;
            }
        }
        match image.resolve(f.addr) {
            Some((frame, rights)) if rights.contains(f.access) => map_reply(f.addr, frame, rights),
            _ => {
                self.log(
                    p,
                    format_args!(
                        "thread {from:?}: {} fault at {:#010x} (ip {:#010x}) outside its image; stopping it",
                        access_name(f.access),
                        f.addr,
                        f.ip
                    ),
                );
                self.thread_killed(p, from);
                Msg::new(label::KILL)
            }
        }
    }

    /// A thread of program `p` is being stopped by the kernel; the first thread's end
    /// is the program's (exit code 1).
    fn thread_killed(&mut self, p: usize, t: ThreadId) {
        if self.programs[p].main == t {
            println!(
                "root: {}: its first thread is gone; ending the program",
                self.programs[p].name
            );
            self.end_program(p, 1, Some(t));
        }
    }

    /// `Exit` from program `p`.
    fn exit(&mut self, p: usize, code: u32) {
        println!("root: {} exited (code {code})", self.programs[p].name);
        self.end_program(p, code, None);
    }

    /// Deletes every thread of program `p` (except `keep`, which the kernel is about to
    /// stop) and frees their numbers; stops the machine after the last program.
    fn end_program(&mut self, p: usize, code: u32, keep: Option<ThreadId>) {
        let me = p as u8 + 1;
        for s in 0..SLOTS {
            if self.owner[s] != me {
                continue;
            }
            let t = ThreadId::new(FIRST_THREAD_NO + s as u32, 1);
            if Some(t) != keep {
                // Numbers never used are no threads: that error is expected.
                let _ = sys::thread_control(t, ThreadId::NIL, 0, ThreadId::NIL, 0);
                self.owner[s] = FREE;
            }
        }
        for o in self.irq_owner.iter_mut().filter(|o| **o == me) {
            *o = FREE;
        }
        self.devices.retain(|d| d.1 != me);
        self.programs[p].running = false;
        if let Some((suppressed, total)) = self.programs[p].log.finish() {
            let name = self.programs[p].name;
            println!("root: {name}: {suppressed} more lines about it not logged ({total} in all)");
        }
        if self.code == 0 {
            self.code = code;
        }
        if self.programs.iter().all(|p| !p.running) {
            println!("root: every program has ended; stopping the machine");
            rt::exit(self.code);
        }
    }

    /// Prints `root: NAME: line` about program `p` under its log limit
    /// (`kestrel_kcore::ratelimit`): its first lines in full, then counted summaries.
    fn log(&mut self, p: usize, line: core::fmt::Arguments) {
        let name = self.programs[p].name;
        match self.programs[p].log.event(sys::timebase()) {
            Verdict::Log { last } => {
                println!("root: {name}: {line}");
                if last {
                    println!("root: {name}: that was the {LOG_LINES_IN_FULL}th such line; further ones are counted, not logged");
                }
            }
            Verdict::Summary { suppressed, total } => {
                println!(
                    "root: {name}: {suppressed} more lines about it not logged ({total} in all)"
                )
            }
            Verdict::Quiet => {}
        }
    }

    fn request(&mut self, p: usize, from: ThreadId, req: Request) -> Msg {
        let mut call = Call {
            p,
            from,
            items: heapless::Vec::new(),
        };
        match req.serve(self, &mut call) {
            Ok(w) => {
                let mut m = Msg::from_words(&w);
                for it in call.items {
                    m.push_item(it);
                }
                m
            }
            Err(e) => {
                self.log(p, format_args!("{req:?} refused: {e}"));
                Msg::from_words(&proto::encode_error(e))
            }
        }
    }
}

/// What the root knows of a request beside its words: the program and thread that sent it,
/// and the items its reply carries (sent only with a success).
struct Call {
    p: usize,
    from: ThreadId,
    items: heapless::Vec<MapItem, { proto::MAX_ITEMS }>,
}

impl Call {
    /// The program's owner mark (`Root::owner`, `irq_owner`, `devices`).
    fn me(&self) -> u8 {
        self.p as u8 + 1
    }
}

impl proto::Server for Root {
    type Caller = Call;

    fn ram(
        &mut self,
        c: &mut Call,
        dest: u32,
        size: u32,
        align_log2: u32,
    ) -> Result<reply::Ram, RootError> {
        if size == 0 || size > proto::MAX_RAM || !size.is_multiple_of(PAGE_SIZE) || align_log2 > 28
        {
            return Err(RootError::BadRequest);
        }
        let align = align_log2.max(PAGE_SIZE.trailing_zeros());
        // Check the placement before taking memory: the pieces depend only on the
        // alignment of dest and of the block, which is at least `align`.
        let probe = pieces(1 << align.min(24), dest, size, 24);
        if !dest.is_multiple_of(PAGE_SIZE) || probe.is_none() {
            return Err(RootError::BadRequest);
        }
        let phys = self.ram.alloc(size, align).ok_or(RootError::NoResources)?;
        let va = self.ram.zero(phys, size);
        self.granting = Some((va, size));
        let ps = pieces(va, dest, size, 24).ok_or(RootError::BadRequest)?;
        for piece in ps.as_slice() {
            let (fp, hot) = piece.fpage(Rights::RWX).ok_or(RootError::BadRequest)?;
            let _ = c.items.push(MapItem::grant(hot, fp));
        }
        Ok(reply::Ram { phys })
    }

    fn threads(&mut self, c: &mut Call, count: u32) -> Result<reply::Threads, RootError> {
        if count == 0 || count > proto::MAX_THREADS {
            return Err(RootError::BadRequest);
        }
        let first = self
            .alloc_threads(c.me(), count)
            .ok_or(RootError::NoResources)?;
        Ok(reply::Threads { first, count })
    }

    fn create_thread(
        &mut self,
        c: &mut Call,
        id: ThreadId,
        space: ThreadId,
        pager: ThreadId,
        priority: u32,
        ip: u32,
        sp: u32,
    ) -> Result<reply::CreateThread, RootError> {
        let p = c.p;
        if !self.owns(p, id)
            || !self.owns(p, space)
            || !(self.owns(p, pager) || pager == ThreadId::ROOT)
        {
            return Err(RootError::NotOwner);
        }
        if priority > self.programs[p].ceiling() {
            return Err(RootError::NoRight);
        }
        // The caller becomes the scheduler; a new space gets its space's ceiling.
        rt::create_started(id, space, priority, pager, c.from, ip, sp).map_err(kernel_refusal)?;
        Ok(reply::CreateThread {})
    }

    fn delete_thread(
        &mut self,
        c: &mut Call,
        id: ThreadId,
    ) -> Result<reply::DeleteThread, RootError> {
        if !self.owns(c.p, id) {
            return Err(RootError::NotOwner);
        }
        sys::thread_control(id, ThreadId::NIL, 0, ThreadId::NIL, 0)
            .map_err(|_| RootError::Kernel)?;
        Ok(reply::DeleteThread {})
    }

    fn device(&mut self, c: &mut Call, phys: u32) -> Result<reply::Device, RootError> {
        if !self.programs[c.p].device_right {
            return Err(RootError::NoRight);
        }
        if !phys.is_multiple_of(PAGE_SIZE) || !(DEVICE_WINDOW..DEVICE_WINDOW_END).contains(&phys) {
            return Err(RootError::BadRequest);
        }
        let me = c.me();
        match self.devices.iter().find(|d| d.0 == phys) {
            Some(d) if d.1 != me => return Err(RootError::Taken),
            Some(_) => {}
            None => self
                .devices
                .push((phys, me))
                .map_err(|_| RootError::NoResources)?,
        }
        // The root's device window maps device page `phys` at `phys`, uncached.
        let _ = c.items.push(MapItem::map(
            phys,
            kestrel_abi::Fpage::page(phys, Rights::RW),
        ));
        Ok(reply::Device {})
    }

    fn interrupt(
        &mut self,
        c: &mut Call,
        line: u32,
        handler: ThreadId,
        flags: u32,
    ) -> Result<reply::Interrupt, RootError> {
        if !self.programs[c.p].device_right {
            return Err(RootError::NoRight);
        }
        if line >= FIRST_THREAD_NO {
            return Err(RootError::BadRequest);
        }
        if !self.owns(c.p, handler) {
            return Err(RootError::NotOwner);
        }
        let me = c.me();
        let o = &mut self.irq_owner[line as usize];
        if *o != FREE && *o != me {
            return Err(RootError::Taken);
        }
        sys::interrupt_control(line, handler, flags).map_err(|_| RootError::Kernel)?;
        self.irq_owner[line as usize] = me;
        Ok(reply::Interrupt {})
    }

    fn vcpu(
        &mut self,
        c: &mut Call,
        id: ThreadId,
        priority: u32,
    ) -> Result<reply::Vcpu, RootError> {
        let p = c.p;
        if !self.programs[p].vcpu_right {
            return Err(RootError::NoRight);
        }
        if !self.owns(p, id) {
            return Err(RootError::NotOwner);
        }
        if priority > self.programs[p].ceiling() {
            return Err(RootError::NoRight);
        }
        // The VMM is the vCPU's pager and scheduler; the VM space gets its ceiling.
        let from = c.from;
        sys::thread_control_all(id, id, priority, from, 0, tcflags::VCPU, from, 0)
            .map_err(kernel_refusal)?;
        Ok(reply::Vcpu {})
    }

    fn archive(&mut self, c: &mut Call, dest: u32) -> Result<reply::Archive, RootError> {
        const LARGE: u32 = 1 << 24;
        if !dest.is_multiple_of(LARGE) {
            return Err(RootError::BadRequest);
        }
        let (phys, size) = self.archive_phys;
        let first = phys & !(PAGE_SIZE - 1);
        let len = (phys + size).next_multiple_of(PAGE_SIZE) - first;
        // Placed at the archive's offset within a 16 MiB page, so the pieces are large.
        let at = dest
            .checked_add(first % LARGE)
            .ok_or(RootError::BadRequest)?;
        let src = self.ram.window() + first;
        let ps = pieces(src, at, len, 24).ok_or(RootError::BadRequest)?;
        for piece in ps.as_slice() {
            let (fp, hot) = piece.fpage(Rights::R).ok_or(RootError::BadRequest)?;
            let _ = c.items.push(MapItem::map(hot, fp));
        }
        Ok(reply::Archive {
            offset: first % LARGE + (phys - first),
            size,
        })
    }

    /// `serve` ends the program instead of answering; nothing reaches here.
    fn exit(&mut self, _: &mut Call, _code: u32) -> Result<reply::Exit, RootError> {
        Err(RootError::BadRequest)
    }

    fn lookup(
        &mut self,
        _: &mut Call,
        name: [u32; proto::NAME_WORDS],
    ) -> Result<reply::Lookup, RootError> {
        let (b, n) = proto::name_from_words(&name);
        let want = core::str::from_utf8(&b[..n]).map_err(|_| RootError::BadRequest)?;
        self.programs
            .iter()
            .find(|q| q.running && q.name == want)
            .map(|q| reply::Lookup { id: q.main })
            .ok_or(RootError::NotFound)
    }

    fn linux(&mut self, c: &mut Call, id: ThreadId) -> Result<reply::Linux, RootError> {
        self.linux_request(c, id)
    }

    fn running(&mut self, c: &mut Call) -> Result<reply::Running, RootError> {
        let others = (0..self.programs.len())
            .filter(|&p| p != c.p && self.programs[p].running)
            .count() as u32;
        Ok(reply::Running { others })
    }

    fn fabric_grant(
        &mut self,
        c: &mut Call,
        program: ThreadId,
        tenant: u32,
    ) -> Result<reply::FabricGrant, RootError> {
        let p = self.program_of(program).ok_or(RootError::NotFound)?;
        if p != c.p && !self.programs[c.p].fabric_right {
            return Err(RootError::NoRight);
        }
        let q = &self.programs[p];
        if !q.running {
            return Err(RootError::NotFound);
        }
        let mut g = kestrel_abi::grants::grant(self.fabric_policy, q.name, q.vcpu_right, tenant);
        // The Linux personality server hosts every rank of its jobs: each may attach one
        // endpoint, all under the server's program (a policy line still decides otherwise).
        if q.linux_right && !kestrel_abi::grants::sets_quota(self.fabric_policy, q.name) {
            g.endpoints = g.endpoints.max(kestrel_abi::grants::LINUX_ENDPOINTS);
        }
        Ok(reply::FabricGrant {
            classes: u32::from(g.classes),
            partitions: u32::from(g.partitions),
            endpoints: g.endpoints,
            program_no: p as u32 + 1,
        })
    }
}

impl Root {
    fn linux_request(&mut self, c: &mut Call, id: ThreadId) -> Result<reply::Linux, RootError> {
        if !self.programs[c.p].linux_right {
            return Err(RootError::NoRight);
        }
        if !self.owns(c.p, id) || id == c.from {
            return Err(RootError::NotOwner);
        }
        sys::space_control(id, kestrel_abi::spacectl::LINUX, 0).map_err(kernel_refusal)?;
        sys::exchange_registers(id, exreg::SET_EXC_HANDLER, 0, 0, ThreadId::NIL, c.from)
            .map_err(kernel_refusal)?;
        Ok(reply::Linux {})
    }
}

/// The root's answer when the kernel refused a request's system call: a priority above
/// a ceiling is a missing right, anything else the kernel's refusal.
fn kernel_refusal(e: kestrel_abi::KError) -> RootError {
    match e {
        kestrel_abi::KError::AboveCeiling => RootError::NoRight,
        _ => RootError::Kernel,
    }
}

/// Creates `t` as the first thread of a new space with priority ceiling `ceiling`, at that
/// priority, paged and scheduled by the root, with its module name in r3..r8, and starts
/// it at `entry`.
fn start_thread(
    t: ThreadId,
    entry: u32,
    name: &str,
    ceiling: u32,
) -> Result<(), kestrel_abi::KError> {
    sys::thread_control_all(
        t,
        t,
        ceiling,
        ThreadId::ROOT,
        rt::utcb_addr_for(t.number()),
        tcflags::CEILING,
        ThreadId::ROOT,
        ceiling,
    )?;
    let mut frame = FrameRegs::default();
    frame.gpr[3..3 + proto::NAME_WORDS].copy_from_slice(&proto::name_words(name));
    frame.ip = entry;
    sys::set_frame(t, &frame)?;
    let ctl = exreg::SET_EXC_HANDLER | exreg::START;
    sys::exchange_registers(t, ctl, 0, 0, ThreadId::NIL, ThreadId::ROOT)?;
    Ok(())
}

fn access_name(r: Rights) -> &'static str {
    if r.contains(Rights::W) {
        "write"
    } else if r.contains(Rights::X) {
        "execute"
    } else {
        "read"
    }
}
