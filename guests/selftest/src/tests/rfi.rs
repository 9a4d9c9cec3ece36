//! Returns from interrupts: rfi (into supervisor and problem state), rfci and rfmci, and
//! resuming problem-state code after its trap was handled.

use super::map_user;
use crate::boot::enter;
use crate::check::{eq, skip, TestResult};
use crate::cpu::{self, esr, msr, spr, vector};
use crate::snippets::{rfci_to, rfi_to, rfmci_to};
use crate::trap::{self, Action};
use crate::user;

const NO_RFCI: &str = "selftest.no-rfci given (QEMU 7.2.22 aborts on rfci/rfmci under -icount)";

/// rfi loads MSR from SRR1 and continues at SRR0.
pub fn rfi_supervisor() -> TestResult {
    for m in [
        msr::KERNEL | msr::FP,
        msr::KERNEL | msr::FP | msr::FE0 | msr::FE1,
        msr::KERNEL | msr::DWE | msr::CE,
        0,
    ] {
        eq("MSR after rfi", rfi_to(m), m)?;
    }
    Ok(())
}

/// rfi into problem state; `sc` there comes back as a system call with SRR0 = the
/// instruction after `sc` and SRR1 = the problem-state MSR.
pub fn rfi_user_sc() -> TestResult {
    map_user();
    trap::expect(vector::SYSCALL, Action::Exit);
    for m in [msr::USER, msr::USER | msr::EE | msr::FP] {
        trap::forget();
        let r = enter(user!(u_sc), m, 41, 0);
        eq("r3 after the problem-state code added 1", r, 42)?;
        let t = trap::only(vector::SYSCALL)?;
        eq(
            "SRR0 of sc (the next instruction)",
            t.srr0,
            user!(u_sc_insn) + 4,
        )?;
        eq("SRR1 of sc", t.srr1 & msr::CHECKED, m)?;
        eq(
            "MSR on entry to the handler (PR, EE, FP cleared)",
            t.handler_msr,
            msr::ME,
        )?;
    }
    Ok(())
}

/// rfci returns through CSRR0/1 (SRR0/1 hold a problem-state target that must not be used).
pub fn rfci_return() -> TestResult {
    if crate::no_rfci() {
        return skip(NO_RFCI);
    }
    cpu::mtspr::<{ spr::SRR0 }>(0);
    cpu::mtspr::<{ spr::SRR1 }>(msr::USER);
    for m in [
        msr::KERNEL | msr::CE,
        msr::KERNEL | msr::DE | msr::FP,
        msr::KERNEL,
    ] {
        eq("MSR after rfci", rfci_to(m), m)?;
    }
    Ok(())
}

/// rfmci returns through MCSRR0/1 (SRR0/1 and CSRR0/1 hold targets that must not be used).
pub fn rfmci_return() -> TestResult {
    if crate::no_rfci() {
        return skip(NO_RFCI);
    }
    cpu::mtspr::<{ spr::SRR0 }>(0);
    cpu::mtspr::<{ spr::SRR1 }>(msr::USER);
    cpu::mtspr::<{ spr::CSRR0 }>(0);
    cpu::mtspr::<{ spr::CSRR1 }>(msr::USER);
    for m in [msr::KERNEL | msr::FP, msr::KERNEL | msr::CE | msr::DE, 0] {
        eq("MSR after rfmci", rfmci_to(m), m)?;
    }
    Ok(())
}

/// A trap in problem state is handled and the code resumes after it (as an OS emulating an
/// instruction would), then ends with sc.
pub fn user_resume_after_trap() -> TestResult {
    map_user();
    trap::expect(vector::PROGRAM, Action::Skip);
    trap::expect(vector::SYSCALL, Action::Exit);
    let r = enter(user!(u_trap_resume), msr::USER, 0, 0);
    eq("r3 after resuming past the trap", r, 2)?;
    eq("interrupts taken", trap::count(), 2)?;
    let t = trap::get(0);
    eq("first interrupt", t.vector, vector::PROGRAM)?;
    eq("ESR of the trap", t.esr, esr::PTR)?;
    eq("SRR0 of the trap", t.srr0, user!(u_trap_resume_insn))?;
    eq("SRR1 of the trap", t.srr1 & msr::CHECKED, msr::USER)?;
    eq("second interrupt", trap::get(1).vector, vector::SYSCALL)
}

/// What a non-critical interrupt does to the MSR: Book E clears EE, PR, FP, FE0/1, IS and DS
/// (and WE) but leaves CE, ME and DE unchanged (as Linux's KVM for Book E does when it
/// injects one). Checked from supervisor state and from problem state.
pub fn interrupt_entry_msr() -> TestResult {
    let kept = msr::CE | msr::ME | msr::DE;
    trap::expect(vector::SYSCALL, Action::Return);
    cpu::mtmsr(msr::KERNEL | msr::CE | msr::DE | msr::FP | msr::FE0);
    crate::snippets::sc();
    cpu::mtmsr(msr::KERNEL);
    let supervisor = trap::only(vector::SYSCALL)?;
    eq(
        "SRR1 of sc with CE, DE, FP set",
        supervisor.srr1 & (msr::CHECKED | msr::CE | msr::FE0),
        msr::KERNEL | msr::CE | msr::DE | msr::FP | msr::FE0,
    )?;

    map_user();
    trap::forget();
    trap::expect(vector::SYSCALL, Action::Exit);
    let m = msr::USER | msr::CE | msr::DE | msr::EE | msr::FP;
    enter(user!(u_sc), m, 0, 0);
    let user = trap::only(vector::SYSCALL)?;
    eq(
        "SRR1 of sc in problem state",
        user.srr1 & (msr::CHECKED | msr::CE),
        m,
    )?;

    for t in [supervisor, user] {
        if t.handler_msr == msr::ME {
            // QEMU 7.2's powerpc_excp_booke starts every handler with only ME kept.
            return skip(
                "handler MSR is ME alone: QEMU 7.2 clears MSR[CE,DE] on non-critical interrupts",
            );
        }
        eq(
            "MSR on entry to a non-critical handler",
            t.handler_msr,
            kept,
        )?;
    }
    Ok(())
}
