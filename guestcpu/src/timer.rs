//! The guest's timers: the decrementer, the fixed-interval timer and the watchdog (PPC440
//! UM §8.5-8.6 for the last two), brought up to a time `now` on the guest's time base. The
//! kernel keeps the decrementer as a deadline and looks at the timers only when the guest
//! traps or the kernel ticks, so several events may coalesce into one, as with a late
//! interrupt.

use crate::ppc440::{tcr, tsr};
use kestrel_abi::VcpuState;

/// A vCPU's timer state beside its architected registers (all on its guest time base).
/// `repr(C)`: the kernel's assembly reads the deadline by offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Timers {
    /// Time base value at which the decrementer reaches zero (0: stopped).
    pub dec_deadline: u64,
    /// Time base at the last fixed-interval / watchdog check (0: never).
    pub timer_tb: u64,
}

/// The deadline of a decrementer loaded with `dec` at guest time `now` (0: stopped). A
/// guest can put its time base anywhere (`mtspr TBU`), so the sum may not fit: the deadline
/// then saturates at the time base's last value rather than wrapping into the past.
#[inline(always)]
pub const fn dec_deadline(now: u64, dec: u32) -> u64 {
    if dec == 0 {
        0
    } else {
        now.saturating_add(dec as u64)
    }
}

/// Advances the timers to `now`: sets TSR[DIS] when the decrementer reached zero (reloading
/// it from DECAR with TCR[ARE], else stopping it at 0), and the FIT and watchdog status
/// bits on the edges that passed.
#[inline]
pub fn update(s: &mut VcpuState, t: &mut Timers, now: u64) {
    update_fit_watchdog(s, &mut t.timer_tb, now);
    let deadline = t.dec_deadline;
    if deadline == 0 || now < deadline {
        return;
    }
    s.tsr |= tsr::DIS;
    if s.tcr & tcr::ARE != 0 && s.decar != 0 {
        let period = s.decar as u64;
        let missed = (now - deadline) / period + 1;
        // Past the time base's end (a guest-written time base), the next deadline saturates
        // there, as [`dec_deadline`] does.
        t.dec_deadline = missed
            .checked_mul(period)
            .and_then(|d| deadline.checked_add(d))
            .unwrap_or(u64::MAX);
    } else {
        // A decrementer without auto-reload stops at 0.
        t.dec_deadline = 0;
        s.dec = 0;
    }
}

/// Rising edges of time-base bit `bit` (counted from the least significant, at least 1) up
/// to `tb`: ⌊(tb + 2^bit) / 2^(bit+1)⌋, computed without overflowing near the time base's
/// end (a guest can write its time base).
#[inline(always)]
fn rises(tb: u64, bit: u32) -> u64 {
    ((tb >> bit) + 1) >> 1
}

/// The fixed-interval timer and the watchdog (PPC440 UM §8.5-8.6): events on rising edges
/// of a time-base bit chosen by TCR[FP] (2^13/17/21/25 ticks) and TCR[WP] (2^17/21/25/29
/// ticks).
fn update_fit_watchdog(s: &mut VcpuState, timer_tb: &mut u64, now: u64) {
    let last = *timer_tb;
    *timer_tb = now;
    if now <= last || last == 0 {
        return;
    }
    // The timers only run while the guest enabled their interrupt (or, for the watchdog,
    // a reset): QEMU's bamboo never sets these status bits, and guests written against
    // it (like our selftest) expect TSR to stay clear otherwise.
    let fp = tcr::FP.get(s.tcr);
    if s.tcr & tcr::FIE != 0 && rises(now, 13 + 4 * fp) > rises(last, 13 + 4 * fp) {
        s.tsr |= tsr::FIS;
    }
    if s.tcr & (tcr::WIE | tcr::WRC.mask()) == 0 {
        return;
    }
    let wp = tcr::WP.get(s.tcr);
    let steps = rises(now, 17 + 4 * wp) - rises(last, 17 + 4 * wp);
    for _ in 0..steps.min(3) {
        if s.tsr & tsr::ENW == 0 {
            s.tsr |= tsr::ENW;
        } else if s.tsr & tsr::WIS == 0 {
            s.tsr |= tsr::WIS;
        } else {
            // Third expiry: TSR[WRS] = TCR[WRC]; a non-zero WRC resets (not modelled
            // beyond the status bits: the VMM sees no reset request).
            s.tsr |= tsr::WRS.put(tcr::WRC.get(s.tcr));
        }
    }
}
