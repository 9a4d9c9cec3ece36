//! Collectives (rsmpi's `mpi::collective`): those of a whole communicator
//! ([`CommunicatorCollectives`]: barrier, all-gather, all-to-all, all-reduce) and those with
//! a root process ([`Root`]: broadcast, gather, scatter, reduce), with the predefined
//! reduction operations of [`SystemOperation`].
//!
//! How they run is the MPI core's (ADR 0035): on the world communicator the barrier and the
//! integer reductions (sum, max, min, logical and bitwise) use the collective network's
//! combining ALU; everything else (products, floats, derived communicators) combines along a
//! fixed binomial tree, lower ranks' partial results on the left, and an all-reduce
//! broadcasts rank 0's result, so every rank gets the same bits and a run repeats bit for bit.

use crate::datatype::{Buffer, BufferMut, DatatypeRef};
use crate::topology::{AsHandle, Communicator, CommunicatorHandle, Process, Rank};
use alloc::format;
use alloc::vec::Vec;
use kestrel_mpi::Op;

/// Collective traits.
pub mod traits {
    pub use super::{CommunicatorCollectives, Operation, Root};
}

/// A reduction operation.
pub trait Operation {
    /// The core's operation.
    fn op(&self) -> Op;

    /// Whether the operation is commutative (every predefined one is).
    fn is_commutative(&self) -> bool {
        true
    }
}

impl<T: Operation + ?Sized> Operation for &T {
    fn op(&self) -> Op {
        (**self).op()
    }
}

/// A predefined operation (MPI_SUM and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemOperation(Op);

impl SystemOperation {
    /// MPI_MAX.
    pub fn max() -> SystemOperation {
        SystemOperation(Op::Max)
    }
    /// MPI_MIN.
    pub fn min() -> SystemOperation {
        SystemOperation(Op::Min)
    }
    /// MPI_SUM (integers wrap around).
    pub fn sum() -> SystemOperation {
        SystemOperation(Op::Sum)
    }
    /// MPI_PROD (integers wrap around).
    pub fn product() -> SystemOperation {
        SystemOperation(Op::Prod)
    }
    /// MPI_LAND (integers only: non-zero is true, the result is 0 or 1).
    pub fn logical_and() -> SystemOperation {
        SystemOperation(Op::Land)
    }
    /// MPI_BAND (integers only).
    pub fn bitwise_and() -> SystemOperation {
        SystemOperation(Op::Band)
    }
    /// MPI_LOR.
    pub fn logical_or() -> SystemOperation {
        SystemOperation(Op::Lor)
    }
    /// MPI_BOR.
    pub fn bitwise_or() -> SystemOperation {
        SystemOperation(Op::Bor)
    }
    /// MPI_LXOR.
    pub fn logical_xor() -> SystemOperation {
        SystemOperation(Op::Lxor)
    }
    /// MPI_BXOR.
    pub fn bitwise_xor() -> SystemOperation {
        SystemOperation(Op::Bxor)
    }

    /// Every predefined operation, in the order above (not in rsmpi).
    pub fn all() -> [SystemOperation; 10] {
        [
            Self::max(),
            Self::min(),
            Self::sum(),
            Self::product(),
            Self::logical_and(),
            Self::bitwise_and(),
            Self::logical_or(),
            Self::bitwise_or(),
            Self::logical_xor(),
            Self::bitwise_xor(),
        ]
    }
}

impl Operation for SystemOperation {
    fn op(&self) -> Op {
        self.0
    }
}

/// The element datatype both buffers of a reduction share, or the end of the job.
fn same_type(
    h: &CommunicatorHandle,
    call: &str,
    a: DatatypeRef,
    b: DatatypeRef,
) -> kestrel_mpi::Datatype {
    if a.base() != b.base() {
        h.fail(
            call,
            "MPI_ERR_TYPE",
            format!(
                "send buffer of {:?} but receive buffer of {:?}",
                a.base(),
                b.base()
            ),
        );
    }
    a.base()
}

/// Collectives over every rank of a communicator.
pub trait CommunicatorCollectives: Communicator {
    /// MPI_Barrier: returns once every rank entered it.
    fn barrier(&self) {
        self.as_handle()
            .call_collective("MPI_Barrier", |b, c| b.barrier(c));
    }

    /// MPI_Allgather: every rank's `sendbuf` (of one length everywhere), concatenated in rank
    /// order, into every rank's `recvbuf`.
    fn all_gather_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        self.as_handle()
            .call_collective("MPI_Allgather", |b, c| b.allgather(c, send, recv));
    }

    /// MPI_Alltoall: block `r` of `sendbuf` to rank `r`, block `r` of `recvbuf` from it.
    fn all_to_all_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        self.as_handle()
            .call_collective("MPI_Alltoall", |b, c| b.alltoall(c, send, recv));
    }

    /// MPI_Allreduce: `op` over every rank's `sendbuf`, element by element, into every
    /// rank's `recvbuf` (the same bits on every rank).
    fn all_reduce_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
    {
        let h = self.as_handle();
        let dt = same_type(
            h,
            "MPI_Allreduce",
            sendbuf.as_datatype_ref(),
            recvbuf.as_datatype_ref(),
        );
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        let op = op.op();
        h.call_collective("MPI_Allreduce", |b, c| b.allreduce(c, send, recv, dt, op));
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// A buffer's element datatype as a value.
trait AsDatatypeRef {
    fn as_datatype_ref(&self) -> DatatypeRef;
}

impl<B: ?Sized + Buffer> AsDatatypeRef for B {
    fn as_datatype_ref(&self) -> DatatypeRef {
        crate::datatype::Datatype::datatype_ref(&self.as_datatype())
    }
}

/// Collectives with a root: called on the root's [`Process`] by every rank.
pub trait Root: AsHandle {
    /// The root's rank.
    fn root_rank(&self) -> Rank;

    /// MPI_Bcast: the root's `buffer` into every rank's.
    fn broadcast_into<Buf: ?Sized + BufferMut>(&self, buffer: &mut Buf) {
        let root = self.root_rank();
        let buf = buffer.bytes_mut();
        self.as_handle()
            .call_collective("MPI_Bcast", |b, c| b.bcast(c, buf, root));
    }

    /// MPI_Gather at a rank that is not the root: sends `sendbuf` to it.
    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        let h = self.as_handle();
        let root = self.root_rank();
        not_root(h, "MPI_Gather", root, "gather_into_root");
        let send = sendbuf.bytes();
        h.call_collective("MPI_Gather", |b, c| b.gather(c, send, &mut [], root));
    }

    /// MPI_Gather at the root: every rank's `sendbuf`, in rank order, into `recvbuf`.
    fn gather_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let h = self.as_handle();
        let root = self.root_rank();
        at_root(h, "MPI_Gather", root, "gather_into");
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        h.call_collective("MPI_Gather", |b, c| b.gather(c, send, recv, root));
    }

    /// MPI_Scatter at a rank that is not the root: its block of the root's buffer into
    /// `recvbuf`.
    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let h = self.as_handle();
        let root = self.root_rank();
        not_root(h, "MPI_Scatter", root, "scatter_into_root");
        let recv = recvbuf.bytes_mut();
        h.call_collective("MPI_Scatter", |b, c| b.scatter(c, &[], recv, root));
    }

    /// MPI_Scatter at the root: block `r` of `sendbuf` to rank `r`, its own into `recvbuf`.
    fn scatter_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let h = self.as_handle();
        let root = self.root_rank();
        at_root(h, "MPI_Scatter", root, "scatter_into");
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        h.call_collective("MPI_Scatter", |b, c| b.scatter(c, send, recv, root));
    }

    /// MPI_Reduce at a rank that is not the root: contributes `sendbuf`.
    fn reduce_into<S, O>(&self, sendbuf: &S, op: O)
    where
        S: ?Sized + Buffer,
        O: Operation,
    {
        let h = self.as_handle();
        let root = self.root_rank();
        not_root(h, "MPI_Reduce", root, "reduce_into_root");
        let dt = sendbuf.as_datatype_ref().base();
        let send = sendbuf.bytes();
        let op = op.op();
        h.call_collective("MPI_Reduce", |b, c| {
            b.reduce(c, send, &mut [], dt, op, root)
        });
    }

    /// MPI_Reduce at the root: `op` over every rank's `sendbuf` into `recvbuf`.
    fn reduce_into_root<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
    {
        let h = self.as_handle();
        let root = self.root_rank();
        at_root(h, "MPI_Reduce", root, "reduce_into");
        let dt = same_type(
            h,
            "MPI_Reduce",
            sendbuf.as_datatype_ref(),
            recvbuf.as_datatype_ref(),
        );
        let send = sendbuf.bytes();
        let recv = recvbuf.bytes_mut();
        let op = op.op();
        h.call_collective("MPI_Reduce", |b, c| b.reduce(c, send, recv, dt, op, root));
    }
}

/// The root calling a non-root form (or the other way round) is an error, as in rsmpi
/// (which panics): here it is MPI_ERR_ROOT and ends the job.
fn not_root(h: &CommunicatorHandle, call: &str, root: Rank, instead: &str) {
    if h.rank() == root {
        h.fail(
            call,
            "MPI_ERR_ROOT",
            format!("called by the root (rank {root}), which must use {instead}"),
        );
    }
}

fn at_root(h: &CommunicatorHandle, call: &str, root: Rank, instead: &str) {
    let me = h.rank();
    if me != root {
        h.fail(
            call,
            "MPI_ERR_ROOT",
            format!("called by rank {me}, not the root (rank {root}), which must use {instead}"),
        );
    }
}

impl Root for Process<'_> {
    fn root_rank(&self) -> Rank {
        self.rank()
    }
}

/// MPI_Reduce_local: `inoutbuf = inbuf op inoutbuf`, element by element, on this rank. An
/// operation not defined on the datatype (or buffers of different lengths) panics: there is
/// no communicator to end.
pub fn reduce_local_into<S, R, O>(inbuf: &S, inoutbuf: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    let (a, b) = (inbuf.as_datatype_ref(), inoutbuf.as_datatype_ref());
    assert_eq!(
        a.base(),
        b.base(),
        "MPI_ERR_TYPE: buffers of different datatypes"
    );
    let mut acc: Vec<u8> = inbuf.bytes().to_vec();
    if let Err(e) = kestrel_mpi::combine(op.op(), a.base(), &mut acc, inoutbuf.bytes()) {
        panic!("MPI_Reduce_local: {e}");
    }
    let out = inoutbuf.bytes_mut();
    if out.len() != acc.len() {
        panic!("MPI_Reduce_local: {}", kestrel_mpi::Error::Count);
    }
    out.copy_from_slice(&acc);
}
