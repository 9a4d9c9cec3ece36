//! kestrel-selftest: a bare-metal PowerPC 440 program that exercises every privileged
//! instruction a trap-and-emulate VMM must emulate and every exception class it must inject,
//! and checks the architectural results.
//!
//! It runs in supervisor state directly on QEMU `-M bamboo`, and unmodified as a Kestrel
//! guest. It uses only UART0 (console), UART1 (an interrupt source) and the UIC, sets up its
//! own TLB entries and vectors (`boot.rs`), and keeps all state inside its image. Output is
//! deterministic (no timing values), so native and virtualized runs can be compared with
//! `diff`: `selftest: start`, one `selftest: PASS name`, `selftest: FAIL name: detail` or
//! `selftest: SKIP name: reason` line per test, and finally exactly
//! `selftest: N passed, M failed`, after which it resets the machine through DBCR0.
//!
//! Modules: `cpu` (registers, TLB access), `uart`, `boot` (entry, vectors, catch/enter),
//! `trap` (the handler and what tests arm), `snippets` (assembly probes), `check` (result
//! helpers), `tests` (the suite).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod boot;
mod check;
mod cpu;
mod fdt;
mod snippets;
mod tests;
mod trap;
mod uart;

use check::TestResult;
use cpu::{msr, spr, tlb, uic, vector};

/// Where IVPR points: the vectors start the image (link.ld).
fn install_vectors() {
    cpu::mtspr::<{ spr::IVPR }>(label!(__vectors_start));
    macro_rules! ivor {
        ($($n:literal)*) => { $( cpu::mtspr::<{ spr::IVOR0 + $n }>(32 * $n); )* };
    }
    ivor!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// Returns the machine to the state every test starts from: supervisor, interrupts masked,
/// timers disabled and the decrementer parked, timer status clear, debug events off, UIC
/// masked and clear, UART1 quiet, PID/MMUCR 0, only the pinned TLB entries valid, vectors
/// installed.
fn reset_machine() {
    cpu::mtmsr(msr::KERNEL);
    cpu::mtspr::<{ spr::TCR }>(0);
    // Park the decrementer ~5 s away rather than writing 0: whether writing 0 is an event
    // differs (QEMU 7.2.22 fires its timer at once, possibly after TSR is cleared below).
    // Tests that use DEC clear TSR[DIS] first, then write DEC.
    cpu::mtspr::<{ spr::DEC }>(0x7FFF_FFFF);
    cpu::mtspr::<{ spr::DECAR }>(0);
    cpu::mtspr::<{ spr::TSR }>(0xFFFF_FFFF);
    cpu::mtspr::<{ spr::DBCR0 }>(0);
    cpu::mtspr::<{ spr::DBSR }>(0xFFFF_FFFF);
    uart::set_uart1_ier(0);
    cpu::mtdcr::<{ uic::ER }>(0);
    cpu::mtdcr::<{ uic::CR }>(0);
    cpu::mtdcr::<{ uic::TR }>(0);
    cpu::mtdcr::<{ uic::PR }>(uic::line(0) | uic::UART1);
    cpu::mtdcr::<{ uic::SR }>(0xFFFF_FFFF);
    cpu::mtspr::<{ spr::PID }>(0);
    cpu::mtspr::<{ spr::MMUCR }>(0);
    cpu::mtspr::<{ spr::ESR }>(0);
    cpu::mtspr::<{ spr::DEAR }>(0);
    for i in 0..tlb::PINNED {
        tlb::invalidate(i);
    }
    install_vectors();
}

/// What `st_catch` passes to the trampoline.
struct Ctx {
    test: fn() -> TestResult,
    result: TestResult,
}

extern "C" fn trampoline(ctx: *mut u8) {
    // SAFETY: `run` passes a pointer to its own live `Ctx`.
    let ctx = unsafe { &mut *(ctx as *mut Ctx) };
    ctx.result = (ctx.test)();
}

enum Outcome {
    Pass,
    Fail,
    Skip,
}

fn run(name: &str, test: fn() -> TestResult) -> Outcome {
    trap::reset();
    check::reset();
    let mut ctx = Ctx {
        test,
        result: Err("the test did not return"),
    };
    trap::set_in_test(true);
    let completed = boot::catch(trampoline, &mut ctx as *mut Ctx as *mut u8);
    trap::set_in_test(false);
    reset_machine();
    if let Some((vec, srr0, esr, dear)) = trap::unexpected() {
        let abandoned = if completed { "" } else { ", test abandoned" };
        if vector::is_asynchronous(vec) {
            // Where an asynchronous interrupt hits depends on timing: leave SRR0 out so that
            // the line is the same on every run.
            println!(
                "selftest: FAIL {name}: unexpected {} interrupt (IVOR{vec}){abandoned}",
                vector::name(vec)
            );
        } else {
            println!(
                "selftest: FAIL {name}: unexpected {} interrupt (IVOR{vec}) at {srr0:#010x}, \
                 ESR {esr:#010x}, DEAR {dear:#010x}{abandoned}",
                vector::name(vec)
            );
        }
        return Outcome::Fail;
    }
    match ctx.result {
        Ok(()) => {
            println!("selftest: PASS {name}");
            Outcome::Pass
        }
        Err(reason) if check::skipped() => {
            println!("selftest: SKIP {name}: {reason}");
            Outcome::Skip
        }
        Err(reason) => {
            match check::detail() {
                Some((got, want)) => {
                    println!("selftest: FAIL {name}: {reason} (got {got:#010x}, want {want:#010x})")
                }
                None => println!("selftest: FAIL {name}: {reason}"),
            }
            Outcome::Fail
        }
    }
}

/// Applies the options in `/chosen/bootargs` (QEMU: `-append`). The only one is
/// `selftest.no-rfci` (see `boot::SELFTEST_NO_RFCI`); unknown words are ignored.
fn apply_options(fdt: u32) {
    let mut buf = [0u8; 128];
    let n = fdt::bootargs(fdt, &mut buf);
    let args = core::str::from_utf8(&buf[..n]).unwrap_or("");
    if args
        .split_ascii_whitespace()
        .any(|w| w == "selftest.no-rfci")
    {
        boot::SELFTEST_NO_RFCI.store(1, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `selftest.no-rfci` was given.
pub fn no_rfci() -> bool {
    boot::SELFTEST_NO_RFCI.load(core::sync::atomic::Ordering::Relaxed) != 0
}

#[no_mangle]
extern "C" fn selftest_main(fdt: u32) -> ! {
    apply_options(fdt);
    reset_machine();
    println!("selftest: start");
    let (mut passed, mut failed) = (0u32, 0u32);
    for &(name, test) in tests::TESTS {
        match run(name, test) {
            Outcome::Pass => passed += 1,
            Outcome::Fail => failed += 1,
            Outcome::Skip => {}
        }
    }
    println!("selftest: {passed} passed, {failed} failed");
    cpu::system_reset()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("selftest: PANIC {}", info);
    cpu::system_reset()
}
