//! The guest's special purpose registers: where each one lives in [`VcpuState`] (stated
//! once, in [`spr_map!`]'s table), and what `mfspr`/`mtspr` of it do.
//!
//! The table serves every tier of the kernel: the full emulator ([`mfspr`], [`mtspr`]), the
//! Rust fast tier ([`plain_mut`]: the SPRs whose accesses are plain copies) and the assembly
//! tier, which addresses fields by [`offset`] (`const`, fed to `global_asm!` as operands).
//! Which SPRs the kernel emulates at all, and how, is `kestrel_ppc440::spr`'s table
//! ([`Emulation`]); the checks at the end of this file keep the two tables in step.
//!
//! `mtspr` returns its effect on the machine ([`SprEffect`]: a guest PID switch, a
//! write-through register, the real DBCR0, a decrementer deadline, a time-base jump) or
//! why the kernel cannot complete it ([`SprExit`]: the VMM's SPR, a reset request); the
//! kernel applies the effect to the hardware.

use crate::ppc440::spr::{
    emulation, Emulation, CCR0, CCR1, CSRR0, CSRR1, DAC1, DAC2, DBCR0, DBCR1, DBCR2, DBSR, DEAR,
    DEC, DECAR, DVC1, DVC2, ESR, IAC1, IAC4, IVOR0, IVOR15, IVPR, MCSR, MCSRR0, MCSRR1, MMUCR, PID,
    PIR, PVR, SPRG0, SPRG3, SPRG4, SPRG7, SRR0, SRR1, TBL_R, TBL_W, TBU_R, TBU_W, TCR, TSR, USPRG0,
};
use crate::ppc440::{dbcr0, ivor};
use crate::timer;
use core::mem::offset_of;
use kestrel_abi::VcpuState;

/// The debug events the kernel passes through to hardware for a guest: DBCR0[IDM] and
/// DBCR0[ICMP] (instruction-completion single step).
pub const DBCR0_EVENTS: u32 = dbcr0::IDM | dbcr0::ICMP;

/// What a guest `mtspr` does to the register's shadow field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A plain copy.
    Copy,
    /// Write-1-to-clear (status registers: MCSR, TSR, DBSR).
    Clear,
    /// Only the bits of the mask are kept (IVPR, IVORs).
    Mask(u32),
    /// A plain copy that the real register must follow, because the guest reads it without
    /// trapping (SPRG4-7 through their user read ports, USPRG0): [`SprEffect::WriteThrough`].
    WriteThrough,
    /// PID: the low 8 bits; a change switches the guest's address space
    /// ([`SprEffect::PidSwitch`]).
    Pid,
    /// DEC: the value, and a deadline on the guest's time base ([`SprEffect::DecDeadline`]).
    Dec,
    /// DBCR0: a reset request goes to the VMM ([`SprExit::Reset`]); otherwise the value, and
    /// the debug events the kernel passes through ([`SprEffect::Dbcr0`]).
    Dbcr0,
}

/// Declares the SPR → [`VcpuState`] field map once: single SPRs (`NAME => field`) and runs
/// of consecutive SPR numbers stored in consecutive array elements (`FIRST ..= LAST =>
/// array[first element]`), each with its write [`Rule`]. Generates [`field`],
/// [`field_mut`], [`rule`] and [`offset`] from the same rows.
macro_rules! spr_map {
    ($($first:ident $(..= $last:ident)? => $field:ident $([$base:literal])?, $rule:expr;)*) => {
        /// The shadow field of SPR `n`, if the table has one.
        #[inline(always)]
        pub fn field(s: &VcpuState, n: u32) -> Option<&u32> {
            match n {
                $($first $(..= $last)? => Some(&s.$field $([$base + (n - $first) as usize])?),)*
                _ => None,
            }
        }

        /// The shadow field of SPR `n` to write, if the table has one.
        #[inline(always)]
        pub fn field_mut(s: &mut VcpuState, n: u32) -> Option<&mut u32> {
            match n {
                $($first $(..= $last)? => Some(&mut s.$field $([$base + (n - $first) as usize])?),)*
                _ => None,
            }
        }

        /// The write rule of SPR `n`, if the table has a field for it.
        #[inline(always)]
        pub const fn rule(n: u32) -> Option<Rule> {
            match n {
                $($first $(..= $last)? => Some($rule),)*
                _ => None,
            }
        }

        /// Byte offset in [`VcpuState`] of SPR `n`'s shadow field, if the table has one:
        /// what the assembly tier addresses.
        pub const fn offset(n: u32) -> Option<usize> {
            match n {
                $($first $(..= $last)? => Some(
                    offset_of!(VcpuState, $field) $(+ 4 * ($base + (n - $first) as usize))?
                ),)*
                _ => None,
            }
        }
    };
}

spr_map! {
    SRR0 => srr0, Rule::Copy;
    SRR1 => srr1, Rule::Copy;
    CSRR0 => csrr0, Rule::Copy;
    CSRR1 => csrr1, Rule::Copy;
    MCSRR0 => mcsrr0, Rule::Copy;
    MCSRR1 => mcsrr1, Rule::Copy;
    MCSR => mcsr, Rule::Clear;
    SPRG0 ..= SPRG3 => sprg[0], Rule::Copy;
    SPRG4 ..= SPRG7 => sprg[4], Rule::WriteThrough;
    USPRG0 => usprg0, Rule::WriteThrough;
    ESR => esr, Rule::Copy;
    DEAR => dear, Rule::Copy;
    IVPR => ivpr, Rule::Mask(ivor::PREFIX.mask());
    IVOR0 ..= IVOR15 => ivor[0], Rule::Mask(ivor::OFFSET.mask());
    PID => pid, Rule::Pid;
    MMUCR => mmucr, Rule::Copy;
    DEC => dec, Rule::Dec;
    DECAR => decar, Rule::Copy;
    TCR => tcr, Rule::Copy;
    TSR => tsr, Rule::Clear;
    DBCR0 => dbcr0, Rule::Dbcr0;
    DBCR1 => dbcr1, Rule::Copy;
    DBCR2 => dbcr2, Rule::Copy;
    DBSR => dbsr, Rule::Clear;
    CCR0 => ccr0, Rule::Copy;
    CCR1 => ccr1, Rule::Copy;
    IAC1 ..= IAC4 => iac[0], Rule::Copy;
    DAC1 ..= DAC2 => dac[0], Rule::Copy;
    DVC1 ..= DVC2 => dvc[0], Rule::Copy;
}

/// [`offset`] of an SPR that must have a field (a compile-time error otherwise): for the
/// assembly tier's `const` operands.
pub const fn offset_of_spr(n: u32) -> usize {
    match offset(n) {
        Some(o) => o,
        None => panic!("SPR without a shadow field"),
    }
}

/// Whether accesses to SPR `n` are plain copies in both directions: the `ppc440` table's
/// `Fast` and `Shadow` classes, what the fast tiers handle.
#[inline(always)]
pub const fn is_plain(n: u32) -> bool {
    matches!(emulation(n), Emulation::Fast | Emulation::Shadow)
}

/// The shadow field of a plain SPR ([`is_plain`]), or `None`: the fast tiers' copy.
#[inline(always)]
pub fn plain_mut(s: &mut VcpuState, n: u32) -> Option<&mut u32> {
    if is_plain(n) {
        field_mut(s, n)
    } else {
        None
    }
}

/// Whether the kernel emulates guest accesses to SPR `n` at all (the `ppc440` table decides;
/// everything else is the VMM's).
#[inline(always)]
pub const fn kernel_emulates(n: u32) -> bool {
    !matches!(emulation(n), Emulation::Vmm | Emulation::User)
}

/// The real registers behind the SPRs the guest reads without trapping, as the kernel
/// reads them.
pub trait Hardware {
    /// The 64-bit time base (the running vCPU's guest time).
    fn timebase(&self) -> u64;
    /// The time base's low word.
    fn tbl(&self) -> u32 {
        self.timebase() as u32
    }
    /// The time base's high word.
    fn tbu(&self) -> u32 {
        (self.timebase() >> 32) as u32
    }
    /// The processor version register.
    fn pvr(&self) -> u32;
}

/// `mfspr` of SPR `n` (after the timers were brought up to date): its value, or `None` for
/// an SPR the kernel does not emulate (the VMM's). `dec_deadline` is the virtual
/// decrementer's deadline on the guest's time base (0: stopped).
#[inline]
pub fn mfspr(s: &VcpuState, dec_deadline: u64, n: u32, hw: &impl Hardware) -> Option<u32> {
    if !kernel_emulates(n) {
        return None;
    }
    Some(match n {
        DEC if dec_deadline != 0 => dec_deadline.saturating_sub(hw.timebase()) as u32,
        PVR => hw.pvr(),
        // Uniprocessor guests are CPU 0.
        PIR => 0,
        TBL_R => hw.tbl(),
        TBU_R => hw.tbu(),
        _ => *field(s, n)?,
    })
}

/// What a completed `mtspr` asks of the kernel beyond the shadow state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprEffect {
    /// Nothing: a shadow copy.
    None,
    /// The guest PID changed (already in the state): load the TIDs of the new PID.
    PidSwitch,
    /// Write `value` to the real SPR `spr` too (SPRG4-7, USPRG0).
    WriteThrough { spr: u32, value: u32 },
    /// Load the real DBCR0 with this value (the debug events passed through).
    Dbcr0(u32),
    /// The virtual decrementer's new deadline on the guest's time base (0: stopped).
    DecDeadline(u64),
    /// The guest wrote its time base: set the real one to `after`, and move everything kept
    /// on the guest's time base (its offset, the exit's start, the decrementer's deadline)
    /// by `delta` (modulo 2^64).
    TbJump { after: u64, delta: u64 },
}

/// Why the kernel cannot complete an `mtspr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprExit {
    /// An SPR the kernel does not emulate: a virtualization fault to the VMM.
    Vmm,
    /// DBCR0[RST] != 0: a reset request, which the VMM handles (`Halt`).
    Reset,
}

/// `mtspr` of `val` to SPR `n` (after the timers were brought up to date), with `now` the
/// guest's time base: updates the shadow state and returns the effect the kernel applies.
/// Changes nothing when it returns an error.
#[inline]
pub fn mtspr(s: &mut VcpuState, n: u32, val: u32, now: u64) -> Result<SprEffect, SprExit> {
    if !kernel_emulates(n) {
        return Err(SprExit::Vmm);
    }
    if let TBL_W | TBU_W = n {
        let after = if n == TBL_W {
            (now & !0xffff_ffff) | val as u64
        } else {
            ((val as u64) << 32) | (now & 0xffff_ffff)
        };
        return Ok(SprEffect::TbJump {
            after,
            delta: after.wrapping_sub(now),
        });
    }
    let Some(rule) = rule(n) else {
        return Err(SprExit::Vmm);
    };
    if rule == Rule::Dbcr0 && val & dbcr0::RST.mask() != 0 {
        return Err(SprExit::Reset);
    }
    let f = field_mut(s, n).ok_or(SprExit::Vmm)?;
    Ok(match rule {
        Rule::Copy => {
            *f = val;
            SprEffect::None
        }
        Rule::Clear => {
            *f &= !val;
            SprEffect::None
        }
        Rule::Mask(m) => {
            *f = val & m;
            SprEffect::None
        }
        Rule::WriteThrough => {
            *f = val;
            SprEffect::WriteThrough { spr: n, value: val }
        }
        Rule::Pid => {
            if *f == val & 0xff {
                return Ok(SprEffect::None);
            }
            *f = val & 0xff;
            SprEffect::PidSwitch
        }
        Rule::Dec => {
            *f = val;
            SprEffect::DecDeadline(timer::dec_deadline(now, val))
        }
        Rule::Dbcr0 => {
            *f = val;
            SprEffect::Dbcr0(dbcr0_on_write(val))
        }
    })
}

/// mtspr SPRG4-7 or USPRG0 (a [`Rule::WriteThrough`] SPR `n`): the shadow copy, and the SPR
/// whose real register must follow. For the paths that write these fields outside
/// `mtspr` (the paravirtual page's sync).
#[inline(always)]
pub fn write_through(s: &mut VcpuState, n: u32, val: u32) -> SprEffect {
    debug_assert!(rule(n) == Some(Rule::WriteThrough));
    if let Some(f) = field_mut(s, n) {
        *f = val;
    }
    SprEffect::WriteThrough { spr: n, value: val }
}

/// The real DBCR0 after a guest writes `val` to its DBCR0: its debug events when it asks
/// for instruction-completion single steps, else none.
#[inline(always)]
pub const fn dbcr0_on_write(val: u32) -> u32 {
    if val & dbcr0::ICMP != 0 {
        val & DBCR0_EVENTS
    } else {
        0
    }
}

/// The real DBCR0 for the guest's own debug settings (what the kernel loads when it
/// switches to the vCPU).
#[inline(always)]
pub const fn dbcr0_events(s: &VcpuState) -> u32 {
    s.dbcr0 & DBCR0_EVENTS
}

// The table and `ppc440`'s classes agree: every plain SPR (`Fast`, `Shadow`) is a plain
// copy here, every `WriteThrough` SPR writes through, and every SPR the kernel emulates has
// a field or is one of the registers `mfspr`/`mtspr` treat apart.
const _: () = {
    let mut n = 0;
    while n < 1024 {
        let r = rule(n);
        match emulation(n) {
            Emulation::Fast | Emulation::Shadow => {
                assert!(
                    matches!(r, Some(Rule::Copy)),
                    "plain SPR is not a plain copy"
                )
            }
            Emulation::WriteThrough => {
                assert!(matches!(r, Some(Rule::WriteThrough)), "write-through SPR")
            }
            Emulation::Kernel => assert!(
                r.is_some() || n == PVR || n == PIR,
                "kernel SPR without a field"
            ),
            Emulation::Timebase => assert!(r.is_none()),
            Emulation::User | Emulation::Vmm => assert!(r.is_none(), "field of a VMM SPR"),
        }
        if let Some(o) = offset(n) {
            assert!(o % 4 == 0 && o + 4 <= core::mem::size_of::<VcpuState>());
        }
        n += 1;
    }
    // The runs of the table are runs of numbers.
    assert!(SPRG3 - SPRG0 == 3 && SPRG7 - SPRG4 == 3 && IVOR15 - IVOR0 == 15);
    assert!(IAC4 - IAC1 == 3 && DAC2 - DAC1 == 1 && DVC2 - DVC1 == 1);
};
