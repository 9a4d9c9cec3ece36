//! Nonblocking operations' requests (rsmpi's `mpi::request`): a [`Request`] borrows its
//! buffer until [`Request::wait`] or [`Request::test`] completes it; every request belongs
//! to a [`Scope`] ([`scope`] makes a [`LocalScope`], or [`StaticScope`] for `'static`
//! buffers), and a [`WaitGuard`] waits when dropped.
//!
//! How it differs inside: the MPI core copies a send's data when the send starts and
//! completes a receive into its own buffer, so the face copies a receive's data into the
//! borrowed buffer when the request completes. A request that is forgotten therefore never
//! writes anywhere; the scope rules are kept so that programs behave as with rsmpi: dropping
//! an unfinished request panics, and so does a scope left with unfinished requests.

use crate::environment::State;
use crate::point_to_point::Status;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;

/// What a scope does with the requests of its lifetime.
pub trait Scope<'a> {
    /// A request was made in this scope.
    fn register(&self);
    /// A request of this scope completed.
    fn unregister(&self);
}

/// The scope of requests whose buffers live as long as the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaticScope;

impl Scope<'static> for StaticScope {
    fn register(&self) {}
    fn unregister(&self) {}
}

/// A scope lasting at most `'a`: its requests' buffers outlive it. Dropping it with
/// requests not completed panics.
#[derive(Debug)]
pub struct LocalScope<'a> {
    num_requests: Cell<usize>,
    phantom: PhantomData<Cell<&'a ()>>,
}

impl Drop for LocalScope<'_> {
    fn drop(&mut self) {
        if self.num_requests.get() != 0 && !crate::environment::panicking() {
            panic!("at least one request was dropped without being completed");
        }
    }
}

impl<'a> Scope<'a> for &LocalScope<'a> {
    fn register(&self) {
        self.num_requests.set(self.num_requests.get() + 1);
    }

    fn unregister(&self) {
        let n = self.num_requests.get();
        self.num_requests.set(
            n.checked_sub(1)
                .expect("unregister has been called more times than register"),
        );
    }
}

/// Runs `f` with a [`LocalScope`]: requests made with it must be completed before `f`
/// returns.
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    f(&LocalScope {
        num_requests: Cell::new(0),
        phantom: PhantomData,
    })
}

/// The live part of a request.
struct Live<'a> {
    state: Rc<State>,
    req: kestrel_mpi::Request,
    /// A receive's buffer: the data goes there at completion.
    recv: Option<&'a mut [u8]>,
}

/// A nonblocking operation in scope `S`, borrowing its buffer of type `D` for `'a`.
///
/// Dropping it before it completed panics: complete it with [`Request::wait`] or
/// [`Request::test`], or wrap it in a [`WaitGuard`].
#[must_use]
pub struct Request<'a, D: ?Sized, S: Scope<'a> = StaticScope> {
    live: Option<Live<'a>>,
    scope: S,
    phantom: PhantomData<(&'a D, Cell<&'a ()>)>,
}

impl<'a, D: ?Sized, S: Scope<'a>> Request<'a, D, S> {
    pub(crate) fn new(
        state: Rc<State>,
        req: kestrel_mpi::Request,
        recv: Option<&'a mut [u8]>,
        scope: S,
    ) -> Self {
        scope.register();
        Request {
            live: Some(Live { state, req, recv }),
            scope,
            phantom: PhantomData,
        }
    }

    fn live(&self) -> &Live<'a> {
        self.live
            .as_ref()
            .expect("a request is live until completed")
    }

    /// Delivers a completed request's data and status; the request is done.
    fn complete(mut self, call: &str, st: kestrel_mpi::Status, data: Vec<u8>) -> Status {
        let live = self.live.take().expect("a request is live until completed");
        self.scope.unregister();
        if let Some(e) = st.error {
            live.state.fatal(call, e.into());
        }
        if let Some(buf) = live.recv {
            buf[..data.len()].copy_from_slice(&data);
        }
        Status::from_core(st)
    }

    /// MPI_Wait: blocks until the operation finished; a receive's data is then in its
    /// buffer.
    pub fn wait(self) -> Status {
        let live = self.live();
        let req = live.req;
        let (st, data) = live.state.call("MPI_Wait", |b| b.wait(req));
        self.complete("MPI_Wait", st, data)
    }

    /// As [`Request::wait`], without the status.
    pub fn wait_without_status(self) {
        self.wait();
    }

    /// MPI_Test: the status if the operation finished, else the request back.
    pub fn test(self) -> Result<Status, Self> {
        let live = self.live();
        let req = live.req;
        match live.state.call("MPI_Test", |b| b.test(req)) {
            Some((st, data)) => Ok(self.complete("MPI_Test", st, data)),
            None => Err(self),
        }
    }

    /// Moves the request to a shorter scope.
    pub fn shrink_scope_to<'b, S2>(mut self, scope: S2) -> Request<'b, D, S2>
    where
        'a: 'b,
        S2: Scope<'b>,
    {
        let live = self.live.take().expect("a request is live until completed");
        self.scope.unregister();
        let Live { state, req, recv } = live;
        Request::new(state, req, recv, scope)
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for Request<'a, D, S> {
    fn drop(&mut self) {
        if self.live.is_some() && !crate::environment::panicking() {
            panic!("request was dropped without being completed");
        }
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> fmt::Debug for Request<'a, D, S> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.live {
            Some(l) => write!(f, "Request({})", l.req.0),
            None => write!(f, "Request(completed)"),
        }
    }
}

/// MPI_Waitany: waits until one of `requests` finished, removes it from the vector and
/// returns its index and status; `None` when the vector is empty.
pub fn wait_any<'a, D: ?Sized, S: Scope<'a>>(
    requests: &mut Vec<Request<'a, D, S>>,
) -> Option<(usize, Status)> {
    let first = requests.first()?;
    let state = first.live().state.clone();
    let ids: Vec<_> = requests.iter().map(|r| r.live().req).collect();
    let (i, st, data) = state.call("MPI_Waitany", |b| b.waitany(&ids));
    let r = requests.remove(i);
    Some((i, r.complete("MPI_Waitany", st, data)))
}

/// Waits for its request when dropped.
pub struct WaitGuard<'a, D: ?Sized, S: Scope<'a> = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S: Scope<'a>> Drop for WaitGuard<'a, D, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            if crate::environment::panicking() {
                // Unwinding (a failed host test): no MPI call; the request is abandoned.
                core::mem::forget(r);
            } else {
                r.wait();
            }
        }
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<Request<'a, D, S>> for WaitGuard<'a, D, S> {
    fn from(r: Request<'a, D, S>) -> Self {
        WaitGuard(Some(r))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<WaitGuard<'a, D, S>> for Request<'a, D, S> {
    fn from(mut g: WaitGuard<'a, D, S>) -> Self {
        g.0.take().expect("a guard holds its request until dropped")
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> fmt::Debug for WaitGuard<'a, D, S> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "WaitGuard({:?})", self.0)
    }
}
