//! The Kestrel platform: a rank is a native program the root task started, talking to the
//! fabric service (`kestrel-fabric`). [`crate::initialize`] here
//!
//! - takes the rank from the digits the program's module name ends with (`kestrel-mpirs3`
//!   is rank 3; a name without digits is rank 0) and the job's size from the boot argument
//!   `mpi.ranks=N` (default 1);
//! - asks the root task for RAM: the heap's second region (`mpi.heap_mib=`, default 16 MiB,
//!   at [`HEAP_VA`]: a program moving multi-megabyte messages needs more than the
//!   runtime's 2 MiB arena), the endpoint's window and its shared page ([`SHARED_VA`]).
//!   The window ends inside the heap: its first `WINDOW_FREE` bytes (2 MiB, at
//!   [`WINDOW_VA`], right below the heap) hold the SPI's FIFOs and the rendezvous stages,
//!   and the rest is the heap's first part, so large messages from and into memory there
//!   go without a copy (ADR 0039). `mpi.window_kib=` sets its length (a multiple of 64 KiB
//!   from 64 KiB to 64 MiB; default `WINDOW_FREE` plus the heap, at most 64 MiB; below
//!   `WINDOW_FREE` the window holds no heap and every large message is staged);
//! - attaches one endpoint of the fabric service and runs MPI_Init on it, with the
//!   deadlock timeout `mpi.deadlock_ms=` (default 60,000).
//!
//! The program must leave those addresses alone. A fatal error prints its line on the
//! console (`[name] rank R: CALL: CLASS: ...`) and the program exits with code 1 (MPI_Abort:
//! its code, if not 0); a rank that sees another end the job detaches and exits with code 1
//! without a line. A failure to
//! start (no RAM, no service, a rank not below `mpi.ranks=`) is one line naming the rank
//! and MPI_Init, then the same exit.

use super::{abort_seen, Job};
use crate::environment::Universe;
use alloc::format;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kestrel_abi::Timeout;
use kestrel_fabric::{EpId, FabricApi};
use kestrel_fabric_client::service::{Service, Window};
use kestrel_user::{println, root, rt, sys};

/// Where the endpoint's window starts: `WINDOW_FREE` bytes below the heap, which its upper
/// part (up to 64 MiB in all) covers.
pub const WINDOW_VA: u32 = HEAP_VA - kestrel_mpi::WINDOW_FREE;
/// Where the endpoint's shared page goes.
pub const SHARED_VA: u32 = 0x2fff_f000;
/// Where the heap's region goes (up to 256 MiB).
pub const HEAP_VA: u32 = 0x4000_0000;
/// The longest window the fabric service takes.
const WINDOW_MAX: u32 = kestrel_fabric::proto::layout::WINDOW_MAX;
/// The heap's region comes from the root task in blocks of this many bytes.
const HEAP_BLOCK: u32 = 4 << 20;

static STARTED: AtomicBool = AtomicBool::new(false);
/// The endpoint, for [`wait`] (a program has one thread of MPI).
static EP: AtomicU32 = AtomicU32::new(0);

/// The value of boot argument `key` (`key=` included).
fn arg<T: core::str::FromStr>(args: &str, key: &str) -> Option<T> {
    args.split_ascii_whitespace()
        .find_map(|a| a.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

/// The rank the program's module name says.
fn rank_from_name() -> u32 {
    let (name, n) = rt::program_name();
    let digits = name[..n]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    core::str::from_utf8(&name[n - digits..n])
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
}

/// [`crate::initialize`] on Kestrel: once per program.
pub(crate) fn launch() -> Option<Universe> {
    if STARTED.swap(true, Ordering::Relaxed) {
        return None;
    }
    let mut buf = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut buf);
    let args = core::str::from_utf8(&buf[..n]).unwrap_or("");
    let size: u32 = arg(args, "mpi.ranks=").unwrap_or(1);
    let heap = arg::<u32>(args, "mpi.heap_mib=").unwrap_or(16).min(256) << 20;
    let free = kestrel_mpi::WINDOW_FREE;
    let window = arg::<u32>(args, "mpi.window_kib=")
        .map(|k| k.saturating_mul(1024))
        .unwrap_or((free + heap).min(WINDOW_MAX));
    let deadlock_ms: u64 = arg(args, "mpi.deadlock_ms=").unwrap_or(60_000);
    let rank = rank_from_name();
    let fail = |what: &str| -> ! { fatal(&format!("rank {rank}: MPI_Init: {what}"), 1) };
    if rank >= size {
        fail(&format!(
            "MPI_ERR_RANK: rank {rank} is not below mpi.ranks={size} (name the programs' modules ..0 to ..{})",
            size.max(1) - 1
        ));
    }
    if !window.is_multiple_of(64 << 10) || !(64 << 10..=WINDOW_MAX).contains(&window) {
        fail(&format!(
            "MPI_ERR_ARG: mpi.window_kib={} is no multiple of 64 from 64 to 65536",
            window >> 10
        ));
    }
    if heap > 0 {
        // In blocks of at most 4 MiB, each mapped by few pages: contiguous here, wherever
        // the root task finds them.
        let mut at = 0;
        while at < heap {
            let len = (heap - at).min(HEAP_BLOCK);
            let align = len.trailing_zeros().min(HEAP_BLOCK.trailing_zeros());
            if let Err(e) = root::ram(HEAP_VA + at, len, align) {
                fail(&format!(
                    "MPI_ERR_NO_MEM: no {} MiB for the heap: {e}",
                    heap >> 20
                ));
            }
            at += len;
        }
        // SAFETY: the root task just granted `heap` bytes of RAM at HEAP_VA, mapped
        // read-write in this space; nothing else of this program uses that range.
        if let Err(e) = unsafe { kestrel_user::heap::add_region(HEAP_VA as *mut u8, heap as usize) }
        {
            fail(&format!(
                "MPI_ERR_NO_MEM: the heap refused its region: {e:?}"
            ));
        }
    }
    // The window's own RAM: below the heap, and past it if the window reaches further.
    let below = window.min(free);
    let past = window.saturating_sub(free + heap);
    let ram = root::ram(WINDOW_VA, below, below.trailing_zeros().min(21))
        .and_then(|_| match past {
            0 => Ok(()),
            n => root::ram(HEAP_VA + heap, n, 16).map(|_| ()),
        })
        .and_then(|_| root::ram(SHARED_VA, 4096, 12));
    if let Err(e) = ram {
        fail(&format!(
            "MPI_ERR_NO_MEM: no memory for the fabric window: {e}"
        ));
    }
    let mut port = match Service::connect() {
        Ok(s) => s,
        Err(e) => fail(&format!("MPI_ERR_OTHER: {e}")),
    };
    let (ep, bus) = match port.attach(Window::new(WINDOW_VA, window, SHARED_VA)) {
        Ok(a) => a,
        Err(e) => fail(&format!("MPI_ERR_OTHER: cannot attach to the fabric: {e}")),
    };
    EP.store(u32::from(ep.0), Ordering::Relaxed);
    crate::initialize_with(Job {
        fabric: port,
        ep,
        bus,
        rank,
        size,
        env: kestrel_mpi::Env {
            wait,
            now_ns,
            deadlock_ns: deadlock_ms * 1_000_000,
        },
        fatal,
        ended,
    })
}

/// Sleeps until the fabric service has news (at most 100 ms); ends the rank quietly when
/// another rank ended the job.
fn wait(p: &mut Service) {
    p.wait(Timeout::from_us(100_000));
    let ep = EpId(EP.load(Ordering::Relaxed) as u8);
    if let Some(from) = abort_seen(p, ep) {
        ended(p, ep, from);
    }
}

fn ended(p: &mut Service, ep: EpId, _from: u32) -> ! {
    p.detach(ep);
    rt::exit(1)
}

fn fatal(line: &str, code: i32) -> ! {
    println!("{line}");
    rt::exit(if code == 0 { 1 } else { code as u32 })
}

/// The time base in nanoseconds.
pub fn now_ns() -> u64 {
    sys::now_ns()
}
