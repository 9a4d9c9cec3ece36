//! Exit-cost benchmark guest (supervisor-mode bare metal, PPC440).
//!
//! Runs each sensitive instruction `N` times in a tight loop, `REPEATS` times over, and
//! reports the guest instructions per iteration of the fastest repeat beyond an empty loop,
//! derived from the timebase: under
//! `qemu -icount shift=0` one instruction is 1 ns and the bamboo timebase runs at
//! 400 MHz, so ticks × 2.5 = instructions. Natively each figure is about 1 (the
//! instruction itself); in a Kestrel VM it is the cost of one exit, because the
//! instruction traps and the kernel (or the VMM) emulates it. The timebase itself is
//! read without trapping. In a VM the host kernel's 1 ms timer tick interrupts some
//! repeats; it is not part of an exit's cost, and where the ticks fall moves with anything
//! that changes the instruction count before the benchmark (the kernel's or the root task's
//! start-up). Loops of `N` iterations take well under a tick even for a VMM round trip, so
//! the fastest of `REPEATS` is tick-free and the figure depends on the exit path alone.
//!
//! `mfspr`/`mtspr` use SPRG0; `mfspr_pid`/`mtspr_pid` use PID, the latter writing a new
//! value each time (the guest's address-space switch).
//!
//! Prints `BENCH exits name=<insn> per_exit=<x.y>` lines, then requests a reset.
#![no_std]
#![no_main]

use core::arch::asm;
use core::fmt::Write;
use kestrel_guest_bare::{map_uart, reset, Uart};
use kestrel_ppc440::{dcr, encode, spr};

const N: u32 = 200;
/// Repeats of each timed loop; the fastest counts (see the file's doc).
const REPEATS: u32 = 8;

fn tb() -> u32 {
    let t: u32;
    // SAFETY: reading TBL has no side effects.
    unsafe {
        asm!("mfspr {0}, {tbl}", out(reg) t, tbl = const spr::TBL_R, options(nomem, nostack))
    };
    t
}

/// Times `N` iterations of the instructions `body` (string literals, each ending in a
/// comma), `REPEATS` times, and returns the fastest; `operands` are extra `asm!` operands
/// they name.
macro_rules! timed {
    ([$($body:tt)*] $($operands:tt)*) => {{
        let mut best = u32::MAX;
        for _ in 0..REPEATS {
            let t0 = tb();
            // SAFETY: the measured instructions only touch registers the asm declares,
            // SPRG0, the MSR's EE bit (already 0) and TLB entries 1 and 3.
            unsafe {
                asm!(
                    "mtctr {n}",
                    "2:",
                    $($body)*
                    "bdnz 2b",
                    n = in(reg) N,
                    $($operands)*
                    out("r7") _, out("r8") _, out("r9") _, out("ctr") _,
                );
            }
            best = best.min(tb().wrapping_sub(t0));
        }
        best
    }};
}

fn report(out: &mut Uart, name: &str, ticks: u32, base: u32) {
    // ticks × 2.5 instructions per iteration beyond the empty loop, plus the one
    // instruction that replaced the loop's nop; two decimals (one time base tick over the
    // loop is 2.5 / N = 0.0125 instructions per iteration).
    let hundredths = (ticks.saturating_sub(base) as u64) * 250 / N as u64 + 100;
    let _ = writeln!(
        out,
        "BENCH exits name={} per_exit={}.{:02}",
        name,
        hundredths / 100,
        hundredths % 100
    );
}

/// Entered from `kestrel_guest_bare`'s `_start` (r3, the VM index, is not needed).
#[no_mangle]
extern "C" fn bare_main(_vm: u32) -> ! {
    map_uart();
    let mut out = Uart;
    let _ = writeln!(
        out,
        "exitbench: start ({} iterations each, fastest of {} repeats)",
        N, REPEATS
    );
    let base = timed!(["nop",]);
    let r = [
        ("mfmsr", timed!(["mfmsr 7",])),
        ("mtmsr", timed!(["mfmsr 8", "mtmsr 8",])),
        ("wrtee", timed!(["li 8, 0", "wrtee 8",])),
        ("wrteei", timed!(["wrteei 0",])),
        (
            "mfspr",
            timed!(["mfspr 7, {sprg0}",] sprg0 = const spr::SPRG0,),
        ),
        (
            "mtspr",
            timed!(["mtspr {sprg0}, 7",] sprg0 = const spr::SPRG0,),
        ),
        (
            "mfspr_pid",
            timed!(["mfspr 7, {pid}",] pid = const spr::PID,),
        ),
        // A new PID each time (0 and 1 alternate): the guest's address-space switch.
        (
            "mtspr_pid",
            timed!(["xori 9, 9, 1", "mtspr {pid}, 9",] pid = const spr::PID,),
        ),
        (
            "tlbre",
            timed!(["li 9, 1", ".long {tlbre}",] tlbre = const encode::tlbre(7, 9, 1),),
        ),
        // Entry 3 stays invalid.
        (
            "tlbwe",
            timed!(["li 9, 3", "li 7, 0", ".long {tlbwe}",] tlbwe = const encode::tlbwe(7, 9, 0),),
        ),
        ("tlbsx", timed!(["lis 8, 0xEF60", "tlbsx 7, 0, 8",])),
        (
            "rfi",
            timed!(["bl 3f", "3: mflr 8", "addi 8, 8, 24", "mtspr {srr0}, 8", "mfmsr 9", "mtspr {srr1}, 9", "rfi",]
                       srr0 = const spr::SRR0, srr1 = const spr::SRR1,),
        ),
        (
            "vmm_roundtrip",
            timed!(["mfdcr 7, {uic0}",] uic0 = const dcr::UIC0_BASE,),
        ),
    ];
    // rfi's loop also runs mfmsr and two mtsprs (plus ordinary instructions): subtract
    // their measured costs so the figure is for rfi alone.
    let (mfmsr, mtspr) = (r[0].1.saturating_sub(base), r[5].1.saturating_sub(base));
    for (name, t) in r {
        let t = if name == "rfi" {
            t.saturating_sub(mfmsr + 2 * mtspr)
        } else {
            t
        };
        report(&mut out, name, t, base);
    }
    let _ = writeln!(out, "exitbench: done");
    reset()
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "exitbench: panic");
    loop {}
}
