//! Allocator for the PPC440's 8-bit process ids: the TID field of each TLB entry, matched
//! against the PID register (PPC440 core user's manual, "Memory Management": TLB entry
//! word 0 TID; TID 0 matches every PID).
//!
//! PID 0 is reserved for global (kernel) entries; 1..=255 form ONE pool shared by native
//! address spaces and guests: an owner is a native space (its space id, below
//! [`GUEST_OWNER`]) or a guest's (vCPU, guest PID, guest privilege), encoded by
//! [`guest_owner`], whose shadow TLB entries are tagged with it
//! (docs/adr/0024-tagged-shadow-tlb.md). When all are taken, the PID held longest is
//! stolen (FIFO): its owner loses it and the kernel must flush every TLB entry tagged with
//! it before reuse. So PIDs are only recycled, with a flush, when the pool runs dry.
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

/// Owners at or above this value are guest TIDs ([`guest_owner`]); native spaces are
/// below it.
pub const GUEST_OWNER: u16 = 0x8000;
/// vCPUs a guest owner can name (its vCPU index has this many values).
pub const GUEST_VCPUS: usize = 64;

/// The owner code of the TID for vCPU `vcpu` (below [`GUEST_VCPUS`]), guest PID
/// `guest_pid` and guest privilege `privileged` (guest `MSR[PR]` = 0).
pub const fn guest_owner(vcpu: usize, guest_pid: u8, privileged: bool) -> u16 {
    GUEST_OWNER
        | ((vcpu as u16 & (GUEST_VCPUS as u16 - 1)) << 9)
        | (guest_pid as u16) << 1
        | privileged as u16
}

/// The (vCPU, guest PID, privileged) of a guest owner code, or `None` for a native space.
pub const fn guest_of(owner: u16) -> Option<(usize, u8, bool)> {
    if owner & GUEST_OWNER == 0 {
        return None;
    }
    Some((
        ((owner >> 9) as usize) & (GUEST_VCPUS - 1),
        (owner >> 1) as u8,
        owner & 1 != 0,
    ))
}

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
    /// The lowest PID never handed out (256: none left). Fresh PIDs go in ascending order
    /// and never become fresh again, so every PID from here up is `Fresh`.
    fresh: u16,
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
            fresh: FIRST_PID as u16,
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
        self.alloc_new(space)
    }

    /// [`PidAllocator::alloc`] for an owner the caller knows holds no PID (it keeps its
    /// own owner → PID map), without the search for one.
    pub fn alloc_new(&mut self, space: u16) -> PidGrant {
        let (pid, evicted, flush) = if self.fresh <= u8::MAX as u16 {
            let pid = self.fresh as u8;
            self.fresh += 1;
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
    extern crate std;

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
    fn guest_owners_encode_vcpu_pid_and_privilege_apart_from_spaces() {
        let mut seen = std::collections::HashSet::new();
        for vcpu in [0usize, 1, 7, GUEST_VCPUS - 1] {
            for pid in [0u8, 1, 0x7F, 0xFF] {
                for privileged in [false, true] {
                    let o = guest_owner(vcpu, pid, privileged);
                    assert!(o >= GUEST_OWNER);
                    assert_eq!(guest_of(o), Some((vcpu, pid, privileged)));
                    assert!(seen.insert(o), "owner codes are distinct");
                }
            }
        }
        for space in [0u16, 1, 63, GUEST_OWNER - 1] {
            assert_eq!(guest_of(space), None);
        }
    }

    #[test]
    fn native_spaces_and_guests_share_one_pool() {
        let mut a = PidAllocator::new();
        let native = a.alloc(3);
        let guest = a.alloc_new(guest_owner(2, 9, true));
        assert_eq!((native.pid, guest.pid), (1, 2));
        for i in 0..253u16 {
            assert!(!a.alloc_new(guest_owner(1, i as u8, i >= 256)).flush);
        }
        // Dry: the longest-held TID (the native space's) goes to the next guest owner.
        let g = a.alloc_new(guest_owner(0, 0, false));
        assert_eq!(
            g,
            PidGrant {
                pid: 1,
                evicted: Some(3),
                flush: true
            }
        );
        let g = a.alloc(3);
        assert_eq!(
            (g.pid, g.evicted.and_then(guest_of)),
            (2, Some((2, 9, true)))
        );
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
