//! The PowerPC 440 core as the selftest sees it: register numbers and bits, and thin wrappers
//! around the instructions that reach them (mfspr/mtspr, mfdcr/mtdcr, mfmsr/mtmsr, wrtee,
//! tlbwe/tlbre/tlbsx).
//!
//! Bit numbers in comments follow the PPC440 core user's manual (MSB-0, bit 0 = 0x8000_0000);
//! the conversion to masks happens once, in the constants. The wrappers are safe functions
//! like the kernel's `arch::spr`: the selftest owns the whole machine, and each test restores
//! what it changes (the harness resets the rest after every test).

use core::arch::asm;

/// Machine State Register bits (PPC440 UM §2.2.1).
pub mod msr {
    /// Critical interrupt enable (bit 14).
    pub const CE: u32 = 1 << (31 - 14);
    /// External interrupt enable (bit 16).
    pub const EE: u32 = 1 << (31 - 16);
    /// Problem state (bit 17).
    pub const PR: u32 = 1 << (31 - 17);
    /// Floating-point available (bit 18).
    pub const FP: u32 = 1 << (31 - 18);
    /// Machine check enable (bit 19).
    pub const ME: u32 = 1 << (31 - 19);
    /// Floating-point exception mode 0 (bit 20).
    pub const FE0: u32 = 1 << (31 - 20);
    /// Debug wait enable (bit 21).
    pub const DWE: u32 = 1 << (31 - 21);
    /// Debug interrupt enable (bit 22).
    pub const DE: u32 = 1 << (31 - 22);
    /// Floating-point exception mode 1 (bit 23).
    pub const FE1: u32 = 1 << (31 - 23);
    /// Instruction address space (bit 26).
    pub const IS: u32 = 1 << (31 - 26);
    /// Data address space (bit 27).
    pub const DS: u32 = 1 << (31 - 27);

    /// The bits tests compare in a saved SRR1/CSRR1. CE and WE are left out on purpose:
    /// QEMU ORs the program-interrupt reason into SRR1 bits 12..14 (Classic PowerPC
    /// SRR1 layout), which on Book E are reserved, WE and CE.
    pub const CHECKED: u32 = EE | PR | FP | ME | DE | IS | DS;

    /// The selftest's own MSR: supervisor, translation space 0, only machine checks enabled.
    pub const KERNEL: u32 = ME;
    /// Problem state with interrupts off (tests decide when asynchronous interrupts may come).
    pub const USER: u32 = PR | ME;
}

/// Exception Syndrome Register bits (PPC440 UM §6.1.6).
pub mod esr {
    /// Illegal instruction (bit 4).
    pub const PIL: u32 = 1 << (31 - 4);
    /// Privileged instruction (bit 5).
    pub const PPR: u32 = 1 << (31 - 5);
    /// Trap (bit 6).
    pub const PTR: u32 = 1 << (31 - 6);
    /// Store operation (bit 8).
    pub const ST: u32 = 1 << (31 - 8);
}

/// Special purpose register numbers (PPC440 UM Table 2-3 / Book E).
pub mod spr {
    pub const DEC: u32 = 22;
    pub const SRR0: u32 = 26;
    pub const SRR1: u32 = 27;
    pub const PID: u32 = 48;
    /// Write-only: QEMU raises a privileged-instruction program interrupt on mfspr.
    pub const DECAR: u32 = 54;
    pub const CSRR0: u32 = 58;
    pub const CSRR1: u32 = 59;
    pub const DEAR: u32 = 61;
    pub const ESR: u32 = 62;
    pub const IVPR: u32 = 63;
    /// User SPR general 0: readable and writable in problem state.
    pub const USPRG0: u32 = 256;
    /// Read-only aliases of SPRG4..7, readable in problem state.
    pub const SPRG4R: u32 = 260;
    pub const SPRG5R: u32 = 261;
    pub const SPRG6R: u32 = 262;
    pub const SPRG7R: u32 = 263;
    /// Timebase read ports (readable in problem state).
    pub const TBL_R: u32 = 268;
    pub const TBU_R: u32 = 269;
    pub const SPRG0: u32 = 272;
    pub const SPRG1: u32 = 273;
    pub const SPRG2: u32 = 274;
    pub const SPRG3: u32 = 275;
    pub const SPRG4: u32 = 276;
    pub const SPRG5: u32 = 277;
    pub const SPRG6: u32 = 278;
    pub const SPRG7: u32 = 279;
    /// Timebase write ports.
    pub const TBL_W: u32 = 284;
    pub const TBU_W: u32 = 285;
    pub const PIR: u32 = 286;
    pub const PVR: u32 = 287;
    pub const DBSR: u32 = 304;
    pub const DBCR0: u32 = 308;
    pub const DBCR1: u32 = 309;
    pub const DBCR2: u32 = 310;
    pub const IAC1: u32 = 312;
    pub const IAC2: u32 = 313;
    pub const IAC3: u32 = 314;
    pub const IAC4: u32 = 315;
    pub const DAC1: u32 = 316;
    pub const DAC2: u32 = 317;
    pub const DVC1: u32 = 318;
    pub const DVC2: u32 = 319;
    pub const TSR: u32 = 336;
    pub const TCR: u32 = 340;
    pub const IVOR0: u32 = 400;
    pub const MCSRR0: u32 = 570;
    pub const MCSRR1: u32 = 571;
    pub const CCR1: u32 = 888;
    pub const MMUCR: u32 = 946;
    pub const CCR0: u32 = 947;
}

/// Timer Control Register (PPC440 UM §8.6).
pub mod tcr {
    /// Watchdog period (bits 0:1).
    pub const WP_SHIFT: u32 = 30;
    // Bits 2:3 are WRC, watchdog reset control: write-once on silicon, never written here.
    /// Watchdog interrupt enable (bit 4).
    pub const WIE: u32 = 1 << (31 - 4);
    /// Decrementer interrupt enable (bit 5).
    pub const DIE: u32 = 1 << (31 - 5);
    /// Fixed-interval timer period (bits 6:7).
    pub const FP_SHIFT: u32 = 24;
    /// Fixed-interval timer interrupt enable (bit 8).
    pub const FIE: u32 = 1 << (31 - 8);
    /// Decrementer auto-reload enable (bit 9).
    pub const ARE: u32 = 1 << (31 - 9);
}

/// Timer Status Register (PPC440 UM §8.7); every bit is write-1-to-clear.
pub mod tsr {
    /// Enable next watchdog (bit 0).
    pub const ENW: u32 = 1 << 31;
    /// Watchdog interrupt status (bit 1).
    pub const WIS: u32 = 1 << (31 - 1);
    /// Decrementer interrupt status (bit 4).
    pub const DIS: u32 = 1 << (31 - 4);
    /// Fixed-interval timer interrupt status (bit 5).
    pub const FIS: u32 = 1 << (31 - 5);
}

/// Debug Control Register 0 (PPC440 UM §10.4.1).
pub mod dbcr0 {
    /// Internal debug mode (bit 1).
    pub const IDM: u32 = 1 << (31 - 1);
    /// Reset request (bits 2:3); 0b11 = system reset.
    pub const RST_SYSTEM: u32 = 3 << 28;
    /// Instruction completion debug event (bit 4).
    pub const ICMP: u32 = 1 << (31 - 4);
    /// Trap debug event (bit 7).
    pub const TRAP: u32 = 1 << (31 - 7);
    /// Instruction address compare 1 event (bit 8).
    pub const IAC1: u32 = 1 << (31 - 8);
    /// Return debug event (bit 16).
    pub const RET: u32 = 1 << (31 - 16);
}

/// Debug Status Register (PPC440 UM §10.4.4).
pub mod dbsr {
    /// Instruction completion debug event (bit 4).
    pub const ICMP: u32 = 1 << (31 - 4);
}

/// Interrupt vector numbers = IVOR index (Book E; PPC440 UM Table 6-2).
#[allow(dead_code)] // The complete table, including AP unavailable, which no test raises.
pub mod vector {
    pub const CRITICAL: u32 = 0;
    pub const MACHINE_CHECK: u32 = 1;
    pub const DSI: u32 = 2;
    pub const ISI: u32 = 3;
    pub const EXTERNAL: u32 = 4;
    pub const ALIGNMENT: u32 = 5;
    pub const PROGRAM: u32 = 6;
    pub const FP_UNAVAILABLE: u32 = 7;
    pub const SYSCALL: u32 = 8;
    pub const AP_UNAVAILABLE: u32 = 9;
    pub const DECREMENTER: u32 = 10;
    pub const FIT: u32 = 11;
    pub const WATCHDOG: u32 = 12;
    pub const DTLB_MISS: u32 = 13;
    pub const ITLB_MISS: u32 = 14;
    pub const DEBUG: u32 = 15;

    pub const NAMES: [&str; 16] = [
        "critical input", "machine check", "data storage", "instruction storage", "external input",
        "alignment", "program", "FP unavailable", "system call", "AP unavailable", "decrementer",
        "fixed-interval timer", "watchdog", "data TLB miss", "instruction TLB miss", "debug",
    ];

    /// Whether interrupts of `vector` arrive independently of the instruction stream.
    pub fn is_asynchronous(vector: u32) -> bool {
        matches!(vector, CRITICAL | MACHINE_CHECK | EXTERNAL | DECREMENTER | FIT | WATCHDOG)
    }

    /// The name of `vector`, or "?" for a number outside 0..16.
    pub fn name(vector: u32) -> &'static str {
        NAMES.get(vector as usize).copied().unwrap_or("?")
    }
}

/// Reads SPR `N`.
#[inline(always)]
pub fn mfspr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: mfspr has no memory side effects; the selftest runs in supervisor mode, where
    // every SPR it names is readable.
    unsafe { asm!("mfspr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
    v
}

/// Writes SPR `N`. Not `nomem`: PID, MMUCR, IVPR and the timers change how memory and
/// interrupts behave, so the compiler must not move memory accesses across the write.
#[inline(always)]
pub fn mtspr<const N: u32>(v: u32) {
    // SAFETY: every SPR write is part of a test that restores the register or is reset by
    // the harness afterwards; mtspr touches no memory.
    unsafe { asm!("mtspr {n}, {0}", "isync", in(reg) v, n = const N, options(nostack, preserves_flags)) };
}

/// Reads DCR `N`.
#[inline(always)]
pub fn mfdcr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: the selftest reads only the UIC's DCRs, which have no read side effects.
    unsafe { asm!("mfdcr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
    v
}

/// Writes DCR `N`.
#[inline(always)]
pub fn mtdcr<const N: u32>(v: u32) {
    // SAFETY: the selftest writes only the UIC's DCRs, and the harness resets the UIC
    // after every test.
    unsafe { asm!("mtdcr {n}, {0}", in(reg) v, n = const N, options(nostack, preserves_flags)) };
}

#[inline(always)]
pub fn mfmsr() -> u32 {
    let v: u32;
    // SAFETY: reading the MSR has no side effects.
    unsafe { asm!("mfmsr {0}", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

/// Writes the MSR and context-synchronizes.
#[inline(always)]
pub fn mtmsr(v: u32) {
    // SAFETY: callers never set PR, IS, DS or WE through here (those change where the next
    // instruction comes from; tests that need them use the asm snippets).
    unsafe { asm!("mtmsr {0}", "isync", in(reg) v, options(nostack, preserves_flags)) };
}

/// `wrtee rS`: copies bit 16 (EE) of `v` into MSR[EE].
#[inline(always)]
pub fn wrtee(v: u32) {
    // SAFETY: changes only MSR[EE]; tests arm the handler for what may then arrive.
    unsafe { asm!("wrtee {0}", in(reg) v, options(nostack, preserves_flags)) };
}

/// `wrteei 1`.
#[inline(always)]
pub fn wrteei_1() {
    // SAFETY: as for `wrtee`.
    unsafe { asm!("wrteei 1", options(nostack, preserves_flags)) };
}

/// `wrteei 0`.
#[inline(always)]
pub fn wrteei_0() {
    // SAFETY: masking interrupts is always safe.
    unsafe { asm!("wrteei 0", options(nostack, preserves_flags)) };
}

/// The 64-bit timebase, read through the user-readable ports.
pub fn timebase() -> u64 {
    loop {
        let hi = mfspr::<{ spr::TBU_R }>();
        let lo = mfspr::<{ spr::TBL_R }>();
        if mfspr::<{ spr::TBU_R }>() == hi {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
}

/// Polls `cond` until it holds or `ticks` timebase ticks (400 MHz on bamboo) have passed.
/// Returns the last value of `cond`. Bounding by the timebase instead of by iterations keeps
/// the bound meaningful both with and without `-icount`, and under a VMM.
pub fn wait_for(ticks: u64, mut cond: impl FnMut() -> bool) -> bool {
    let start = timebase();
    loop {
        if cond() {
            return true;
        }
        if timebase().wrapping_sub(start) > ticks {
            return cond();
        }
    }
}

/// Requests a system reset through DBCR0[RST]; QEMU with `-no-reboot` exits.
pub fn system_reset() -> ! {
    mtspr::<{ spr::DBCR0 }>(dbcr0::RST_SYSTEM);
    loop {
        core::hint::spin_loop();
    }
}

/// The Universal Interrupt Controller (PPC440EP UM §10) on DCRs 0xC0..0xC8.
pub mod uic {
    /// Status (read; write 1 to clear).
    pub const SR: u32 = 0xC0;
    /// Status set (write 1 to set).
    pub const SRS: u32 = 0xC1;
    /// Enable.
    pub const ER: u32 = 0xC2;
    /// Critical (1 = routed to the critical input).
    pub const CR: u32 = 0xC3;
    /// Polarity (1 = active high / rising edge).
    pub const PR: u32 = 0xC4;
    /// Trigger (1 = edge).
    pub const TR: u32 = 0xC5;
    /// Masked status (SR & ER), read only.
    pub const MSR: u32 = 0xC6;

    /// Bit `31 - n` of every UIC register is interrupt line `n` (MSB-0 numbering).
    pub const fn line(n: u32) -> u32 {
        1 << (31 - n)
    }
    /// UART1's line on bamboo.
    pub const UART1: u32 = line(1);
}

/// The 440's software-managed TLB (PPC440 UM §5): 64 entries of three words.
///
/// LLVM assembles `tlbwe rS,rA,1|2` and `tlbre rT,rA,1|2` as word 0 without a warning
/// (platform notes), so every tlbwe/tlbre is emitted as a literal word with fixed registers.
pub mod tlb {
    use super::{mfspr, mtspr, spr};
    use core::arch::asm;

    /// First entry the selftest keeps for itself; tests use 0..PINNED.
    pub const PINNED: u32 = 62;
    /// Entry mapping the first 256 MiB 1:1 (supervisor RWX), written by the boot code.
    pub const RAM_ENTRY: u32 = 63;
    /// Entry mapping the UART page 1:1 (guarded, caching inhibited), written by the boot code.
    pub const IO_ENTRY: u32 = 62;

    /// Word 0 (PPC440 UM Figure 5-3): EPN[0:21], V[22], TS[23], SIZE[24:27].
    pub const V: u32 = 1 << (31 - 22);
    pub const TS: u32 = 1 << (31 - 23);
    /// SIZE codes the 440 implements: 1K, 4K, 16K, 64K, 256K, 1M, 16M, 256M, 1G.
    pub const SIZES: [u32; 9] = [0, 1, 2, 3, 4, 5, 7, 9, 10];
    pub const S4K: u32 = 1;
    pub const S16M: u32 = 7;
    pub const S256M: u32 = 9;
    /// The SIZE field of word 0 for size code `code`.
    pub const fn size(code: u32) -> u32 {
        code << 4
    }
    /// Bytes covered by size code `code` (1 KiB * 4^code).
    pub const fn bytes(code: u32) -> u32 {
        1024 << (2 * code)
    }

    /// Word 2: U0..U3 [16:19], W I M G E [20:24], UX UW UR SX SW SR [26:31].
    pub const U0: u32 = 1 << (31 - 16);
    pub const U1: u32 = 1 << (31 - 17);
    pub const U2: u32 = 1 << (31 - 18);
    pub const U3: u32 = 1 << (31 - 19);
    pub const W: u32 = 1 << (31 - 20);
    pub const I: u32 = 1 << (31 - 21);
    pub const M: u32 = 1 << (31 - 22);
    pub const G: u32 = 1 << (31 - 23);
    pub const UX: u32 = 1 << (31 - 26);
    pub const UW: u32 = 1 << (31 - 27);
    pub const UR: u32 = 1 << (31 - 28);
    pub const SX: u32 = 1 << (31 - 29);
    pub const SW: u32 = 1 << (31 - 30);
    pub const SR: u32 = 1 << (31 - 31);

    /// MMUCR[STS] (bit 15) and MMUCR[STID] (bits 24:31).
    pub const MMUCR_STS: u32 = 1 << (31 - 15);
    pub const MMUCR_STID: u32 = 0xff;

    /// `tlbwe rS,rA,WS` (X-form, XO 978).
    pub const fn tlbwe(rs: u32, ra: u32, ws: u32) -> u32 {
        (31 << 26) | (rs << 21) | (ra << 16) | (ws << 11) | (978 << 1)
    }
    /// `tlbre rT,rA,WS` (X-form, XO 946).
    pub const fn tlbre(rt: u32, ra: u32, ws: u32) -> u32 {
        (31 << 26) | (rt << 21) | (ra << 16) | (ws << 11) | (946 << 1)
    }

    /// Sets MMUCR[STID] (the TID tlbwe writes and tlbsx searches) and MMUCR[STS].
    pub fn set_search(tid: u8, ts: bool) {
        let mmucr = mfspr::<{ spr::MMUCR }>() & !(MMUCR_STID | MMUCR_STS);
        mtspr::<{ spr::MMUCR }>(mmucr | tid as u32 | if ts { MMUCR_STS } else { 0 });
    }

    /// Writes the three words of entry `index` exactly as given, word 0 first, with TID `tid`.
    pub fn write_raw(index: u32, tid: u8, w0: u32, w1: u32, w2: u32) {
        set_search(tid, false);
        // SAFETY: tests only write entries below PINNED (checked by callers' constants), so
        // the mappings the selftest runs on stay intact.
        unsafe {
            asm!(
                ".long {a}", ".long {b}", ".long {c}", "isync",
                a = const tlbwe(4, 3, 0), b = const tlbwe(5, 3, 1), c = const tlbwe(6, 3, 2),
                in("r3") index, in("r4") w0, in("r5") w1, in("r6") w2,
                options(nostack, preserves_flags)
            );
        }
    }

    /// Writes only word `ws` (1 or 2) of entry `index`.
    pub fn write_word(index: u32, ws: u32, value: u32) {
        // SAFETY: as for `write_raw`.
        unsafe {
            if ws == 1 {
                asm!(".long {a}", "isync", a = const tlbwe(4, 3, 1), in("r3") index, in("r4") value,
                     options(nostack, preserves_flags));
            } else {
                asm!(".long {a}", "isync", a = const tlbwe(4, 3, 2), in("r3") index, in("r4") value,
                     options(nostack, preserves_flags));
            }
        }
    }

    /// Installs a mapping: invalidates entry `index` first, then writes words 1, 2 and 0.
    ///
    /// The invalidation matters on QEMU 7.2, which flushes its own translation cache when a
    /// valid entry's word 0 or 1 changes but not when word 2 (the permissions) changes.
    pub fn map(index: u32, tid: u8, w0: u32, w1: u32, w2: u32) {
        assert!(index < PINNED, "tests must not overwrite the pinned entries");
        invalidate(index);
        write_raw(index, tid, 0, w1, w2);
        write_raw(index, tid, w0, w1, w2);
    }

    /// Invalidates entry `index` (word 0 = 0: V clear).
    pub fn invalidate(index: u32) {
        // SAFETY: as for `write_raw`.
        unsafe {
            asm!(".long {a}", "isync", a = const tlbwe(4, 3, 0), in("r3") index, in("r4") 0u32,
                 options(nostack, preserves_flags));
        }
    }

    /// Reads entry `index`: (word 0, word 1, word 2, TID). tlbre of word 0 loads the entry's
    /// TID into MMUCR[STID], which is where the TID comes from.
    pub fn read(index: u32) -> (u32, u32, u32, u8) {
        let (a, b, c): (u32, u32, u32);
        // SAFETY: tlbre only reads the TLB (and sets MMUCR[STID]).
        unsafe {
            asm!(
                ".long {x}", ".long {y}", ".long {z}",
                x = const tlbre(4, 3, 0), y = const tlbre(5, 3, 1), z = const tlbre(6, 3, 2),
                in("r3") index, out("r4") a, out("r5") b, out("r6") c,
                options(nostack, preserves_flags, nomem)
            );
        }
        (a, b, c, (mfspr::<{ spr::MMUCR }>() & MMUCR_STID) as u8)
    }

    /// `tlbsx. rT,0,rB` with the current MMUCR: the index found and CR0[EQ].
    pub fn sx_dot(ea: u32) -> (u32, bool) {
        let (index, cr): (u32, u32);
        // SAFETY: tlbsx. only searches the TLB and sets CR0.
        unsafe {
            asm!("tlbsx. {i}, 0, {ea}", "mfcr {cr}", i = out(reg) index, ea = in(reg) ea,
                 cr = out(reg) cr, options(nostack, nomem));
        }
        // CR0[EQ] is CR bit 2 (MSB-0).
        (index, cr & (1 << (31 - 2)) != 0)
    }

    /// `tlbsx. rT,rA,rB` (EA = rA + rB).
    pub fn sx_dot_indexed(ra: u32, rb: u32) -> (u32, bool) {
        let (index, cr): (u32, u32);
        // SAFETY: as for `sx_dot`; rA is a non-zero register so it is added, not read as 0.
        unsafe {
            asm!("tlbsx. {i}, {ra}, {rb}", "mfcr {cr}", i = out(reg) index, ra = in(reg_nonzero) ra,
                 rb = in(reg) rb, cr = out(reg) cr, options(nostack, nomem));
        }
        (index, cr & (1 << (31 - 2)) != 0)
    }

    /// `tlbsx rT,0,rB` (no record form): the index only, undefined on a miss.
    pub fn sx(ea: u32) -> u32 {
        let index: u32;
        // SAFETY: tlbsx only searches the TLB.
        unsafe {
            asm!("tlbsx {i}, 0, {ea}", i = out(reg) index, ea = in(reg) ea,
                 options(nostack, nomem, preserves_flags));
        }
        index
    }

    /// Searches for `ea` with TID `tid` in translation space `ts`.
    pub fn search(ea: u32, tid: u8, ts: bool) -> Option<u32> {
        set_search(tid, ts);
        let (index, found) = sx_dot(ea);
        found.then_some(index & 0x3f)
    }
}
