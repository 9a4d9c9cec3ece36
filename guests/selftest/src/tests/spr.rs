//! mtspr/mfspr of the supervisor SPRs a VMM must virtualize, their problem-state aliases,
//! and the timebase and identification registers.

use super::{map_user, scratch};
use crate::boot::enter;
use crate::check::{ensure, eq, TestResult};
use crate::cpu::{self, dbcr0, msr, spr, vector};
use crate::trap::{self, Action};
use crate::user;
use kestrel_ppc440::{ccr0, ccr1, mmucr};

/// Values with only MSR-defined bits, for the SRR1-like registers (reserved bits may read 0
/// on silicon).
const MSR_PATTERNS: [u32; 2] = [
    msr::CE | msr::PR | msr::ME | msr::DE | msr::IS,
    msr::EE | msr::FP | msr::FE0 | msr::FE1 | msr::DS | msr::DWE,
];
/// Word-aligned values for the SRR0-like registers (bits 30:31 are reserved).
const ADDR_PATTERNS: [u32; 2] = [0xDEAD_BEEC, 0x1234_5678];

macro_rules! roundtrip {
    ($what:literal, $spr:expr, $values:expr) => {{
        for v in $values {
            cpu::mtspr::<{ $spr }>(v);
            eq($what, cpu::mfspr::<{ $spr }>(), v)?;
        }
    }};
}

/// SRR0/1, CSRR0/1 and MCSRR0/1 (all implemented by QEMU's 440).
pub fn save_restore_registers() -> TestResult {
    roundtrip!("SRR0", spr::SRR0, ADDR_PATTERNS);
    roundtrip!("SRR1", spr::SRR1, MSR_PATTERNS);
    roundtrip!("CSRR0", spr::CSRR0, ADDR_PATTERNS);
    roundtrip!("CSRR1", spr::CSRR1, MSR_PATTERNS);
    roundtrip!("MCSRR0", spr::MCSRR0, ADDR_PATTERNS);
    roundtrip!("MCSRR1", spr::MCSRR1, MSR_PATTERNS);
    // Each register is its own: writing one leaves the others alone.
    cpu::mtspr::<{ spr::SRR0 }>(0x1000);
    cpu::mtspr::<{ spr::CSRR0 }>(0x2000);
    cpu::mtspr::<{ spr::MCSRR0 }>(0x3000);
    eq(
        "SRR0 after writing CSRR0/MCSRR0",
        cpu::mfspr::<{ spr::SRR0 }>(),
        0x1000,
    )?;
    eq(
        "CSRR0 after writing MCSRR0",
        cpu::mfspr::<{ spr::CSRR0 }>(),
        0x2000,
    )
}

fn sprg_value(i: u32, round: u32) -> u32 {
    (0x5350_5200 + i) ^ (round * 0xFFFF_0000)
}

fn write_sprgs(round: u32) {
    cpu::mtspr::<{ spr::SPRG0 }>(sprg_value(0, round));
    cpu::mtspr::<{ spr::SPRG1 }>(sprg_value(1, round));
    cpu::mtspr::<{ spr::SPRG2 }>(sprg_value(2, round));
    cpu::mtspr::<{ spr::SPRG3 }>(sprg_value(3, round));
    cpu::mtspr::<{ spr::SPRG4 }>(sprg_value(4, round));
    cpu::mtspr::<{ spr::SPRG5 }>(sprg_value(5, round));
    cpu::mtspr::<{ spr::SPRG6 }>(sprg_value(6, round));
    cpu::mtspr::<{ spr::SPRG7 }>(sprg_value(7, round));
}

/// SPRG0..7 hold distinct values; 260..263 read SPRG4..7 in supervisor state too.
/// (No interrupt may come during this test: the vectors use SPRG0..2 as scratch.)
pub fn sprg() -> TestResult {
    for round in 0..2 {
        write_sprgs(round);
        let got = [
            cpu::mfspr::<{ spr::SPRG0 }>(),
            cpu::mfspr::<{ spr::SPRG1 }>(),
            cpu::mfspr::<{ spr::SPRG2 }>(),
            cpu::mfspr::<{ spr::SPRG3 }>(),
            cpu::mfspr::<{ spr::SPRG4 }>(),
            cpu::mfspr::<{ spr::SPRG5 }>(),
            cpu::mfspr::<{ spr::SPRG6 }>(),
            cpu::mfspr::<{ spr::SPRG7 }>(),
        ];
        for (i, g) in got.into_iter().enumerate() {
            eq("SPRGn round trip", g, sprg_value(i as u32, round))?;
        }
        let alias = [
            cpu::mfspr::<{ spr::SPRG4R }>(),
            cpu::mfspr::<{ spr::SPRG5R }>(),
            cpu::mfspr::<{ spr::SPRG6R }>(),
            cpu::mfspr::<{ spr::SPRG7R }>(),
        ];
        for (i, g) in alias.into_iter().enumerate() {
            let want = sprg_value(4 + i as u32, round);
            eq(
                "SPR 260..263 (SPRG4..7 read alias) in supervisor state",
                g,
                want,
            )?;
        }
    }
    Ok(())
}

/// Problem state reads SPRG4..7 through SPRs 260..263.
pub fn sprg_user_read() -> TestResult {
    map_user();
    write_sprgs(1);
    trap::expect(vector::SYSCALL, Action::Exit);
    enter(user!(u_read_sprg), msr::USER, 0, 0);
    let t = trap::only(vector::SYSCALL)?;
    for i in 0..4 {
        eq(
            "user read of SPR 260+n",
            t.gpr[i],
            sprg_value(4 + i as u32, 1),
        )?;
    }
    Ok(())
}

/// USPRG0 (SPR 256) is read/write in both states and shared between them.
pub fn usprg0() -> TestResult {
    cpu::mtspr::<{ spr::USPRG0 }>(0x0BAD_F00D);
    eq(
        "USPRG0 supervisor round trip",
        cpu::mfspr::<{ spr::USPRG0 }>(),
        0x0BAD_F00D,
    )?;
    map_user();
    trap::expect(vector::SYSCALL, Action::Exit);
    let got = enter(user!(u_usprg0), msr::USER, 0x1357_9BDF, 0);
    trap::only(vector::SYSCALL)?;
    eq("USPRG0 problem-state round trip", got, 0x1357_9BDF)?;
    eq(
        "USPRG0 written in problem state, read in supervisor",
        cpu::mfspr::<{ spr::USPRG0 }>(),
        0x1357_9BDF,
    )
}

/// ESR and DEAR are plain read/write registers for software.
pub fn esr_dear() -> TestResult {
    use crate::cpu::esr;
    roundtrip!(
        "ESR",
        spr::ESR,
        [esr::PIL | esr::PTR | esr::ST, esr::PPR, 0]
    );
    roundtrip!("DEAR", spr::DEAR, [0xCAFE_BABE, 0x0000_0001, scratch(2)]);
    Ok(())
}

/// IVPR keeps bits 0:15, IVORn bits 16:27 (PPC440 UM §6.3).
/// (No interrupt may come while the vectors are pointed elsewhere.)
pub fn ivpr_ivor() -> TestResult {
    let ivpr = cpu::mfspr::<{ spr::IVPR }>();
    cpu::mtspr::<{ spr::IVPR }>(0x1234_FFFF);
    let got = cpu::mfspr::<{ spr::IVPR }>();
    cpu::mtspr::<{ spr::IVPR }>(ivpr);
    eq("IVPR keeps only bits 0:15", got, 0x1234_0000)?;
    eq("IVPR restored", cpu::mfspr::<{ spr::IVPR }>(), ivpr)?;
    macro_rules! ivors {
        ($($n:literal)*) => {$(
            let old = cpu::mfspr::<{ spr::IVOR0 + $n }>();
            eq("IVORn as installed (32 * n)", old, 32 * $n)?;
            cpu::mtspr::<{ spr::IVOR0 + $n }>(0xFFFF_FFFF);
            let masked = cpu::mfspr::<{ spr::IVOR0 + $n }>();
            cpu::mtspr::<{ spr::IVOR0 + $n }>(0x0000_1230 + $n);
            let plain = cpu::mfspr::<{ spr::IVOR0 + $n }>();
            cpu::mtspr::<{ spr::IVOR0 + $n }>(old);
            eq("IVORn keeps only bits 16:27", masked, 0x0000_FFF0)?;
            eq("IVORn round trip", plain, 0x0000_1230)?;
        )*};
    }
    ivors!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    Ok(())
}

/// PID (8 bits on the 440) and MMUCR (its defined bits).
pub fn pid_mmucr() -> TestResult {
    roundtrip!("PID", spr::PID, [0x5A, 0xA5, 0xFF, 0]);
    let defined = mmucr::SWOA.mask()
        | mmucr::U1TE.mask()
        | mmucr::U2SWOAE.mask()
        | mmucr::DULXE.mask()
        | mmucr::IULXE.mask()
        | mmucr::STS.mask()
        | mmucr::STID.mask();
    roundtrip!("MMUCR", spr::MMUCR, [defined, 0x0001_005A, 0x0000_00A5, 0]);
    Ok(())
}

/// CCR0 and CCR1 hold what is written; toggles bits with no effect under emulation and only
/// performance or parity-checking effects on silicon (CCR0[DSTG], CCR0[DTB], CCR1[DPC]).
pub fn ccr0_ccr1() -> TestResult {
    const CCR0_BITS: u32 = ccr0::DSTG | ccr0::DTB;
    const CCR1_BITS: u32 = ccr1::DPC;
    let ccr0 = cpu::mfspr::<{ spr::CCR0 }>();
    cpu::mtspr::<{ spr::CCR0 }>(ccr0 ^ CCR0_BITS);
    let got0 = cpu::mfspr::<{ spr::CCR0 }>();
    cpu::mtspr::<{ spr::CCR0 }>(ccr0);
    eq("CCR0 round trip", got0, ccr0 ^ CCR0_BITS)?;
    eq("CCR0 restored", cpu::mfspr::<{ spr::CCR0 }>(), ccr0)?;
    let ccr1 = cpu::mfspr::<{ spr::CCR1 }>();
    cpu::mtspr::<{ spr::CCR1 }>(ccr1 ^ CCR1_BITS);
    let got1 = cpu::mfspr::<{ spr::CCR1 }>();
    cpu::mtspr::<{ spr::CCR1 }>(ccr1);
    eq("CCR1 round trip", got1, ccr1 ^ CCR1_BITS)?;
    eq("CCR1 restored", cpu::mfspr::<{ spr::CCR1 }>(), ccr1)
}

/// DBCR0 bits that cause nothing while MSR[DE] = 0 (never RST), DBCR1/2 and the address and
/// value compare registers.
pub fn debug_registers() -> TestResult {
    roundtrip!(
        "DBCR0 (IDM, TRAP, IAC1, RET)",
        spr::DBCR0,
        [
            dbcr0::IDM | dbcr0::TRAP | dbcr0::IAC1 | dbcr0::RET,
            dbcr0::IDM,
            0
        ]
    );
    roundtrip!("DBCR1", spr::DBCR1, [0x0C00_0000, 0]);
    roundtrip!("DBCR2", spr::DBCR2, [0x00C0_0000, 0]);
    roundtrip!("IAC1", spr::IAC1, [0x0040_1000, 0]);
    roundtrip!("IAC2", spr::IAC2, [0x0040_2000, 0]);
    roundtrip!("IAC3", spr::IAC3, [0x0040_3000, 0]);
    roundtrip!("IAC4", spr::IAC4, [0x0040_4000, 0]);
    roundtrip!("DAC1", spr::DAC1, [0x0050_1234, 0]);
    roundtrip!("DAC2", spr::DAC2, [0x0050_5678, 0]);
    roundtrip!("DVC1", spr::DVC1, [0x1122_3344, 0]);
    roundtrip!("DVC2", spr::DVC2, [0x5566_7788, 0]);
    Ok(())
}

/// Writes to TBL/TBU (SPR 284/285) set the timebase, which then keeps counting: read back
/// at least what was written (and less than 5 s of ticks more), and a carry from TBL
/// reaches TBU. Problem state reads the timebase through SPR 268/269.
pub fn timebase_write() -> TestResult {
    cpu::mtspr::<{ spr::TBL_W }>(0);
    cpu::mtspr::<{ spr::TBU_W }>(0x0000_1234);
    cpu::mtspr::<{ spr::TBL_W }>(0x100);
    let hi = cpu::mfspr::<{ spr::TBU_R }>();
    let lo = cpu::mfspr::<{ spr::TBL_R }>();
    eq("TBU after writing TBU", hi, 0x1234)?;
    // Up to 2^31 ticks (5 s) later: generous, for a host that deschedules QEMU.
    ensure(
        (0x100..0x8000_0000).contains(&lo),
        "TBL not within 0x100..0x80000000 after writing 0x100",
    )?;

    cpu::mtspr::<{ spr::TBL_W }>(0);
    cpu::mtspr::<{ spr::TBU_W }>(7);
    cpu::mtspr::<{ spr::TBL_W }>(0xFFFF_F000);
    // Bounded by iterations: the timebase itself is under test. 4096 ticks take ~10k
    // instructions under -icount.
    let carried = (0..50_000_000u32).any(|_| cpu::mfspr::<{ spr::TBU_R }>() != 7);
    ensure(carried, "TBU never left 7")?;
    let (hi, lo) = (
        cpu::mfspr::<{ spr::TBU_R }>(),
        cpu::mfspr::<{ spr::TBL_R }>(),
    );
    eq("TBU after TBL wrapped", hi, 8)?;
    ensure(
        lo < 0x8000_0000,
        "TBL not below 0x80000000 after it wrapped",
    )?;

    map_user();
    trap::expect(vector::SYSCALL, Action::Exit);
    enter(user!(u_timebase), msr::USER, 0, 0);
    let t = trap::only(vector::SYSCALL)?;
    eq("TBU read in problem state", t.gpr[0], 8)
}

/// PVR is QEMU's 440EPb (0x422218D3) and PIR is 0 (one CPU).
pub fn pvr_pir() -> TestResult {
    eq("PVR", cpu::mfspr::<{ spr::PVR }>(), 0x4222_18D3)?;
    eq("PIR", cpu::mfspr::<{ spr::PIR }>(), 0)
}
