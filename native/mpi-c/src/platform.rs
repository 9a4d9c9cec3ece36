//! What the C face needs from its surroundings (feature `target`): a Linux-personality
//! program on Kestrel (docs/adr/0034-linux-personality.md) with glibc. The job's place from
//! the environment kestrel-linux gives each rank (`KESTREL_RANK`, `KESTREL_SIZE`), an endpoint
//! of the node's fabric service over the rank's own memory, the core started on it
//! (`MPI_Init`), the time base (`MPI_Wtime`, the deadlock timeout), and the way out: one line
//! on the console, then `exit`.
//!
//! glibc's functions used here: `getenv`, `write`, `exit`. Kestrel calls go through
//! kestrel-user's `linux` feature (the fabric client's IPC, the kernel's clock).

use crate::args::{self, JobError};
use alloc::alloc::{alloc_zeroed, Layout};
use alloc::format;
use alloc::string::String;
use core::ffi::{c_char, c_int, c_void, CStr};
use kestrel_abi::Timeout;
use kestrel_fabric::{EpId, FabricApi};
use kestrel_fabric_client::service::{Service, Window};
use kestrel_mpi::{Env, Mpi};
use kestrel_user::sys;

extern "C" {
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    fn realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn getenv(name: *const c_char) -> *mut c_char;
    fn write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    fn exit(status: c_int) -> !;
}

/// The endpoint's DMA window starts with the SPI layer's FIFOs and the core's rendezvous
/// stages (`kestrel_mpi::WINDOW_FREE` bytes, stages of 512 KiB: ADR 0035, 0039); the rest
/// is glibc's heap: after attaching, the window's block is shrunk to that first part and
/// malloc, which keeps its freed memory (`keep_heap_memory`), serves the program's next
/// blocks from the rest, so large messages from and into them go without a copy. Its
/// length in MiB: `KESTREL_MPI_WINDOW_HEAP_MIB` (0 to 62, default 6).
const WINDOW_HEAP_MIB: usize = 6;
/// The endpoint's shared page.
const PAGE: usize = 4096;

/// The value of environment variable `name` (a NUL-terminated name).
fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv returns null or a NUL-terminated string in the
    // environment, which this single-threaded program does not change while MPI runs.
    let p = unsafe { getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: not null, NUL-terminated (above), and it lives as long as the environment.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// This rank's place in the job, from its environment.
pub fn job() -> Result<(u32, u32), JobError> {
    args::job(env(c"KESTREL_RANK"), env(c"KESTREL_SIZE"))
}

/// The time base's frequency in Hz (the kernel's `CLOCK` info), asked once.
pub fn timebase_hz() -> u64 {
    u64::from(sys::timebase_hz())
}

/// Time-base ticks since the machine started.
pub fn ticks() -> u64 {
    sys::timebase()
}

/// Nanoseconds since the machine started (the core's clock).
fn now_ns() -> u64 {
    sys::now_ns()
}

/// Sleeps until the fabric service tells of something for this endpoint, or 100 ms.
fn wait(p: &mut Service) {
    p.wait(Timeout::from_us(100_000));
}

/// A rank that runs: its core on its endpoint.
pub struct Started {
    pub mpi: Mpi<Service>,
    pub ep: EpId,
    pub rank: u32,
}

/// `MPI_Init`'s work: attaches an endpoint of the fabric service over memory of this rank's
/// heap (kept until the process ends; the service's mapping of it goes with the endpoint) and
/// starts the core on it, which waits until every rank of the job has done the same. The
/// error is the sentence for the fatal line.
pub fn start() -> Result<Started, String> {
    let (rank, size) = job().map_err(|e| String::from(e.message()))?;
    keep_heap_memory();
    let deadlock_ns = args::deadlock_ns(env(c"KESTREL_MPI_DEADLOCK_SECONDS"), rank);
    let mut service = Service::connect()
        .map_err(|e| format!("no fabric service ({e}): start the job with kestrel-fabric"))?;
    let heap_mib = env(c"KESTREL_MPI_WINDOW_HEAP_MIB")
        .and_then(|v| core::str::from_utf8(v).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(WINDOW_HEAP_MIB);
    if heap_mib > 62 {
        return Err(format!(
            "KESTREL_MPI_WINDOW_HEAP_MIB={heap_mib} is above 62 (a window is at most 64 MiB)"
        ));
    }
    let spi = kestrel_mpi::WINDOW_FREE as usize;
    let len = spi + (heap_mib << 20);
    let page = Layout::from_size_align(PAGE, PAGE).expect("a power of two");
    // SAFETY: the layout has a non-zero size.
    let s = unsafe { alloc_zeroed(page) };
    // Aligned so that the window goes to the service in few large pieces (an fpage's
    // address and window offset must be aligned alike), and the kernel's large TLB entries.
    let align = len.next_power_of_two().min(4 << 20);
    let mut w: *mut c_void = core::ptr::null_mut();
    // SAFETY: `w` is a valid place for the result; `align` is a power of two and a multiple
    // of the pointer size.
    if s.is_null() || unsafe { posix_memalign(&mut w, align, len) } != 0 || w.is_null() {
        return Err(String::from("no memory for the endpoint's window"));
    }
    // SAFETY: posix_memalign just gave `len` >= `spi` bytes at `w`.
    unsafe { core::ptr::write_bytes(w.cast::<u8>(), 0, spi) };
    let (ep, bus) = service
        .attach(Window::new(w as u32, len as u32, s as u32))
        .map_err(|e| format!("the fabric service refused an endpoint: {e}"))?;
    if heap_mib > 0 {
        // The window's upper part back to malloc (a shrink of a heap chunk stays in place:
        // M_MMAP_MAX is 0), which keeps it and serves the next blocks from it.
        // SAFETY: `w` is the live block posix_memalign gave, `spi` is not above its size.
        let r = unsafe { realloc(w, spi) };
        if r != w {
            // glibc moved the block: the window's FIFOs would be free memory. Never seen;
            // end rather than let malloc hand them out.
            return Err(String::from(
                "glibc moved the endpoint's window on a shrink (set KESTREL_MPI_WINDOW_HEAP_MIB=0)",
            ));
        }
    }
    let env = Env {
        wait,
        now_ns,
        deadlock_ns,
    };
    let mpi = Mpi::init(service, ep, bus, rank, size, env).map_err(|e| match e {
        kestrel_mpi::Error::Deadlock => {
            String::from("the other ranks did not start MPI (deadlock)")
        }
        e => format!("{e}"),
    })?;
    Ok(Started { mpi, ep, rank })
}

/// glibc's `mallopt` parameters (malloc.h): the most chunks served by `mmap` at once, and
/// how much free memory at the top of the heap `free` keeps before it shrinks the heap.
const M_MMAP_MAX: c_int = -4;
const M_TRIM_THRESHOLD: c_int = -1;

extern "C" {
    fn mallopt(param: c_int, value: c_int) -> c_int;
}

/// Makes malloc serve every block from the heap and keep freed memory, as MPI libraries for
/// RDMA networks do (MVAPICH, Open MPI's memory hooks). On 32-bit glibc a block above 512 KiB
/// (the dynamic threshold's ceiling) is always `mmap`ed and `munmap`ed on free, and the core
/// allocates a send copy and a receive buffer per rendezvous message: each large message
/// then cost a fresh mapping, a page fault on every page (each an exception IPC to
/// kestrel-linux) and an unmap, about 100 ms of guest time per round trip of 768 KiB
/// (NPmpi's curve fell from 1,043 to 117 Mbit/s above 512 KiB).
fn keep_heap_memory() {
    // SAFETY: mallopt only changes malloc's tuning; both parameters and values are valid.
    unsafe {
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, c_int::MAX);
    }
}

/// Writes `line` to standard error (the console, prefixed with the rank's name by
/// kestrel-linux), all of it or what the descriptor takes.
pub fn say(line: &str) {
    let mut b = line.as_bytes();
    while !b.is_empty() {
        // SAFETY: `b` is readable for its length; write reads only that.
        let n = unsafe { write(2, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[(n as usize).min(b.len())..];
    }
}

/// Ends the process the C way (atexit handlers run, stdio is flushed): kestrel-linux sees a
/// non-zero code and stops the job's other ranks.
pub fn end(code: c_int) -> ! {
    // SAFETY: glibc's exit; it does not return.
    unsafe { exit(code) }
}
