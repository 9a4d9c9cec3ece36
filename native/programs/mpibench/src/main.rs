//! `kestrel-mpibench`: the native half of `just bench mpi` (issue 19, bench/mpi.py). N ranks
//! (2 to 8) of this program on the MPI core (`kestrel-mpi`) over the node's fabric service,
//! timed with the time base (under `-icount shift=0` 0.4 ticks per guest instruction):
//!
//! - **ping-pong** between ranks 0 and 1 (`mpibench.pingpong=1`): for each message size
//!   (0 bytes, then powers of two from 1 byte to `mpibench.max=BYTES`, default 4 MiB; only
//!   those of at least `mpibench.min=BYTES`, default 0, for a profile of one size) one
//!   checked warm-up round trip, then `mpibench.trials=T` (default 3) trials of K round trips
//!   (K from 100 down to 2 as the size grows, see [`iters`]), each after a barrier and one
//!   untimed round trip; rank 0 prints the best trial (as NetPIPE does). One-way latency is
//!   ticks / (2 K);
//! - **allreduce** over all N ranks, for integer sum on the collective's ALU (`U64`) and
//!   double sum in software (`F64`, a binomial tree and a broadcast, ADR 0035), 1 and 128
//!   elements each: a checked warm-up, then T trials of 100 calls each, best trial.
//!
//! Start it under module names ending in the rank (`mpibench0` .. `mpibench7`) with
//! `mpibench.n=N`. With `mpibench.threads=2` a program runs two ranks, R (the module's
//! number) and R + 1, the second in a thread of its own (`mpibench0`, `mpibench2`, ...): the
//! root task runs at most 8 programs, one of them the fabric service, so 8 ranks need it.
//! Every rank attaches its own 2 MiB window (rendezvous moves chunks of up to 512 KiB);
//! ranks 0 and 1 of a ping-pong attach a larger one whose part above `WINDOW_FREE` is a
//! heap region for the messages, as a program that keeps its heap in its window: the core
//! then puts a large message straight from the sender's buffer into the receiver's
//! (zero-copy rendezvous, ADR 0039).
//! `mpibench.jitter=J` makes rank r spin J*(r+1)*1000 loop steps before MPI_Init: the
//! driver's retry after a hang (the core has an intermittent deadlock, ADR 0035's successor
//! is fixing it) then starts from a different interleaving.
//!
//! Output (rank 0 unless said), one line each:
//! `mpibench: ranks N timebase_hz HZ window BYTES eager_max BYTES stage BYTES wait
//! event|yield ranks_per_program T`,
//! `mpibench: pingpong bytes B iters K trials T best TICKS ok`,
//! `mpibench: allreduce type U64|F64 count C iters K trials T best TICKS ok`,
//! `mpibench: done`; on failure `mpibench: FAILED rank R: WHY` (a deadlock names the call it
//! waits in) from the rank that saw it. "ok" becomes "WRONG" when a check failed.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use kestrel_abi::{ThreadId, Timeout};
use kestrel_fabric::FabricApi;
use kestrel_fabric_client::service::{Service, Window};
use kestrel_mpi::{Datatype, Env, Mpi, Op, WORLD};
use kestrel_user::{println, root, sys};

/// The first rank's DMA window (2 MiB, naturally aligned), its shared page right above;
/// the next rank thread's `RANK_STRIDE` higher.
const WINDOW: u32 = 0x2000_0000;
const WINDOW_LEN: u32 = 2 << 20;
const RANK_STRIDE: u32 = 4 << 20;
/// Where the first ping-pong rank's window with its heap region goes, the next
/// `HEAP_STRIDE` higher (its shared page stays where the small window's is).
const HEAP_VA: u32 = 0x2400_0000;
const HEAP_STRIDE: u32 = 32 << 20;
/// Most ranks one program runs (`mpibench.threads`): the root task runs at most 8 programs,
/// one of them the fabric service, and grants a program 2 fabric endpoints.
const MAX_THREADS: u32 = 2;
/// Round trips per trial of the smallest messages.
const MAX_ITERS: u32 = 100;
/// Bytes a trial of a large size moves at least one way (so K = this / size, at least 2).
const TRIAL_BYTES: usize = 8 << 20;
const TAG: i32 = 7;
/// Allreduce calls per trial.
const ALLREDUCE_ITERS: u32 = 100;
/// Elements per allreduce.
const COUNTS: [usize; 2] = [1, 128];

/// Round trips per ping-pong trial of `size` bytes.
fn iters(size: usize) -> u32 {
    let k = TRIAL_BYTES / size.max(1);
    (k as u32).clamp(2, MAX_ITERS)
}

/// The time base in nanoseconds (MPI_Wtime, the core's deadlock timeout).
fn now_ns() -> u64 {
    sys::now_ns()
}

fn tb_hz() -> u64 {
    u64::from(sys::timebase_hz())
}

/// How long a waiting rank sleeps at most (`mpibench.wait_ms`, default 100 as in the ranks
/// program): a wake-up the service never sends costs this much.
static WAIT_US: AtomicU32 = AtomicU32::new(100_000);

/// Sleeps until the fabric service's next event (or `WAIT_US`): what the ranks program and
/// the MPI faces do (the default).
fn wait(p: &mut Service) {
    p.wait(Timeout::from_us(WAIT_US.load(Ordering::Relaxed)));
}

/// Polls instead (`mpibench.wait=yield`): gives the processor to whoever else is ready and
/// returns at once, so a waiting rank never sleeps through a deferred event.
fn wait_yield(_: &mut Service) {
    sys::thread_switch(ThreadId::NIL);
}

/// Byte `i` of the message of `size` bytes sent in direction `dir` (0: 0 to 1).
fn pattern(i: usize, size: usize, dir: u8) -> u8 {
    (i as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(size as u32)
        .to_be_bytes()[0]
        ^ dir
}

/// The options on the command line.
struct Opts {
    n: u32,
    max: usize,
    min: usize,
    trials: u32,
    pingpong: bool,
    allreduce: bool,
    jitter: u32,
    deadlock_s: u64,
    poll: bool,
    threads: u32,
}

fn options() -> Opts {
    let mut buf = [0u8; kestrel_abi::BOOTARGS_LEN];
    let len = sys::bootargs(&mut buf);
    let args = core::str::from_utf8(&buf[..len]).unwrap_or("");
    let mut o = Opts {
        n: 2,
        max: 4 << 20,
        min: 0,
        trials: 3,
        pingpong: true,
        allreduce: true,
        jitter: 0,
        deadlock_s: 60,
        poll: false,
        threads: 1,
    };
    for a in args.split_ascii_whitespace() {
        let Some((k, v)) = a.strip_prefix("mpibench.").and_then(|a| a.split_once('=')) else {
            continue;
        };
        if k == "wait" {
            o.poll = v == "yield";
            continue;
        }
        let Ok(v) = v.parse::<u64>() else { continue };
        match k {
            "n" => o.n = v as u32,
            "max" => o.max = v as usize,
            "min" => o.min = v as usize,
            "trials" => o.trials = (v as u32).max(1),
            "pingpong" => o.pingpong = v != 0,
            "allreduce" => o.allreduce = v != 0,
            "jitter" => o.jitter = v as u32,
            "deadlock_s" => o.deadlock_s = v.max(1),
            "threads" => o.threads = v as u32,
            "wait_ms" => WAIT_US.store((v as u32).clamp(1, 1000) * 1000, Ordering::Relaxed),
            _ => {}
        }
    }
    o
}

/// This copy's rank: the number its module name ends with.
fn my_rank() -> Option<u32> {
    let (name, n) = kestrel_user::rt::program_name();
    let digits = name[..n]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    core::str::from_utf8(&name[n - digits..n])
        .ok()?
        .parse()
        .ok()
}

/// The sizes of the ping-pong: 0, then 1, 2, 4, ... up to `max`; those below `min` left out.
fn sizes(min: usize, max: usize) -> impl Iterator<Item = usize> {
    core::iter::once(0)
        .chain((0..31).map(|k| 1usize << k).take_while(move |&s| s <= max))
        .filter(move |&s| s >= min)
}

/// A ping-pong rank's window at `va` with a heap region of `bytes` above
/// `layout::FREE` in it: RAM from the root task in naturally aligned blocks of at most
/// 4 MiB. Returns the window's length (a power of two).
fn window_with_heap(va: u32, bytes: u32) -> Result<u32, &'static str> {
    let len = (kestrel_mpi::WINDOW_FREE + bytes).next_power_of_two();
    if len > HEAP_STRIDE {
        return Err("mpibench.max is too large for the window's heap region");
    }
    let block = len.min(4 << 20);
    for at in (0..len).step_by(block as usize) {
        root::ram(va + at, block, block.trailing_zeros())
            .map_err(|_| "the root task has no RAM for the window")?;
    }
    let heap = va + kestrel_mpi::WINDOW_FREE;
    // SAFETY: the root task just mapped `len` bytes of zeroed RAM at `va` in this space for
    // good; nothing else in this program uses `[heap, va + len)` (each rank its own stride;
    // the SPI layer and the MPI core keep below `WINDOW_FREE`).
    unsafe { kestrel_user::heap::add_region(heap as *mut u8, (va + len - heap) as usize) }
        .map_err(|_| "the heap refused the region")?;
    Ok(len)
}

/// One ping-pong round trip between ranks 0 and 1 (`me`): rank 0 sends `out` first; the
/// status of the receive into `got`.
fn round_trip(
    mpi: &mut Mpi<Service>,
    me: u32,
    out: &[u8],
    got: &mut [u8],
) -> Result<kestrel_mpi::Status, kestrel_mpi::Error> {
    let peer = 1 - me as i32;
    if me == 0 {
        mpi.send(WORLD, peer, TAG, out)?;
        mpi.recv(WORLD, peer, TAG, got)
    } else {
        let st = mpi.recv(WORLD, peer, TAG, got)?;
        mpi.send(WORLD, peer, TAG, out)?;
        Ok(st)
    }
}

fn pingpong(mpi: &mut Mpi<Service>, o: &Opts, me: u32) -> Result<(), kestrel_mpi::Error> {
    let mut out = vec![0u8; o.max];
    let mut got = vec![0u8; o.max];
    for size in sizes(o.min, o.max) {
        let dir = me as u8;
        for (i, b) in out[..size].iter_mut().enumerate() {
            *b = pattern(i, size, dir);
        }
        mpi.barrier(WORLD)?;
        // The warm-up round trip, checked.
        let st = round_trip(mpi, me, &out[..size], &mut got[..size])?;
        let ok = st.bytes == size
            && got[..size]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == pattern(i, size, 1 - dir));
        let k = iters(size);
        let mut best = u64::MAX;
        for _ in 0..o.trials {
            mpi.barrier(WORLD)?;
            // One untimed round trip first, so the clock starts with both ranks out of the
            // barrier (one may leave it later than the other); the barrier's own cost is the
            // allreduce measurement's business.
            round_trip(mpi, me, &out[..size], &mut got[..size])?;
            let t0 = sys::timebase();
            for _ in 0..k {
                round_trip(mpi, me, &out[..size], &mut got[..size])?;
            }
            best = best.min(sys::timebase() - t0);
        }
        // Both ranks' checks count: rank 1 tells rank 0 through a MIN reduction.
        let mut all_ok = [0u8; 8];
        mpi.allreduce(
            WORLD,
            &u64::from(ok).to_ne_bytes(),
            &mut all_ok,
            Datatype::U64,
            Op::Min,
        )?;
        if me == 0 {
            println!(
                "mpibench: pingpong bytes {size} iters {k} trials {} best {best} {}",
                o.trials,
                if u64::from_ne_bytes(all_ok) == 1 {
                    "ok"
                } else {
                    "WRONG"
                }
            );
        }
    }
    Ok(())
}

fn allreduce(mpi: &mut Mpi<Service>, o: &Opts, me: u32) -> Result<(), kestrel_mpi::Error> {
    let n = u64::from(o.n);
    for (dt, name) in [(Datatype::U64, "U64"), (Datatype::F64, "F64")] {
        for count in COUNTS {
            // Element i of rank r: (r + 1) * (i + 1), halved for doubles (exact sums).
            let mut send = Vec::with_capacity(8 * count);
            for i in 0..count as u64 {
                let v = u64::from(me + 1) * (i + 1);
                match dt {
                    Datatype::F64 => send.extend_from_slice(&(v as f64 * 0.5).to_ne_bytes()),
                    _ => send.extend_from_slice(&v.to_ne_bytes()),
                }
            }
            let mut recv = vec![0u8; send.len()];
            mpi.barrier(WORLD)?;
            mpi.allreduce(WORLD, &send, &mut recv, dt, Op::Sum)?;
            let ok = recv.chunks(8).enumerate().all(|(i, e)| {
                let want = n * (n + 1) / 2 * (i as u64 + 1);
                let e: [u8; 8] = e.try_into().expect("8 bytes");
                match dt {
                    Datatype::F64 => f64::from_ne_bytes(e) == want as f64 * 0.5,
                    _ => u64::from_ne_bytes(e) == want,
                }
            });
            let mut best = u64::MAX;
            for _ in 0..o.trials {
                mpi.barrier(WORLD)?;
                let t0 = sys::timebase();
                for _ in 0..ALLREDUCE_ITERS {
                    mpi.allreduce(WORLD, &send, &mut recv, dt, Op::Sum)?;
                }
                best = best.min(sys::timebase() - t0);
            }
            let mut all_ok = [0u8; 8];
            mpi.allreduce(
                WORLD,
                &u64::from(ok).to_ne_bytes(),
                &mut all_ok,
                Datatype::U64,
                Op::Min,
            )?;
            if me == 0 {
                println!(
                    "mpibench: allreduce type {name} count {count} iters {ALLREDUCE_ITERS} trials {} best {best} {}",
                    o.trials,
                    if u64::from_ne_bytes(all_ok) == 1 { "ok" } else { "WRONG" }
                );
            }
        }
    }
    Ok(())
}

/// Ranks of this program still running (the first thread waits for the others).
static RUNNING: AtomicU32 = AtomicU32::new(0);
/// The worst exit code of this program's ranks.
static WORST: AtomicU32 = AtomicU32::new(0);
/// Stack of each extra rank thread (from the heap; the runtime's pool stacks are 8 KiB).
const THREAD_STACK: usize = 128 * 1024;

/// Runs rank `me`, this program's `local`-th (0: the first thread): memory, the fabric,
/// MPI_Init, the measurements. Returns the rank's exit code.
fn rank(o: &Opts, me: u32, local: u32) -> u32 {
    let mut window = WINDOW + local * RANK_STRIDE;
    let mut window_len = WINDOW_LEN;
    let shared = window + WINDOW_LEN;
    let plays = o.pingpong && me < 2;
    let small = if plays && o.max > 0 {
        // The two message buffers, room for the core's copies (nonblocking sends, eager
        // messages) and the rest.
        let bytes = (4 * o.max as u32 + (2 << 20)).next_multiple_of(1 << 20);
        window = HEAP_VA + local * HEAP_STRIDE;
        window_len = match window_with_heap(window, bytes) {
            Ok(l) => l,
            Err(e) => {
                println!("mpibench: FAILED rank {me}: {e} ({bytes} bytes)");
                return 1;
            }
        };
        Ok(())
    } else {
        root::ram(window, WINDOW_LEN, WINDOW_LEN.trailing_zeros()).map(|_| ())
    };
    if let Err(e) = small.and_then(|_| root::ram(shared, 4096, 12)) {
        println!("mpibench: FAILED rank {me}: no memory for the window: {e}");
        return 1;
    }
    // Each rank at its own moment (a retry's different interleaving).
    let mut x = 1u32;
    for _ in 0..o.jitter.saturating_mul(me + 1).saturating_mul(1000) {
        x = core::hint::black_box(x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223));
    }
    let mut port = match Service::connect() {
        Ok(s) => s,
        Err(e) => {
            println!("mpibench: FAILED rank {me}: {e}");
            return 1;
        }
    };
    // The attaching thread gets the endpoint's events: each rank thread attaches its own.
    let (ep, bus) = match port.attach(Window::new(window, window_len, shared)) {
        Ok(a) => a,
        Err(e) => {
            println!("mpibench: FAILED rank {me}: cannot attach to the fabric: {e}");
            return 1;
        }
    };
    let env = Env {
        wait: if o.poll { wait_yield } else { wait },
        now_ns,
        deadlock_ns: o.deadlock_s * 1_000_000_000,
    };
    let mut mpi = match Mpi::init(port, ep, bus, me, o.n, env) {
        Ok(m) => m,
        Err(e) => {
            println!("mpibench: FAILED rank {me}: MPI_Init: {e}");
            return 1;
        }
    };
    if me == 0 {
        let l = mpi.limits_now();
        println!(
            "mpibench: ranks {} timebase_hz {} window {window_len} eager_max {} stage {} wait {} ranks_per_program {}",
            o.n,
            tb_hz(),
            l.eager_max,
            l.send_stage.1,
            if o.poll { "yield" } else { "event" },
            o.threads
        );
    }
    let run = |mpi: &mut Mpi<Service>| -> Result<(), kestrel_mpi::Error> {
        mpi.barrier(WORLD)?;
        if o.pingpong {
            if plays {
                pingpong(mpi, o, me)?;
            } else {
                // Ranks 2.. join the ping-pong's barriers and checks only.
                for _ in sizes(o.min, o.max) {
                    mpi.barrier(WORLD)?;
                    for _ in 0..o.trials {
                        mpi.barrier(WORLD)?;
                    }
                    let mut r = [0u8; 8];
                    mpi.allreduce(WORLD, &1u64.to_ne_bytes(), &mut r, Datatype::U64, Op::Min)?;
                }
            }
        }
        if o.allreduce {
            allreduce(mpi, o, me)?;
        }
        mpi.barrier(WORLD)
    };
    let code = match run(&mut mpi) {
        Ok(()) => {
            if me == 0 {
                println!("mpibench: done");
            }
            0
        }
        Err(e) => {
            match mpi.deadlock_report() {
                Some(line) => println!("mpibench: FAILED rank {me}: {line}"),
                None => println!("mpibench: FAILED rank {me}: {e}"),
            }
            1
        }
    };
    mpi.fabric().detach(ep);
    code
}

/// An extra rank thread: `arg` is its rank << 8 | its index in this program.
extern "C" fn rank_thread(arg: u32) {
    let o = options();
    let code = rank(&o, arg >> 8, arg & 0xff);
    WORST.fetch_max(code, Ordering::Relaxed);
    RUNNING.fetch_sub(1, Ordering::Release);
}

/// Starts rank `me` as this program's `local`-th rank, in a thread of its own.
fn spawn_rank(me: u32, local: u32) -> Result<(), &'static str> {
    let id = root::thread().map_err(|_| "no thread number for a rank thread")?;
    let stack = alloc::boxed::Box::leak(vec![0u8; THREAD_STACK].into_boxed_slice());
    let sp = (stack.as_mut_ptr() as u32 + THREAD_STACK as u32 - 16) & !15;
    // SAFETY: `sp` and the word after it lie inside `stack`, which is leaked (it lives as
    // long as the program) and used by nothing but the thread about to start there; these
    // are the two words `__kestrel_thread_start` reads at its initial stack pointer.
    unsafe {
        let p = sp as *mut u32;
        p.write_volatile(rank_thread as *const () as usize as u32);
        p.add(1).write_volatile(me << 8 | local);
    }
    RUNNING.fetch_add(1, Ordering::Relaxed);
    let started = kestrel_abi::root::Client::create_thread(
        &root::Root,
        id,
        sys::my_id(),
        ThreadId::ROOT,
        kestrel_abi::root::PROGRAM_CEILING,
        kestrel_user::rt::thread_entry_stub(),
        sp,
    );
    if started.is_err() {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
        return Err("the root task would not start a rank thread");
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("mpibench");
    let o = options();
    let first = my_rank().filter(|&r| r < o.n);
    let Some(first) = first else {
        println!(
            "mpibench: FAILED: name the modules mpibench0 .. mpibench{} (mpibench.n={})",
            o.n.saturating_sub(1),
            o.n
        );
        root::exit(2);
    };
    if !(2..=8).contains(&o.n) || !(1..=MAX_THREADS).contains(&o.threads) {
        println!(
            "mpibench: FAILED rank {first}: mpibench.n must be 2 to 8, mpibench.threads 1 to {MAX_THREADS}"
        );
        root::exit(2);
    }
    // Ranks first .. first + threads - 1 (below n) run here, the first in this thread.
    let mut worst = 0;
    for local in 1..o.threads {
        let me = first + local;
        if me < o.n {
            if let Err(e) = spawn_rank(me, local) {
                println!("mpibench: FAILED rank {me}: {e}");
                worst = 1;
            }
        }
    }
    worst = worst.max(rank(&o, first, 0));
    while RUNNING.load(Ordering::Acquire) > 0 {
        // The root task only ever replies: a receive from it ends in its timeout.
        let _ = kestrel_user::ipc::receive(ThreadId::ROOT, Timeout::from_us(10_000));
    }
    root::exit(worst.max(WORST.load(Ordering::Relaxed)));
}
