//! MSR access: mtmsr/mfmsr, wrtee, wrteei (all privileged; a VMM emulates each).

use crate::check::{eq, TestResult};
use crate::cpu::{self, msr};

/// mtmsr then mfmsr returns every bit the test can safely toggle in supervisor state (all
/// defined bits except WE, PR, IS and DS, which change how the next instruction runs).
pub fn mtmsr_roundtrip() -> TestResult {
    for bit in [
        msr::CE,
        msr::EE,
        msr::FP,
        msr::FE0,
        msr::DWE,
        msr::DE,
        msr::FE1,
    ] {
        cpu::mtmsr(msr::KERNEL | bit);
        eq(
            "mfmsr after mtmsr with one more bit",
            cpu::mfmsr(),
            msr::KERNEL | bit,
        )?;
    }
    let all = msr::KERNEL | msr::CE | msr::EE | msr::FP | msr::FE0 | msr::DWE | msr::DE | msr::FE1;
    cpu::mtmsr(all);
    eq("mfmsr after mtmsr of all safe bits", cpu::mfmsr(), all)?;
    // Not tested: mtmsr clearing ME. Book E allows it, but QEMU applies the Book S rule
    // "mtmsr does not alter ME" (rfi does; see rfi_supervisor).
    cpu::mtmsr(msr::KERNEL);
    eq("mfmsr after restoring", cpu::mfmsr(), msr::KERNEL)
}

/// wrtee copies bit 16 of its operand into MSR[EE] and leaves every other bit alone.
pub fn wrtee() -> TestResult {
    let base = msr::KERNEL | msr::FP;
    cpu::mtmsr(base);
    cpu::wrtee(msr::EE);
    eq("MSR after wrtee(EE)", cpu::mfmsr(), base | msr::EE)?;
    cpu::wrtee(!msr::EE);
    eq("MSR after wrtee(all bits but EE)", cpu::mfmsr(), base)?;
    cpu::wrtee(0xFFFF_FFFF);
    eq("MSR after wrtee(all ones)", cpu::mfmsr(), base | msr::EE)?;
    cpu::wrtee(0);
    eq("MSR after wrtee(0)", cpu::mfmsr(), base)
}

/// wrteei 1/0 set and clear MSR[EE] only.
pub fn wrteei() -> TestResult {
    let base = msr::KERNEL | msr::FP | msr::DE;
    cpu::mtmsr(base);
    cpu::wrteei_1();
    eq("MSR after wrteei 1", cpu::mfmsr(), base | msr::EE)?;
    cpu::wrteei_0();
    eq("MSR after wrteei 0", cpu::mfmsr(), base)
}
