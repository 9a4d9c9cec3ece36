//! One rate limit for log lines that someone else decides the number of (a guest, a
//! program): the first [`Policy::first`] events are logged in full, later ones are counted
//! and reported in a summary at most once per [`Policy::interval`], and [`RateLimit::finish`]
//! gives what is still owed, so nothing is lost silently. Every console line is a polled
//! write in the kernel, so without a limit whoever causes the lines could flood the console
//! and slow everyone else.
//!
//! Users: the VMM's per-guest diagnostics (`kestrel_vmm_core::diag`, one limit per VM and
//! kind) and the root task's lines about its programs (one limit per program). Pure logic:
//! the caller passes the time (in any unit, time-base ticks in practice) and prints.

/// The limits: how many lines in full, and how often a summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Events logged in full.
    pub first: u32,
    /// Least time between two summary lines (or the last line in full and a summary).
    pub interval: u64,
}

/// What to do with one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Print the event's line. `last` is true for the final one in full: say that further
    /// ones are counted.
    Log { last: bool },
    /// Print a summary line instead (the event is counted in it): `suppressed` events were
    /// not logged since the last line, `total` happened in all.
    Summary { suppressed: u64, total: u64 },
    /// Print nothing; the event is counted for a later summary.
    Quiet,
}

/// One stream of events under one [`Policy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    policy: Policy,
    total: u64,
    /// Counted but in no line yet.
    suppressed: u64,
    /// Time of the last line (in full or summary).
    last_line: u64,
}

impl RateLimit {
    pub const fn new(policy: Policy) -> RateLimit {
        RateLimit {
            policy,
            total: 0,
            suppressed: 0,
            last_line: 0,
        }
    }

    /// Records one event at time `now` and says what to print.
    pub fn event(&mut self, now: u64) -> Verdict {
        let p = self.policy;
        self.total = self.total.saturating_add(1);
        if self.total <= p.first as u64 {
            self.last_line = now;
            return Verdict::Log {
                last: self.total == p.first as u64,
            };
        }
        self.suppressed += 1;
        if now.wrapping_sub(self.last_line) < p.interval {
            return Verdict::Quiet;
        }
        self.last_line = now;
        Verdict::Summary {
            suppressed: core::mem::take(&mut self.suppressed),
            total: self.total,
        }
    }

    /// Events so far.
    pub const fn total(&self) -> u64 {
        self.total
    }

    /// The summary still owed (`(suppressed, total)`), if some events are in no line yet;
    /// afterwards nothing is owed.
    pub fn finish(&mut self) -> Option<(u64, u64)> {
        (self.suppressed > 0).then(|| (core::mem::take(&mut self.suppressed), self.total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    const P: Policy = Policy {
        first: 3,
        interval: 100,
    };

    #[test]
    fn the_first_lines_are_logged_then_counted_then_summed_up() {
        let mut l = RateLimit::new(P);
        let v: Vec<_> = (0..5).map(|t| l.event(t)).collect();
        assert_eq!(
            v,
            [
                Verdict::Log { last: false },
                Verdict::Log { last: false },
                Verdict::Log { last: true },
                Verdict::Quiet,
                Verdict::Quiet
            ]
        );
        assert_eq!(l.total(), 5);
        assert_eq!(l.finish(), Some((2, 5)));
        assert_eq!(l.finish(), None);
    }

    #[test]
    fn a_summary_at_most_once_per_interval() {
        let mut l = RateLimit::new(P);
        for t in 0..3 {
            l.event(t);
        }
        for t in 3..102 {
            assert_eq!(l.event(t), Verdict::Quiet, "t {t}");
        }
        assert_eq!(
            l.event(102),
            Verdict::Summary {
                suppressed: 100,
                total: 103
            }
        );
        assert_eq!(l.event(103), Verdict::Quiet);
        assert_eq!(l.finish(), Some((1, 104)));
    }

    proptest! {
        /// For any stream: at most `first` lines in full, summaries no closer than the
        /// interval, and lines in full plus every summary (periodic and final) account for
        /// each event exactly once.
        #[test]
        fn every_event_is_accounted_for_once(
            gaps in proptest::collection::vec(0u64..50, 0..400),
            first in 0u32..6,
            interval in 1u64..300,
        ) {
            let mut l = RateLimit::new(Policy { first, interval });
            let (mut now, mut full, mut summed, mut sent) = (0u64, 0u64, 0u64, 0u64);
            let mut last_summary = None;
            for dt in gaps {
                now += dt;
                sent += 1;
                match l.event(now) {
                    Verdict::Log { last } => {
                        full += 1;
                        prop_assert_eq!(last, full == first as u64);
                    }
                    Verdict::Summary { suppressed, total } => {
                        prop_assert_eq!(total, sent);
                        if let Some(t) = last_summary {
                            prop_assert!(now - t >= interval);
                        }
                        last_summary = Some(now);
                        summed += suppressed;
                    }
                    Verdict::Quiet => {}
                }
            }
            if let Some((suppressed, total)) = l.finish() {
                prop_assert_eq!(total, sent);
                summed += suppressed;
            }
            prop_assert!(full <= first as u64);
            prop_assert_eq!(full + summed, sent);
        }
    }
}
