//! The floating-point unit: saving and loading its registers. The kernel is soft-float and
//! never uses it; it holds one owner's registers at a time (a vCPU's, `virt::emulate`, or a
//! native thread's, `api::fpu`) and is switched lazily.
//!
//! The kernel is built without hard-float, so the assembler does not know the FP
//! instructions: they are emitted as words from `kestrel_ppc440::encode` (`stfd`, `lfd`,
//! `mffs`, `mtfsf`) through `const` operands.

use super::{msr, spr};
use core::arch::asm;
use ppc440::encode;

/// Byte offset of the FPSCR (the 33rd double) in a save area.
const FPSCR: i16 = 256;

/// Saves f0..f31 and the FPSCR (as the 33rd double) to `area`.
pub fn save(area: &mut [u64; 33]) {
    spr::write_msr(msr::KERNEL | msr::FP);
    // SAFETY: `area` holds 33 doubles; r3 points at it; MSR[FP] is set around the access.
    // Operands 0-31 are `stfd fN,8N(r3)`, then `mffs f0` and `stfd f0,256(r3)`.
    unsafe {
        asm!(
            ".long {0}",
            ".long {1}",
            ".long {2}",
            ".long {3}",
            ".long {4}",
            ".long {5}",
            ".long {6}",
            ".long {7}",
            ".long {8}",
            ".long {9}",
            ".long {10}",
            ".long {11}",
            ".long {12}",
            ".long {13}",
            ".long {14}",
            ".long {15}",
            ".long {16}",
            ".long {17}",
            ".long {18}",
            ".long {19}",
            ".long {20}",
            ".long {21}",
            ".long {22}",
            ".long {23}",
            ".long {24}",
            ".long {25}",
            ".long {26}",
            ".long {27}",
            ".long {28}",
            ".long {29}",
            ".long {30}",
            ".long {31}",
            ".long {32}",
            ".long {33}",
            const encode::stfd(0, 0, 3),
            const encode::stfd(1, 8, 3),
            const encode::stfd(2, 16, 3),
            const encode::stfd(3, 24, 3),
            const encode::stfd(4, 32, 3),
            const encode::stfd(5, 40, 3),
            const encode::stfd(6, 48, 3),
            const encode::stfd(7, 56, 3),
            const encode::stfd(8, 64, 3),
            const encode::stfd(9, 72, 3),
            const encode::stfd(10, 80, 3),
            const encode::stfd(11, 88, 3),
            const encode::stfd(12, 96, 3),
            const encode::stfd(13, 104, 3),
            const encode::stfd(14, 112, 3),
            const encode::stfd(15, 120, 3),
            const encode::stfd(16, 128, 3),
            const encode::stfd(17, 136, 3),
            const encode::stfd(18, 144, 3),
            const encode::stfd(19, 152, 3),
            const encode::stfd(20, 160, 3),
            const encode::stfd(21, 168, 3),
            const encode::stfd(22, 176, 3),
            const encode::stfd(23, 184, 3),
            const encode::stfd(24, 192, 3),
            const encode::stfd(25, 200, 3),
            const encode::stfd(26, 208, 3),
            const encode::stfd(27, 216, 3),
            const encode::stfd(28, 224, 3),
            const encode::stfd(29, 232, 3),
            const encode::stfd(30, 240, 3),
            const encode::stfd(31, 248, 3),
            const encode::mffs(0),
            const encode::stfd(0, FPSCR, 3),
            in("r3") area.as_mut_ptr(),
            options(nostack)
        );
    }
    spr::write_msr(msr::KERNEL);
}

/// Loads f0..f31 and the FPSCR from `area`.
pub fn load(area: &[u64; 33]) {
    spr::write_msr(msr::KERNEL | msr::FP);
    // SAFETY: as in `save`, reading only. Operands 0-1 are `lfd f0,256(r3)` and
    // `mtfsf 0xff,f0` (the FPSCR first, through f0), then `lfd fN,8N(r3)`.
    unsafe {
        asm!(
            ".long {0}",
            ".long {1}",
            ".long {2}",
            ".long {3}",
            ".long {4}",
            ".long {5}",
            ".long {6}",
            ".long {7}",
            ".long {8}",
            ".long {9}",
            ".long {10}",
            ".long {11}",
            ".long {12}",
            ".long {13}",
            ".long {14}",
            ".long {15}",
            ".long {16}",
            ".long {17}",
            ".long {18}",
            ".long {19}",
            ".long {20}",
            ".long {21}",
            ".long {22}",
            ".long {23}",
            ".long {24}",
            ".long {25}",
            ".long {26}",
            ".long {27}",
            ".long {28}",
            ".long {29}",
            ".long {30}",
            ".long {31}",
            ".long {32}",
            ".long {33}",
            const encode::lfd(0, FPSCR, 3),
            const encode::mtfsf(0xff, 0),
            const encode::lfd(0, 0, 3),
            const encode::lfd(1, 8, 3),
            const encode::lfd(2, 16, 3),
            const encode::lfd(3, 24, 3),
            const encode::lfd(4, 32, 3),
            const encode::lfd(5, 40, 3),
            const encode::lfd(6, 48, 3),
            const encode::lfd(7, 56, 3),
            const encode::lfd(8, 64, 3),
            const encode::lfd(9, 72, 3),
            const encode::lfd(10, 80, 3),
            const encode::lfd(11, 88, 3),
            const encode::lfd(12, 96, 3),
            const encode::lfd(13, 104, 3),
            const encode::lfd(14, 112, 3),
            const encode::lfd(15, 120, 3),
            const encode::lfd(16, 128, 3),
            const encode::lfd(17, 136, 3),
            const encode::lfd(18, 144, 3),
            const encode::lfd(19, 152, 3),
            const encode::lfd(20, 160, 3),
            const encode::lfd(21, 168, 3),
            const encode::lfd(22, 176, 3),
            const encode::lfd(23, 184, 3),
            const encode::lfd(24, 192, 3),
            const encode::lfd(25, 200, 3),
            const encode::lfd(26, 208, 3),
            const encode::lfd(27, 216, 3),
            const encode::lfd(28, 224, 3),
            const encode::lfd(29, 232, 3),
            const encode::lfd(30, 240, 3),
            const encode::lfd(31, 248, 3),
            in("r3") area.as_ptr(),
            options(nostack, readonly)
        );
    }
    spr::write_msr(msr::KERNEL);
}
