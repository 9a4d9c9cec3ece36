//! The PowerPC 440 as Kestrel sees it: every architectural number the kernel, the VMM,
//! the virtual TLB, the test guests and the test tasks use, each defined once.
//!
//! - [`field`]: MSB-0 bit numbers as printed in the manuals, and the one conversion to
//!   shifts and masks ([`Field`], [`bit`]).
//! - [`spr`]: SPR numbers, each with the class of emulation it gets in a Kestrel VM
//!   ([`spr::Emulation`]); the one table that says which SPR is a plain copy.
//! - [`msr`], [`esr`], [`tcr`], [`tsr`], [`dbcr0`], [`dbsr`], [`mmucr`], [`ccr0`], [`ccr1`],
//!   [`cr`], [`xer`]: register bits.
//! - [`tlb`]: the TLB entry's three words and the page sizes.
//! - [`ivor`]: interrupt vector numbers, names and classes.
//! - [`dcr`]: the board's (bamboo, PPC440EP) device control registers.
//! - [`decode`](mod@decode): the instruction decoder for the privileged set and the loads
//!   and stores that reach emulated devices, with the binutils test vectors in `tests/`.
//! - [`encode`](mod@encode): `const fn` instruction builders (round-trip tested against the
//!   decoder) for guests built by tests and for `.long` words in inline assembly.
//!
//! Sources: *PPC440x5 CPU Core User's Manual* (PPC440 UM), *PowerPC Book E* 1.0, the
//! *PPC440EP Embedded Processor User's Manual* (UIC). Bit numbers in doc comments are the
//! manuals' (MSB-0: bit 0 is the most significant bit of a 32-bit word).
//!
//! Invariants for the whole crate: `no_std`, no `alloc`, no `unsafe`, and no function can
//! panic on a guest-controlled value (the `const fn` builders of [`encode`](mod@encode)
//! panic on out-of-range register numbers, which their callers write as constants).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod dcr;
pub mod decode;
pub mod encode;
pub mod field;
pub mod fp;
pub mod ivor;
mod regs;
pub mod spr;
pub mod tlb;

pub use field::{bit, Field};
pub use regs::{ccr0, ccr1, cr, dbcr0, dbsr, esr, mmucr, msr, tcr, tsr, xer};
