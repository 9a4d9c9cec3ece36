//! Ping and pong: the first threads of two new address spaces. Both are entered
//! directly at their function with only a stack pointer (no return address, no
//! arguments), so they never return; every page they touch comes from the pager.

use crate::{main_thread, pong, DONE, REQUEST, ROUNDS};
use kestrel_abi::{kinfo, ThreadId, Timeout};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::{println, rt, sys};

/// Pong's state, folded over every request: a rotate-and-xor checksum.
fn fold(checksum: u32, value: u32) -> u32 {
    checksum.rotate_left(5) ^ value
}

/// Pong serves requests forever, answering each with `[requests so far, checksum]`.
pub extern "C" fn pong_main() -> ! {
    let _ = sys::set_name("pong");
    let (mut count, mut checksum) = (0u32, 0u32);
    let mut next = ipc::receive(ThreadId::ANY, Timeout::NEVER);
    loop {
        next = match next {
            Ok((from, m)) if m.label() == REQUEST => {
                count += 1;
                checksum = fold(checksum, m.mr(1));
                ipc::reply_wait(from, &Msg::with_words(REQUEST, &[count, checksum]))
            }
            // Anything else (or a failed reply): just wait for the next request.
            _ => ipc::receive(ThreadId::ANY, Timeout::NEVER),
        };
    }
}

/// Ping calls pong [`ROUNDS`] times, printing each round trip, then reports
/// `[rounds, pong's request count, total microseconds]` to the demo's main thread and stops.
pub extern "C" fn ping_main() -> ! {
    let _ = sys::set_name("ping");
    let hz = sys::kernel_info(kinfo::CLOCK)
        .map(|[hz, ..]| hz as u64)
        .unwrap_or(0)
        .max(1);
    let (mut total_us, mut pong_count, mut done) = (0u64, 0u32, 0u32);
    for round in 1..=ROUNDS {
        let value = round * 1111;
        let t0 = sys::timebase();
        let r = ipc::call(pong(), &Msg::with_words(REQUEST, &[value]));
        let us = (sys::timebase() - t0) * 1_000_000 / hz;
        match r {
            Ok(reply) => {
                pong_count = reply.mr(1);
                total_us += us;
                done += 1;
                println!(
                    "ping: round {round}: sent {value:>4}, pong answers request #{pong_count}, checksum {:#010x} ({us} us)",
                    reply.mr(2)
                );
            }
            Err(e) => println!("ping: round {round}: call failed: {:?}", e.error),
        }
    }
    let _ = ipc::send(
        main_thread(),
        &Msg::with_words(DONE, &[done, pong_count, total_us as u32]),
        Timeout::NEVER,
    );
    rt::exit(0)
}
