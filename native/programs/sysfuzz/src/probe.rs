//! The capacity probe: how many threads, address spaces, vCPUs and page mappings the
//! fuzzer can create, each counted by creating them until the root task or the kernel
//! refuses, then releasing them all. Run before and after the fuzzing; a count that is lower
//! afterwards is a kernel-object leak.
//!
//! Threads and spaces are limited by the kernel's thread and space tables (the fuzzer holds
//! every free thread number), vCPUs by the kernel's vCPU records, mappings by the mapping
//! database and the kernel's page-table pool: the first MiB of the fuzzer's image (always
//! there: the root pages it back in whatever the fuzzing unmapped, and it needs no RAM from
//! the root, which the fuzzing may have used up) is mapped again and again into consecutive
//! MiBs of a 1 GiB receive window until the kernel runs out (`IpcError::NoMemory`), the last
//! MiB page by page. The caller reads every page of the image first.

use crate::layout::{self, PROBE_DST, PROBE_SRC, PROBE_SRC_LOG2};
use kestrel_abi::root::Client;
use kestrel_abi::{unmapflags, Fpage, MapItem, Rights, ThreadId, Timeout, Timeouts};
use kestrel_user::ipc::{ipc, Msg};
use kestrel_user::{root, rt, sys};

/// What the probe counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Capacity {
    pub threads: u32,
    pub spaces: u32,
    pub vcpus: u32,
    /// 4 KiB pages mapped before the kernel ran out (or [`MAX_MAP_PAGES`]).
    pub map_pages: u32,
}

/// 1 GiB of 4 KiB pages: the probe window's size.
pub const MAX_MAP_PAGES: u32 = 1 << (layout::PROBE_DST_LOG2 - 12);

/// Probes with thread numbers `numbers` (the program's, none in use); `space` is a thread of
/// the fuzzer's space, `rx` the probe receiver, `vcpus` whether the program may create them.
pub fn run(numbers: &[u32], space: ThreadId, rx: ThreadId, vcpus: bool) -> Capacity {
    let threads = count_and_release(numbers, |id| create(id, space));
    let spaces = count_and_release(numbers, |id| create(id, id));
    let vcpus = if vcpus {
        count_and_release(numbers, |id| root::vcpu(id, 0).is_ok())
    } else {
        0
    };
    Capacity {
        threads,
        spaces,
        vcpus,
        map_pages: map_pages(rx),
    }
}

/// A thread `id` in the space of `space` that halts itself at once (priority 0: it does not
/// even get to run while the probe runs).
fn create(id: ThreadId, space: ThreadId) -> bool {
    let sp = rt::pool_stack_top(id.number());
    root::Root
        .create_thread(id, space, ThreadId::ROOT, 0, crate::stubs::halt(), sp)
        .is_ok()
}

/// Creates with `make` on each number until it fails; deletes what it made; the count.
fn count_and_release(numbers: &[u32], mut make: impl FnMut(ThreadId) -> bool) -> u32 {
    let mut made = 0;
    for &n in numbers {
        if !make(ThreadId::new(n, 1)) {
            break;
        }
        made += 1;
    }
    for &n in &numbers[..made] {
        let _ = root::delete_thread(ThreadId::new(n, 1));
    }
    made as u32
}

/// Maps `fpage` to the probe receiver at `hot`; true if the kernel did.
fn map_to(rx: ThreadId, hot: u32, fpage: Fpage) -> bool {
    let mut m = Msg::new(0);
    m.push_item(MapItem::map(hot, fpage));
    let t = Timeout::from_us(1_000_000);
    let (_, _, res) = ipc(rx, rx, Timeouts::new(t, t), &m);
    res.is_ok()
}

fn unmap(base: u32, log2: u32) {
    if let Some(f) = Fpage::new(base, log2, Rights::RWX) {
        let _ = sys::unmap(f, unmapflags::FLUSH_OWN);
    }
}

fn map_pages(rx: ThreadId) -> u32 {
    let chunk = 1u32 << PROBE_SRC_LOG2;
    let Some(src) = Fpage::new(PROBE_SRC, PROBE_SRC_LOG2, Rights::R) else {
        return 0;
    };
    let pages_per_chunk = chunk >> 12;
    let chunks = MAX_MAP_PAGES / pages_per_chunk;
    let mut pages = 0;
    for i in 0..chunks {
        let dst = PROBE_DST + i * chunk;
        if map_to(rx, dst, src) {
            pages += pages_per_chunk;
            continue;
        }
        // The kernel ran out inside this MiB: undo it and count it page by page.
        unmap(dst, PROBE_SRC_LOG2);
        for p in 0..pages_per_chunk {
            if !map_to(
                rx,
                dst + (p << 12),
                Fpage::page(PROBE_SRC + (p << 12), Rights::R),
            ) {
                break;
            }
            pages += 1;
        }
        break;
    }
    unmap(PROBE_DST, layout::PROBE_DST_LOG2);
    pages
}
