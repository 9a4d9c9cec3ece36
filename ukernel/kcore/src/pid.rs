//! Allocator for the PPC440's 8-bit process ids: the TID field of each TLB entry, matched
//! against the PID register (PPC440 core user's manual, "Memory Management": TLB entry
//! word 0 TID; TID 0 matches every PID).
//!
//! PID 0 is reserved for global (kernel) entries; 1..=255 are handed to native address
//! spaces. When all are taken, the PID held longest is stolen (FIFO): its space loses its
//! PID and the kernel must flush every TLB entry tagged with it before reuse.
//!
//! Invariants:
//! - a PID is `Fresh` (never handed out), `Free` (handed out and released: the TLB may
//!   still hold entries tagged with it) or `Owned` by exactly one space;
//! - no space owns two PIDs;
//! - a grant has `flush == false` only for a `Fresh` PID or when the space already owned
//!   the PID, so stale translations can never leak between spaces.

/// Lowest PID handed to address spaces.
pub const FIRST_PID: u8 = 1;
/// Number of PIDs handed to address spaces (1..=255).
pub const NUM_PIDS: usize = 255;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Fresh,
    Free,
    /// `since` orders owners by allocation time for stealing.
    Owned {
        space: u16,
        since: u64,
    },
}

/// What [`PidAllocator::alloc`] handed out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PidGrant {
    pub pid: u8,
    /// The space the PID was stolen from: it no longer has a PID.
    pub evicted: Option<u16>,
    /// Flush all TLB entries with TID == `pid` before running with it.
    pub flush: bool,
}

/// Tracks which address space holds each hardware PID.
pub struct PidAllocator {
    /// Indexed by PID; entry 0 is unused.
    state: [State; 256],
    /// Allocation counter; 64 bits so it never wraps.
    clock: u64,
}

impl Default for PidAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl PidAllocator {
    pub const fn new() -> Self {
        PidAllocator {
            state: [State::Fresh; 256],
            clock: 0,
        }
    }

    /// Gives `space` a PID: a never-used one if any is left (no flush), else a released
    /// one (flush), else the one held longest, taken from its owner (flush, `evicted`).
    /// A space that already owns a PID gets the same PID back, with no flush.
    pub fn alloc(&mut self, space: u16) -> PidGrant {
        if let Some(pid) = self.pid_of(space) {
            return PidGrant {
                pid,
                evicted: None,
                flush: false,
            };
        }
        let (pid, evicted, flush) = if let Some(pid) = self.find(|s| s == State::Fresh) {
            (pid, None, false)
        } else if let Some(pid) = self.find(|s| s == State::Free) {
            (pid, None, true)
        } else {
            let (pid, victim) = self.oldest();
            (pid, Some(victim), true)
        };
        self.clock += 1;
        self.state[pid as usize] = State::Owned {
            space,
            since: self.clock,
        };
        PidGrant {
            pid,
            evicted,
            flush,
        }
    }

    /// Releases `pid` (its space is being destroyed or switched off native execution).
    /// Does nothing for PID 0 or a PID nobody owns.
    pub fn free(&mut self, pid: u8) {
        if pid >= FIRST_PID && matches!(self.state[pid as usize], State::Owned { .. }) {
            self.state[pid as usize] = State::Free;
        }
    }

    /// The space holding `pid`, if any.
    pub fn owner(&self, pid: u8) -> Option<u16> {
        match self.state[pid as usize] {
            State::Owned { space, .. } if pid >= FIRST_PID => Some(space),
            _ => None,
        }
    }

    /// The PID `space` holds, if any.
    pub fn pid_of(&self, space: u16) -> Option<u8> {
        self.find(|s| matches!(s, State::Owned { space: o, .. } if o == space))
    }

    /// Lowest PID whose state satisfies `pred`.
    fn find(&self, pred: impl Fn(State) -> bool) -> Option<u8> {
        (FIRST_PID..=u8::MAX).find(|&pid| pred(self.state[pid as usize]))
    }

    /// The owned PID with the oldest allocation, and its owner. Only called when every
    /// PID is owned.
    fn oldest(&self) -> (u8, u16) {
        let mut best = (FIRST_PID, 0u16, u64::MAX);
        for pid in FIRST_PID..=u8::MAX {
            if let State::Owned { space, since } = self.state[pid as usize] {
                if since < best.2 {
                    best = (pid, space, since);
                }
            }
        }
        (best.0, best.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_all_fresh_pids_without_flush_then_steals_fifo() {
        let mut a = PidAllocator::new();
        for space in 0..255u16 {
            let g = a.alloc(1000 + space);
            assert_eq!(
                g,
                PidGrant {
                    pid: space as u8 + 1,
                    evicted: None,
                    flush: false
                }
            );
        }
        assert_eq!(a.owner(255), Some(1254));
        assert_eq!(a.owner(0), None);
        // Exhausted: steal in allocation order.
        assert_eq!(
            a.alloc(1),
            PidGrant {
                pid: 1,
                evicted: Some(1000),
                flush: true
            }
        );
        assert_eq!(
            a.alloc(2),
            PidGrant {
                pid: 2,
                evicted: Some(1001),
                flush: true
            }
        );
        assert_eq!(a.pid_of(1000), None);
        assert_eq!(a.owner(1), Some(1));
        // The thief of PID 1 is now the newest holder: PID 3 goes next, then 4.
        assert_eq!(a.alloc(3).evicted, Some(1002));
        assert_eq!(
            a.alloc(4),
            PidGrant {
                pid: 4,
                evicted: Some(1003),
                flush: true
            }
        );
        // After all older holders were robbed, the first thief is robbed.
        for s in 5..=255u16 {
            assert_eq!(a.alloc(s).pid, s as u8);
        }
        assert_eq!(
            a.alloc(300),
            PidGrant {
                pid: 1,
                evicted: Some(1),
                flush: true
            }
        );
    }

    #[test]
    fn freed_pids_are_reused_before_stealing_and_need_a_flush() {
        let mut a = PidAllocator::new();
        let g = a.alloc(7);
        assert_eq!(
            g,
            PidGrant {
                pid: 1,
                evicted: None,
                flush: false
            }
        );
        a.free(1);
        assert_eq!(a.owner(1), None);
        // A fresh PID is still preferred over the freed one.
        assert_eq!(
            a.alloc(8),
            PidGrant {
                pid: 2,
                evicted: None,
                flush: false
            }
        );
        for s in 9..9 + 253u16 {
            assert!(!a.alloc(s).flush);
        }
        assert_eq!(
            a.alloc(500),
            PidGrant {
                pid: 1,
                evicted: None,
                flush: true
            }
        );
        a.free(40);
        a.free(0);
        a.free(40);
        assert_eq!(
            a.alloc(501),
            PidGrant {
                pid: 40,
                evicted: None,
                flush: true
            }
        );
        assert_eq!(a.alloc(502).evicted, Some(8));
    }

    #[test]
    fn owner_bookkeeping() {
        let mut a = PidAllocator::new();
        let p = a.alloc(42).pid;
        assert_eq!(a.owner(p), Some(42));
        assert_eq!(a.pid_of(42), Some(p));
        assert_eq!(
            a.alloc(42),
            PidGrant {
                pid: p,
                evicted: None,
                flush: false
            }
        );
        a.free(p);
        assert_eq!(a.pid_of(42), None);
        assert_eq!(a.owner(p), None);
    }
}
