//! Guest RAM by guest-physical address, for the bare guests that fill and checksum their own
//! memory (`guests/isolation`, the neighbour VM of `guests/hostile`). Every access is an
//! inline `lwz`/`stw` on an address the compiler knows nothing about, so it is neither
//! reordered nor elided, and no Rust reference to that memory ever exists.
//!
//! Safety contract of every function here: the addresses are word-aligned guest RAM mapped
//! 1:1 (the VMM's or QEMU's first TLB entry), outside the guest's own image and stack; or,
//! for `store`, an address the guest stores to on purpose to be stopped (the isolation
//! test's store beyond its RAM).

use core::arch::asm;

/// Stores `v` at guest-physical `addr`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
pub unsafe fn store(addr: u32, v: u32) {
    // SAFETY: the caller's contract (module documentation).
    unsafe {
        asm!("stw {v}, 0({a})", v = in(reg) v, a = in(reg_nonzero) addr, options(nostack, preserves_flags))
    };
}

/// Loads the word at guest-physical `addr`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
pub unsafe fn load(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: the caller's contract (module documentation).
    unsafe {
        asm!("lwz {v}, 0({a})", v = out(reg) v, a = in(reg_nonzero) addr, options(nostack, readonly, preserves_flags))
    };
    v
}

/// The next word of a xorshift32 stream.
pub fn xorshift32(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

/// Fills every `(start, end)` region with the xorshift32 stream from `seed`.
///
/// # Safety
/// See the module documentation (every word of every region).
pub unsafe fn fill(regions: &[(u32, u32)], seed: u32) {
    let mut x = seed;
    for &(lo, hi) in regions {
        for a in (lo..hi).step_by(4) {
            // SAFETY: the caller's contract covers every word of the regions.
            unsafe { store(a, xorshift32(&mut x)) };
        }
    }
}

/// 64-bit FNV-1a over the words of the regions.
///
/// # Safety
/// See the module documentation (every word of every region).
pub unsafe fn checksum(regions: &[(u32, u32)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(lo, hi) in regions {
        for a in (lo..hi).step_by(4) {
            // SAFETY: the caller's contract covers every word of the regions.
            h ^= unsafe { load(a) } as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}
