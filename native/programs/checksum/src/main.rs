//! `kestrel-checksum`: a native program with checkable work, to run beside VMs
//! (`tests/functional/test_vm_with_native.py`). It asks the root task for a 64 KiB buffer and a worker
//! thread; the worker fills the buffer from a xorshift32 stream (seed [`SEED`], words
//! big-endian) once per round, prints the buffer's CRC-32 (IEEE, as zlib's `crc32`), and
//! sleeps a little so the VMs run too; at the end it prints the fold of all rounds
//! (`total = total.rotate_left(1) ^ crc`). Anyone can recompute every line. Before it starts
//! it asks the root task for things it has no right to (a vCPU, deleting the root's own
//! thread, a thread above its priority ceiling, a device page, an interrupt line) and the kernel to raise its own priority to
//! 255 (its scheduler is the root task: `docs/adr/0013-priorities.md`), and prints the
//! refusals.
//!
//! Kernel command line: `checksum.rounds=N` (default 40), `checksum.sleep_ms=M` (default 100).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use core::sync::atomic::{AtomicU32, Ordering};
use kestrel_abi::root::PROGRAM_CEILING;
use kestrel_abi::{ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, root, sys};

/// The xorshift32 seed.
const SEED: u32 = 0x1234_5678;
/// The buffer: 64 KiB of RAM from the root task, at this address of our space.
const BUF: u32 = 0x2000_0000;
const BUF_LEN: u32 = 64 << 10;
/// The worker's report to the main thread: MR1 = rounds done, MR2 = total.
const DONE: u16 = 0x0001;

static MAIN: AtomicU32 = AtomicU32::new(0);
static ROUNDS: AtomicU32 = AtomicU32::new(40);
static SLEEP_MS: AtomicU32 = AtomicU32::new(100);

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("checksum");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    for a in args.split_ascii_whitespace() {
        if let Some(v) = a
            .strip_prefix("checksum.rounds=")
            .and_then(|v| v.parse().ok())
        {
            ROUNDS.store(v, Ordering::Relaxed);
        }
        if let Some(v) = a
            .strip_prefix("checksum.sleep_ms=")
            .and_then(|v| v.parse().ok())
        {
            SLEEP_MS.store(v, Ordering::Relaxed);
        }
    }
    MAIN.store(sys::my_id().0, Ordering::Relaxed);
    if let Err(e) = root::ram(BUF, BUF_LEN, BUF_LEN.trailing_zeros()) {
        println!("no buffer: {e}");
        return;
    }
    let worker = match root::thread() {
        Ok(t) => t,
        Err(e) => {
            println!("no thread number for the worker: {e}");
            return;
        }
    };
    // The root task's rights checks, as a program without special rights sees them: no
    // vCPUs, no say over another program's threads (here the root's own), no thread above
    // its ceiling; and the kernel's: no raising itself above the vCPUs (issue 9, finding 2).
    println!(
        "rights: vcpu {:?}, delete root {:?}, thread above ceiling {:?}, schedule self 255 {:?}",
        root::vcpu(worker, kestrel_abi::root::VCPU_PRIORITY),
        root::delete_thread(ThreadId::ROOT),
        root::spawn(worker, work, 0, PROGRAM_CEILING + 1, ThreadId::ROOT),
        sys::schedule(sys::my_id(), kestrel_abi::MAX_PRIORITY, 0)
    );
    // Nor device registers or interrupt lines: only programs with the device right (the
    // VMM) get them, since a device can reach memory (docs/SECURITY.md).
    println!(
        "devices: page {:?}, interrupt {:?}",
        root::device(kestrel_abi::DEVICE_WINDOW),
        root::interrupt(0, worker, 0)
    );
    // The root task pages the worker (it runs in our image). It runs at our ceiling, the
    // vCPUs' priority: the two share the processor round robin.
    if let Err(e) = root::spawn(worker, work, 0, PROGRAM_CEILING, ThreadId::ROOT) {
        println!("cannot start the worker: {e}");
        return;
    }
    match ipc::receive(worker, Timeout::NEVER) {
        Ok((_, m)) if m.label() == DONE => {
            println!("checksum {:#010x} after {} rounds", m.mr(2), m.mr(1));
        }
        Ok((_, m)) => println!("unexpected message {:#06x} from the worker", m.label()),
        Err(e) => println!("the worker did not report: {:?}", e.error),
    }
}

extern "C" fn work(_: u32) {
    let rounds = ROUNDS.load(Ordering::Relaxed);
    let sleep_us = SLEEP_MS.load(Ordering::Relaxed).saturating_mul(1000);
    // SAFETY: the root task granted BUF_LEN bytes of RAM at BUF to this space (the main
    // thread's `root::ram` succeeded before this thread started); only this thread uses it.
    let buf = unsafe { core::slice::from_raw_parts_mut(BUF as *mut u8, BUF_LEN as usize) };
    let mut x = SEED;
    let mut total = 0u32;
    for r in 1..=rounds {
        for w in buf.chunks_exact_mut(4) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            w.copy_from_slice(&x.to_be_bytes());
        }
        let crc = crc32(buf);
        total = total.rotate_left(1) ^ crc;
        println!("round {r}/{rounds}: crc {crc:#010x}");
        // Nothing sends to us: the receive just times out.
        let _ = ipc::receive(ThreadId::ROOT, Timeout::from_us(sleep_us));
    }
    let main = ThreadId(MAIN.load(Ordering::Relaxed));
    let _ = ipc::send(
        main,
        &Msg::with_words(DONE, &[rounds, total]),
        Timeout::NEVER,
    );
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), bit by bit: small and plenty fast.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}
