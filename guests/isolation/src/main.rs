//! Isolation test guest (supervisor-mode bare metal, PPC440), run as two VMs of
//! `kestrel-vmm` (`vmm.vms=2`, `tests/functional/test_vm_isolation.py`). One binary; the role comes
//! from r3, which the VMM sets to the VM's index:
//!
//! - VM 0, the writer: overwrites all of its 32 MiB of guest RAM outside its own image
//!   (and stack) with an index-dependent pattern, `WRITER_PASSES` times, reads the last
//!   pass back, then stores beyond its RAM (guest-physical 32 MiB), which the VMM answers
//!   by killing the VM. If it survives that store it prints a FAIL line and resets.
//! - VM 1 (and any further VM), the checker: fills the same ranges of its own RAM with a
//!   xorshift pseudo-random sequence, takes a 64-bit FNV-1a checksum of them and then
//!   recomputes it `CHECKER_ROUNDS` times; the two vCPUs are time-sliced, so the rounds
//!   overlap the writer's whole run and go on after it was killed. Prints
//!   `isolation: checksum unchanged over N rounds`, or `isolation: FAIL round K: ...`,
//!   then requests a reset.
//!
//! All RAM accesses go through `kestrel_guest_bare::ram` (inline `lwz`/`stw`), because
//! guest-physical 0 is RAM here and Rust pointers may not be null.
#![no_std]
#![no_main]

use core::fmt::Write;
use kestrel_guest_bare::{map_uart, ram, reset, Uart};

/// End of the guest RAM the VMM gives a bare-metal guest (it starts at 0).
const RAM_END: u32 = 32 << 20;
/// Where the writer finally stores: beyond its RAM, still inside the VMM's 256 MiB TLB entry.
const BEYOND: u32 = RAM_END + 0x1000;
const WRITER_PASSES: u32 = 16;
const CHECKER_ROUNDS: u32 = 64;
/// The checker prints every this many rounds (and the first and last).
const REPORT_EVERY: u32 = 8;

extern "C" {
    static __image_start: u8;
    static __image_end: u8;
}

/// The RAM this guest may overwrite: below its image, and from its end to `RAM_END`.
fn regions() -> [(u32, u32); 2] {
    // Only the linker symbols' addresses are taken, never their contents (no unsafe needed).
    let (start, end) = (
        core::ptr::addr_of!(__image_start) as u32,
        core::ptr::addr_of!(__image_end) as u32,
    );
    [(0, start), (end, RAM_END)]
}

fn region_kib() -> u32 {
    regions().iter().map(|(lo, hi)| (hi - lo) >> 10).sum()
}

/// Entered from `kestrel_guest_bare`'s `_start` with r3 = the VM index from the VMM.
#[no_mangle]
extern "C" fn bare_main(vm: u32) -> ! {
    map_uart();
    let mut out = Uart;
    let [(lo0, hi0), (lo1, hi1)] = regions();
    let role = if vm == 0 { "writer" } else { "checker" };
    let _ = writeln!(
        out,
        "isolation: vm{vm} is the {role}: RAM {:#x}..{:#x} and {:#x}..{:#x} ({} KiB)",
        lo0,
        hi0,
        lo1,
        hi1,
        region_kib()
    );
    if vm == 0 {
        writer(&mut out, vm)
    } else {
        checker(&mut out, vm)
    }
}

fn writer(out: &mut Uart, vm: u32) -> ! {
    let mut key = 0;
    for pass in 1..=WRITER_PASSES {
        key = 0xA5A5_0000 | (pass << 8) | vm;
        for (lo, hi) in regions() {
            for a in (lo..hi).step_by(4) {
                // SAFETY: as in `checksum`.
                unsafe { ram::store(a, a ^ key) };
            }
        }
        let _ = writeln!(
            out,
            "isolation: writer pass {pass}/{WRITER_PASSES}: wrote {} KiB with key {key:#010x}",
            region_kib()
        );
    }
    let mut bad = 0u32;
    for (lo, hi) in regions() {
        for a in (lo..hi).step_by(4) {
            // SAFETY: as in `checksum`.
            bad += (unsafe { ram::load(a) } != a ^ key) as u32;
        }
    }
    if bad != 0 {
        let _ = writeln!(
            out,
            "isolation: FAIL writer read back {bad} wrong words of its own pass"
        );
        reset();
    }
    let _ = writeln!(out, "isolation: writer read its last pass back intact");
    let _ = writeln!(
        out,
        "isolation: writer storing beyond its RAM at {BEYOND:#010x}; the VMM should stop this VM"
    );
    // SAFETY: on purpose, beyond this guest's RAM: the VMM stops the VM at this store.
    unsafe { ram::store(BEYOND, key) };
    let _ = writeln!(
        out,
        "isolation: FAIL writer survived a store beyond its RAM at {BEYOND:#010x}"
    );
    reset()
}

/// 64-bit FNV-1a over the words of `regions()`.
fn checksum() -> u64 {
    // SAFETY: `regions()` is this guest's RAM outside its image, mapped 1:1.
    unsafe { ram::checksum(&regions()) }
}

fn checker(out: &mut Uart, vm: u32) -> ! {
    // SAFETY: as in `checksum`.
    unsafe { ram::fill(&regions(), 0x9E37_79B9 ^ vm) };
    let expect = checksum();
    let _ = writeln!(
        out,
        "isolation: filled {} KiB, checksum {expect:#018x}; rechecking {CHECKER_ROUNDS} rounds",
        region_kib()
    );
    for round in 1..=CHECKER_ROUNDS {
        let sum = checksum();
        if sum != expect {
            let _ = writeln!(
                out,
                "isolation: FAIL round {round}: checksum {sum:#018x}, expected {expect:#018x}"
            );
            reset();
        }
        if round == 1 || round % REPORT_EVERY == 0 || round == CHECKER_ROUNDS {
            let _ = writeln!(
                out,
                "isolation: round {round} checksum {sum:#018x} unchanged"
            );
        }
    }
    let _ = writeln!(
        out,
        "isolation: checksum unchanged over {CHECKER_ROUNDS} rounds"
    );
    reset()
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "isolation: FAIL panic");
    reset()
}
