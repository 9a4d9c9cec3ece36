//! The Kestrel demo (`just demo`, or beside VMs: `just run --native kestrel-demo`): a
//! program the root task starts, which starts a pager and two address spaces, "ping" and
//! "pong". Ping calls pong a few times over IPC and prints each round trip; both get every
//! page of code, data and stack through page faults that the pager resolves. The demo then
//! prints a summary and returns, which tells the root task it is done.
//!
//! Threads (numbers from the root task): main, pager (in the main space), pong and ping,
//! each the only thread of its own space. Everything privileged (thread creation, RAM for
//! the stacks) goes through the root task (`kestrel_user::root`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod pager;
mod players;

use core::sync::atomic::{AtomicU32, Ordering};
use kestrel_abi::{ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, root, rt, sys};

/// The demo's threads, `[main, pager, pong, ping]`, from the root task. Statics: ping and
/// pong run this image in their own spaces with its data pages shared, so they read the
/// same values.
static IDS: [AtomicU32; 4] = [const { AtomicU32::new(0) }; 4];

fn id(i: usize) -> ThreadId {
    ThreadId(IDS[i].load(Ordering::Relaxed))
}
pub fn main_thread() -> ThreadId {
    id(0)
}
pub fn pager() -> ThreadId {
    id(1)
}
pub fn pong() -> ThreadId {
    id(2)
}
pub fn ping() -> ThreadId {
    id(3)
}

/// Calls ping makes.
pub const ROUNDS: u32 = 5;
/// Message labels: ping's request to pong (and pong's reply), ping's final report.
pub const REQUEST: u16 = 0x0001;
pub const DONE: u16 = 0x0002;

/// The pager runs above the players, so their faults are served at once; both stay within
/// the ceiling the root task gives a program without the vCPU right.
const PAGER_PRIORITY: u32 = kestrel_abi::root::PROGRAM_CEILING;
const PLAYER_PRIORITY: u32 = kestrel_abi::root::PROGRAM_CEILING - 1;

/// Each player's stack: the 64 KiB below `stack_top`, in its own space.
pub const STACK_SIZE: u32 = 0x1_0000;
const STACK_BASE: u32 = 0x6000_0000;

/// One past the top of `t`'s stack region (ping's and pong's are different).
pub fn stack_top(t: ThreadId) -> u32 {
    STACK_BASE + if t == ping() { 2 } else { 1 } * STACK_SIZE
}

/// A thread's name for printing.
pub fn name_of(t: ThreadId) -> &'static str {
    if t == ping() {
        "ping"
    } else if t == pong() {
        "pong"
    } else if t == pager() {
        "pager"
    } else if t == main_thread() {
        "main"
    } else {
        "?"
    }
}

/// Starts `t` as the first thread of a new address space, running `f` on an empty
/// stack at the top of its stack region.
fn start_player(t: ThreadId, f: extern "C" fn() -> !) -> Result<(), root::Error> {
    root::spawn_space(
        t,
        f as *const () as usize as u32,
        stack_top(t) - 16,
        PLAYER_PRIORITY,
        pager(),
    )
}

#[no_mangle]
pub extern "C" fn task_main() {
    // The name only shows in kernel messages.
    let _ = sys::set_name("demo");
    if rt::is_root_task() {
        println!("demo: kestrel-demo is a program of the root task: boot kestrel-root with root.start=kestrel-demo");
        return;
    }
    println!("demo: Kestrel ping-pong: two address spaces, one pager, {ROUNDS} IPC round trips");
    IDS[0].store(sys::my_id().0, Ordering::Relaxed);
    match root::threads(3) {
        Ok(ids) => {
            for (slot, t) in IDS[1..].iter().zip(ids) {
                slot.store(t.0, Ordering::Relaxed);
            }
        }
        Err(e) => {
            println!("demo: no thread numbers: {e}");
            return;
        }
    }
    // The pager lives in our space; the root task pages it (it runs on our image).
    if let Err(e) = root::spawn(
        pager(),
        pager::pager_main,
        0,
        PAGER_PRIORITY,
        ThreadId::ROOT,
    ) {
        println!("demo: cannot start the pager: {e}");
        return;
    }
    for (t, f) in [
        (pong(), players::pong_main as extern "C" fn() -> !),
        (ping(), players::ping_main),
    ] {
        if let Err(e) = start_player(t, f) {
            println!("demo: cannot create {}: {e}", name_of(t));
            return;
        }
        println!(
            "demo: created address space \"{}\" (thread {:?}), stack below {:#010x}",
            name_of(t),
            t,
            stack_top(t)
        );
    }

    // Ping reports when it is done; 5 s is ample even for a slow emulator.
    let report = ipc::receive(ping(), Timeout::from_us(5_000_000));
    let stats = ipc::call(pager(), &Msg::new(pager::STATS));
    println!("demo: ---- summary ----");
    match report {
        Ok((_, m)) if m.label() == DONE => {
            let (rounds, requests, total_us) = (m.mr(1), m.mr(2), m.mr(3));
            println!(
                "demo: ping made {rounds} calls, pong served {requests}: {} messages, {} us per round trip on average",
                rounds + requests,
                total_us / rounds.max(1)
            );
        }
        Ok((_, m)) => println!("demo: unexpected message {:#06x} from ping", m.label()),
        Err(e) => println!("demo: ping did not finish: {:?}", e.error),
    }
    if let Ok(s) = stats {
        println!(
            "demo: the pager served {} page faults: {} image pages shared with the demo, {} fresh stack pages",
            s.mr(1), s.mr(2), s.mr(3)
        );
    }
    for t in [ping(), pong()] {
        if let Err(e) = root::delete_thread(t) {
            println!("demo: cannot delete {}: {e}", name_of(t));
        }
    }
    println!("demo: deleted ping and pong, and with them their address spaces; bye");
}
