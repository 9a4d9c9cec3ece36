//! Register and instruction fields in the manuals' MSB-0 numbering, converted to shifts in
//! exactly one place ([`Field::shift`]).
//!
//! The PowerPC 440 core user's manual and Book E number the bits of a 32-bit register or
//! instruction word from 0 (most significant) to 31 (least significant). A [`Field`] is
//! declared with exactly the bit numbers printed in the manual; `shift` and `mask` are
//! derived here and nowhere else, and [`bit`] is the single-bit mask every register module
//! of this crate builds its constants with.
//!
//! Invariant: `first <= last <= 31` (checked at compile time for every constant, because
//! the constructor asserts it in a `const` context).

/// Bits `first..=last` (MSB-0) of a 32-bit register or instruction word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub first: u32,
    pub last: u32,
}

impl Field {
    /// Bits `first..=last`, as printed in the manual.
    pub const fn bits(first: u32, last: u32) -> Field {
        assert!(first <= last && last <= 31, "MSB-0 field out of range");
        Field { first, last }
    }

    /// The single bit `n`.
    pub const fn bit(n: u32) -> Field {
        Field::bits(n, n)
    }

    /// The one conversion from MSB-0 bit numbers to shifts: MSB-0 bit `last` is the field's
    /// least significant bit, which sits `31 - last` places above bit 0 of the integer.
    pub const fn shift(self) -> u32 {
        31 - self.last
    }

    pub const fn width(self) -> u32 {
        self.last - self.first + 1
    }

    /// The field's bits in place.
    pub const fn mask(self) -> u32 {
        (u32::MAX >> (32 - self.width())) << self.shift()
    }

    /// The field's value, right-aligned.
    pub const fn get(self, reg: u32) -> u32 {
        (reg & self.mask()) >> self.shift()
    }

    /// `value` placed in the field (bits of `value` beyond the field's width are dropped).
    pub const fn put(self, value: u32) -> u32 {
        (value << self.shift()) & self.mask()
    }

    /// `reg` with the field replaced by `value` (excess high bits of `value` are dropped).
    pub const fn set(self, reg: u32, value: u32) -> u32 {
        (reg & !self.mask()) | self.put(value)
    }

    /// Whether any bit of the field is set (for a one-bit field: whether it is set).
    pub const fn is_set(self, reg: u32) -> bool {
        reg & self.mask() != 0
    }
}

/// The mask of MSB-0 bit `n` (`bit(0) == 0x8000_0000`, `bit(31) == 1`).
pub const fn bit(n: u32) -> u32 {
    Field::bit(n).mask()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msb0_numbering() {
        assert_eq!(Field::bit(0).mask(), 0x8000_0000);
        assert_eq!(Field::bit(31).mask(), 0x0000_0001);
        assert_eq!(Field::bits(0, 21).mask(), 0xFFFF_FC00);
        assert_eq!(Field::bits(24, 27).mask(), 0x0000_00F0);
        assert_eq!(Field::bits(0, 31).mask(), 0xFFFF_FFFF);
        assert_eq!(Field::bits(24, 27).shift(), 4);
        assert_eq!(bit(0), 0x8000_0000);
        assert_eq!(bit(16), 0x8000);
        assert_eq!(bit(31), 1);
    }

    #[test]
    fn get_put_and_set() {
        let f = Field::bits(24, 27);
        assert_eq!(f.get(0x0000_0095), 9);
        assert_eq!(f.set(0xFFFF_FFFF, 0), 0xFFFF_FF0F);
        assert_eq!(f.set(0, 0x1F), 0xF0, "excess bits are dropped");
        assert_eq!(f.put(0x1F), 0xF0);
        assert!(Field::bit(22).is_set(0x200));
        assert!(!Field::bit(22).is_set(!0x200));
    }
}
