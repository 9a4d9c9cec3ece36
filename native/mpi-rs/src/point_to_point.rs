//! Point-to-point messages (rsmpi's `mpi::point_to_point`): a [`Destination`] sends, a
//! [`Source`] receives and probes; [`Status`] tells who sent what.
//!
//! Semantics are the MPI core's (ADR 0035): messages between a pair of ranks do not
//! overtake each other per communicator and tag, any source and any tag match as
//! wildcards, there is no size limit below memory. A standard send returns once its data
//! left (or, above the eager limit, once the receiver took it); a synchronous send once a
//! receive matched. A receive whose buffer is too small ends the job with
//! MPI_ERR_TRUNCATE.

use crate::datatype::{bytes_of_mut, zeroed, zeroed_vec, Buffer, BufferMut, Datatype, Equivalence};
use crate::request::{Request, Scope};
use crate::topology::{AnyProcess, AsHandle, CommunicatorHandle, Process, Rank};
use crate::{Count, Tag};
use alloc::format;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;

/// Point-to-point traits.
pub mod traits {
    pub use super::{Destination, MatchedReceiveVec, Source};
}

/// MPI_ANY_TAG as the core spells it.
const ANY_TAG: Tag = kestrel_mpi::ANY_TAG;

/// A receive's (or probe's) envelope: source, tag and size (MPI_Status).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: Rank,
    tag: Tag,
    bytes: usize,
}

impl Status {
    pub(crate) fn from_core(s: kestrel_mpi::Status) -> Status {
        Status {
            source: s.source,
            tag: s.tag,
            bytes: s.bytes,
        }
    }

    /// The sender's rank in the communicator.
    pub fn source_rank(&self) -> Rank {
        self.source
    }

    /// The message's tag.
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// MPI_Get_count: how many values of datatype `d` the message held, or
    /// [`crate::UNDEFINED`] when its size is no whole number of them.
    pub fn count<D: Datatype>(&self, d: D) -> Count {
        let size = d.datatype_ref().size();
        if size == 0 || !self.bytes.is_multiple_of(size) {
            return crate::UNDEFINED;
        }
        Count::try_from(self.bytes / size).unwrap_or(crate::UNDEFINED)
    }

    /// The message's size in bytes (not in rsmpi).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "Status {{ source_rank: {}, tag: {}, bytes: {} }}",
            self.source, self.tag, self.bytes
        )
    }
}

/// Something that can receive: a [`Process`] or [`AnyProcess`] of a communicator.
pub trait Source: AsHandle {
    /// The rank received from (`MPI_ANY_SOURCE` for [`AnyProcess`]).
    fn source_rank(&self) -> Rank;

    /// MPI_Probe: blocks until a message with tag `tag` can be received, and returns its
    /// envelope without receiving it.
    fn probe_with_tag(&self, tag: Tag) -> Status {
        let src = self.source_rank();
        let st = self
            .as_handle()
            .call("MPI_Probe", |b, c| b.probe(c, src, tag));
        Status::from_core(st)
    }

    /// MPI_Probe with any tag.
    fn probe(&self) -> Status {
        self.probe_with_tag(ANY_TAG)
    }

    /// A probe whose message is then received with [`Message`] (MPI_Mprobe's shape: the
    /// message is the first one with the probed source and tag, which is the probed one
    /// unless another receive is started in between).
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        let st = self.probe_with_tag(tag);
        (Message::new(self.as_handle(), st), st)
    }

    /// [`Source::matched_probe_with_tag`] with any tag.
    fn matched_probe(&self) -> (Message, Status) {
        self.matched_probe_with_tag(ANY_TAG)
    }

    /// MPI_Recv of one value of type `Msg` with tag `tag`. An empty message ends the job
    /// (rsmpi panics).
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        let mut msg: Msg = zeroed();
        let st = self.receive_into_with_tag(&mut msg, tag);
        if st.bytes == 0 {
            self.as_handle().fail(
                "MPI_Recv",
                "MPI_ERR_COUNT",
                format!(
                    "received an empty message from rank {} (tag {}) into a value",
                    st.source, st.tag
                ),
            );
        }
        (msg, st)
    }

    /// MPI_Recv of one value of type `Msg` with any tag.
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        self.receive_with_tag(ANY_TAG)
    }

    /// MPI_Recv into `buf` with tag `tag`.
    fn receive_into_with_tag<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf, tag: Tag) -> Status {
        let src = self.source_rank();
        let bytes = buf.bytes_mut();
        let st = self
            .as_handle()
            .call("MPI_Recv", |b, c| b.recv(c, src, tag, bytes));
        Status::from_core(st)
    }

    /// MPI_Recv into `buf` with any tag.
    fn receive_into<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf) -> Status {
        self.receive_into_with_tag(buf, ANY_TAG)
    }

    /// A message with tag `tag` of any length into a new vector (a probe, then a receive).
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        self.matched_probe_with_tag(tag).matched_receive_vec()
    }

    /// A message with any tag into a new vector.
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        self.receive_vec_with_tag(ANY_TAG)
    }

    /// MPI_Irecv into `buf` with tag `tag`: the data is in `buf` once the request
    /// completes.
    fn immediate_receive_into_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut,
    {
        let src = self.source_rank();
        let h = self.as_handle();
        let bytes = buf.bytes_mut();
        let cap = bytes.len();
        let req = h.call("MPI_Irecv", |b, c| b.irecv(c, src, tag, cap));
        Request::new(h.state.clone(), req, Some(bytes), scope)
    }

    /// MPI_Irecv into `buf` with any tag.
    fn immediate_receive_into<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut,
    {
        self.immediate_receive_into_with_tag(scope, buf, ANY_TAG)
    }

    /// MPI_Irecv of one value of type `Msg` with tag `tag`, completed by its
    /// [`ReceiveFuture`].
    fn immediate_receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> ReceiveFuture<Msg> {
        let src = self.source_rank();
        let h = self.as_handle();
        let cap = core::mem::size_of::<Msg>();
        let req = h.call("MPI_Irecv", |b, c| b.irecv(c, src, tag, cap));
        ReceiveFuture {
            h: h.clone(),
            req: Some(req),
            phantom: PhantomData,
        }
    }

    /// MPI_Irecv of one value with any tag.
    fn immediate_receive<Msg: Equivalence>(&self) -> ReceiveFuture<Msg> {
        self.immediate_receive_with_tag(ANY_TAG)
    }

    /// MPI_Iprobe: the envelope of a message with tag `tag` that can be received now.
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        let src = self.source_rank();
        self.as_handle()
            .call("MPI_Iprobe", |b, c| b.iprobe(c, src, tag))
            .map(Status::from_core)
    }

    /// MPI_Iprobe with any tag.
    fn immediate_probe(&self) -> Option<Status> {
        self.immediate_probe_with_tag(ANY_TAG)
    }

    /// [`Source::immediate_probe_with_tag`] with a [`Message`] to receive.
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        let st = self.immediate_probe_with_tag(tag)?;
        Some((Message::new(self.as_handle(), st), st))
    }

    /// [`Source::immediate_matched_probe_with_tag`] with any tag.
    fn immediate_matched_probe(&self) -> Option<(Message, Status)> {
        self.immediate_matched_probe_with_tag(ANY_TAG)
    }
}

impl Source for AnyProcess<'_> {
    fn source_rank(&self) -> Rank {
        kestrel_mpi::ANY_SOURCE
    }
}

impl Source for Process<'_> {
    fn source_rank(&self) -> Rank {
        self.rank()
    }
}

/// Something that can be sent to: a [`Process`].
pub trait Destination: AsHandle {
    /// The rank sent to.
    fn destination_rank(&self) -> Rank;

    /// MPI_Send of `buf` with tag `tag`.
    fn send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let dest = self.destination_rank();
        let data = buf.bytes();
        self.as_handle()
            .call("MPI_Send", |b, c| b.send(c, dest, tag, data));
    }

    /// MPI_Send of `buf` with tag 0.
    fn send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.send_with_tag(buf, Tag::default())
    }

    /// MPI_Ssend: returns once a receive matched.
    fn synchronous_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let dest = self.destination_rank();
        let data = buf.bytes();
        self.as_handle()
            .call("MPI_Ssend", |b, c| b.ssend(c, dest, tag, data));
    }

    /// MPI_Ssend with tag 0.
    fn synchronous_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, Tag::default())
    }

    /// MPI_Isend of `buf` with tag `tag`.
    fn immediate_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        immediate(self, scope, buf, tag, false)
    }

    /// MPI_Isend with tag 0.
    fn immediate_send<'a, Sc, Buf>(&self, scope: Sc, buf: &'a Buf) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_send_with_tag(scope, buf, Tag::default())
    }

    /// MPI_Issend: completes once a receive matched.
    fn immediate_synchronous_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        immediate(self, scope, buf, tag, true)
    }

    /// MPI_Issend with tag 0.
    fn immediate_synchronous_send<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_synchronous_send_with_tag(scope, buf, Tag::default())
    }
}

fn immediate<'a, Dst, Sc, Buf>(
    d: &Dst,
    scope: Sc,
    buf: &'a Buf,
    tag: Tag,
    sync: bool,
) -> Request<'a, Buf, Sc>
where
    Dst: Destination + ?Sized,
    Sc: Scope<'a>,
    Buf: ?Sized + Buffer,
{
    let dest = d.destination_rank();
    let h = d.as_handle();
    let data = buf.bytes();
    let name = if sync { "MPI_Issend" } else { "MPI_Isend" };
    let req = h.call(name, |b, c| b.isend(c, dest, tag, data, sync));
    Request::new(h.state.clone(), req, None, scope)
}

impl Destination for Process<'_> {
    fn destination_rank(&self) -> Rank {
        self.rank()
    }
}

/// A probed message, to receive (rsmpi's `Message`, from a matched probe).
pub struct Message {
    h: CommunicatorHandle,
    source: Rank,
    tag: Tag,
}

impl Message {
    fn new(h: &CommunicatorHandle, st: Status) -> Message {
        Message {
            h: h.clone(),
            source: st.source,
            tag: st.tag,
        }
    }

    /// Receives the message into `buf`.
    pub fn matched_receive_into<Buf: ?Sized + BufferMut>(self, buf: &mut Buf) -> Status {
        let (src, tag) = (self.source, self.tag);
        let bytes = buf.bytes_mut();
        Status::from_core(self.h.call("MPI_Mrecv", |b, c| b.recv(c, src, tag, bytes)))
    }

    /// Receives the message, one value of type `Msg`.
    pub fn matched_receive<Msg: Equivalence>(self) -> (Msg, Status) {
        let mut msg: Msg = zeroed();
        let st = self.matched_receive_into(&mut msg);
        (msg, st)
    }

    /// Starts receiving the message into `buf`.
    pub fn immediate_matched_receive_into<'a, Sc, Buf>(
        self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut,
    {
        let (src, tag) = (self.source, self.tag);
        let bytes = buf.bytes_mut();
        let cap = bytes.len();
        let req = self.h.call("MPI_Imrecv", |b, c| b.irecv(c, src, tag, cap));
        Request::new(self.h.state.clone(), req, Some(bytes), scope)
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "Message {{ source: {}, tag: {} }}",
            self.source, self.tag
        )
    }
}

/// Receiving a matched message into a new vector.
pub trait MatchedReceiveVec {
    /// Receives the message as a vector of `Msg`s.
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let (msg, st) = self;
        let size = Msg::equivalent_datatype().datatype_ref().size();
        if size == 0 || !st.bytes.is_multiple_of(size) {
            msg.h.fail(
                "MPI_Mrecv",
                "MPI_ERR_TRUNCATE",
                format!(
                    "a message of {} bytes is no whole number of {size}-byte values",
                    st.bytes
                ),
            );
        }
        let mut v = zeroed_vec::<Msg>(st.bytes / size);
        let st = msg.matched_receive_into(&mut v[..]);
        (v, st)
    }
}

/// A receive of one value started by [`Source::immediate_receive`].
#[must_use]
pub struct ReceiveFuture<T> {
    h: CommunicatorHandle,
    req: Option<kestrel_mpi::Request>,
    phantom: PhantomData<T>,
}

impl<T: Equivalence> ReceiveFuture<T> {
    fn deliver(
        h: &CommunicatorHandle,
        call: &str,
        st: kestrel_mpi::Status,
        data: &[u8],
    ) -> (T, Status) {
        if let Some(e) = st.error {
            h.state.fatal(call, e.into());
        }
        let mut v: T = zeroed();
        bytes_of_mut(core::slice::from_mut(&mut v))[..data.len()].copy_from_slice(data);
        (v, Status::from_core(st))
    }

    /// Waits for the value.
    pub fn get(mut self) -> (T, Status) {
        let req = self.req.take().expect("a future is live until received");
        let (st, data) = self.h.state.call("MPI_Wait", |b| b.wait(req));
        Self::deliver(&self.h, "MPI_Wait", st, &data)
    }

    /// The value if it arrived, else the future back.
    pub fn r#try(mut self) -> Result<(T, Status), Self> {
        let req = self.req.expect("a future is live until received");
        match self.h.state.call("MPI_Test", |b| b.test(req)) {
            Some((st, data)) => {
                self.req = None;
                Ok(Self::deliver(&self.h, "MPI_Test", st, &data))
            }
            None => Err(self),
        }
    }
}

impl<T> Drop for ReceiveFuture<T> {
    fn drop(&mut self) {
        if self.req.is_some() && !crate::environment::panicking() {
            panic!("request was dropped without being completed");
        }
    }
}

fn same_comm(call: &str, d: &CommunicatorHandle, s: &CommunicatorHandle) {
    if d.comm != s.comm {
        d.fail(
            call,
            "MPI_ERR_COMM",
            format!(
                "destination and source are on different communicators ({} and {})",
                d.comm.0, s.comm.0
            ),
        );
    }
}

/// MPI_Sendrecv: sends `msg` to `destination` with `sendtag` and receives into `buf` from
/// `source` with `receivetag`, both at once (no deadlock around a ring). Both must be of
/// one communicator.
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    buf: &mut B,
    source: &S,
    receivetag: Tag,
) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    let (dh, sh) = (destination.as_handle(), source.as_handle());
    same_comm("MPI_Sendrecv", dh, sh);
    let (dest, src) = (destination.destination_rank(), source.source_rank());
    let data = msg.bytes();
    let bytes = buf.bytes_mut();
    Status::from_core(dh.call("MPI_Sendrecv", |b, c| {
        b.sendrecv(c, data, dest, sendtag, bytes, src, receivetag)
    }))
}

/// MPI_Sendrecv with send tag 0 and any receive tag.
pub fn send_receive_into<M, D, B, S>(msg: &M, destination: &D, buf: &mut B, source: &S) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    send_receive_into_with_tags(msg, destination, Tag::default(), buf, source, ANY_TAG)
}

/// MPI_Sendrecv receiving one value of type `R`.
pub fn send_receive_with_tags<R, M, D, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> (R, Status)
where
    R: Equivalence,
    M: ?Sized + Buffer,
    D: Destination,
    S: Source,
{
    let mut r: R = zeroed();
    let st = send_receive_into_with_tags(msg, destination, sendtag, &mut r, source, receivetag);
    (r, st)
}

/// MPI_Sendrecv receiving one value, send tag 0 and any receive tag.
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> (R, Status)
where
    R: Equivalence,
    M: ?Sized + Buffer,
    D: Destination,
    S: Source,
{
    send_receive_with_tags(msg, destination, Tag::default(), source, ANY_TAG)
}
