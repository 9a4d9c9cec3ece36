//! The Rust face of Kestrel's MPI library (issue 19), shaped like rsmpi (the `mpi` crate,
//! 0.8): a program written against rsmpi's common calls builds against this crate with the
//! same `use` lines and runs on Kestrel's MPI core (`kestrel-mpi`, ADR 0035), natively on the
//! fabric service or, for tests, as threads over the fabric engine.
//!
//! ```no_run
//! use mpi::traits::*;
//! use mpi::collective::SystemOperation;
//!
//! let universe = mpi::initialize().unwrap();
//! let world = universe.world();
//! let (rank, size) = (world.rank(), world.size());
//! let next = world.process_at_rank((rank + 1) % size);
//! mpi::request::scope(|scope| {
//!     let sreq = next.immediate_send(scope, &rank);
//!     let (from, status) = world.any_process().receive::<i32>();
//!     assert_eq!(status.source_rank(), from);
//!     sreq.wait();
//! });
//! let mut sum = 0;
//! world.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
//! assert_eq!(sum, size * (size - 1) / 2);
//! ```
//!
//! # What is there, under rsmpi's names and shapes
//!
//! - Environment: [`initialize`], [`initialize_with_threading`], [`Universe::world`],
//!   [`time`], [`time_resolution`]; dropping the [`Universe`] is MPI_Finalize.
//! - [`topology`]: [`traits::Communicator`] (`rank`, `size`, `process_at_rank`,
//!   `any_process`, `this_process`, `duplicate`, `split_by_color`,
//!   `split_by_color_with_key`, `abort`), [`topology::SimpleCommunicator`],
//!   [`topology::Process`], [`topology::AnyProcess`], [`topology::Color`].
//! - [`point_to_point`]: [`traits::Destination`] (`send`, `send_with_tag`,
//!   `synchronous_send`, `immediate_send`, `immediate_synchronous_send`, each `_with_tag`),
//!   [`traits::Source`] (`receive`, `receive_into`, `receive_vec`, `probe`,
//!   `matched_probe`, `immediate_receive_into`, `immediate_receive`, `immediate_probe`,
//!   `immediate_matched_probe`, each `_with_tag`), [`point_to_point::Status`]
//!   (`source_rank`, `tag`, `count`), [`point_to_point::Message`],
//!   [`point_to_point::ReceiveFuture`], `send_receive`, `send_receive_into` and their
//!   `_with_tags` forms.
//! - [`request`]: [`request::scope`], [`request::Request`] (`wait`, `wait_without_status`,
//!   `test`), [`request::WaitGuard`], [`request::wait_any`], [`request::StaticScope`].
//! - [`collective`]: [`traits::CommunicatorCollectives`] (`barrier`, `all_gather_into`,
//!   `all_to_all_into`, `all_reduce_into`), [`traits::Root`] (`broadcast_into`,
//!   `gather_into`, `gather_into_root`, `scatter_into`, `scatter_into_root`, `reduce_into`,
//!   `reduce_into_root`), [`collective::SystemOperation`] (`sum`, `product`, `max`, `min`,
//!   `logical_and`, `logical_or`, `logical_xor`, `bitwise_and`, `bitwise_or`,
//!   `bitwise_xor`), [`collective::reduce_local_into`].
//! - [`datatype`]: [`traits::Equivalence`] for `i8`..`i64`, `u8`..`u64`, `f32`, `f64`,
//!   `usize`, `isize` and arrays of them; buffers are a value, a slice, a `Vec` or an array.
//!
//! # Errors are fatal
//!
//! As MPI's default (MPI_ERRORS_ARE_FATAL) and as rsmpi, no call returns an error: a call
//! that fails prints **one line naming the rank, the call and the error class**, e.g.
//!
//! ```text
//! rank 3: MPI_Send: MPI_ERR_RANK: no such rank in the communicator
//! rank 1: MPI_Recv: MPI_ERR_TRUNCATE: message longer than the receive buffer
//! rank 5: MPI_Recv: MPI_ERR_OTHER: deadlock: rank 5 waits in MPI_Recv (receive from source 0, tag 9, context 0) with no progress for 60000 ms: deadlock
//! ```
//!
//! and the job ends: the failing rank tells the others (one collective broadcast,
//! [`platform`]), each of them ends quietly at its next wait (and at the latest in its next
//! collective or in MPI_Finalize), and the failing rank ends (on Kestrel every program of the
//! job exits with code 1; on the host the threads panic, the failing one with the line).
//! [`traits::Communicator::abort`] ends the job the same way (`rank R: MPI_Abort: called with
//! error code N`; on Kestrel that rank exits with code N). Errors a program can make: a rank outside the communicator (MPI_ERR_RANK,
//! or MPI_ERR_ROOT for a root), a negative or too large tag (MPI_ERR_TAG), a receive buffer
//! too small (MPI_ERR_TRUNCATE), buffers of the wrong sizes for a collective
//! (MPI_ERR_COUNT), an operation not defined on the datatype, such as a bitwise operation on
//! floats (MPI_ERR_OP), send and receive buffers of different datatypes (MPI_ERR_TYPE), the
//! root form of a rooted collective called by another rank or the other way round
//! (MPI_ERR_ROOT), a call after the universe was dropped, and a blocking call that waits
//! with no progress for the platform's deadlock timeout (MPI_ERR_OTHER: deadlock, with the
//! core's line saying what the rank waits for). A negative count, an unknown datatype or an
//! unknown operation cannot be written here: counts are buffer lengths and datatypes and
//! operations are types and constructors.
//!
//! # Where it differs from rsmpi
//!
//! - **Platform.** There is no C library underneath: [`initialize`] starts the core on the
//!   platform the program runs on (`platform::kestrel` on the PowerPC 440,
//!   `platform::host` with the `host` feature); [`initialize_with`] starts it on any fabric
//!   (a [`platform::Job`]). The crate is `no_std` + `alloc`.
//! - **Threads.** The handles are not `Send`: only the thread that initialized MPI calls it
//!   ([`initialize_with_threading`] answers `Funneled`).
//! - **Ranks are checked by the call.** `process_at_rank(r)` takes any `r` (rsmpi asserts);
//!   the send, receive or collective then ends the job with MPI_ERR_RANK or MPI_ERR_ROOT, as
//!   MPI reports it.
//! - **Requests.** The core copies a send's data when it starts and completes a receive
//!   into its own buffer; the face copies that into the borrowed buffer when the request
//!   completes. The scope rules are rsmpi's (an unfinished request or scope panics when
//!   dropped) though nothing could be written after a scope ends. No `CancelGuard` or
//!   `cancel`, no `RequestCollection`/`multiple_scope`, no persistent requests.
//! - **Matched probes** are a probe plus a receive of that source and tag (the core has no
//!   MPI_Mprobe): the message received is the probed one unless another receive matching it
//!   is started in between.
//! - **Not offered:** user datatypes, `#[derive(Equivalence)]`, `bool`, complex numbers,
//!   `View`/`Partitioned` buffers and the varcount collectives, user operations, scans,
//!   reduce-scatter, nonblocking collectives, buffered and ready sends, groups, inter- and
//!   topology communicators, attributes, names, spawning. The core has MAXLOC/MINLOC, which
//!   rsmpi's `SystemOperation` does not name; this face does not either.
//! - **Arrays** `[T; N]` are `Equivalence` types themselves (one value of N elements), so a
//!   buffer `&[1, 2, 3]` counts 1 where rsmpi counts 3; the bytes sent, a receiver's
//!   `Status::count` of `T` and the reductions (element by element) are the same.
//! - **Additions:** [`Universe::eager_limit`], [`point_to_point::Status::bytes`],
//!   [`collective::SystemOperation::all`], [`TAG_UB`], and the checks of `selftest` (feature
//!   `selftest`); `count` of a size that is no whole number of the datatype is
//!   [`UNDEFINED`].
//!
//! # Reductions
//!
//! Integers wrap around; logical operations treat non-zero as true and give 0 or 1; floats
//! sum and multiply along the core's fixed tree (ADR 0035), so every rank gets the same bits
//! and the same inputs give the same bits on every run, but the order is the tree's, not
//! rank order; MAX and MIN of floats take the later operand only when it is larger (smaller).
#![cfg_attr(not(feature = "host"), no_std)]

extern crate alloc;

mod backend;
pub mod collective;
pub mod datatype;
pub mod environment;
pub mod platform;
pub mod point_to_point;
pub mod request;
#[cfg(feature = "selftest")]
pub mod selftest;
pub mod topology;

pub use environment::{
    initialize, initialize_with, initialize_with_threading, time, time_resolution, Threading,
    Universe,
};
pub use topology::Rank;

/// A message's tag: 0 to [`TAG_UB`].
pub type Tag = i32;
/// A count of elements.
pub type Count = i32;
/// The largest tag.
pub const TAG_UB: Tag = kestrel_mpi::TAG_UB;
/// MPI_UNDEFINED: what [`point_to_point::Status::count`] says of a partial element (as in
/// Kestrel's `mpi.h`).
pub const UNDEFINED: Count = -32766;

/// Every trait, for `use mpi::traits::*;`.
pub mod traits {
    pub use crate::collective::traits::*;
    pub use crate::datatype::traits::*;
    pub use crate::point_to_point::traits::*;
    pub use crate::topology::traits::*;
}
