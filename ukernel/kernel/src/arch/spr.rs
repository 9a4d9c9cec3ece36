//! Access to special purpose and device control registers, and the MSR. The numbers are
//! `kestrel_ppc440::spr` / `kestrel_ppc440::dcr` (defined there once), passed as `const`
//! generics: `spr::read::<{ ppc440::spr::DEC }>()`.

use core::arch::asm;

/// Reads SPR `N`.
#[inline(always)]
pub fn read<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: mfspr of a kernel-chosen SPR number has no memory side effects; the
    // kernel runs in supervisor mode so every SPR is readable.
    unsafe {
        asm!("mfspr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
    v
}

/// Writes SPR `N`.
#[inline(always)]
pub fn write<const N: u32>(v: u32) {
    // SAFETY: the callers in arch/, api/, glue/ and virt/ only write SPRs whose effect they
    // document (PID, SPRG1/4, timers, IVORs); mtspr has no memory side effects.
    unsafe {
        asm!("mtspr {n}, {0}", in(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
}

/// Reads DCR `N`.
#[inline(always)]
pub fn read_dcr<const N: u32>() -> u32 {
    let v: u32;
    // SAFETY: DCR reads of the interrupt controller have no memory side effects.
    unsafe {
        asm!("mfdcr {0}, {n}", out(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
    v
}

/// Writes DCR `N`.
#[inline(always)]
pub fn write_dcr<const N: u32>(v: u32) {
    // SAFETY: only the platform's interrupt-controller driver writes DCRs.
    unsafe {
        asm!("mtdcr {n}, {0}", in(reg) v, n = const N, options(nomem, nostack, preserves_flags))
    };
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
        let hi = read::<{ ppc440::spr::TBU_R }>();
        let lo = read::<{ ppc440::spr::TBL_R }>();
        if read::<{ ppc440::spr::TBU_R }>() == hi {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
}
