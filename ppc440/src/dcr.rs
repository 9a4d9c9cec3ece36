//! Device control registers of the board Kestrel runs on (QEMU `-M bamboo`, a PPC440EP):
//! the Universal Interrupt Controller UIC0 (PPC440EP UM "Universal Interrupt Controller").
//!
//! DCR numbers are 10 bits wide (`mfdcr`/`mtdcr` encode them like SPR numbers). The
//! constants are plain `u32` for `const` asm operands.

use crate::field::bit;

/// DCR numbers are 10 bits wide.
pub const COUNT: u32 = 1024;

/// The first DCR of UIC0 on the PPC440EP (bamboo's device tree: `dcr-reg = <0xc0 9>`).
pub const UIC0_BASE: u32 = 0xC0;

/// The UIC's registers, as offsets from its first DCR ([`UIC0_BASE`]).
pub mod uic {
    /// UIC_SR, status: reads the latched requests; a write clears the bits written as 1.
    pub const SR: u32 = 0;
    /// UIC_SRS, status set: a write sets the bits written as 1; reads return SR.
    pub const SRS: u32 = 1;
    /// UIC_ER, enable: 1 = the line's request reaches MSR and the outputs.
    pub const ER: u32 = 2;
    /// UIC_CR, critical: 1 = critical interrupt, 0 = non-critical (external input).
    pub const CR: u32 = 3;
    /// UIC_PR, polarity: 1 = active high / rising edge, 0 = active low / falling edge.
    pub const PR: u32 = 4;
    /// UIC_TR, trigger: 1 = edge-sensitive, 0 = level-sensitive.
    pub const TR: u32 = 5;
    /// UIC_MSR, masked status (read-only): SR & ER.
    pub const MSR: u32 = 6;
    /// UIC_VR, vector (read-only).
    pub const VR: u32 = 7;
    /// UIC_VCR, vector configuration (write-only).
    pub const VCR: u32 = 8;
    /// How many DCRs a UIC decodes: offsets [`SR`] to [`VCR`].
    pub const COUNT: u32 = 9;
    /// How many interrupt input lines a UIC has.
    pub const LINES: u32 = 32;

    /// The bit of interrupt line `n` (0..32) in every UIC register: MSB-0 bit `n`.
    pub const fn line(n: u32) -> u32 {
        super::bit(n)
    }

    /// UIC_VCR fields.
    pub mod vcr {
        use crate::field::{bit, Field};
        /// VCR\[VCBA\], bits 0:29: vector base address.
        pub const VCBA: u32 = Field::bits(0, 29).mask();
        /// VCR\[PRO\], bit 31: priority ordering (1 = line 31 has the highest priority).
        pub const PRO: u32 = bit(31);
        /// The bits a write keeps (bit 30 is reserved and reads as 0).
        pub const WRITABLE: u32 = VCBA | PRO;
    }
}

/// UIC0's status register (absolute DCR number).
pub const UIC0_SR: u32 = UIC0_BASE + uic::SR;
/// UIC0's status-set register.
pub const UIC0_SRS: u32 = UIC0_BASE + uic::SRS;
/// UIC0's enable register.
pub const UIC0_ER: u32 = UIC0_BASE + uic::ER;
/// UIC0's critical register.
pub const UIC0_CR: u32 = UIC0_BASE + uic::CR;
/// UIC0's polarity register.
pub const UIC0_PR: u32 = UIC0_BASE + uic::PR;
/// UIC0's trigger register.
pub const UIC0_TR: u32 = UIC0_BASE + uic::TR;
/// UIC0's masked status register.
pub const UIC0_MSR: u32 = UIC0_BASE + uic::MSR;
/// UIC0's vector register.
pub const UIC0_VR: u32 = UIC0_BASE + uic::VR;
/// UIC0's vector configuration register.
pub const UIC0_VCR: u32 = UIC0_BASE + uic::VCR;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uic0_block() {
        assert_eq!(UIC0_SR, 0xC0);
        assert_eq!(UIC0_MSR, 0xC6);
        assert_eq!(UIC0_VCR, UIC0_BASE + uic::COUNT - 1);
        assert_eq!(uic::line(0), 0x8000_0000);
        assert_eq!(uic::line(31), 1);
        assert_eq!(uic::vcr::VCBA, 0xFFFF_FFFC);
        assert_eq!(uic::vcr::WRITABLE, 0xFFFF_FFFD);
    }
}
