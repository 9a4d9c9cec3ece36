//! The diagnostics-and-time test guest (supervisor-mode bare metal, PPC440), run as two VMs
//! of `kestrel-vmm` (`vmm.vms=2`) by `tests/functional/test_vm_diagnostics.py`; VM-only (natively there is
//! no VMM whose log it tests). One binary; the role comes from r3, the VM index:
//!
//! - VM 0: installs a program-exception handler that skips the instruction and counts, then
//!   executes [`SPR_ROUNDS`] `mtspr` and as many `mfspr` of SPRs the 440 does not have
//!   (privileged numbers, so each one reaches the VMM, which injects a program exception).
//!   The VMM must log the first few in full and count the rest (issue 9, finding 3). Then it
//!   writes its time base [`TB_ROUNDS`] times far ahead and back (`mtspr` TBU/TBL) and checks
//!   it reads back what it wrote; the trace points the VMM prints when it resets must show
//!   no absurd exit cost (finding 4). Then it requests a reset.
//! - VM 1: reads its own time base [`CHECK_READS`] times while VM 0 writes its own, and
//!   checks it never goes backwards nor jumps (a guest's time-base writes stay its own);
//!   then maps UART0's page executable and jumps into it, which the VMM must report as an
//!   instruction fetch from device memory naming the device, and the kernel's line about the
//!   stopped vCPU must name the thread `vm1.vcpu0` (finding 5).
//!
//! Every line starts with `vmdiag: `; a check that fails prints `vmdiag: FAIL ...`.
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::fmt::Write;
use kestrel_guest_bare::{map_uart, reset, Uart, UART0};
use kestrel_ppc440::tlb::{word0, word2, PageSize};
use kestrel_ppc440::{encode, spr};

/// `mtspr`/`mfspr` rounds of VM 0 (each round is one of each: two VMM exits).
const SPR_ROUNDS: u32 = 200;
/// SPR numbers the 440 does not have: privileged (Book E: 0x10 set), so user mode (where
/// the vCPU really runs) traps with a privileged-instruction exception, and in no class the
/// kernel emulates, so the VMM gets them.
const UNKNOWN_SPR_W: u32 = 1008;
const UNKNOWN_SPR_R: u32 = 1009;
const _: () = assert!(spr::is_privileged(UNKNOWN_SPR_W) && spr::is_privileged(UNKNOWN_SPR_R));
const _: () = assert!(spr::name(UNKNOWN_SPR_W).is_none() && spr::name(UNKNOWN_SPR_R).is_none());
/// Time-base write rounds of VM 0 (three `mtspr` each).
const TB_ROUNDS: u32 = 4000;
/// Where VM 0 moves its time base: TBU far ahead (2^40 ticks and more).
const FAR_TBU: u32 = 0xFFFF_FF00;
/// Time-base reads of VM 1.
const CHECK_READS: u32 = 3_000_000;
/// Largest step between two of VM 1's reads it accepts: far more than a time slice, far
/// less than VM 0's jumps.
const MAX_STEP: u64 = 1 << 32;
/// Where VM 1 jumps: inside UART0's page, where no register is.
const UART_PAGE_PC: u32 = (UART0 as u32 & !0xfff) | 0x14;

// The program-exception handler: skip the instruction (SRR0 += 4), count it in `PROGRAMS`.
// SPRG0/1 save r3/r4 (the guest owns them: nothing else of it takes interrupts).
global_asm!(
    ".section .text.vectors, \"ax\"",
    ".balign 16",
    ".global vmdiag_program",
    "vmdiag_program:",
    "    mtspr {sprg0}, 3",
    "    mtspr {sprg1}, 4",
    "    mfspr 3, {srr0}",
    "    addi 3, 3, 4",
    "    mtspr {srr0}, 3",
    "    lis 4, PROGRAMS@ha",
    "    lwz 3, PROGRAMS@l(4)",
    "    addi 3, 3, 1",
    "    stw 3, PROGRAMS@l(4)",
    "    mfspr 4, {sprg1}",
    "    mfspr 3, {sprg0}",
    "    rfi",
    sprg0 = const spr::SPRG0,
    sprg1 = const spr::SPRG1,
    srr0 = const spr::SRR0,
);

extern "C" {
    fn vmdiag_program();
}

/// Program exceptions taken (written by `vmdiag_program`).
#[no_mangle]
static mut PROGRAMS: u32 = 0;

fn programs() -> u32 {
    // SAFETY: a plain word only the handler above writes, on this one CPU.
    unsafe { core::ptr::addr_of!(PROGRAMS).read_volatile() }
}

/// Points IVPR/IVOR6 at `vmdiag_program`.
fn install_program_handler() {
    let at = vmdiag_program as *const () as u32;
    // SAFETY: the vector prefix and program offset; nothing else uses the vectors.
    unsafe {
        asm!("mtspr {ivpr}, {p}", "mtspr {ivor6}, {o}", "isync",
             ivpr = const spr::IVPR, ivor6 = const spr::IVOR6,
             p = in(reg) at & 0xffff_0000, o = in(reg) at & 0xfff0);
    }
}

/// The 64-bit time base (TBU, TBL, TBU again until no carry came between).
fn timebase() -> u64 {
    loop {
        let (hi, lo, hi2): (u32, u32, u32);
        // SAFETY: reads of the user-readable time base.
        unsafe {
            asm!("mfspr {0}, {tbu}", "mfspr {1}, {tbl}", "mfspr {2}, {tbu}",
                 out(reg) hi, out(reg) lo, out(reg) hi2,
                 tbu = const spr::TBU_R, tbl = const spr::TBL_R,
                 options(nomem, nostack, preserves_flags));
        }
        if hi == hi2 {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
}

/// Writes the guest's time base: TBL = 0 first, so no carry slips in, then TBU, then TBL.
fn set_timebase(v: u64) {
    // SAFETY: the guest's own time base; nothing in this guest depends on it but the checks.
    unsafe {
        asm!("mtspr {tbl}, {z}", "mtspr {tbu}, {hi}", "mtspr {tbl}, {lo}",
             tbl = const spr::TBL_W, tbu = const spr::TBU_W,
             z = in(reg) 0u32, hi = in(reg) (v >> 32) as u32, lo = in(reg) v as u32,
             options(nomem, nostack, preserves_flags));
    }
}

/// Entered from `kestrel_guest_bare`'s `_start` with r3 = the VM index from the VMM.
#[no_mangle]
extern "C" fn bare_main(vm: u32) -> ! {
    map_uart();
    if vm == 0 {
        flood_and_write_time()
    } else {
        check_time_and_jump(vm)
    }
}

fn flood_and_write_time() -> ! {
    let mut out = Uart;
    install_program_handler();
    let _ = writeln!(
        out,
        "vmdiag: vm0 accessing unknown SPRs {UNKNOWN_SPR_W}/{UNKNOWN_SPR_R} {} times",
        2 * SPR_ROUNDS
    );
    for i in 0..SPR_ROUNDS {
        let v: u32;
        // SAFETY: SPRs the 440 does not have: each access takes a program exception, which
        // `vmdiag_program` skips.
        unsafe {
            asm!("mtspr {w}, {x}", "mfspr {v}, {r}",
                 w = const UNKNOWN_SPR_W, r = const UNKNOWN_SPR_R,
                 x = in(reg) i, v = out(reg) v, options(nomem, nostack, preserves_flags));
        }
        let _ = v;
    }
    let taken = programs();
    if taken == 2 * SPR_ROUNDS {
        let _ = writeln!(
            out,
            "vmdiag: vm0 took {taken} program exceptions for {} unknown-SPR accesses",
            2 * SPR_ROUNDS
        );
    } else {
        let _ = writeln!(
            out,
            "vmdiag: FAIL vm0 took {taken} program exceptions for {} unknown-SPR accesses",
            2 * SPR_ROUNDS
        );
    }

    let _ = writeln!(
        out,
        "vmdiag: vm0 writing its time base {TB_ROUNDS} times (TBU {FAR_TBU:#x} and back)"
    );
    let mut wrong = 0u32;
    for _ in 0..TB_ROUNDS {
        let t = timebase();
        set_timebase((FAR_TBU as u64) << 32);
        let far = timebase();
        set_timebase(t);
        if far >> 32 != FAR_TBU as u64 || timebase() < t {
            wrong += 1;
        }
    }
    if wrong == 0 {
        let _ = writeln!(
            out,
            "vmdiag: vm0 wrote its time base {TB_ROUNDS} times and read back what it wrote"
        );
    } else {
        let _ = writeln!(
            out,
            "vmdiag: FAIL vm0 read back another time base than it wrote in {wrong} of {TB_ROUNDS} rounds"
        );
    }
    reset()
}

fn check_time_and_jump(vm: u32) -> ! {
    let mut out = Uart;
    let _ = writeln!(
        out,
        "vmdiag: vm{vm} reading its time base {CHECK_READS} times"
    );
    let (mut prev, mut back, mut largest) = (timebase(), 0u32, 0u64);
    for _ in 0..CHECK_READS {
        let now = timebase();
        if now < prev {
            back += 1;
        } else {
            largest = largest.max(now - prev);
        }
        prev = now;
    }
    if back == 0 && largest <= MAX_STEP {
        let _ = writeln!(
            out,
            "vmdiag: vm{vm} time base never went back, largest step {largest} ticks"
        );
    } else {
        let _ = writeln!(
            out,
            "vmdiag: FAIL vm{vm} time base went back {back} times, largest step {largest} ticks"
        );
    }
    let _ = writeln!(
        out,
        "vmdiag: vm{vm} jumping to {UART_PAGE_PC:#010x} in UART0's page; the VMM should stop this VM"
    );
    // Guest TLB entry 1 (UART0's page, see `map_uart`) again, now also executable.
    const PAGE: u32 = UART0 as u32 & word0::EPN.mask();
    let w0 = PAGE | word0::V.mask() | PageSize::K4.word0();
    let w2 = word2::I.mask() | word2::SX.mask() | word2::SW.mask() | word2::SR.mask();
    // SAFETY: rewrites TLB entry 1 only (as `map_uart` does), then branches into the device
    // page on purpose: the VMM stops this VM there, and nothing after the branch runs.
    unsafe {
        asm!("mtspr {mmucr}, {z}", ".long {a}", ".long {b}", ".long {c}", "isync",
             "mtctr {pc}", "bctr",
             mmucr = const spr::MMUCR, a = const encode::tlbwe(4, 3, 0),
             b = const encode::tlbwe(5, 3, 1), c = const encode::tlbwe(6, 3, 2),
             z = in(reg) 0u32, pc = in(reg) UART_PAGE_PC,
             in("r3") 1u32, in("r4") w0, in("r5") PAGE, in("r6") w2, options(noreturn));
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "vmdiag: FAIL panic");
    reset()
}
