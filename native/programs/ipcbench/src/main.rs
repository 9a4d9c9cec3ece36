//! IPC ping-pong benchmark (root task).
//!
//! Measures the round trip `call` (client) + `reply_wait` (server) with two untyped
//! words, (a) between two address spaces and (b) between two threads of one space.
//! Run under `qemu -icount shift=0`: virtual time then advances exactly 1 ns per
//! guest instruction, so the timebase delta converts to executed instructions
//! (`ticks * 1e9 / timebase_hz`), deterministically. The figure includes everything
//! executed in the loop: user stubs, kernel entry/exit and the kernel's IPC path.
//!
//! Output lines (parsed by bench/ipc.py):
//! `BENCH ipc name=<inter|intra> iterations=<n> instructions=<total> roundtrip_instructions=<x.y>`
#![no_std]
#![no_main]

use kestrel_abi::{kinfo, label, Rights, ThreadId, PAGE_SIZE};
use kestrel_user::ipc::{call, reply_wait, Msg};
use kestrel_user::mem::{map_reply, pager_loop, FrameAllocator, PageFault};
use kestrel_user::{println, rt, sys};

const ITERATIONS: u32 = 10_000;
const WARMUP: u32 = 100;
const PAGER: ThreadId = ThreadId::new(65, 1);
const INTRA_SERVER: ThreadId = ThreadId::new(66, 1);
const INTER_SERVER: ThreadId = ThreadId::new(67, 1);
/// Stack of the server in its own space; its pages come from the pager.
const CHILD_STACK_TOP: u32 = 0x6000_0000 - 16;

extern "C" {
    static __image_start: u8;
    static __image_end: u8;
}

/// Echo server: answers every request with its two words swapped.
extern "C" fn server(_: u32) {
    serve()
}

extern "C" fn server_space_entry() -> ! {
    serve()
}

fn serve() -> ! {
    let (mut from, mut m) =
        match kestrel_user::ipc::receive(ThreadId::ANY, kestrel_abi::Timeout::NEVER) {
            Ok(x) => x,
            Err(_) => rt::exit(1),
        };
    loop {
        let reply = Msg {
            tag: kestrel_abi::MsgTag::new(0, 2, 0),
            regs: [m.regs[1], m.regs[0], 0, 0, 0, 0],
        };
        match reply_wait(from, &reply) {
            Ok((f, mm)) => {
                from = f;
                m = mm;
            }
            Err(_) => rt::exit(1),
        }
    }
}

/// Pager for the server's space: image pages 1:1, anything else a fresh frame.
extern "C" fn pager(_: u32) {
    let mut frames = FrameAllocator::from_kernel().expect("root task can query memory");
    let (lo, hi) = (
        core::ptr::addr_of!(__image_start) as u32,
        core::ptr::addr_of!(__image_end) as u32,
    );
    pager_loop(|_from, msg| {
        let pf = PageFault::parse(msg)?;
        if label::is_pagefault(msg.label()) && (lo..hi).contains(&pf.addr) {
            Some(map_reply(pf.addr, pf.addr & !(PAGE_SIZE - 1), Rights::RWX))
        } else {
            let page = frames.alloc()?;
            Some(map_reply(pf.addr, page, Rights::RW))
        }
    })
}

fn measure(server: ThreadId) -> u64 {
    let msg = Msg::with_words(1, &[0x1111, 0x2222]);
    for _ in 0..WARMUP {
        if call(server, &msg).is_err() {
            println!("ipcbench: warm-up call failed");
            return 0;
        }
    }
    let t0 = sys::timebase();
    for _ in 0..ITERATIONS {
        let _ = call(server, &msg);
    }
    sys::timebase() - t0
}

fn report(name: &str, ticks: u64, tb_hz: u64) {
    // icount shift=0: one instruction per virtual nanosecond.
    let instructions = ticks * 1_000_000_000 / tb_hz;
    let tenths = instructions * 10 / ITERATIONS as u64;
    println!(
        "BENCH ipc name={} iterations={} instructions={} roundtrip_instructions={}.{}",
        name,
        ITERATIONS,
        instructions,
        tenths / 10,
        tenths % 10
    );
}

#[no_mangle]
pub extern "C" fn task_main() {
    let tb_hz = sys::kernel_info(kinfo::CLOCK)
        .map(|c| c[0] as u64)
        .unwrap_or(400_000_000);
    let prio = kestrel_abi::ROOT_PRIORITY;
    if rt::spawn(PAGER, pager, 0, prio + 1, ThreadId::NIL).is_err()
        || rt::spawn(INTRA_SERVER, server, 0, prio, PAGER).is_err()
        || rt::spawn_space(
            INTER_SERVER,
            server_space_entry as *const () as u32,
            CHILD_STACK_TOP,
            prio,
            PAGER,
        )
        .is_err()
    {
        println!("ipcbench: could not create the benchmark threads");
        return;
    }
    let inter = measure(INTER_SERVER);
    let intra = measure(INTRA_SERVER);
    report("inter", inter, tb_hz);
    report("intra", intra, tb_hz);
}
