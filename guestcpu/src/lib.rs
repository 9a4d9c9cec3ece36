//! Kestrel's guest CPU: the semantics of the PowerPC 440's privileged instructions over a
//! vCPU's state (`kestrel_abi::VcpuState`), pure and host-tested (`tests/model.rs` checks
//! every class of emulated instruction against a reference model).
//!
//! The kernel's trap-and-emulate code (`ukernel/kernel/src/virt/`) decodes a trap, calls
//! these functions and applies what they return to the hardware: a `mtspr` returns its
//! [`spr::SprEffect`] (a guest PID switch, a write-through register, the real DBCR0, a
//! decrementer deadline, a time-base jump) or an [`spr::SprExit`] (the VMM's SPR, a reset
//! request); an MSR change (`mtmsr`, `wrtee[i]`, the returns from interrupt, an interrupt's
//! entry) returns an [`msr::MsrWrite`] (a change of privilege loads the PID register, a
//! change of translation space drops the shadow entries, MSR[WE] asks to wait); a `tlbwe`
//! returns the live blocks the shadow TLB must forget ([`tlb::TlbWrite`]).
//!
//! - [`insn`]: the privileged instructions, decoded into what the kernel does with them.
//! - [`spr`]: the SPR → `VcpuState` field map, stated once (`spr_map!`), serving the full
//!   emulator, the Rust fast tier and the assembly tier's offsets; `mfspr`, `mtspr`.
//! - [`msr`]: MSR writes, returns from interrupt, interrupt entry, pending and deliverable
//!   interrupts, debug events, the real MSR of a vCPU.
//! - [`timer`]: decrementer, fixed-interval timer, watchdog.
//! - [`tlb`]: `tlbre`, `tlbwe`, `tlbsx[.]` over `kestrel_vtlb::GuestTlb`, CR0 after them.
//! - [`split`]: the plan of a data access the kernel performs in software under split
//!   translation spaces, and its register transfers.
//!
//! Hardware is reached only through [`spr::Hardware`] (the time base and PVR, for
//! `mfspr`); everything else the kernel does with the effects.

#![no_std]
#![forbid(unsafe_code)]

extern crate kestrel_ppc440 as ppc440;

pub mod insn;
pub mod msr;
pub mod split;
pub mod spr;
pub mod timer;
pub mod tlb;
