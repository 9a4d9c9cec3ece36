//! The Blue Gene/P interrupt controller (BIC) as a guest sees it in a Kestrel VM: a pure
//! model of its 4 KiB register window (bgp-interconnect.md 2.1; every number from
//! `kestrel_bgp::bic`).
//!
//! The VMM forwards a trapped load or store in the BIC window to [`Bic`]'s
//! [`MmioDevice`] methods, drives device interrupt lines with [`Bic::set_line`] (or all of
//! them at once with [`Bic::set_lines`], the fabric's `irq_lines` word layout), and samples
//! [`Bic::ncrit_output`] for core 0 afterwards: in a VM that output is wired to UIC0 input
//! [`UIC0_CASCADE_INPUT`] (level, active high). [`BicCascade`] does that sampling after
//! every call.
//!
//! # Registers (group `g` at `g * GROUP_STRIDE`, 15 groups of 32 lines)
//!
//! - `STATUS` (RW): the pending latch. A write replaces it.
//! - `RD_CLR_STATUS` (RO): returns STATUS and clears it.
//! - `STATUS_CLR` (WO): write 1s to clear (Linux's ack). `STATUS_SET` (WO): write 1s to set.
//! - `TARGET[0..4]` (RW): a 4-bit target code per line, line `i` of the group in word `i/8`
//!   at shift `(7 - i%8) * 4` (`kestrel_bgp::bic::target_slot`).
//! - `NCRIT/CRIT/MCHK[core]` (RO, computed): STATUS bits whose target sends them to that
//!   core as that class, directly (`4|c`, `8|c`, `0xC|c`) or by broadcast (`1`, `2`, `3`).
//! - `HIER_NCRIT/CRIT/MCHK[core]` (RO, computed): bit `g` (MSB = group 0) is set when group
//!   `g` has a line of that class pending for that core.
//!
//! Line `irq` is bit `31 - irq % 32` of group `irq / 32`'s words (bit 0 = MSB,
//! `kestrel_bgp::bic::line_mask`).
//!
//! # Levels
//!
//! Device lines are level-sensitive. An asserted line sets its STATUS bit. Every operation
//! that clears STATUS bits (a STATUS write, an `RD_CLR_STATUS` read, a `STATUS_CLR` write)
//! re-evaluates the levels afterwards: a line whose source is still asserted is latched
//! again at once, as khvmm's vBIC does by calling back into its device models. So the
//! invariant "asserted lines are pending" holds after every call.
//!
//! **Deviation from khvmm:** a line that drops clears its STATUS bit (as a level-sensitive
//! UIC input does), where khvmm keeps the bit latched until the guest clears it. Linux's
//! `handle_level_irq` acks before the device handler runs; with a pure latch the ack
//! re-latches the still-asserted line and the guest takes a second, spurious interrupt
//! (one more VMM exit per event) after the handler has silenced the device. Soft
//! interrupts (`STATUS_SET`) on lines no device drives are latched until cleared.
//!
//! # Accesses
//!
//! Only aligned 32-bit loads and stores are decoded (Linux uses `in_be32`/`out_be32`);
//! other widths and unaligned offsets are [`Unanswered`]. Inside the window, stores to
//! read-only registers and to the padding are ignored and loads of the padding read 0.
//! Nothing a guest writes or reads can make the model panic.

use crate::bus::{IrqLine, MmioDevice, Unanswered};
pub use kestrel_bgp::bic::{
    group_reg, line_mask, target_slot, CORES, CRIT, GROUPS, GROUP_STRIDE, HIER_CRIT, HIER_MCHK,
    HIER_NCRIT, LINES, LINES_PER_GROUP, MCHK, NCRIT, RD_CLR_STATUS, SIZE, STATUS, STATUS_CLR,
    STATUS_SET, TARGET, TARGET_BCAST_CRIT, TARGET_BCAST_MCHK, TARGET_BCAST_NCRIT, TARGET_CRIT_CORE,
    TARGET_DISABLED, TARGET_MCHK_CORE, TARGET_NCRIT_CORE, TARGET_WORDS, UIC0_CASCADE_INPUT,
};

const NGROUPS: usize = GROUPS as usize;
const NTARGET: usize = TARGET_WORDS as usize;

/// The three interrupt classes a target code can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    NonCritical,
    Critical,
    MachineCheck,
}

impl Class {
    /// The broadcast code and the per-core code base of this class.
    const fn codes(self) -> (u32, u32) {
        match self {
            Class::NonCritical => (TARGET_BCAST_NCRIT, TARGET_NCRIT_CORE),
            Class::Critical => (TARGET_BCAST_CRIT, TARGET_CRIT_CORE),
            Class::MachineCheck => (TARGET_BCAST_MCHK, TARGET_MCHK_CORE),
        }
    }
}

/// One BIC: the pending latches, the target codes, and the levels of the device lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bic {
    status: [u32; NGROUPS],
    target: [[u32; NTARGET]; NGROUPS],
    /// The asserted device lines (same layout as STATUS).
    levels: [u32; NGROUPS],
}

impl Default for Bic {
    fn default() -> Self {
        Self::new()
    }
}

impl Bic {
    /// Reset state: nothing pending, every line disabled (target 0), no line asserted.
    pub const fn new() -> Self {
        Self {
            status: [0; NGROUPS],
            target: [[0; NTARGET]; NGROUPS],
            levels: [0; NGROUPS],
        }
    }

    /// Guest load of the 32-bit register at `offset` (any offset; unknown ones read 0).
    /// `RD_CLR_STATUS` has its side effect here.
    pub fn read(&mut self, offset: u32) -> u32 {
        if let Some((g, reg)) = Self::group_of(offset) {
            return match reg {
                STATUS => self.status[g],
                RD_CLR_STATUS => {
                    let v = self.status[g];
                    self.status[g] = self.levels[g];
                    v
                }
                r if (TARGET..TARGET + 4 * TARGET_WORDS).contains(&r) => {
                    self.target[g][((r - TARGET) / 4) as usize]
                }
                r if (NCRIT..NCRIT + 4 * CORES).contains(&r) => {
                    self.pending(g, (r - NCRIT) / 4, Class::NonCritical)
                }
                r if (CRIT..CRIT + 4 * CORES).contains(&r) => {
                    self.pending(g, (r - CRIT) / 4, Class::Critical)
                }
                r if (MCHK..MCHK + 4 * CORES).contains(&r) => {
                    self.pending(g, (r - MCHK) / 4, Class::MachineCheck)
                }
                _ => 0,
            };
        }
        for (base, class) in [
            (HIER_NCRIT, Class::NonCritical),
            (HIER_CRIT, Class::Critical),
            (HIER_MCHK, Class::MachineCheck),
        ] {
            if (base..base + 4 * CORES).contains(&offset) && offset.is_multiple_of(4) {
                return self.hierarchy((offset - base) / 4, class);
            }
        }
        0
    }

    /// Guest store of `value` to the 32-bit register at `offset` (read-only and unknown
    /// offsets ignore it).
    pub fn write(&mut self, offset: u32, value: u32) {
        let Some((g, reg)) = Self::group_of(offset) else {
            return;
        };
        match reg {
            STATUS => self.status[g] = value | self.levels[g],
            STATUS_CLR => self.status[g] = (self.status[g] & !value) | self.levels[g],
            STATUS_SET => self.status[g] |= value,
            r if (TARGET..TARGET + 4 * TARGET_WORDS).contains(&r) => {
                self.target[g][((r - TARGET) / 4) as usize] = value
            }
            _ => {}
        }
    }

    /// Drives device line `irq` (0..480) to `asserted`; other numbers are ignored. An
    /// asserted line sets its STATUS bit; a line that drops (was asserted, is no longer)
    /// clears it.
    pub fn set_line(&mut self, irq: u32, asserted: bool) {
        if irq >= LINES {
            return;
        }
        let g = (irq / LINES_PER_GROUP) as usize;
        let m = line_mask(irq);
        let mut levels = self.levels[g] & !m;
        if asserted {
            levels |= m;
        }
        self.drive(g, levels);
    }

    /// Drives every device line at once: bit `31 - i` of `levels[g]` is line `g * 32 + i`
    /// (the layout of STATUS and of the fabric's `irq_lines`).
    pub fn set_lines(&mut self, levels: &[u32; NGROUPS]) {
        for (g, l) in levels.iter().enumerate() {
            self.drive(g, *l);
        }
    }

    /// Group `g`'s lines go to `levels`: falling lines clear, asserted lines set STATUS.
    fn drive(&mut self, g: usize, levels: u32) {
        let falling = self.levels[g] & !levels;
        self.levels[g] = levels;
        self.status[g] = (self.status[g] & !falling) | levels;
    }

    /// The asserted device lines of group `g` (0 for a group that does not exist).
    pub fn levels(&self, g: usize) -> u32 {
        self.levels.get(g).copied().unwrap_or(0)
    }

    /// STATUS of group `g` without side effects (0 for a group that does not exist).
    pub fn status(&self, g: usize) -> u32 {
        self.status.get(g).copied().unwrap_or(0)
    }

    /// The target code of line `irq` (0 for a line that does not exist).
    pub fn target_of(&self, irq: u32) -> u32 {
        if irq >= LINES {
            return 0;
        }
        let (word, shift) = target_slot(irq);
        (self.target[(irq / LINES_PER_GROUP) as usize][word as usize] >> shift) & 0xF
    }

    /// Whether line `irq` is delivered to `core` as `class` by its target code.
    pub fn routes(&self, irq: u32, core: u32, class: Class) -> bool {
        let code = self.target_of(irq);
        let (bcast, direct) = class.codes();
        code == bcast || (core < CORES && code == direct | core)
    }

    /// The NCRIT/CRIT/MCHK view of group `g` for `core`: pending lines routed there as
    /// `class` (0 for a group or core that does not exist).
    pub fn pending(&self, g: usize, core: u32, class: Class) -> u32 {
        if g >= NGROUPS || core >= CORES {
            return 0;
        }
        let (bcast, direct) = class.codes();
        let direct = direct | core;
        let mut out = 0;
        let mut bits = self.status[g];
        while bits != 0 {
            let i = bits.leading_zeros();
            let m = 0x8000_0000 >> i;
            bits &= !m;
            let (word, shift) = target_slot(i);
            let code = (self.target[g][word as usize] >> shift) & 0xF;
            if code == bcast || code == direct {
                out |= m;
            }
        }
        out
    }

    /// HIER_NCRIT/CRIT/MCHK for `core`: bit `g` (MSB = group 0) set when group `g` has a
    /// line of `class` pending for the core.
    pub fn hierarchy(&self, core: u32, class: Class) -> u32 {
        (0..NGROUPS)
            .filter(|&g| self.pending(g, core, class) != 0)
            .fold(0, |acc, g| acc | (0x8000_0000 >> g))
    }

    /// The non-critical interrupt output towards `core` (in a VM, core 0's goes to UIC0
    /// input [`UIC0_CASCADE_INPUT`]).
    pub fn ncrit_output(&self, core: u32) -> bool {
        self.hierarchy(core, Class::NonCritical) != 0
    }

    /// The critical interrupt output towards `core`.
    pub fn crit_output(&self, core: u32) -> bool {
        self.hierarchy(core, Class::Critical) != 0
    }

    /// The machine-check output towards `core`.
    pub fn mchk_output(&self, core: u32) -> bool {
        self.hierarchy(core, Class::MachineCheck) != 0
    }

    /// `(group, register offset within the group)` of an aligned offset in a group block.
    fn group_of(offset: u32) -> Option<(usize, u32)> {
        if !offset.is_multiple_of(4) || offset >= GROUPS * GROUP_STRIDE {
            return None;
        }
        Some(((offset / GROUP_STRIDE) as usize, offset % GROUP_STRIDE))
    }

    /// Decodes an MMIO access: a 32-bit, aligned access inside the window.
    fn decode(offset: u64, len: usize) -> Result<u32, Unanswered> {
        if len != 4 || !offset.is_multiple_of(4) || offset >= SIZE {
            return Err(Unanswered);
        }
        Ok(offset as u32)
    }
}

impl MmioDevice for Bic {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let off = Self::decode(offset, data.len())?;
        data.copy_from_slice(&self.read(off).to_be_bytes());
        Ok(())
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let off = Self::decode(offset, data.len())?;
        let mut w = [0u8; 4];
        w.copy_from_slice(data);
        self.write(off, u32::from_be_bytes(w));
        Ok(())
    }
}

/// A BIC cascaded into a parent controller: core 0's non-critical output drives `line`
/// (UIC0 input [`UIC0_CASCADE_INPUT`] in a VM) after every access and line change.
pub struct BicCascade<L: IrqLine> {
    pub bic: Bic,
    pub line: L,
}

impl<L: IrqLine> BicCascade<L> {
    pub fn new(line: L) -> Self {
        Self {
            bic: Bic::new(),
            line,
        }
    }

    /// [`Bic::set_line`], then the output.
    pub fn set_line(&mut self, irq: u32, asserted: bool) {
        self.bic.set_line(irq, asserted);
        self.update();
    }

    /// [`Bic::set_lines`], then the output.
    pub fn set_lines(&mut self, levels: &[u32; NGROUPS]) {
        self.bic.set_lines(levels);
        self.update();
    }

    /// Drives the parent line with core 0's non-critical output.
    pub fn update(&self) {
        self.line.set_level(self.bic.ncrit_output(0));
    }
}

impl<L: IrqLine> MmioDevice for BicCascade<L> {
    fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
        let r = self.bic.mmio_read(offset, data);
        self.update();
        r
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
        let r = self.bic.mmio_write(offset, data);
        self.update();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_facts() {
        assert_eq!(group_reg(14, MCHK + 12), 0x74C);
        assert!(group_reg(14, GROUP_STRIDE) <= HIER_NCRIT);
        assert_eq!(LINES, 480);
    }

    #[test]
    fn reset_is_quiet_and_padding_reads_zero() {
        let mut b = Bic::new();
        for off in (0..SIZE as u32).step_by(4) {
            assert_eq!(b.read(off), 0, "offset {off:#x}");
        }
        assert!(!b.ncrit_output(0) && !b.crit_output(0) && !b.mchk_output(0));
    }

    #[test]
    fn widths_and_alignment() {
        let mut b = Bic::new();
        let mut w = [0u8; 4];
        assert_eq!(b.mmio_read(0, &mut w), Ok(()));
        assert_eq!(b.mmio_read(2, &mut w), Err(Unanswered));
        assert_eq!(b.mmio_read(SIZE, &mut w), Err(Unanswered));
        assert_eq!(b.mmio_read(u64::MAX - 3, &mut w), Err(Unanswered));
        assert_eq!(b.mmio_write(0, &[0; 8]), Err(Unanswered));
        assert_eq!(b.mmio_write(0, &[1]), Err(Unanswered));
    }

    #[test]
    fn out_of_range_lines_are_ignored() {
        let mut b = Bic::new();
        b.set_line(LINES, true);
        b.set_line(u32::MAX, true);
        assert_eq!(b, Bic::new());
        assert_eq!(b.target_of(u32::MAX), 0);
        assert_eq!(b.pending(99, 0, Class::Critical), 0);
        assert_eq!(b.pending(0, 9, Class::Critical), 0);
    }
}
