//! The fabric service's client: [`Service`], the fabric's calls ([`FabricApi`]) as one IPC
//! call each to the fabric thread (`docs/adr/0020-fabric-service.md`), so everything
//! written against the trait (the VMM's back ends, the SPI, MPI and network layers) runs
//! over the service as over the in-process engine.
//!
//! Each endpoint has its own shared page (given to [`FabricApi::attach`] in its
//! [`Window`]): frames and collective payloads are copied through it, the interrupt lines
//! come back in it. The client also keeps where each of its endpoints' windows lies in
//! this space ([`FabricApi::mem_read`], [`FabricApi::mem_write`]) and what attach told
//! about it (coordinates, node address, bus base).
//!
//! An IPC failure (the service is gone) reads as `FabricError::NoSuchEndpoint` through
//! [`Error`]'s conversion, and as "nothing" for the queries (zero lines, no diagnostic),
//! so a VM whose fabric died sees a dead device, never a stopped VMM.

use kestrel_abi::idl::{Transport, Words};
use kestrel_abi::root::pieces;
use kestrel_abi::{Fpage, MapItem, Rights, ThreadId, PAGE_SIZE};
use kestrel_fabric::coll::PAYLOAD;
use kestrel_fabric::proto::{
    self, layout, mac_from_words, mirror, reply, shared, FabricErr, Request, MAX_ENDPOINTS,
    MAX_FRAME,
};
use kestrel_fabric::{Coords, Diagnostic, EpId, FabricApi, FabricError, Stats, IRQ_WORDS};
use kestrel_user::ipc::{call_words, IpcErr};

/// The service's module name (what `root.start=` names and [`Service::connect`] looks up).
pub const SERVICE_NAME: &str = "kestrel-fabric";

/// Why a call to the service failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The root task does not know the service (not started), or refused the lookup.
    NoService,
    /// The IPC failed (the service died).
    Ipc(IpcErr),
    /// The service refused.
    Refused(FabricErr),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NoService => write!(f, "no fabric service ({SERVICE_NAME} is not running)"),
            Error::Ipc(e) => write!(f, "IPC to the fabric failed: {:?} ({:?})", e.error, e.phase),
            Error::Refused(e) => write!(f, "the fabric refused: {e}"),
        }
    }
}

impl From<FabricErr> for Error {
    fn from(e: FabricErr) -> Error {
        Error::Refused(e)
    }
}

/// The service as the transport of its protocol's calls ([`proto::Client`]): one IPC call
/// to the fabric thread, with the request's map items.
impl Transport<FabricErr> for Service {
    type Error = Error;
    fn call(&self, request: &Words, items: &[MapItem]) -> Result<Words, Error> {
        call_words(self.thread, request, items).map_err(Error::Ipc)
    }
}

/// What the engine's error this is: the service's own refusals as the nearest engine
/// error, a transport failure as `NoSuchEndpoint` (the endpoint is gone for the caller).
impl From<Error> for FabricError {
    fn from(e: Error) -> FabricError {
        match e {
            Error::Refused(FabricErr::Engine(c)) => {
                kestrel_fabric::proto::error_from_code(c).unwrap_or(FabricError::NoSuchEndpoint)
            }
            Error::Refused(FabricErr::NoEndpoint) => FabricError::NoFreeEndpoint,
            Error::Refused(FabricErr::BadWindow) => FabricError::BadWindow,
            Error::Refused(FabricErr::BadLength) => FabricError::BadFrame,
            _ => FabricError::NoSuchEndpoint,
        }
    }
}

/// A new endpoint's memory as [`FabricApi::attach`] on the service takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The DMA window: `[addr, addr + len)` of this space (page aligned, mapped; window
    /// offset 0 is bus base), mapped to the service read-write for as long as the endpoint
    /// lives.
    pub addr: u32,
    pub len: u32,
    /// The endpoint's shared page (mapped, not inside the window).
    pub shared_page: u32,
    /// Where the service's events for the endpoint go (nil: none).
    pub event: ThreadId,
    /// Whose endpoint it is: the calling program itself
    /// (`kestrel_abi::grants::TENANT_SELF`) or one of its VMs; the root task's grant for
    /// that tenant applies (`kestrel_abi::grants`).
    pub tenant: u32,
}

impl Window {
    /// The window `[addr, addr + len)` with its shared page at `shared_page`, the events
    /// going to the calling thread.
    pub fn new(addr: u32, len: u32, shared_page: u32) -> Window {
        Window {
            addr,
            len,
            shared_page,
            event: kestrel_user::sys::my_id(),
            tenant: kestrel_abi::grants::TENANT_SELF,
        }
    }

    /// The same window for tenant `tenant` of the calling program (a VMM's VM number).
    pub fn for_tenant(self, tenant: u32) -> Window {
        Window { tenant, ..self }
    }
}

/// Per endpoint: what [`Service::info`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    pub coords: u32,
    pub node_address: u32,
    pub mac: [u8; 6],
    pub bus_base: u64,
}

/// What the client keeps of one endpoint it attached.
#[derive(Clone, Copy, Default)]
struct Attached {
    /// The window in this space and its length (0: not attached by this client).
    window: u32,
    len: u32,
    /// The shared page in this space.
    shared: u32,
    coords: Coords,
    node_address: u32,
    bus_base: u64,
    /// The service keeps this endpoint's register mirror in its shared page.
    mirrored: bool,
}

/// A connection to the fabric service: the fabric's calls as IPC ([`FabricApi`]).
pub struct Service {
    thread: ThreadId,
    eps: [Attached; MAX_ENDPOINTS],
    /// Whether a call since the last `take_changed` may have changed something (or an
    /// event said so): only then does `take_changed` ask the service, so a client that
    /// polls after every one of its own operations (the VMM after every fault) pays no
    /// IPC for operations that did not touch the fabric.
    dirty: core::cell::Cell<bool>,
}

impl Service {
    /// Finds the service through the root task.
    pub fn connect() -> Result<Service, Error> {
        let thread = kestrel_user::root::lookup(SERVICE_NAME).map_err(|_| Error::NoService)?;
        Ok(Service::at(thread))
    }

    /// The service at a known thread.
    pub fn at(thread: ThreadId) -> Service {
        Service {
            thread,
            eps: [Attached::default(); MAX_ENDPOINTS],
            dirty: core::cell::Cell::new(true),
        }
    }

    /// The service thread (where events come from).
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// Notes an `EVENT` from the service: the next `take_changed` asks it.
    pub fn note_event(&self) {
        self.dirty.set(true);
    }

    /// Blocks until one of this thread's endpoints changes (or `timeout` passes) and
    /// returns the changed endpoints (bit k = endpoint k), taking the change: one
    /// `WaitChanged` call, which the service answers at once if something changed since
    /// the last collection, else when something does. For a client that is its own event
    /// thread (`attach` with this thread as `event`, as native programs do); a separate
    /// event thread receives pushed `EVENT`s instead.
    pub fn wait(&mut self, timeout: kestrel_abi::Timeout) -> u32 {
        use kestrel_abi::{Timeout, Timeouts};
        let m = kestrel_user::ipc::Msg::from_words(&Request::WaitChanged {}.encode());
        let (_, r, res) = kestrel_user::ipc::ipc(
            self.thread,
            self.thread,
            Timeouts::new(Timeout::NEVER, timeout),
            &m,
        );
        self.note_event();
        if res.is_err() {
            return 0;
        }
        let w = r.words();
        reply::WaitChanged::decode(w.label, w.words()).map_or(0, |r| r.mask)
    }

    /// The service, for a call that may change the fabric (the next `take_changed` asks
    /// the service).
    fn changing(&self) -> &Service {
        self.dirty.set(true);
        self
    }

    /// What the service tells about endpoint `ep`.
    pub fn info(&self, ep: EpId) -> Result<Info, Error> {
        let i = proto::Client::info(self, ep.0)?;
        Ok(Info {
            coords: i.coords,
            node_address: i.node_address,
            mac: mac_from_words(i.mac_hi, i.mac_lo),
            bus_base: i.bus_base,
        })
    }

    fn attached(&self, ep: EpId) -> Option<&Attached> {
        self.eps.get(usize::from(ep.0)).filter(|a| a.len != 0)
    }

    fn page(&self, ep: EpId) -> Result<*mut u8, Error> {
        match self.attached(ep) {
            Some(a) => Ok(a.shared as *mut u8),
            None => Err(Error::Refused(FabricErr::NotOwner)),
        }
    }

    fn put(&self, ep: EpId, at: usize, data: &[u8]) -> Result<(), Error> {
        let p = self.page(ep)?;
        if at + data.len() > shared::SIZE {
            return Err(Error::Refused(FabricErr::BadLength));
        }
        // SAFETY: `p` is the shared page this client gave to `attach` for `ep` (page aligned,
        // mapped read-write in this space for as long as the endpoint lives), and the range
        // lies inside it (checked above). The service reads it only during our calls.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p.add(at), data.len()) };
        Ok(())
    }

    fn get(&self, ep: EpId, at: usize, buf: &mut [u8]) -> Result<(), Error> {
        let p = self.page(ep)?;
        if at + buf.len() > shared::SIZE {
            return Err(Error::Refused(FabricErr::BadLength));
        }
        // SAFETY: as in `put`; the service wrote the range during the call that just returned.
        unsafe { core::ptr::copy_nonoverlapping(p.add(at), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Word `index` of `ep`'s register mirror, if the service keeps one (`None` for no
    /// index: a register the mirror does not hold).
    fn mirrored(&self, ep: EpId, index: Option<usize>) -> Option<u32> {
        let i = index?;
        let a = self.attached(ep).filter(|a| a.mirrored)?;
        debug_assert!(i < mirror::WORDS);
        let p = (a.shared as usize + shared::MIRROR) as *const u32;
        // SAFETY: `a.shared` is the page-aligned shared page this client gave to `attach`,
        // mapped read-write here for as long as the endpoint lives; the mirror lies inside
        // it (`shared::MIRROR` asserts so) and `i` is one of its words. The service writes
        // it only during our calls, never while this read runs.
        Some(unsafe { p.add(i.min(mirror::WORDS - 1)).read_volatile() })
    }

    /// Where `[offset, offset + n)` of `ep`'s window lies in this space.
    fn win(&self, ep: EpId, offset: u32, n: usize) -> Result<*mut u8, Error> {
        let a = self
            .attached(ep)
            .ok_or(Error::Refused(FabricErr::NotOwner))?;
        match offset.checked_add(n as u32) {
            Some(end) if end <= a.len => Ok((a.window + offset) as *mut u8),
            _ => Err(Error::Refused(FabricErr::BadLength)),
        }
    }
}

/// The fabric's calls over IPC. Attach, detach, register and DCR accesses, receives and
/// frames make the next `take_changed` ask the service; a collective injection and the
/// queries do not (what an injection delivered to the caller's other endpoints comes as an
/// `EVENT`, [`Service::note_event`]), so a client that polls after each of its own calls
/// pays no IPC for calls that changed nothing.
impl FabricApi for Service {
    type Error = Error;
    type Window = Window;

    fn attach(&mut self, w: Window) -> Result<(EpId, u64), Error> {
        let Window {
            addr,
            len,
            shared_page,
            event,
            tenant,
        } = w;
        if len == 0 || len > layout::WINDOW_MAX || !shared_page.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Refused(FabricErr::BadWindow));
        }
        let ps = pieces(addr, 0, len, 24).ok_or(Error::Refused(FabricErr::BadWindow))?;
        // A map item carries only pages that are mapped in this space: touch each one first
        // (pages of the program's image, its .bss, are mapped by the root task on first
        // touch).
        for page in (addr..addr + len)
            .step_by(PAGE_SIZE as usize)
            .chain([shared_page])
        {
            // SAFETY: the caller gives memory of this space (its window and shared page);
            // reading one byte of each page changes nothing.
            unsafe { (page as *const u8).read_volatile() };
        }
        let mut items = [MapItem::map(0, Fpage::NIL); kestrel_abi::root::MAX_ITEMS + 1];
        let mut n = 0;
        for p in ps.as_slice() {
            let (fp, hot) = p
                .fpage(Rights::RW)
                .ok_or(Error::Refused(FabricErr::BadWindow))?;
            items[n] = MapItem::map(hot, fp);
            n += 1;
        }
        items[n] = MapItem::map(layout::SHARED_OFFSET, Fpage::page(shared_page, Rights::RW));
        n += 1;
        self.dirty.set(true);
        let request = Request::Attach {
            window_len: len,
            event: event.0,
            tenant,
        };
        let w = self.call(&request.encode(), &items[..n])?;
        let r = reply::Attach::decode(w.label, w.words())?;
        let ep = EpId(r.ep as u8);
        let bus_base = r.bus_base;
        if let Some(a) = self.eps.get_mut(usize::from(ep.0)) {
            *a = Attached {
                window: addr,
                len,
                shared: shared_page,
                coords: Coords {
                    x: (r.coords >> kestrel_bgp::torus::COORD_X_SHIFT) as u8,
                    y: (r.coords >> kestrel_bgp::torus::COORD_Y_SHIFT) as u8,
                    z: (r.coords >> kestrel_bgp::torus::COORD_Z_SHIFT) as u8,
                },
                node_address: r.node_address,
                bus_base,
                mirrored: false,
            };
        }
        // An endpoint a program attaches for itself is one it polls: the service keeps
        // its polled registers in the shared page (`proto::mirror`). A VMM's endpoints for
        // its VMs go without (their guests' reads arrive one by one as faults anyway).
        if tenant == kestrel_abi::grants::TENANT_SELF && proto::Client::mirror(self, ep.0).is_ok() {
            if let Some(a) = self.eps.get_mut(usize::from(ep.0)) {
                a.mirrored = true;
            }
        }
        Ok((ep, bus_base))
    }

    /// Detaches `ep` (its pages stay mapped in this space).
    fn detach(&mut self, ep: EpId) {
        if proto::Client::detach(self.changing(), ep.0).is_ok() {
            if let Some(a) = self.eps.get_mut(usize::from(ep.0)) {
                *a = Attached::default();
            }
        }
    }

    /// The bus range of `ep`'s window: `(base, len)` (as attached).
    fn window(&self, ep: EpId) -> Option<(u64, u64)> {
        self.attached(ep).map(|a| (a.bus_base, u64::from(a.len)))
    }

    fn coords(&self, ep: EpId) -> Coords {
        self.attached(ep).map_or(Coords::default(), |a| a.coords)
    }

    fn node_address(&self, ep: EpId) -> u32 {
        self.attached(ep).map_or(0, |a| a.node_address)
    }

    fn dma_read(&mut self, ep: EpId, offset: u32) -> Result<u32, Error> {
        if let Some(v) = self.mirrored(ep, mirror::index_of(offset)) {
            return Ok(v);
        }
        proto::Client::dma_read(self.changing(), ep.0, offset).map(|r| r.value)
    }

    fn dma_write2(&mut self, ep: EpId, first: (u32, u32), second: (u32, u32)) -> Result<(), Error> {
        proto::Client::dma_write2(self.changing(), ep.0, first.0, first.1, second.0, second.1)
            .map(|_| ())
    }

    fn window_offset_of(&self, ep: EpId, addr: usize, len: usize) -> Option<u32> {
        let a = self.attached(ep)?;
        let off = addr.checked_sub(a.window as usize)?;
        (off.checked_add(len)? <= a.len as usize).then_some(off as u32)
    }

    fn registers_mirrored(&self, ep: EpId) -> bool {
        self.attached(ep).is_some_and(|a| a.mirrored)
    }

    fn dma_write(&mut self, ep: EpId, offset: u32, value: u32) -> Result<(), Error> {
        proto::Client::dma_write(self.changing(), ep.0, offset, value).map(|_| ())
    }

    fn dcr_read(&mut self, ep: EpId, dcr: u32) -> Result<u32, Error> {
        proto::Client::dcr_read(self.changing(), ep.0, dcr).map(|r| r.value)
    }

    fn dcr_write(&mut self, ep: EpId, dcr: u32, value: u32) -> Result<(), Error> {
        proto::Client::dcr_write(self.changing(), ep.0, dcr, value).map(|_| ())
    }

    fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        header: u32,
        payload: &[u8; PAYLOAD],
    ) -> Result<(), Error> {
        self.put(ep, shared::PAYLOAD, payload)?;
        proto::Client::tree_inject(self, ep.0, vc as u32, header).map(|_| ())
    }

    fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        payload: &mut [u8; PAYLOAD],
    ) -> Result<Option<u32>, Error> {
        let r = proto::Client::tree_receive(self.changing(), ep.0, vc as u32)?;
        if r.found == 0 {
            return Ok(None);
        }
        self.get(ep, shared::PAYLOAD, payload)?;
        Ok(Some(r.header))
    }

    fn tree_status(&self, ep: EpId, vc: usize) -> u32 {
        if vc < kestrel_bgp::coll::VCS as usize {
            if let Some(v) = self.mirrored(ep, Some(mirror::TREE_STATUS + vc)) {
                return v;
            }
        }
        proto::Client::tree_status(self, ep.0, vc as u32).map_or(0, |r| r.status)
    }

    fn frame_send(&mut self, ep: EpId, frame: &[u8]) -> Result<(), Error> {
        if frame.len() > MAX_FRAME {
            return Err(Error::Refused(FabricErr::BadLength));
        }
        self.put(ep, shared::PAYLOAD, frame)?;
        proto::Client::frame_send(self.changing(), ep.0, frame.len() as u32).map(|_| ())
    }

    /// A frame longer than `buf` is cut to it.
    fn frame_receive(&mut self, ep: EpId, buf: &mut [u8]) -> Result<Option<usize>, Error> {
        let r = proto::Client::frame_receive(self.changing(), ep.0)?;
        if r.found == 0 {
            return Ok(None);
        }
        let n = (r.len as usize).min(buf.len()).min(MAX_FRAME);
        self.get(ep, shared::PAYLOAD, &mut buf[..n])?;
        Ok(Some(n))
    }

    /// Frames waiting for `ep` (0 if the service cannot be asked).
    fn frames_queued(&self, ep: EpId) -> usize {
        proto::Client::frames_queued(self, ep.0).map_or(0, |r| r.frames as usize)
    }

    fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS] {
        let mut b = [0u8; 4 * proto::LINE_WORDS];
        let got =
            proto::Client::irq_lines(self, ep.0).and_then(|_| self.get(ep, shared::LINES, &mut b));
        let mut out = [0; IRQ_WORDS];
        if got.is_ok() {
            for (o, w) in out.iter_mut().zip(b.chunks_exact(4)) {
                *o = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
            }
        }
        out
    }

    /// This client's endpoints whose lines or frame queue changed (bit k = `EpId(k)`), as
    /// the engine's `take_changed` restricted to this client.
    fn take_changed(&mut self) -> Result<u32, Error> {
        if !self.dirty.replace(false) {
            return Ok(0);
        }
        proto::Client::take_changed(self).map(|r| r.mask)
    }

    /// The service's four counters (`kestrel_fabric::proto::stats_words`): all packets as
    /// `dma_packets_sent`, torus payload bytes as `dma_bytes_sent`, drops, errors; the other
    /// counters read 0 (saturated to 32 bits).
    fn stats(&self, ep: EpId) -> Stats {
        let s = proto::Client::stats(self, ep.0).map_or([0; 4], |r| r.counters);
        Stats {
            dma_packets_sent: u64::from(s[0]),
            dma_bytes_sent: u64::from(s[1]),
            drops: u64::from(s[2]),
            errors: u64::from(s[3]),
            ..Stats::default()
        }
    }

    fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic> {
        let r = proto::Client::take_diagnostic(self, ep.0).ok()?;
        if r.found == 0 {
            return None;
        }
        proto::diagnostic_from_words(r.diagnostic)
    }

    fn mem_read(&mut self, ep: EpId, offset: u32, buf: &mut [u8]) -> Result<(), Error> {
        let p = self.win(ep, offset, buf.len())?;
        // SAFETY: `[p, p + len)` lies inside the window this client attached for `ep` (its
        // own memory, mapped for as long as it runs; checked by `win`). The fabric writes it
        // only during our calls to the service, never while this copy runs.
        unsafe { core::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn mem_write(&mut self, ep: EpId, offset: u32, data: &[u8]) -> Result<(), Error> {
        let p = self.win(ep, offset, data.len())?;
        // SAFETY: as in `mem_read`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }
}
