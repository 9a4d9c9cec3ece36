//! The floating-point unit for native threads: any native thread may use it (glibc for
//! PowerPC and HPC codes are hard-float), and it is switched lazily.
//!
//! Invariants: the real FPU holds the registers of at most one owner, either a native
//! thread ([`NativeFpu::owner`]) or a vCPU (virtualization's own record); the other is
//! then none. A native thread's frame has MSR[FP] set exactly while it owns the FPU, so
//! its first FP instruction after losing it raises FP-unavailable, which [`take`] turns
//! into a switch. A thread slot's saved registers are zeroed when the slot is filled, so a
//! new thread never sees its predecessor's values.

use super::{frame_of, hooks, thread::NO_SLOT, Kernel, NTCB};
use crate::arch::{self, msr};

/// f0..f31 and the FPSCR (as the 33rd double), in `arch::fpu`'s save-area layout.
pub type FpRegs = [u64; 33];

/// Native threads' FPU state: who owns the real FPU, everyone else's saved registers.
#[repr(C)]
pub struct NativeFpu {
    /// Slot index of the native thread whose registers are in the FPU, or `NO_SLOT`.
    pub owner: usize,
    pub regs: [FpRegs; NTCB],
}

impl NativeFpu {
    pub const INIT: NativeFpu = NativeFpu {
        owner: NO_SLOT,
        regs: [[0; 33]; NTCB],
    };
}

/// MSR[FP] for native thread `i`'s frame: set while it owns the FPU.
#[inline(always)]
pub fn msr_fp(k: &Kernel, i: usize) -> u32 {
    if k.native_fpu.owner == i {
        msr::FP
    } else {
        0
    }
}

/// Native thread `cur` raised FP-unavailable: give it the FPU (saving whoever had it).
pub fn take(k: &mut Kernel, cur: usize) {
    if k.native_fpu.owner != cur {
        hooks::release_fpu(k);
        release(k);
        arch::fpu::load(&k.native_fpu.regs[cur]);
        k.native_fpu.owner = cur;
    }
    frame_of(k, cur).regs.msr |= msr::FP;
}

/// Saves the owning native thread's registers (if any) so someone else (a vCPU) can
/// load the FPU; that thread's next FP instruction traps again.
pub fn release(k: &mut Kernel) {
    let o = k.native_fpu.owner;
    if o == NO_SLOT {
        return;
    }
    arch::fpu::save(&mut k.native_fpu.regs[o]);
    frame_of(k, o).regs.msr &= !msr::FP;
    k.native_fpu.owner = NO_SLOT;
}

/// Thread slot `i` is being filled or emptied: forget its registers. The FPU itself
/// may keep stale values; whoever takes it next loads its own.
pub fn forget(k: &mut Kernel, i: usize) {
    if k.native_fpu.owner == i {
        k.native_fpu.owner = NO_SLOT;
    }
    k.native_fpu.regs[i] = [0; 33];
}
