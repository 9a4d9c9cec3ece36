//! The protocol calls: [`Service`], one IPC call to the fabric thread per engine method, with
//! the same names and arguments as `kestrel_fabric::Fabric`'s (endpoints as `u8`, errors as
//! [`Error`]), so a client written against the engine switches to the service by changing
//! the type it calls (`docs/adr/0020-fabric-service.md`).
//!
//! Each endpoint has its own shared page (given to [`Service::attach`]): frames and
//! collective payloads are copied through it, the interrupt lines come back in it.

use kestrel_abi::idl::{Transport, Words};
use kestrel_abi::root::pieces;
use kestrel_abi::{Fpage, MapItem, Rights, ThreadId, PAGE_SIZE};
use kestrel_fabric::proto::{
    self, layout, mac_from_words, reply, shared, FabricErr, Request, MAX_ENDPOINTS, MAX_FRAME,
    TREE_PAYLOAD,
};
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

impl From<FabricErr> for Error {
    fn from(e: FabricErr) -> Error {
        Error::Refused(e)
    }
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

/// What [`Service::attach`] tells about the new endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The endpoint number (`EpId.0`): its rank, X coordinate and node address.
    pub ep: u8,
    /// The fabric bus address of window offset 0 (DMA addresses are bus addresses).
    pub bus_base: u64,
    /// Torus coordinates as `kestrel_bgp::torus::coord_word` packs them.
    pub coords: u32,
    /// Collective node address.
    pub node_address: u32,
}

/// Per endpoint: what [`Service::info`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    pub coords: u32,
    pub node_address: u32,
    pub mac: [u8; 6],
    pub bus_base: u64,
}

/// A connection to the fabric service.
pub struct Service {
    thread: ThreadId,
    /// Shared page address per endpoint this client attached (0: none).
    shared: [u32; MAX_ENDPOINTS],
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
            shared: [0; MAX_ENDPOINTS],
        }
    }

    /// The service thread (where events come from).
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// Attaches a new endpoint whose DMA window is `[window, window + len)` of this space
    /// (page aligned, mapped) and whose shared page is at `shared_page` (mapped, not inside
    /// the window); events for it go to `event` (nil: none). The pages are mapped to the
    /// service (read-write) for as long as the endpoint lives.
    pub fn attach(
        &mut self,
        window: u32,
        len: u32,
        shared_page: u32,
        event: ThreadId,
    ) -> Result<Attached, Error> {
        if len == 0 || len > layout::WINDOW_MAX || !shared_page.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Refused(FabricErr::BadWindow));
        }
        let ps = pieces(window, 0, len, 24).ok_or(Error::Refused(FabricErr::BadWindow))?;
        // A map item carries only pages that are mapped in this space: touch each one first
        // (pages of the program's image, its .bss, are mapped by the root task on first
        // touch).
        for page in (window..window + len)
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
        let request = Request::Attach {
            window_len: len,
            event: event.0,
        };
        let w = self.call(&request.encode(), &items[..n])?;
        let a = reply::Attach::decode(w.label, w.words())?;
        let ep = a.ep as u8;
        if let Some(s) = self.shared.get_mut(ep as usize) {
            *s = shared_page;
        }
        Ok(Attached {
            ep,
            bus_base: a.bus_base,
            coords: a.coords,
            node_address: a.node_address,
        })
    }

    /// Detaches endpoint `ep` (its pages stay mapped in this space).
    pub fn detach(&mut self, ep: u8) -> Result<(), Error> {
        proto::Client::detach(self, ep)?;
        if let Some(s) = self.shared.get_mut(ep as usize) {
            *s = 0;
        }
        Ok(())
    }

    pub fn info(&self, ep: u8) -> Result<Info, Error> {
        let i = proto::Client::info(self, ep)?;
        Ok(Info {
            coords: i.coords,
            node_address: i.node_address,
            mac: mac_from_words(i.mac_hi, i.mac_lo),
            bus_base: i.bus_base,
        })
    }

    /// The MAC address of endpoint `ep` (06:00:00:X:Y:Z).
    pub fn frame_mac(&self, ep: u8) -> Result<[u8; 6], Error> {
        self.info(ep).map(|i| i.mac)
    }

    pub fn dma_read(&self, ep: u8, offset: u32) -> Result<u32, Error> {
        proto::Client::dma_read(self, ep, offset).map(|r| r.value)
    }

    pub fn dma_write(&self, ep: u8, offset: u32, value: u32) -> Result<(), Error> {
        proto::Client::dma_write(self, ep, offset, value).map(|_| ())
    }

    pub fn dcr_read(&self, ep: u8, dcr: u32) -> Result<u32, Error> {
        proto::Client::dcr_read(self, ep, dcr).map(|r| r.value)
    }

    pub fn dcr_write(&self, ep: u8, dcr: u32, value: u32) -> Result<(), Error> {
        proto::Client::dcr_write(self, ep, dcr, value).map(|_| ())
    }

    fn page(&self, ep: u8) -> Result<*mut u8, Error> {
        match self.shared.get(ep as usize) {
            Some(&p) if p != 0 => Ok(p as *mut u8),
            _ => Err(Error::Refused(FabricErr::NotOwner)),
        }
    }

    fn put(&self, ep: u8, at: usize, data: &[u8]) -> Result<(), Error> {
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

    fn get(&self, ep: u8, at: usize, buf: &mut [u8]) -> Result<(), Error> {
        let p = self.page(ep)?;
        if at + buf.len() > shared::SIZE {
            return Err(Error::Refused(FabricErr::BadLength));
        }
        // SAFETY: as in `put`; the service wrote the range during the call that just returned.
        unsafe { core::ptr::copy_nonoverlapping(p.add(at), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Injects one collective packet on `vc`.
    pub fn tree_inject(
        &self,
        ep: u8,
        vc: usize,
        header: u32,
        payload: &[u8; TREE_PAYLOAD],
    ) -> Result<(), Error> {
        self.put(ep, shared::PAYLOAD, payload)?;
        proto::Client::tree_inject(self, ep, vc as u32, header).map(|_| ())
    }

    /// Takes one collective packet from `vc`'s reception FIFO: its header, or `None`.
    pub fn tree_receive(
        &self,
        ep: u8,
        vc: usize,
        payload: &mut [u8; TREE_PAYLOAD],
    ) -> Result<Option<u32>, Error> {
        let r = proto::Client::tree_receive(self, ep, vc as u32)?;
        if r.found == 0 {
            return Ok(None);
        }
        self.get(ep, shared::PAYLOAD, payload)?;
        Ok(Some(r.header))
    }

    pub fn tree_status(&self, ep: u8, vc: usize) -> Result<u32, Error> {
        proto::Client::tree_status(self, ep, vc as u32).map(|r| r.status)
    }

    /// Sends one Ethernet frame (pv NIC), routed by its destination MAC.
    pub fn frame_send(&self, ep: u8, frame: &[u8]) -> Result<(), Error> {
        if frame.len() > MAX_FRAME {
            return Err(Error::Refused(FabricErr::BadLength));
        }
        self.put(ep, shared::PAYLOAD, frame)?;
        proto::Client::frame_send(self, ep, frame.len() as u32).map(|_| ())
    }

    /// Takes one frame for `ep` into `buf`: its length, or `None` when the queue is empty.
    /// A frame longer than `buf` is cut to it.
    pub fn frame_receive(&self, ep: u8, buf: &mut [u8]) -> Result<Option<usize>, Error> {
        let r = proto::Client::frame_receive(self, ep)?;
        if r.found == 0 {
            return Ok(None);
        }
        let n = (r.len as usize).min(buf.len()).min(MAX_FRAME);
        self.get(ep, shared::PAYLOAD, &mut buf[..n])?;
        Ok(Some(n))
    }

    /// The BIC lines endpoint `ep`'s devices assert (as the engine's `irq_lines`).
    pub fn irq_lines(&self, ep: u8) -> Result<[u32; proto::LINE_WORDS], Error> {
        proto::Client::irq_lines(self, ep)?;
        let mut b = [0u8; 4 * proto::LINE_WORDS];
        self.get(ep, shared::LINES, &mut b)?;
        Ok(core::array::from_fn(|i| {
            u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        }))
    }

    /// The caller's endpoints whose interrupt lines or frame queue changed since the last
    /// call (bit k = endpoint k), as the engine's `take_changed` restricted to this client.
    pub fn take_changed(&self) -> Result<u32, Error> {
        proto::Client::take_changed(self).map(|r| r.mask)
    }

    /// Endpoint `ep`'s counters: packets, bytes, drops, errors (saturated to 32 bits).
    pub fn stats(&self, ep: u8) -> Result<[u32; 4], Error> {
        proto::Client::stats(self, ep).map(|r| r.counters)
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

/// A native program's [`Port`](crate::port::Port) to the service: the [`Service`] plus
/// where each of its endpoints' windows lies in this space, and how to wait for news.
pub struct Native {
    pub service: Service,
    window: [(u32, u32); MAX_ENDPOINTS],
}

impl Native {
    pub fn new(service: Service) -> Native {
        Native {
            service,
            window: [(0, 0); MAX_ENDPOINTS],
        }
    }

    /// Attaches an endpoint (as [`Service::attach`]) and remembers its window.
    pub fn attach(
        &mut self,
        window: u32,
        len: u32,
        shared_page: u32,
        event: ThreadId,
    ) -> Result<Attached, Error> {
        let a = self.service.attach(window, len, shared_page, event)?;
        if let Some(w) = self.window.get_mut(a.ep as usize) {
            *w = (window, len);
        }
        Ok(a)
    }

    /// Blocks until the service sends an event (or `timeout` passes), then collects the
    /// changed endpoints (`TakeChanged`, which also re-arms the events). Other messages
    /// are dropped.
    pub fn wait(&mut self, timeout: kestrel_abi::Timeout) -> u32 {
        let _ = kestrel_user::ipc::receive(self.service.thread(), timeout);
        self.service.take_changed().unwrap_or(0)
    }

    fn win(&self, ep: u8, offset: u32, n: usize) -> Result<*mut u8, Error> {
        let (base, len) = *self
            .window
            .get(ep as usize)
            .ok_or(Error::Refused(FabricErr::NotOwner))?;
        match offset.checked_add(n as u32) {
            Some(end) if base != 0 && end <= len => Ok((base + offset) as *mut u8),
            _ => Err(Error::Refused(FabricErr::BadLength)),
        }
    }
}

impl crate::port::Port for Native {
    type Error = Error;
    fn dma_read(&mut self, ep: u8, offset: u32) -> Result<u32, Error> {
        self.service.dma_read(ep, offset)
    }
    fn dma_write(&mut self, ep: u8, offset: u32, value: u32) -> Result<(), Error> {
        self.service.dma_write(ep, offset, value)
    }
    fn dcr_read(&mut self, ep: u8, dcr: u32) -> Result<u32, Error> {
        self.service.dcr_read(ep, dcr)
    }
    fn dcr_write(&mut self, ep: u8, dcr: u32, value: u32) -> Result<(), Error> {
        self.service.dcr_write(ep, dcr, value)
    }
    fn tree_inject(
        &mut self,
        ep: u8,
        vc: usize,
        header: u32,
        payload: &[u8; 256],
    ) -> Result<(), Error> {
        self.service.tree_inject(ep, vc, header, payload)
    }
    fn tree_receive(
        &mut self,
        ep: u8,
        vc: usize,
        payload: &mut [u8; 256],
    ) -> Result<Option<u32>, Error> {
        self.service.tree_receive(ep, vc, payload)
    }
    fn tree_status(&mut self, ep: u8, vc: usize) -> Result<u32, Error> {
        self.service.tree_status(ep, vc)
    }
    fn frame_send(&mut self, ep: u8, frame: &[u8]) -> Result<(), Error> {
        self.service.frame_send(ep, frame)
    }
    fn frame_receive(&mut self, ep: u8, buf: &mut [u8]) -> Result<Option<usize>, Error> {
        self.service.frame_receive(ep, buf)
    }
    fn take_changed(&mut self) -> Result<u32, Error> {
        self.service.take_changed()
    }
    fn mem_read(&mut self, ep: u8, offset: u32, buf: &mut [u8]) -> Result<(), Error> {
        let p = self.win(ep, offset, buf.len())?;
        // SAFETY: `[p, p + len)` lies inside the window this program attached for `ep` (its
        // own memory, mapped for as long as the program runs; checked by `win`). The fabric
        // writes it only during our calls to the service, never while this copy runs.
        unsafe { core::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }
    fn mem_write(&mut self, ep: u8, offset: u32, data: &[u8]) -> Result<(), Error> {
        let p = self.win(ep, offset, data.len())?;
        // SAFETY: as in `mem_read`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }
}

/// The fabric service with the engine's own signatures (`EpId`, `FabricError`, `Coords`,
/// `Diagnostic`, `Stats`), for a client written against `kestrel_fabric::Fabric` — the VMM:
/// its in-process `Fabric<VmMemory>` becomes a `RemoteFabric` and only `attach` changes
/// (it maps the window instead of handing the engine a `Memory`).
///
/// An IPC failure (the service is gone) reads as `FabricError::NoSuchEndpoint` (or
/// nothing, for the calls that cannot fail), so a VM whose fabric died sees a dead
/// device, never a stopped VMM.
pub struct RemoteFabric {
    service: Service,
    place: [(Coords, u32, u64, u64); MAX_ENDPOINTS],
    /// Whether a call since the last `take_changed` may have changed something (or an
    /// event said so): only then does `take_changed` ask the service, so a client that
    /// polls after every one of its own operations (the VMM after every fault) pays no
    /// IPC for operations that did not touch the fabric.
    dirty: core::cell::Cell<bool>,
}

use kestrel_fabric::{Coords, Diagnostic, EpId, FabricError, Stats, IRQ_WORDS};

fn engine(e: Error) -> FabricError {
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

impl RemoteFabric {
    /// Connects to the service (`Service::connect`).
    pub fn connect() -> Result<RemoteFabric, Error> {
        Ok(RemoteFabric {
            service: Service::connect()?,
            place: [(Coords::default(), 0, 0, 0); MAX_ENDPOINTS],
            dirty: core::cell::Cell::new(true),
        })
    }

    /// The service's thread: its `proto::EVENT` messages arrive from there.
    pub fn thread(&self) -> ThreadId {
        self.service.thread()
    }

    /// Notes an `EVENT` from the service: the next `take_changed` asks it.
    pub fn note_event(&self) {
        self.dirty.set(true);
    }

    fn svc(&self) -> &Service {
        self.dirty.set(true);
        &self.service
    }

    /// Attaches an endpoint whose memory window is `[window, window + len)` of this space
    /// (a VM's RAM segment: guest-physical `p` is window offset `p`) with its shared page at
    /// `shared_page`; events go to `event`. Returns the endpoint and its window's bus base.
    pub fn attach(
        &mut self,
        window: u32,
        len: u32,
        shared_page: u32,
        event: ThreadId,
    ) -> Result<(EpId, u64), FabricError> {
        let a = self
            .service
            .attach(window, len, shared_page, event)
            .map_err(engine)?;
        let c = Coords {
            x: (a.coords >> kestrel_bgp::torus::COORD_X_SHIFT) as u8,
            y: (a.coords >> kestrel_bgp::torus::COORD_Y_SHIFT) as u8,
            z: (a.coords >> kestrel_bgp::torus::COORD_Z_SHIFT) as u8,
        };
        if let Some(p) = self.place.get_mut(a.ep as usize) {
            *p = (c, a.node_address, a.bus_base, u64::from(len));
        }
        Ok((EpId(a.ep), a.bus_base))
    }

    pub fn detach(&mut self, ep: EpId) {
        self.dirty.set(true);
        let _ = self.service.detach(ep.0);
    }

    /// The bus range of `ep`'s window: `(base, len)` (as attached).
    pub fn window(&self, ep: EpId) -> Option<(u64, u64)> {
        let p = self.place.get(usize::from(ep.0))?;
        (p.3 != 0).then_some((p.2, p.3))
    }

    pub fn coords(&self, ep: EpId) -> Coords {
        self.place
            .get(usize::from(ep.0))
            .map_or(Coords::default(), |p| p.0)
    }

    pub fn node_address(&self, ep: EpId) -> u32 {
        self.place.get(usize::from(ep.0)).map_or(0, |p| p.1)
    }

    pub fn dma_read(&mut self, ep: EpId, offset: u32) -> Result<u32, FabricError> {
        self.svc().dma_read(ep.0, offset).map_err(engine)
    }

    pub fn dma_write(&mut self, ep: EpId, offset: u32, value: u32) -> Result<(), FabricError> {
        self.svc().dma_write(ep.0, offset, value).map_err(engine)
    }

    pub fn dcr_read(&mut self, ep: EpId, dcr: u32) -> Result<u32, FabricError> {
        self.svc().dcr_read(ep.0, dcr).map_err(engine)
    }

    pub fn dcr_write(&mut self, ep: EpId, dcr: u32, value: u32) -> Result<(), FabricError> {
        self.svc().dcr_write(ep.0, dcr, value).map_err(engine)
    }

    pub fn tree_inject(
        &mut self,
        ep: EpId,
        vc: usize,
        header: u32,
        payload: &[u8; TREE_PAYLOAD],
    ) -> Result<(), FabricError> {
        self.service
            .tree_inject(ep.0, vc, header, payload)
            .map_err(engine)
    }

    pub fn tree_receive(
        &mut self,
        ep: EpId,
        vc: usize,
        payload: &mut [u8; TREE_PAYLOAD],
    ) -> Option<u32> {
        self.svc().tree_receive(ep.0, vc, payload).ok().flatten()
    }

    /// Sets `ep`'s class routes at once, as the engine's `set_routes` (bit c of `sources` /
    /// `targets` = class c's SRCL / TGTL; the link bits are kept), through the endpoint's
    /// route descriptor DCRs.
    pub fn set_routes(&mut self, ep: EpId, sources: u16, targets: u16) -> Result<(), FabricError> {
        use kestrel_bgp::coll::{DCR_BASE, DCR_RDR0, RDR_COUNT};
        for r in 0..RDR_COUNT {
            let dcr = DCR_BASE + DCR_RDR0 + r;
            let v = self.dcr_read(ep, dcr)?;
            self.dcr_write(
                ep,
                dcr,
                kestrel_bgp::coll::route_word(dcr, v, sources, targets),
            )?;
        }
        Ok(())
    }

    pub fn tree_status(&self, ep: EpId, vc: usize) -> u32 {
        self.service.tree_status(ep.0, vc).unwrap_or(0)
    }

    pub fn frame_send(&mut self, ep: EpId, frame: &[u8]) -> Result<(), FabricError> {
        self.svc().frame_send(ep.0, frame).map_err(engine)
    }

    pub fn frame_receive(&mut self, ep: EpId, buf: &mut [u8]) -> Option<usize> {
        self.svc().frame_receive(ep.0, buf).ok().flatten()
    }

    /// Frames waiting for `ep` (0 if the service cannot be asked).
    pub fn frames_queued(&self, ep: EpId) -> usize {
        proto::Client::frames_queued(&self.service, ep.0).map_or(0, |r| r.frames as usize)
    }

    pub fn frame_mac(&self, ep: EpId) -> [u8; 6] {
        let c = self.coords(ep);
        [
            kestrel_bgp::torus::MAC_TORUS_KIND as u8,
            0,
            0,
            c.x,
            c.y,
            c.z,
        ]
    }

    pub fn irq_lines(&self, ep: EpId) -> [u32; IRQ_WORDS] {
        let mut out = [0; IRQ_WORDS];
        if let Ok(l) = self.service.irq_lines(ep.0) {
            for (o, v) in out.iter_mut().zip(l) {
                *o = v;
            }
        }
        out
    }

    /// This client's endpoints whose lines or frame queue changed (bit k = `EpId(k)`).
    pub fn take_changed(&mut self) -> u32 {
        if !self.dirty.replace(false) {
            return 0;
        }
        self.service.take_changed().unwrap_or(0)
    }

    /// The service's four counters (`kestrel_fabric::proto::stats_words`): all packets as
    /// `dma_packets_sent`, torus payload bytes as `dma_bytes_sent`, drops, errors; the other
    /// counters read 0.
    pub fn stats(&self, ep: EpId) -> Stats {
        let s = self.service.stats(ep.0).unwrap_or([0; 4]);
        Stats {
            dma_packets_sent: u64::from(s[0]),
            dma_bytes_sent: u64::from(s[1]),
            drops: u64::from(s[2]),
            errors: u64::from(s[3]),
            ..Stats::default()
        }
    }

    pub fn take_diagnostic(&mut self, ep: EpId) -> Option<Diagnostic> {
        let r = proto::Client::take_diagnostic(&self.service, ep.0).ok()?;
        if r.found == 0 {
            return None;
        }
        proto::diagnostic_from_words(r.diagnostic)
    }
}
