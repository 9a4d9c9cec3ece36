//! Starting and ending MPI (rsmpi's `mpi::environment`): [`initialize`], the
//! [`Universe`] whose drop is MPI_Finalize, the time, and the one place errors become fatal.

use crate::backend::{Backend, Core};
use crate::platform::Job;
use crate::topology::SimpleCommunicator;
use alloc::boxed::Box;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use core::cell::{Cell, RefCell};
use core::fmt;
use kestrel_fabric::FabricApi;
use kestrel_mpi::Mpi;

/// Why a call failed: the error class first, as MPI names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The MPI core's error.
    Mpi(kestrel_mpi::Error),
    /// An error the face finds itself: its class (`MPI_ERR_...`) and what happened.
    Face(&'static str, String),
    /// A call after the universe was dropped.
    Finalized,
}

impl From<kestrel_mpi::Error> for Fault {
    fn from(e: kestrel_mpi::Error) -> Self {
        Fault::Mpi(e)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Fault::Mpi(e) => write!(f, "{e}"),
            Fault::Face(class, what) => write!(f, "{class}: {what}"),
            Fault::Finalized => write!(
                f,
                "MPI_ERR_OTHER: called after MPI_Finalize (the Universe was dropped)"
            ),
        }
    }
}

/// What every handle of one rank shares: the core and how this rank ends.
pub(crate) struct State {
    core: RefCell<Box<dyn Backend>>,
    rank: u32,
    fatal: fn(&str, i32) -> !,
    finalized: Cell<bool>,
}

impl State {
    /// Runs one MPI call on the core; an error ends the job ([`State::fatal`]).
    pub(crate) fn call<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut dyn Backend) -> Result<T, kestrel_mpi::Error>,
    ) -> T {
        if self.finalized.get() {
            self.fatal(name, Fault::Finalized);
        }
        let r = {
            let mut core = self.core.borrow_mut();
            f(&mut **core)
        };
        match r {
            Ok(v) => v,
            Err(e) => self.fatal(name, Fault::Mpi(e)),
        }
    }

    /// [`State::call`] for a collective: afterwards, if another rank ended the job, this
    /// rank ends too. A rank that ends the job gives its endpoint back, and the collective
    /// network's reductions (the barrier among them) then complete without it: without
    /// this check the others could leave a barrier the ended rank never entered.
    pub(crate) fn call_collective<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut dyn Backend) -> Result<T, kestrel_mpi::Error>,
    ) -> T {
        let v = self.call(name, f);
        self.core.borrow_mut().check_abort();
        v
    }

    /// MPI_ERRORS_ARE_FATAL: one line naming the rank, the call and the error class, then
    /// the job ends: the other ranks are told (they end quietly, [`crate::platform`]) and
    /// this rank ends the platform's way (on Kestrel: the program exits with code 1; on the
    /// host: its thread panics with the line).
    pub(crate) fn fatal(&self, call: &str, fault: Fault) -> ! {
        let what = match (&fault, self.core.try_borrow()) {
            (Fault::Mpi(kestrel_mpi::Error::Deadlock), Ok(core)) => match core.deadlock_report() {
                Some(report) => format!("MPI_ERR_OTHER: deadlock: {report}"),
                None => format!("{fault}"),
            },
            _ => format!("{fault}"),
        };
        self.end(&format!("rank {}: {call}: {what}", self.rank), 1)
    }

    /// Ends the job with `line` (MPI_Abort's way). If another rank has ended it already
    /// (its abort packet is here), this rank ends quietly instead: one line per job. Ranks
    /// that wait on each other reach their deadlock timeouts together; the ones after the
    /// first see its abort here.
    pub(crate) fn end(&self, line: &str, code: i32) -> ! {
        if let Ok(mut core) = self.core.try_borrow_mut() {
            if !self.finalized.get() {
                core.check_abort();
                core.signal_abort(code);
                core.detach();
            }
        }
        self.finalized.set(true);
        (self.fatal)(line, code)
    }

    pub(crate) fn rank(&self) -> u32 {
        self.rank
    }

    pub(crate) fn is_finalized(&self) -> bool {
        self.finalized.get()
    }
}

/// Whether the calling thread is unwinding (a failed host test): drops then skip MPI calls
/// that could block or end the job a second time. Without `std` a panic never unwinds.
pub(crate) fn panicking() -> bool {
    #[cfg(feature = "host")]
    {
        std::thread::panicking()
    }
    #[cfg(not(feature = "host"))]
    {
        false
    }
}

/// The MPI environment of one rank: [`Universe::world`] gives its communicator; dropping it
/// is MPI_Finalize (a barrier on the world, then the rank's endpoint goes back to the fabric;
/// communicators still alive may not be used after it).
pub struct Universe {
    state: Rc<State>,
}

impl Universe {
    /// MPI_COMM_WORLD.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator::world(self.state.clone())
    }

    /// The number of ranks the job has (rsmpi: MPI_UNIVERSE_SIZE): the world's size.
    pub fn size(&self) -> Option<usize> {
        let n = self
            .state
            .call("MPI_Comm_size", |c| c.size(kestrel_mpi::WORLD));
        usize::try_from(n).ok()
    }

    /// The largest message sent eagerly; longer ones (and synchronous sends) go by
    /// rendezvous (ADR 0035; not in rsmpi). With 8 ranks about 1 KiB.
    pub fn eager_limit(&self) -> usize {
        if self.state.is_finalized() {
            self.state.fatal("eager_limit", Fault::Finalized);
        }
        self.state.core.borrow().eager_max()
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if self.state.is_finalized() || panicking() {
            return;
        }
        self.state.call("MPI_Finalize", |c| {
            c.barrier(kestrel_mpi::WORLD)?;
            // A rank that ended the job gave its endpoint back, so a barrier can complete
            // without it: this rank must not finish as if all went well.
            c.check_abort();
            c.detach();
            Ok(())
        });
        self.state.finalized.set(true);
    }
}

impl fmt::Debug for Universe {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("Universe")
            .field("rank", &self.state.rank)
            .finish()
    }
}

/// The thread support MPI offers (rsmpi's `Threading`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Threading {
    /// One thread only.
    Single,
    /// Only the thread that initialized MPI calls it.
    Funneled,
    /// Any thread, one at a time.
    Serialized,
    /// Any thread at any time.
    Multiple,
}

/// MPI_Init on the platform this program runs on: `None` when this rank already
/// initialized MPI, or when there is no platform to start on. On Kestrel
/// (`platform::kestrel`) the rank and size come from the program's module name and
/// the boot arguments; on the host (feature `host`) from the job
/// `platform::host::run` started the thread in.
pub fn initialize() -> Option<Universe> {
    #[cfg(feature = "host")]
    {
        crate::platform::host::launch()
    }
    #[cfg(all(not(feature = "host"), target_arch = "powerpc"))]
    {
        crate::platform::kestrel::launch()
    }
    #[cfg(all(not(feature = "host"), not(target_arch = "powerpc")))]
    {
        None
    }
}

/// MPI_Init_thread: as [`initialize`]; the answer is always [`Threading::Funneled`] (the
/// face's handles are not `Send`, so only the initializing thread can call MPI).
pub fn initialize_with_threading(_threading: Threading) -> Option<(Universe, Threading)> {
    initialize().map(|u| (u, Threading::Funneled))
}

/// MPI_Init for rank `job.rank` of `job.size` on the fabric `job.fabric`: what a platform
/// calls (and what a program with its own platform can call). Waits until every rank of the
/// job has started. A failure is fatal, as any MPI error.
pub fn initialize_with<P: FabricApi + 'static>(job: Job<P>) -> Option<Universe> {
    let Job {
        fabric,
        ep,
        bus,
        rank,
        size,
        env,
        fatal,
        ended,
    } = job;
    let mpi = match Mpi::init(fabric, ep, bus, rank, size, env) {
        Ok(m) => m,
        Err(e) => fatal(&format!("rank {rank}: MPI_Init: {e}"), 1),
    };
    Some(Universe {
        state: Rc::new(State {
            core: RefCell::new(Box::new(Core { mpi, ended })),
            rank,
            fatal,
            finalized: Cell::new(false),
        }),
    })
}

/// MPI_Wtime: seconds since some time in the past (on Kestrel the time base, on the host
/// the first call; 0 without a platform).
pub fn time() -> f64 {
    #[cfg(feature = "host")]
    {
        crate::platform::host::now_ns() as f64 / 1e9
    }
    #[cfg(all(not(feature = "host"), target_arch = "powerpc"))]
    {
        crate::platform::kestrel::now_ns() as f64 / 1e9
    }
    #[cfg(all(not(feature = "host"), not(target_arch = "powerpc")))]
    {
        0.0
    }
}

/// MPI_Wtick: the resolution of [`time`] in seconds.
pub fn time_resolution() -> f64 {
    1e-9
}
