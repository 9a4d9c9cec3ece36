//! The BIC (Blue Gene interrupt controller), bgp-interconnect.md 2.1.
//!
//! Groups of 32 lines; hardware IRQ number = `group * 32 + bit`, bit 0 = the MSB of the
//! group's words (`1 << (31 - bit)`, see [`line_mask`]). Kestrel models 15 groups (khvmm,
//! IBM's driver and Pistachio; Kittyhawk's driver uses only 10 of them). In a Kestrel VM the
//! BIC is a cascade on UIC0 input [`UIC0_CASCADE_INPUT`], not the root controller (upstream
//! Linux 6.1 has no BIC driver; the bamboo guest's root is UIC0).

regs! { "BIC_";
    /// Guest-physical base of the BIC (36-bit address).
    BASE: u64 = 0x7_3000_0000;
    /// Size of the BIC window.
    SIZE: u64 = 0x1000;
    /// Number of groups of 32 lines.
    GROUPS: u32 = 15;
    /// Lines per group.
    LINES_PER_GROUP: u32 = 32;
    /// Distance between two groups' register blocks.
    GROUP_STRIDE: u32 = 0x80;
    /// Group register: pending latch (RW; a write replaces it).
    STATUS: u32 = 0x00;
    /// Group register: returns STATUS and clears it (RO).
    RD_CLR_STATUS: u32 = 0x04;
    /// Group register: write-1-to-clear (the ack/EOI).
    STATUS_CLR: u32 = 0x08;
    /// Group register: write-1-to-set (IPIs, soft interrupts).
    STATUS_SET: u32 = 0x0C;
    /// Group register: TARGET[0..3], 4 bits per line, 8 lines per word (RW).
    TARGET: u32 = 0x10;
    /// Number of TARGET words per group.
    TARGET_WORDS: u32 = 4;
    /// Group register: NCRIT[core], pending lines routed non-critical to the core (RO).
    NCRIT: u32 = 0x20;
    /// Group register: CRIT[core], pending critical (RO).
    CRIT: u32 = 0x30;
    /// Group register: MCHK[core], pending machine check (RO).
    MCHK: u32 = 0x40;
    /// Hierarchy: HIER_NCRIT[core], bit g (MSB = group 0) = group g has a non-critical line
    /// pending for that core.
    HIER_NCRIT: u32 = 0x780;
    /// Hierarchy: HIER_CRIT[core].
    HIER_CRIT: u32 = 0x790;
    /// Hierarchy: HIER_MCHK[core].
    HIER_MCHK: u32 = 0x7A0;
    /// Cores of a BG/P node (per-core views exist for 4; a Kestrel VM has core 0 only).
    CORES: u32 = 4;
    /// Target code: line disabled.
    TARGET_DISABLED: u32 = 0x0;
    /// Target code: non-critical to every core.
    TARGET_BCAST_NCRIT: u32 = 0x1;
    /// Target code: critical to every core.
    TARGET_BCAST_CRIT: u32 = 0x2;
    /// Target code: machine check to every core.
    TARGET_BCAST_MCHK: u32 = 0x3;
    /// Target code: non-critical to core c is `TARGET_NCRIT_CORE | c`.
    TARGET_NCRIT_CORE: u32 = 0x4;
    /// Target code: critical to core c is `TARGET_CRIT_CORE | c`.
    TARGET_CRIT_CORE: u32 = 0x8;
    /// Target code: machine check to core c is `TARGET_MCHK_CORE | c`.
    TARGET_MCHK_CORE: u32 = 0xC;
    /// The UIC0 input the VMM cascades the virtual BIC into (free on the VM's board: the
    /// real bamboo uses inputs 30/31 for UIC1, which the VMM does not model).
    UIC0_CASCADE_INPUT: u32 = 30;
}

/// Number of lines in all.
pub const LINES: u32 = GROUPS * LINES_PER_GROUP;

/// Offset of group `g`'s register `reg` (one of the group registers above).
pub const fn group_reg(g: u32, reg: u32) -> u32 {
    g * GROUP_STRIDE + reg
}

/// The mask of line `irq` within its group's words (bit 0 = MSB).
pub const fn line_mask(irq: u32) -> u32 {
    0x8000_0000 >> (irq % LINES_PER_GROUP)
}

/// Which TARGET word of its group holds line `irq`, and the shift of its nibble there.
pub const fn target_slot(irq: u32) -> (u32, u32) {
    let i = irq % LINES_PER_GROUP;
    (i / 8, (7 - i % 8) * 4)
}
