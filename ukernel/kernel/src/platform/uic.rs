//! The Universal Interrupt Controller (PPC440EP UM §10), on DCRs 0xC0..0xC8.
//!
//! Bit `31 - n` of every register is interrupt line `n` (IBM MSB-0 numbering).
//! Lines start masked; attaching a line configures its polarity and trigger and
//! unmasks it. Each interrupt is masked and acknowledged before its IPC is sent; the
//! handler's acknowledgement unmasks it again.

use super::IrqController;
use crate::arch::spr::{read_dcr, write_dcr};
use ppc440::dcr;

/// DCR base the DCR numbers below assume; checked against the device tree at boot.
pub const DCR_BASE: u32 = dcr::UIC0_BASE;
const SR: u32 = dcr::UIC0_SR;
const ER: u32 = dcr::UIC0_ER;
const CR: u32 = dcr::UIC0_CR;
const PR: u32 = dcr::UIC0_PR;
const TR: u32 = dcr::UIC0_TR;
const MSR: u32 = dcr::UIC0_MSR;

/// Interrupt input lines of a UIC.
pub const LINES: u32 = dcr::uic::LINES;

const fn bit(line: u32) -> u32 {
    dcr::uic::line(line)
}

/// UIC0, the bamboo board's interrupt controller.
#[derive(Clone, Copy)]
pub struct Uic;

impl IrqController for Uic {
    #[inline]
    fn init(&self) {
        write_dcr::<ER>(0);
        write_dcr::<CR>(0);
        write_dcr::<SR>(0xffff_ffff);
    }

    #[inline(always)]
    fn lines(&self) -> u32 {
        LINES
    }

    fn enable(&self, line: u32, edge: bool, active_high: bool) {
        let b = bit(line);
        let pr = read_dcr::<PR>();
        write_dcr::<PR>(if active_high { pr | b } else { pr & !b });
        let tr = read_dcr::<TR>();
        write_dcr::<TR>(if edge { tr | b } else { tr & !b });
        write_dcr::<SR>(b);
        write_dcr::<ER>(read_dcr::<ER>() | b);
    }

    #[inline(always)]
    fn disable(&self, line: u32) {
        write_dcr::<ER>(read_dcr::<ER>() & !bit(line));
    }

    #[inline(always)]
    fn unmask(&self, line: u32) {
        write_dcr::<ER>(read_dcr::<ER>() | bit(line));
    }

    #[inline(always)]
    fn ack(&self, line: u32) {
        write_dcr::<SR>(bit(line));
    }

    #[inline(always)]
    fn pending(&self) -> Option<u32> {
        let m = read_dcr::<MSR>();
        if m == 0 {
            None
        } else {
            Some(m.leading_zeros())
        }
    }
}
