//! Every Blue Gene/P interconnect number Kestrel uses, defined once.
//!
//! The facts come from the public sources listed in `../shared/bgp-interconnect.md` (khvmm,
//! Kittyhawk's drivers and device tree, IBM's BG/P SPI headers); only the facts, written
//! afresh. Bit numbers in IBM's documents count from the most significant bit (bit 0 = MSB);
//! here every mask is already a plain `u32`/`u64` value, and [`bn`] converts an IBM bit
//! number where a constant is easier to check against the sources that way.
//!
//! One source of truth for Rust and C: each module declares its constants through
//! [`regs!`], which also records them in that module's `TABLE`. [`write_c_header`] turns all
//! tables into `guests/linux/modules/include/kestrel_bgp.h`, the header the Linux guest
//! drivers include; the test `c_header_is_current` fails when the checked-in header differs
//! (regenerate with `KESTREL_BLESS=1 cargo test -p kestrel-bgp`).
//!
//! Where the sources disagree or are silent, the constant's documentation says what Kestrel
//! chose and why.
#![no_std]
#![forbid(unsafe_code)]

use core::fmt::Write;

/// One constant as the C header shows it.
#[derive(Clone, Copy, Debug)]
pub struct Def {
    /// Name in C (`KESTREL_BGP_` is prepended by [`write_c_header`]).
    pub c_name: &'static str,
    pub value: u64,
    pub doc: &'static str,
}

/// Declares constants and records them in the module's `TABLE` for the C header.
macro_rules! regs {
    ($prefix:literal; $( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $val:expr ;)*) => {
        $( $(#[doc = $doc])+ pub const $name: $ty = $val; )*
        /// Every constant of this module, in declaration order (for the C header).
        pub const TABLE: &[$crate::Def] = &[
            $( $crate::Def {
                c_name: concat!($prefix, stringify!($name)),
                value: $name as u64,
                doc: concat!($($doc),+),
            }, )*
        ];
    };
}

/// The mask of IBM bit `n` (bit 0 = MSB) of a 32-bit word.
pub const fn bn(n: u32) -> u32 {
    0x8000_0000 >> n
}

pub mod bic;
pub mod coll;
pub mod dma;
pub mod torus;

/// Every table, in header order.
pub const TABLES: &[(&str, &[Def])] = &[
    (
        "BIC: Blue Gene interrupt controller (bgp-interconnect.md 2.1)",
        bic::TABLE,
    ),
    (
        "Collective (tree) network: VC windows, packet header, status, DCRs (2.2)",
        coll::TABLE,
    ),
    (
        "Torus DMA engine: group registers, DCRs, descriptors, packet headers (2.3)",
        dma::TABLE,
    ),
    (
        "Torus DCRs and Kestrel's fabric geometry (2.3)",
        torus::TABLE,
    ),
];

/// Writes the C header with every constant, `#define KESTREL_BGP_<NAME> <value>`, to `out`
/// (no allocation: the kernel links this crate too).
pub fn write_c_header(out: &mut impl Write) -> core::fmt::Result {
    for line in [
        "/* SPDX-License-Identifier: MIT OR Apache-2.0 */",
        "/*",
        " * kestrel_bgp.h: Blue Gene/P interconnect registers as Kestrel models them.",
        " *",
        " * GENERATED from bgp/ (crate kestrel-bgp) by its test c_header_is_current;",
        " * do not edit. Regenerate: KESTREL_BLESS=1 cargo test -p kestrel-bgp",
        " */",
        "#ifndef KESTREL_BGP_H",
        "#define KESTREL_BGP_H",
    ] {
        writeln!(out, "{line}")?;
    }
    for (title, table) in TABLES {
        write!(out, "\n/* ---- {title} ---- */\n")?;
        for d in *table {
            let doc = d.doc.trim();
            let first = doc.lines().next().unwrap_or("").trim();
            out.write_str("/* ")?;
            for (i, part) in first.split("*/").enumerate() {
                if i > 0 {
                    out.write_str("* /")?;
                }
                out.write_str(part)?;
            }
            out.write_str(" */\n")?;
            if d.value > u64::from(u32::MAX) {
                writeln!(out, "#define KESTREL_BGP_{} 0x{:x}ULL", d.c_name, d.value)?;
            } else {
                writeln!(out, "#define KESTREL_BGP_{} 0x{:x}u", d.c_name, d.value)?;
            }
        }
    }
    out.write_str("\n#endif /* KESTREL_BGP_H */\n")
}
