//! The Kestrel demo (`just run`): a root task that starts a pager and two address
//! spaces, "ping" and "pong". Ping calls pong a few times over IPC and prints each
//! round trip; both get every page of code, data and stack through page faults that
//! the pager resolves. The root then prints a summary and returns, which shuts the
//! machine down.
//!
//! Threads: root (64), pager (65, priority 200, in the root space), pong (66) and
//! ping (67), each the only thread of its own space.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod pager;
mod players;

use kestrel_abi::{spacectl, KError, ThreadId, Timeout, FIRST_THREAD_NO};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, rt, sys};

pub const PAGER: ThreadId = ThreadId::new(FIRST_THREAD_NO + 1, 1);
pub const PONG: ThreadId = ThreadId::new(FIRST_THREAD_NO + 2, 1);
pub const PING: ThreadId = ThreadId::new(FIRST_THREAD_NO + 3, 1);

/// Calls ping makes.
pub const ROUNDS: u32 = 5;
/// Message labels: ping's request to pong (and pong's reply), ping's final report.
pub const REQUEST: u16 = 0x0001;
pub const DONE: u16 = 0x0002;

const PAGER_PRIORITY: u32 = 200;
const PLAYER_PRIORITY: u32 = kestrel_abi::ROOT_PRIORITY;

/// Each player's stack: the 64 KiB below `stack_top`, in its own space.
pub const STACK_SIZE: u32 = 0x1_0000;
const STACK_BASE: u32 = 0x6000_0000;

/// One past the top of `t`'s stack region.
pub fn stack_top(t: ThreadId) -> u32 {
    STACK_BASE + (t.number() - FIRST_THREAD_NO + 1) * STACK_SIZE
}

/// A thread's name for printing.
pub fn name_of(t: ThreadId) -> &'static str {
    match t {
        PING => "ping",
        PONG => "pong",
        PAGER => "pager",
        ThreadId::ROOT => "root",
        _ => "?",
    }
}

/// Starts `t` as the first thread of a new address space, running `f` on an empty
/// stack at the top of its stack region.
fn start_player(t: ThreadId, f: extern "C" fn() -> !) -> Result<(), KError> {
    rt::spawn_space(t, f as *const () as usize as u32, stack_top(t) - 16, PLAYER_PRIORITY, PAGER)
}

fn pid(t: ThreadId) -> u32 {
    sys::space_control(t, spacectl::GET_PID, 0).unwrap_or(0)
}

#[no_mangle]
pub extern "C" fn task_main() {
    // The name only shows in kernel messages.
    let _ = sys::set_name("root");
    println!("demo: Kestrel ping-pong: two address spaces, one pager, {ROUNDS} IPC round trips");
    if let Err(e) = rt::spawn(PAGER, pager::pager_main, 0, PAGER_PRIORITY, ThreadId::NIL) {
        println!("demo: cannot start the pager: {}", e.as_str());
        return;
    }
    for (t, f) in [(PONG, players::pong_main as extern "C" fn() -> !), (PING, players::ping_main)] {
        if let Err(e) = start_player(t, f) {
            println!("demo: cannot create {}: {}", name_of(t), e.as_str());
            return;
        }
        println!("demo: created address space \"{}\" (thread {:?}), stack below {:#010x}", name_of(t), t, stack_top(t));
    }

    // Ping reports when it is done; 5 s is ample even for a slow emulator.
    let report = ipc::receive(PING, Timeout::from_us(5_000_000));
    let stats = ipc::call(PAGER, &Msg::new(pager::STATS));
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
            "demo: the pager served {} page faults: {} image pages shared with the root, {} fresh stack pages",
            s.mr(1), s.mr(2), s.mr(3)
        );
    }
    println!("demo: hardware PIDs: root {}, pong {}, ping {}", pid(ThreadId::ROOT), pid(PONG), pid(PING));
    for t in [PING, PONG] {
        if let Err(e) = sys::thread_control(t, ThreadId::NIL, 0, ThreadId::NIL, 0) {
            println!("demo: cannot delete {}: {}", name_of(t), e.as_str());
        }
    }
    println!("demo: deleted ping and pong, and with them their address spaces; bye");
}
