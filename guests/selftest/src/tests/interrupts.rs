//! The interrupt controller and external interrupts: UIC register semantics, UART1's
//! transmitter-empty interrupt delivered as an external input (non-critical) and, routed
//! through UICCR, as a critical input.

use crate::check::{ensure, eq, TestResult};
use crate::cpu::{self, msr, uic, vector};
use crate::label;
use crate::snippets;
use crate::trap::{self, Action};
use crate::uart;

/// UICCR/PR/TR hold what is written; UICSRS sets status bits that UICSR shows, UICMSR
/// shows them only while enabled, and writing 1 to UICSR clears them. (MSR[EE] and
/// MSR[CE] stay 0, so nothing is delivered.)
pub fn uic_registers() -> TestResult {
    for v in [0x0000_00F0, 0x8000_0001, 0] {
        cpu::mtdcr::<{ uic::CR }>(v);
        eq("UICCR round trip", cpu::mfdcr::<{ uic::CR }>(), v)?;
    }
    let pr = cpu::mfdcr::<{ uic::PR }>();
    cpu::mtdcr::<{ uic::PR }>(pr ^ 0xF0);
    let got = cpu::mfdcr::<{ uic::PR }>();
    cpu::mtdcr::<{ uic::PR }>(pr);
    eq("UICPR round trip", got, pr ^ 0xF0)?;
    for v in [0x0000_000F, 0] {
        cpu::mtdcr::<{ uic::TR }>(v);
        eq("UICTR round trip", cpu::mfdcr::<{ uic::TR }>(), v)?;
    }
    let line = uic::line(31);
    cpu::mtdcr::<{ uic::SRS }>(line);
    eq(
        "UICSR after UICSRS",
        cpu::mfdcr::<{ uic::SR }>() & line,
        line,
    )?;
    eq(
        "UICMSR with the line disabled",
        cpu::mfdcr::<{ uic::MSR }>(),
        0,
    )?;
    cpu::mtdcr::<{ uic::ER }>(line);
    eq("UICER round trip", cpu::mfdcr::<{ uic::ER }>(), line)?;
    eq(
        "UICMSR with the line enabled",
        cpu::mfdcr::<{ uic::MSR }>(),
        line,
    )?;
    cpu::mtdcr::<{ uic::ER }>(0);
    eq("UICMSR after disabling", cpu::mfdcr::<{ uic::MSR }>(), 0)?;
    cpu::mtdcr::<{ uic::SR }>(line);
    eq(
        "UICSR after writing 1 to clear",
        cpu::mfdcr::<{ uic::SR }>() & line,
        0,
    )?;
    eq("interrupts taken", trap::count(), 0)
}

/// UART1's THRE interrupt (UIC line 1, level, non-critical): UICSR latches it while the
/// line is disabled, UICMSR shows it once enabled, it waits for MSR[EE] and is delivered
/// as an external input right after `wrteei 1`. The handler reads UICMSR, clears UART1's
/// IER and acknowledges the UIC.
pub fn external_uart1() -> TestResult {
    uart::set_uart1_ier(uart::IER_THRI);
    ensure(
        cpu::mfdcr::<{ uic::SR }>() & uic::UART1 != 0,
        "UICSR does not show UART1 (line 1)",
    )?;
    eq(
        "UICMSR while line 1 is disabled",
        cpu::mfdcr::<{ uic::MSR }>(),
        0,
    )?;
    cpu::mtdcr::<{ uic::ER }>(uic::UART1);
    eq(
        "UICMSR with line 1 enabled",
        cpu::mfdcr::<{ uic::MSR }>(),
        uic::UART1,
    )?;
    eq("interrupts taken with MSR[EE] = 0", trap::count(), 0)?;
    trap::expect(vector::EXTERNAL, Action::Return);
    snippets::ee_window();
    let t = trap::only(vector::EXTERNAL)?;
    eq(
        "SRR0 = the instruction after wrteei 1",
        t.srr0,
        label!(st_ee_window_next),
    )?;
    eq("SRR1[EE,PR]", t.srr1 & (msr::EE | msr::PR), msr::EE)?;
    eq("UICMSR seen by the handler", t.extra, uic::UART1)?;
    eq("MSR on entry to the handler", t.handler_msr, msr::ME)?;
    eq("UART1 IER after the handler", uart::uart1_ier() as u32, 0)?;
    eq(
        "UICSR after the handler",
        cpu::mfdcr::<{ uic::SR }>() & uic::UART1,
        0,
    )
}

/// The same line routed to the critical input (UICCR): nothing with MSR[EE] or MSR[CE]
/// clear, a critical input interrupt (CSRR0/1) once MSR[CE] = 1.
pub fn critical_input_uart1() -> TestResult {
    cpu::mtdcr::<{ uic::CR }>(uic::UART1);
    cpu::mtdcr::<{ uic::ER }>(uic::UART1);
    uart::set_uart1_ier(uart::IER_THRI);
    eq(
        "UICMSR with line 1 enabled",
        cpu::mfdcr::<{ uic::MSR }>(),
        uic::UART1,
    )?;
    snippets::ee_window();
    eq(
        "interrupts with MSR[EE] = 1 for a critical line",
        trap::count(),
        0,
    )?;
    trap::expect(vector::CRITICAL, Action::Return);
    snippets::ce_window();
    let t = trap::only(vector::CRITICAL)?;
    eq(
        "CSRR0 = the instruction after the mtmsr",
        t.srr0,
        label!(st_ce_window_next),
    )?;
    eq(
        "CSRR1[CE,EE,PR]",
        t.srr1 & (msr::CE | msr::EE | msr::PR),
        msr::CE,
    )?;
    eq("UICMSR seen by the handler", t.extra, uic::UART1)?;
    eq(
        "MSR on entry to the critical handler (CE, DE cleared)",
        t.handler_msr,
        msr::ME,
    )?;
    eq("UART1 IER after the handler", uart::uart1_ier() as u32, 0)
}
