//! The fuzzing thread: one random system call (or root-task request) per step, built from
//! the ABI's definitions (`kestrel_abi`: numbers, tags, fpages, items, timeouts, the root
//! protocol), guarded against self-harm, executed, counted and checked.
//!
//! Self-harm is what the guards prevent, and only that: the fuzzer must not jump its own
//! threads into its own code with random registers, map its own image writable where random
//! code can write, end its own program, or let the kernel's console fill with binary bytes.
//! Everything else goes to the kernel as generated. The checks (the oracle) are the answers
//! the ABI promises regardless of arguments: unknown numbers get `NoSyscall`, privileged
//! calls from a program get `NoPrivilege`, another program's threads cannot be changed,
//! every status is a defined code.

use crate::gen::{self, Rng};
use crate::layout::{self, World, NVCPUS};
use crate::stats::{self, ROOT_REQ};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::root::{self as proto, op, Client, RootError};
use kestrel_abi::{
    exreg, kdebug, kinfo, vcpuctl, FrameRegs, KError, MsgTag, Syscall, ThreadId, Timeout, Timeouts,
    VcpuState, REG_MRS,
};
use kestrel_user::sys::{syscall_raw, utcb};
use kestrel_user::{println, rt};

/// A system call: r0 and r3..r12.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub nr: u32,
    pub a: [u32; 10],
}

/// The kinds of step, in the order of [`weights`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ipc,
    ExReg,
    Root,
    Unmap,
    Schedule,
    ThreadSwitch,
    KDebug,
    KInfo,
    Vcpu,
    Trace,
    ThreadControl,
    SpaceControl,
    IrqControl,
    OutOfRange,
    Raw,
}

const KINDS: [Kind; 15] = [
    Kind::Ipc,
    Kind::ExReg,
    Kind::Root,
    Kind::Unmap,
    Kind::Schedule,
    Kind::ThreadSwitch,
    Kind::KDebug,
    Kind::KInfo,
    Kind::Vcpu,
    Kind::Trace,
    Kind::ThreadControl,
    Kind::SpaceControl,
    Kind::IrqControl,
    Kind::OutOfRange,
    Kind::Raw,
];

fn weights(privileged: bool) -> [u32; 15] {
    let vcpu = if privileged { 10 } else { 3 };
    let mut w = [25, 15, 12, 6, 4, 3, 4, 4, vcpu, 3, 3, 3, 3, 4, 6];
    let mask = KIND_MASK.load(Relaxed);
    for (i, x) in w.iter_mut().enumerate() {
        if mask & (1 << i) == 0 {
            *x = 0;
        }
    }
    if w.iter().all(|&x| x == 0) {
        w[0] = 1;
    }
    w
}

/// Printable bytes for `KDebug(WRITE)`: any suffix of it is one line.
static LINE: [u8; 300] = {
    let mut b = [b'.'; 300];
    b[0] = b'[';
    b[298] = b']';
    b[299] = b'\n';
    b
};
/// Printable bytes for `KDebug(SET_NAME)`.
static NAMES: &[u8] = b"fz-0123456789-abcdefghijklmnopqrstuvwxyz";

/// Pages of RAM the root handed out to random requests (reported: how much of the root's
/// RAM a program can take; not part of the mapping probe's check, the root keeps no
/// mapping of RAM it gave out, `Ram::release` in the root task).
pub static GRANTED_PAGES: AtomicU32 = AtomicU32::new(0);
/// Pages of RAM the root took for requests whose grant then failed (the caller's receive
/// window did not cover `dest`): the root keeps those blocks for good (not their mappings).
pub static LOST_PAGES: AtomicU32 = AtomicU32::new(0);
/// The kinds of step enabled (bit i: `KINDS[i]`); `fz.kinds=` narrows it down to
/// minimise a finding.
pub static KIND_MASK: AtomicU32 = AtomicU32::new(u32::MAX);

/// The kinds' names for `fz.kinds=NAME,...`, in the order of `KINDS`.
pub const KIND_NAMES: [&str; 15] = [
    "ipc",
    "exreg",
    "root",
    "unmap",
    "schedule",
    "switch",
    "kdebug",
    "kinfo",
    "vcpu",
    "trace",
    "threadcontrol",
    "spacecontrol",
    "irqcontrol",
    "outofrange",
    "raw",
];

/// Calls `TRACE_FROM..=TRACE_TO` (1-based) are printed with their result (`fz.trace=A-B`),
/// to find the call behind a finding.
pub static TRACE_FROM: AtomicU32 = AtomicU32::new(u32::MAX);
pub static TRACE_TO: AtomicU32 = AtomicU32::new(0);

fn trace(calls: u32, c: &Call, out: &[u32; 10]) {
    if (TRACE_FROM.load(Relaxed)..=TRACE_TO.load(Relaxed)).contains(&calls) {
        println!(
            "sysfuzz: call {calls}: nr={} args={:08x?} -> {:08x?}",
            c.nr, c.a, out
        );
    }
}

/// Most violations printed in full.
const MAX_PRINTED: u32 = 20;

pub struct Fuzzer {
    pub r: Rng,
    pub w: World,
    calls: u32,
}

impl Fuzzer {
    pub fn new(seed: u64, w: World) -> Fuzzer {
        Fuzzer {
            r: Rng::new(seed),
            w,
            calls: 0,
        }
    }

    /// One step: generate, guard, execute, count, check.
    pub fn step(&mut self) {
        self.calls += 1;
        let kind = KINDS[self.r.weighted(&weights(self.w.privileged))];
        if kind == Kind::Root {
            self.root_request();
            return;
        }
        let mut c = self.generate(kind, true);
        guard(&mut self.r, &self.w, &mut c, true);
        let saved_id = utcb().my_global_id;
        if self.r.percent(3) {
            utcb().my_global_id = self.r.u32();
        }
        let out = syscall_raw(c.nr, c.a);
        utcb().my_global_id = saved_id;
        trace(self.calls, &c, &out);
        self.account(&c, &out);
    }

    /// A call of `kind`. `own` is true for a call the fuzzing thread makes itself (its UTCB
    /// is prepared too), false for a call a victim will repeat (`victim_frame`).
    fn generate(&mut self, kind: Kind, own: bool) -> Call {
        let r = &mut self.r;
        let w = &self.w;
        let mut a = [0u32; 10];
        let nr = match kind {
            Kind::Ipc => return ipc(r, w, own),
            Kind::ExReg => {
                a[0] = match r.below(10) {
                    0..=3 => r.pick(&w.victims).0,
                    4 => w.me.0,
                    5 => w.vcpus.first().copied().unwrap_or(w.sibling).0,
                    _ => gen::thread_id(r, w).0,
                };
                a[1] = if r.percent(5) {
                    r.u32()
                } else {
                    r.u32() & exreg::ALL
                };
                a[2] = gen::word(r);
                a[3] = gen::safe_ip(r);
                a[4] = if r.percent(50) {
                    ThreadId::ROOT.0
                } else {
                    gen::thread_id(r, w).0
                };
                a[5] = gen::thread_id(r, w).0;
                if own && a[1] & exreg::SET_FRAME != 0 {
                    utcb().frame = victim_frame(r, w);
                }
                Syscall::ExchangeRegisters
            }
            Kind::Unmap => {
                a[0] = gen::fpage(r).0;
                a[1] = match r.below(4) {
                    0 | 1 => 0,
                    2 => 1,
                    _ => r.u32(),
                };
                Syscall::Unmap
            }
            Kind::Schedule => {
                a[0] = match r.below(3) {
                    0 => r.pick(&w.victims).0,
                    1 => w.me.0,
                    _ => gen::thread_id(r, w).0,
                };
                a[1] = match r.below(3) {
                    0 => r.pick(&[0, 1, 89, 90, 91, 98, 99, 100, 255, 256, u32::MAX]),
                    _ => r.below(300),
                };
                a[2] = match r.below(4) {
                    0 => 0,
                    1 => r.pick(&[1, 1000, 10_000_000, 10_000_001, u32::MAX]),
                    _ => r.below(20_000),
                };
                Syscall::Schedule
            }
            Kind::ThreadSwitch => {
                a[0] = gen::thread_id(r, w).0;
                Syscall::ThreadSwitch
            }
            Kind::KDebug => {
                kdebug_args(r, &mut a);
                Syscall::KDebug
            }
            Kind::KInfo => {
                a[0] = if r.percent(85) { r.below(7) } else { r.u32() };
                Syscall::KernelInfo
            }
            Kind::Vcpu => {
                a[0] = match r.below(3) {
                    0 | 1 => w.vcpus.get(r.below(NVCPUS as u32) as usize).copied(),
                    _ => None,
                }
                .unwrap_or_else(|| gen::thread_id(r, w))
                .0;
                a[1] = if r.percent(90) { r.below(7) } else { r.u32() };
                a[2] = match a[1] {
                    vcpuctl::SET_IRQ | vcpuctl::DECLARE_MMIO => r.below(3),
                    _ => gen::word(r),
                };
                a[3] = gen::word(r);
                a[4] = match r.below(3) {
                    0 => r.below(16) << 12,
                    _ => gen::word(r),
                };
                if own {
                    let u = utcb();
                    match a[1] {
                        vcpuctl::SET_STATE => mutate_vcpu_state(r, &mut u.vcpu),
                        vcpuctl::SET_TLB => {
                            for i in 1..=4 {
                                u.mr[i] = gen::word(r);
                            }
                        }
                        _ => {}
                    }
                }
                Syscall::VcpuControl
            }
            Kind::Trace => {
                a[0] = if r.percent(90) { r.below(3) } else { r.u32() };
                a[1] = match r.below(3) {
                    0 => ThreadId::NIL,
                    1 => w.vcpus.first().copied().unwrap_or(ThreadId::NIL),
                    _ => gen::thread_id(r, w),
                }
                .0;
                Syscall::TraceControl
            }
            Kind::ThreadControl => {
                a[0] = gen::thread_id(r, w).0;
                a[1] = gen::thread_id(r, w).0;
                a[2] = r.below(300);
                a[3] = gen::thread_id(r, w).0;
                a[4] = gen::word(r);
                a[5] = r.below(4);
                Syscall::ThreadControl
            }
            Kind::SpaceControl => {
                a[0] = gen::thread_id(r, w).0;
                a[1] = r.below(8);
                a[2] = gen::fpage(r).0;
                Syscall::SpaceControl
            }
            Kind::IrqControl => {
                a[0] = r.below(kestrel_abi::FIRST_THREAD_NO + 8);
                a[1] = gen::thread_id(r, w).0;
                a[2] = r.below(8);
                Syscall::InterruptControl
            }
            Kind::OutOfRange => {
                for x in a.iter_mut() {
                    *x = gen::word(r);
                }
                let nr = match r.below(3) {
                    0 => stats::NSYSCALLS as u32 + r.below(8),
                    1 => u32::MAX - r.below(4),
                    _ => r.u32().max(stats::NSYSCALLS as u32),
                };
                return Call { nr, a };
            }
            Kind::Raw => {
                for x in a.iter_mut() {
                    *x = gen::word(r);
                }
                let nr = r.below(stats::NSYSCALLS as u32);
                if nr == Syscall::KDebug as u32 {
                    kdebug_args(r, &mut a);
                }
                return Call { nr, a };
            }
            Kind::Root => unreachable!("root requests are made by root_request"),
        };
        Call { nr: nr as u32, a }
    }

    /// Counts the call's result and checks it against what the ABI promises.
    fn account(&mut self, c: &Call, out: &[u32; 10]) {
        let row = if (c.nr as usize) < stats::NSYSCALLS {
            c.nr as usize
        } else {
            stats::OUT_OF_RANGE
        };
        let col = if c.nr == Syscall::Ipc as u32 {
            if MsgTag(out[3]).is_error() {
                stats::ipc_col(out[1])
            } else {
                stats::OK
            }
        } else {
            stats::status_col(out[0])
        };
        stats::count(row, col);
        if c.nr == Syscall::Ipc as u32 && col == stats::OK && ThreadId(c.a[1]) != ThreadId::NIL {
            self.w.last_from = ThreadId(out[0]);
        }
        if c.nr == Syscall::Ipc as u32 && ThreadId(c.a[0]) == ThreadId::ROOT {
            // A random message may be a valid RAM request: the root keeps what it zeroes.
            let tag = MsgTag(c.a[3]);
            if tag.label() == proto::LABEL + op::RAM && tag.untyped() == 3 {
                count_ram(c.a[5], out);
            }
        }
        if let Some(why) = check(&self.w, c, out, col) {
            violation(self.calls, why, c, out);
        }
    }

    /// A request to the root task with random contents (never `Exit`, never touching the
    /// fuzzer's own infrastructure threads).
    fn root_request(&mut self) {
        let r = &mut self.r;
        let w = &self.w;
        let mut words = [0u32; proto::MAX_WORDS];
        let o = if r.percent(90) {
            r.below(op::EXIT as u32) as u16
        } else {
            r.below(40) as u16
        };
        let (n, id) = match o {
            op::RAM => {
                words[0] = match r.below(3) {
                    0 => layout::WINDOW + ((r.u32() & (layout::WINDOW_SIZE - 1)) & !0xfff),
                    1 => gen::word(r),
                    _ => r.u32() & !0xfff,
                };
                words[1] = match r.below(4) {
                    0 => (1 + r.below(16)) << 12,
                    1 => r.pick(&[0, 1, 0x1000, proto::MAX_RAM, proto::MAX_RAM + 0x1000]),
                    2 => 1 << (12 + r.below(16)),
                    _ => r.u32(),
                };
                words[2] = r.below(34);
                (3, ThreadId::NIL)
            }
            op::THREADS => {
                words[0] = r.below(40);
                (1, ThreadId::NIL)
            }
            op::CREATE_THREAD => {
                let id = match r.below(3) {
                    0 => w
                        .spare
                        .get(r.below(w.spare.len().max(1) as u32) as usize)
                        .map(|&n| ThreadId::new(n, 1))
                        .unwrap_or(ThreadId::NIL),
                    1 => r.pick(&w.victims),
                    _ => gen::thread_id(r, w),
                };
                words[0] = id.0;
                words[1] = match r.below(4) {
                    0 => id.0,
                    1 => w.me.0,
                    _ => gen::thread_id(r, w).0,
                };
                words[2] = match r.below(3) {
                    0 => ThreadId::ROOT.0,
                    1 => w.me.0,
                    _ => gen::thread_id(r, w).0,
                };
                words[3] = r.below(130);
                words[4] = gen::safe_ip(r);
                words[5] = if r.percent(70) {
                    rt::pool_stack_top(id.number().max(kestrel_abi::FIRST_THREAD_NO))
                } else {
                    gen::word(r)
                };
                (6, id)
            }
            op::DELETE_THREAD => {
                let id = match r.below(3) {
                    0 => r.pick(&w.victims),
                    1 => w
                        .created
                        .first()
                        .or(w.vcpus.first())
                        .copied()
                        .unwrap_or(w.sibling),
                    _ => gen::thread_id(r, w),
                };
                words[0] = id.0;
                (1, id)
            }
            op::DEVICE => {
                words[0] = match r.below(3) {
                    0 => kestrel_abi::DEVICE_WINDOW + (r.u32() & 0x0fff_f000),
                    1 => 0xef60_0000 + (r.below(16) << 12),
                    _ => gen::word(r),
                };
                (1, ThreadId::NIL)
            }
            op::INTERRUPT => {
                words[0] = r.below(kestrel_abi::FIRST_THREAD_NO + 4);
                words[1] = gen::thread_id(r, w).0;
                words[2] = r.below(8);
                (3, ThreadId::NIL)
            }
            op::VCPU => {
                let id = match r.below(2) {
                    0 => w
                        .spare
                        .get(r.below(w.spare.len().max(1) as u32) as usize)
                        .map(|&n| ThreadId::new(n, 1))
                        .unwrap_or(ThreadId::NIL),
                    _ => gen::thread_id(r, w),
                };
                words[0] = id.0;
                words[1] = r.below(130);
                (2, id)
            }
            op::ARCHIVE => {
                words[0] = match r.below(2) {
                    0 => layout::WINDOW + (r.below(64) << 24),
                    _ => gen::word(r),
                };
                (1, ThreadId::NIL)
            }
            _ => {
                for x in words.iter_mut() {
                    *x = gen::word(r);
                }
                (r.below(7) as usize, ThreadId::NIL)
            }
        };
        let n = if r.percent(8) { r.below(7) as usize } else { n };
        let label = proto::LABEL.wrapping_add(o);
        let mut c = Call {
            nr: Syscall::Ipc as u32,
            a: [0; 10],
        };
        c.a[0] = ThreadId::ROOT.0;
        c.a[1] = ThreadId::ROOT.0;
        // The root answers at once; a second is plenty even on a loaded host.
        c.a[2] = Timeouts::new(Timeout(10_000), Timeout(10_000)).0;
        c.a[3] = MsgTag::new(label, n as u32, 0).0;
        c.a[4..10].copy_from_slice(&words);
        utcb().acceptor = gen::acceptor(r);
        guard(r, w, &mut c, true);
        words.copy_from_slice(&c.a[4..10]);
        let out = syscall_raw(c.nr, c.a);
        trace(self.calls, &c, &out);
        let tag = MsgTag(out[3]);
        let col = if tag.is_error() {
            stats::ipc_col(out[1])
        } else if tag.label() == proto::OK {
            stats::OK
        } else if tag.label() == proto::ERROR {
            match RootError::from_raw(out[4]) {
                Some(e) => stats::ROOT_BASE + e as usize,
                None => stats::BAD_ROOT,
            }
        } else {
            stats::BAD_ROOT
        };
        stats::count(ROOT_REQ, col);
        if o == op::RAM && MsgTag(c.a[3]).untyped() == 3 {
            count_ram(words[1], &out);
        }
        let sent = MsgTag(c.a[3]);
        if col == stats::OK && sent.untyped() == n && sent.label() == label {
            self.root_done(o, &words, id);
        }
        let why = if col == stats::BAD_ROOT {
            Some("the root task answered with neither OK nor a refusal code")
        } else if col == stats::BAD_IPC {
            Some("IPC error word decodes to no IpcError")
        } else if col == stats::OK && o == op::VCPU && n == 2 && !self.w.privileged {
            Some("the root task created a vCPU for a program without the vCPU right")
        } else if col == stats::OK && o == op::DEVICE && n == 1 {
            // Also what makes the mapping probe exact: the root keeps its window's mapping
            // of every device page it hands out.
            Some("the root task handed a device page to a program without the device right")
        } else if col == stats::OK
            && ((o == op::VCPU && n == 2 && words[1] > self.w.ceiling())
                || (o == op::CREATE_THREAD && n == 6 && words[3] > self.w.ceiling()))
        {
            Some("the root task created a thread above the program's ceiling")
        } else {
            None
        };
        if let Some(why) = why {
            violation(self.calls, why, &c, &out);
        }
    }

    /// Bookkeeping after a request the root granted.
    fn root_done(&mut self, o: u16, _words: &[u32; proto::MAX_WORDS], id: ThreadId) {
        let w = &mut self.w;
        match o {
            op::CREATE_THREAD => {
                if !w.victims.contains(&id) && !w.created.contains(&id) {
                    let _ = w.created.push(id);
                }
            }
            op::DELETE_THREAD => {
                w.created.retain(|&t| t != id);
                w.vcpus.retain(|&t| t != id);
            }
            op::VCPU => {
                w.created.retain(|&t| t != id);
                if !w.vcpus.contains(&id) {
                    let _ = w.vcpus.push(id).or_else(|_| w.created.push(id));
                }
            }
            _ => {}
        }
    }

    /// Keeps the victims and (privileged) vCPUs alive: a victim the root stopped or a
    /// random request deleted is created again.
    pub fn maintain(&mut self) {
        for (i, &v) in self.w.victims.clone().iter().enumerate() {
            let state =
                kestrel_user::sys::exchange_registers(v, 0, 0, 0, ThreadId::NIL, ThreadId::NIL);
            let gone = match state {
                Err(_) => true,
                Ok(s) => s.state & exreg::STATE_DEAD != 0,
            };
            if gone {
                let _ = kestrel_user::root::delete_thread(v);
                let _ = create_victim(i, v, self.w.me);
            }
        }
        if self.w.privileged {
            // A vCPU whose exception handler a random call moved to another space is no
            // longer ours to drive (VcpuControl says NoPrivilege): replace it, so the vCPU
            // calls keep reaching the virtualization code.
            for v in self.w.vcpus.clone() {
                let ours = kestrel_user::sys::vcpu_control(v, vcpuctl::GET_STATE, 0, 0, 0);
                if ours.is_err() {
                    let _ = kestrel_user::root::delete_thread(v);
                    self.w.vcpus.retain(|&t| t != v);
                    if !self.w.spare.contains(&v.number()) {
                        let _ = self.w.spare.push(v.number());
                    }
                }
            }
            while self.w.vcpus.len() < NVCPUS {
                let Some(n) = self.w.spare.pop() else { break };
                let id = ThreadId::new(n, 1);
                if kestrel_user::root::vcpu(id, VCPU_PRIORITY).is_err() {
                    break;
                }
                let _ = self.w.vcpus.push(id);
                // Mostly running: its faults come to the fuzzing thread, which answers them.
                if self.r.percent(70) {
                    let _ = kestrel_user::sys::exchange_registers(
                        id,
                        exreg::START,
                        0,
                        0,
                        ThreadId::NIL,
                        ThreadId::NIL,
                    );
                }
            }
        }
    }
}

/// Counts the pages of a RAM request of `size` bytes the root answered with `out`: granted
/// (OK), or taken and then lost (the reply failed in our receive phase: the grant did not
/// land, or we stopped waiting). Either way the root keeps its own mappings of them.
fn count_ram(size: u32, out: &[u32; 10]) {
    if !size.is_multiple_of(kestrel_abi::PAGE_SIZE) || size > proto::MAX_RAM {
        return;
    }
    let tag = MsgTag(out[3]);
    let pages = size / kestrel_abi::PAGE_SIZE;
    if tag.is_error() {
        let receive_failed = kestrel_abi::IpcError::decode(out[1])
            .is_some_and(|(_, phase)| phase == kestrel_abi::IpcPhase::Receive);
        if receive_failed {
            LOST_PAGES.fetch_add(pages, Relaxed);
        }
    } else if tag.label() == proto::OK {
        GRANTED_PAGES.fetch_add(pages, Relaxed);
    }
}

/// The vCPUs' priority: below the fuzzing thread and the sibling.
pub const VCPU_PRIORITY: u32 = 50;
/// The victims' priorities (spin, halt, scloop): they run when the fuzzer and the sibling
/// wait, so they take little from either.
const VICTIM_PRIORITY: [u32; layout::NVICTIMS] = [1, 50, 50];

/// Creates victim `i` (spin, halt, scloop) as thread `id` in the fuzzer's space.
pub fn create_victim(
    i: usize,
    id: ThreadId,
    space: ThreadId,
) -> Result<(), kestrel_user::root::Error> {
    let ip = [
        crate::stubs::spin(),
        crate::stubs::halt(),
        crate::stubs::scloop(),
    ][i];
    let sp = rt::pool_stack_top(id.number());
    kestrel_user::root::Root
        .create_thread(id, space, ThreadId::ROOT, VICTIM_PRIORITY[i], ip, sp)
        .map(|_| ())
}

/// A random IPC: any partners, tag, words, typed items, timeouts; sometimes a reply to
/// whoever sent last (a vCPU's fault, a page fault, an interrupt) with a fault-reply shape.
fn ipc(r: &mut Rng, w: &World, own: bool) -> Call {
    let mut a = [0u32; 10];
    let reply = r.percent(15) && !w.last_from.is_nil();
    let to = if reply {
        w.last_from
    } else {
        match r.below(10) {
            0 => w.receiver,
            1 => w.sibling,
            2 => ThreadId::ROOT,
            _ => gen::thread_id(r, w),
        }
    };
    let from = match r.below(6) {
        0 => ThreadId::NIL,
        1 => ThreadId::ANY,
        2 | 3 => to,
        _ => gen::thread_id(r, w),
    };
    a[0] = to.0;
    a[1] = from.0;
    a[2] = gen::timeouts(r).0;
    let tag = if reply {
        let any = r.u32() as u16;
        MsgTag::new(
            r.pick(&[0, kestrel_abi::label::KILL, any]),
            r.below(7),
            if r.percent(30) { 2 } else { 0 },
        )
    } else {
        gen::tag(r)
    };
    a[3] = tag.0;
    for x in a[4..].iter_mut() {
        *x = if reply {
            r.below(1 << 10)
        } else {
            gen::word(r)
        };
    }
    if own {
        let u = utcb();
        let words = tag.words().min(kestrel_abi::NUM_MRS - 1);
        for i in REG_MRS..=words {
            u.mr[i] = gen::word(r);
        }
        let mut i = tag.untyped() + 1;
        while i < words {
            let [x, y] = gen::item(r);
            set_mr(&mut a, i, x);
            set_mr(&mut a, i + 1, y);
            i += 2;
        }
        u.acceptor = gen::acceptor(r);
    }
    Call {
        nr: Syscall::Ipc as u32,
        a,
    }
}

/// Message register `i` of a call: MR1..MR6 in r7..r12, the rest in the UTCB.
fn set_mr(a: &mut [u32; 10], i: usize, v: u32) {
    if i < REG_MRS {
        a[3 + i] = v;
    } else if i < kestrel_abi::NUM_MRS {
        utcb().mr[i] = v;
    }
}

fn get_mr(a: &[u32; 10], i: usize) -> u32 {
    if i < REG_MRS {
        a[3 + i]
    } else if i < kestrel_abi::NUM_MRS {
        utcb().mr[i]
    } else {
        0
    }
}

fn kdebug_args(r: &mut Rng, a: &mut [u32; 10]) {
    let invalid = |r: &mut Rng| {
        r.pick(&[
            layout::UNMAPPED,
            0x100,
            0x0010_0000,
            kestrel_abi::USER_END,
            0xffff_fff0,
            kestrel_abi::USER_BASE - 4,
        ])
    };
    match r.below(14) {
        0 => {
            a[0] = kdebug::PUTC;
            a[1] = b'.' as u32;
        }
        1..=4 => {
            a[0] = kdebug::WRITE;
            let len = match r.below(4) {
                0 => r.below(LINE.len() as u32 + 1),
                1 => r.pick(&[0, kdebug::WRITE_MAX, kdebug::WRITE_MAX + 1, u32::MAX]),
                _ => r.below(64),
            };
            let len_in = len.min(LINE.len() as u32);
            a[1] = if r.percent(60) {
                LINE.as_ptr() as u32 + LINE.len() as u32 - len_in
            } else {
                invalid(r)
            };
            a[2] = len;
        }
        5..=7 => {
            a[0] = kdebug::SET_NAME;
            let len = r.below(24);
            let len_in = len.min(NAMES.len() as u32);
            a[1] = if r.percent(70) {
                NAMES.as_ptr() as u32 + r.below(NAMES.len() as u32 - len_in + 1)
            } else {
                invalid(r)
            };
            a[2] = len;
        }
        8 | 9 => a[0] = kdebug::SHUTDOWN,
        10 | 11 => a[0] = kdebug::TIMEBASE,
        _ => a[0] = kdebug::TIMEBASE + 1 + r.below(100),
    }
}

/// A register frame for `ExchangeRegisters(SET_FRAME)` on a victim: random registers, an
/// instruction pointer at a stub or outside the image, and in r14..r24 a generated call
/// that the scloop victim repeats.
fn victim_frame(r: &mut Rng, w: &World) -> FrameRegs {
    let mut f = FrameRegs::default();
    for g in f.gpr.iter_mut() {
        *g = gen::word(r);
    }
    let kind = KINDS[r.weighted(&weights(w.privileged))];
    let kind = if kind == Kind::Root { Kind::Ipc } else { kind };
    let mut tmp = Fuzzer {
        r: Rng::new(r.u64()),
        w: World {
            victims: w.victims,
            vcpus: w.vcpus.clone(),
            created: w.created.clone(),
            spare: heapless::Vec::new(),
            ..*w
        },
        calls: 0,
    };
    let mut c = tmp.generate(kind, false);
    guard(r, w, &mut c, false);
    let first = crate::stubs::SCLOOP_FIRST_GPR;
    f.gpr[first] = c.nr;
    f.gpr[first + 1..first + 11].copy_from_slice(&c.a);
    f.cr = r.u32();
    f.lr = gen::word(r);
    f.ctr = gen::word(r);
    f.xer = r.u32();
    f.ip = gen::safe_ip(r);
    f.msr = r.u32();
    f
}

/// Changes a few fields of a vCPU state at random (for `VcpuControl(SET_STATE)`).
fn mutate_vcpu_state(r: &mut Rng, s: &mut VcpuState) {
    for _ in 0..1 + r.below(6) {
        let v = gen::word(r);
        match r.below(20) {
            0 => s.pc = v,
            1 => s.msr = v,
            2 => s.gpr[r.below(32) as usize] = v,
            3 => s.srr0 = v,
            4 => s.srr1 = v,
            5 => s.ivpr = v,
            6 => s.ivor[r.below(16) as usize] = v,
            7 => s.pid = v,
            8 => s.mmucr = v,
            9 => s.dec = v,
            10 => s.tcr = v,
            11 => s.tsr = v,
            12 => s.dbcr0 = v,
            13 => s.esr = v,
            14 => s.irq_line = v,
            15 => s.crit_line = v,
            16 => s.ccr0 = v,
            17 => s.iac[r.below(4) as usize] = v,
            18 => s.csrr1 = v,
            _ => s.sprg[r.below(8) as usize] = v,
        }
    }
}

/// Removes what would only hurt the fuzzer itself (see the module comment). `own`: the
/// call is the fuzzing thread's (its UTCB holds the message registers and the frame).
fn guard(r: &mut Rng, w: &World, c: &mut Call, own: bool) {
    match Syscall::from_raw(c.nr) {
        Some(Syscall::Ipc) => {
            let tag = MsgTag(c.a[3]);
            let words = tag.words().min(kestrel_abi::NUM_MRS - 1);
            // A reply to a fault of one of our own threads (a victim whose pager a random
            // call made us) maps into our own space anywhere (the fault window is the whole
            // space): its items go to the window region, never over the fuzzer's image.
            let to = ThreadId(c.a[0]);
            let into_us = to == w.me || w.victims.contains(&to);
            if own || words < REG_MRS {
                let mut i = tag.untyped() + 1;
                while i < words {
                    let mut x = get_mr(&c.a, i);
                    if into_us {
                        x = layout::WINDOW | (x & (layout::WINDOW_SIZE - 1));
                    }
                    let [x, y] = gen::safe_item(x, get_mr(&c.a, i + 1));
                    set_mr(&mut c.a, i, x);
                    set_mr(&mut c.a, i + 1, y);
                    i += 2;
                }
            } else {
                // A victim's UTCB is not ours to check: no typed items from it.
                c.a[3] = MsgTag(c.a[3] & !(0x3f << 6)).0;
            }
            if ThreadId(c.a[0]) == ThreadId::ROOT {
                if own {
                    guard_root(w, c);
                } else {
                    // A victim repeats its call forever: a RAM request in that loop would
                    // drain the root's memory unseen (the fuzzing thread's own requests are
                    // counted, see `count_ram`). Its messages go to the receiver instead.
                    c.a[0] = w.receiver.0;
                }
            }
        }
        Some(Syscall::ExchangeRegisters) => {
            let dest = ThreadId(c.a[0]);
            let mut control = c.a[1];
            if w.is_infra(dest) {
                let mut allowed = exreg::START | exreg::ABORT_IPC | exreg::GET_FRAME;
                if dest == w.me {
                    allowed |= exreg::SET_EXC_HANDLER;
                    // A halted fuzzer waits for the watchdog: rarely, or it mostly waits.
                    if r.percent(3) {
                        allowed |= exreg::HALT;
                    }
                }
                if c.a[4] == ThreadId::ROOT.0 {
                    allowed |= exreg::SET_PAGER;
                }
                control &= allowed | !exreg::ALL;
            }
            if !own {
                control &= !(exreg::SET_FRAME | exreg::GET_FRAME);
            }
            c.a[1] = control;
            c.a[3] = gen::outside_image(c.a[3]);
            if own && control & exreg::SET_FRAME != 0 {
                let f = &mut utcb().frame;
                f.ip = gen::outside_image(f.ip);
            }
        }
        Some(Syscall::Schedule) => {
            let dest = ThreadId(c.a[0]);
            if w.is_infra(dest) && dest != w.me {
                c.a[0] = w.victims[0].0;
            }
            c.a[1] = below_vmm_band(w, c.a[1]);
        }
        Some(Syscall::KDebug) => {
            if matches!(c.a[0], kdebug::PUTC | kdebug::WRITE | kdebug::SET_NAME) {
                kdebug_args(r, &mut c.a);
            }
        }
        _ => {}
    }
}

/// A priority for one of the fuzzer's threads: in privileged mode not in the band above
/// the programs' ceiling (`PROGRAM_CEILING + 1 ..= VMM_CEILING`). The vCPU right comes
/// with that band (ADR 0013): a thread spinning in it starves every other program by
/// design, which the sibling would report as a finding every time. Priorities above the
/// program's ceiling stay, so the ceiling checks are still exercised.
fn below_vmm_band(w: &World, prio: u32) -> u32 {
    let band = kestrel_abi::root::PROGRAM_CEILING + 1..=kestrel_abi::root::VMM_CEILING;
    if w.privileged && band.contains(&prio) {
        kestrel_abi::root::PROGRAM_CEILING
    } else {
        prio
    }
}

/// The root protocol's requests that would end or hijack the fuzzer: `Exit`, deleting or
/// re-creating one of its infrastructure threads, starting a thread inside its image.
fn guard_root(w: &World, c: &mut Call) {
    let tag = MsgTag(c.a[3]);
    let Some(o) = tag.label().checked_sub(proto::LABEL) else {
        return;
    };
    let untyped = tag.untyped();
    match o {
        op::EXIT if untyped == 1 => {
            c.a[3] = MsgTag::new(proto::LABEL + 0x100, 1, tag.typed() as u32).0;
        }
        op::DELETE_THREAD if untyped == 1 && w.is_infra(ThreadId(c.a[4])) => {
            c.a[4] = w.victims[0].0;
        }
        op::CREATE_THREAD if untyped == 6 => {
            if w.is_infra(ThreadId(c.a[4])) {
                c.a[4] = w.victims[0].0;
            }
            c.a[7] = below_vmm_band(w, c.a[7]);
            c.a[8] = gen::outside_image(c.a[8]);
        }
        op::VCPU if untyped == 2 => c.a[5] = below_vmm_band(w, c.a[5]),
        _ => {}
    }
}

/// What the ABI promises for this call whatever its arguments; `Some(why)` if the kernel
/// answered otherwise.
fn check(w: &World, c: &Call, out: &[u32; 10], col: usize) -> Option<&'static str> {
    let status = out[0];
    let Some(nr) = Syscall::from_raw(c.nr) else {
        return (status != KError::NoSyscall as u32)
            .then_some("an unknown system call number was not refused with NoSyscall");
    };
    if col == stats::BAD_STATUS {
        return Some("the status is no KError code");
    }
    if col == stats::BAD_IPC {
        return Some("the IPC error word decodes to no IpcError");
    }
    let no_priv = status == KError::NoPrivilege as u32;
    match nr {
        Syscall::ThreadControl | Syscall::SpaceControl | Syscall::InterruptControl if !no_priv => {
            Some("a privileged call from a program was not refused with NoPrivilege")
        }
        Syscall::KernelInfo if matches!(c.a[0], kinfo::MEMORY | kinfo::BOOT_MODULE) && !no_priv => {
            Some("KernelInfo MEMORY/BOOT_MODULE from a program was not refused with NoPrivilege")
        }
        Syscall::KDebug if c.a[0] == kdebug::SHUTDOWN && !no_priv => {
            Some("KDebug SHUTDOWN from a program was not refused with NoPrivilege")
        }
        Syscall::TraceControl if c.a[1] == 0 && !no_priv => {
            Some("TraceControl over all VMs from a program was not refused with NoPrivilege")
        }
        Syscall::ExchangeRegisters | Syscall::Schedule | Syscall::VcpuControl
            if w.is_foreign(ThreadId(c.a[0])) && status == 0 =>
        {
            Some("a call on another program's thread succeeded")
        }
        Syscall::Schedule if status == 0 && c.a[1] > w.ceiling() => {
            Some("Schedule granted a priority above the program's ceiling")
        }
        _ => None,
    }
}

fn violation(calls: u32, why: &str, c: &Call, out: &[u32; 10]) {
    let n = stats::VIOLATIONS.fetch_add(1, Relaxed) + 1;
    if n <= MAX_PRINTED {
        println!(
            "sysfuzz: VIOLATION {n} at call {calls}: {why}: nr={} args={:08x?} -> {:08x?}",
            c.nr, c.a, out
        );
    }
}
