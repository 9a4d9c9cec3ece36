//! Communicators and processes (rsmpi's `mpi::topology`): [`SimpleCommunicator`] and the
//! [`Communicator`] trait (rank, size, processes, duplicate, split), [`Process`] (one rank
//! of a communicator: a destination, a source and a root) and [`AnyProcess`] (a source
//! matching any rank).

use crate::environment::State;
use alloc::format;
use alloc::rc::Rc;
use core::fmt;
use kestrel_mpi::Comm;

/// Communicator traits.
pub mod traits {
    pub use super::{AsCommunicator, Communicator};
}

/// A process's rank in a communicator.
pub type Rank = i32;
/// The key that orders the ranks of a communicator made by a split.
pub type Key = i32;

/// One rank's handle on a communicator: what processes and requests hold. Users see it
/// through the [`Communicator`] trait.
#[derive(Clone)]
pub struct CommunicatorHandle {
    pub(crate) state: Rc<State>,
    pub(crate) comm: Comm,
}

impl CommunicatorHandle {
    pub(crate) fn call<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut dyn crate::backend::Backend, Comm) -> Result<T, kestrel_mpi::Error>,
    ) -> T {
        let c = self.comm;
        self.state.call(name, |b| f(b, c))
    }

    /// [`CommunicatorHandle::call`] for a collective ([`State::call_collective`]).
    pub(crate) fn call_collective<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut dyn crate::backend::Backend, Comm) -> Result<T, kestrel_mpi::Error>,
    ) -> T {
        let c = self.comm;
        self.state.call_collective(name, |b| f(b, c))
    }

    /// Ends the job with a face-level error.
    pub(crate) fn fail(&self, call: &str, class: &'static str, what: alloc::string::String) -> ! {
        self.state
            .fatal(call, crate::environment::Fault::Face(class, what))
    }
}

impl fmt::Debug for CommunicatorHandle {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Communicator({})", self.comm.0)
    }
}

#[doc(hidden)]
/// The handle behind a communicator, process or source (rsmpi keeps this sealed).
pub trait AsHandle {
    fn as_handle(&self) -> &CommunicatorHandle;
}

impl AsHandle for CommunicatorHandle {
    fn as_handle(&self) -> &CommunicatorHandle {
        self
    }
}

/// A value that is or belongs to a communicator.
pub trait AsCommunicator {
    /// The communicator's type.
    type Out: Communicator;
    /// The communicator.
    fn as_communicator(&self) -> &Self::Out;
}

/// A colour of a communicator split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Color(Option<u32>);

impl Color {
    /// MPI_UNDEFINED: the rank is in no part of the split.
    pub fn undefined() -> Color {
        Color(None)
    }

    /// A colour of value `value`, which must not be negative (panics otherwise, as rsmpi).
    pub fn with_value(value: i32) -> Color {
        match u32::try_from(value) {
            Ok(v) => Color(Some(v)),
            Err(_) => panic!("Value of color must be non-negative."),
        }
    }
}

/// MPI's communicator operations (rsmpi's `Communicator` trait).
pub trait Communicator: AsHandle {
    /// MPI_Comm_size.
    fn size(&self) -> Rank {
        self.as_handle().call("MPI_Comm_size", |b, c| b.size(c))
    }

    /// MPI_Comm_rank.
    fn rank(&self) -> Rank {
        self.as_handle().call("MPI_Comm_rank", |b, c| b.rank(c))
    }

    /// The process of rank `r`. Unlike rsmpi, a rank outside the communicator is not
    /// checked here: the call using the process fails with MPI_ERR_RANK (or MPI_ERR_ROOT),
    /// which is fatal, as MPI reports it.
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        Process {
            comm: self.as_handle(),
            rank: r,
        }
    }

    /// A source that matches any rank (MPI_ANY_SOURCE).
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess(self.as_handle())
    }

    /// The calling process.
    fn this_process(&self) -> Process<'_> {
        self.process_at_rank(self.rank())
    }

    /// MPI_Comm_dup: a new communicator with the same ranks, whose messages never match
    /// this one's. Collective. (A message on it that reaches a rank still making it waits
    /// there until the rank has it: `Mpi::made`.)
    fn duplicate(&self) -> SimpleCommunicator {
        let h = self.as_handle();
        let comm = h.call_collective("MPI_Comm_dup", |b, c| b.comm_dup(c));
        SimpleCommunicator::owned(h.state.clone(), comm)
    }

    /// MPI_Comm_split with key 0 (ranks keep their order): the communicator of the ranks
    /// with the same colour, `None` for [`Color::undefined`]. Collective.
    fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        self.split_by_color_with_key(color, 0)
    }

    /// MPI_Comm_split: ranks of one colour, ordered by `key` and then by their rank here.
    fn split_by_color_with_key(&self, color: Color, key: Key) -> Option<SimpleCommunicator> {
        let h = self.as_handle();
        let comm = h.call_collective("MPI_Comm_split", |b, c| b.comm_split(c, color.0, key))?;
        Some(SimpleCommunicator::owned(h.state.clone(), comm))
    }

    /// MPI_Abort: ends the job, with one line naming this rank and `errorcode`.
    fn abort(&self, errorcode: i32) -> ! {
        let h = self.as_handle();
        let line = format!(
            "rank {}: MPI_Abort: called with error code {errorcode}",
            h.state.rank()
        );
        h.state.end(&line, errorcode)
    }
}

impl Communicator for CommunicatorHandle {}

/// An intra-communicator: MPI_COMM_WORLD from [`crate::Universe::world`], or one made by
/// [`Communicator::duplicate`] or a split (freed when dropped, MPI_Comm_free).
pub struct SimpleCommunicator {
    h: CommunicatorHandle,
    owned: bool,
}

impl SimpleCommunicator {
    pub(crate) fn world(state: Rc<State>) -> SimpleCommunicator {
        SimpleCommunicator {
            h: CommunicatorHandle {
                state,
                comm: kestrel_mpi::WORLD,
            },
            owned: false,
        }
    }

    fn owned(state: Rc<State>, comm: Comm) -> SimpleCommunicator {
        SimpleCommunicator {
            h: CommunicatorHandle { state, comm },
            owned: true,
        }
    }
}

impl AsHandle for SimpleCommunicator {
    fn as_handle(&self) -> &CommunicatorHandle {
        &self.h
    }
}

impl Communicator for SimpleCommunicator {}

impl AsCommunicator for SimpleCommunicator {
    type Out = SimpleCommunicator;
    fn as_communicator(&self) -> &SimpleCommunicator {
        self
    }
}

impl Drop for SimpleCommunicator {
    fn drop(&mut self) {
        if self.owned && !self.h.state.is_finalized() && !crate::environment::panicking() {
            self.h.call("MPI_Comm_free", |b, c| b.comm_free(c));
        }
    }
}

impl fmt::Debug for SimpleCommunicator {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.h.fmt(f)
    }
}

/// One rank of a communicator.
#[derive(Clone, Copy)]
pub struct Process<'a> {
    comm: &'a CommunicatorHandle,
    rank: Rank,
}

impl Process<'_> {
    /// The process's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Whether this is the calling process.
    pub fn is_self(&self) -> bool {
        self.comm.rank() == self.rank
    }
}

impl AsHandle for Process<'_> {
    fn as_handle(&self) -> &CommunicatorHandle {
        self.comm
    }
}

impl AsCommunicator for Process<'_> {
    type Out = CommunicatorHandle;
    fn as_communicator(&self) -> &CommunicatorHandle {
        self.comm
    }
}

impl fmt::Debug for Process<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Process({:?}, rank {})", self.comm, self.rank)
    }
}

/// Any rank of a communicator, as a source (MPI_ANY_SOURCE).
#[derive(Clone, Copy)]
pub struct AnyProcess<'a>(&'a CommunicatorHandle);

impl AsHandle for AnyProcess<'_> {
    fn as_handle(&self) -> &CommunicatorHandle {
        self.0
    }
}

impl AsCommunicator for AnyProcess<'_> {
    type Out = CommunicatorHandle;
    fn as_communicator(&self) -> &CommunicatorHandle {
        self.0
    }
}

impl fmt::Debug for AnyProcess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AnyProcess({:?})", self.0)
    }
}
