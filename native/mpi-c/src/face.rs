//! The C face's state and calls over the MPI core: one rank's [`Face`] holds the core
//! (`kestrel_mpi::Mpi`), the communicator table (with error handlers) and the request table,
//! and implements each MPI call on decoded arguments: handles as C ints, ranks and tags as
//! the program passed them (validated here, [`crate::args`]), buffers as byte slices of the
//! right length (the extern "C" layer, `cface`, makes them from the program's pointers after
//! checking counts and datatypes). Every call validates all of its arguments before the core
//! does anything, then calls the core, then builds `MPI_Status`.
//!
//! Generic over [`FabricApi`], so the host tests run it over the engine (`tests/face.rs`) and
//! the library over the fabric service.
//!
//! Reductions: on types the core knows (every one but long double) the core's own, so
//! integer reductions on `MPI_COMM_WORLD` use the collective network's ALU and floating
//! ones the core's fixed binomial tree (the same bits on every rank and every run, ADR
//! 0035). `MPI_LONG_DOUBLE` and `MPI_LONG_DOUBLE_INT`, which Rust cannot represent, are
//! gathered to the root and folded there in rank order with the C kernels
//! ([`crate::reduce`]), then broadcast for `MPI_Allreduce`: a fixed order too.

use crate::abi::{self, MPI_Status};
use crate::args;
use crate::datatype::Datatype;
use crate::error::ErrorClass;
use crate::handles::{Comms, Errhandler, Requests};
use crate::op::Op;
use crate::reduce::reduce_local;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::ffi::c_int;
use kestrel_fabric::FabricApi;
use kestrel_mpi::{Comm, Mpi, Request, Status};

/// A receive buffer that outlives the call that posted it (`MPI_Irecv`): where it is in the
/// program's memory and its length in bytes (count × extent). Only the extern "C" layer
/// turns it back into memory, when the request completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvBuf {
    pub addr: usize,
    pub len: usize,
    pub datatype: Datatype,
}

/// A pending request: the core's, the communicator its errors go to, and for a receive the
/// buffer its data goes to.
#[derive(Debug)]
struct Pending {
    req: Request,
    comm: c_int,
    recv: Option<RecvBuf>,
}

/// A completed request: its status, and for a receive the data (type-signature bytes) and
/// the buffer to unpack them into ([`args::unpack`]).
#[derive(Debug)]
pub struct Completion {
    pub status: MPI_Status,
    pub data: Vec<u8>,
    pub recv: Option<RecvBuf>,
}

/// One rank's MPI library behind the C face.
pub struct Face<P: FabricApi> {
    mpi: Mpi<P>,
    comms: Comms,
    reqs: Requests<Pending>,
    /// The core's error behind the last failed call.
    last: Cell<Option<kestrel_mpi::Error>>,
}

/// A core call's result with its error as a class; the error itself is kept in `last` (the
/// fatal line says more than the class: a deadlock's report, the fabric's refusal).
fn core<T>(
    last: &Cell<Option<kestrel_mpi::Error>>,
    r: Result<T, kestrel_mpi::Error>,
) -> Result<T, ErrorClass> {
    r.map_err(|e| {
        last.set(Some(e));
        args::class(e)
    })
}

impl<P: FabricApi> Face<P> {
    /// The face over a core just initialized (`Mpi::init` returned): `MPI_Init`'s end. (The
    /// core's wire-up is an ALU census that every rank leaves together, ADR 0035: nothing
    /// more is needed before the first collective.)
    pub fn start(mpi: Mpi<P>) -> Result<Face<P>, ErrorClass> {
        let last = Cell::new(None);
        Ok(Face {
            mpi,
            comms: Comms::new(),
            reqs: Requests::new(),
            last,
        })
    }

    /// The core (for the platform's own uses: the deadlock report, detaching at the end).
    pub fn core(&mut self) -> &mut Mpi<P> {
        &mut self.mpi
    }

    /// The core's error behind the last call that failed in the core (then forgotten).
    pub fn take_core_error(&self) -> Option<kestrel_mpi::Error> {
        self.last.take()
    }

    /// This rank in `MPI_COMM_WORLD`.
    pub fn world_rank(&self) -> u32 {
        self.mpi.world_rank()
    }

    // ---- communicators ------------------------------------------------------------

    /// The core's communicator behind a handle (`Err(Comm)` if none).
    pub fn comm(&self, h: c_int) -> Result<Comm, ErrorClass> {
        self.comms.get(h)
    }

    /// The error handler for a call's error on `h` (MPI_COMM_WORLD's for a bad handle).
    pub fn errhandler(&self, h: c_int) -> Errhandler {
        self.comms.errhandler(h)
    }

    /// The communicator a pending request's errors go to (MPI_COMM_WORLD if it is none).
    pub fn request_comm(&self, r: c_int) -> c_int {
        self.reqs.get(r).map_or(abi::MPI_COMM_WORLD, |p| p.comm)
    }

    /// `MPI_Comm_set_errhandler`.
    pub fn set_errhandler(&mut self, h: c_int, e: c_int) -> Result<(), ErrorClass> {
        self.comm(h)?;
        let e = Errhandler::from_handle(e)?;
        self.comms.set_errhandler(h, e)
    }

    /// `MPI_Comm_rank`.
    pub fn rank(&self, h: c_int) -> Result<c_int, ErrorClass> {
        core(&self.last, self.mpi.rank(self.comm(h)?))
    }

    /// `MPI_Comm_size`.
    pub fn size(&self, h: c_int) -> Result<c_int, ErrorClass> {
        core(&self.last, self.mpi.size(self.comm(h)?))
    }

    /// `MPI_Comm_dup`: the new communicator's handle.
    pub fn comm_dup(&mut self, h: c_int) -> Result<c_int, ErrorClass> {
        let c = self.comm(h)?;
        self.comms.room()?;
        let new = core(&self.last, self.mpi.comm_dup(c))?;
        self.comms.add(new, h)
    }

    /// `MPI_Comm_split`: the new communicator's handle, `MPI_COMM_NULL` for `MPI_UNDEFINED`.
    pub fn comm_split(&mut self, h: c_int, color: c_int, key: c_int) -> Result<c_int, ErrorClass> {
        let c = self.comm(h)?;
        let color = args::split_color(color)?;
        self.comms.room()?;
        let new = core(&self.last, self.mpi.comm_split(c, color, key))?;
        match new {
            Some(new) => self.comms.add(new, h),
            None => Ok(abi::MPI_COMM_NULL),
        }
    }

    /// `MPI_Comm_free` (not of `MPI_COMM_WORLD` or `MPI_COMM_SELF`: `Err(Comm)`).
    pub fn comm_free(&mut self, h: c_int) -> Result<(), ErrorClass> {
        let c = self.comm(h)?;
        if h == abi::MPI_COMM_WORLD || h == abi::MPI_COMM_SELF {
            return Err(ErrorClass::Comm);
        }
        core(&self.last, self.mpi.comm_free(c))?;
        self.comms.remove(h).map(|_| ())
    }

    fn comm_size(&self, h: c_int) -> Result<(Comm, i32), ErrorClass> {
        let c = self.comm(h)?;
        Ok((c, core(&self.last, self.mpi.size(c))?))
    }

    // ---- point to point -------------------------------------------------------------

    /// `MPI_Send` (`sync`: `MPI_Ssend`) of `buf`, `count` elements of `dt`.
    pub fn send(
        &mut self,
        h: c_int,
        dest: c_int,
        tag: c_int,
        dt: Datatype,
        buf: &[u8],
        sync: bool,
    ) -> Result<(), ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let dest = args::dest(dest, n)?;
        let tag = args::send_tag(tag)?;
        let data = args::pack(dt, buf);
        if sync {
            core(&self.last, self.mpi.ssend(c, dest, tag, &data))
        } else {
            core(&self.last, self.mpi.send(c, dest, tag, &data))
        }
    }

    /// `MPI_Isend` (`sync`: `MPI_Issend`): the request's handle. The data is copied; the
    /// buffer is the program's again at return.
    pub fn isend(
        &mut self,
        h: c_int,
        dest: c_int,
        tag: c_int,
        dt: Datatype,
        buf: &[u8],
        sync: bool,
    ) -> Result<c_int, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let dest = args::dest(dest, n)?;
        let tag = args::send_tag(tag)?;
        self.reqs.room()?;
        let data = args::pack(dt, buf);
        let req = core(&self.last, self.mpi.isend(c, dest, tag, &data, sync))?;
        self.reqs.insert(Pending {
            req,
            comm: h,
            recv: None,
        })
    }

    /// Wire bytes a receive into `len` buffer bytes of `dt` takes.
    fn capacity(dt: Datatype, len: usize) -> usize {
        len / dt.extent() * dt.size()
    }

    /// `MPI_Recv` into `buf`, whole elements of `dt`: the status, whose `MPI_ERROR` is the
    /// receive's own error (`MPI_ERR_TRUNCATE`: the first bytes that fit are in `buf`).
    pub fn recv(
        &mut self,
        h: c_int,
        src: c_int,
        tag: c_int,
        dt: Datatype,
        buf: &mut [u8],
    ) -> Result<MPI_Status, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let src = args::source(src, n)?;
        let tag = args::recv_tag(tag)?;
        let cap = Self::capacity(dt, buf.len());
        if args::packed_as_is(dt) {
            // The wire bytes are the buffer's: received in place (a large message straight
            // from the sender where the buffer lies in the window, ADR 0039).
            let st = core(
                &self.last,
                self.mpi.recv_status(c, src, tag, &mut buf[..cap]),
            )?;
            return Ok(args::status(&st));
        }
        let r = core(&self.last, self.mpi.irecv(c, src, tag, cap))?;
        let (st, data) = core(&self.last, self.mpi.wait(r))?;
        args::unpack(dt, &data, buf);
        Ok(args::status(&st))
    }

    /// `MPI_Irecv` into `into`: the request's handle.
    pub fn irecv(
        &mut self,
        h: c_int,
        src: c_int,
        tag: c_int,
        into: RecvBuf,
    ) -> Result<c_int, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let src = args::source(src, n)?;
        let tag = args::recv_tag(tag)?;
        self.reqs.room()?;
        let cap = Self::capacity(into.datatype, into.len);
        let req = core(&self.last, self.mpi.irecv(c, src, tag, cap))?;
        self.reqs.insert(Pending {
            req,
            comm: h,
            recv: Some(into),
        })
    }

    /// `MPI_Sendrecv`: sends `sbuf` (elements of `sdt`) to `dest` and receives into `rbuf`
    /// (elements of `rdt`) from `src` at once; the receive's status.
    #[allow(clippy::too_many_arguments)]
    pub fn sendrecv(
        &mut self,
        h: c_int,
        sbuf: &[u8],
        sdt: Datatype,
        dest: c_int,
        stag: c_int,
        rbuf: &mut [u8],
        rdt: Datatype,
        src: c_int,
        rtag: c_int,
    ) -> Result<MPI_Status, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let dest = args::dest(dest, n)?;
        let stag = args::send_tag(stag)?;
        let src = args::source(src, n)?;
        let rtag = args::recv_tag(rtag)?;
        let data = args::pack(sdt, sbuf);
        let rr = core(
            &self.last,
            self.mpi
                .irecv(c, src, rtag, Self::capacity(rdt, rbuf.len())),
        )?;
        let sr = core(&self.last, self.mpi.isend(c, dest, stag, &data, false))?;
        let mut done = core(&self.last, self.mpi.waitall(&[rr, sr]))?;
        let (st, got) = done.swap_remove(0);
        args::unpack(rdt, &got, rbuf);
        Ok(args::status(&st))
    }

    /// `MPI_Iprobe`: the status of a message a receive of (`src`, `tag`) would match now.
    pub fn iprobe(
        &mut self,
        h: c_int,
        src: c_int,
        tag: c_int,
    ) -> Result<Option<MPI_Status>, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let src = args::source(src, n)?;
        let tag = args::recv_tag(tag)?;
        Ok(core(&self.last, self.mpi.iprobe(c, src, tag))?.map(|st| args::status(&st)))
    }

    /// `MPI_Probe`.
    pub fn probe(&mut self, h: c_int, src: c_int, tag: c_int) -> Result<MPI_Status, ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let src = args::source(src, n)?;
        let tag = args::recv_tag(tag)?;
        Ok(args::status(&core(
            &self.last,
            self.mpi.probe(c, src, tag),
        )?))
    }

    // ---- completion ---------------------------------------------------------------

    fn completion(p: Pending, st: &Status, data: Vec<u8>) -> Completion {
        let status = match p.recv {
            Some(_) => args::status(st),
            // A send's status says only whether it failed.
            None => MPI_Status {
                MPI_ERROR: args::status(st).MPI_ERROR,
                ..args::empty_status()
            },
        };
        Completion {
            status,
            data,
            recv: p.recv,
        }
    }

    /// The core's requests behind `rs`, whose non-null handles must be live and distinct
    /// (`Err(Request)`); the positions of the non-null ones.
    fn live(&self, rs: &[c_int]) -> Result<(Vec<usize>, Vec<Request>), ErrorClass> {
        let mut at = Vec::new();
        let mut core = Vec::new();
        for (i, &r) in rs.iter().enumerate() {
            if r == abi::MPI_REQUEST_NULL {
                continue;
            }
            if rs[..i].contains(&r) {
                return Err(ErrorClass::Request);
            }
            at.push(i);
            core.push(self.reqs.get(r)?.req);
        }
        Ok((at, core))
    }

    /// `MPI_Wait`: the completion of `r` (None for `MPI_REQUEST_NULL`); the handle is then
    /// free.
    pub fn wait(&mut self, r: c_int) -> Result<Option<Completion>, ErrorClass> {
        if r == abi::MPI_REQUEST_NULL {
            return Ok(None);
        }
        let req = self.reqs.get(r)?.req;
        let (st, data) = core(&self.last, self.mpi.wait(req))?;
        let p = self.reqs.take(r)?;
        Ok(Some(Self::completion(p, &st, data)))
    }

    /// `MPI_Test`: `Some` once `r` is complete (`Some(None)` for `MPI_REQUEST_NULL`).
    pub fn test(&mut self, r: c_int) -> Result<Option<Option<Completion>>, ErrorClass> {
        if r == abi::MPI_REQUEST_NULL {
            return Ok(Some(None));
        }
        let req = self.reqs.get(r)?.req;
        match core(&self.last, self.mpi.test(req))? {
            None => Ok(None),
            Some((st, data)) => {
                let p = self.reqs.take(r)?;
                Ok(Some(Some(Self::completion(p, &st, data))))
            }
        }
    }

    fn take_all(
        &mut self,
        rs: &[c_int],
        at: &[usize],
        done: Vec<(Status, Vec<u8>)>,
    ) -> Result<Vec<Option<Completion>>, ErrorClass> {
        let mut out: Vec<Option<Completion>> = rs.iter().map(|_| None).collect();
        for (&i, (st, data)) in at.iter().zip(done) {
            let p = self.reqs.take(rs[i])?;
            out[i] = Some(Self::completion(p, &st, data));
        }
        Ok(out)
    }

    /// `MPI_Waitall`: every request's completion in the order of `rs` (None where it was
    /// `MPI_REQUEST_NULL`).
    pub fn waitall(&mut self, rs: &[c_int]) -> Result<Vec<Option<Completion>>, ErrorClass> {
        let (at, reqs) = self.live(rs)?;
        let done = core(&self.last, self.mpi.waitall(&reqs))?;
        self.take_all(rs, &at, done)
    }

    /// `MPI_Testall`: every completion once all are complete (none is taken before).
    pub fn testall(&mut self, rs: &[c_int]) -> Result<Option<Vec<Option<Completion>>>, ErrorClass> {
        let (at, reqs) = self.live(rs)?;
        match core(&self.last, self.mpi.testall(&reqs))? {
            None => Ok(None),
            Some(done) => self.take_all(rs, &at, done).map(Some),
        }
    }

    /// `MPI_Waitany`: the index in `rs` of a request that completed and its completion; None
    /// when every one is `MPI_REQUEST_NULL`.
    pub fn waitany(&mut self, rs: &[c_int]) -> Result<Option<(usize, Completion)>, ErrorClass> {
        let (at, reqs) = self.live(rs)?;
        if reqs.is_empty() {
            return Ok(None);
        }
        let (k, st, data) = core(&self.last, self.mpi.waitany(&reqs))?;
        let i = at[k];
        let p = self.reqs.take(rs[i])?;
        Ok(Some((i, Self::completion(p, &st, data))))
    }

    // ---- collectives ------------------------------------------------------------------

    /// `MPI_Barrier`.
    pub fn barrier(&mut self, h: c_int) -> Result<(), ErrorClass> {
        let c = self.comm(h)?;
        core(&self.last, self.mpi.barrier(c))
    }

    /// A collective's root, validated; and whether this rank is it.
    pub fn root(&self, h: c_int, root: c_int) -> Result<(i32, bool), ErrorClass> {
        let c = self.comm(h)?;
        let root = args::root(root, core(&self.last, self.mpi.size(c))?)?;
        Ok((root, core(&self.last, self.mpi.rank(c))? == root))
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub fn bcast(&mut self, h: c_int, buf: &mut [u8], root: c_int) -> Result<(), ErrorClass> {
        let (root, _) = self.root(h, root)?;
        let c = self.comm(h)?;
        core(&self.last, self.mpi.bcast(c, buf, root))
    }

    /// Gathers every rank's `send` to `root` and folds them there in rank order: the
    /// result at the root, None elsewhere (the reductions the core cannot do itself).
    fn fold(
        &mut self,
        c: Comm,
        send: &[u8],
        count: usize,
        dt: Datatype,
        op: Op,
        root: i32,
    ) -> Result<Option<Vec<u8>>, ErrorClass> {
        let n =
            usize::try_from(core(&self.last, self.mpi.size(c))?).map_err(|_| ErrorClass::Intern)?;
        let at_root = core(&self.last, self.mpi.rank(c))? == root;
        let k = send.len();
        let mut all = if at_root {
            vec![0u8; k * n]
        } else {
            Vec::new()
        };
        core(&self.last, self.mpi.gather(c, send, &mut all, root))?;
        if !at_root {
            return Ok(None);
        }
        let mut blocks = all.chunks_exact(k.max(1));
        let mut acc = if k == 0 {
            Vec::new()
        } else {
            blocks.next().map(<[u8]>::to_vec).unwrap_or_default()
        };
        if k > 0 {
            for b in blocks {
                reduce_local(op, dt, b, &mut acc, count)?;
            }
        }
        Ok(Some(acc))
    }

    /// `MPI_Reduce` of `count` elements of `dt`: `send` (None: `MPI_IN_PLACE`, at the root
    /// only, where the data is in `recv`); `recv` is the root's result buffer (empty
    /// elsewhere, where it is not used).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &mut self,
        h: c_int,
        send: Option<&[u8]>,
        recv: &mut [u8],
        count: usize,
        dt: Datatype,
        op: Op,
        root: c_int,
    ) -> Result<(), ErrorClass> {
        let (root, at_root) = self.root(h, root)?;
        let c = self.comm(h)?;
        let mine = match send {
            Some(s) => s.to_vec(),
            None if at_root => recv.to_vec(),
            None => return Err(ErrorClass::Buffer),
        };
        let recv: &mut [u8] = if at_root { recv } else { &mut [] };
        match args::core_datatype(dt) {
            Some(cdt) => core(
                &self.last,
                self.mpi
                    .reduce(c, &mine, recv, cdt, args::core_op(op), root),
            ),
            None => {
                if let Some(r) = self.fold(c, &mine, count, dt, op, root)? {
                    recv.copy_from_slice(&r);
                }
                Ok(())
            }
        }
    }

    /// `MPI_Allreduce` of `count` elements of `dt` from `send` (None: `MPI_IN_PLACE`, the
    /// data is in `recv`) into `recv`.
    pub fn allreduce(
        &mut self,
        h: c_int,
        send: Option<&[u8]>,
        recv: &mut [u8],
        count: usize,
        dt: Datatype,
        op: Op,
    ) -> Result<(), ErrorClass> {
        let c = self.comm(h)?;
        let mine = match send {
            Some(s) => s.to_vec(),
            None => recv.to_vec(),
        };
        match args::core_datatype(dt) {
            Some(cdt) => core(
                &self.last,
                self.mpi.allreduce(c, &mine, recv, cdt, args::core_op(op)),
            ),
            None => {
                if let Some(r) = self.fold(c, &mine, count, dt, op, 0)? {
                    recv.copy_from_slice(&r);
                }
                core(&self.last, self.mpi.bcast(c, recv, 0))
            }
        }
    }

    /// `MPI_Gather`: `send` from every rank (None: `MPI_IN_PLACE` at the root, whose block
    /// is already in `recv`) into the root's `recv` in rank order; `recv` is empty elsewhere.
    pub fn gather(
        &mut self,
        h: c_int,
        send: Option<&[u8]>,
        recv: &mut [u8],
        root: c_int,
    ) -> Result<(), ErrorClass> {
        let (root, at_root) = self.root(h, root)?;
        let (c, n) = self.comm_size(h)?;
        let n = n as usize;
        let mine = match send {
            Some(s) => s.to_vec(),
            None if at_root => {
                let k = recv.len() / n;
                recv[root as usize * k..][..k].to_vec()
            }
            None => return Err(ErrorClass::Buffer),
        };
        let recv: &mut [u8] = if at_root { recv } else { &mut [] };
        core(&self.last, self.mpi.gather(c, &mine, recv, root))
    }

    /// `MPI_Scatter`: block r of the root's `send` to rank r's `recv` (None: `MPI_IN_PLACE`
    /// at the root, whose block stays in `send`); `send` is empty except at the root.
    pub fn scatter(
        &mut self,
        h: c_int,
        send: &[u8],
        recv: Option<&mut [u8]>,
        root: c_int,
    ) -> Result<(), ErrorClass> {
        let (root, at_root) = self.root(h, root)?;
        let (c, n) = self.comm_size(h)?;
        let send: &[u8] = if at_root { send } else { &[] };
        match recv {
            Some(r) => core(&self.last, self.mpi.scatter(c, send, r, root)),
            None if at_root => {
                let mut own = vec![0u8; send.len() / n as usize];
                core(&self.last, self.mpi.scatter(c, send, &mut own, root))
            }
            None => Err(ErrorClass::Buffer),
        }
    }

    /// `MPI_Allgather`: every rank's `send` (None: `MPI_IN_PLACE`, this rank's block is in
    /// `recv`) into every `recv`, rank order.
    pub fn allgather(
        &mut self,
        h: c_int,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Result<(), ErrorClass> {
        let (c, n) = self.comm_size(h)?;
        let me = core(&self.last, self.mpi.rank(c))? as usize;
        let mine = match send {
            Some(s) => s.to_vec(),
            None => {
                let k = recv.len() / n as usize;
                recv[me * k..][..k].to_vec()
            }
        };
        core(&self.last, self.mpi.allgather(c, &mine, recv))
    }

    /// `MPI_Alltoall`: block r of `send` (None: `MPI_IN_PLACE`, the blocks are in `recv`) to
    /// rank r, block r of `recv` from it.
    pub fn alltoall(
        &mut self,
        h: c_int,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Result<(), ErrorClass> {
        let c = self.comm(h)?;
        let mine = match send {
            Some(s) => s.to_vec(),
            None => recv.to_vec(),
        };
        core(&self.last, self.mpi.alltoall(c, &mine, recv))
    }

    /// `MPI_Finalize`'s part over the core: a barrier on `MPI_COMM_WORLD`, so no rank leaves
    /// (and detaches its endpoint) while another may still send to it. Pending requests are
    /// forgotten.
    pub fn finalize(&mut self) -> Result<(), ErrorClass> {
        core(&self.last, self.mpi.barrier(kestrel_mpi::WORLD))
    }
}
