//! The data conversions of the floating-point loads and stores (Book E "Floating-Point
//! Load Instructions" and "Floating-Point Store Instructions"): what `lfs` puts in an FPR
//! and what `stfs` writes to storage, bit for bit, so that an emulator transferring FP data
//! to or from a device gets exactly what the hardware would.
//!
//! FPRs hold IEEE double format; storage holds single format for `lfs`/`stfs`. Both
//! conversions work on bits, never through host floating point: a signaling NaN must keep
//! its payload and stay signaling (Rust's `f32 as f64` may quiet it on some hosts).

/// `lfs`: the 64-bit FPR value for single-format word `word` (Book E "Load Floating-Point
/// Single": normalized operands are re-biased; denormalized ones are normalized; zero,
/// infinity and NaN keep sign, exponent ones/zeros and fraction). Exact: every single value
/// is representable as a double.
pub const fn single_to_double(word: u32) -> u64 {
    let sign = (word >> 31) as u64;
    let exp = (word >> 23) & 0xff;
    let frac = (word & 0x7f_ffff) as u64;
    if exp == 0 && frac != 0 {
        // Denormalized: value = frac * 2^-149; normalize so the leading 1 is implicit.
        let lead = 63 - frac.leading_zeros(); // bit index of the leading 1, 0..=22
        let e = lead as i64 - 149 + 1023; // unbiased exponent lead - 149
        let mantissa = (frac << (52 - lead)) & ((1 << 52) - 1);
        return (sign << 63) | ((e as u64) << 52) | mantissa;
    }
    // Book E: FRT[0:1] = WORD[0:1]; FRT[2:4] = ¬WORD[1] for normalized operands and
    // WORD[1] for zero, infinity and NaN; FRT[5:63] = WORD[2:31] || 29 zeros.
    let w1 = ((word >> 30) & 1) as u64;
    let fill = if exp != 0 && exp != 255 { w1 ^ 1 } else { w1 };
    let top = ((word >> 30) as u64) << 62; // WORD[0:1]
    let middle = (fill << 61) | (fill << 60) | (fill << 59); // FRT[2:4]
    let rest = ((word & 0x3fff_ffff) as u64) << 29; // WORD[2:31] at FRT[5:34]
    top | middle | rest
}

/// `stfs`: the single-format word stored for FPR value `frs` (Book E "Store Floating-Point
/// Single"): values with an exponent in single range, zero, infinity and NaN take FRS[0:1]
/// and FRS[5:34] (truncating the fraction, no rounding); values too small for a normalized
/// single are denormalized. For values too large for single format (and the tiniest
/// denormals) Book E leaves the result undefined; this takes the bit-selection result for
/// the large ones and shifts the tiny ones to zero, as the Power ISA later specified.
pub const fn double_to_single(frs: u64) -> u32 {
    let sign = (frs >> 63) as u32;
    let exp = ((frs >> 52) & 0x7ff) as i64;
    if exp > 896 || frs & !(1 << 63) == 0 {
        // No denormalization required: WORD[0:1] = FRS[0:1], WORD[2:31] = FRS[5:34].
        return (((frs >> 62) as u32) << 30) | ((frs >> 29) as u32 & 0x3fff_ffff);
    }
    // Denormalization: frac = 1.FRS[12:63], shifted right until the exponent is -126.
    let mut frac = (1u64 << 52) | (frs & ((1 << 52) - 1));
    let mut e = exp - 1023;
    while e < -126 && frac != 0 {
        frac >>= 1;
        e += 1;
    }
    // WORD[9:31] = frac[1:23]: the 23 bits after the (now shifted) units position.
    (sign << 31) | ((frac >> 29) as u32 & 0x7f_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(single_to_double(0x3f80_0000), 1.0f64.to_bits());
        assert_eq!(single_to_double(0xc000_0000), (-2.0f64).to_bits());
        assert_eq!(single_to_double(0), 0);
        assert_eq!(single_to_double(0x8000_0000), 1 << 63);
        assert_eq!(single_to_double(0x7f80_0000), f64::INFINITY.to_bits());
        assert_eq!(
            single_to_double(0x0000_0001),
            (f32::from_bits(1) as f64).to_bits()
        );
        // A signaling NaN stays signaling with its payload.
        assert_eq!(single_to_double(0x7f80_0001), 0x7ff0_0000_2000_0000);
        assert_eq!(double_to_single(1.0f64.to_bits()), 0x3f80_0000);
        assert_eq!(double_to_single(0x7ff0_0000_2000_0000), 0x7f80_0001);
        assert_eq!(double_to_single((f32::from_bits(1) as f64).to_bits()), 1);
        assert_eq!(double_to_single((-0.0f64).to_bits()), 0x8000_0000);
        // Truncation, not rounding: 1 + 2^-30 stores as 1.0.
        assert_eq!(
            double_to_single((1.0f64 + 2f64.powi(-30)).to_bits()),
            0x3f80_0000
        );
    }

    proptest! {
        /// lfs agrees with exact host conversion on every non-NaN single.
        #[test]
        fn lfs_is_exact(word in any::<u32>()) {
            let x = f32::from_bits(word);
            prop_assume!(!x.is_nan());
            prop_assert_eq!(single_to_double(word), (x as f64).to_bits());
        }

        /// stfs after lfs gives back the word, NaNs included.
        #[test]
        fn stfs_inverts_lfs(word in any::<u32>()) {
            prop_assert_eq!(double_to_single(single_to_double(word)), word);
        }

        /// stfs of a double in normalized single range truncates toward zero.
        #[test]
        fn stfs_truncates(sign in 0u64..2, exp in 897u64..=1150, frac in 0u64..(1 << 52)) {
            let bits = (sign << 63) | (exp << 52) | frac;
            let x = f64::from_bits(bits);
            let stored = f32::from_bits(double_to_single(bits)) as f64;
            prop_assert!(stored.abs() <= x.abs() && stored.signum() == x.signum());
            prop_assert!((x - stored).abs() <= x.abs() * 2f64.powi(-23));
        }
    }
}
