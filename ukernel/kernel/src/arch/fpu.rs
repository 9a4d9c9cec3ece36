//! The floating-point unit, for vCPUs only: the kernel and native tasks are soft-float,
//! so the FPU holds at most one guest's registers at a time and is switched lazily.
//!
//! The kernel is built without hard-float, so the assembler does not know the FP
//! instructions: they are emitted as words (Book E: stfd = opcode 54, lfd = 50,
//! mffs = 63/583, mtfsf = 63/711).

use super::{msr, spr};
use core::arch::asm;

/// Saves f0..f31 and the FPSCR (as the 33rd double) to `area`.
pub fn save(area: &mut [u64; 33]) {
    spr::write_msr(msr::KERNEL | msr::FP);
    // SAFETY: `area` holds 33 doubles; r3 points at it; MSR[FP] is set around the access.
    unsafe {
        asm!(
        ".long 0xd8030000", // stfd f0,0(r3)
        ".long 0xd8230008", // stfd f1,8(r3)
        ".long 0xd8430010", // stfd f2,16(r3)
        ".long 0xd8630018", // stfd f3,24(r3)
        ".long 0xd8830020", // stfd f4,32(r3)
        ".long 0xd8a30028", // stfd f5,40(r3)
        ".long 0xd8c30030", // stfd f6,48(r3)
        ".long 0xd8e30038", // stfd f7,56(r3)
        ".long 0xd9030040", // stfd f8,64(r3)
        ".long 0xd9230048", // stfd f9,72(r3)
        ".long 0xd9430050", // stfd f10,80(r3)
        ".long 0xd9630058", // stfd f11,88(r3)
        ".long 0xd9830060", // stfd f12,96(r3)
        ".long 0xd9a30068", // stfd f13,104(r3)
        ".long 0xd9c30070", // stfd f14,112(r3)
        ".long 0xd9e30078", // stfd f15,120(r3)
        ".long 0xda030080", // stfd f16,128(r3)
        ".long 0xda230088", // stfd f17,136(r3)
        ".long 0xda430090", // stfd f18,144(r3)
        ".long 0xda630098", // stfd f19,152(r3)
        ".long 0xda8300a0", // stfd f20,160(r3)
        ".long 0xdaa300a8", // stfd f21,168(r3)
        ".long 0xdac300b0", // stfd f22,176(r3)
        ".long 0xdae300b8", // stfd f23,184(r3)
        ".long 0xdb0300c0", // stfd f24,192(r3)
        ".long 0xdb2300c8", // stfd f25,200(r3)
        ".long 0xdb4300d0", // stfd f26,208(r3)
        ".long 0xdb6300d8", // stfd f27,216(r3)
        ".long 0xdb8300e0", // stfd f28,224(r3)
        ".long 0xdba300e8", // stfd f29,232(r3)
        ".long 0xdbc300f0", // stfd f30,240(r3)
        ".long 0xdbe300f8", // stfd f31,248(r3)
        ".long 0xFC00048E", // mffs f0
        ".long 0xD8030100", // stfd f0,256(r3)
        in("r3") area.as_mut_ptr(),
        options(nostack)
        );
    }
    spr::write_msr(msr::KERNEL);
}

/// Loads f0..f31 and the FPSCR from `area`.
pub fn load(area: &[u64; 33]) {
    spr::write_msr(msr::KERNEL | msr::FP);
    // SAFETY: as in `save`, reading only.
    unsafe {
        asm!(
        ".long 0xC8030100", // lfd f0,256(r3)
        ".long 0xFDFE058E", // mtfsf 0xff,f0
        ".long 0xc8030000", // lfd f0,0(r3)
        ".long 0xc8230008", // lfd f1,8(r3)
        ".long 0xc8430010", // lfd f2,16(r3)
        ".long 0xc8630018", // lfd f3,24(r3)
        ".long 0xc8830020", // lfd f4,32(r3)
        ".long 0xc8a30028", // lfd f5,40(r3)
        ".long 0xc8c30030", // lfd f6,48(r3)
        ".long 0xc8e30038", // lfd f7,56(r3)
        ".long 0xc9030040", // lfd f8,64(r3)
        ".long 0xc9230048", // lfd f9,72(r3)
        ".long 0xc9430050", // lfd f10,80(r3)
        ".long 0xc9630058", // lfd f11,88(r3)
        ".long 0xc9830060", // lfd f12,96(r3)
        ".long 0xc9a30068", // lfd f13,104(r3)
        ".long 0xc9c30070", // lfd f14,112(r3)
        ".long 0xc9e30078", // lfd f15,120(r3)
        ".long 0xca030080", // lfd f16,128(r3)
        ".long 0xca230088", // lfd f17,136(r3)
        ".long 0xca430090", // lfd f18,144(r3)
        ".long 0xca630098", // lfd f19,152(r3)
        ".long 0xca8300a0", // lfd f20,160(r3)
        ".long 0xcaa300a8", // lfd f21,168(r3)
        ".long 0xcac300b0", // lfd f22,176(r3)
        ".long 0xcae300b8", // lfd f23,184(r3)
        ".long 0xcb0300c0", // lfd f24,192(r3)
        ".long 0xcb2300c8", // lfd f25,200(r3)
        ".long 0xcb4300d0", // lfd f26,208(r3)
        ".long 0xcb6300d8", // lfd f27,216(r3)
        ".long 0xcb8300e0", // lfd f28,224(r3)
        ".long 0xcba300e8", // lfd f29,232(r3)
        ".long 0xcbc300f0", // lfd f30,240(r3)
        ".long 0xcbe300f8", // lfd f31,248(r3)
        in("r3") area.as_ptr(),
        options(nostack, readonly)
        );
    }
    spr::write_msr(msr::KERNEL);
}
