//! Special purpose and device control registers, by number (PPC440 UM Table 2-4).

use core::arch::asm;

pub const DEC: u32 = 22;
pub const SRR0: u32 = 26;
pub const SRR1: u32 = 27;
pub const PID: u32 = 48;
pub const DECAR: u32 = 54;
pub const CSRR0: u32 = 58;
pub const CSRR1: u32 = 59;
pub const DEAR: u32 = 61;
pub const ESR: u32 = 62;
pub const IVPR: u32 = 63;
/// USPRG0: user read/write.
pub const USPRG0: u32 = 256;
pub const SPRG0: u32 = 272;
pub const SPRG1: u32 = 273;
pub const SPRG2: u32 = 274;
pub const SPRG3: u32 = 275;
/// SPRG4, supervisor write port; user mode reads it as SPR 260.
pub const SPRG4W: u32 = 276;
pub const TBL_W: u32 = 284;
pub const TBU_W: u32 = 285;
pub const TBL_R: u32 = 268;
pub const TBU_R: u32 = 269;
pub const PVR: u32 = 287;
pub const DBCR0: u32 = 308;
pub const DBSR: u32 = 304;
pub const TSR: u32 = 336;
pub const TCR: u32 = 340;
pub const IVOR0: u32 = 400;
pub const MCSRR0: u32 = 570;
pub const MCSRR1: u32 = 571;
pub const MCSR: u32 = 572;
pub const MMUCR: u32 = 946;
pub const CCR0: u32 = 947;

/// Reads SPR `N`.
#[inline(always)]
pub fn read<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: mfspr of a kernel-chosen SPR number has no memory side effects; the
    // kernel runs in supervisor mode so every SPR is readable.
    unsafe { asm!("mfspr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
    v
}

/// Writes SPR `N`.
#[inline(always)]
pub fn write<const N: u32>(v: u32) {
    // SAFETY: the callers in arch/, api/, glue/ and virt/ only write SPRs whose effect they
    // document (PID, SPRG1/4, timers, IVORs); mtspr has no memory side effects.
    unsafe { asm!("mtspr {n}, {0}", in(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
}

/// Reads DCR `N`.
#[inline(always)]
pub fn read_dcr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: DCR reads of the interrupt controller have no memory side effects.
    unsafe { asm!("mfdcr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
    v
}

/// Writes DCR `N`.
#[inline(always)]
pub fn write_dcr<const N: u32>(v: u32) {
    // SAFETY: only the platform's interrupt-controller driver writes DCRs.
    unsafe { asm!("mtdcr {n}, {0}", in(reg) v, n = const N, options(nomem, nostack, preserves_flags)) };
}

#[inline(always)]
pub fn read_msr() -> u32 {
    let v: u32;
    // SAFETY: reading the MSR has no side effects.
    unsafe { asm!("mfmsr {0}", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

#[inline(always)]
pub fn write_msr(v: u32) {
    // SAFETY: the kernel only changes EE/WE for idling; `isync` orders the change.
    unsafe { asm!("mtmsr {0}", "isync", in(reg) v, options(nostack, preserves_flags)) };
}

/// The 64-bit timebase.
pub fn timebase() -> u64 {
    loop {
        let hi = read::<TBU_R>();
        let lo = read::<TBL_R>();
        if read::<TBU_R>() == hi {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
}
