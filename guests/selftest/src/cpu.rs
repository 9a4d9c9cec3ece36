//! The PowerPC 440 core as the selftest sees it: register numbers and bits, and thin wrappers
//! around the instructions that reach them (mfspr/mtspr, mfdcr/mtdcr, mfmsr/mtmsr, wrtee,
//! tlbwe/tlbre/tlbsx).
//!
//! The numbers and bits themselves come from `kestrel_ppc440` (defined there once, with the
//! manual's MSB-0 bit numbers); this module adds the selftest's own MSR values and the
//! UART1 interrupt line of the board. The wrappers are safe functions
//! like the kernel's `arch::spr`: the selftest owns the whole machine, and each test restores
//! what it changes (the harness resets the rest after every test).

use core::arch::asm;

pub use kestrel_ppc440::ivor as vector;
pub use kestrel_ppc440::{dbcr0, dbsr, esr, spr, tcr, tsr};

/// Machine State Register bits (from `kestrel_ppc440`) and the selftest's MSR values.
pub mod msr {
    pub use kestrel_ppc440::msr::{CE, DE, DS, DWE, EE, FE0, FE1, FP, IS, ME, PR};

    /// The bits tests compare in a saved SRR1/CSRR1. CE and WE are left out on purpose:
    /// QEMU ORs the program-interrupt reason into SRR1 bits 12..14 (Classic PowerPC
    /// SRR1 layout), which on Book E are reserved, WE and CE.
    pub const CHECKED: u32 = EE | PR | FP | ME | DE | IS | DS;

    /// The selftest's own MSR: supervisor, translation space 0, only machine checks enabled.
    pub const KERNEL: u32 = ME;
    /// Problem state with interrupts off (tests decide when asynchronous interrupts may come).
    pub const USER: u32 = PR | ME;
}

/// Reads SPR `N`.
#[inline(always)]
pub fn mfspr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: mfspr has no memory side effects; the selftest runs in supervisor mode, where
    // every SPR it names is readable.
    unsafe {
        asm!("mfspr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
    v
}

/// Writes SPR `N`. Not `nomem`: PID, MMUCR, IVPR and the timers change how memory and
/// interrupts behave, so the compiler must not move memory accesses across the write.
#[inline(always)]
pub fn mtspr<const N: u32>(v: u32) {
    // SAFETY: every SPR write is part of a test that restores the register or is reset by
    // the harness afterwards; mtspr touches no memory.
    unsafe {
        asm!("mtspr {n}, {0}", "isync", in(reg) v, n = const N, options(nostack, preserves_flags))
    };
}

/// Reads DCR `N`.
#[inline(always)]
pub fn mfdcr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: the selftest reads only the UIC's DCRs, which have no read side effects.
    unsafe {
        asm!("mfdcr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
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

/// The Universal Interrupt Controller UIC0 (DCR numbers from `kestrel_ppc440::dcr`).
pub mod uic {
    pub use kestrel_ppc440::dcr::uic::line;
    pub use kestrel_ppc440::dcr::{
        UIC0_CR as CR, UIC0_ER as ER, UIC0_MSR as MSR, UIC0_PR as PR, UIC0_SR as SR,
        UIC0_SRS as SRS, UIC0_TR as TR,
    };

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
    pub use kestrel_ppc440::encode::{tlbre, tlbwe};
    use kestrel_ppc440::mmucr;
    use kestrel_ppc440::tlb::{word0, PageSize};

    /// First entry the selftest keeps for itself; tests use 0..PINNED.
    pub const PINNED: u32 = 62;
    /// Entry mapping the first 256 MiB 1:1 (supervisor RWX), written by the boot code.
    pub const RAM_ENTRY: u32 = 63;
    /// Entry mapping the UART page 1:1 (guarded, caching inhibited), written by the boot code.
    pub const IO_ENTRY: u32 = 62;

    // The entry layout is `kestrel_ppc440::tlb`'s; the tests combine its flags as masks.
    pub use kestrel_ppc440::tlb::flags::{
        G, I, M, SR, SW, SX, TS, U0, U1, U2, U3, UR, UW, UX, V, W,
    };
    pub const S4K: u32 = PageSize::K4.code() as u32;
    pub const S16M: u32 = PageSize::M16.code() as u32;
    pub const S256M: u32 = PageSize::M256.code() as u32;
    /// The SIZE field of word 0 for size code `code`.
    pub const fn size(code: u32) -> u32 {
        word0::SIZE.put(code)
    }

    const MMUCR_STS: u32 = mmucr::STS.mask();
    const MMUCR_STID: u32 = mmucr::STID.mask();

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
        assert!(
            index < PINNED,
            "tests must not overwrite the pinned entries"
        );
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
        (index, cr & kestrel_ppc440::cr::CR0_EQ != 0)
    }

    /// `tlbsx. rT,rA,rB` (EA = rA + rB).
    pub fn sx_dot_indexed(ra: u32, rb: u32) -> (u32, bool) {
        let (index, cr): (u32, u32);
        // SAFETY: as for `sx_dot`; rA is a non-zero register so it is added, not read as 0.
        unsafe {
            asm!("tlbsx. {i}, {ra}, {rb}", "mfcr {cr}", i = out(reg) index, ra = in(reg_nonzero) ra,
                 rb = in(reg) rb, cr = out(reg) cr, options(nostack, nomem));
        }
        (index, cr & kestrel_ppc440::cr::CR0_EQ != 0)
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
