//! Where a rank runs: what [`crate::initialize_with`] needs ([`Job`]), how a fatal error
//! ends the whole job ([`signal_abort`], [`abort_seen`]), and the two platforms: Kestrel's
//! fabric service (`kestrel`, on the PowerPC 440) and threads over the engine on the host
//! (`host`, feature `host`).
//!
//! **Ending the job.** The MPI core has no abort message, so the face has its own: a rank
//! whose call fails broadcasts one collective packet on the MPI class
//! ([`kestrel_mpi::CLASS`]) on virtual channel 0 (the core uses VC 1 and never reads VC 0;
//! bgnet uses VC 0 on its own class, which no MPI rank joins), the first word
//! [`ABORT_MAGIC`], then the rank and the error code. Every platform's `wait` (which the core
//! calls whenever a blocking call waits) looks at VC 0 with [`abort_seen`] and ends its rank
//! quietly when the packet is there. A rank that never blocks again ends when it finishes.

use kestrel_fabric::{EpId, FabricApi};
use kestrel_mpi::Env;
use kestrel_spi::tree;

#[cfg(feature = "host")]
pub mod host;
#[cfg(all(not(feature = "host"), target_arch = "powerpc"))]
pub mod kestrel;

/// The first word of the abort packet ("KABT").
pub const ABORT_MAGIC: u32 = 0x4b41_4254;
/// The collective virtual channel the abort packet goes on.
pub const ABORT_VC: usize = 0;

/// One rank of a job, as a platform starts it: [`crate::initialize_with`] runs MPI_Init
/// with it.
pub struct Job<P: FabricApi> {
    /// The fabric, with endpoint `ep` attached (its window at bus address `bus`).
    pub fabric: P,
    pub ep: EpId,
    pub bus: u64,
    /// This rank and the job's size.
    pub rank: u32,
    pub size: u32,
    /// The core's surroundings: its `wait` should call [`abort_seen`] and end the rank
    /// when another rank ended the job.
    pub env: Env<P>,
    /// Prints a fatal error's line and ends this rank with an exit code (1, or MPI_Abort's
    /// non-zero code); never returns. By the time it is called the other ranks have been
    /// told and the endpoint is detached.
    pub fatal: fn(&str, i32) -> !,
    /// Ends this rank quietly because rank `from` ended the job (what `env.wait` does when
    /// [`abort_seen`] says so); MPI_Finalize calls it too, so that no rank finishes
    /// normally in a job that another rank ended.
    pub ended: fn(&mut P, EpId, u32) -> !,
}

/// Broadcasts the abort packet from world rank `rank` on endpoint `ep`.
pub fn signal_abort<P: FabricApi>(p: &mut P, ep: EpId, rank: u32, code: i32) {
    let mut packet = [0u8; 256];
    packet[..4].copy_from_slice(&ABORT_MAGIC.to_be_bytes());
    packet[4..8].copy_from_slice(&rank.to_be_bytes());
    packet[8..12].copy_from_slice(&code.to_be_bytes());
    // Best effort: a fabric that refuses it leaves the others to their deadlock timeout.
    let _ = p.tree_inject(ep, ABORT_VC, tree::bcast(kestrel_mpi::CLASS, 0), &packet);
}

/// Ends the rank (the platform's [`Job::ended`]) if another rank ended the job.
pub(crate) fn check_abort<P: FabricApi>(p: &mut P, ep: EpId, ended: fn(&mut P, EpId, u32) -> !) {
    if let Some(from) = abort_seen(p, ep) {
        ended(p, ep, from)
    }
}

/// Takes what waits on VC 0 of `ep`: `Some(rank)` when a rank of the job ended it.
pub fn abort_seen<P: FabricApi>(p: &mut P, ep: EpId) -> Option<u32> {
    let mut packet = [0u8; 256];
    let mut seen = None;
    while let Ok(Some(_)) = p.tree_receive(ep, ABORT_VC, &mut packet) {
        if packet[..4] == ABORT_MAGIC.to_be_bytes() {
            let rank = u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
            seen.get_or_insert(rank);
        }
    }
    seen
}
