//! The VMM's one rate limit for per-guest diagnostics (docs/adr/0014-diagnostics-and-time.md).
//!
//! A guest decides how often the VMM has something to say about it: every unhandled
//! instruction (and the program exception injected for it), every access to an unmodelled
//! device or DCR. Each such line also costs a polled console write in the kernel, so a guest
//! that repeats one in a loop would flood the console and slow every other VM and task. The
//! policy, the same for every kind and kept per VM:
//!
//! - the first [`Policy::first`] events of a kind are logged in full;
//! - after that, events of that kind are only counted; at most once per
//!   [`Policy::interval`] (time-base ticks) a new event of that kind brings a [`Summary`]
//!   line with the number not logged since the last line and the total so far;
//! - when the VM stops, [`LogLimit::finish`] gives the summaries still owed, so every event
//!   is accounted for in the log: nothing is lost silently.
//!
//! The counting is `kestrel_kcore::ratelimit` (one per VM and kind), the same limit the root
//! task puts on its lines about programs. Pure logic (the caller passes the time and
//! prints), tested on the host.

use core::fmt;

/// What the log says about a guest, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An instruction neither the kernel nor the VMM emulates (the guest gets a program
    /// exception), e.g. `mtspr`/`mfspr` of an SPR the 440 does not have.
    Instruction,
    /// A load or store at a device address nothing on the board answers (data storage
    /// exception).
    Device,
    /// `mfdcr`/`mtdcr` of a DCR nothing on the board answers (machine check).
    Dcr,
    /// An error or drop the BG/P interconnect or the virtio NIC reports for the guest: a
    /// bad DMA descriptor or FIFO pointer, a range-check failure, an access to a reserved
    /// register, a full FIFO that dropped a packet or frame.
    Interconnect,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Instruction,
        Kind::Device,
        Kind::Dcr,
        Kind::Interconnect,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// The plural noun of the summary lines.
    pub const fn plural(self) -> &'static str {
        match self {
            Kind::Instruction => "unhandled instructions",
            Kind::Device => "unmodelled device accesses",
            Kind::Dcr => "unmodelled DCR accesses",
            Kind::Interconnect => "interconnect errors",
        }
    }
}

pub use kestrel_kcore::ratelimit::Policy;
use kestrel_kcore::ratelimit::{self, RateLimit};

/// What to do with one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Print the event's line. `last` is true for the final one in full: say that further
    /// ones are counted (see [`LastInFull`]).
    Log { last: bool },
    /// Print this summary line instead (the event is counted in it).
    Summary(Summary),
    /// Print nothing; the event is counted for a later summary.
    Quiet,
}

/// A summary line: `suppressed` events of `kind` were not logged since the last line of
/// that kind, `total` happened in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub kind: Kind,
    pub suppressed: u64,
    pub total: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} more {} not logged ({} in all)",
            self.suppressed,
            self.kind.plural(),
            self.total
        )
    }
}

/// The note after the last line logged in full of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastInFull {
    pub kind: Kind,
    pub first: u32,
}

impl fmt::Display for LastInFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "that was the first {} of {}; further ones are counted, not logged",
            self.first,
            self.kind.plural()
        )
    }
}

/// One VM's limits, one [`RateLimit`] per [`Kind`] under the same [`Policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLimit {
    counts: [RateLimit; Kind::COUNT],
}

impl LogLimit {
    pub const fn new(policy: Policy) -> LogLimit {
        LogLimit {
            counts: [RateLimit::new(policy); Kind::COUNT],
        }
    }

    /// Records one event of `kind` at time `now` (time-base ticks) and says what to print.
    pub fn event(&mut self, kind: Kind, now: u64) -> Verdict {
        match self.counts[kind as usize].event(now) {
            ratelimit::Verdict::Log { last } => Verdict::Log { last },
            ratelimit::Verdict::Summary { suppressed, total } => Verdict::Summary(Summary {
                kind,
                suppressed,
                total,
            }),
            ratelimit::Verdict::Quiet => Verdict::Quiet,
        }
    }

    /// Events of `kind` so far.
    pub fn total(&self, kind: Kind) -> u64 {
        self.counts[kind as usize].total()
    }

    /// The summaries still owed (the VM stops): one per kind with events not in any line.
    pub fn finish(&mut self) -> impl Iterator<Item = Summary> + '_ {
        Kind::ALL.into_iter().filter_map(|kind| {
            self.counts[kind as usize]
                .finish()
                .map(|(suppressed, total)| Summary {
                    kind,
                    suppressed,
                    total,
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    const P: Policy = Policy {
        first: 3,
        interval: 100,
    };

    #[test]
    fn kinds_are_limited_separately() {
        let mut l = LogLimit::new(P);
        for t in 0..3 {
            assert!(matches!(l.event(Kind::Device, t), Verdict::Log { .. }));
        }
        assert_eq!(l.event(Kind::Device, 3), Verdict::Quiet);
        assert_eq!(l.event(Kind::Dcr, 4), Verdict::Log { last: false });
        assert_eq!(l.event(Kind::Instruction, 5), Verdict::Log { last: false });
        assert_eq!(l.total(Kind::Device), 4);
        // The counting itself is kcore::ratelimit's (tested there); owed per kind here.
        assert_eq!(
            l.finish().collect::<Vec<_>>(),
            [Summary {
                kind: Kind::Device,
                suppressed: 1,
                total: 4
            }]
        );
    }

    #[test]
    fn the_lines_read_well() {
        let s = Summary {
            kind: Kind::Instruction,
            suppressed: 113_239,
            total: 113_247,
        };
        assert_eq!(
            s.to_string(),
            "113239 more unhandled instructions not logged (113247 in all)"
        );
        assert_eq!(
            LastInFull {
                kind: Kind::Dcr,
                first: 8
            }
            .to_string(),
            "that was the first 8 of unmodelled DCR accesses; further ones are counted, not logged"
        );
    }

    proptest! {
        /// For any stream of events: at most `first` lines in full per kind, summaries no
        /// closer than the interval, and the lines in full plus every summary (periodic and
        /// final) account for each event exactly once.
        #[test]
        fn every_event_is_accounted_for_once(
            events in proptest::collection::vec((0usize..Kind::COUNT, 0u64..50), 0..400),
            first in 0u32..6,
            interval in 1u64..300,
        ) {
            let mut l = LogLimit::new(Policy { first, interval });
            let mut now = 0u64;
            let mut full = [0u64; Kind::COUNT];
            let mut summed = [0u64; Kind::COUNT];
            let mut last_summary: [Option<u64>; Kind::COUNT] = [None; Kind::COUNT];
            let mut sent = [0u64; Kind::COUNT];
            for (k, dt) in events {
                now += dt;
                let kind = Kind::ALL[k];
                sent[k] += 1;
                match l.event(kind, now) {
                    Verdict::Log { last } => {
                        full[k] += 1;
                        prop_assert_eq!(last, full[k] == first as u64);
                    }
                    Verdict::Summary(s) => {
                        prop_assert_eq!(s.kind, kind);
                        prop_assert_eq!(s.total, sent[k]);
                        if let Some(t) = last_summary[k] {
                            prop_assert!(now - t >= interval);
                        }
                        last_summary[k] = Some(now);
                        summed[k] += s.suppressed;
                    }
                    Verdict::Quiet => {}
                }
            }
            for s in l.finish() {
                prop_assert_eq!(s.total, sent[s.kind as usize]);
                summed[s.kind as usize] += s.suppressed;
            }
            for k in 0..Kind::COUNT {
                prop_assert!(full[k] <= first as u64);
                prop_assert_eq!(full[k] + summed[k], sent[k]);
            }
        }
    }
}
