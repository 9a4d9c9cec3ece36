//! The MPI core behind one object-safe trait, so that the face's types (`Universe`,
//! `SimpleCommunicator`, `Request`, ...) carry no fabric type parameter: the core is
//! `kestrel_mpi::Mpi<P>` for whatever fabric `P` the platform has (the service's client
//! on the target, the engine on the host), erased here once.

use alloc::string::String;
use alloc::vec::Vec;
use kestrel_fabric::FabricApi;
use kestrel_mpi::{Comm, Datatype, Error, Mpi, Op, Request, Status};

/// One rank's MPI core, whatever its fabric.
pub(crate) trait Backend {
    fn rank(&self, c: Comm) -> Result<i32, Error>;
    fn size(&self, c: Comm) -> Result<i32, Error>;
    fn isend(
        &mut self,
        c: Comm,
        dest: i32,
        tag: i32,
        data: &[u8],
        sync: bool,
    ) -> Result<Request, Error>;
    fn send(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error>;
    fn ssend(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error>;
    fn irecv(&mut self, c: Comm, src: i32, tag: i32, cap: usize) -> Result<Request, Error>;
    fn recv(&mut self, c: Comm, src: i32, tag: i32, buf: &mut [u8]) -> Result<Status, Error>;
    #[allow(clippy::too_many_arguments)]
    fn sendrecv(
        &mut self,
        c: Comm,
        data: &[u8],
        dest: i32,
        stag: i32,
        buf: &mut [u8],
        src: i32,
        rtag: i32,
    ) -> Result<Status, Error>;
    fn test(&mut self, r: Request) -> Result<Option<(Status, Vec<u8>)>, Error>;
    fn wait(&mut self, r: Request) -> Result<(Status, Vec<u8>), Error>;
    fn waitany(&mut self, rs: &[Request]) -> Result<(usize, Status, Vec<u8>), Error>;
    fn iprobe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Option<Status>, Error>;
    fn probe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Status, Error>;
    fn comm_dup(&mut self, c: Comm) -> Result<Comm, Error>;
    fn comm_split(&mut self, c: Comm, color: Option<u32>, key: i32) -> Result<Option<Comm>, Error>;
    fn comm_free(&mut self, c: Comm) -> Result<(), Error>;
    fn barrier(&mut self, c: Comm) -> Result<(), Error>;
    fn bcast(&mut self, c: Comm, buf: &mut [u8], root: i32) -> Result<(), Error>;
    fn allreduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
    ) -> Result<(), Error>;
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
        root: i32,
    ) -> Result<(), Error>;
    fn gather(&mut self, c: Comm, send: &[u8], recv: &mut [u8], root: i32) -> Result<(), Error>;
    fn scatter(&mut self, c: Comm, send: &[u8], recv: &mut [u8], root: i32) -> Result<(), Error>;
    fn allgather(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error>;
    fn alltoall(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error>;
    fn eager_max(&self) -> usize;
    fn deadlock_report(&self) -> Option<String>;
    /// Tells every rank of the job that this one ends it (`platform::signal_abort`).
    fn signal_abort(&mut self, code: i32);
    /// Gives the endpoint back to the fabric.
    fn detach(&mut self);
    /// Ends this rank if another rank ended the job (`platform::check_abort`).
    fn check_abort(&mut self);
}

/// The core with the platform's way of ending a rank that another rank ended.
pub(crate) struct Core<P: FabricApi> {
    pub(crate) mpi: Mpi<P>,
    pub(crate) ended: fn(&mut P, kestrel_fabric::EpId, u32) -> !,
}

impl<P: FabricApi> core::ops::Deref for Core<P> {
    type Target = Mpi<P>;
    fn deref(&self) -> &Mpi<P> {
        &self.mpi
    }
}

impl<P: FabricApi> core::ops::DerefMut for Core<P> {
    fn deref_mut(&mut self) -> &mut Mpi<P> {
        &mut self.mpi
    }
}

impl<P: FabricApi> Backend for Core<P> {
    fn rank(&self, c: Comm) -> Result<i32, Error> {
        Mpi::rank(self, c)
    }
    fn size(&self, c: Comm) -> Result<i32, Error> {
        Mpi::size(self, c)
    }
    fn isend(
        &mut self,
        c: Comm,
        dest: i32,
        tag: i32,
        data: &[u8],
        sync: bool,
    ) -> Result<Request, Error> {
        Mpi::isend(self, c, dest, tag, data, sync)
    }
    fn send(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error> {
        Mpi::send(self, c, dest, tag, data)
    }
    fn ssend(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<(), Error> {
        Mpi::ssend(self, c, dest, tag, data)
    }
    fn irecv(&mut self, c: Comm, src: i32, tag: i32, cap: usize) -> Result<Request, Error> {
        Mpi::irecv(self, c, src, tag, cap)
    }
    fn recv(&mut self, c: Comm, src: i32, tag: i32, buf: &mut [u8]) -> Result<Status, Error> {
        Mpi::recv(self, c, src, tag, buf)
    }
    fn sendrecv(
        &mut self,
        c: Comm,
        data: &[u8],
        dest: i32,
        stag: i32,
        buf: &mut [u8],
        src: i32,
        rtag: i32,
    ) -> Result<Status, Error> {
        Mpi::sendrecv(self, c, data, dest, stag, buf, src, rtag)
    }
    fn test(&mut self, r: Request) -> Result<Option<(Status, Vec<u8>)>, Error> {
        Mpi::test(self, r)
    }
    fn wait(&mut self, r: Request) -> Result<(Status, Vec<u8>), Error> {
        Mpi::wait(self, r)
    }
    fn waitany(&mut self, rs: &[Request]) -> Result<(usize, Status, Vec<u8>), Error> {
        Mpi::waitany(self, rs)
    }
    fn iprobe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Option<Status>, Error> {
        Mpi::iprobe(self, c, src, tag)
    }
    fn probe(&mut self, c: Comm, src: i32, tag: i32) -> Result<Status, Error> {
        Mpi::probe(self, c, src, tag)
    }
    fn comm_dup(&mut self, c: Comm) -> Result<Comm, Error> {
        Mpi::comm_dup(self, c)
    }
    fn comm_split(&mut self, c: Comm, color: Option<u32>, key: i32) -> Result<Option<Comm>, Error> {
        Mpi::comm_split(self, c, color, key)
    }
    fn comm_free(&mut self, c: Comm) -> Result<(), Error> {
        Mpi::comm_free(self, c)
    }
    fn barrier(&mut self, c: Comm) -> Result<(), Error> {
        Mpi::barrier(self, c)
    }
    fn bcast(&mut self, c: Comm, buf: &mut [u8], root: i32) -> Result<(), Error> {
        Mpi::bcast(self, c, buf, root)
    }
    fn allreduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
    ) -> Result<(), Error> {
        Mpi::allreduce(self, c, send, recv, dt, op)
    }
    fn reduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
        root: i32,
    ) -> Result<(), Error> {
        Mpi::reduce(self, c, send, recv, dt, op, root)
    }
    fn gather(&mut self, c: Comm, send: &[u8], recv: &mut [u8], root: i32) -> Result<(), Error> {
        Mpi::gather(self, c, send, recv, root)
    }
    fn scatter(&mut self, c: Comm, send: &[u8], recv: &mut [u8], root: i32) -> Result<(), Error> {
        Mpi::scatter(self, c, send, recv, root)
    }
    fn allgather(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        Mpi::allgather(self, c, send, recv)
    }
    fn alltoall(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        Mpi::alltoall(self, c, send, recv)
    }
    fn eager_max(&self) -> usize {
        self.limits_now().eager_max
    }
    fn deadlock_report(&self) -> Option<String> {
        Mpi::deadlock_report(self).map(String::from)
    }
    fn signal_abort(&mut self, code: i32) {
        let rank = Mpi::world_rank(self);
        let (p, dma) = self.dma();
        let ep = dma.ep;
        crate::platform::signal_abort(p, ep, rank, code);
    }
    fn detach(&mut self) {
        let (p, dma) = self.dma();
        let ep = dma.ep;
        p.detach(ep);
    }
    fn check_abort(&mut self) {
        let ended = self.ended;
        let (p, dma) = self.mpi.dma();
        let ep = dma.ep;
        crate::platform::check_abort(p, ep, ended);
    }
}
