//! `kestrel-sysfuzz`: the native system-call fuzzer (issue 9, `docs/adr/0016-syscall-fuzzer.md`).
//!
//! A program of the root task, started beside `kestrel-sibling`. Its first thread
//!
//! 1. finds the sibling (the thread that answers `proto::QUERY` with the magic word), takes
//!    every free thread number from the root task and 256 KiB of scratch RAM, starts a
//!    receiver and a probe receiver, and learns whether it has the vCPU right (privileged
//!    mode, `root.vcpu=kestrel-sysfuzz`);
//! 2. probes the capacity (`probe`): threads, spaces, vCPUs, page mappings;
//! 3. starts the fuzzing thread (`fuzz`), which makes `fz.calls` random system calls
//!    and root-task requests from seed `fz.seed`, and meanwhile is its watchdog
//!    (a fuzzing thread that makes no call for two periods is woken with
//!    `ExchangeRegisters(ABORT_IPC | START)`) and reporter (every `fz.report_ms`: the
//!    calls, the sibling's count, the counts per system call and per result);
//! 4. deletes every thread the fuzzing created, probes again, compares, stops the sibling
//!    and prints one summary line: `sysfuzz: summary ... result=PASS|FAIL`. It exits with
//!    code 1 on a violation, a starved sibling, a corrupt sibling or a leak.
//!
//! Kernel command line (short keys: the kernel keeps only `BOOTARGS_LEN` bytes of it):
//! `fz.seed=N` (default 1), `fz.calls=N` (default 20000), `fz.mode=priv|unpriv` (which mode
//! the caller expects; default unpriv), `fz.report_ms=N` (default 1000), `fz.kinds=ipc,...`
//! (only these kinds of step, to minimise a finding; names in `fuzz::KIND_NAMES`),
//! `fz.trace=A-B` (print calls A to B with their results).
//! `scripts/sysfuzz.py` runs it and checks the output.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod fuzz;
mod gen;
mod layout;
mod probe;
#[path = "proto.rs"]
mod proto;
mod stats;
mod stubs;

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::root::{PROGRAM_CEILING, VMM_CEILING};
use kestrel_abi::{exreg, kinfo, ThreadId, Timeout, Timeouts};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, root, rt, sys};
use layout::World;
use probe::Capacity;

/// Priority of the fuzzing thread: an unprivileged program's ceiling, which the sibling's
/// worker has too (round robin). The first thread (watchdog, reporter) runs at the
/// program's ceiling, and so do the receivers: in privileged mode above the fuzzing thread.
const FUZZ_PRIORITY: u32 = PROGRAM_CEILING;
/// The fuzzing thread's last message to the first thread: MR1 = [`DONE_MAGIC`].
const DONE: u16 = 0x5f10;
const DONE_MAGIC: u32 = 0x444f_4e45;
/// The watchdog's period.
const WATCH_US: u32 = 20_000;

static SEED: AtomicU32 = AtomicU32::new(1);
static BUDGET: AtomicU32 = AtomicU32::new(20_000);
static REPORT_MS: AtomicU32 = AtomicU32::new(1000);
/// Who is who, for the fuzzing thread (set before it starts).
static IDS: [AtomicU32; 5] = [const { AtomicU32::new(0) }; 5];
const ID_MAIN: usize = 0;
const ID_RECEIVER: usize = 1;
const ID_PROBE_RX: usize = 2;
const ID_SIBLING: usize = 3;
const ID_ME: usize = 4;
static PRIVILEGED: AtomicU32 = AtomicU32::new(0);
/// The program's thread numbers the fuzzing thread may use (victims first).
static SPARE: [AtomicU32; 128] = [const { AtomicU32::new(0) }; 128];
static NSPARE: AtomicU32 = AtomicU32::new(0);

#[no_mangle]
pub extern "C" fn task_main() {
    kestrel_user::console::set_unprefixed();
    let _ = sys::set_name("sysfuzz");
    let mut buf = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut buf);
    let args = core::str::from_utf8(&buf[..n]).unwrap_or("");
    let mut want_priv = false;
    for a in args.split_ascii_whitespace() {
        if let Some(v) = a.strip_prefix("fz.seed=").and_then(|v| v.parse().ok()) {
            SEED.store(v, Relaxed);
        }
        if let Some(v) = a.strip_prefix("fz.calls=").and_then(|v| v.parse().ok()) {
            BUDGET.store(v, Relaxed);
        }
        if let Some(v) = a.strip_prefix("fz.report_ms=").and_then(|v| v.parse().ok()) {
            REPORT_MS.store(v, Relaxed);
        }
        if let Some(v) = a.strip_prefix("fz.kinds=") {
            let mask = v.split(',').fold(0u32, |m, k| {
                m | fuzz::KIND_NAMES
                    .iter()
                    .position(|&n| n == k)
                    .map_or(0, |i| 1 << i)
            });
            fuzz::KIND_MASK.store(mask, Relaxed);
        }
        if let Some((from, to)) = a.strip_prefix("fz.trace=").and_then(|v| v.split_once('-')) {
            if let (Ok(from), Ok(to)) = (from.parse(), to.parse()) {
                fuzz::TRACE_FROM.store(from, Relaxed);
                fuzz::TRACE_TO.store(to, Relaxed);
            }
        }
        if let Some(v) = a.strip_prefix("fz.mode=") {
            want_priv = v == "priv";
        }
    }
    let code = match run(want_priv) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(why) => {
            println!("sysfuzz: ERROR {why}");
            println!("sysfuzz: summary result=FAIL error");
            // Without the sibling's end the root task would never stop the machine.
            let sibling = ThreadId(IDS[ID_SIBLING].load(Relaxed));
            if !sibling.is_nil() {
                let _ = stop_sibling(sibling);
            }
            1
        }
    };
    rt::exit(code);
}

fn run(want_priv: bool) -> Result<bool, &'static str> {
    let me = sys::my_id();
    let seed = SEED.load(Relaxed);
    let budget = BUDGET.load(Relaxed);
    let sibling = find_sibling(me).ok_or("no sibling answered (start kestrel-sibling first)")?;
    IDS[ID_SIBLING].store(sibling.0, Relaxed);
    // Every free thread number: the fuzzer's pool, and what bounds the thread probe.
    let mut numbers: heapless::Vec<u32, 128> = heapless::Vec::new();
    for count in [32, 16, 8, 4, 2, 1] {
        while let Ok(ids) = root::threads(count) {
            for t in ids {
                let _ = numbers.push(t.number());
            }
        }
    }
    if numbers.len() < 8 {
        return Err("the root task gave fewer than 8 thread numbers");
    }
    let receiver = ThreadId::new(numbers.remove(0), 1);
    let probe_rx = ThreadId::new(numbers.remove(0), 1);
    let fuzzer = ThreadId::new(numbers.remove(0), 1);
    // The vCPU right (privileged mode): try it; the refusal is the unprivileged mode's first
    // check. A program with the right has the VMM ceiling.
    let privileged = {
        let t = ThreadId::new(numbers[0], 1);
        let ok = root::vcpu(t, 0).is_ok();
        if ok {
            let _ = root::delete_thread(t);
        }
        ok
    };
    let ceiling = if privileged {
        VMM_CEILING
    } else {
        PROGRAM_CEILING
    };
    root::spawn(
        receiver,
        receive_loop,
        layout::WINDOW,
        ceiling,
        ThreadId::ROOT,
    )
    .map_err(|_| "cannot start the receiver")?;
    root::spawn(
        probe_rx,
        receive_loop,
        layout::PROBE_DST,
        ceiling,
        ThreadId::ROOT,
    )
    .map_err(|_| "cannot start the probe receiver")?;
    let mode = if privileged { "priv" } else { "unpriv" };
    println!(
        "sysfuzz: start seed={seed} calls={budget} mode={mode} sibling={sibling:?} numbers={} image={:#x}..{:#x}",
        numbers.len(),
        layout::image().0,
        layout::image().1
    );
    let (start, end) = layout::image();
    if start != layout::PROBE_SRC || end - start < 1 << layout::PROBE_SRC_LOG2 {
        return Err("the image is not at USER_BASE or smaller than the probe's MiB");
    }
    if privileged != want_priv {
        return Err("the program's vCPU right does not match sysfuzz.mode (root.vcpu=)");
    }
    // The root maps the archive from its own RAM window, creating its mappings of the pages
    // it never touched on the way (and keeping them): once here, so the probes do not see it.
    let _ = root::archive(layout::WINDOW);
    let _ = sys::unmap(layout::window_fpage(), kestrel_abi::unmapflags::FLUSH_OWN);
    touch_image();
    let before = probe::run(&numbers, me, probe_rx, privileged);
    print_capacity("before", &before);
    // After the probe, so the probes before and after see the same mappings (the scratch
    // region is flushed before the second).
    root::ram(layout::SCRATCH, layout::SCRATCH_SIZE, layout::SCRATCH_LOG2)
        .map_err(|_| "no scratch RAM")?;

    for (slot, &n) in SPARE.iter().zip(numbers.iter()) {
        slot.store(n, Relaxed);
    }
    NSPARE.store(numbers.len() as u32, Relaxed);
    for (i, t) in [me, receiver, probe_rx, sibling, fuzzer].iter().enumerate() {
        IDS[i].store(t.0, Relaxed);
    }
    PRIVILEGED.store(privileged as u32, Relaxed);
    let sibling_start = query_sibling(sibling).map(|c| c.0).unwrap_or(0);
    let tb_hz = sys::kernel_info(kinfo::CLOCK)
        .map(|v| v[0])
        .unwrap_or(1)
        .max(1) as u64;
    let t0 = sys::timebase();
    root::spawn(fuzzer, fuzz_main, 0, FUZZ_PRIORITY, ThreadId::ROOT)
        .map_err(|_| "cannot start the fuzzing thread")?;

    let ms = |t: u64| (t.wrapping_sub(t0) * 1000 / tb_hz) as u32;
    let report_ms = REPORT_MS.load(Relaxed).max(100);
    let (mut last_calls, mut idle_periods) = (0, 0);
    let (mut last_report, mut last_count, mut starved) = (0u32, sibling_start, 0u32);
    loop {
        if let Ok((_, m)) = ipc::receive(fuzzer, Timeout::from_us(WATCH_US)) {
            if m.label() == DONE && m.mr(1) == DONE_MAGIC {
                break;
            }
        }
        let calls = stats::CALLS.load(Relaxed);
        if calls == last_calls {
            idle_periods += 1;
            if idle_periods >= 2 {
                let ctl = exreg::ABORT_IPC | exreg::START;
                let old = sys::exchange_registers(fuzzer, ctl, 0, 0, ThreadId::NIL, ThreadId::NIL);
                // It may have lowered its own priority below the victims' (its scheduler's
                // space, ours, may do so): back to where it started.
                let _ = sys::schedule(fuzzer, FUZZ_PRIORITY, 0);
                let n = stats::RESCUES.fetch_add(1, Relaxed);
                if n < 3 || n.is_power_of_two() {
                    match old {
                        Ok(o) => println!(
                            "sysfuzz: watchdog: rescue {} at call {calls}: state {:#x} ip {:#010x} sp {:#010x} pager {:?}",
                            n + 1, o.state, o.ip, o.sp, o.pager
                        ),
                        Err(e) => println!("sysfuzz: watchdog: rescue {} at call {calls}: {e:?}", n + 1),
                    }
                }
                idle_periods = 0;
            }
        } else {
            idle_periods = 0;
            last_calls = calls;
        }
        let now = ms(sys::timebase());
        if now.wrapping_sub(last_report) >= report_ms {
            let count = query_sibling(sibling).map(|c| c.0);
            println!(
                "sysfuzz: progress calls={calls}/{budget} sibling={} violations={} rescues={} ms={now}",
                count.map_or(-1, |c| c as i64),
                stats::VIOLATIONS.load(Relaxed),
                stats::RESCUES.load(Relaxed)
            );
            stats::print_counts();
            stats::print_results();
            match count {
                Some(c) if c != last_count => last_count = c,
                _ => {
                    starved += 1;
                    println!(
                        "sysfuzz: STARVED the sibling made no progress in {} ms (count {last_count})",
                        now.wrapping_sub(last_report)
                    );
                }
            }
            last_report = now;
        }
    }
    let elapsed = ms(sys::timebase());
    stats::print_table();

    // Back to the state of the first probe: only the first thread and the receivers live.
    let keep = [me, receiver, probe_rx];
    let mut all = numbers.clone();
    let _ = all.push(fuzzer.number());
    for &n in &all {
        let t = ThreadId::new(n, 1);
        if keep.contains(&t) {
            continue;
        }
        let exists = !matches!(
            sys::exchange_registers(t, 0, 0, 0, ThreadId::NIL, ThreadId::NIL),
            Err(kestrel_abi::KError::InvalidThread)
        );
        if exists {
            let _ = root::delete_thread(t);
        }
    }
    // Everything our space holds goes (faults of our own threads may have been answered
    // with mappings anywhere in it); `touch_image` brings the image back from the root.
    let everything = kestrel_abi::Fpage::complete(kestrel_abi::Rights::RWX);
    let _ = sys::unmap(everything, kestrel_abi::unmapflags::FLUSH_OWN);
    touch_image();
    let after = probe::run(&numbers, me, probe_rx, privileged);
    print_capacity("after", &after);

    let granted = fuzz::GRANTED_PAGES.load(Relaxed);
    let lost = fuzz::LOST_PAGES.load(Relaxed);
    let mut leaks = 0;
    for (what, b, a, slack) in [
        ("threads", before.threads, after.threads, 0),
        ("spaces", before.spaces, after.spaces, 0),
        ("vcpus", before.vcpus, after.vcpus, 0),
        // Exact: the root keeps no mapping of the RAM it zeroed for a request once the
        // answer's grants are done or failed (it unmaps the block from its window); the
        // archive's pages in its window were mapped before the first probe; device pages
        // (the root keeps its window's mapping of those) it refuses us, having given us no
        // device right.
        ("map_pages", before.map_pages, after.map_pages, 0),
    ] {
        if a.saturating_add(slack) < b {
            leaks += 1;
            println!("sysfuzz: LEAK {what}: {b} before, {a} after (tolerance {slack})");
        }
    }

    let (count, corrupt) = stop_sibling(sibling).unwrap_or((0, u32::MAX));
    let calls = stats::CALLS.load(Relaxed);
    let violations = stats::VIOLATIONS.load(Relaxed);
    let pass = violations == 0
        && starved == 0
        && corrupt == 0
        && leaks == 0
        && count > sibling_start
        && calls >= budget;
    println!(
        "sysfuzz: summary seed={seed} mode={mode} calls={calls} ms={elapsed} violations={violations} rescues={} starved={starved} sibling={} corrupt={corrupt} leaks={leaks} before=[{}] after=[{}] granted_pages={granted} lost_pages={lost} result={}",
        stats::RESCUES.load(Relaxed),
        count.saturating_sub(sibling_start),
        Cap(&before),
        Cap(&after),
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

struct Cap<'a>(&'a Capacity);

impl core::fmt::Display for Cap<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let c = self.0;
        write!(
            f,
            "threads={} spaces={} vcpus={} map_pages={}",
            c.threads, c.spaces, c.vcpus, c.map_pages
        )
    }
}

fn print_capacity(when: &str, c: &Capacity) {
    println!("sysfuzz: capacity {when} {}", Cap(c));
}

/// Puts the image's mappings into one known state, so the mappings the probe finds before
/// and after do not depend on what the fuzzing did to them (it may have taken rights from
/// them, e.g. left a page writable but not readable, which cannot be mapped on readable):
/// unmaps the whole image and reads one byte of every page, so the root task maps each page
/// again with the image's rights (faults on the code and the stack included).
fn touch_image() {
    let (start, end) = layout::image();
    let all = kestrel_abi::Fpage::new(start, 24, kestrel_abi::Rights::RWX);
    if let Some(f) = all.filter(|f| f.contains(end - 1)) {
        let _ = sys::unmap(f, kestrel_abi::unmapflags::FLUSH_OWN);
    }
    let mut a = start;
    while a < end {
        // SAFETY: the image is mapped (readable) by the root task on demand; the byte is
        // only read, through a volatile read so the loop is not optimised away.
        let _ = unsafe { core::ptr::read_volatile(a as *const u8) };
        a += kestrel_abi::PAGE_SIZE;
    }
}

/// The sibling: the thread (not us, not the root) that answers a query with the magic
/// word. It may still be starting: a few tries.
fn find_sibling(me: ThreadId) -> Option<ThreadId> {
    for _ in 0..50 {
        for n in kestrel_abi::FIRST_THREAD_NO + 1..kestrel_abi::MAX_THREAD_NO {
            let t = ThreadId::new(n, 1);
            if t == me {
                continue;
            }
            let q = Msg::new(proto::QUERY);
            let to = Timeouts::new(Timeout::ZERO, Timeout::from_us(20_000));
            let (_, m, r) = ipc::ipc(t, t, to, &q);
            if r.is_ok() && m.label() == proto::COUNT && m.mr(2) == proto::MAGIC {
                return Some(t);
            }
        }
        let _ = ipc::receive(ThreadId::ROOT, Timeout::from_us(20_000));
    }
    None
}

/// The sibling's (rounds, corrupt rounds). Up to three tries: the fuzzing thread's random
/// calls may abort this thread's IPC (ExchangeRegisters ABORT_IPC on its own threads), which
/// says nothing about the sibling; a sibling that does not answer three times in a row
/// (0.6 s) is starving.
fn query_sibling(sibling: ThreadId) -> Option<(u32, u32)> {
    (0..3).find_map(|_| ask_sibling(sibling, &Msg::new(proto::QUERY)))
}

fn ask_sibling(sibling: ThreadId, q: &Msg) -> Option<(u32, u32)> {
    let t = Timeout::from_us(200_000);
    let (_, m, r) = ipc::ipc(sibling, sibling, Timeouts::new(t, t), q);
    (r.is_ok() && m.label() == proto::COUNT && m.mr(2) == proto::MAGIC).then(|| (m.mr(1), m.mr(3)))
}

fn stop_sibling(sibling: ThreadId) -> Option<(u32, u32)> {
    let q = Msg::with_words(proto::STOP, &[proto::STOP_MAGIC, !proto::STOP_MAGIC]);
    ask_sibling(sibling, &q)
}

/// The receivers: take whatever comes through the receive window `window` (the fuzzer's
/// random messages, or the probe's mappings) and answer with an empty message.
extern "C" fn receive_loop(window: u32) {
    let log2 = layout::WINDOW_LOG2;
    ipc::set_acceptor(
        kestrel_abi::Fpage::new(window, log2, kestrel_abi::Rights::RWX)
            .unwrap_or(kestrel_abi::Fpage::NIL),
    );
    let mut next = ipc::receive(ThreadId::ANY, Timeout::NEVER);
    loop {
        next = match next {
            Ok((from, _)) => ipc::reply_wait(from, &Msg::new(0)),
            Err(_) => ipc::receive(ThreadId::ANY, Timeout::NEVER),
        };
    }
}

/// The fuzzing thread.
extern "C" fn fuzz_main(_: u32) {
    let id = |i: usize| ThreadId(IDS[i].load(Relaxed));
    let mut spare: heapless::Vec<u32, 128> = (0..NSPARE.load(Relaxed) as usize)
        .map(|i| SPARE[i].load(Relaxed))
        .collect();
    let me = id(ID_ME);
    let mut victims = [ThreadId::NIL; layout::NVICTIMS];
    for (i, v) in victims.iter_mut().enumerate() {
        *v = ThreadId::new(spare.remove(0), 1);
        if let Err(e) = fuzz::create_victim(i, *v, me) {
            println!("sysfuzz: cannot create victim {i}: {e}");
        }
    }
    let w = World {
        me,
        main: id(ID_MAIN),
        receiver: id(ID_RECEIVER),
        probe_rx: id(ID_PROBE_RX),
        sibling: id(ID_SIBLING),
        victims,
        vcpus: heapless::Vec::new(),
        created: heapless::Vec::new(),
        spare,
        last_from: ThreadId::NIL,
        privileged: PRIVILEGED.load(Relaxed) != 0,
    };
    let mut f = fuzz::Fuzzer::new(SEED.load(Relaxed) as u64, w);
    f.maintain();
    let budget = BUDGET.load(Relaxed);
    let mut steps = 0u32;
    while stats::CALLS.load(Relaxed) < budget {
        f.step();
        steps += 1;
        if steps.is_multiple_of(256) {
            f.maintain();
        }
    }
    // Restore what the fuzzing may have changed in our own UTCB before the last IPC.
    ipc::set_acceptor(kestrel_abi::Fpage::NIL);
    let done = Msg::with_words(DONE, &[DONE_MAGIC]);
    let main = id(ID_MAIN);
    while ipc::send(main, &done, Timeout::from_us(1_000_000)).is_err() {}
}
