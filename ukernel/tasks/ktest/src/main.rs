//! ktest: Kestrel's on-target kernel test suite, run as the root task.
//!
//! An l4test-style harness: every entry of [`suite::TESTS`] runs in order and prints
//! `ktest: PASS name` or `ktest: FAIL name: reason`; the run ends with exactly
//! `ktest: N passed, M failed`, after which the runtime shuts the machine down.
//!
//! Tests are independent: each creates its own threads and address spaces through
//! guards (`threads::Thread`, `pager::Frame`) that delete them again when the test
//! returns, on success or failure. Every wait on another thread is bounded by a
//! timeout (except in the test of infinite timeouts), so a kernel bug turns into a
//! FAIL line rather than a hung run.
//!
//! Modules: `common` (shared vocabulary), `layout` (address regions), `pager` (the
//! one pager thread for all child spaces), `threads` (creating, deleting and waiting
//! for threads), `puppet` (a scriptable thread in a child space), `children` (code
//! for helper threads and child spaces), `suite` (the tests).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

#[macro_use]
mod common;
mod children;
mod layout;
mod pager;
mod puppet;
mod suite;
mod threads;

use kestrel_user::println;

#[no_mangle]
pub extern "C" fn task_main() {
    common::set_name("ktest");
    let tests = suite::TESTS;
    println!("ktest: {} tests", tests.len());
    if let Err(e) = pager::start() {
        println!("ktest: cannot start the pager: {:?} ({})", e, e.as_str());
        println!("ktest: 0 passed, {} failed", tests.len());
        return;
    }
    // `ktest.filter=TEXT` on the kernel command line (QEMU `-append`) runs only the
    // tests whose name contains TEXT, plus the final leak check.
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = kestrel_user::sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let filter = args
        .split(' ')
        .find_map(|a| a.strip_prefix("ktest.filter="));
    if let Some(f) = filter {
        println!("ktest: running only tests matching \"{f}\"");
    }
    let (mut passed, mut failed) = (0u32, 0u32);
    for (name, test) in tests {
        if let Some(f) = filter {
            if !name.contains(f) && *name != "harness_no_leaked_threads" {
                continue;
            }
        }
        match test() {
            Ok(()) => {
                passed += 1;
                println!("ktest: PASS {name}");
            }
            Err(why) => {
                failed += 1;
                println!("ktest: FAIL {name}: {why}");
            }
        }
    }
    println!("ktest: {passed} passed, {failed} failed");
}
