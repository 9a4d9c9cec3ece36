//! Bits of the PPC440's control and status registers: MSR, ESR, TCR, TSR, DBCR0, DBSR,
//! MMUCR, CR0 and XER.
//!
//! Each constant names the manual's MSB-0 bit number in its doc comment and is built with
//! [`bit`] or [`Field`], the one place where MSB-0 numbers become shifts. Single bits are
//! plain `u32` masks (usable as `const` operands of inline assembly); multi-bit fields are
//! [`Field`]s. Sources: PPC440x5 CPU core user's manual (PPC440 UM) "Programming Model"
//! (MSR), "Interrupts and Exceptions" (ESR), "Timer Facilities" (TCR, TSR), "Debug
//! Facilities" (DBCR0, DBSR), "Memory Management" (MMUCR); Book E for CR and XER.

use crate::field::{bit, Field};

/// Machine State Register (PPC440 UM "Machine State Register (MSR)", Book E §2.2.1).
pub mod msr {
    use super::bit;
    /// Wait state enable (bit 13).
    pub const WE: u32 = bit(13);
    /// Critical interrupt enable (bit 14).
    pub const CE: u32 = bit(14);
    /// External interrupt enable (bit 16).
    pub const EE: u32 = bit(16);
    /// Problem state (bit 17).
    pub const PR: u32 = bit(17);
    /// Floating-point available (bit 18).
    pub const FP: u32 = bit(18);
    /// Machine check enable (bit 19).
    pub const ME: u32 = bit(19);
    /// Floating-point exception mode 0 (bit 20).
    pub const FE0: u32 = bit(20);
    /// Debug wait enable (bit 21).
    pub const DWE: u32 = bit(21);
    /// Debug interrupt enable (bit 22).
    pub const DE: u32 = bit(22);
    /// Floating-point exception mode 1 (bit 23).
    pub const FE1: u32 = bit(23);
    /// Instruction address space (bit 26).
    pub const IS: u32 = bit(26);
    /// Data address space (bit 27).
    pub const DS: u32 = bit(27);
    /// Every bit the 440 implements.
    pub const IMPLEMENTED: u32 = WE | CE | EE | PR | FP | ME | FE0 | DWE | DE | FE1 | IS | DS;
}

/// Exception Syndrome Register (PPC440 UM "Exception Syndrome Register (ESR)").
pub mod esr {
    use super::bit;
    /// Machine check, instruction fetch (bit 0).
    pub const MCI: u32 = bit(0);
    /// Program interrupt: illegal instruction (bit 4).
    pub const PIL: u32 = bit(4);
    /// Program interrupt: privileged instruction (bit 5).
    pub const PPR: u32 = bit(5);
    /// Program interrupt: trap (bit 6).
    pub const PTR: u32 = bit(6);
    /// Floating-point operation (bit 7).
    pub const FP: u32 = bit(7);
    /// Store operation (bit 8), for data storage, data TLB and alignment interrupts.
    pub const ST: u32 = bit(8);
    /// Auxiliary processor operation (bit 12).
    pub const AP: u32 = bit(12);
    /// Program interrupt: unimplemented operation (bit 13).
    pub const PUO: u32 = bit(13);
    /// Byte ordering (bit 14).
    pub const BO: u32 = bit(14);
    /// Program interrupt: imprecise exception (bit 15).
    pub const PIE: u32 = bit(15);
}

/// Timer Control Register (PPC440 UM "Timer Control Register (TCR)").
pub mod tcr {
    use super::{bit, Field};
    /// Watchdog timer period (bits 0:1): the event is on time-base bit 2^(17 + 4 * WP).
    pub const WP: Field = Field::bits(0, 1);
    /// Watchdog timer reset control (bits 2:3); copied to TSR[WRS] on a watchdog reset.
    pub const WRC: Field = Field::bits(2, 3);
    /// Watchdog timer interrupt enable (bit 4).
    pub const WIE: u32 = bit(4);
    /// Decrementer interrupt enable (bit 5).
    pub const DIE: u32 = bit(5);
    /// Fixed-interval timer period (bits 6:7): time-base bit 2^(13 + 4 * FP).
    pub const FP: Field = Field::bits(6, 7);
    /// Fixed-interval timer interrupt enable (bit 8).
    pub const FIE: u32 = bit(8);
    /// Auto-reload enable (bit 9): the decrementer reloads from DECAR.
    pub const ARE: u32 = bit(9);
}

/// Timer Status Register (PPC440 UM "Timer Status Register (TSR)"); every bit is
/// write-1-to-clear.
pub mod tsr {
    use super::{bit, Field};
    /// Enable next watchdog timer exception (bit 0).
    pub const ENW: u32 = bit(0);
    /// Watchdog timer interrupt status (bit 1).
    pub const WIS: u32 = bit(1);
    /// Watchdog timer reset status (bits 2:3).
    pub const WRS: Field = Field::bits(2, 3);
    /// Decrementer interrupt status (bit 4).
    pub const DIS: u32 = bit(4);
    /// Fixed-interval timer interrupt status (bit 5).
    pub const FIS: u32 = bit(5);
}

/// Debug Control Register 0 (PPC440 UM "Debug Control Register 0 (DBCR0)").
pub mod dbcr0 {
    use super::{bit, Field};
    /// External debug mode (bit 0).
    pub const EDM: u32 = bit(0);
    /// Internal debug mode (bit 1).
    pub const IDM: u32 = bit(1);
    /// Reset (bits 2:3): 0b01 core, 0b10 chip, 0b11 system reset; any non-zero value
    /// requests a reset.
    pub const RST: Field = Field::bits(2, 3);
    /// [`RST`] set to 0b11: system reset (QEMU with `-no-reboot` exits).
    pub const RST_SYSTEM: u32 = RST.mask();
    /// Instruction completion debug event (bit 4).
    pub const ICMP: u32 = bit(4);
    /// Branch taken debug event (bit 5).
    pub const BRT: u32 = bit(5);
    /// Interrupt debug event (bit 6).
    pub const IRPT: u32 = bit(6);
    /// Trap debug event (bit 7).
    pub const TRAP: u32 = bit(7);
    /// Instruction address compare 1 debug event (bit 8).
    pub const IAC1: u32 = bit(8);
    /// Instruction address compare 2 debug event (bit 9).
    pub const IAC2: u32 = bit(9);
    /// Return debug event (bit 16).
    pub const RET: u32 = bit(16);
    /// Freeze timers on debug event (bit 31).
    pub const FT: u32 = bit(31);
}

/// Debug Status Register (PPC440 UM "Debug Status Register (DBSR)"); write-1-to-clear.
pub mod dbsr {
    use super::{bit, Field};
    /// Imprecise debug event (bit 0).
    pub const IDE: u32 = bit(0);
    /// Unconditional debug event (bit 1).
    pub const UDE: u32 = bit(1);
    /// Most recent reset (bits 2:3).
    pub const MRR: Field = Field::bits(2, 3);
    /// Instruction completion debug event (bit 4).
    pub const ICMP: u32 = bit(4);
    /// Branch taken debug event (bit 5).
    pub const BRT: u32 = bit(5);
    /// Interrupt debug event (bit 6).
    pub const IRPT: u32 = bit(6);
    /// Trap debug event (bit 7).
    pub const TRAP: u32 = bit(7);
    /// Return debug event (bit 16).
    pub const RET: u32 = bit(16);
}

/// MMU Control Register (SPR 946, PPC440 UM "Memory Management Unit Control Register
/// (MMUCR)").
pub mod mmucr {
    use super::Field;
    /// `SWOA[7]`: store without allocate.
    pub const SWOA: Field = Field::bit(7);
    /// `U1TE[9]`: U1 transient enable.
    pub const U1TE: Field = Field::bit(9);
    /// `U2SWOAE[10]`: U2 store without allocate enable.
    pub const U2SWOAE: Field = Field::bit(10);
    /// `DULXE[12]`: data cache unlock exception enable.
    pub const DULXE: Field = Field::bit(12);
    /// `IULXE[13]`: instruction cache unlock exception enable.
    pub const IULXE: Field = Field::bit(13);
    /// `STS[15]`: search translation space, the TS `tlbsx` compares.
    pub const STS: Field = Field::bit(15);
    /// `STID[24:31]`: search/load translation ID: `tlbsx` compares it, `tlbwe` word 0
    /// copies it into the entry's TID, `tlbre` word 0 copies the entry's TID into it.
    pub const STID: Field = Field::bits(24, 31);
}

/// Core Configuration Register 0 (PPC440 UM "Core Configuration Register 0 (CCR0)"); only
/// the bits Kestrel's tests touch.
pub mod ccr0 {
    use super::bit;
    /// Disable store gathering (bit 10).
    pub const DSTG: u32 = bit(10);
    /// Disable broadcast of trace (bit 16).
    pub const DTB: u32 = bit(16);
}

/// Core Configuration Register 1 (PPC440 UM "Core Configuration Register 1 (CCR1)"); only
/// the bits Kestrel's tests touch.
pub mod ccr1 {
    use super::bit;
    /// Data cache parity check (bit 23).
    pub const DPC: u32 = bit(23);
}

/// Condition Register field 0 (Book E "Condition Register"), as set by record forms
/// such as `tlbsx.`.
pub mod cr {
    use super::{bit, Field};
    /// The whole CR0 field (bits 0:3).
    pub const CR0: Field = Field::bits(0, 3);
    /// CR0[LT] (bit 0).
    pub const CR0_LT: u32 = bit(0);
    /// CR0[GT] (bit 1).
    pub const CR0_GT: u32 = bit(1);
    /// CR0[EQ] (bit 2): `tlbsx.` found an entry.
    pub const CR0_EQ: u32 = bit(2);
    /// CR0[SO] (bit 3): a copy of XER[SO].
    pub const CR0_SO: u32 = bit(3);
}

/// Fixed-Point Exception Register (Book E "Integer Exception Register").
pub mod xer {
    use super::bit;
    /// Summary overflow (bit 0).
    pub const SO: u32 = bit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_manual_masks() {
        assert_eq!(msr::EE, 0x8000);
        assert_eq!(msr::PR, 0x4000);
        assert_eq!(msr::WE, 0x0004_0000);
        assert_eq!(msr::IS | msr::DS, 0x30);
        assert_eq!(esr::PPR, 0x0400_0000);
        assert_eq!(esr::ST, 0x0080_0000);
        assert_eq!(tcr::DIE, 0x0400_0000);
        assert_eq!(tcr::WRC.mask(), 0x3000_0000);
        assert_eq!(tcr::FP.get(0x0300_0000), 3);
        assert_eq!(tcr::WP.shift(), 30);
        assert_eq!(tsr::DIS | tsr::FIS | tsr::WIS, 0x4c00_0000);
        assert_eq!(dbcr0::RST_SYSTEM, 0x3000_0000);
        assert_eq!(mmucr::STID.mask(), 0xff);
        assert_eq!(mmucr::STS.mask(), 0x0001_0000);
        assert_eq!(cr::CR0_EQ, 0x2000_0000);
        assert_eq!(cr::CR0.shift(), 28);
    }
}
