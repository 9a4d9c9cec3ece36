//! `kestrel-fwq`: the fixed-work-quantum (FWQ) noise benchmark, natively on Kestrel (issue 19,
//! `just bench noise`, bench/noise.py). The same quantum of work `fwq.quanta=N` times (default
//! 1000), each `fwq.work=W` rounds of a linear congruential step (default 20000; a multiply and
//! an add, kept live through `black_box`), each timed with the time base. Any time a quantum
//! takes beyond the fastest is time the system took from the program: timer interrupts, other
//! threads, the VMM. With `fwq.delay_ms=D` it first sleeps D ms (so VMs beside it can get busy
//! before it measures); started with the HPC right (`root.hpc=kestrel-fwq`) it runs above the
//! vCPUs' priority, as a light-weight kernel's rank owns its core.
//!
//! Output, the same lines as the Linux guest's `kestrel-fwq` (guests/linux/tools/kestrel-fwq.c):
//! `fwq: quanta N work W`, then `fwq: t T1 ... T16` (time-base ticks of each quantum, 16 a
//! line), then `fwq: done`; the program then exits.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;
use core::fmt::Write;
use kestrel_abi::{ThreadId, Timeout};
use kestrel_user::{println, root, sys};

/// Most quanta one run keeps (4 bytes each, in the 2 MiB heap).
const MAX_QUANTA: u32 = 100_000;

fn work(rounds: u32) {
    let mut a = 1u32;
    for _ in 0..rounds {
        a = core::hint::black_box(a.wrapping_mul(1_664_525).wrapping_add(1_013_904_223));
    }
    core::hint::black_box(a);
}

/// The low word of the time base (a quantum is far shorter than its wrap).
fn tbl() -> u32 {
    sys::timebase() as u32
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("fwq");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let (mut quanta, mut rounds, mut delay_ms) = (1000u32, 20_000u32, 0u32);
    for a in args.split_ascii_whitespace() {
        let num = |key: &str| a.strip_prefix(key).and_then(|v| v.parse::<u32>().ok());
        if let Some(v) = num("fwq.quanta=") {
            quanta = v;
        }
        if let Some(v) = num("fwq.work=") {
            rounds = v;
        }
        if let Some(v) = num("fwq.delay_ms=") {
            delay_ms = v;
        }
    }
    if quanta == 0 || quanta > MAX_QUANTA || rounds == 0 {
        println!("fwq: fwq.quanta must be 1..{MAX_QUANTA} and fwq.work above 0");
        root::exit(2);
    }
    if delay_ms > 0 {
        // The root task only ever replies: a receive from it ends in its timeout.
        let _ = kestrel_user::ipc::receive(
            ThreadId::ROOT,
            Timeout::from_us(delay_ms.saturating_mul(1000)),
        );
    }
    let mut t = Vec::with_capacity(quanta as usize);
    work(rounds); // warm the caches and the TLB
    for _ in 0..quanta {
        let t0 = tbl();
        work(rounds);
        t.push(tbl().wrapping_sub(t0));
    }
    println!("fwq: quanta {quanta} work {rounds}");
    for chunk in t.chunks(16) {
        let mut line = heapless::String::<256>::new();
        let _ = line.push_str("fwq: t");
        for v in chunk {
            let _ = write!(line, " {v}");
        }
        println!("{line}");
    }
    println!("fwq: done");
    root::exit(0);
}
