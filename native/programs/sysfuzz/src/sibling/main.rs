//! `kestrel-sibling`: the neighbour that must keep making progress while `kestrel-sysfuzz`
//! attacks the kernel (issue 9).
//!
//! A worker thread counts rounds: each round re-checks a 16 KiB buffer against the checksum
//! it had when it was filled (so a write into this program's memory by anybody else shows up
//! as a corrupt round), adds one to the count, and sleeps one tick so lower priorities run
//! too. The first thread answers every message (`proto`): the count, the magic word and the
//! corrupt rounds; a `STOP` with both magic words ends the program (exit code 1 if any round
//! was corrupt). The sibling needs no arguments and prints only its final line (and a line
//! at the first corrupt round).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

#[path = "../proto.rs"]
#[allow(dead_code, reason = "the fuzzer's half of the protocol")]
mod proto;

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kestrel_abi::{root::PROGRAM_CEILING, ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, root, sys};

const WORDS: usize = 4096;
static BUF: [AtomicU32; WORDS] = [const { AtomicU32::new(0) }; WORDS];
static ROUNDS: AtomicU32 = AtomicU32::new(0);
static CORRUPT: AtomicU32 = AtomicU32::new(0);
static REFERENCE: AtomicU32 = AtomicU32::new(0);

/// The same priority as the fuzzer's fuzzing thread (a program's ceiling): they share the
/// processor round robin.
pub const WORKER_PRIORITY: u32 = PROGRAM_CEILING;

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("sibling");
    let mut x = 0x2545_f491u32;
    for w in BUF.iter() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w.store(x, Relaxed);
    }
    REFERENCE.store(fold(), Relaxed);
    let worker = match root::thread() {
        Ok(t) => t,
        Err(e) => {
            println!("sibling: no thread number for the worker: {e}");
            return;
        }
    };
    if let Err(e) = root::spawn(worker, work, 0, WORKER_PRIORITY, ThreadId::ROOT) {
        println!("sibling: cannot start the worker: {e}");
        return;
    }
    let mut next = ipc::receive(ThreadId::ANY, Timeout::NEVER);
    loop {
        let (from, m) = match next {
            Ok(x) => x,
            Err(_) => {
                next = ipc::receive(ThreadId::ANY, Timeout::NEVER);
                continue;
            }
        };
        let stop = m.label() == proto::STOP
            && m.tag.untyped() >= 2
            && m.mr(1) == proto::STOP_MAGIC
            && m.mr(2) == !proto::STOP_MAGIC;
        let answer = Msg::with_words(
            proto::COUNT,
            &[ROUNDS.load(Relaxed), proto::MAGIC, CORRUPT.load(Relaxed)],
        );
        if stop {
            let _ = ipc::reply(from, &answer);
            break;
        }
        next = ipc::reply_wait(from, &answer);
    }
    let (rounds, corrupt) = (ROUNDS.load(Relaxed), CORRUPT.load(Relaxed));
    println!("sibling: {rounds} rounds, {corrupt} corrupt");
    if corrupt != 0 {
        kestrel_user::rt::exit(1);
    }
}

/// The buffer's checksum: a rotate-xor fold of its words.
fn fold() -> u32 {
    BUF.iter()
        .fold(0u32, |a, w| a.rotate_left(5) ^ w.load(Relaxed))
}

extern "C" fn work(_: u32) {
    let reference = REFERENCE.load(Relaxed);
    loop {
        if fold() != reference && CORRUPT.fetch_add(1, Relaxed) == 0 {
            println!("sibling: CORRUPT buffer in round {}", ROUNDS.load(Relaxed));
        }
        ROUNDS.fetch_add(1, Relaxed);
        // Nothing sends to us as the root: the receive just times out after a tick.
        let _ = ipc::receive(ThreadId::ROOT, Timeout::from_us(500));
    }
}
