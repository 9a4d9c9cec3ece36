//! Property tests of the guest CPU against a reference model, one class of emulated
//! instruction at a time (as `vtlb/tests/model.rs` tests the vTLB): `mfspr`/`mtspr` of every
//! SPR number (plain copies, PID, the time base, DBCR0, SPRG4-7, DEC, TSR/TCR, the masked and
//! write-1-to-clear registers, the VMM's), `mfmsr`/`mtmsr`/`wrtee`/`wrteei`, the returns from
//! interrupt and the interrupt entry, the timers, pending and deliverable interrupts, the
//! decoding of every privileged instruction (the indexed DCR forms included), `tlbre`,
//! `tlbwe` and `tlbsx[.]` through the vTLB (against testkit's reference TLB), and the
//! split-space access plan.
//!
//! The model states the PPC440's rules again, plainly, from the manual's SPR numbers (PPC440
//! core user's manual, Table 10-2) and bit positions, without the crate's tables.

use kestrel_abi::{FrameRegs, VcpuState};
use kestrel_guestcpu::insn::{classify, is_indexed_dcr, Privileged};
use kestrel_guestcpu::msr::{self, MsrWrite, Return};
use kestrel_guestcpu::split::{self, Op, Step};
use kestrel_guestcpu::spr::{self, Hardware, SprEffect, SprExit};
use kestrel_guestcpu::timer::{self, Timers};
use kestrel_guestcpu::tlb::{self, TlbOp};
use kestrel_ppc440::decode::{self as ppcdecode, AccessKind, Insn as PInsn};
use kestrel_ppc440::encode;
use kestrel_testkit::vtlb::RefTlb;
use kestrel_vtlb::{Access, GuestTlb};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// The reference model

/// MSR bits (Book E, MSB-0 bit b = 1 << (31 - b)).
const fn b(n: u32) -> u32 {
    1 << (31 - n)
}
const WE: u32 = b(13);
const CE: u32 = b(14);
const EE: u32 = b(16);
const PR: u32 = b(17);
const FP: u32 = b(18);
const ME: u32 = b(19);
const FE0: u32 = b(20);
const DWE: u32 = b(21);
const DE: u32 = b(22);
const FE1: u32 = b(23);
const IS: u32 = b(26);
const DS: u32 = b(27);
const MSR_BITS: u32 = WE | CE | EE | PR | FP | ME | FE0 | DWE | DE | FE1 | IS | DS;
const VCPU_MSR: u32 = PR | EE | ME | IS | DS;

// TSR / TCR bits.
const TSR_ENW: u32 = b(0);
const TSR_WIS: u32 = b(1);
const TSR_DIS: u32 = b(4);
const TSR_FIS: u32 = b(5);
const TCR_WIE: u32 = b(4);
const TCR_DIE: u32 = b(5);
const TCR_FIE: u32 = b(8);
const TCR_ARE: u32 = b(9);
// DBCR0.
const DBCR0_IDM: u32 = b(1);
const DBCR0_RST: u32 = b(2) | b(3);
const DBCR0_ICMP: u32 = b(4);

/// What the reference model says a register does on `mtspr`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Copy,
    Clear,
    Mask(u32),
    Through,
    Pid,
    Dec,
    Dbcr0,
    Tb {
        upper: bool,
    },
    /// Read-only in the kernel (PVR, PIR): reads emulated, writes go to the VMM.
    ReadOnly,
    /// The time base read ports (readable, never written through `mtspr` of these numbers).
    TbRead,
    Vmm,
}

/// The manual's numbers of the SPRs a Kestrel vCPU emulates, by kind.
fn kind(n: u32) -> Kind {
    match n {
        26
        | 27
        | 58
        | 59
        | 570
        | 571
        | 272..=275
        | 62
        | 61
        | 946
        | 54
        | 340
        | 309
        | 310
        | 947
        | 888
        | 312..=319 => Kind::Copy,
        572 | 336 | 304 => Kind::Clear,
        63 => Kind::Mask(0xffff_0000),
        400..=415 => Kind::Mask(0x0000_fff0),
        276..=279 | 256 => Kind::Through,
        48 => Kind::Pid,
        22 => Kind::Dec,
        308 => Kind::Dbcr0,
        284 => Kind::Tb { upper: false },
        285 => Kind::Tb { upper: true },
        286 | 287 => Kind::ReadOnly,
        268 | 269 => Kind::TbRead,
        _ => Kind::Vmm,
    }
}

/// The model's field of SPR `n` in the state, by the manual's numbers.
fn slot(s: &mut VcpuState, n: u32) -> Option<&mut u32> {
    Some(match n {
        26 => &mut s.srr0,
        27 => &mut s.srr1,
        58 => &mut s.csrr0,
        59 => &mut s.csrr1,
        570 => &mut s.mcsrr0,
        571 => &mut s.mcsrr1,
        572 => &mut s.mcsr,
        272..=279 => &mut s.sprg[(n - 272) as usize],
        256 => &mut s.usprg0,
        62 => &mut s.esr,
        61 => &mut s.dear,
        63 => &mut s.ivpr,
        400..=415 => &mut s.ivor[(n - 400) as usize],
        48 => &mut s.pid,
        946 => &mut s.mmucr,
        22 => &mut s.dec,
        54 => &mut s.decar,
        340 => &mut s.tcr,
        336 => &mut s.tsr,
        308 => &mut s.dbcr0,
        309 => &mut s.dbcr1,
        310 => &mut s.dbcr2,
        304 => &mut s.dbsr,
        947 => &mut s.ccr0,
        888 => &mut s.ccr1,
        312..=315 => &mut s.iac[(n - 312) as usize],
        316 | 317 => &mut s.dac[(n - 316) as usize],
        318 | 319 => &mut s.dvc[(n - 318) as usize],
        _ => return None,
    })
}

/// The model's `mtspr`.
fn model_mtspr(s: &mut VcpuState, n: u32, v: u32, now: u64) -> Result<SprEffect, SprExit> {
    let k = kind(n);
    if let Kind::Tb { upper } = k {
        let after = if upper {
            (u64::from(v) << 32) | (now & 0xffff_ffff)
        } else {
            (now & 0xffff_ffff_0000_0000) | u64::from(v)
        };
        return Ok(SprEffect::TbJump {
            after,
            delta: after.wrapping_sub(now),
        });
    }
    if matches!(k, Kind::Vmm | Kind::ReadOnly | Kind::TbRead) {
        return Err(SprExit::Vmm);
    }
    if k == Kind::Dbcr0 && v & DBCR0_RST != 0 {
        return Err(SprExit::Reset);
    }
    let f = slot(s, n).expect("an emulated SPR has a field");
    Ok(match k {
        Kind::Copy => {
            *f = v;
            SprEffect::None
        }
        Kind::Clear => {
            *f &= !v;
            SprEffect::None
        }
        Kind::Mask(m) => {
            *f = v & m;
            SprEffect::None
        }
        Kind::Through => {
            *f = v;
            SprEffect::WriteThrough { spr: n, value: v }
        }
        Kind::Pid => {
            let old = *f;
            *f = v & 0xff;
            if old == v & 0xff {
                SprEffect::None
            } else {
                SprEffect::PidSwitch
            }
        }
        Kind::Dec => {
            *f = v;
            // A deadline past the time base's end (a guest-written time base) is its end.
            let d = u128::from(now) + u128::from(v);
            SprEffect::DecDeadline(if v == 0 {
                0
            } else {
                u64::try_from(d).unwrap_or(u64::MAX)
            })
        }
        Kind::Dbcr0 => {
            *f = v;
            let events = DBCR0_IDM | DBCR0_ICMP;
            SprEffect::Dbcr0(if v & DBCR0_ICMP != 0 { v & events } else { 0 })
        }
        _ => unreachable!(),
    })
}

/// The model's `mfspr`.
fn model_mfspr(s: &VcpuState, deadline: u64, n: u32, hw: &Hw) -> Option<u32> {
    let mut s = *s;
    match (kind(n), n) {
        (Kind::Vmm | Kind::Tb { .. }, _) => None,
        (_, 22) if deadline != 0 => Some(deadline.saturating_sub(hw.tb) as u32),
        (_, 287) => Some(hw.pvr),
        (_, 286) => Some(0),
        (_, 268) => Some(hw.tb as u32),
        (_, 269) => Some((hw.tb >> 32) as u32),
        _ => slot(&mut s, n).map(|v| *v),
    }
}

struct Hw {
    tb: u64,
    pvr: u32,
}

impl Hardware for Hw {
    fn timebase(&self) -> u64 {
        self.tb
    }
    fn pvr(&self) -> u32 {
        self.pvr
    }
}

/// A state with every field from `words` (so that every field differs).
fn state_from(words: &[u32]) -> VcpuState {
    let mut s = VcpuState::default();
    let mut it = words.iter().copied().cycle();
    let mut next = || it.next().unwrap_or(0);
    s.msr = next() & MSR_BITS;
    for n in 0..1024 {
        if let Some(f) = slot(&mut s, n) {
            *f = next();
        }
    }
    s.pid &= 0xff;
    s.irq_line = next() & 1;
    s.crit_line = next() & 1;
    s
}

fn any_state() -> impl Strategy<Value = VcpuState> {
    prop::collection::vec(any::<u32>(), 80).prop_map(|w| state_from(&w))
}

/// SPR numbers: mostly the named ones and their neighbours, sometimes any 10-bit number.
fn any_spr() -> impl Strategy<Value = u32> {
    let named: Vec<u32> = kestrel_ppc440::spr::TABLE
        .iter()
        .map(|i| i.number)
        .collect();
    prop_oneof![
        3 => prop::sample::select(named),
        1 => 0u32..1024,
    ]
}

/// A value biased towards the interesting bits (reset requests, single bits).
fn any_value() -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), (0u32..32).prop_map(|i| 1 << i), Just(0u32)]
}

// ---------------------------------------------------------------------------------------
// SPRs

proptest! {
    #[test]
    fn mtspr_matches_the_model(s in any_state(), n in any_spr(), v in any_value(), now in any::<u64>()) {
        let mut got = s;
        let mut want = s;
        let r = spr::mtspr(&mut got, n, v, now);
        let m = model_mtspr(&mut want, n, v, now);
        prop_assert_eq!(r, m, "mtspr {} {:#x}", n, v);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn mfspr_matches_the_model(s in any_state(), n in any_spr(), deadline in prop_oneof![Just(0u64), any::<u64>()],
                               tb in any::<u64>(), pvr in any::<u32>()) {
        let hw = Hw { tb, pvr };
        prop_assert_eq!(spr::mfspr(&s, deadline, n, &hw), model_mfspr(&s, deadline, n, &hw), "mfspr {}", n);
    }

    #[test]
    fn mtspr_then_mfspr_of_a_plain_register_reads_the_value(s in any_state(), v in any::<u32>()) {
        for n in 0..1024 {
            if spr::is_plain(n) {
                let mut t = s;
                prop_assert_eq!(spr::mtspr(&mut t, n, v, 0), Ok(SprEffect::None));
                prop_assert_eq!(spr::mfspr(&t, 0, n, &Hw { tb: 0, pvr: 0 }), Some(v));
                // The fast tiers' copy is the same field.
                let mut u = s;
                *spr::plain_mut(&mut u, n).expect("plain") = v;
                prop_assert_eq!(t, u);
            }
        }
    }
}

#[test]
fn the_field_map_and_its_offsets_agree_with_the_model() {
    for n in 0..1024 {
        // Mark every word of a state with its offset; the field of `n` then tells where it is.
        let mut s = VcpuState::default();
        let mut marked = 0u32;
        for m in 0..1024 {
            if let Some(f) = slot(&mut s, m) {
                *f = m + 1;
                marked += 1;
            }
        }
        assert_eq!(marked, 55, "the model's fields");
        let model = slot(&mut s, n).map(|f| *f);
        let field = spr::field(&s, n).copied();
        match kind(n) {
            Kind::Vmm | Kind::Tb { .. } | Kind::TbRead | Kind::ReadOnly => {
                assert_eq!(field, None, "SPR {n} has a field")
            }
            _ => assert_eq!(field, model, "SPR {n}: field"),
        }
        // The offset names the same word as the field.
        let offset = spr::offset(n);
        assert_eq!(offset.is_some(), field.is_some(), "SPR {n}: offset");
        if let Some(o) = offset {
            assert_eq!(o, model_offset(n).expect("field"), "SPR {n}: offset");
        }
        assert_eq!(
            spr::is_plain(n),
            matches!(n, 26 | 27 | 58 | 59 | 570 | 571 | 272..=275 | 62 | 61 | 946),
            "SPR {n}: plain"
        );
    }
}

/// The model's byte offset of SPR `n`'s field in `VcpuState`.
fn model_offset(n: u32) -> Option<usize> {
    use core::mem::offset_of;
    Some(match n {
        26 => offset_of!(VcpuState, srr0),
        27 => offset_of!(VcpuState, srr1),
        58 => offset_of!(VcpuState, csrr0),
        59 => offset_of!(VcpuState, csrr1),
        570 => offset_of!(VcpuState, mcsrr0),
        571 => offset_of!(VcpuState, mcsrr1),
        572 => offset_of!(VcpuState, mcsr),
        272..=279 => offset_of!(VcpuState, sprg) + 4 * (n - 272) as usize,
        256 => offset_of!(VcpuState, usprg0),
        62 => offset_of!(VcpuState, esr),
        61 => offset_of!(VcpuState, dear),
        63 => offset_of!(VcpuState, ivpr),
        400..=415 => offset_of!(VcpuState, ivor) + 4 * (n - 400) as usize,
        48 => offset_of!(VcpuState, pid),
        946 => offset_of!(VcpuState, mmucr),
        22 => offset_of!(VcpuState, dec),
        54 => offset_of!(VcpuState, decar),
        340 => offset_of!(VcpuState, tcr),
        336 => offset_of!(VcpuState, tsr),
        308 => offset_of!(VcpuState, dbcr0),
        309 => offset_of!(VcpuState, dbcr1),
        310 => offset_of!(VcpuState, dbcr2),
        304 => offset_of!(VcpuState, dbsr),
        947 => offset_of!(VcpuState, ccr0),
        888 => offset_of!(VcpuState, ccr1),
        312..=315 => offset_of!(VcpuState, iac) + 4 * (n - 312) as usize,
        316 | 317 => offset_of!(VcpuState, dac) + 4 * (n - 316) as usize,
        318 | 319 => offset_of!(VcpuState, dvc) + 4 * (n - 318) as usize,
        _ => return None,
    })
}

#[test]
fn write_through_names_the_register_the_kernel_writes() {
    let mut s = VcpuState::default();
    for n in 276..=279 {
        assert_eq!(
            spr::write_through(&mut s, n, n * 3),
            SprEffect::WriteThrough {
                spr: n,
                value: n * 3
            }
        );
        assert_eq!(s.sprg[(n - 272) as usize], n * 3);
    }
}

#[test]
fn dbcr0_events_are_the_single_step_pair() {
    assert_eq!(spr::DBCR0_EVENTS, DBCR0_IDM | DBCR0_ICMP);
    assert_eq!(spr::dbcr0_on_write(DBCR0_IDM), 0);
    assert_eq!(
        spr::dbcr0_on_write(DBCR0_IDM | DBCR0_ICMP | b(8)),
        DBCR0_IDM | DBCR0_ICMP
    );
    let s = VcpuState {
        dbcr0: DBCR0_IDM | b(8),
        ..VcpuState::default()
    };
    assert_eq!(spr::dbcr0_events(&s), DBCR0_IDM);
}

// ---------------------------------------------------------------------------------------
// MSR, returns from interrupt, interrupts

/// The model's MSR install: masked, WE taken as a request to wait.
fn model_install(s: &mut VcpuState, v: u32) -> MsrWrite {
    let old = s.msr;
    s.msr = v & MSR_BITS & !WE;
    MsrWrite {
        old,
        new: s.msr,
        wait: v & WE != 0,
    }
}

proptest! {
    #[test]
    fn msr_writes_match_the_model(s in any_state(), v in any::<u32>(), e in any::<bool>()) {
        let (mut got, mut want) = (s, s);
        prop_assert_eq!(msr::mtmsr(&mut got, v), model_install(&mut want, v));
        prop_assert_eq!(got, want);

        let (mut got, mut want) = (s, s);
        let w = msr::wrtee(&mut got, v);
        want.msr = (s.msr & !EE) | (v & EE);
        prop_assert_eq!(got, want);
        prop_assert_eq!(w, MsrWrite { old: s.msr, new: want.msr, wait: false });

        let mut got = s;
        let _ = msr::wrteei(&mut got, e);
        prop_assert_eq!(got.msr, (s.msr & !EE) | if e { EE } else { 0 });

        let mut t = s;
        let w = msr::mtmsr(&mut t, v);
        prop_assert_eq!(w.privilege_changed(), (w.old ^ w.new) & PR != 0);
        prop_assert_eq!(w.space_changed(), (w.old ^ w.new) & (IS | DS) != 0);
        prop_assert_eq!(w.enables_interrupts(), (!w.old & w.new) & (EE | CE) != 0);
    }

    #[test]
    fn returns_from_interrupt_match_the_model(s in any_state(), k in 0..3u8) {
        let kind = [Return::Rfi, Return::Rfci, Return::Rfmci][k as usize];
        let (mut got, mut want) = (s, s);
        let (pc, w) = msr::return_from(&mut got, kind);
        let (wpc, m) = match kind {
            Return::Rfi => (s.srr0, s.srr1),
            Return::Rfci => (s.csrr0, s.csrr1),
            Return::Rfmci => (s.mcsrr0, s.mcsrr1),
        };
        prop_assert_eq!(pc, wpc);
        prop_assert_eq!(w, model_install(&mut want, m));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn interrupt_entry_matches_the_model(s in any_state(), vector in 0u32..16, pc in any::<u32>()) {
        let mut got = s;
        let (target, w) = msr::interrupt(&mut got, vector, pc);
        let mut want = s;
        // Book E: critical (0 critical input, 12 watchdog, 15 debug), machine check (1),
        // the rest non-critical.
        let clear = WE | EE | PR | FP | IS | DS | FE0 | FE1;
        match vector {
            0 | 12 | 15 => { want.csrr0 = pc; want.csrr1 = s.msr; want.msr = s.msr & !(clear | CE | DE); }
            1 => { want.mcsrr0 = pc; want.mcsrr1 = s.msr; want.msr = s.msr & !(clear | CE | DE | ME); }
            _ => { want.srr0 = pc; want.srr1 = s.msr; want.msr = s.msr & !clear; }
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(target, (s.ivpr & 0xffff_0000) | (s.ivor[vector as usize] & 0xfff0));
        prop_assert_eq!(w, MsrWrite { old: s.msr, new: want.msr, wait: false });
    }

    #[test]
    fn pending_interrupts_match_the_model(s in any_state(), deadline in prop_oneof![Just(0u64), any::<u64>()], now in any::<u64>()) {
        let dis = s.tsr & TSR_DIS != 0 && s.tcr & TCR_DIE != 0;
        let fis = s.tsr & TSR_FIS != 0 && s.tcr & TCR_FIE != 0;
        let wis = s.tsr & TSR_WIS != 0 && s.tcr & TCR_WIE != 0;
        let irq = s.irq_line != 0;
        let crit = s.crit_line != 0;
        prop_assert_eq!(msr::wakeup_pending(&s), irq || dis);
        prop_assert_eq!(msr::interrupt_pending(&s), irq || crit || dis || fis || wis);
        // Precedence: watchdog, critical input (both with MSR[CE]), then with MSR[EE] the
        // external input, the decrementer, the fixed-interval timer.
        let want = if wis && s.msr & CE != 0 {
            Some(12)
        } else if crit && s.msr & CE != 0 {
            Some(0)
        } else if s.msr & EE == 0 {
            None
        } else if irq {
            Some(4)
        } else if dis {
            Some(10)
        } else if fis {
            Some(11)
        } else {
            None
        };
        prop_assert_eq!(msr::deliverable(&s).map(|(v, _)| v), want);
        // The fast tiers' test is conservative: whatever is deliverable once interrupts are
        // enabled, or whatever the decrementer brings by `now`, it reports.
        let maybe = msr::maybe_pending(&s, deadline, || now);
        let mut enabled = s;
        enabled.msr |= EE | CE;
        if msr::deliverable(&enabled).is_some() || msr::interrupt_pending(&s)
            || (deadline != 0 && deadline <= now) {
            prop_assert!(maybe);
        }
    }

    #[test]
    fn the_real_msr_matches_the_model(s in any_state(), owns in any::<bool>()) {
        let debug = s.msr & DE != 0 && s.dbcr0 & (DBCR0_IDM | DBCR0_ICMP) == DBCR0_IDM | DBCR0_ICMP;
        prop_assert_eq!(msr::guest_debug_events(&s), debug);
        let want = VCPU_MSR
            | if owns && s.msr & FP != 0 { FP } else { 0 }
            | if debug { DE } else { 0 };
        prop_assert_eq!(msr::real_msr(&s, owns), want);
    }
}

// ---------------------------------------------------------------------------------------
// Timers

/// Rising edges of time-base bit `bit` in 1..=tb (the model counts the times `t` whose bit
/// turns on: t = 2^bit + k * 2^(bit+1)).
fn model_rises(tb: u64, bit: u32) -> u64 {
    let first = 1u64 << bit;
    if tb < first {
        0
    } else {
        (tb - first) / (1u64 << (bit + 1)) + 1
    }
}

/// A time on the guest's time base: 0 (never/stopped), early, or near its end (a guest can
/// write its time base, `mtspr TBU`).
fn near_start_or_end() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 1u64..1 << 40, (u64::MAX - (1 << 40))..=u64::MAX]
}

/// Regression (fuzz target `guestcpu`): `mtspr DEC` with the time base near its end
/// overflowed computing the deadline (a panic with overflow checks, else a deadline in the
/// past); the timers' reload and edge counts overflowed the same way.
#[test]
fn the_decrementer_and_timers_near_the_end_of_the_time_base() {
    let mut s = VcpuState::default();
    let end = u64::MAX;
    assert_eq!(
        spr::mtspr(&mut s, 22, 0x1000, end - 0x10),
        Ok(SprEffect::DecDeadline(end))
    );
    assert_eq!(
        spr::mtspr(&mut s, 22, 0x1000, end - 0x1000),
        Ok(SprEffect::DecDeadline(end))
    );
    assert_eq!(
        spr::mtspr(&mut s, 22, 0, end),
        Ok(SprEffect::DecDeadline(0))
    );
    assert_eq!(timer::dec_deadline(end - 0x1001, 0x1000), end - 1);
    // Auto-reload past the end, FIT and watchdog edges at the end.
    s.tcr = TCR_ARE | TCR_DIE | TCR_FIE | TCR_WIE;
    s.decar = u32::MAX;
    let mut t = Timers {
        dec_deadline: end - 10,
        timer_tb: end - (1 << 30),
    };
    timer::update(&mut s, &mut t, end);
    assert_eq!(
        t,
        Timers {
            dec_deadline: end,
            timer_tb: end
        }
    );
    assert_eq!(
        s.tsr & (TSR_DIS | TSR_FIS | TSR_ENW),
        TSR_DIS | TSR_FIS | TSR_ENW
    );
    timer::update(&mut s, &mut t, end);
    assert_eq!(t.dec_deadline, end, "at the end it stays due");
}

proptest! {
    #[test]
    fn timers_match_the_model(mut s in any_state(), deadline in near_start_or_end(),
                              last in near_start_or_end(), step in 0u64..1 << 32) {
        let now = last.saturating_add(step);
        s.tsr &= !(TSR_ENW | TSR_WIS | b(2) | b(3));
        let mut t = Timers { dec_deadline: deadline, timer_tb: last };
        let mut got = s;
        timer::update(&mut got, &mut t, now);
        let mut want = s;
        let mut wd = deadline;
        // FIT and watchdog: edges between the last check and now, only once there was one.
        if now > last && last != 0 {
            let fp = (s.tcr >> (31 - 7)) & 3;
            if s.tcr & TCR_FIE != 0 && model_rises(now, 13 + 4 * fp) > model_rises(last, 13 + 4 * fp) {
                want.tsr |= TSR_FIS;
            }
            let wrc = (s.tcr >> (31 - 3)) & 3;
            if s.tcr & TCR_WIE != 0 || wrc != 0 {
                let wp = s.tcr >> 30;
                let steps = model_rises(now, 17 + 4 * wp) - model_rises(last, 17 + 4 * wp);
                for _ in 0..steps.min(3) {
                    if want.tsr & TSR_ENW == 0 {
                        want.tsr |= TSR_ENW;
                    } else if want.tsr & TSR_WIS == 0 {
                        want.tsr |= TSR_WIS;
                    } else {
                        want.tsr |= wrc << (31 - 3);
                    }
                }
            }
        }
        // The decrementer: at its deadline it sets DIS, then reloads from DECAR (auto-reload)
        // to the first deadline after now, or stops at 0.
        if deadline != 0 && now >= deadline {
            want.tsr |= TSR_DIS;
            if s.tcr & TCR_ARE != 0 && s.decar != 0 {
                // The next deadline of the period after now, or the time base's end.
                let p = u128::from(s.decar);
                let d = u128::from(deadline) + (u128::from(now - deadline) / p + 1) * p;
                wd = u64::try_from(d).unwrap_or(u64::MAX);
            } else {
                wd = 0;
                want.dec = 0;
            }
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(t, Timers { dec_deadline: wd, timer_tb: now });
    }
}

// ---------------------------------------------------------------------------------------
// Decoding the privileged instructions

/// `tlbwe` (XO 978) or `tlbre` (XO 946) with any word select (the encoder refuses WS > 2).
fn tlb_word(xo: u32, rt: u32, ra: u32, ws: u32) -> u32 {
    (31 << 26) | (rt << 21) | (ra << 16) | (ws << 11) | (xo << 1)
}

proptest! {
    #[test]
    fn privileged_instructions_decode(rt in 0u32..32, ra in 0u32..32, rb in 0u32..32, n in 0u32..1024,
                                      e in any::<bool>(), ws in 0u32..4, rc in any::<bool>()) {
        let (r, a, bb) = (rt as usize, ra as usize, rb as usize);
        prop_assert_eq!(classify(encode::mfmsr(rt)), Privileged::Mfmsr { rt: r });
        prop_assert_eq!(classify(encode::mtmsr(rt)), Privileged::Mtmsr { rs: r });
        prop_assert_eq!(classify(encode::wrtee(rt)), Privileged::Wrtee { rs: r });
        prop_assert_eq!(classify(encode::wrteei(e)), Privileged::Wrteei { e });
        prop_assert_eq!(classify(encode::mfspr(rt, n)), Privileged::Mfspr { rt: r, spr: n });
        prop_assert_eq!(classify(encode::mtspr(n, rt)), Privileged::Mtspr { rs: r, spr: n });
        // Word selects above 2 decode too (the emulation then raises an illegal instruction).
        prop_assert_eq!(classify(tlb_word(978, rt, ra, ws)), Privileged::Tlb(TlbOp::We { rs: r, ra: a, ws }));
        prop_assert_eq!(classify(tlb_word(946, rt, ra, ws)), Privileged::Tlb(TlbOp::Re { rt: r, ra: a, ws }));
        if ws <= 2 {
            prop_assert_eq!(encode::tlbwe(rt, ra, ws), tlb_word(978, rt, ra, ws));
            prop_assert_eq!(encode::tlbre(rt, ra, ws), tlb_word(946, rt, ra, ws));
        }
        prop_assert_eq!(classify(encode::tlbsx(rt, ra, rb, rc)),
                        Privileged::Tlb(TlbOp::Sx { rt: r, ra: a, rb: bb, rc }));
        // mfdcr/mtdcr go to the VMM as they are; the indexed forms carry (RA).
        prop_assert_eq!(classify(encode::mfdcr(rt, n)), Privileged::Other);
        prop_assert_eq!(classify(encode::mtdcr(n, rt)), Privileged::Other);
        let x = |xo: u32| (31 << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1);
        prop_assert_eq!(classify(x(259)), Privileged::IndexedDcr { ra: a });
        prop_assert_eq!(classify(x(387)), Privileged::IndexedDcr { ra: a });
        prop_assert!(is_indexed_dcr(x(259)) && is_indexed_dcr(x(387)) && !is_indexed_dcr(encode::mfdcr(rt, n)));
        for xo in [566, 454, 966, 470] {
            // tlbsync, dccci, iccci, dcbi
            prop_assert_eq!(classify(x(xo)), Privileged::NoEffect);
        }
        let xl = |xo: u32| (19 << 26) | (xo << 1);
        prop_assert_eq!(classify(xl(50)), Privileged::Return(Return::Rfi));
        prop_assert_eq!(classify(xl(51)), Privileged::Return(Return::Rfci));
        prop_assert_eq!(classify(xl(38)), Privileged::Return(Return::Rfmci));
    }

    #[test]
    fn any_word_decodes_without_panic(w in any::<u32>()) {
        let p = classify(w);
        if let Privileged::Tlb(op) = p {
            prop_assert_eq!(TlbOp::decode(w), Some(op));
        }
    }
}

// ---------------------------------------------------------------------------------------
// TLB instructions through the vTLB, against testkit's reference TLB

#[derive(Clone, Debug)]
enum TlbStep {
    We {
        index: u32,
        word: u32,
        value: u32,
        tid: u8,
    },
    Re {
        index: u32,
        word: u32,
    },
    Sx {
        ea: u32,
        stid: u8,
        sts: bool,
        rc: bool,
        so: bool,
    },
}

fn tlb_step() -> impl Strategy<Value = TlbStep> {
    let index = 0u32..8;
    prop_oneof![
        3 => (index.clone(), 0u32..4, any::<u32>(), 0u8..4).prop_map(|(index, word, value, tid)| {
            // Valid entries of small pages near the anchors, so that searches hit.
            let value = if word == 0 { (value & 0x0003_f1ff) | 0x200 } else { value };
            TlbStep::We { index, word, value, tid }
        }),
        1 => (index, 0u32..4).prop_map(|(index, word)| TlbStep::Re { index, word }),
        2 => (0u32..0x0004_0000, 0u8..4, any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(ea, stid, sts, rc, so)| TlbStep::Sx { ea, stid, sts, rc, so }),
    ]
}

proptest! {
    #[test]
    fn tlb_instructions_match_the_reference(steps in prop::collection::vec(tlb_step(), 1..40)) {
        let mut tlb = GuestTlb::new();
        let mut model = RefTlb::new();
        for st in steps {
            let mut regs = FrameRegs::default();
            match st {
                TlbStep::We { index, word, value, tid } => {
                    let mmucr = u32::from(tid);
                    // Live: valid, and aligned to its size (a misaligned entry matches
                    // nothing); as (base, mask) over 32 bits.
                    let block = |m: &RefTlb| {
                        m.e[index as usize].block().map(|(lo, hi)| {
                            (lo as u32, (!(hi - lo - 1)) as u32)
                        })
                    };
                    let before = block(&model);
                    regs.gpr[3] = index;
                    regs.gpr[4] = value;
                    let (i, w, v) = tlb::tlbwe_operands(&regs, tlb_word(978, 4, 3, word));
                    prop_assert_eq!((i, w, v), (index, word, value));
                    let got = tlb::tlbwe(&mut tlb, mmucr, i, w, v);
                    let ok = model.tlbwe(index, word, value, mmucr);
                    prop_assert_eq!(got.is_ok(), ok);
                    if let Ok(wr) = got {
                        let after = block(&model);
                        prop_assert_eq!(wr.old, before);
                        prop_assert_eq!(wr.new, if word == 0 { after } else { before });
                        prop_assert_eq!(wr.is_dead(), before.is_none() && wr.new.is_none());
                    }
                }
                TlbStep::Re { index, word } => {
                    regs.gpr[5] = index;
                    regs.gpr[6] = 0xdead_beef;
                    let mut mmucr = 0x1234_5600;
                    let got = tlb::tlbre(&tlb, &mut mmucr, &mut regs, tlb_word(946, 6, 5, word));
                    match model.tlbre(index, word, 0x1234_5600) {
                        None => {
                            prop_assert!(got.is_err());
                            prop_assert_eq!(regs.gpr[6], 0xdead_beef);
                        }
                        Some((v, m)) => {
                            prop_assert!(got.is_ok());
                            prop_assert_eq!(regs.gpr[6], v);
                            prop_assert_eq!(mmucr, m.unwrap_or(0x1234_5600));
                        }
                    }
                }
                TlbStep::Sx { ea, stid, sts, rc, so } => {
                    let mmucr = u32::from(stid) | if sts { 1 << 16 } else { 0 };
                    regs.gpr[7] = ea.wrapping_sub(0x100);
                    regs.gpr[8] = 0x100;
                    regs.gpr[9] = 0x5555;
                    regs.cr = 0xf000_000f;
                    regs.xer = if so { 1 << 31 } else { 0 };
                    tlb::tlbsx(&tlb, mmucr, &mut regs, encode::tlbsx(9, 7, 8, rc));
                    let hit = model.first_match(ea, stid, sts);
                    prop_assert_eq!(regs.gpr[9], hit.map_or(0x5555, |i| i as u32));
                    // CR0 = LT GT EQ SO: EQ on a hit, SO from XER[SO]; CR1..7 kept.
                    let cr0 = if rc { (hit.is_some() as u32) << 1 | so as u32 } else { 0xf };
                    prop_assert_eq!(regs.cr, 0x0000_000f | cr0 << 28);
                    // RA = 0 means 0, not r0.
                    let mut r0 = regs;
                    r0.gpr[0] = 0x7777_0000;
                    r0.gpr[8] = ea;
                    tlb::tlbsx(&tlb, mmucr, &mut r0, encode::tlbsx(10, 0, 8, false));
                    prop_assert_eq!(r0.gpr[10], hit.map_or(0, |i| i as u32));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The split-space access plan

/// The model's string-register range: the set of `n` registers from `start`, wrapping.
fn model_in_range(start: usize, n: usize, r: usize) -> bool {
    (0..n).any(|i| (start + i) % 32 == r)
}

fn regs_from(words: &[u32]) -> FrameRegs {
    let mut r = FrameRegs::default();
    for (i, w) in words.iter().take(32).enumerate() {
        r.gpr[i] = *w;
    }
    r.xer = words.get(32).copied().unwrap_or(0);
    r.cr = words.get(33).copied().unwrap_or(0);
    r
}

proptest! {
    #[test]
    fn string_ranges_match_the_model(start in 0usize..32, n in 1usize..33, r in 0usize..32) {
        prop_assert_eq!(split::in_string_range(start, n, r), model_in_range(start, n, r));
    }

    #[test]
    fn loads_and_stores_are_planned_as_the_decoder_says(w in any::<u32>(), words in prop::collection::vec(any::<u32>(), 34)) {
        let regs = regs_from(&words);
        let mut r = regs;
        let step = split::plan(w, &mut r, false);
        if let PInsn::LoadStore(ls) = ppcdecode::decode(w) {
            let access = match ls.kind() { AccessKind::Load => Access::Read, AccessKind::Store => Access::Write };
            prop_assert_eq!(step, Step::Access(split::Plan {
                op: Op::Transfer(ls), ea: ls.effective_address(&regs.gpr), len: ls.access_len(), access,
            }));
            prop_assert_eq!(split::reads(Op::Transfer(ls)), ls.kind() == AccessKind::Load);
            prop_assert_eq!(split::writes(Op::Transfer(ls)), ls.kind() == AccessKind::Store);
        }
        if let PInsn::Invalid(_) = ppcdecode::decode(w) {
            prop_assert_eq!(step, Step::Illegal);
        }
        // Only an unaligned `stwcx.` changes registers while planning (CR0).
        if step != Step::Done {
            prop_assert_eq!(r, regs);
        }
    }

    #[test]
    fn reservations_and_strings_are_planned_as_the_model_says(rt in 0u32..32, ra in 0u32..32, rb in 0u32..32,
            words in prop::collection::vec(any::<u32>(), 34), debug in any::<bool>()) {
        let regs = regs_from(&words);
        let x = |xo: u32, rc: u32| (31 << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1) | rc;
        let base = if ra == 0 { 0 } else { regs.gpr[ra as usize] };
        let ea = base.wrapping_add(regs.gpr[rb as usize]);
        // lwarx: aligned only; not while the guest uses the debug events.
        let mut r = regs;
        let want = if ea & 3 != 0 {
            Step::Alignment { ea }
        } else if debug {
            Step::Unable("lwarx while the guest's own debug events are on")
        } else {
            Step::Access(split::Plan { op: Op::Reserve { rt: rt as usize }, ea, len: 4, access: Access::Read })
        };
        prop_assert_eq!(split::plan(x(20, 0), &mut r, debug), want);
        // stwcx.: an unaligned one fails at once (CR0 = 0 0 0 SO).
        let mut r = regs;
        let step = split::plan(x(150, 1), &mut r, debug);
        if ea & 3 != 0 {
            prop_assert_eq!(step, Step::Done);
            prop_assert_eq!(r.cr, (regs.cr & 0x0fff_ffff) | ((regs.xer >> 31) << 28));
        } else {
            prop_assert_eq!(step, Step::Access(split::Plan { op: Op::Conditional { rs: rt as usize }, ea, len: 4, access: Access::Write }));
        }
        // lswi / lswx / stswi / stswx.
        for (xo, load, immediate) in [(597, true, true), (533, true, false), (725, false, true), (661, false, false)] {
            let mut r = regs;
            let step = split::plan(x(xo, 0), &mut r, debug);
            let (sea, n) = if immediate { (base, if rb == 0 { 32 } else { rb }) } else { (ea, regs.xer & 0x7f) };
            let count = n.div_ceil(4) as usize;
            let (rt_, ra_, rb_) = (rt as usize, ra as usize, rb as usize);
            let want = if n == 0 {
                Step::Done
            } else if load && (((ra != 0 || immediate) && model_in_range(rt_, count, ra_))
                               || (!immediate && model_in_range(rt_, count, rb_))) {
                Step::Illegal
            } else {
                let op = if load { Op::StringLoad { rt: rt_ } } else { Op::StringStore { rs: rt_ } };
                Step::Access(split::Plan { op, ea: sea, len: n, access: if load { Access::Read } else { Access::Write } })
            };
            prop_assert_eq!(step, want, "xo {}", xo);
        }
        // dcbz: a whole cache line, aligned; dcbst/dcbf: translated like a one-byte load.
        let mut r = regs;
        prop_assert_eq!(split::plan(x(1014, 0), &mut r, debug),
            Step::Access(split::Plan { op: Op::Zero, ea: ea & !31, len: 32, access: Access::Write }));
        for xo in [54, 86] {
            prop_assert_eq!(split::plan(x(xo, 0), &mut r, debug),
                Step::Access(split::Plan { op: Op::Touch, ea, len: 1, access: Access::Read }));
        }
    }

    #[test]
    fn stored_bytes_load_back(words in prop::collection::vec(any::<u32>(), 34), rs in 0usize..32, n in 1u32..128,
                              fpr in prop::collection::vec(any::<u64>(), 33)) {
        let regs = regs_from(&words);
        let mut fp = [0u64; 33];
        fp.copy_from_slice(&fpr);
        // A string store then a string load of the same registers gives them back (the
        // last one zero-filled on the right).
        let mut bytes = vec![0u8; n as usize];
        split::store(Op::StringStore { rs }, &regs, &fp, &mut bytes);
        let mut back = FrameRegs::default();
        let mut f2 = fp;
        split::load(Op::StringLoad { rt: rs }, &bytes, &mut back, &mut f2);
        for i in 0..n.div_ceil(4) as usize {
            let r = (rs + i) % 32;
            let keep = 4 * (i as u32 + 1) <= n;
            let mask = if keep { u32::MAX } else { u32::MAX << (8 * (4 - (n % 4))) };
            prop_assert_eq!(back.gpr[r], regs.gpr[r] & mask);
        }
        // stw / lwz of one register, big-endian.
        let stw = encode::stw(rs as u32, 8, 1);
        let lwz = encode::lwz(((rs + 1) % 32) as u32, 8, 1);
        if let (PInsn::LoadStore(st), PInsn::LoadStore(ld)) = (ppcdecode::decode(stw), ppcdecode::decode(lwz)) {
            let mut b4 = [0u8; 4];
            split::store(Op::Transfer(st), &regs, &fp, &mut b4);
            prop_assert_eq!(b4, regs.gpr[rs].to_be_bytes());
            let mut out = regs;
            split::load(Op::Transfer(ld), &b4, &mut out, &mut f2);
            prop_assert_eq!(out.gpr[(rs + 1) % 32], regs.gpr[rs]);
        }
        // dcbz zeroes; conditional stores the register.
        let mut line = [0xffu8; 32];
        split::store(Op::Zero, &regs, &fp, &mut line);
        prop_assert_eq!(line, [0u8; 32]);
        let mut b4 = [0u8; 4];
        split::store(Op::Conditional { rs }, &regs, &fp, &mut b4);
        prop_assert_eq!(b4, regs.gpr[rs].to_be_bytes());
        // A reservation loads the word.
        let mut out = regs;
        split::load(Op::Reserve { rt: rs }, &b4, &mut out, &mut f2);
        prop_assert_eq!(out.gpr[rs], regs.gpr[rs]);
    }

    #[test]
    fn update_forms_write_the_effective_address(ra in 1u32..32, rt in 0u32..32, d in any::<i16>(),
                                                words in prop::collection::vec(any::<u32>(), 34)) {
        // stwu RS, D(RA): RA := EA after the access.
        let stwu = (37 << 26) | (rt << 21) | (ra << 16) | u32::from(d as u16);
        let regs = regs_from(&words);
        let mut r = regs;
        if let Step::Access(p) = split::plan(stwu, &mut r, false) {
            prop_assert_eq!(p.ea, regs.gpr[ra as usize].wrapping_add(d as i32 as u32));
            split::finish(&p, &mut r);
            prop_assert_eq!(r.gpr[ra as usize], p.ea);
        }
    }
}

#[test]
fn cr0_after_a_condition_matches_the_model() {
    for cr in [0u32, 0xffff_ffff, 0x1234_5678] {
        for so in [false, true] {
            for eq in [false, true] {
                let xer = if so { 0x8000_0000 } else { 0x7fff_ffff };
                let want = (cr & 0x0fff_ffff) | (eq as u32) << 29 | (so as u32) << 28;
                assert_eq!(tlb::cr0_eq(cr, xer, eq), want);
                assert_eq!(tlb::tlbsx_cr(cr, xer, eq), want);
            }
        }
    }
}

#[test]
fn split_plans_other_instructions_as_unable() {
    let mut r = FrameRegs::default();
    assert_eq!(
        split::plan(encode::mfmsr(3), &mut r, false),
        Step::Unable("not a load, store or cache operation")
    );
    // A zero-length string does nothing.
    let lswx = (31 << 26) | (3 << 21) | (4 << 16) | (5 << 11) | (533 << 1);
    assert_eq!(split::plan(lswx, &mut r, false), Step::Done);
    assert_eq!(split::be(&[1, 2, 3]), 0x010203);
    let mut out = [0u8; 3];
    split::put_be(&mut out, 0xaabbccdd);
    assert_eq!(out, [0xbb, 0xcc, 0xdd]);
}
