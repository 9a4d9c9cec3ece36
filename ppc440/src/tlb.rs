//! The PPC440's TLB entry: the layout of its three words and the page sizes (PPC440 UM
//! "Memory Management", Figure 5-3 "TLB Entry Word Definitions" and Table 5-2 "Page
//! Sizes"). `tlbwe`/`tlbre` transfer one word at a time, selected by WS
//! ([`crate::decode::TlbWord`]); the entry's TID travels through `MMUCR[STID]`
//! ([`crate::mmucr::STID`]).

use crate::field::Field;

/// Number of entries in the 440's unified TLB.
pub const ENTRIES: u32 = 64;

/// TLB word 0, page identification.
pub mod word0 {
    use crate::field::Field;
    /// `EPN[0:21]`: effective page number (1 KiB granular).
    pub const EPN: Field = Field::bits(0, 21);
    /// `V[22]`: valid.
    pub const V: Field = Field::bit(22);
    /// `TS[23]`: translation space, compared with `MSR[IS]` (fetch) or `MSR[DS]` (data).
    pub const TS: Field = Field::bit(23);
    /// `SIZE[24:27]`: page size code ([`super::PageSize`]).
    pub const SIZE: Field = Field::bits(24, 27);
    /// `TPAR[28:31]`: tag parity.
    pub const TPAR: Field = Field::bits(28, 31);
}

/// TLB word 1, translation.
pub mod word1 {
    use crate::field::Field;
    /// `RPN[0:21]`: real page number (real-address bits 4:25 of 36).
    pub const RPN: Field = Field::bits(0, 21);
    /// `PAR1[22:23]`: parity. Bits 24:27 are reserved.
    pub const PAR1: Field = Field::bits(22, 23);
    /// `ERPN[28:31]`: extended real page number, real-address bits 0:3 of 36.
    pub const ERPN: Field = Field::bits(28, 31);
}

/// TLB word 2, storage attributes and access control.
pub mod word2 {
    use crate::field::Field;
    /// `PAR2[0:1]`: parity. Bits 2:15 and 25 are reserved.
    pub const PAR2: Field = Field::bits(0, 1);
    /// `U0..U3[16:19]`: user-definable storage attributes, as one field.
    pub const U0_U3: Field = Field::bits(16, 19);
    /// `U0[16]`.
    pub const U0: Field = Field::bit(16);
    /// `U1[17]`.
    pub const U1: Field = Field::bit(17);
    /// `U2[18]`.
    pub const U2: Field = Field::bit(18);
    /// `U3[19]`.
    pub const U3: Field = Field::bit(19);
    /// `W I M G E [20:24]` as one field, in this order ([`super::Wimge`]).
    pub const WIMGE: Field = Field::bits(20, 24);
    /// `W[20]`: write-through.
    pub const W: Field = Field::bit(20);
    /// `I[21]`: caching inhibited.
    pub const I: Field = Field::bit(21);
    /// `M[22]`: memory coherence required.
    pub const M: Field = Field::bit(22);
    /// `G[23]`: guarded.
    pub const G: Field = Field::bit(23);
    /// `E[24]`: little-endian.
    pub const E: Field = Field::bit(24);
    /// `UX[26]`: user (problem state) execute.
    pub const UX: Field = Field::bit(26);
    /// `UW[27]`: user write.
    pub const UW: Field = Field::bit(27);
    /// `UR[28]`: user read.
    pub const UR: Field = Field::bit(28);
    /// `SX[29]`: supervisor execute.
    pub const SX: Field = Field::bit(29);
    /// `SW[30]`: supervisor write.
    pub const SW: Field = Field::bit(30);
    /// `SR[31]`: supervisor read.
    pub const SR: Field = Field::bit(31);
}

/// The one-bit fields of words 0 and 2 as plain `u32` masks, derived from the fields above,
/// for code that composes entry words or passes them as `const` asm operands.
pub mod flags {
    use super::{word0, word2};
    /// Word 0 `V`.
    pub const V: u32 = word0::V.mask();
    /// Word 0 `TS`.
    pub const TS: u32 = word0::TS.mask();
    /// Word 2 `U0`.
    pub const U0: u32 = word2::U0.mask();
    /// Word 2 `U1`.
    pub const U1: u32 = word2::U1.mask();
    /// Word 2 `U2`.
    pub const U2: u32 = word2::U2.mask();
    /// Word 2 `U3`.
    pub const U3: u32 = word2::U3.mask();
    /// Word 2 `W`.
    pub const W: u32 = word2::W.mask();
    /// Word 2 `I`.
    pub const I: u32 = word2::I.mask();
    /// Word 2 `M`.
    pub const M: u32 = word2::M.mask();
    /// Word 2 `G`.
    pub const G: u32 = word2::G.mask();
    /// Word 2 `E`.
    pub const E: u32 = word2::E.mask();
    /// Word 2 `UX`.
    pub const UX: u32 = word2::UX.mask();
    /// Word 2 `UW`.
    pub const UW: u32 = word2::UW.mask();
    /// Word 2 `UR`.
    pub const UR: u32 = word2::UR.mask();
    /// Word 2 `SX`.
    pub const SX: u32 = word2::SX.mask();
    /// Word 2 `SW`.
    pub const SW: u32 = word2::SW.mask();
    /// Word 2 `SR`.
    pub const SR: u32 = word2::SR.mask();
}

/// The page sizes the 440 defines (UM Table 5-2), with their SIZE codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum PageSize {
    K1 = 0x0,
    K4 = 0x1,
    K16 = 0x2,
    K64 = 0x3,
    K256 = 0x4,
    M1 = 0x5,
    M16 = 0x7,
    M256 = 0x9,
    G1 = 0xA,
}

impl PageSize {
    /// Every architected size, smallest first.
    pub const ALL: [PageSize; 9] = [
        PageSize::K1,
        PageSize::K4,
        PageSize::K16,
        PageSize::K64,
        PageSize::K256,
        PageSize::M1,
        PageSize::M16,
        PageSize::M256,
        PageSize::G1,
    ];

    /// The SIZE field value.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Bytes covered: 1 KiB * 4^code.
    pub const fn bytes(self) -> u32 {
        1024 << (2 * self as u32)
    }

    /// This size in place in word 0 (`SIZE` field).
    pub const fn word0(self) -> u32 {
        word0::SIZE.put(self as u32)
    }

    /// The architected size with this SIZE code, if it is one.
    pub const fn from_code(code: u8) -> Option<PageSize> {
        match code {
            0x0 => Some(PageSize::K1),
            0x1 => Some(PageSize::K4),
            0x2 => Some(PageSize::K16),
            0x3 => Some(PageSize::K64),
            0x4 => Some(PageSize::K256),
            0x5 => Some(PageSize::M1),
            0x7 => Some(PageSize::M16),
            0x9 => Some(PageSize::M256),
            0xA => Some(PageSize::G1),
            _ => None,
        }
    }

    /// The largest architected size not above `bytes`, if any (none below 1 KiB).
    pub fn largest_at_most(bytes: u64) -> Option<PageSize> {
        use PageSize::*;
        /// By log2 of the size, from 10 (1 KiB) to 30 (1 GiB).
        const BY_LOG: [PageSize; 21] = [
            K1, K1, K4, K4, K16, K16, K64, K64, K256, K256, M1, M1, M1, M1, M16, M16, M16, M16,
            M256, M256, G1,
        ];
        if bytes < 1024 {
            return None;
        }
        let log = 63 - bytes.leading_zeros();
        Some(BY_LOG[(log.min(30) - 10) as usize])
    }
}

/// Storage attributes W I M G E, as the five-bit value of word 2 bits 20:24.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Wimge(pub u8);

/// The bit of one attribute inside the right-aligned WIMGE value.
const fn wimge_bit(f: Field) -> Wimge {
    Wimge((f.mask() >> word2::WIMGE.shift()) as u8)
}

impl Wimge {
    /// Write-through (bit 20).
    pub const W: Wimge = wimge_bit(word2::W);
    /// Caching inhibited (bit 21).
    pub const I: Wimge = wimge_bit(word2::I);
    /// Memory coherence required (bit 22).
    pub const M: Wimge = wimge_bit(word2::M);
    /// Guarded (bit 23).
    pub const G: Wimge = wimge_bit(word2::G);
    /// Little-endian (bit 24).
    pub const E: Wimge = wimge_bit(word2::E);

    pub const fn contains(self, other: Wimge) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn union(self, other: Wimge) -> Wimge {
        Wimge((self.0 | other.0) & 0x1F)
    }
    /// These attributes in place in word 2.
    pub const fn word2(self) -> u32 {
        word2::WIMGE.put(self.0 as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_figure_5_3() {
        assert_eq!(word0::EPN.mask(), 0xFFFF_FC00);
        assert_eq!(word0::V.mask(), 0x200);
        assert_eq!(word0::TS.mask(), 0x100);
        assert_eq!(PageSize::K4.word0(), 0x10);
        assert_eq!(PageSize::M256.word0(), 0x90);
        assert_eq!(word2::SR.shift(), 0);
        assert_eq!(word2::UX.mask(), 0x20);
        assert_eq!(word2::I.mask() | word2::G.mask(), 0x500);
        assert_eq!(Wimge::W.0, 0x10);
        assert_eq!(Wimge::E.0, 0x01);
        assert_eq!(Wimge::I.union(Wimge::G).word2(), 0x500);
        assert_eq!(word1::ERPN.mask(), 0xF);
    }

    #[test]
    fn page_sizes() {
        for s in PageSize::ALL {
            assert_eq!(PageSize::from_code(s.code()), Some(s));
            assert_eq!(PageSize::largest_at_most(s.bytes() as u64), Some(s));
        }
        assert_eq!(PageSize::from_code(6), None);
        assert_eq!(PageSize::largest_at_most(1023), None);
        assert_eq!(PageSize::largest_at_most(8 << 20), Some(PageSize::M1));
        assert_eq!(PageSize::largest_at_most(1 << 40), Some(PageSize::G1));
    }
}
