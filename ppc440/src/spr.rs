//! Special purpose registers: every SPR number of the PPC440, each with the class of
//! emulation it gets when a Kestrel guest accesses it ([`Emulation`]).
//!
//! Numbers are from the PPC440 core user's manual, "Register Summary" (Table 10-2, "Special
//! Purpose Registers Sorted by Name") and Book E. The constants are plain `u32` so that
//! they can be `const` operands of `mfspr`/`mtspr` in inline assembly. The table
//! [`TABLE`] is the only place that says how a Kestrel VM handles an SPR: the kernel's
//! fast tiers, its full emulator and the VMM all ask [`emulation`].
//!
//! An SPR is privileged (user-mode access traps) when bit 5 of its 10-bit number is set
//! (Book E "Special Purpose Registers"); [`is_privileged`] computes that from the number.

/// How a Kestrel VM handles a guest's `mfspr`/`mtspr` of an SPR.
///
/// The guest kernel runs in user mode, so every privileged SPR access traps into the
/// kernel; this is where it goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emulation {
    /// Not privileged: user-mode accesses do not trap. The register is live in hardware
    /// while the guest runs (saved with the thread's frame, or the read port of a
    /// write-through register).
    User,
    /// A plain copy to or from the vCPU's shadow state, handled by the kernel's fastest
    /// (assembly) tier: SRR0/1, SPRG0-3, ESR, DEAR.
    Fast,
    /// A plain copy to or from the shadow state, with no side effect (CSRR0/1, MCSRR0/1,
    /// MMUCR): less frequent than `Fast`, handled by the same tiers (the kernel's assembly
    /// tier covers both classes since issue 11).
    Shadow,
    /// Shadowed and also written to the real register, because the guest reads it
    /// without trapping (SPRG4-7 through their user read ports, USPRG0); the kernel loads
    /// the vCPU's values when it switches to it.
    WriteThrough,
    /// Shadowed, with side effects or masking that the kernel's full emulator applies:
    /// timers, PID (shadow-TLB switch), DBCR0 (reset request, debug events), IVPR/IVORs
    /// (low bits masked), write-1-to-clear status registers, read-only identification.
    Kernel,
    /// The time base: reads do not trap; writes set the real time base and keep the
    /// difference as the vCPU's offset.
    Timebase,
    /// Not emulated by the kernel: the access becomes a virtualization fault to the VMM.
    Vmm,
}

/// One SPR: number, name and emulation class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    pub number: u32,
    pub name: &'static str,
    pub emulation: Emulation,
}

/// Declares every SPR once: a `pub const` per register and its row in [`TABLE`].
macro_rules! sprs {
    ($($(#[$doc:meta])* $name:ident = $num:literal, $class:ident;)*) => {
        $($(#[$doc])* pub const $name: u32 = $num;)*
        /// Every named SPR, in number order.
        pub const TABLE: &[Info] = &[
            $(Info { number: $name, name: stringify!($name), emulation: Emulation::$class },)*
        ];
    };
}

sprs! {
    /// Fixed-point exception register (user).
    XER = 1, User;
    /// Link register (user).
    LR = 8, User;
    /// Count register (user).
    CTR = 9, User;
    /// Decrementer.
    DEC = 22, Kernel;
    /// Save/restore register 0: return address of non-critical interrupts.
    SRR0 = 26, Fast;
    /// Save/restore register 1: MSR of non-critical interrupts.
    SRR1 = 27, Fast;
    /// Process ID, matched against TLB entry TIDs.
    PID = 48, Kernel;
    /// Decrementer auto-reload (write-only).
    DECAR = 54, Kernel;
    /// Critical save/restore register 0.
    CSRR0 = 58, Shadow;
    /// Critical save/restore register 1.
    CSRR1 = 59, Shadow;
    /// Data exception address register.
    DEAR = 61, Fast;
    /// Exception syndrome register.
    ESR = 62, Fast;
    /// Interrupt vector prefix register.
    IVPR = 63, Kernel;
    /// User SPR general 0 (user read/write).
    USPRG0 = 256, WriteThrough;
    /// SPRG4, user read port.
    SPRG4R = 260, User;
    /// SPRG5, user read port.
    SPRG5R = 261, User;
    /// SPRG6, user read port.
    SPRG6R = 262, User;
    /// SPRG7, user read port.
    SPRG7R = 263, User;
    /// Time base lower, read port (user).
    TBL_R = 268, Timebase;
    /// Time base upper, read port (user).
    TBU_R = 269, Timebase;
    /// SPR general 0.
    SPRG0 = 272, Fast;
    /// SPR general 1.
    SPRG1 = 273, Fast;
    /// SPR general 2.
    SPRG2 = 274, Fast;
    /// SPR general 3.
    SPRG3 = 275, Fast;
    /// SPRG4, supervisor (write) port.
    SPRG4 = 276, WriteThrough;
    /// SPRG5, supervisor port.
    SPRG5 = 277, WriteThrough;
    /// SPRG6, supervisor port.
    SPRG6 = 278, WriteThrough;
    /// SPRG7, supervisor port.
    SPRG7 = 279, WriteThrough;
    /// Time base lower, write port.
    TBL_W = 284, Timebase;
    /// Time base upper, write port.
    TBU_W = 285, Timebase;
    /// Processor identification register (read-only; a uniprocessor guest is CPU 0).
    PIR = 286, Kernel;
    /// Processor version register (read-only); `mfpvr` is `mfspr rT,287`.
    PVR = 287, Kernel;
    /// Debug status register (write 1 to clear).
    DBSR = 304, Kernel;
    /// Debug control register 0 (`DBCR0[RST]` resets the core).
    DBCR0 = 308, Kernel;
    /// Debug control register 1.
    DBCR1 = 309, Kernel;
    /// Debug control register 2.
    DBCR2 = 310, Kernel;
    /// Instruction address compare 1.
    IAC1 = 312, Kernel;
    /// Instruction address compare 2.
    IAC2 = 313, Kernel;
    /// Instruction address compare 3.
    IAC3 = 314, Kernel;
    /// Instruction address compare 4.
    IAC4 = 315, Kernel;
    /// Data address compare 1.
    DAC1 = 316, Kernel;
    /// Data address compare 2.
    DAC2 = 317, Kernel;
    /// Data value compare 1.
    DVC1 = 318, Kernel;
    /// Data value compare 2.
    DVC2 = 319, Kernel;
    /// Timer status register (write 1 to clear).
    TSR = 336, Kernel;
    /// Timer control register.
    TCR = 340, Kernel;
    /// Interrupt vector offset 0: critical input.
    IVOR0 = 400, Kernel;
    /// Interrupt vector offset 1: machine check.
    IVOR1 = 401, Kernel;
    /// Interrupt vector offset 2: data storage.
    IVOR2 = 402, Kernel;
    /// Interrupt vector offset 3: instruction storage.
    IVOR3 = 403, Kernel;
    /// Interrupt vector offset 4: external input.
    IVOR4 = 404, Kernel;
    /// Interrupt vector offset 5: alignment.
    IVOR5 = 405, Kernel;
    /// Interrupt vector offset 6: program.
    IVOR6 = 406, Kernel;
    /// Interrupt vector offset 7: floating-point unavailable.
    IVOR7 = 407, Kernel;
    /// Interrupt vector offset 8: system call.
    IVOR8 = 408, Kernel;
    /// Interrupt vector offset 9: auxiliary processor unavailable.
    IVOR9 = 409, Kernel;
    /// Interrupt vector offset 10: decrementer.
    IVOR10 = 410, Kernel;
    /// Interrupt vector offset 11: fixed-interval timer.
    IVOR11 = 411, Kernel;
    /// Interrupt vector offset 12: watchdog timer.
    IVOR12 = 412, Kernel;
    /// Interrupt vector offset 13: data TLB error.
    IVOR13 = 413, Kernel;
    /// Interrupt vector offset 14: instruction TLB error.
    IVOR14 = 414, Kernel;
    /// Interrupt vector offset 15: debug.
    IVOR15 = 415, Kernel;
    /// Machine-check save/restore register 0.
    MCSRR0 = 570, Shadow;
    /// Machine-check save/restore register 1.
    MCSRR1 = 571, Shadow;
    /// Machine-check status register (write 1 to clear).
    MCSR = 572, Kernel;
    /// Instruction cache normal victim 0.
    INV0 = 880, Vmm;
    /// Instruction cache normal victim 1.
    INV1 = 881, Vmm;
    /// Instruction cache normal victim 2.
    INV2 = 882, Vmm;
    /// Instruction cache normal victim 3.
    INV3 = 883, Vmm;
    /// Instruction cache transient victim 0.
    ITV0 = 884, Vmm;
    /// Instruction cache transient victim 1.
    ITV1 = 885, Vmm;
    /// Instruction cache transient victim 2.
    ITV2 = 886, Vmm;
    /// Instruction cache transient victim 3.
    ITV3 = 887, Vmm;
    /// Core configuration register 1.
    CCR1 = 888, Kernel;
    /// Data cache normal victim 0.
    DNV0 = 912, Vmm;
    /// Data cache normal victim 1.
    DNV1 = 913, Vmm;
    /// Data cache normal victim 2.
    DNV2 = 914, Vmm;
    /// Data cache normal victim 3.
    DNV3 = 915, Vmm;
    /// Data cache transient victim 0.
    DTV0 = 916, Vmm;
    /// Data cache transient victim 1.
    DTV1 = 917, Vmm;
    /// Data cache transient victim 2.
    DTV2 = 918, Vmm;
    /// Data cache transient victim 3.
    DTV3 = 919, Vmm;
    /// Data cache victim limit.
    DVLIM = 920, Vmm;
    /// Instruction cache victim limit.
    IVLIM = 921, Vmm;
    /// Reset configuration (read-only).
    RSTCFG = 923, Vmm;
    /// Data cache debug tag register low (read-only).
    DCDBTRL = 924, Vmm;
    /// Data cache debug tag register high (read-only).
    DCDBTRH = 925, Vmm;
    /// Instruction cache debug tag register low (read-only).
    ICDBTRL = 926, Vmm;
    /// Instruction cache debug tag register high (read-only).
    ICDBTRH = 927, Vmm;
    /// Memory management control register (STID/STS for tlbsx, tlbre/tlbwe TID).
    MMUCR = 946, Shadow;
    /// Core configuration register 0.
    CCR0 = 947, Kernel;
    /// Instruction cache debug data register (read-only).
    ICDBDR = 979, Vmm;
    /// Debug data register.
    DBDR = 1011, Vmm;
}

/// SPR numbers are 10 bits wide.
pub const COUNT: u32 = 1024;

/// `IVORn` for `n` in 0-15: the interrupt vector offsets are consecutive from [`IVOR0`]
/// (index them with the [`ivor`](crate::ivor) vector numbers).
pub const fn ivor(n: u32) -> Option<u32> {
    if n < crate::ivor::COUNT {
        Some(IVOR0 + n)
    } else {
        None
    }
}

/// `SPRGn` (supervisor port) for `n` in 0-7: consecutive from [`SPRG0`].
pub const fn sprg(n: u32) -> Option<u32> {
    if n < 8 {
        Some(SPRG0 + n)
    } else {
        None
    }
}

/// Whether user mode (`MSR[PR]` = 1) traps on `mfspr`/`mtspr` of SPR `n`: Book E makes
/// SPRs with bit 5 of the 10-bit number set (MSB-0, value 0x10) privileged.
pub const fn is_privileged(n: u32) -> bool {
    n & (1 << (9 - 5)) != 0
}

/// The emulation class of every SPR number, by number (unnamed numbers go to the VMM).
/// A table so that the kernel's lookup is one load.
const CLASS: [Emulation; COUNT as usize] = {
    let mut t = [Emulation::Vmm; COUNT as usize];
    let mut i = 0;
    while i < TABLE.len() {
        t[TABLE[i].number as usize] = TABLE[i].emulation;
        i += 1;
    }
    t
};

/// How a Kestrel VM handles SPR `n` (numbers of 1024 and above, which no instruction
/// can encode, and unnamed numbers: [`Emulation::Vmm`]).
pub const fn emulation(n: u32) -> Emulation {
    if n < COUNT {
        CLASS[n as usize]
    } else {
        Emulation::Vmm
    }
}

/// The row of SPR `n`, if the 440 names it.
pub const fn info(n: u32) -> Option<&'static Info> {
    let mut i = 0;
    while i < TABLE.len() {
        if TABLE[i].number == n {
            return Some(&TABLE[i]);
        }
        i += 1;
    }
    None
}

/// The name of SPR `n`, if the 440 names it (for logs and traces).
pub const fn name(n: u32) -> Option<&'static str> {
    match info(n) {
        Some(i) => Some(i.name),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_sorted() {
        for w in TABLE.windows(2) {
            assert!(
                w[0].number < w[1].number,
                "{} before {}",
                w[0].name,
                w[1].name
            );
        }
        for (i, a) in TABLE.iter().enumerate() {
            assert!(a.number < COUNT);
            for b in &TABLE[i + 1..] {
                assert_ne!(a.name, b.name);
            }
        }
        assert_eq!(name(SRR0), Some("SRR0"));
        assert_eq!(name(1000), None);
        assert_eq!(ivor(15), Some(IVOR15));
        assert_eq!(ivor(16), None);
        assert_eq!(sprg(7), Some(SPRG7));
        assert_eq!(sprg(8), None);
    }

    #[test]
    fn privilege_follows_bit_5() {
        for s in TABLE {
            let user_accessible = matches!(s.number, 1 | 8 | 9 | 256 | 260..=263 | 268 | 269);
            assert_eq!(is_privileged(s.number), !user_accessible, "{}", s.name);
        }
    }

    #[test]
    fn classes_agree_with_privilege() {
        for s in TABLE {
            match s.emulation {
                // Never trap: must not be privileged.
                Emulation::User => assert!(!is_privileged(s.number), "{}", s.name),
                // Emulated on a trap: must be privileged, or the trap never comes.
                Emulation::Fast | Emulation::Shadow | Emulation::Kernel | Emulation::Vmm => {
                    assert!(is_privileged(s.number), "{}", s.name)
                }
                Emulation::WriteThrough | Emulation::Timebase => {}
            }
        }
        // The write-through SPRGs are the ones with user read ports.
        for n in 4..8 {
            assert_eq!(emulation(SPRG0 + n), Emulation::WriteThrough);
            assert_eq!(emulation(SPRG4R + n - 4), Emulation::User);
        }
        assert_eq!(emulation(USPRG0), Emulation::WriteThrough);
        assert_eq!(emulation(2000), Emulation::Vmm);
        assert_eq!(emulation(1000), Emulation::Vmm);
    }

    #[test]
    fn the_fast_tier_set() {
        let fast: std::vec::Vec<u32> = TABLE
            .iter()
            .filter(|s| s.emulation == Emulation::Fast)
            .map(|s| s.number)
            .collect();
        assert_eq!(fast, [SRR0, SRR1, DEAR, ESR, SPRG0, SPRG1, SPRG2, SPRG3]);
        let shadow: std::vec::Vec<u32> = TABLE
            .iter()
            .filter(|s| s.emulation == Emulation::Shadow)
            .map(|s| s.number)
            .collect();
        assert_eq!(shadow, [CSRR0, CSRR1, MCSRR0, MCSRR1, MMUCR]);
    }
}
