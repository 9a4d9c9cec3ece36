//! The PPC440EP Universal Interrupt Controller (UIC0 on bamboo) as a pure model on its DCRs.
//!
//! The VMM forwards a trapped `mfdcr`/`mtdcr` of DCR `UIC_DCR_BASE + offset` to
//! [`Uic::read_dcr`]/[`Uic::write_dcr`], drives device interrupt lines with
//! [`Uic::set_input`], and samples [`Uic::irq_output`] (external input interrupt) and
//! [`Uic::crit_output`] (critical input interrupt) after each of those calls.
//!
//! Line `n` (0..32) is bit `n` in the manual's MSB-0 numbering (`kestrel_ppc440::dcr::uic::line`);
//! [`line_bit`] is the one place that conversion is made. Bamboo wires UART0 to line 0 and
//! UART1 to line 1.
//!
//! # Behaviour (QEMU 7.2 `hw/intc/ppc-uic.c`, with vectors enabled as on bamboo)
//!
//! - SR latches requests. Writing 1s to SR clears them, except that a level-sensitive line
//!   that is still asserted sets its bit again at once. SRS ORs its value into SR.
//! - A level-sensitive line (TR bit 0) sets its SR bit while asserted and clears it when
//!   deasserted. An edge-sensitive line (TR bit 1) sets its SR bit on the transition from
//!   inactive to active and never clears it by itself.
//! - MSR = SR & ER (read-only). The non-critical output is `MSR & !CR != 0`, the critical
//!   output `MSR & CR != 0`.
//! - VR (read-only) is 0 while no enabled critical request is pending. Otherwise it is
//!   `VCR\[VCBA\] + 512 * i`, where `i` is the index from the least significant end of the
//!   lowest set bit of `SR & ER & CR` (so `i = 31 - n` for the highest-numbered pending
//!   critical line `n`). When VCR\[PRO\] = 1, QEMU's search loop runs zero times and VR is
//!   just `VCR\[VCBA\]`; this model does the same. A VCR write keeps every bit but bit 30.
//! - Reads of offsets past VCR return 0 and writes to them, to MSR and to VR are ignored.
//! - Reset (`new`): every register 0, every input undriven.
//!
//! # Where this model departs from QEMU, and why
//!
//! - **Polarity.** QEMU stores PR but never uses it: its inputs are logical requests.
//!   [`Uic::new`] instead takes the raw signal and applies PR as the hardware does: a line
//!   is asserted when its level equals its PR bit (1 = active high / rising edge,
//!   0 = active low / falling edge). Linux programs PR from the device tree
//!   (`uic_set_irq_type`: level high for bamboo's UARTs), so the VMM drives a line with the
//!   device's interrupt level, inverted for an active-low source.
//!   [`Uic::without_polarity`] gives QEMU's convention exactly (PR stored, ignored;
//!   `true` = asserted) for a guest that leaves PR at 0 for active-high sources, which
//!   works on QEMU but not on the hardware.
//! - **Unconnected lines.** A line the VMM has never driven with [`Uic::set_input`] is
//!   inactive whatever PR says, as an unused input tied to its inactive level on a board.
//!   So with PR = 0 after reset nothing is asserted, and a guest that only sets PR for the
//!   lines it uses (Linux, Kestrel's selftest guest) sees QEMU's SR values for the others.
//! - **Configuration writes re-sample level-sensitive lines.** A write to SR, PR or TR sets
//!   the SR bit of every asserted level-sensitive line, and a PR write that deasserts such a
//!   line clears its bit (changing PR or TR can assert a line with no input change, as on
//!   the hardware, which is why Linux clears the line's SR bit after `uic_set_irq_type`).
//!   Edge-sensitive lines latch only on input transitions, never on configuration writes.
//! - **Edges.** QEMU sets an edge line's SR bit on every "raise" call, even when the line is
//!   already high; here only a real inactive-to-active transition latches.
//! - **Switching a line from level to edge** while it is asserted: QEMU keeps treating it
//!   as asserted-level for SR writes until it is lowered; here it is an edge line at once.

/// The first DCR of UIC0 on the PPC440EP, the DCRs a UIC decodes (offsets 0 (SR) to 8
/// (VCR)), its input lines, and the DCR offsets of its registers ([`reg`]): from
/// `kestrel_ppc440::dcr`.
pub use kestrel_ppc440::dcr::uic::{COUNT as UIC_DCR_COUNT, LINES as UIC_LINES};
pub use kestrel_ppc440::dcr::{uic as reg, UIC0_BASE as UIC_DCR_BASE};

/// UIC_VCR fields (from `kestrel_ppc440::dcr`).
pub use kestrel_ppc440::dcr::uic::vcr;

/// The SR/ER/... bit of input line `line` (MSB-0: line 0 is the most significant bit),
/// or 0 when `line` is not a UIC line (32 or more).
pub const fn line_bit(line: u32) -> u32 {
    if line < UIC_LINES {
        kestrel_ppc440::dcr::uic::line(line)
    } else {
        0
    }
}

/// The vector-address step between two lines in UIC_VR.
const VECTOR_STRIDE: u32 = 512;

/// One UIC: its registers and the raw levels last driven on its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uic {
    sr: u32,
    er: u32,
    cr: u32,
    pr: u32,
    tr: u32,
    vcr: u32,
    /// The raw level of each input line (bit per line, MSB-0), before polarity.
    inputs: u32,
    /// The lines [`Uic::set_input`] has driven at least once; the others are unconnected.
    driven: u32,
    /// Whether PR applies to the inputs (false: QEMU's convention, `true` = asserted).
    polarity: bool,
}

impl Default for Uic {
    fn default() -> Self {
        Self::new()
    }
}

impl Uic {
    /// A UIC in its reset state: every register 0, no input driven yet. Inputs are raw
    /// signals and PR gives their active level.
    pub const fn new() -> Self {
        Self {
            sr: 0,
            er: 0,
            cr: 0,
            pr: 0,
            tr: 0,
            vcr: 0,
            inputs: 0,
            driven: 0,
            polarity: true,
        }
    }

    /// Like [`Uic::new`], but with QEMU 7.2's input convention: PR is stored and read back
    /// but not applied, and an input driven `true` is asserted.
    pub const fn without_polarity() -> Self {
        Self {
            polarity: false,
            ..Self::new()
        }
    }

    /// Guest `mfdcr` of `UIC_DCR_BASE + offset`.
    pub fn read_dcr(&mut self, offset: u32) -> u32 {
        match offset {
            reg::SR | reg::SRS => self.sr,
            reg::ER => self.er,
            reg::CR => self.cr,
            reg::PR => self.pr,
            reg::TR => self.tr,
            reg::MSR => self.masked_status(),
            reg::VR => self.vector(),
            reg::VCR => self.vcr,
            _ => 0,
        }
    }

    /// Guest `mtdcr` of `value` to `UIC_DCR_BASE + offset`.
    pub fn write_dcr(&mut self, offset: u32, value: u32) {
        match offset {
            reg::SR => self.sr = (self.sr & !value) | self.asserted_level_lines(),
            reg::SRS => self.sr |= value,
            reg::ER => self.er = value,
            reg::CR => self.cr = value,
            reg::PR => {
                let before = self.asserted();
                self.pr = value;
                self.resample(before);
            }
            reg::TR => {
                let before = self.asserted();
                self.tr = value;
                self.resample(before);
            }
            reg::VCR => self.vcr = value & vcr::WRITABLE,
            // MSR and VR are read-only; offsets past VCR are not decoded.
            _ => {}
        }
    }

    /// Drives input line `line` (0..32) to the raw level `level`; PR decides whether that
    /// level is the active one. Lines 32 and above do not exist and are ignored.
    pub fn set_input(&mut self, line: u32, level: bool) {
        let bit = line_bit(line);
        if bit == 0 {
            return;
        }
        let was_asserted = self.asserted() & bit != 0;
        self.driven |= bit;
        if level {
            self.inputs |= bit;
        } else {
            self.inputs &= !bit;
        }
        let asserted = self.asserted() & bit != 0;
        if self.tr & bit != 0 {
            if asserted && !was_asserted {
                self.sr |= bit;
            }
        } else if asserted {
            self.sr |= bit;
        } else {
            self.sr &= !bit;
        }
    }

    /// Non-critical interrupt output to the CPU: some enabled, non-critical SR bit is set.
    pub fn irq_output(&self) -> bool {
        self.masked_status() & !self.cr != 0
    }

    /// Critical interrupt output to the CPU: some enabled, critical SR bit is set.
    pub fn crit_output(&self) -> bool {
        self.masked_status() & self.cr != 0
    }

    /// UIC_MSR without a DCR access: the enabled requests, SR & ER.
    pub const fn masked_status(&self) -> u32 {
        self.sr & self.er
    }

    /// The raw level last driven on every input (bit per line, MSB-0; 0 if never driven).
    pub const fn inputs(&self) -> u32 {
        self.inputs
    }

    /// The lines that are requesting an interrupt now: driven, and at their active level.
    pub const fn asserted(&self) -> u32 {
        let active = if self.polarity {
            !(self.inputs ^ self.pr)
        } else {
            self.inputs
        };
        active & self.driven
    }

    /// The level-sensitive lines that are asserted now; their SR bits cannot be cleared.
    const fn asserted_level_lines(&self) -> u32 {
        self.asserted() & !self.tr
    }

    /// After a PR or TR write: level-sensitive lines follow their (possibly new) assertion
    /// state; `before` is the assertion state under the old configuration.
    fn resample(&mut self, before: u32) {
        let now = self.asserted();
        let level = !self.tr;
        self.sr |= now & level;
        self.sr &= !(before & !now & level);
    }

    /// UIC_VR as QEMU 7.2 computes it (see the module documentation).
    fn vector(&self) -> u32 {
        let critical = self.masked_status() & self.cr;
        if critical == 0 {
            return 0;
        }
        let base = self.vcr & vcr::VCBA;
        if self.vcr & vcr::PRO != 0 {
            return base;
        }
        base.wrapping_add(critical.trailing_zeros() * VECTOR_STRIDE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msb0_conversion() {
        assert_eq!(line_bit(0), 0x8000_0000);
        assert_eq!(line_bit(31), 0x0000_0001);
        assert_eq!(line_bit(32), 0);
        assert_eq!(line_bit(u32::MAX), 0);
        assert_eq!(vcr::VCBA, 0xFFFF_FFFC);
        assert_eq!(vcr::PRO, 0x0000_0001);
        assert_eq!(vcr::WRITABLE, 0xFFFF_FFFD);
    }

    #[test]
    fn reset_state_is_quiet() {
        let mut uic = Uic::new();
        for offset in 0..UIC_DCR_COUNT + 4 {
            assert_eq!(uic.read_dcr(offset), 0, "offset {offset}");
        }
        assert!(!uic.irq_output());
        assert!(!uic.crit_output());
    }

    #[test]
    fn active_high_level_line_follows_input() {
        let mut uic = Uic::new();
        uic.write_dcr(reg::PR, line_bit(3));
        uic.write_dcr(reg::SR, u32::MAX);
        uic.write_dcr(reg::ER, line_bit(3));
        uic.set_input(3, true);
        assert_eq!(uic.read_dcr(reg::SR) & line_bit(3), line_bit(3));
        assert!(uic.irq_output());
        uic.set_input(3, false);
        assert_eq!(uic.read_dcr(reg::SR) & line_bit(3), 0);
        assert!(!uic.irq_output());
    }

    #[test]
    fn undriven_lines_are_inactive_under_either_polarity() {
        let mut uic = Uic::new();
        uic.write_dcr(reg::TR, 0);
        uic.write_dcr(reg::PR, 0);
        uic.write_dcr(reg::SR, u32::MAX);
        assert_eq!(uic.read_dcr(reg::SR), 0);
        // Driven low with PR = 0: asserted.
        uic.set_input(4, false);
        assert_eq!(uic.read_dcr(reg::SR), line_bit(4));
        assert_eq!(uic.asserted(), line_bit(4));
    }

    #[test]
    fn without_polarity_ignores_pr() {
        let mut uic = Uic::without_polarity();
        uic.write_dcr(reg::ER, line_bit(0));
        uic.set_input(0, false);
        assert!(!uic.irq_output());
        uic.set_input(0, true);
        assert!(uic.irq_output());
        uic.write_dcr(reg::PR, u32::MAX);
        assert_eq!(uic.read_dcr(reg::PR), u32::MAX);
        assert!(uic.irq_output());
        uic.write_dcr(reg::PR, 0);
        uic.write_dcr(reg::SR, u32::MAX);
        assert!(uic.irq_output(), "still asserted: PR does not matter");
        uic.set_input(0, false);
        assert!(!uic.irq_output());
    }

    #[test]
    fn out_of_range_line_is_ignored() {
        let mut uic = Uic::new();
        let before = uic.clone();
        uic.set_input(32, true);
        uic.set_input(u32::MAX, true);
        assert_eq!(uic, before);
    }
}
