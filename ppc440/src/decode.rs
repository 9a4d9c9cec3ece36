//! Decoder and encoder for the PPC440 instructions a trap-and-emulate VMM must handle: the
//! sensitive (privileged) set that traps when a guest kernel runs in user mode, and the
//! integer and floating-point loads and stores that fault on emulated device memory (paper
//! §3.1, §4.1, §4.3; FP loads and stores move the payload of BG/P's collective network).
//!
//! Sources: *PowerPC Book E: Enhanced PowerPC Architecture* 1.0, the instruction
//! descriptions (one per mnemonic: encoding, invalid forms) and its rules for instruction
//! fields and invalid instruction forms; the *PPC440x5 CPU Core User's Manual* (PPC440 UM):
//! "Programming Model" (privileged mode: privileged instructions and SPRs), "Instruction
//! Set" (one page per mnemonic, including the 440-only `dcread`, `icread`, `iccci`,
//! `dccci`, `tlbsx.`), "Register Summary" (SPR numbers) and the "Instruction Summary"
//! appendix (opcode tables). Bit numbers in this file are the manuals' MSB-0 numbers: bit 0
//! is the most significant bit of the 32-bit word. They turn into shifts in exactly one
//! place, [`Field`](crate::field::Field).
//!
//! Decoding rules:
//! - [`decode`] is total: every `u32` is a modeled instruction, [`Insn::Other`] (any word
//!   this module does not model, legal or not) or [`Insn::Invalid`] (a modeled opcode with
//!   an invalid form or a reserved field value; [`try_decode`] says which).
//! - Reserved instruction fields (`/`, `///` in the manuals) are don't-care bits: the
//!   decoder ignores them and the encoder writes zeros. The architecture's forward
//!   compatibility relies on processors ignoring them (`lwsync` is `sync` with formerly
//!   reserved bits set, and runs as `sync` on older processors), and the VMM only sees a
//!   word that the processor has already accepted up to the trap, so the VMM must not be
//!   stricter than the processor. GNU objdump and QEMU's translator are stricter (they
//!   reject most such words as illegal); the checked-in test vectors document that
//!   difference. [`Insn::reserved_mask`] names the don't-care bits of each form, so
//!   `encode(&decode(w)) == w & !decode(w).reserved_mask()` for every modeled word, and
//!   `encode(&decode(w)) == w` whenever the word's reserved bits are zero.
//! - What the 440 lacks stays `Other`: `wait`, `tlbivax`, `mfapidi`. The exception is
//!   `mfdcrx`/`mtdcrx` (indexed DCR access, which came with the 440x6/460 cores; QEMU's
//!   440x5 and 440EP models raise an illegal instruction interrupt for it): BG/P's 450 has
//!   them, its collective and torus DCRs (0xC00..0xDFF) lie beyond the 10-bit `mfdcr`
//!   operand, and Kestrel's VMM emulates them for its guests, so they are modelled
//!   ([`Insn::Mfdcrx`], [`Insn::Mtdcrx`]).
//! - `mfcr`/`mtcrf`, `lwarx`/`stwcx.`, string loads and stores and the 440d's paired
//!   (double hummer) FP loads and stores are not sensitive or not modeled yet, and are
//!   `Other` too.

use crate::field::Field;
use crate::spr;
use core::fmt;

/// Primary opcode, bits 0-5.
pub const OPCD: Field = Field::bits(0, 5);
/// RT, RS, or the MO operand of `mbar`: bits 6-10.
pub const RT: Field = Field::bits(6, 10);
/// RA: bits 11-15.
pub const RA: Field = Field::bits(11, 15);
/// RB, or the WS (word select) operand of `tlbre`/`tlbwe`: bits 16-20.
pub const RB: Field = Field::bits(16, 20);
/// The SPRN/DCRN operand of `m[ft]spr`/`m[ft]dcr`: bits 11-20, halves swapped.
const SPRF: Field = Field::bits(11, 20);
/// The E operand of `wrteei`: bit 16.
pub const E: Field = Field::bits(16, 16);
/// Extended opcode of X- and XL-form instructions: bits 21-30.
pub const XO: Field = Field::bits(21, 30);
/// Record bit: bit 31.
pub const RC: Field = Field::bits(31, 31);
/// Signed displacement of D-form instructions: bits 16-31.
const D: Field = Field::bits(16, 31);
/// Bit 30 of `sc`, which must be 1 (Book E `sc`).
const SC_ONE: Field = Field::bits(30, 30);

/// Primary opcodes.
pub mod opcd {
    pub const SC: u32 = 17;
    pub const XL: u32 = 19;
    pub const X: u32 = 31;
}

/// Extended opcodes under primary opcode 19 (XL-form).
pub mod xo19 {
    pub const RFMCI: u32 = 38;
    pub const RFI: u32 = 50;
    pub const RFCI: u32 = 51;
    pub const ISYNC: u32 = 150;
}

/// Extended opcodes under primary opcode 31 (X-form), except loads and stores, which are
/// in `LS_TABLE`.
pub mod xo31 {
    pub const MFMSR: u32 = 83;
    pub const WRTEE: u32 = 131;
    pub const MTMSR: u32 = 146;
    pub const WRTEEI: u32 = 163;
    /// `mfdcrx`/`mtdcrx`: indexed DCR access (the DCR number is in RA).
    pub const MFDCRX: u32 = 259;
    pub const MFDCR: u32 = 323;
    pub const MTDCRX: u32 = 387;
    pub const MFSPR: u32 = 339;
    pub const MTDCR: u32 = 451;
    pub const DCCCI: u32 = 454;
    pub const MTSPR: u32 = 467;
    pub const DCBI: u32 = 470;
    pub const DCREAD: u32 = 486;
    pub const TLBSYNC: u32 = 566;
    pub const MSYNC: u32 = 598;
    pub const MBAR: u32 = 854;
    pub const TLBSX: u32 = 914;
    pub const TLBRE: u32 = 946;
    pub const ICCCI: u32 = 966;
    pub const TLBWE: u32 = 978;
    pub const ICBI: u32 = 982;
    pub const ICREAD: u32 = 998;
    pub const DCBZ: u32 = 1014;
    /// `dcbst`, `dcbf`: cache block operations the decoder does not model as an
    /// [`Insn`](super::Insn); the 440 translates their address like a load's.
    pub const DCBST: u32 = 54;
    pub const DCBF: u32 = 86;
    /// `lwarx`, the load that takes a reservation (not modelled as an [`Insn`](super::Insn)).
    pub const LWARX: u32 = 20;
    /// The string instructions (not modelled as an [`Insn`](super::Insn)): `lswx`/`stswx`
    /// move XER[57:63] bytes, `lswi`/`stswi` NB (the RB field; 0 means 32) bytes, between
    /// memory and consecutive registers from RT/RS on, wrapping from r31 to r0.
    pub const LSWX: u32 = 533;
    pub const LSWI: u32 = 597;
    pub const STSWX: u32 = 661;
    pub const STSWI: u32 = 725;
    /// `stwcx.`: a store the decoder does not model as an [`Insn`](super::Insn) (Kestrel's
    /// VMs never see reservations on device memory), but it writes memory.
    pub const STWCX: u32 = 150;
}

/// Whether `word`, when it accesses data memory, writes it: every store form of the
/// load/store table, `stwcx.`, `stswx`, `stswi` and `dcbz`. A data storage interrupt sets ESR[ST] from this
/// (Book E §7.6.3), so it must hold for every word, decodable as an [`Insn`] or not.
pub fn writes_memory(word: u32) -> bool {
    let primary = word >> 26;
    let op = if primary == opcd::X {
        let xo = (word >> 1) & 0x3ff;
        if matches!(xo, xo31::STWCX | xo31::DCBZ | xo31::STSWX | xo31::STSWI) {
            return true;
        }
        LsOp::from_x_opcode(xo)
    } else {
        LsOp::from_d_opcode(primary)
    };
    op.is_some_and(|op| op.kind() == AccessKind::Store)
}

/// The 440's data cache line size in bytes (PPC440 UM "Instruction and Data Caches"):
/// `dcbz` zeroes this many bytes at its effective address rounded down.
pub const DCACHE_LINE: u32 = 32;

/// Declares a 5-bit operand newtype (a register number or the MO operand): `new` for
/// checked values, `from_field` for a decoded field, `number`, and `index` into a 32-entry
/// table.
macro_rules! five_bit_number {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(u8);

        impl $name {
            /// Value `n`, if `n < 32`.
            pub const fn new(n: u8) -> Option<$name> {
                if n < 32 {
                    Some($name(n))
                } else {
                    None
                }
            }

            /// The value of a 5-bit field (higher bits are ignored).
            #[allow(dead_code)]
            const fn from_field(value: u32) -> $name {
                $name((value & 0x1f) as u8)
            }

            pub const fn number(self) -> u8 {
                self.0
            }

            /// Index into a 32-entry table; always below 32.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

five_bit_number!(
    /// A general-purpose register number, 0-31.
    Gpr
);

five_bit_number!(
    /// A floating-point register number, 0-31.
    Fpr
);

five_bit_number!(
    /// The MO (memory ordering) operand of `mbar`, 0-31 (Book E `mbar`; 0 orders all storage
    /// accesses).
    Mo
);

impl Gpr {
    /// The register's value, or 0 for r0: the `(RA|0)` operand of address computations.
    pub const fn value_or_zero(self, gpr: &[u32; 32]) -> u32 {
        if self.0 == 0 {
            0
        } else {
            gpr[self.index()]
        }
    }

    /// `r3` style, as GNU objdump prints registers.
    fn fmt_reg(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }

    /// `r3`, or `0` for r0 where the operand means `(RA|0)`.
    fn fmt_ra0(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("0")
        } else {
            self.fmt_reg(f)
        }
    }
}

impl fmt::Display for Gpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_reg(f)
    }
}

/// Converts between a 10-bit register number and the SPRN/DCRN instruction field, which
/// holds the number's low five bits in bits 11-15 and its high five bits in bits 16-20
/// (Book E `mfspr`: `n = spr[5:9] || spr[0:4]`).
const fn split_field_to_number(word: u32) -> u16 {
    let f = SPRF.get(word);
    (((f & 0x1f) << 5) | (f >> 5)) as u16
}

/// The SPR or DCR number an `mfspr`/`mtspr`/`mfdcr`/`mtdcr` word names (for the
/// kernel's emulation fast paths, which decode fields without building an [`Insn`]).
pub const fn spr_number(word: u32) -> u32 {
    split_field_to_number(word) as u32
}

const fn number_to_split_field(n: u16) -> u32 {
    let n = n as u32 & 0x3ff;
    SPRF.put(((n & 0x1f) << 5) | (n >> 5))
}

/// Declares a 10-bit register-number newtype (the SPRN/DCRN operand): `new` for checked
/// values, `of` for the crate's constants, `number`.
macro_rules! ten_bit_number {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(u16);

        impl $name {
            #[doc = concat!($what, " `n`, if `n < 1024`.")]
            pub const fn new(n: u16) -> Option<$name> {
                if n < 1024 {
                    Some($name(n))
                } else {
                    None
                }
            }

            #[doc = concat!($what, " `n` from one of the crate's constants; panics (at compile")]
            /// time in a `const`) if `n` is not a 10-bit number.
            pub const fn of(n: u32) -> $name {
                assert!(n < 1024, "SPR and DCR numbers are 10 bits wide");
                $name(n as u16)
            }

            pub const fn number(self) -> u16 {
                self.0
            }
        }
    };
}

ten_bit_number!(
    /// A special-purpose register number, 0-1023 (the numbers, names and emulation classes
    /// are in [`crate::spr`]). Any 10-bit number decodes; whether the 440 implements it is
    /// the emulator's business (an unimplemented SPR is an illegal instruction there).
    Spr,
    "SPR"
);

ten_bit_number!(
    /// A device control register number, 0-1023 (PPC440 UM "Device Control Registers"; the
    /// board's are in [`crate::dcr`]).
    Dcr,
    "DCR"
);

const _: () = assert!(spr::COUNT == 1024 && crate::dcr::COUNT == 1024);

impl Spr {
    /// Whether user mode (`MSR[PR]` = 1) traps on `mfspr`/`mtspr` of this SPR
    /// ([`spr::is_privileged`]).
    pub const fn is_privileged(self) -> bool {
        spr::is_privileged(self.0 as u32)
    }

    /// The register's name if the 440 names it (for logs and traces).
    pub const fn name(self) -> Option<&'static str> {
        spr::name(self.0 as u32)
    }

    /// How a Kestrel VM handles this SPR.
    pub const fn emulation(self) -> spr::Emulation {
        spr::emulation(self.0 as u32)
    }
}

/// Which TLB entry word `tlbre`/`tlbwe` transfers: the WS operand (PPC440 UM `tlbre`,
/// `tlbwe` and "Memory Management": TLB entry fields).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TlbWord {
    /// Word 0: EPN, V, TS, SIZE, and TID (through `MMUCR[STID]`).
    Pageid = 0,
    /// Word 1: RPN and ERPN.
    Xlat = 1,
    /// Word 2: storage attributes (U0-U3, W, I, M, G, E) and access permissions.
    Attrib = 2,
}

impl TlbWord {
    /// The word for WS value `ws`; values above 2 are reserved.
    pub const fn new(ws: u32) -> Option<TlbWord> {
        match ws {
            0 => Some(TlbWord::Pageid),
            1 => Some(TlbWord::Xlat),
            2 => Some(TlbWord::Attrib),
            _ => None,
        }
    }

    pub const fn ws(self) -> u32 {
        self as u32
    }
}

/// Whether a storage access reads or writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AccessKind {
    Load,
    Store,
}

/// Bytes per register transferred by a load or store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Width {
    Byte = 1,
    Half = 2,
    Word = 4,
    /// Only the double-precision FP loads and stores (`lfd*`, `stfd*`).
    Double = 8,
}

impl Width {
    pub const fn bytes(self) -> u32 {
        self as u32
    }
}

/// How a load or store forms its effective address (Book E "Effective Address
/// Calculation").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AddrMode {
    /// D-form: `(RA|0) + EXTS(d)`.
    D { d: i16 },
    /// X-form: `(RA|0) + (RB)`.
    X { rb: Gpr },
}

/// One load or store mnemonic: the integer ones (Book E "Fixed-Point Load and Store
/// Instructions", PPC440 UM "Instruction Set") and the floating-point ones (Book E
/// "Floating-Point Load and Store Instructions"; the 440 core has them when an FPU is
/// attached, as on QEMU's bamboo and BG/P's 440d).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[rustfmt::skip]
pub enum LsOp {
    Lbz, Lbzu, Lbzx, Lbzux,
    Lhz, Lhzu, Lhzx, Lhzux,
    Lha, Lhau, Lhax, Lhaux,
    Lwz, Lwzu, Lwzx, Lwzux,
    Stb, Stbu, Stbx, Stbux,
    Sth, Sthu, Sthx, Sthux,
    Stw, Stwu, Stwx, Stwux,
    Lhbrx, Lwbrx, Sthbrx, Stwbrx,
    Lmw, Stmw,
    Lfs, Lfsu, Lfsx, Lfsux,
    Lfd, Lfdu, Lfdx, Lfdux,
    Stfs, Stfsu, Stfsx, Stfsux,
    Stfd, Stfdu, Stfdx, Stfdux,
    Stfiwx,
}

/// How many [`LsOp`]s there are.
const LS_OPS: usize = 51;

/// Where an [`LsOp`] lives in the opcode space.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LsForm {
    /// D-form with this primary opcode.
    D(u32),
    /// X-form under primary opcode 31 with this extended opcode.
    X(u32),
}

/// Everything about one [`LsOp`]: the single table both decoder and encoder read.
struct LsDesc {
    op: LsOp,
    mnemonic: &'static str,
    form: LsForm,
    kind: AccessKind,
    width: Width,
    sign_extend: bool,
    byte_reverse: bool,
    update: bool,
    multiple: bool,
    fp: bool,
}

const fn ls(
    op: LsOp,
    mnemonic: &'static str,
    form: LsForm,
    kind: AccessKind,
    width: Width,
    flags: u8,
) -> LsDesc {
    LsDesc {
        op,
        mnemonic,
        form,
        kind,
        width,
        sign_extend: flags & SEXT != 0,
        byte_reverse: flags & BREV != 0,
        update: flags & UPD != 0,
        multiple: flags & MULT != 0,
        fp: flags & FP != 0,
    }
}

const SEXT: u8 = 1;
const BREV: u8 = 2;
const UPD: u8 = 4;
const MULT: u8 = 8;
/// The data register is an FPR.
const FP: u8 = 16;

/// Indexed by `LsOp as usize`; the assertion below checks the order at compile time.
#[rustfmt::skip]
const LS_TABLE: [LsDesc; LS_OPS] = {
    use AccessKind::{Load, Store};
    use LsForm::{D, X};
    use LsOp::*;
    use Width::{Byte, Double, Half, Word};
    [
        ls(Lbz, "lbz", D(34), Load, Byte, 0),
        ls(Lbzu, "lbzu", D(35), Load, Byte, UPD),
        ls(Lbzx, "lbzx", X(87), Load, Byte, 0),
        ls(Lbzux, "lbzux", X(119), Load, Byte, UPD),
        ls(Lhz, "lhz", D(40), Load, Half, 0),
        ls(Lhzu, "lhzu", D(41), Load, Half, UPD),
        ls(Lhzx, "lhzx", X(279), Load, Half, 0),
        ls(Lhzux, "lhzux", X(311), Load, Half, UPD),
        ls(Lha, "lha", D(42), Load, Half, SEXT),
        ls(Lhau, "lhau", D(43), Load, Half, SEXT | UPD),
        ls(Lhax, "lhax", X(343), Load, Half, SEXT),
        ls(Lhaux, "lhaux", X(375), Load, Half, SEXT | UPD),
        ls(Lwz, "lwz", D(32), Load, Word, 0),
        ls(Lwzu, "lwzu", D(33), Load, Word, UPD),
        ls(Lwzx, "lwzx", X(23), Load, Word, 0),
        ls(Lwzux, "lwzux", X(55), Load, Word, UPD),
        ls(Stb, "stb", D(38), Store, Byte, 0),
        ls(Stbu, "stbu", D(39), Store, Byte, UPD),
        ls(Stbx, "stbx", X(215), Store, Byte, 0),
        ls(Stbux, "stbux", X(247), Store, Byte, UPD),
        ls(Sth, "sth", D(44), Store, Half, 0),
        ls(Sthu, "sthu", D(45), Store, Half, UPD),
        ls(Sthx, "sthx", X(407), Store, Half, 0),
        ls(Sthux, "sthux", X(439), Store, Half, UPD),
        ls(Stw, "stw", D(36), Store, Word, 0),
        ls(Stwu, "stwu", D(37), Store, Word, UPD),
        ls(Stwx, "stwx", X(151), Store, Word, 0),
        ls(Stwux, "stwux", X(183), Store, Word, UPD),
        ls(Lhbrx, "lhbrx", X(790), Load, Half, BREV),
        ls(Lwbrx, "lwbrx", X(534), Load, Word, BREV),
        ls(Sthbrx, "sthbrx", X(918), Store, Half, BREV),
        ls(Stwbrx, "stwbrx", X(662), Store, Word, BREV),
        ls(Lmw, "lmw", D(46), Load, Word, MULT),
        ls(Stmw, "stmw", D(47), Store, Word, MULT),
        ls(Lfs, "lfs", D(48), Load, Word, FP),
        ls(Lfsu, "lfsu", D(49), Load, Word, FP | UPD),
        ls(Lfsx, "lfsx", X(535), Load, Word, FP),
        ls(Lfsux, "lfsux", X(567), Load, Word, FP | UPD),
        ls(Lfd, "lfd", D(50), Load, Double, FP),
        ls(Lfdu, "lfdu", D(51), Load, Double, FP | UPD),
        ls(Lfdx, "lfdx", X(599), Load, Double, FP),
        ls(Lfdux, "lfdux", X(631), Load, Double, FP | UPD),
        ls(Stfs, "stfs", D(52), Store, Word, FP),
        ls(Stfsu, "stfsu", D(53), Store, Word, FP | UPD),
        ls(Stfsx, "stfsx", X(663), Store, Word, FP),
        ls(Stfsux, "stfsux", X(695), Store, Word, FP | UPD),
        ls(Stfd, "stfd", D(54), Store, Double, FP),
        ls(Stfdu, "stfdu", D(55), Store, Double, FP | UPD),
        ls(Stfdx, "stfdx", X(727), Store, Double, FP),
        ls(Stfdux, "stfdux", X(759), Store, Double, FP | UPD),
        ls(Stfiwx, "stfiwx", X(983), Store, Word, FP),
    ]
};

const _: () = {
    let mut i = 0;
    while i < LS_TABLE.len() {
        assert!(
            LS_TABLE[i].op as usize == i,
            "LS_TABLE must follow LsOp's order"
        );
        i += 1;
    }
};

impl LsOp {
    /// Every load/store op, in declaration order.
    pub const ALL: [LsOp; LS_OPS] = {
        let mut all = [LsOp::Lbz; LS_OPS];
        let mut i = 0;
        while i < LS_OPS {
            all[i] = LS_TABLE[i].op;
            i += 1;
        }
        all
    };

    const fn desc(self) -> &'static LsDesc {
        &LS_TABLE[self as usize]
    }

    pub const fn mnemonic(self) -> &'static str {
        self.desc().mnemonic
    }

    pub const fn kind(self) -> AccessKind {
        self.desc().kind
    }

    pub const fn width(self) -> Width {
        self.desc().width
    }

    /// Whether a halfword load sign-extends (`lha*`).
    pub const fn sign_extend(self) -> bool {
        self.desc().sign_extend
    }

    /// Whether the bytes are swapped (`l*brx`, `st*brx`): a little-endian access.
    pub const fn byte_reverse(self) -> bool {
        self.desc().byte_reverse
    }

    /// Whether RA receives the effective address (`*u`, `*ux`).
    pub const fn update(self) -> bool {
        self.desc().update
    }

    /// Whether this is `lmw`/`stmw`: registers RT..=r31, one word each.
    pub const fn multiple(self) -> bool {
        self.desc().multiple
    }

    /// Whether the data register is an FPR (`lf*`, `stf*`).
    pub const fn is_fp(self) -> bool {
        self.desc().fp
    }

    /// Whether the op takes an X-form (RB) address rather than a D-form displacement.
    pub const fn is_indexed(self) -> bool {
        matches!(self.desc().form, LsForm::X(_))
    }

    fn from_d_opcode(opcd: u32) -> Option<LsOp> {
        LS_TABLE
            .iter()
            .find(|d| d.form == LsForm::D(opcd))
            .map(|d| d.op)
    }

    fn from_x_opcode(xo: u32) -> Option<LsOp> {
        LS_TABLE
            .iter()
            .find(|d| d.form == LsForm::X(xo))
            .map(|d| d.op)
    }
}

impl fmt::Display for Fpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}", self.0)
    }
}

/// The register a load writes or a store reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DataReg {
    Gpr(Gpr),
    Fpr(Fpr),
}

/// A validated load or store: one that is not an invalid form.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LoadStore {
    op: LsOp,
    /// The RT/RS (FRT/FRS for FP ops) field, bits 6-10.
    rt_rs: Gpr,
    ra: Gpr,
    addr: AddrMode,
}

impl LoadStore {
    /// Checks Book E's invalid-form rules for loads and stores:
    /// - the address mode must match the op (D-form displacement or X-form RB);
    /// - update forms need RA ≠ 0, and loads with update also RA ≠ RT;
    /// - `lmw` must not load RA (RA in RT..=31, which includes RA = 0 when RT = 0).
    ///
    /// For integer ops only; FP ops take an FPR ([`LoadStore::new_fp`]).
    pub const fn new(
        op: LsOp,
        rt_rs: Gpr,
        ra: Gpr,
        addr: AddrMode,
    ) -> Result<LoadStore, InsnError> {
        if op.is_fp() {
            return Err(InsnError::RegisterFileMismatch);
        }
        LoadStore::checked(op, rt_rs, ra, addr)
    }

    /// An FP load or store: the address mode must match the op, and update forms need
    /// RA ≠ 0 (FRT is in the other register file, so RA = FRT is allowed).
    pub const fn new_fp(
        op: LsOp,
        frt_frs: Fpr,
        ra: Gpr,
        addr: AddrMode,
    ) -> Result<LoadStore, InsnError> {
        if !op.is_fp() {
            return Err(InsnError::RegisterFileMismatch);
        }
        LoadStore::checked(op, Gpr::from_field(frt_frs.0 as u32), ra, addr)
    }

    /// Either constructor's checks; `rt_rs` is the raw register field.
    const fn checked(
        op: LsOp,
        rt_rs: Gpr,
        ra: Gpr,
        addr: AddrMode,
    ) -> Result<LoadStore, InsnError> {
        if op.is_indexed() != matches!(addr, AddrMode::X { .. }) {
            return Err(InsnError::AddrModeMismatch);
        }
        if op.update() && ra.number() == 0 {
            return Err(InsnError::UpdateWithRaZero);
        }
        if op.update()
            && !op.is_fp()
            && matches!(op.kind(), AccessKind::Load)
            && ra.number() == rt_rs.number()
        {
            return Err(InsnError::UpdateWithRaIsRt);
        }
        if op.multiple() && matches!(op.kind(), AccessKind::Load) && ra.number() >= rt_rs.number() {
            return Err(InsnError::LoadMultipleLoadsRa);
        }
        Ok(LoadStore {
            op,
            rt_rs,
            ra,
            addr,
        })
    }

    pub const fn op(&self) -> LsOp {
        self.op
    }

    pub const fn kind(&self) -> AccessKind {
        self.op.kind()
    }

    /// Bytes per register.
    pub const fn width(&self) -> Width {
        self.op.width()
    }

    pub const fn sign_extend(&self) -> bool {
        self.op.sign_extend()
    }

    pub const fn byte_reverse(&self) -> bool {
        self.op.byte_reverse()
    }

    pub const fn update(&self) -> bool {
        self.op.update()
    }

    /// RT for loads, RS for stores; the first register for `lmw`/`stmw`. The register
    /// field read as a GPR: for FP ops ([`LoadStore::is_fp`]) use [`LoadStore::data_reg`].
    pub const fn rt_rs(&self) -> Gpr {
        self.rt_rs
    }

    /// Whether the data register is an FPR.
    pub const fn is_fp(&self) -> bool {
        self.op.is_fp()
    }

    /// The register a load writes or a store reads (the first one for `lmw`/`stmw`).
    pub const fn data_reg(&self) -> DataReg {
        if self.op.is_fp() {
            DataReg::Fpr(Fpr(self.rt_rs.0))
        } else {
            DataReg::Gpr(self.rt_rs)
        }
    }

    pub const fn ra(&self) -> Gpr {
        self.ra
    }

    pub const fn addr(&self) -> AddrMode {
        self.addr
    }

    /// Registers transferred: 1, or `32 - RT` for `lmw`/`stmw`.
    pub const fn register_count(&self) -> u32 {
        if self.op.multiple() {
            32 - self.rt_rs.number() as u32
        } else {
            1
        }
    }

    /// Total bytes accessed starting at the effective address (at most 128).
    pub const fn access_len(&self) -> u32 {
        self.register_count() * self.width().bytes()
    }

    /// The effective address: `(RA|0) + EXTS(d)` or `(RA|0) + (RB)`, modulo 2^32 (Book E
    /// "Effective Address Calculation"). Update forms always have RA ≠ 0, so `(RA|0)` is
    /// (RA) for them, which is also the value they write back to RA.
    pub const fn effective_address(&self, gpr: &[u32; 32]) -> u32 {
        let base = self.ra.value_or_zero(gpr);
        match self.addr {
            AddrMode::D { d } => base.wrapping_add(d as i32 as u32),
            AddrMode::X { rb } => base.wrapping_add(gpr[rb.index()]),
        }
    }

    /// The register value a load produces from the `width()` bytes read, given as a
    /// big-endian number (the 440 runs big-endian; a device model returns register values
    /// that way). Byte-reversed loads swap, `lha*` sign-extends, the rest zero-extend.
    /// For integer ops; FP loads use [`LoadStore::fp_load_result`].
    pub const fn load_result(&self, raw: u32) -> u32 {
        match self.width() {
            // Only FP ops are 8 bytes wide; their data does not fit a GPR.
            Width::Double => raw,
            Width::Byte => raw & 0xff,
            Width::Half => {
                let h = if self.byte_reverse() {
                    (raw as u16).swap_bytes()
                } else {
                    raw as u16
                };
                if self.sign_extend() {
                    h as i16 as i32 as u32
                } else {
                    h as u32
                }
            }
            Width::Word => {
                if self.byte_reverse() {
                    raw.swap_bytes()
                } else {
                    raw
                }
            }
        }
    }

    /// The `width()`-byte value a store writes, as a big-endian number, from the value of
    /// RS: the low bytes of RS, swapped for byte-reversed stores. For integer ops; FP
    /// stores use [`LoadStore::fp_store_data`].
    pub const fn store_data(&self, rs: u32) -> u32 {
        match self.width() {
            // Only FP ops are 8 bytes wide.
            Width::Double => rs,
            Width::Byte => rs & 0xff,
            Width::Half => {
                let h = rs as u16;
                (if self.byte_reverse() {
                    h.swap_bytes()
                } else {
                    h
                }) as u32
            }
            Width::Word => {
                if self.byte_reverse() {
                    rs.swap_bytes()
                } else {
                    rs
                }
            }
        }
    }

    /// The FPR value (its 64 bits) an FP load produces from the `width()` bytes read, as a
    /// big-endian number: `lfs*` converts the single to double format exactly
    /// ([`crate::fp::single_to_double`]), `lfd*` takes the doubleword as it is. For
    /// integer ops: `raw` unchanged.
    pub const fn fp_load_result(&self, raw: u64) -> u64 {
        match (self.is_fp(), self.width()) {
            (true, Width::Word) => crate::fp::single_to_double(raw as u32),
            _ => raw,
        }
    }

    /// The `width()`-byte value an FP store writes, as a big-endian number, from the 64
    /// bits of FRS: `stfs*` converts to single format ([`crate::fp::double_to_single`]),
    /// `stfiwx` stores the low word as it is, `stfd*` the whole doubleword. For integer
    /// ops: `frs` unchanged.
    pub const fn fp_store_data(&self, frs: u64) -> u64 {
        match self.op {
            LsOp::Stfs | LsOp::Stfsu | LsOp::Stfsx | LsOp::Stfsux => {
                crate::fp::double_to_single(frs) as u64
            }
            LsOp::Stfiwx => frs & 0xffff_ffff,
            _ => frs,
        }
    }
}

/// A decoded instruction. In the cache-management variants and `tlbsx`, `ra` and `rb` form
/// the effective address `(RA|0) + (RB)` ([`Insn::effective_address`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Insn {
    /// `mfmsr RT` (privileged).
    Mfmsr { rt: Gpr },
    /// `mtmsr RS` (privileged).
    Mtmsr { rs: Gpr },
    /// `wrtee RS`: `MSR[EE]` = `(RS)[16]` (privileged).
    Wrtee { rs: Gpr },
    /// `wrteei E`: `MSR[EE]` = E (privileged).
    Wrteei { e: bool },
    /// `rfi`: return from non-critical interrupt via SRR0/SRR1 (privileged).
    Rfi,
    /// `rfci`: return from critical interrupt via CSRR0/CSRR1 (privileged).
    Rfci,
    /// `rfmci`: return from machine check via MCSRR0/MCSRR1 (privileged).
    Rfmci,
    /// `mfspr RT,SPRN` (privileged iff the SPR is, see [`Spr::is_privileged`]).
    Mfspr { rt: Gpr, spr: Spr },
    /// `mtspr SPRN,RS` (privileged iff the SPR is).
    Mtspr { spr: Spr, rs: Gpr },
    /// `mfdcr RT,DCRN` (privileged).
    Mfdcr { rt: Gpr, dcr: Dcr },
    /// `mtdcr DCRN,RS` (privileged).
    Mtdcr { dcr: Dcr, rs: Gpr },
    /// `mfdcrx RT,RA`: RT = the DCR whose number is (RA) (privileged; not on the 440x5,
    /// which raises an illegal instruction interrupt instead; see the module doc).
    Mfdcrx { rt: Gpr, ra: Gpr },
    /// `mtdcrx RA,RS`: the DCR whose number is (RA) = (RS) (privileged; not on the 440x5).
    Mtdcrx { ra: Gpr, rs: Gpr },
    /// `tlbwe RS,RA,WS`: write word WS of TLB entry (RA) (privileged).
    Tlbwe { rs: Gpr, ra: Gpr, ws: TlbWord },
    /// `tlbre RT,RA,WS`: read word WS of TLB entry (RA) (privileged).
    Tlbre { rt: Gpr, ra: Gpr, ws: TlbWord },
    /// `tlbsx[.] RT,RA,RB`: search the TLB for `(RA|0) + (RB)` under `MMUCR[STID, STS]`;
    /// the record form sets `CR0[EQ]` on a hit (privileged).
    Tlbsx { rt: Gpr, ra: Gpr, rb: Gpr, rc: bool },
    /// `tlbsync` (privileged; a no-op on the uniprocessor 440).
    Tlbsync,
    /// `iccci RA,RB`: invalidate the whole instruction cache (privileged).
    Iccci { ra: Gpr, rb: Gpr },
    /// `dccci RA,RB`: invalidate the whole data cache without writing it back
    /// (privileged).
    Dccci { ra: Gpr, rb: Gpr },
    /// `dcbi RA,RB`: invalidate one data cache block (privileged).
    Dcbi { ra: Gpr, rb: Gpr },
    /// `dcread RT,RA,RB`: read data cache debug state (privileged, 440-specific).
    Dcread { rt: Gpr, ra: Gpr, rb: Gpr },
    /// `icread RA,RB`: read instruction cache debug state (privileged, 440-specific).
    Icread { ra: Gpr, rb: Gpr },
    /// `icbi RA,RB`: invalidate one instruction cache block.
    Icbi { ra: Gpr, rb: Gpr },
    /// `dcbz RA,RB`: zero the [`DCACHE_LINE`]-byte block at the effective address (a
    /// 32-byte store, as far as emulated device memory is concerned).
    Dcbz { ra: Gpr, rb: Gpr },
    /// `isync`.
    Isync,
    /// `msync` (Book E's name for `sync`).
    Msync,
    /// `mbar MO` (`eieio` is `mbar 0`).
    Mbar { mo: Mo },
    /// `sc`: system call.
    Sc,
    /// An integer load or store.
    LoadStore(LoadStore),
    /// A word this module does not model: another instruction, or an illegal one.
    Other(u32),
    /// A modeled opcode in an invalid form or with a reserved field value; see
    /// [`try_decode`] for the reason.
    Invalid(u32),
}

/// Why a word or a set of operands is not a valid instruction. Each message says what the
/// emulator should do about it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum InsnError {
    /// A load or store with update names r0 as RA (Book E invalid form); treat as an
    /// illegal instruction.
    UpdateWithRaZero,
    /// A load with update names the same register as RA and RT (Book E invalid form);
    /// treat as an illegal instruction.
    UpdateWithRaIsRt,
    /// `lmw` would overwrite its own base register RA (Book E invalid form); treat as an
    /// illegal instruction.
    LoadMultipleLoadsRa,
    /// `tlbre`/`tlbwe` with a WS value above 2, which the 440 reserves; treat as an
    /// illegal instruction.
    ReservedTlbWord,
    /// A D-form load/store was given an RB operand or an X-form one a displacement; use
    /// the address mode the op takes ([`LsOp::is_indexed`]).
    AddrModeMismatch,
    /// An FP load/store was given a GPR or an integer one an FPR; use
    /// [`LoadStore::new_fp`] for FP ops ([`LsOp::is_fp`]) and [`LoadStore::new`] for the rest.
    RegisterFileMismatch,
}

impl InsnError {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UpdateWithRaZero => "load/store with update has RA = 0 (invalid form)",
            Self::UpdateWithRaIsRt => "load with update has RA = RT (invalid form)",
            Self::LoadMultipleLoadsRa => "lmw loads its base register RA (invalid form)",
            Self::ReservedTlbWord => "tlbre/tlbwe word select above 2 (reserved)",
            Self::AddrModeMismatch => "address mode does not match the load/store op",
            Self::RegisterFileMismatch => {
                "register file (GPR/FPR) does not match the load/store op"
            }
        }
    }
}

impl fmt::Display for InsnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decodes `word`; never panics. See the module documentation for the rules.
pub fn decode(word: u32) -> Insn {
    try_decode(word).unwrap_or(Insn::Invalid(word))
}

/// Decodes `word`, saying why a modeled opcode is invalid. Never returns
/// [`Insn::Invalid`].
pub fn try_decode(word: u32) -> Result<Insn, InsnError> {
    let rt = Gpr::from_field(RT.get(word));
    let ra = Gpr::from_field(RA.get(word));
    let rb = Gpr::from_field(RB.get(word));
    let opcd = OPCD.get(word);
    let insn = match opcd {
        opcd::SC if SC_ONE.get(word) == 1 => Insn::Sc,
        opcd::XL => match XO.get(word) {
            xo19::RFI => Insn::Rfi,
            xo19::RFCI => Insn::Rfci,
            xo19::RFMCI => Insn::Rfmci,
            xo19::ISYNC => Insn::Isync,
            _ => Insn::Other(word),
        },
        opcd::X => {
            let xo = XO.get(word);
            match xo {
                xo31::MFMSR => Insn::Mfmsr { rt },
                xo31::MTMSR => Insn::Mtmsr { rs: rt },
                xo31::WRTEE => Insn::Wrtee { rs: rt },
                xo31::WRTEEI => Insn::Wrteei {
                    e: E.get(word) == 1,
                },
                xo31::MFSPR => Insn::Mfspr {
                    rt,
                    spr: Spr(split_field_to_number(word)),
                },
                xo31::MTSPR => Insn::Mtspr {
                    spr: Spr(split_field_to_number(word)),
                    rs: rt,
                },
                xo31::MFDCR => Insn::Mfdcr {
                    rt,
                    dcr: Dcr(split_field_to_number(word)),
                },
                xo31::MTDCR => Insn::Mtdcr {
                    dcr: Dcr(split_field_to_number(word)),
                    rs: rt,
                },
                xo31::MFDCRX => Insn::Mfdcrx { rt, ra },
                xo31::MTDCRX => Insn::Mtdcrx { ra, rs: rt },
                xo31::TLBWE => Insn::Tlbwe {
                    rs: rt,
                    ra,
                    ws: tlb_word(word)?,
                },
                xo31::TLBRE => Insn::Tlbre {
                    rt,
                    ra,
                    ws: tlb_word(word)?,
                },
                xo31::TLBSX => Insn::Tlbsx {
                    rt,
                    ra,
                    rb,
                    rc: RC.get(word) == 1,
                },
                xo31::TLBSYNC => Insn::Tlbsync,
                xo31::ICCCI => Insn::Iccci { ra, rb },
                xo31::DCCCI => Insn::Dccci { ra, rb },
                xo31::DCBI => Insn::Dcbi { ra, rb },
                xo31::DCREAD => Insn::Dcread { rt, ra, rb },
                xo31::ICREAD => Insn::Icread { ra, rb },
                xo31::ICBI => Insn::Icbi { ra, rb },
                xo31::DCBZ => Insn::Dcbz { ra, rb },
                xo31::MSYNC => Insn::Msync,
                xo31::MBAR => Insn::Mbar {
                    mo: Mo(rt.number()),
                },
                _ => match LsOp::from_x_opcode(xo) {
                    Some(op) => {
                        Insn::LoadStore(LoadStore::checked(op, rt, ra, AddrMode::X { rb })?)
                    }
                    None => Insn::Other(word),
                },
            }
        }
        _ => match LsOp::from_d_opcode(opcd) {
            Some(op) => {
                let d = D.get(word) as u16 as i16;
                Insn::LoadStore(LoadStore::checked(op, rt, ra, AddrMode::D { d })?)
            }
            None => Insn::Other(word),
        },
    };
    Ok(insn)
}

fn tlb_word(word: u32) -> Result<TlbWord, InsnError> {
    TlbWord::new(RB.get(word)).ok_or(InsnError::ReservedTlbWord)
}

/// An X-form word under primary opcode 31 with extended opcode `xo`.
const fn x(xo: u32) -> u32 {
    OPCD.put(opcd::X) | XO.put(xo)
}

/// An XL-form word under primary opcode 19 with extended opcode `xo`.
const fn xl(xo: u32) -> u32 {
    OPCD.put(opcd::XL) | XO.put(xo)
}

/// Register `r` in the RT/RS field.
const fn rt(r: Gpr) -> u32 {
    RT.put(r.number() as u32)
}

/// Register `r` in the RA field.
const fn ra(r: Gpr) -> u32 {
    RA.put(r.number() as u32)
}

/// Register `r` in the RB field.
const fn rb(r: Gpr) -> u32 {
    RB.put(r.number() as u32)
}

/// Encodes `insn` with all reserved bits zero. [`Insn::Other`] and [`Insn::Invalid`]
/// return their word unchanged. A `const fn`, so that assembly can take encodings as
/// `const` operands ([`crate::encode`]).
pub const fn encode(insn: &Insn) -> u32 {
    match *insn {
        Insn::Mfmsr { rt: t } => x(xo31::MFMSR) | rt(t),
        Insn::Mtmsr { rs } => x(xo31::MTMSR) | rt(rs),
        Insn::Wrtee { rs } => x(xo31::WRTEE) | rt(rs),
        Insn::Wrteei { e } => x(xo31::WRTEEI) | E.put(e as u32),
        Insn::Rfi => xl(xo19::RFI),
        Insn::Rfci => xl(xo19::RFCI),
        Insn::Rfmci => xl(xo19::RFMCI),
        Insn::Mfspr { rt: t, spr } => x(xo31::MFSPR) | rt(t) | number_to_split_field(spr.0),
        Insn::Mtspr { spr, rs } => x(xo31::MTSPR) | rt(rs) | number_to_split_field(spr.0),
        Insn::Mfdcr { rt: t, dcr } => x(xo31::MFDCR) | rt(t) | number_to_split_field(dcr.0),
        Insn::Mtdcr { dcr, rs } => x(xo31::MTDCR) | rt(rs) | number_to_split_field(dcr.0),
        Insn::Mfdcrx { rt: t, ra: a } => x(xo31::MFDCRX) | rt(t) | ra(a),
        Insn::Mtdcrx { ra: a, rs } => x(xo31::MTDCRX) | rt(rs) | ra(a),
        Insn::Tlbwe { rs, ra: a, ws } => x(xo31::TLBWE) | rt(rs) | ra(a) | RB.put(ws.ws()),
        Insn::Tlbre { rt: t, ra: a, ws } => x(xo31::TLBRE) | rt(t) | ra(a) | RB.put(ws.ws()),
        Insn::Tlbsx {
            rt: t,
            ra: a,
            rb: b,
            rc,
        } => x(xo31::TLBSX) | rt(t) | ra(a) | rb(b) | RC.put(rc as u32),
        Insn::Tlbsync => x(xo31::TLBSYNC),
        Insn::Iccci { ra: a, rb: b } => x(xo31::ICCCI) | ra(a) | rb(b),
        Insn::Dccci { ra: a, rb: b } => x(xo31::DCCCI) | ra(a) | rb(b),
        Insn::Dcbi { ra: a, rb: b } => x(xo31::DCBI) | ra(a) | rb(b),
        Insn::Dcread {
            rt: t,
            ra: a,
            rb: b,
        } => x(xo31::DCREAD) | rt(t) | ra(a) | rb(b),
        Insn::Icread { ra: a, rb: b } => x(xo31::ICREAD) | ra(a) | rb(b),
        Insn::Icbi { ra: a, rb: b } => x(xo31::ICBI) | ra(a) | rb(b),
        Insn::Dcbz { ra: a, rb: b } => x(xo31::DCBZ) | ra(a) | rb(b),
        Insn::Isync => xl(xo19::ISYNC),
        Insn::Msync => x(xo31::MSYNC),
        Insn::Mbar { mo } => x(xo31::MBAR) | RT.put(mo.0 as u32),
        Insn::Sc => OPCD.put(opcd::SC) | SC_ONE.put(1),
        Insn::LoadStore(ls) => {
            let regs = RT.put(ls.rt_rs.number() as u32) | ra(ls.ra);
            // `LoadStore::new` guarantees that the address mode matches the op's form, so
            // the number is a primary opcode for D and an extended one for X.
            let number = match ls.op.desc().form {
                LsForm::D(n) | LsForm::X(n) => n,
            };
            match ls.addr {
                AddrMode::D { d } => OPCD.put(number) | regs | D.put(d as u16 as u32),
                AddrMode::X { rb: b } => x(number) | regs | rb(b),
            }
        }
        Insn::Other(w) | Insn::Invalid(w) => w,
    }
}

impl Insn {
    /// Whether executing this instruction in user mode (`MSR[PR]` = 1) raises a program
    /// interrupt with `ESR[PPR]`: the privileged instructions of PPC440 UM "Programming
    /// Model", privileged mode (mfspr/mtspr only for privileged SPRs). `sc` traps too, but as a
    /// system call; loads and stores trap only through storage interrupts. `Other` and
    /// `Invalid` are not privileged instructions (an illegal word raises `ESR[PIL]`).
    pub const fn is_privileged(&self) -> bool {
        match self {
            Insn::Mfmsr { .. }
            | Insn::Mtmsr { .. }
            | Insn::Wrtee { .. }
            | Insn::Wrteei { .. }
            | Insn::Rfi
            | Insn::Rfci
            | Insn::Rfmci
            | Insn::Mfdcr { .. }
            | Insn::Mtdcr { .. }
            | Insn::Mfdcrx { .. }
            | Insn::Mtdcrx { .. }
            | Insn::Tlbwe { .. }
            | Insn::Tlbre { .. }
            | Insn::Tlbsx { .. }
            | Insn::Tlbsync
            | Insn::Iccci { .. }
            | Insn::Dccci { .. }
            | Insn::Dcbi { .. }
            | Insn::Dcread { .. }
            | Insn::Icread { .. } => true,
            Insn::Mfspr { spr, .. } | Insn::Mtspr { spr, .. } => spr.is_privileged(),
            Insn::Icbi { .. }
            | Insn::Dcbz { .. }
            | Insn::Isync
            | Insn::Msync
            | Insn::Mbar { .. }
            | Insn::Sc
            | Insn::LoadStore(_)
            | Insn::Other(_)
            | Insn::Invalid(_) => false,
        }
    }

    /// The bits of this instruction's encoding that are reserved fields, which [`decode`]
    /// ignores and [`encode`] leaves zero. 0 for `Other` and `Invalid`.
    ///
    /// Per form: X-form instructions reserve every operand slot they do not use among
    /// bits 6-10, 11-15, 16-20, and bit 31 unless it is Rc (only `tlbsx.`); `wrteei`
    /// reserves bits 6-15 and 17-20; XL-form `rfi`/`rfci`/`rfmci`/`isync` reserve bits
    /// 6-20 and 31; `sc` reserves bits 6-29 and 31; D-form loads and stores reserve
    /// nothing.
    pub const fn reserved_mask(&self) -> u32 {
        let rt = RT.mask();
        let ra = RA.mask();
        let rb = RB.mask();
        let x_used = OPCD.mask() | XO.mask();
        let used = match self {
            Insn::Other(_) | Insn::Invalid(_) => return 0,
            Insn::Sc => OPCD.mask() | SC_ONE.mask(),
            Insn::Rfi | Insn::Rfci | Insn::Rfmci | Insn::Isync => x_used,
            Insn::Mfmsr { .. } | Insn::Mtmsr { .. } | Insn::Wrtee { .. } | Insn::Mbar { .. } => {
                x_used | rt
            }
            Insn::Wrteei { .. } => x_used | E.mask(),
            Insn::Mfspr { .. } | Insn::Mtspr { .. } | Insn::Mfdcr { .. } | Insn::Mtdcr { .. } => {
                x_used | rt | SPRF.mask()
            }
            Insn::Tlbwe { .. } | Insn::Tlbre { .. } | Insn::Dcread { .. } => x_used | rt | ra | rb,
            Insn::Mfdcrx { .. } | Insn::Mtdcrx { .. } => x_used | rt | ra,
            Insn::Tlbsx { .. } => x_used | rt | ra | rb | RC.mask(),
            Insn::Tlbsync | Insn::Msync => x_used,
            Insn::Iccci { .. }
            | Insn::Dccci { .. }
            | Insn::Dcbi { .. }
            | Insn::Icread { .. }
            | Insn::Icbi { .. }
            | Insn::Dcbz { .. } => x_used | ra | rb,
            Insn::LoadStore(ls) => {
                if ls.op.is_indexed() {
                    x_used | rt | ra | rb
                } else {
                    u32::MAX
                }
            }
        };
        !used
    }

    /// The effective address of an instruction with a storage operand: loads, stores,
    /// `dcbz`, `dcbi`, `icbi`, `tlbsx` (the address searched for), `dcread`/`icread`, and
    /// `iccci`/`dccci` (whose address the 440 ignores: they act on the whole cache).
    /// `None` for everything else.
    pub const fn effective_address(&self, gpr: &[u32; 32]) -> Option<u32> {
        match self {
            Insn::LoadStore(ls) => Some(ls.effective_address(gpr)),
            Insn::Dcbz { ra, rb }
            | Insn::Dcbi { ra, rb }
            | Insn::Icbi { ra, rb }
            | Insn::Iccci { ra, rb }
            | Insn::Dccci { ra, rb }
            | Insn::Icread { ra, rb }
            | Insn::Dcread { ra, rb, .. }
            | Insn::Tlbsx { ra, rb, .. } => {
                Some(ra.value_or_zero(gpr).wrapping_add(gpr[rb.index()]))
            }
            _ => None,
        }
    }

    /// The assembler mnemonic (`.long` for `Other` and `Invalid`).
    pub const fn mnemonic(&self) -> &'static str {
        match self {
            Insn::Mfmsr { .. } => "mfmsr",
            Insn::Mtmsr { .. } => "mtmsr",
            Insn::Wrtee { .. } => "wrtee",
            Insn::Wrteei { .. } => "wrteei",
            Insn::Rfi => "rfi",
            Insn::Rfci => "rfci",
            Insn::Rfmci => "rfmci",
            Insn::Mfspr { .. } => "mfspr",
            Insn::Mtspr { .. } => "mtspr",
            Insn::Mfdcr { .. } => "mfdcr",
            Insn::Mtdcr { .. } => "mtdcr",
            Insn::Mfdcrx { .. } => "mfdcrx",
            Insn::Mtdcrx { .. } => "mtdcrx",
            Insn::Tlbwe { .. } => "tlbwe",
            Insn::Tlbre { .. } => "tlbre",
            Insn::Tlbsx { rc: false, .. } => "tlbsx",
            Insn::Tlbsx { rc: true, .. } => "tlbsx.",
            Insn::Tlbsync => "tlbsync",
            Insn::Iccci { .. } => "iccci",
            Insn::Dccci { .. } => "dccci",
            Insn::Dcbi { .. } => "dcbi",
            Insn::Dcread { .. } => "dcread",
            Insn::Icread { .. } => "icread",
            Insn::Icbi { .. } => "icbi",
            Insn::Dcbz { .. } => "dcbz",
            Insn::Isync => "isync",
            Insn::Msync => "msync",
            Insn::Mbar { .. } => "mbar",
            Insn::Sc => "sc",
            Insn::LoadStore(ls) => ls.op.mnemonic(),
            Insn::Other(_) | Insn::Invalid(_) => ".long",
        }
    }
}

/// GNU objdump's `-M raw` syntax (no extended mnemonics): `mfspr r3,26`, `lwz r3,-8(r1)`,
/// `lwzx r3,0,r5`, `.long 0x7c00007c`. `(RA|0)` operands print r0 as `0`.
impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())?;
        match *self {
            Insn::Mfmsr { rt: r } | Insn::Mtmsr { rs: r } | Insn::Wrtee { rs: r } => {
                write!(f, " {r}")
            }
            Insn::Wrteei { e } => write!(f, " {}", e as u8),
            Insn::Mfspr { rt, spr } => write!(f, " {rt},{}", spr.0),
            Insn::Mtspr { spr, rs } => write!(f, " {},{rs}", spr.0),
            Insn::Mfdcr { rt, dcr } => write!(f, " {rt},{}", dcr.0),
            Insn::Mtdcr { dcr, rs } => write!(f, " {},{rs}", dcr.0),
            Insn::Mfdcrx { rt, ra } => write!(f, " {rt},{ra}"),
            Insn::Mtdcrx { ra, rs } => write!(f, " {ra},{rs}"),
            Insn::Tlbwe { rs: r, ra, ws } | Insn::Tlbre { rt: r, ra, ws } => {
                write!(f, " {r},{ra},{}", ws.ws())
            }
            Insn::Tlbsx { rt, ra, rb, .. } | Insn::Dcread { rt, ra, rb } => {
                write!(f, " {rt},")?;
                ra.fmt_ra0(f)?;
                write!(f, ",{rb}")
            }
            Insn::Iccci { ra, rb }
            | Insn::Dccci { ra, rb }
            | Insn::Dcbi { ra, rb }
            | Insn::Icread { ra, rb }
            | Insn::Icbi { ra, rb }
            | Insn::Dcbz { ra, rb } => {
                f.write_str(" ")?;
                ra.fmt_ra0(f)?;
                write!(f, ",{rb}")
            }
            Insn::Mbar { mo } => write!(f, " {}", mo.0),
            Insn::LoadStore(ls) => {
                match ls.data_reg() {
                    DataReg::Gpr(r) => write!(f, " {r},")?,
                    DataReg::Fpr(r) => write!(f, " {r},")?,
                }
                match ls.addr {
                    AddrMode::D { d } => {
                        write!(f, "{d}(")?;
                        ls.ra.fmt_ra0(f)?;
                        f.write_str(")")
                    }
                    AddrMode::X { rb } => {
                        ls.ra.fmt_ra0(f)?;
                        write!(f, ",{rb}")
                    }
                }
            }
            Insn::Other(w) | Insn::Invalid(w) => write!(f, " 0x{w:08x}"),
            Insn::Rfi
            | Insn::Rfci
            | Insn::Rfmci
            | Insn::Tlbsync
            | Insn::Isync
            | Insn::Msync
            | Insn::Sc => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_memory_matches_the_store_forms() {
        use super::writes_memory;
        // Every store form the manual lists (primary opcodes, then X-form extended opcodes).
        for primary in [36, 37, 38, 39, 44, 45, 47, 52, 53, 54, 55] {
            assert!(writes_memory(primary << 26), "primary opcode {primary}");
        }
        for xo in [
            150, 151, 183, 215, 247, 407, 439, 661, 662, 663, 695, 725, 727, 759, 918, 983, 1014,
        ] {
            assert!(writes_memory(31 << 26 | xo << 1), "extended opcode {xo}");
        }
        // Loads, cache and TLB operations do not write memory.
        for primary in [32, 33, 34, 35, 40, 41, 42, 43, 46, 48, 49, 50, 51] {
            assert!(!writes_memory(primary << 26), "primary opcode {primary}");
        }
        for xo in [
            20, 23, 55, 87, 119, 279, 533, 534, 535, 597, 599, 790, 86, 470, 978, 946,
        ] {
            assert!(!writes_memory(31 << 26 | xo << 1), "extended opcode {xo}");
        }
    }

    use super::*;
    use proptest::prelude::*;
    use std::string::ToString;
    use std::vec::Vec;

    fn r(n: u8) -> Gpr {
        Gpr::new(n).expect("test register below 32")
    }

    fn lsd(op: LsOp, rt: u8, d: i16, ra: u8) -> Insn {
        Insn::LoadStore(LoadStore::new(op, r(rt), r(ra), AddrMode::D { d }).expect("valid"))
    }

    fn fsd(op: LsOp, frt: u8, d: i16, ra: u8) -> Insn {
        let f = Fpr::new(frt).expect("test register below 32");
        Insn::LoadStore(LoadStore::new_fp(op, f, r(ra), AddrMode::D { d }).expect("valid"))
    }

    fn fsx(op: LsOp, frt: u8, ra: u8, rb: u8) -> Insn {
        let f = Fpr::new(frt).expect("test register below 32");
        Insn::LoadStore(LoadStore::new_fp(op, f, r(ra), AddrMode::X { rb: r(rb) }).expect("valid"))
    }

    fn lsx(op: LsOp, rt: u8, ra: u8, rb: u8) -> Insn {
        Insn::LoadStore(LoadStore::new(op, r(rt), r(ra), AddrMode::X { rb: r(rb) }).expect("valid"))
    }

    fn spr(n: u16) -> Spr {
        Spr::new(n).expect("test SPR below 1024")
    }

    fn dcr(n: u16) -> Dcr {
        Dcr::new(n).expect("test DCR below 1024")
    }

    /// One test per mnemonic: `word` (from the ISA's encoding tables, cross-checked with
    /// GNU as -m440) decodes to `insn`, encodes back, and prints as objdump -M raw does.
    macro_rules! known {
        ($($name:ident: $word:expr => $insn:expr, $text:expr;)*) => {$(
            #[test]
            fn $name() {
                let word: u32 = $word;
                let insn = $insn;
                assert_eq!(decode(word), insn, "decode {word:#010x}");
                assert_eq!(encode(&insn), word, "encode {insn:?}");
                assert_eq!(insn.to_string(), $text);
            }
        )*};
    }

    known! {
        mfmsr: 0x7C60_00A6 => Insn::Mfmsr { rt: r(3) }, "mfmsr r3";
        mtmsr: 0x7C60_0124 => Insn::Mtmsr { rs: r(3) }, "mtmsr r3";
        wrtee: 0x7C60_0106 => Insn::Wrtee { rs: r(3) }, "wrtee r3";
        wrteei_1: 0x7C00_8146 => Insn::Wrteei { e: true }, "wrteei 1";
        wrteei_0: 0x7C00_0146 => Insn::Wrteei { e: false }, "wrteei 0";
        rfi: 0x4C00_0064 => Insn::Rfi, "rfi";
        rfci: 0x4C00_0066 => Insn::Rfci, "rfci";
        rfmci: 0x4C00_004C => Insn::Rfmci, "rfmci";
        mfspr_srr0: 0x7C7A_02A6 => Insn::Mfspr { rt: r(3), spr: Spr::of(spr::SRR0) }, "mfspr r3,26";
        mtspr_sprg0: 0x7C70_43A6 => Insn::Mtspr { spr: Spr::of(spr::SPRG0), rs: r(3) }, "mtspr 272,r3";
        mfpvr: 0x7C7F_42A6 => Insn::Mfspr { rt: r(3), spr: Spr::of(spr::PVR) }, "mfspr r3,287";
        mfspr_sprg4_user: 0x7C64_42A6 => Insn::Mfspr { rt: r(3), spr: Spr::of(spr::SPRG4R) }, "mfspr r3,260";
        mflr: 0x7C68_02A6 => Insn::Mfspr { rt: r(3), spr: Spr::of(spr::LR) }, "mfspr r3,8";
        mtspr_mmucr: 0x7C72_EBA6 => Insn::Mtspr { spr: Spr::of(spr::MMUCR), rs: r(3) }, "mtspr 946,r3";
        mfdcr: 0x7C60_3286 => Insn::Mfdcr { rt: r(3), dcr: dcr(0xC0) }, "mfdcr r3,192";
        mtdcr: 0x7C60_3386 => Insn::Mtdcr { dcr: dcr(0xC0), rs: r(3) }, "mtdcr 192,r3";
        tlbwe_0: 0x7C83_07A4 =>
            Insn::Tlbwe { rs: r(4), ra: r(3), ws: TlbWord::Pageid }, "tlbwe r4,r3,0";
        tlbwe_2: 0x7C83_17A4 =>
            Insn::Tlbwe { rs: r(4), ra: r(3), ws: TlbWord::Attrib }, "tlbwe r4,r3,2";
        tlbre_1: 0x7CA3_0F64 =>
            Insn::Tlbre { rt: r(5), ra: r(3), ws: TlbWord::Xlat }, "tlbre r5,r3,1";
        tlbsx: 0x7C64_2F24 =>
            Insn::Tlbsx { rt: r(3), ra: r(4), rb: r(5), rc: false }, "tlbsx r3,r4,r5";
        tlbsx_rc: 0x7C64_2F25 =>
            Insn::Tlbsx { rt: r(3), ra: r(4), rb: r(5), rc: true }, "tlbsx. r3,r4,r5";
        tlbsync: 0x7C00_046C => Insn::Tlbsync, "tlbsync";
        iccci: 0x7C00_078C => Insn::Iccci { ra: r(0), rb: r(0) }, "iccci 0,r0";
        dccci: 0x7C00_038C => Insn::Dccci { ra: r(0), rb: r(0) }, "dccci 0,r0";
        dcbi: 0x7C03_23AC => Insn::Dcbi { ra: r(3), rb: r(4) }, "dcbi r3,r4";
        dcread: 0x7C64_2BCC => Insn::Dcread { rt: r(3), ra: r(4), rb: r(5) }, "dcread r3,r4,r5";
        icread: 0x7C03_27CC => Insn::Icread { ra: r(3), rb: r(4) }, "icread r3,r4";
        icbi: 0x7C03_27AC => Insn::Icbi { ra: r(3), rb: r(4) }, "icbi r3,r4";
        dcbz: 0x7C00_27EC => Insn::Dcbz { ra: r(0), rb: r(4) }, "dcbz 0,r4";
        isync: 0x4C00_012C => Insn::Isync, "isync";
        msync: 0x7C00_04AC => Insn::Msync, "msync";
        mbar_0: 0x7C00_06AC => Insn::Mbar { mo: Mo(0) }, "mbar 0";
        mbar_1: 0x7C20_06AC => Insn::Mbar { mo: Mo(1) }, "mbar 1";
        sc: 0x4400_0002 => Insn::Sc, "sc";
        lbz: 0x8864_0000 => lsd(LsOp::Lbz, 3, 0, 4), "lbz r3,0(r4)";
        lfs: 0xC023_0008 => fsd(LsOp::Lfs, 1, 8, 3), "lfs f1,8(r3)";
        lfsu_ra_is_frt: 0xC484_0010 => fsd(LsOp::Lfsu, 4, 16, 4), "lfsu f4,16(r4)";
        lfdx: 0x7D4B_64AE => fsx(LsOp::Lfdx, 10, 11, 12), "lfdx f10,r11,r12";
        stfd: 0xDBE2_0000 => fsd(LsOp::Stfd, 31, 0, 2), "stfd f31,0(r2)";
        stfiwx: 0x7D6C_6FAE => fsx(LsOp::Stfiwx, 11, 12, 13), "stfiwx f11,r12,r13";
        lbzu: 0x8C64_0001 => lsd(LsOp::Lbzu, 3, 1, 4), "lbzu r3,1(r4)";
        lbzx: 0x7C64_28AE => lsx(LsOp::Lbzx, 3, 4, 5), "lbzx r3,r4,r5";
        lbzux: 0x7C64_28EE => lsx(LsOp::Lbzux, 3, 4, 5), "lbzux r3,r4,r5";
        lhz: 0xA064_0002 => lsd(LsOp::Lhz, 3, 2, 4), "lhz r3,2(r4)";
        lhzu: 0xA464_FFFE => lsd(LsOp::Lhzu, 3, -2, 4), "lhzu r3,-2(r4)";
        lhzx: 0x7C64_2A2E => lsx(LsOp::Lhzx, 3, 4, 5), "lhzx r3,r4,r5";
        lhzux: 0x7C64_2A6E => lsx(LsOp::Lhzux, 3, 4, 5), "lhzux r3,r4,r5";
        lha: 0xA864_0002 => lsd(LsOp::Lha, 3, 2, 4), "lha r3,2(r4)";
        lhau: 0xAC64_0002 => lsd(LsOp::Lhau, 3, 2, 4), "lhau r3,2(r4)";
        lhax: 0x7C64_2AAE => lsx(LsOp::Lhax, 3, 4, 5), "lhax r3,r4,r5";
        lhaux: 0x7C64_2AEE => lsx(LsOp::Lhaux, 3, 4, 5), "lhaux r3,r4,r5";
        lwz: 0x8061_FFF8 => lsd(LsOp::Lwz, 3, -8, 1), "lwz r3,-8(r1)";
        lwz_ra0: 0x8060_0000 => lsd(LsOp::Lwz, 3, 0, 0), "lwz r3,0(0)";
        lwzu: 0x8461_0004 => lsd(LsOp::Lwzu, 3, 4, 1), "lwzu r3,4(r1)";
        lwzx: 0x7C64_282E => lsx(LsOp::Lwzx, 3, 4, 5), "lwzx r3,r4,r5";
        lwzx_ra0: 0x7C60_282E => lsx(LsOp::Lwzx, 3, 0, 5), "lwzx r3,0,r5";
        lwzux: 0x7C64_286E => lsx(LsOp::Lwzux, 3, 4, 5), "lwzux r3,r4,r5";
        stb: 0x9864_0000 => lsd(LsOp::Stb, 3, 0, 4), "stb r3,0(r4)";
        stbu: 0x9C64_0001 => lsd(LsOp::Stbu, 3, 1, 4), "stbu r3,1(r4)";
        stbx: 0x7C64_29AE => lsx(LsOp::Stbx, 3, 4, 5), "stbx r3,r4,r5";
        stbux: 0x7C64_29EE => lsx(LsOp::Stbux, 3, 4, 5), "stbux r3,r4,r5";
        sth: 0xB064_0002 => lsd(LsOp::Sth, 3, 2, 4), "sth r3,2(r4)";
        sthu: 0xB464_0002 => lsd(LsOp::Sthu, 3, 2, 4), "sthu r3,2(r4)";
        sthx: 0x7C64_2B2E => lsx(LsOp::Sthx, 3, 4, 5), "sthx r3,r4,r5";
        sthux: 0x7C64_2B6E => lsx(LsOp::Sthux, 3, 4, 5), "sthux r3,r4,r5";
        stw: 0x9061_0008 => lsd(LsOp::Stw, 3, 8, 1), "stw r3,8(r1)";
        stwu: 0x9421_FFF0 => lsd(LsOp::Stwu, 1, -16, 1), "stwu r1,-16(r1)";
        stwx: 0x7C64_292E => lsx(LsOp::Stwx, 3, 4, 5), "stwx r3,r4,r5";
        stwux: 0x7C64_296E => lsx(LsOp::Stwux, 3, 4, 5), "stwux r3,r4,r5";
        lhbrx: 0x7C64_2E2C => lsx(LsOp::Lhbrx, 3, 4, 5), "lhbrx r3,r4,r5";
        lwbrx: 0x7C64_2C2C => lsx(LsOp::Lwbrx, 3, 4, 5), "lwbrx r3,r4,r5";
        sthbrx: 0x7C64_2F2C => lsx(LsOp::Sthbrx, 3, 4, 5), "sthbrx r3,r4,r5";
        stwbrx: 0x7C64_2D2C => lsx(LsOp::Stwbrx, 3, 4, 5), "stwbrx r3,r4,r5";
        lmw: 0xB861_0008 => lsd(LsOp::Lmw, 3, 8, 1), "lmw r3,8(r1)";
        stmw: 0xBC61_0008 => lsd(LsOp::Stmw, 3, 8, 1), "stmw r3,8(r1)";
        mfcr_is_other: 0x7C60_0026 => Insn::Other(0x7C60_0026), ".long 0x7c600026";
        mtcrf_is_other: 0x7C6F_F120 => Insn::Other(0x7C6F_F120), ".long 0x7c6ff120";
        mfdcrx: 0x7C64_0206 => Insn::Mfdcrx { rt: r(3), ra: r(4) }, "mfdcrx r3,r4";
        mtdcrx: 0x7C64_0306 => Insn::Mtdcrx { ra: r(4), rs: r(3) }, "mtdcrx r4,r3";
        tlbivax_is_other: 0x7C03_2624 => Insn::Other(0x7C03_2624), ".long 0x7c032624";
        wait_is_other: 0x7C00_007C => Insn::Other(0x7C00_007C), ".long 0x7c00007c";
        add_is_other: 0x7C64_2A14 => Insn::Other(0x7C64_2A14), ".long 0x7c642a14";
    }

    #[test]
    fn field_conversion_matches_msb0_numbering() {
        assert_eq!(OPCD.mask(), 0xFC00_0000);
        assert_eq!(RT.mask(), 0x03E0_0000);
        assert_eq!(RA.mask(), 0x001F_0000);
        assert_eq!(RB.mask(), 0x0000_F800);
        assert_eq!(XO.mask(), 0x0000_07FE);
        assert_eq!(RC.mask(), 0x0000_0001);
        assert_eq!(D.mask(), 0x0000_FFFF);
        assert_eq!(SPRF.mask(), 0x001F_F800);
        assert_eq!(E.mask(), 0x0000_8000);
        assert_eq!(SC_ONE.mask(), 0x0000_0002);
        assert_eq!(XO.get(0x7C60_00A6), 83);
        assert_eq!(XO.put(83) | OPCD.put(31), 0x7C00_00A6);
    }

    #[test]
    fn spr_and_dcr_numbers_use_the_split_field() {
        // SRR0 = 26 = 0b00000_11010: low half 11010 goes to bits 11-15, high half to 16-20.
        assert_eq!(number_to_split_field(26), 0b11010_00000 << 11);
        for n in 0..1024u16 {
            let word = XO.put(xo31::MFSPR) | number_to_split_field(n);
            assert_eq!(split_field_to_number(word), n);
        }
    }

    #[test]
    fn spr_and_dcr_numbers() {
        assert_eq!(Spr::of(spr::SRR0).name(), Some("SRR0"));
        assert_eq!(Spr::new(1000).and_then(Spr::name), None);
        assert_eq!(Spr::new(1024), None);
        assert_eq!(Dcr::new(1024), None);
        assert!(Spr::of(spr::SRR0).is_privileged() && !Spr::of(spr::LR).is_privileged());
        assert_eq!(Spr::of(spr::SPRG3).emulation(), spr::Emulation::Fast);
        assert!(!decode(0x7C64_42A6).is_privileged(), "mfspr SPRG4R");
        assert!(decode(0x7C7F_42A6).is_privileged(), "mfpvr");
        assert!(decode(0x7C7A_02A6).is_privileged(), "mfspr SRR0");
    }

    #[test]
    fn privileged_set() {
        let privileged = [
            0x7C60_00A6,
            0x7C60_0124,
            0x7C60_0106,
            0x7C00_8146,
            0x4C00_0064,
            0x4C00_0066,
            0x4C00_004C,
            0x7C60_3286,
            0x7C60_3386,
            0x7C83_07A4,
            0x7CA3_0F64,
            0x7C64_2F24,
            0x7C00_046C,
            0x7C00_078C,
            0x7C00_038C,
            0x7C03_23AC,
            0x7C64_2BCC,
            0x7C03_27CC,
            0x7C64_0206,
            0x7C64_0306,
        ];
        for w in privileged {
            assert!(decode(w).is_privileged(), "{}", decode(w));
        }
        let unprivileged = [
            0x7C03_27AC,
            0x7C00_27EC,
            0x4C00_012C,
            0x7C00_04AC,
            0x7C00_06AC,
            0x4400_0002,
            0x8061_FFF8,
            0x7C60_0026,
            0x7C03_2624,
            0x8463_0000,
        ];
        for w in unprivileged {
            assert!(!decode(w).is_privileged(), "{}", decode(w));
        }
    }

    #[test]
    fn invalid_forms() {
        // lwzu r3,0(r3): a load with update into its own base register.
        assert_eq!(try_decode(0x8463_0000), Err(InsnError::UpdateWithRaIsRt));
        assert_eq!(decode(0x8463_0000), Insn::Invalid(0x8463_0000));
        // lwzu r3,4(0) and stwu r3,4(0): update with RA = 0.
        assert_eq!(try_decode(0x8460_0004), Err(InsnError::UpdateWithRaZero));
        assert_eq!(try_decode(0x9460_0004), Err(InsnError::UpdateWithRaZero));
        // lwzux r3,r3,r5 and stwux r0,0,r5.
        assert_eq!(try_decode(0x7C63_286E), Err(InsnError::UpdateWithRaIsRt));
        assert_eq!(try_decode(0x7C00_296E), Err(InsnError::UpdateWithRaZero));
        // stwu r1,-16(r1) is fine: a store with update may name RS = RA.
        assert!(matches!(decode(0x9421_FFF0), Insn::LoadStore(_)));
        // lmw r3,0(r3), lmw r3,0(r31), lmw r0,0(0) load RA; lmw r4,0(r3), lmw r31,0(0) and
        // stmw r3,0(r3) do not.
        assert_eq!(try_decode(0xB863_0000), Err(InsnError::LoadMultipleLoadsRa));
        assert_eq!(try_decode(0xB87F_0000), Err(InsnError::LoadMultipleLoadsRa));
        assert_eq!(try_decode(0xB800_0000), Err(InsnError::LoadMultipleLoadsRa));
        assert!(matches!(decode(0xB883_0000), Insn::LoadStore(_)));
        assert!(matches!(decode(0xBBE0_0000), Insn::LoadStore(_)));
        assert!(matches!(decode(0xBC63_0000), Insn::LoadStore(_)));
        // tlbwe r4,r3,3 and tlbre r5,r3,31: reserved word selects.
        assert_eq!(try_decode(0x7C83_1FA4), Err(InsnError::ReservedTlbWord));
        assert_eq!(try_decode(0x7CA3_FF64), Err(InsnError::ReservedTlbWord));
        // The constructor rejects an address mode the op does not take.
        let bad = LoadStore::new(LsOp::Lwz, r(3), r(4), AddrMode::X { rb: r(5) });
        assert_eq!(bad, Err(InsnError::AddrModeMismatch));
        let bad = LoadStore::new(LsOp::Lwzx, r(3), r(4), AddrMode::D { d: 0 });
        assert_eq!(bad, Err(InsnError::AddrModeMismatch));
    }

    #[test]
    fn reserved_fields_are_ignored() {
        // mfmsr r3 with Rc and RA/RB set; rfi with bits 6-20 set; sc with LEV = 1.
        let cases = [
            (0x7C60_00A7, Insn::Mfmsr { rt: r(3) }),
            (0x7C6F_F8A6, Insn::Mfmsr { rt: r(3) }),
            (0x4FFF_F865, Insn::Rfi),
            (0x4400_0022, Insn::Sc),
            (0x47FF_FFFF, Insn::Sc),
            (0x7FFF_7947, Insn::Wrteei { e: false }),
            (0x7C64_282F, lsx(LsOp::Lwzx, 3, 4, 5)),
        ];
        for (word, insn) in cases {
            assert_eq!(decode(word), insn, "{word:#010x}");
            assert_ne!(word & insn.reserved_mask(), 0);
            assert_eq!(encode(&insn), word & !insn.reserved_mask());
        }
        // Bit 30 is part of sc's opcode: without it the word is not sc.
        assert_eq!(decode(0x4400_0000), Insn::Other(0x4400_0000));
        // Rc is an operand of tlbsx, not a reserved bit.
        assert_eq!(
            Insn::Tlbsx {
                rt: r(0),
                ra: r(0),
                rb: r(0),
                rc: true
            }
            .reserved_mask()
                & 1,
            0
        );
    }

    #[test]
    fn effective_addresses() {
        let mut gpr = [0u32; 32];
        gpr[0] = 0xDEAD_0000; // never used as a base: (RA|0)
        gpr[1] = 0x1000;
        gpr[4] = 0xFFFF_FFF0;
        gpr[5] = 0x20;
        let ea = |w: u32| decode(w).effective_address(&gpr);
        assert_eq!(ea(0x8061_FFF8), Some(0x0FF8)); // lwz r3,-8(r1)
        assert_eq!(ea(0x8060_0000), Some(0)); // lwz r3,0(0)
        assert_eq!(ea(0x8860_FFFF), Some(0xFFFF_FFFF)); // lbz r3,-1(0)
        assert_eq!(ea(0x7C60_282E), Some(0x20)); // lwzx r3,0,r5
        assert_eq!(ea(0x7C64_282E), Some(0x10)); // lwzx r3,r4,r5 wraps
        assert_eq!(ea(0x7C00_27EC), Some(0xFFFF_FFF0)); // dcbz 0,r4
        assert_eq!(ea(0x7C64_2F24), Some(0x10)); // tlbsx r3,r4,r5
        assert_eq!(ea(0x7C60_00A6), None); // mfmsr
        assert_eq!(ea(0x7C00_0000), None); // Other
    }

    #[test]
    fn load_store_shape() {
        let Insn::LoadStore(lmw) = lsd(LsOp::Lmw, 29, 8, 1) else {
            panic!("lmw")
        };
        assert_eq!((lmw.register_count(), lmw.access_len()), (3, 12));
        assert_eq!(lmw.kind(), AccessKind::Load);
        let Insn::LoadStore(lhau) = lsd(LsOp::Lhau, 3, 2, 4) else {
            panic!("lhau")
        };
        assert!(lhau.sign_extend() && lhau.update() && !lhau.byte_reverse());
        assert_eq!((lhau.width(), lhau.access_len()), (Width::Half, 2));
        for op in LsOp::ALL {
            assert_eq!(LS_TABLE[op as usize].op, op, "LS_TABLE order");
            assert!(
                !(op.byte_reverse() && op.update()),
                "no byte-reversed update forms"
            );
            assert!(!op.sign_extend() || op.kind() == AccessKind::Load);
        }
    }

    #[test]
    fn fp_loads_and_stores() {
        let ls = |i: Insn| match i {
            Insn::LoadStore(ls) => ls,
            other => panic!("not a load/store: {other:?}"),
        };
        let lfd = ls(fsd(LsOp::Lfd, 1, 8, 3));
        assert!(lfd.is_fp() && lfd.data_reg() == DataReg::Fpr(Fpr(1)));
        assert_eq!(
            (lfd.width(), lfd.access_len(), lfd.kind()),
            (Width::Double, 8, AccessKind::Load)
        );
        assert_eq!(
            lfd.fp_load_result(0x4000_0000_0000_0000),
            0x4000_0000_0000_0000
        );
        let lfs = ls(fsd(LsOp::Lfsu, 2, -4, 1));
        assert_eq!((lfs.width(), lfs.update()), (Width::Word, true));
        assert_eq!(lfs.fp_load_result(0x3f80_0000), 1.0f64.to_bits());
        let stfs = ls(fsx(LsOp::Stfsx, 3, 4, 5));
        assert_eq!(stfs.fp_store_data(1.0f64.to_bits()), 0x3f80_0000);
        let stfiwx = ls(fsx(LsOp::Stfiwx, 0, 0, 1));
        assert_eq!(
            (stfiwx.width(), stfiwx.fp_store_data(0x1234_5678_9abc_def0)),
            (Width::Word, 0x9abc_def0)
        );
        let stfd = ls(fsd(LsOp::Stfdu, 1, 8, 2));
        assert_eq!(
            stfd.fp_store_data(0x1234_5678_9abc_def0),
            0x1234_5678_9abc_def0
        );
        // Register files must match the op.
        let f = Fpr::new(1).unwrap();
        assert_eq!(
            LoadStore::new(LsOp::Lfs, r(1), r(2), AddrMode::D { d: 0 }),
            Err(InsnError::RegisterFileMismatch)
        );
        assert_eq!(
            LoadStore::new_fp(LsOp::Lwz, f, r(2), AddrMode::D { d: 0 }),
            Err(InsnError::RegisterFileMismatch)
        );
        // Update with RA = 0 is invalid; RA = FRT is not.
        assert_eq!(
            try_decode(0xC420_0010),
            Err(InsnError::UpdateWithRaZero),
            "lfsu f1,16(0)"
        );
        assert!(
            matches!(decode(0xC484_0010), Insn::LoadStore(_)),
            "lfsu f4,16(r4)"
        );
        for op in LsOp::ALL {
            assert_eq!(
                op.is_fp(),
                op.mnemonic().starts_with("lf") || op.mnemonic().starts_with("stf")
            );
            assert_eq!(
                op.width() == Width::Double,
                op.is_fp() && op.mnemonic().contains('d')
            );
        }
    }

    #[test]
    fn load_results_and_store_data() {
        let ls = |i: Insn| match i {
            Insn::LoadStore(ls) => ls,
            other => panic!("{other:?}"),
        };
        assert_eq!(ls(lsd(LsOp::Lbz, 3, 0, 4)).load_result(0x1234_56F0), 0xF0);
        assert_eq!(ls(lsd(LsOp::Lhz, 3, 0, 4)).load_result(0x8001), 0x8001);
        assert_eq!(ls(lsd(LsOp::Lha, 3, 0, 4)).load_result(0x8001), 0xFFFF_8001);
        assert_eq!(ls(lsx(LsOp::Lhbrx, 3, 4, 5)).load_result(0x0180), 0x8001);
        assert_eq!(
            ls(lsx(LsOp::Lwbrx, 3, 4, 5)).load_result(0x1122_3344),
            0x4433_2211
        );
        assert_eq!(
            ls(lsd(LsOp::Lwz, 3, 0, 4)).load_result(0x1122_3344),
            0x1122_3344
        );
        assert_eq!(ls(lsd(LsOp::Stb, 3, 0, 4)).store_data(0x1122_3344), 0x44);
        assert_eq!(ls(lsd(LsOp::Sth, 3, 0, 4)).store_data(0x1122_3344), 0x3344);
        assert_eq!(
            ls(lsx(LsOp::Sthbrx, 3, 4, 5)).store_data(0x1122_3344),
            0x4433
        );
        assert_eq!(
            ls(lsx(LsOp::Stwbrx, 3, 4, 5)).store_data(0x1122_3344),
            0x4433_2211
        );
        assert_eq!(
            ls(lsd(LsOp::Stw, 3, 0, 4)).store_data(0x1122_3344),
            0x1122_3344
        );
    }

    #[test]
    fn errors_have_messages() {
        let all = [
            InsnError::UpdateWithRaZero,
            InsnError::UpdateWithRaIsRt,
            InsnError::LoadMultipleLoadsRa,
            InsnError::ReservedTlbWord,
            InsnError::AddrModeMismatch,
        ];
        for e in all {
            assert!(!e.to_string().is_empty());
        }
    }

    fn gpr() -> impl Strategy<Value = Gpr> + Clone {
        (0u8..32).prop_map(r)
    }

    fn arb_load_store() -> impl Strategy<Value = Insn> {
        (
            prop::sample::select(LsOp::ALL.to_vec()),
            gpr(),
            gpr(),
            gpr(),
            any::<i16>(),
        )
            .prop_filter_map("invalid form", |(op, rt, ra, rb, d)| {
                let addr = if op.is_indexed() {
                    AddrMode::X { rb }
                } else {
                    AddrMode::D { d }
                };
                let ls = if op.is_fp() {
                    LoadStore::new_fp(op, Fpr(rt.0), ra, addr)
                } else {
                    LoadStore::new(op, rt, ra, addr)
                };
                ls.ok().map(Insn::LoadStore)
            })
    }

    fn arb_tlb_word() -> impl Strategy<Value = TlbWord> {
        prop_oneof![
            Just(TlbWord::Pageid),
            Just(TlbWord::Xlat),
            Just(TlbWord::Attrib)
        ]
    }

    fn arb_no_operand() -> impl Strategy<Value = Insn> {
        prop::sample::select(std::vec![
            Insn::Rfi,
            Insn::Rfci,
            Insn::Rfmci,
            Insn::Tlbsync,
            Insn::Isync,
            Insn::Msync,
            Insn::Sc,
        ])
    }

    fn arb_register_moves() -> impl Strategy<Value = Insn> {
        // prop_oneof! with this many arms builds a vec.
        use std::vec;
        let spr = (0u16..1024).prop_map(spr);
        let dcr = (0u16..1024).prop_map(dcr);
        prop_oneof![
            gpr().prop_map(|rt| Insn::Mfmsr { rt }),
            gpr().prop_map(|rs| Insn::Mtmsr { rs }),
            gpr().prop_map(|rs| Insn::Wrtee { rs }),
            any::<bool>().prop_map(|e| Insn::Wrteei { e }),
            (gpr(), spr.clone()).prop_map(|(rt, spr)| Insn::Mfspr { rt, spr }),
            (gpr(), spr).prop_map(|(rs, spr)| Insn::Mtspr { spr, rs }),
            (gpr(), dcr.clone()).prop_map(|(rt, dcr)| Insn::Mfdcr { rt, dcr }),
            (gpr(), dcr).prop_map(|(rs, dcr)| Insn::Mtdcr { dcr, rs }),
            (gpr(), gpr()).prop_map(|(rt, ra)| Insn::Mfdcrx { rt, ra }),
            (gpr(), gpr()).prop_map(|(ra, rs)| Insn::Mtdcrx { ra, rs }),
            (0u8..32).prop_map(|mo| Insn::Mbar { mo: Mo(mo) }),
        ]
    }

    fn arb_tlb_and_cache() -> impl Strategy<Value = Insn> {
        let pair = (gpr(), gpr());
        prop_oneof![
            (gpr(), gpr(), arb_tlb_word()).prop_map(|(rs, ra, ws)| Insn::Tlbwe { rs, ra, ws }),
            (gpr(), gpr(), arb_tlb_word()).prop_map(|(rt, ra, ws)| Insn::Tlbre { rt, ra, ws }),
            (gpr(), gpr(), gpr(), any::<bool>()).prop_map(|(rt, ra, rb, rc)| Insn::Tlbsx {
                rt,
                ra,
                rb,
                rc
            }),
            (gpr(), gpr(), gpr()).prop_map(|(rt, ra, rb)| Insn::Dcread { rt, ra, rb }),
            pair.clone().prop_map(|(ra, rb)| Insn::Iccci { ra, rb }),
            pair.clone().prop_map(|(ra, rb)| Insn::Dccci { ra, rb }),
            pair.clone().prop_map(|(ra, rb)| Insn::Dcbi { ra, rb }),
            pair.clone().prop_map(|(ra, rb)| Insn::Icread { ra, rb }),
            pair.clone().prop_map(|(ra, rb)| Insn::Icbi { ra, rb }),
            pair.prop_map(|(ra, rb)| Insn::Dcbz { ra, rb }),
        ]
    }

    /// Every modeled (valid) instruction.
    fn arb_insn() -> impl Strategy<Value = Insn> {
        prop_oneof![
            arb_no_operand(),
            arb_register_moves(),
            arb_tlb_and_cache(),
            arb_load_store()
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn decode_inverts_encode(insn in arb_insn()) {
            let word = encode(&insn);
            prop_assert_eq!(decode(word), insn);
            prop_assert_eq!(word & insn.reserved_mask(), 0);
        }

        #[test]
        fn encode_inverts_decode_up_to_reserved_bits(word in any::<u32>()) {
            let insn = decode(word);
            let _ = insn.to_string();
            let _ = insn.is_privileged();
            let _ = insn.effective_address(&[0x8000_0000; 32]);
            match insn {
                Insn::Other(w) | Insn::Invalid(w) => {
                    prop_assert_eq!(w, word);
                    prop_assert_eq!(encode(&insn), word);
                }
                _ => {
                    let reserved = insn.reserved_mask();
                    prop_assert_eq!(encode(&insn), word & !reserved);
                    // Reserved bits really are ignored: clearing them decodes the same.
                    prop_assert_eq!(decode(word & !reserved), insn);
                }
            }
        }

        /// Random words under the modeled primary opcodes, where `any::<u32>()` rarely
        /// lands on a modeled extended opcode.
        #[test]
        fn words_under_modeled_opcodes(
            opcd in prop::sample::select(std::vec![17u32, 19, 31, 32, 33, 35, 41, 46, 47]),
            rest in any::<u32>(),
            xo in prop::sample::select(std::vec![
                83u32, 146, 131, 163, 339, 467, 323, 451, 978, 946, 914, 566, 966, 454, 470,
                486, 998, 982, 1014, 598, 854, 23, 55, 790, 918, 50, 51, 38, 150,
            ]),
        ) {
            let word = OPCD.put(opcd) | (rest & !(OPCD.mask() | XO.mask())) | XO.put(xo);
            let insn = decode(word);
            if !matches!(insn, Insn::Other(_) | Insn::Invalid(_)) {
                prop_assert_eq!(encode(&insn), word & !insn.reserved_mask());
                prop_assert_eq!(decode(encode(&insn)), insn);
            }
        }

        #[test]
        fn effective_address_is_ra_or_zero_plus_offset(
            insn in arb_load_store(),
            regs in prop::array::uniform32(any::<u32>()),
        ) {
            let Insn::LoadStore(ls) = insn else { unreachable!("arb_load_store") };
            let base = if ls.ra().number() == 0 { 0 } else { regs[ls.ra().index()] };
            let offset = match ls.addr() {
                AddrMode::D { d } => d as i32 as u32,
                AddrMode::X { rb } => regs[rb.index()],
            };
            prop_assert_eq!(ls.effective_address(&regs), base.wrapping_add(offset));
            prop_assert!((1..=128).contains(&ls.access_len()));
        }
    }

    /// Every primary and extended opcode with Rc clear and set, and with all operand bits
    /// clear and set: no panic, and the round trip holds up to reserved bits.
    #[test]
    fn every_opcode_round_trips() {
        let mut modeled = 0;
        for opcd in 0..64 {
            for xo in 0..1024 {
                for rest in [0, !(OPCD.mask() | XO.mask())] {
                    for rc in [0, 1] {
                        let word = OPCD.put(opcd) | XO.put(xo) | rest | rc;
                        let insn = decode(word);
                        let _ = insn.to_string();
                        if matches!(insn, Insn::Other(_) | Insn::Invalid(_)) {
                            assert_eq!(encode(&insn), word);
                        } else {
                            modeled += 1;
                            assert_eq!(encode(&insn), word & !insn.reserved_mask(), "{word:#010x}");
                        }
                    }
                }
            }
        }
        assert!(modeled > 0);
    }

    #[test]
    fn arb_insn_covers_every_variant() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = arb_insn();
        let mut seen: Vec<&str> = Vec::new();
        for _ in 0..20_000 {
            let insn = strategy.new_tree(&mut runner).expect("strategy").current();
            let m = insn.mnemonic();
            if !seen.contains(&m) {
                seen.push(m);
            }
        }
        // 29 non-load/store mnemonics (tlbsx and tlbsx. count twice) and 51 loads/stores.
        assert_eq!(seen.len(), 29 + 51, "{seen:?}");
    }
}
