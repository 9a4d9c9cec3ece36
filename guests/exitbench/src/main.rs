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
//! In a VM (r3, the VM index, below 16; natively QEMU passes the device tree's address) it
//! then times two uses of the node's fabric (bench/shared_fabric.py compares the VMM's
//! in-process engine with the fabric service): `dma_read`, a load from the VM's torus DMA
//! group page (an MMIO exit the VMM answers with one `dma_read` of the fabric), and
//! `coll_packet`, one collective packet sent to this node itself on VC0 and received
//! (header, 16 payload quads of four word stores, the status, the header and 64 word loads:
//! about 130 exits, the fabric calls among them), per packet.
//!
//! Prints `BENCH exits name=<insn> per_exit=<x.y>` lines (and in a VM `BENCH fabric
//! name=<what> per_op=<x.y>` lines), then requests a reset.
#![no_std]
#![no_main]

use core::arch::asm;
use core::fmt::Write;
use kestrel_guest_bare::{map_uart, reset, Uart};
use kestrel_ppc440::tlb::{word0, word1, word2, PageSize};
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
    report_as(out, "exits", name, ticks, base, N);
}

/// `BENCH <group> name=<name> per_exit=<x.y>` (group `exits`) or `per_op=` (others): ticks
/// × 2.5 instructions per iteration of `n` beyond the empty loop (`base`), plus the one
/// instruction that replaced the loop's nop; two decimals (one time base tick over the
/// loop is 2.5 / N = 0.0125 instructions per iteration).
fn report_as(out: &mut Uart, group: &str, name: &str, ticks: u32, base: u32, n: u32) {
    let hundredths =
        (ticks.saturating_sub(base) as u64) * 250 / n as u64 + if base != 0 { 100 } else { 0 };
    let _ = writeln!(
        out,
        "BENCH {} name={} {}={}.{:02}",
        group,
        name,
        if group == "exits" {
            "per_exit"
        } else {
            "per_op"
        },
        hundredths / 100,
        hundredths % 100
    );
}

/// Entered from `kestrel_guest_bare`'s `_start` with r3: the VM index in a VM.
#[no_mangle]
extern "C" fn bare_main(vm: u32) -> ! {
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
    if vm < 16 {
        fabric(&mut out, base);
    }
    let _ = writeln!(out, "exitbench: done");
    reset()
}

/// kestrel-bgp's numbers the fabric loops use (that crate needs an allocator; this guest has
/// none): the DMA group page of a VM and a counter's BASE register, the collective's VC0.
mod dma {
    pub const BASE: u64 = 0x6_0000_0000;
    pub const GROUP_SIZE: u64 = 0x1000;
    pub const VM_GROUP: u32 = 3;
    pub const INJ_CTR: u32 = 0x400;
    pub const CTR_BASE: u32 = 0x8;
}
mod coll {
    pub const VC0_BASE: u64 = 0x6_1000_0000;
    pub const DI: u32 = 0x00;
    pub const HI: u32 = 0x10;
    pub const DR: u32 = 0x20;
    pub const HR: u32 = 0x30;
    pub const S: u32 = 0x40;
    pub const PAYLOAD_QUADS: u32 = 16;
    pub const HDR_P2P: u32 = 1 << 27;
    pub const HDR_P2P_ADDR_SHIFT: u32 = 2;
    pub const HDR_P2P_ADDR_MASK: u32 = 0xFF_FFFF;
    pub const ST_RCV_HDRS_SHIFT: u32 = 0;
    pub const ST_HDRS_MASK: u32 = 0xF;
    pub const DCR_BASE: u32 = 0xC00;
    pub const DCR_NADDR: u32 = 0x41;
}

/// Where the fabric loops see the VM's DMA group page and its collective VC0 window (guest
/// TLB entries 4 and 5; the benchmark above uses entries 1 and 3).
const DMA_VA: u32 = 0xD000_0000;
const COLL_VA: u32 = 0xD000_1000;
/// Packets per timed repeat: a packet costs about 130 exits, and a repeat must stay well
/// under the host's 1 ms tick (1M instructions) for the fastest to be tick-free.
const PACKETS: u32 = 4;

/// Guest TLB entry `index`: virtual page `va` onto 36-bit physical `pa`, 4 KiB, uncached and
/// guarded, supervisor read/write.
fn map_device(index: u32, va: u32, pa: u64) {
    let w0 = va | word0::V.mask() | PageSize::K4.word0();
    let w1 = (pa as u32 & word0::EPN.mask()) | ((pa >> 32) as u32 & word1::ERPN.mask());
    let w2 = word2::I.mask() | word2::G.mask() | word2::SW.mask() | word2::SR.mask();
    // SAFETY: writes TLB entry `index` only (MMUCR = 0: TID 0), as `map_uart_at` does.
    unsafe {
        asm!("mtspr {mmucr}, {z}", ".long {a}", ".long {b}", ".long {c}", "isync",
             mmucr = const spr::MMUCR, a = const encode::tlbwe(4, 3, 0),
             b = const encode::tlbwe(5, 3, 1), c = const encode::tlbwe(6, 3, 2),
             z = in(reg) 0u32, in("r3") index & 63, in("r4") w0, in("r5") w1, in("r6") w2);
    }
}

/// Times the fabric's uses (see the file's doc); `base` is the empty loop's ticks.
fn fabric(out: &mut Uart, base: u32) {
    map_device(
        4,
        DMA_VA,
        dma::BASE + dma::VM_GROUP as u64 * dma::GROUP_SIZE,
    );
    map_device(5, COLL_VA, coll::VC0_BASE);
    let ctr_base = DMA_VA + dma::INJ_CTR + dma::CTR_BASE;
    let dma_read = timed!(["lwz 7, 0({reg})",] reg = in(reg) ctr_base,);
    report_as(out, "fabric", "dma_read", dma_read, base, N);
    // One packet to this node itself (point-to-point, the class the VMM routes for bgnet,
    // node address: the endpoint's number, read from the collective's DCR).
    let header =
        coll::HDR_P2P | (node_address() & coll::HDR_P2P_ADDR_MASK) << coll::HDR_P2P_ADDR_SHIFT;
    let reg = |r: u32| (COLL_VA + r) as *mut u32;
    let mut best = u32::MAX;
    let mut lost = 0u32;
    for rep in 0..REPEATS {
        let t0 = tb();
        for p in 0..PACKETS {
            // SAFETY: the collective's VC0 registers, mapped uncached and guarded above.
            unsafe {
                reg(coll::HI).write_volatile(header);
                for q in 0..coll::PAYLOAD_QUADS {
                    for w in 0..4 {
                        reg(coll::DI + 4 * w).write_volatile(rep ^ p ^ q ^ w);
                    }
                }
                let mut tries = 0;
                while (reg(coll::S).read_volatile() >> coll::ST_RCV_HDRS_SHIFT) & coll::ST_HDRS_MASK
                    == 0
                {
                    tries += 1;
                    if tries == 100 {
                        break;
                    }
                }
                if tries == 100 {
                    lost += 1;
                    continue;
                }
                let _ = reg(coll::HR).read_volatile();
                for _ in 0..coll::PAYLOAD_QUADS {
                    for w in 0..4 {
                        let _ = reg(coll::DR + 4 * w).read_volatile();
                    }
                }
            }
        }
        best = best.min(tb().wrapping_sub(t0));
    }
    if lost != 0 {
        let _ = writeln!(
            out,
            "exitbench: coll_packet: {lost} packets did not come back"
        );
        return;
    }
    // The empty loop's cost per iteration does not apply here: per packet, all of it.
    report_as(out, "fabric", "coll_packet", best, 0, PACKETS);
}

/// The collective node address of this VM's endpoint (DCR NADDR, above DCR 1023: mfdcrx).
fn node_address() -> u32 {
    let v: u32;
    // SAFETY: reads one DCR (the VMM emulates it).
    unsafe {
        asm!(".long {mfdcrx}", mfdcrx = const mfdcrx(7, 8), out("r7") v,
             in("r8") coll::DCR_BASE + coll::DCR_NADDR, options(nostack))
    };
    v
}

/// `mfdcrx rt, ra` (X-form, primary 31, extended 259).
const fn mfdcrx(rt: u32, ra: u32) -> u32 {
    31 << 26 | rt << 21 | ra << 16 | 259 << 1
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "exitbench: panic");
    loop {}
}
