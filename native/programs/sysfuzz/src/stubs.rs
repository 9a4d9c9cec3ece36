//! Hand-written code for the fuzzer's victim threads: they must survive any register
//! contents (`ExchangeRegisters` with `SET_FRAME` gives them random ones), so they touch no
//! memory through a register the fuzzer can set.
//!
//! - [`spin`]: a branch to itself.
//! - [`halt`]: halts itself (`ExchangeRegisters(own id from the UTCB, HALT)`), again and
//!   again if started.
//! - [`scloop`]: a system call with r0 and r3..r12 reloaded from r14..r24 on each round, so
//!   a frame written by the fuzzer (`fuzz::victim_frame`) makes it repeat one generated call
//!   forever; the kernel never writes r14..r24.

use core::arch::global_asm;
use kestrel_abi::{exreg, Syscall, Utcb, UTCB_SPR};

global_asm!(
    r#"
    .section .text.sysfuzz_stubs, "ax"
    .balign 4
    .global sysfuzz_spin
sysfuzz_spin:
    b sysfuzz_spin

    .global sysfuzz_halt
sysfuzz_halt:
    mfspr 3, {utcb_spr}
    lwz 3, {id_off}(3)
    li 4, {halt}
    li 0, {exreg}
    sc
    b sysfuzz_halt

    .global sysfuzz_scloop
sysfuzz_scloop:
    mr 0, 14
    mr 3, 15
    mr 4, 16
    mr 5, 17
    mr 6, 18
    mr 7, 19
    mr 8, 20
    mr 9, 21
    mr 10, 22
    mr 11, 23
    mr 12, 24
    sc
    b sysfuzz_scloop
    "#,
    utcb_spr = const UTCB_SPR,
    id_off = const core::mem::offset_of!(Utcb, my_global_id),
    halt = const exreg::HALT,
    exreg = const Syscall::ExchangeRegisters as u32,
);

extern "C" {
    fn sysfuzz_spin();
    fn sysfuzz_halt();
    fn sysfuzz_scloop();
}

pub fn spin() -> u32 {
    sysfuzz_spin as *const () as usize as u32
}
pub fn halt() -> u32 {
    sysfuzz_halt as *const () as usize as u32
}
pub fn scloop() -> u32 {
    sysfuzz_scloop as *const () as usize as u32
}

/// First general-purpose register [`scloop`] loads its call from (r0, then r3..r12).
pub const SCLOOP_FIRST_GPR: usize = 14;
