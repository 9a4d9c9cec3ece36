//! The priority rules: who may set a thread's priority, and how high (L4 X.2 `Schedule`
//! and the scheduler of `ThreadControl`; `docs/adr/0013-priorities.md`).
//!
//! Every thread has a *scheduler* (a thread, named when the thread is created) and every
//! address space a *ceiling* (a priority). The kernel asks this module two questions:
//!
//! - [`schedule`]: may this caller give this thread this priority and timeslice? Only the
//!   thread's scheduler (any thread of the scheduler's space, as in L4) or the root space
//!   may, and never above the ceiling of the thread's space; a scheduler outside the root
//!   space (a delegated one) also never above its own space's ceiling, and never a
//!   timeslice longer than [`MAX_DELEGATED_TIMESLICE_US`].
//! - [`new_space_ceiling`]: what ceiling does a space created for a new thread get? The
//!   requested one or, without a request, the ceiling of the scheduler's space; never above
//!   the scheduler's space's ceiling, and never below the new thread's priority.
//!
//! Invariant (checked by the property tests below): a thread outside the root space can
//! never obtain, for any thread, a priority above its own space's ceiling; so a space's
//! threads can never outrank the ceiling the root task gave it, however schedulers are
//! delegated.

use kestrel_abi::{KError, MAX_DELEGATED_TIMESLICE_US, MAX_PRIORITY, MAX_TIMESLICE_US};

/// What the kernel knows about the caller of `Schedule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The caller runs in the privileged (root) space.
    pub privileged: bool,
    /// The caller is the destination's scheduler or a thread of the scheduler's space.
    pub is_scheduler: bool,
    /// The ceiling of the caller's own space.
    pub ceiling: u8,
}

/// Checks `Schedule(dest, prio, timeslice_us)` by `caller` on a thread whose space has
/// ceiling `target_ceiling`; `Ok(prio)` when the call may proceed. The caller's right is
/// checked first, so a thread that is not the scheduler learns nothing about ceilings.
pub fn schedule(
    caller: Caller,
    target_ceiling: u8,
    prio: u32,
    timeslice_us: u32,
) -> Result<u8, KError> {
    if !caller.privileged && !caller.is_scheduler {
        return Err(KError::NotScheduler);
    }
    let slice_limit = if caller.privileged {
        MAX_TIMESLICE_US
    } else {
        MAX_DELEGATED_TIMESLICE_US
    };
    if prio > MAX_PRIORITY || timeslice_us > slice_limit {
        return Err(KError::InvalidScheduler);
    }
    if prio > u32::from(target_ceiling) || (!caller.privileged && prio > u32::from(caller.ceiling))
    {
        return Err(KError::AboveCeiling);
    }
    Ok(prio as u8)
}

/// The ceiling of a space created for a new thread of priority `prio` whose scheduler's
/// space has ceiling `scheduler_ceiling`; `requested` is the creator's explicit ceiling
/// (`tcflags::CEILING`), if any.
pub fn new_space_ceiling(
    requested: Option<u32>,
    scheduler_ceiling: u8,
    prio: u32,
) -> Result<u8, KError> {
    let c = match requested {
        Some(c) if c > MAX_PRIORITY => return Err(KError::InvalidScheduler),
        Some(c) => c,
        None => u32::from(scheduler_ceiling),
    };
    if prio > MAX_PRIORITY {
        return Err(KError::InvalidScheduler);
    }
    if c > u32::from(scheduler_ceiling) || prio > c {
        return Err(KError::AboveCeiling);
    }
    Ok(c as u8)
}

/// Checks the priority `prio` of a thread created in, or moved within, an existing space
/// with ceiling `ceiling`.
pub fn fits_ceiling(prio: u32, ceiling: u8) -> Result<u8, KError> {
    if prio > MAX_PRIORITY {
        return Err(KError::InvalidScheduler);
    }
    if prio > u32::from(ceiling) {
        return Err(KError::AboveCeiling);
    }
    Ok(prio as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_abi::DEFAULT_TIMESLICE_US;
    use proptest::prelude::*;

    const CHILD: Caller = Caller {
        privileged: false,
        is_scheduler: false,
        ceiling: 90,
    };
    const ROOT: Caller = Caller {
        privileged: true,
        is_scheduler: false,
        ceiling: 255,
    };

    #[test]
    fn a_child_cannot_raise_itself() {
        // The finding: Schedule(self, 255) from a child space whose scheduler is the root.
        assert_eq!(schedule(CHILD, 90, 255, 0), Err(KError::NotScheduler));
        assert_eq!(schedule(CHILD, 90, 10, 0), Err(KError::NotScheduler));
    }

    #[test]
    fn the_scheduler_is_bound_by_both_ceilings() {
        let vmm = Caller {
            privileged: false,
            is_scheduler: true,
            ceiling: 99,
        };
        assert_eq!(schedule(vmm, 99, 90, 0), Ok(90));
        assert_eq!(schedule(vmm, 99, 99, 0), Ok(99));
        assert_eq!(schedule(vmm, 99, 100, 0), Err(KError::AboveCeiling));
        // A target space whose ceiling the root raised above the scheduler's own.
        assert_eq!(schedule(vmm, 200, 150, 0), Err(KError::AboveCeiling));
        assert_eq!(schedule(vmm, 50, 60, 0), Err(KError::AboveCeiling));
        assert_eq!(schedule(vmm, 99, 256, 0), Err(KError::InvalidScheduler));
        assert_eq!(
            schedule(vmm, 99, 90, DEFAULT_TIMESLICE_US + 1),
            Err(KError::InvalidScheduler)
        );
        assert_eq!(schedule(vmm, 99, 90, DEFAULT_TIMESLICE_US), Ok(90));
    }

    #[test]
    fn the_root_space_is_bound_by_the_target_ceiling_only() {
        assert_eq!(schedule(ROOT, 255, 255, MAX_TIMESLICE_US), Ok(255));
        assert_eq!(schedule(ROOT, 90, 91, 0), Err(KError::AboveCeiling));
        assert_eq!(
            schedule(ROOT, 255, 1, MAX_TIMESLICE_US + 1),
            Err(KError::InvalidScheduler)
        );
    }

    #[test]
    fn new_spaces_inherit_or_lower_the_ceiling() {
        assert_eq!(new_space_ceiling(None, 99, 90), Ok(99));
        assert_eq!(new_space_ceiling(Some(80), 99, 80), Ok(80));
        assert_eq!(
            new_space_ceiling(Some(80), 99, 81),
            Err(KError::AboveCeiling)
        );
        assert_eq!(
            new_space_ceiling(Some(100), 99, 90),
            Err(KError::AboveCeiling)
        );
        assert_eq!(new_space_ceiling(None, 90, 99), Err(KError::AboveCeiling));
        assert_eq!(
            new_space_ceiling(Some(256), 255, 1),
            Err(KError::InvalidScheduler)
        );
        assert_eq!(
            new_space_ceiling(None, 255, 300),
            Err(KError::InvalidScheduler)
        );
        assert_eq!(fits_ceiling(90, 90), Ok(90));
        assert_eq!(fits_ceiling(91, 90), Err(KError::AboveCeiling));
        assert_eq!(fits_ceiling(256, 255), Err(KError::InvalidScheduler));
    }

    proptest! {
        /// Whatever a caller outside the root space asks, a granted priority is within its
        /// own ceiling and the target's, and only a scheduler gets anything.
        #[test]
        fn delegation_never_exceeds_the_callers_ceiling(
            is_scheduler in any::<bool>(),
            own in any::<u8>(),
            target in any::<u8>(),
            prio in any::<u32>(),
            slice in any::<u32>(),
        ) {
            let c = Caller { privileged: false, is_scheduler, ceiling: own };
            if let Ok(p) = schedule(c, target, prio, slice) {
                prop_assert!(is_scheduler);
                prop_assert!(p <= own && p <= target);
                prop_assert_eq!(u32::from(p), prio);
                prop_assert!(slice <= MAX_DELEGATED_TIMESLICE_US);
            }
        }

        /// A chain of spaces, each created by a scheduler in the one before, never gets a
        /// ceiling (hence a thread) above the first space's ceiling.
        #[test]
        fn chains_of_spaces_stay_under_the_first_ceiling(
            first in any::<u8>(),
            steps in proptest::collection::vec((proptest::option::of(0u32..300), 0u32..300), 1..8),
        ) {
            let mut ceiling = first;
            for (requested, prio) in steps {
                if let Ok(c) = new_space_ceiling(requested, ceiling, prio) {
                    prop_assert!(c <= ceiling && prio <= u32::from(c));
                    ceiling = c;
                }
            }
            prop_assert!(ceiling <= first);
        }
    }
}
