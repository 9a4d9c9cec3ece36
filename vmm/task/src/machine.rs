//! One virtual bamboo machine: guest RAM as a linear segment, and the devices of the
//! board description ([`BOARD`]: bamboo's and the BG/P interconnect's) on the MMIO and DCR
//! buses. This is
//! the glue between the kernel and the pure parts: it decodes the fault message, lets
//! `kestrel_vmm_core::fault` dispatch it to the buses, and builds the reply with the ABI's
//! `FaultReply` (adding the interrupt-line levels).

use crate::fabric::{Ram, VmFabric};
use alloc::rc::Rc;
use core::cell::RefCell;
use kestrel_abi::{xfer, FaultReply, ThreadId, TracePoint, VirtFaultMsg, XferRegs, PAGE_SIZE};
use kestrel_devices::bus::{GuestRam, TxSink, UartPort, UicInput};
use kestrel_devices::Uic;
use kestrel_user::{println, sys};
use kestrel_vmm_core::board::{self, Board};
use kestrel_vmm_core::diag::{self, LastInFull, LogLimit, Verdict};
use kestrel_vmm_core::fabric::{self as vfabric, BgpDevices, Node, VmEndpoint};
use kestrel_vmm_core::fault::{self, Buses, Unmodelled};
use kestrel_vmm_core::segment::{GuestMemory, GuestPhysAddr, HostAddr, Segment, SegmentRam};
use kestrel_vmm_core::trace_mark::Mark;

/// The board every VM is: bamboo with the BG/P devices whose models exist so far
/// (`board::BGP_VM` is the whole set).
pub const BOARD: Board = Board {
    devices: &[
        board::UIC0,
        board::UART0,
        board::UART1,
        board::BIC,
        board::COLL_VC0,
        board::COLL_VC1,
        board::COLL_DCR,
        board::TORUS_DMA,
        board::TORUS_DCR,
        board::DMA_DCR,
        board::VIRTIO_NET,
    ],
    device_space: board::BAMBOO.device_space,
};

/// A VM's BG/P devices and its endpoint of the fabric (`kestrel_vmm_core::fabric`).
type Bgp<F> = BgpDevices<F, SegmentRam<'static, 1>>;

/// Lines logged in full per VM and kind of diagnostic (`kestrel_vmm_core::diag`).
const LOG_LINES_IN_FULL: u32 = 8;
/// Least time between two summary lines of one kind, in microseconds.
const LOG_SUMMARY_US: u64 = 1_000_000;
/// Alignment of guest RAM in host memory: the 440's 16 MiB page.
const SEGMENT_ALIGN: u32 = 16 << 20;

pub enum Outcome {
    Reply(FaultReply),
    /// The guest idles: send this reply when its timers may have fired or input came.
    Idle(FaultReply),
    GuestReset,
    /// The kernel halted the vCPU for a reason of its own (it printed a line saying why):
    /// stop the VM, without calling it a reset request.
    Halted,
}

/// Console bytes waiting for room in the virtual UART's receive FIFO.
const INPUT_QUEUE: usize = 512;

/// A VM's console output, line-buffered so that several VMs' lines do not mix.
struct ConsoleOut {
    line: [u8; 128],
    len: usize,
    /// `[vmN] ` before every console line when several VMs share the console.
    prefix: Option<usize>,
    /// Part of the current line was already written (a long line, or a prompt).
    continues: bool,
    /// The last `kestrel-trace-mark NAME` line not yet taken (see crate::trace_mark).
    mark: Option<Mark>,
}

impl ConsoleOut {
    fn put(&mut self, b: u8) {
        if b == b'\n' {
            if !self.continues {
                if let Some(m) = Mark::from_line(&self.line[..self.len]) {
                    self.mark = Some(m);
                }
            }
            self.write_buffered(true);
            self.continues = false;
            return;
        }
        if self.len == self.line.len() {
            self.write_buffered(false);
        }
        if b != b'\r' {
            self.line[self.len] = b;
            self.len += 1;
        }
    }

    /// Writes what the line buffer holds (and the newline, if `newline`) in one kernel
    /// call, so that no other program's output lands inside the line; only a line's
    /// first piece gets the prefix.
    fn write_buffered(&mut self, newline: bool) {
        if self.len == 0 && self.continues && !newline {
            return;
        }
        let mut out = [0u8; 6 + 128 + 1];
        let mut n = 0;
        if let (Some(i), false) = (self.prefix, self.continues) {
            out[..6].copy_from_slice(&[b'[', b'v', b'm', b'0' + (i % 10) as u8, b']', b' ']);
            n = 6;
        }
        out[n..n + self.len].copy_from_slice(&self.line[..self.len]);
        n += self.len;
        if newline {
            out[n] = b'\n';
            n += 1;
        }
        let _ = sys::kdebug_write(&out[..n]);
        self.len = 0;
        self.continues = true;
    }
}

impl TxSink for ConsoleOut {
    fn put(&mut self, b: u8) {
        ConsoleOut::put(self, b)
    }
}

/// The console UART: UART0, its output to the console, its interrupt to the UIC.
type ConsoleUart = UartPort<UicInput, ConsoleOut>;

pub struct Machine<F: VmFabric> {
    ram: Ram,
    buses: Buses,
    console: Rc<RefCell<ConsoleUart>>,
    uic: Rc<RefCell<Uic>>,
    /// The BG/P devices and the VM's fabric endpoint.
    bgp: Bgp<F>,
    /// The last fault may have touched a BG/P device or the virtio NIC.
    pub touched_bgp: bool,
    /// Index of this VM (for log lines).
    id: usize,
    /// The rate limit of this VM's diagnostics.
    log: LogLimit,
    input: heapless::Deque<u8, INPUT_QUEUE>,
    /// The reply held back while the guest idles.
    pub held: Option<FaultReply>,
    /// The register file of the reply being built (a fault that carried one).
    regs: Option<XferRegs>,
    /// An OS guest probes all of the board's device space (unmodelled parts get data
    /// storage exceptions); a bare-metal guest touching it is stopped.
    os: bool,
}

impl<F: VmFabric> Machine<F> {
    /// A machine whose guest RAM is the `size` bytes at `first` in the VMM's space
    /// (physically contiguous, zeroed, and aligned to 16 MiB physically and virtually, so
    /// the kernel can back it with large hardware pages; the root task hands it out so),
    /// with the board's devices on its buses (`Board::attach_vm`: the BG/P devices in front
    /// of the VM's endpoint of `node`; UART0's output is this VM's console).
    pub fn new(
        first: u32,
        size: u32,
        id: usize,
        prefixed: bool,
        os: bool,
        node: &Node<F>,
    ) -> Result<Machine<F>, &'static str> {
        if first & (SEGMENT_ALIGN - 1) != 0 {
            return Err("guest RAM is not 16 MiB aligned");
        }
        let mut map = GuestMemory::new();
        let seg = Segment::new(GuestPhysAddr::from_u32(0), size, HostAddr::new(first))
            .map_err(|e| e.as_str())?;
        map.add(seg).map_err(|e| e.as_str())?;
        // SAFETY: `first..first + size` is guest RAM the root task gave this task, mapped
        // read-write and used for nothing else; the guest writes it only while its vCPU runs,
        // and this (single-threaded) VMM touches it only while that vCPU is blocked.
        let bytes = unsafe { core::slice::from_raw_parts_mut(first as *mut u8, size as usize) };
        let ram: Ram = Rc::new(RefCell::new(SegmentRam::new(map, first, bytes)));
        let no_endpoint = |e: kestrel_fabric::FabricError| {
            println!("vmm: vm{id}: no fabric endpoint: {e}");
            "no fabric endpoint"
        };
        let (ep, bus_base) = node
            .borrow_mut()
            .attach_vm(&ram, first, size as u64, id)
            .map_err(no_endpoint)?;
        let endpoint = VmEndpoint::new(node, ep, bus_base).map_err(|e| no_endpoint(e.into()))?;

        let out = ConsoleOut {
            line: [0; 128],
            len: 0,
            prefix: prefixed.then_some(id),
            continues: false,
            mark: None,
        };
        let (board, bgp) = BOARD
            .attach_vm(out, Some((endpoint, ram.clone(), size as u64)))
            .map_err(|e| {
                println!("vmm: vm{id}: board: {e:?}");
                "the board description does not attach"
            })?;
        Ok(Machine {
            ram,
            buses: board.buses,
            console: board.console,
            uic: board.uic,
            bgp: bgp.ok_or("the board attached no BG/P devices")?,
            touched_bgp: false,
            id,
            log: LogLimit::new(diag::Policy {
                first: LOG_LINES_IN_FULL,
                interval: LOG_SUMMARY_US * crate::ticks_per_us(),
            }),
            input: heapless::Deque::new(),
            held: None,
            regs: None,
            os,
        })
    }

    /// The VMM-side block backing guest-physical `gpa`, if it is RAM: the largest
    /// naturally aligned block (up to 16 MiB) around `gpa` that lies inside the segment,
    /// as `(host base, log2 size)`. Mapping whole blocks lets the kernel use large
    /// hardware pages for the guest and saves a page fault per 4 KiB.
    pub fn backing_block(&self, gpa: u32) -> Option<(u32, u32)> {
        (PAGE_SIZE.trailing_zeros()..=SEGMENT_ALIGN.trailing_zeros())
            .rev()
            .find_map(|log2| {
                let base = gpa & !((1u32 << log2) - 1);
                let host = self
                    .ram
                    .borrow()
                    .map
                    .translate(GuestPhysAddr::from_u32(base), 1 << log2)
                    .ok()?
                    .get();
                (host & ((1u32 << log2) - 1) == 0).then_some((host, log2))
            })
    }

    /// Whether guest-physical `gpa` is device space that traps as MMIO when touched.
    pub fn is_device_space(&self, gpa: u32) -> bool {
        self.os && BOARD.in_device_space(gpa as u64)
    }

    /// Copies the guest ELF's segments to their guest-physical addresses.
    pub fn load_elf(&mut self, image: &[u8]) -> Result<u32, &'static str> {
        let size = self.ram.borrow().map.segments()[0].size();
        let plan = kestrel_kcore::elf::load_plan(image, 0x1000, size).map_err(|e| e.as_str())?;
        for seg in plan.segments.iter() {
            let off = seg.file_offset as usize;
            let src = image
                .get(off..off + seg.filesz as usize)
                .ok_or("segment outside the image")?;
            self.load_blob(seg.vaddr, src)?;
        }
        Ok(plan.entry)
    }

    /// Copies an ELF image to the physical addresses of its segments (an OS kernel);
    /// returns the physical entry point.
    pub fn load_elf_physical(&mut self, image: &[u8]) -> Result<u32, &'static str> {
        let size = self.ram.borrow().map.segments()[0].size();
        let plan =
            kestrel_kcore::elf::load_plan_physical(image, 0, size).map_err(|e| e.as_str())?;
        for seg in plan.segments.iter() {
            let off = seg.file_offset as usize;
            let src = image
                .get(off..off + seg.filesz as usize)
                .ok_or("segment outside the image")?;
            self.load_blob(seg.vaddr, src)?;
        }
        Ok(plan.entry)
    }

    /// Copies `data` to guest-physical `gpa`.
    pub fn load_blob(&mut self, gpa: u32, data: &[u8]) -> Result<(), &'static str> {
        if data.is_empty() {
            return Ok(());
        }
        self.ram
            .borrow_mut()
            .write(gpa as u64, data)
            .map_err(|_| "image outside guest RAM")
    }

    /// Handles one virtualization fault and builds the reply.
    ///
    /// With an empty transfer mask (the default set by `start_vcpu`), the message has
    /// only pc, instruction, guest-physical address, MSR and the value of the register
    /// in the instruction's RS/RT field; a result register is set with
    /// `FaultReply::set_gpr`. Rare forms that need more (load/store with update) read
    /// and write the whole state with `VcpuControl`.
    pub fn handle(&mut self, vcpu: ThreadId, f: &VirtFaultMsg) -> Outcome {
        let words = VirtFaultMsg::words(f.mask) as usize;
        let mr = &sys::utcb().mr;
        let mut gpr = XferRegs::decode_gprs(f.mask, words, mr).copied();
        // The FP state rides in the UTCB's FP area (an FP load or store); a load's result
        // goes back there.
        let fp_area = &mut sys::utcb().fp;
        let fpr = (f.mask & xfer::FPRS != 0).then_some(fp_area);
        let (id, log) = (self.id, &mut self.log);
        let out = fault::handle(f, gpr.as_mut(), fpr, &self.buses, &mut |u| {
            log_unmodelled(id, log, u)
        });
        if !self.input.is_empty() {
            self.feed_input();
        }
        self.touched_bgp = vfabric::touches_bgp(f);
        if self.touched_bgp {
            self.bgp_update();
        }
        match out {
            fault::Outcome::Reply(r) => match gpr {
                Some(gpr) => {
                    // The register file goes back with the results in it; cr/lr/ctr/xer
                    // as received.
                    let special = XferRegs::decode_special(f.mask, words, mr).unwrap_or([0; 4]);
                    self.regs = Some(XferRegs { gpr, special });
                    Outcome::Reply(self.with_lines(r.with_regs()))
                }
                None => Outcome::Reply(self.with_lines(r)),
            },
            fault::Outcome::NeedRegisters => self.handle_with_state(vcpu, f),
            fault::Outcome::Idle(r) => Outcome::Idle(self.with_lines(r)),
            fault::Outcome::Halt if fault::halt_is_reset_request(f.insn) => Outcome::GuestReset,
            fault::Outcome::Halt => Outcome::Halted,
        }
    }

    /// The lean path of the hottest device exit: `mfdcr`/`mtdcr` of one of UIC0's DCRs
    /// (a guest kernel reads or acknowledges its interrupt controller on every interrupt).
    /// Same semantics as [`Machine::handle`] for these (the UIC is on the DCR bus, the reply
    /// sets the result register and carries the interrupt lines), without the generic
    /// decode, the bus lookup and the bookkeeping no UIC access needs: `None` for anything
    /// else (and while console input waits for room in the UART, which `handle` feeds).
    #[inline(always)]
    pub fn uic_dcr(&mut self, f: &VirtFaultMsg) -> Option<kestrel_user::ipc::Msg> {
        use kestrel_ppc440::decode::{opcd, spr_number, xo31, OPCD, RT, XO};
        if f.class != kestrel_abi::VirtFault::Instruction
            || f.mask != 0
            || OPCD.get(f.insn) != opcd::X
            || !self.input.is_empty()
        {
            return None;
        }
        let offset = spr_number(f.insn).wrapping_sub(kestrel_devices::UIC_DCR_BASE);
        if offset >= kestrel_devices::UIC_DCR_COUNT {
            return None;
        }
        let mut uic = self.uic.borrow_mut();
        let reply = match XO.get(f.insn) {
            xo31::MFDCR => {
                let v = uic.read_dcr(offset);
                FaultReply::resume(f.pc.wrapping_add(4)).set_gpr(RT.get(f.insn) as u8, v)
            }
            xo31::MTDCR => {
                uic.write_dcr(offset, f.rs_value);
                FaultReply::resume(f.pc.wrapping_add(4))
            }
            _ => return None,
        };
        let reply = reply.irq(uic.irq_output()).crit(uic.crit_output());
        let (tag, regs) = reply.encode(None, &mut sys::utcb().mr);
        self.touched_bgp = false;
        Some(kestrel_user::ipc::Msg { tag, regs })
    }

    /// An access that needs the whole register file: read the vCPU's state, emulate,
    /// write it back.
    fn handle_with_state(&mut self, vcpu: ThreadId, f: &VirtFaultMsg) -> Outcome {
        if sys::vcpu_control(vcpu, kestrel_abi::vcpuctl::GET_STATE, 0, 0, 0).is_err() {
            return Outcome::GuestReset;
        }
        let mut st = sys::utcb().vcpu;
        let fp_area = &mut sys::utcb().fp;
        let fpr = (f.mask & xfer::FPRS != 0).then_some(fp_area);
        let (id, log) = (self.id, &mut self.log);
        let out = fault::handle(f, Some(&mut st.gpr), fpr, &self.buses, &mut |u| {
            log_unmodelled(id, log, u)
        });
        let fault::Outcome::Reply(r) = out else {
            return Outcome::GuestReset;
        };
        st.pc = r.pc.unwrap_or(f.pc);
        sys::utcb().vcpu = st;
        if sys::vcpu_control(vcpu, kestrel_abi::vcpuctl::SET_STATE, 0, 0, 0).is_err() {
            return Outcome::GuestReset;
        }
        Outcome::Reply(self.with_lines(r))
    }

    /// Whether this VM has the collective network (the back-pressure concerns it).
    pub fn has_collective(&self) -> bool {
        self.bgp.coll.is_some()
    }

    /// This VM's bit in the fabric's changed word.
    pub fn fabric_bit(&self) -> u32 {
        self.bgp.endpoint.bit()
    }

    /// The fabric endpoint (shares the fabric with every VM's).
    pub fn endpoint(&self) -> &VmEndpoint<F> {
        &self.bgp.endpoint
    }

    /// Brings the BIC's device lines (and so UIC0 input 30) up to date with the fabric and
    /// the models, and logs what the fabric and the models report about this VM (one line
    /// per report, under the VM's rate limit). Called after every fault that touched a
    /// BG/P device, and for every VM whose endpoint the fabric says changed.
    pub fn bgp_update(&mut self) {
        let (id, log) = (self.id, &mut self.log);
        self.bgp
            .update(&self.uic, &mut |what| log_interconnect(id, log, what));
    }

    /// The VM stops: prints the diagnostics' summaries still owed, so the log accounts for
    /// every event (`kestrel_vmm_core::diag`).
    pub fn finish_log(&mut self) {
        let id = self.id;
        for s in self.log.finish() {
            println!("vmm: vm{id}: {s}");
        }
    }

    /// Shows a partial console line (a shell prompt) once the guest waits for input.
    pub fn flush_console(&mut self) {
        let mut c = self.console.borrow_mut();
        if c.tx.len > 0 {
            c.tx.write_buffered(false);
        }
    }

    /// The trace mark the guest's console asked for since the last call (crate::trace_mark).
    pub fn take_trace_mark(&mut self) -> Option<Mark> {
        self.console.borrow_mut().tx.mark.take()
    }

    /// Console input for this VM's UART0: queued, and fed into the UART's receive FIFO
    /// as the guest drains it. Bytes beyond the queue are dropped (as a real UART
    /// overruns), with no effect on the VMM.
    pub fn console_input(&mut self, b: u8) {
        let _ = self.input.push_back(b);
        self.feed_input();
    }

    fn feed_input(&mut self) {
        let mut c = self.console.borrow_mut();
        while c.can_accept_input() {
            let Some(b) = self.input.pop_front() else {
                break;
            };
            c.push_input(b);
        }
    }

    /// Tells the kernel the current level of the vCPU's external interrupt input (for
    /// a change that did not come with a fault reply, like console input).
    pub fn sync_irq(&mut self, vcpu: ThreadId) {
        let (level, _) = self.lines();
        let _ = sys::vcpu_control(vcpu, kestrel_abi::vcpuctl::SET_IRQ, level as u32, 0, 0);
    }

    /// `reply` with the current levels of the interrupt lines (for a held reply too).
    pub fn with_lines(&mut self, reply: FaultReply) -> FaultReply {
        let (irq, crit) = self.lines();
        reply.irq(irq).crit(crit)
    }

    /// Whether the UIC asserts the vCPU's external or critical interrupt input.
    pub fn irq_pending(&self) -> bool {
        let (irq, crit) = self.lines();
        irq || crit
    }

    /// The UIC's external and critical interrupt outputs.
    fn lines(&self) -> (bool, bool) {
        let uic = self.uic.borrow();
        (uic.irq_output(), uic.crit_output())
    }
}

/// Logs an interconnect error of VM `id` under the VM's rate limit.
fn log_interconnect(id: usize, log: &mut LogLimit, what: core::fmt::Arguments) {
    let kind = diag::Kind::Interconnect;
    match log.event(kind, sys::timebase()) {
        Verdict::Log { last } => {
            println!("vmm: vm{id}: interconnect: {what}");
            if last {
                let note = LastInFull {
                    kind,
                    first: LOG_LINES_IN_FULL,
                };
                println!("vmm: vm{id}: {note}");
            }
        }
        Verdict::Summary(s) => println!("vmm: vm{id}: {s}"),
        Verdict::Quiet => {}
    }
}

/// Declares the board's device pages device memory in `vcpu`'s VM space.
pub fn declare_mmio(vcpu: ThreadId) -> Result<(), kestrel_abi::KError> {
    for (base, size) in BOARD.mmio_declarations() {
        sys::vcpu_control(
            vcpu,
            kestrel_abi::vcpuctl::DECLARE_MMIO,
            1,
            base as u32,
            size as u32,
        )?;
    }
    Ok(())
}

/// Logs an unmodelled access of VM `id` under the VM's rate limit: the first lines of each
/// kind in full, then a counted summary at most once a second (a guest could flood the
/// console otherwise; every console line is a polled write in the kernel).
fn log_unmodelled(id: usize, log: &mut LogLimit, u: Unmodelled) {
    match log.event(u.kind(), sys::timebase()) {
        Verdict::Log { last } => {
            println!("vmm: vm{id}: {u}");
            if last {
                let note = LastInFull {
                    kind: u.kind(),
                    first: LOG_LINES_IN_FULL,
                };
                println!("vmm: vm{id}: {note}");
            }
        }
        Verdict::Summary(s) => println!("vmm: vm{id}: {s}"),
        Verdict::Quiet => {}
    }
}

impl<F: VmFabric> Machine<F> {
    /// The IPC message of fault reply `r` (a register file goes to this thread's UTCB).
    pub fn reply_msg(&mut self, r: &FaultReply) -> kestrel_user::ipc::Msg {
        let (tag, regs) = r.encode(self.regs.take().as_ref(), &mut sys::utcb().mr);
        kestrel_user::ipc::Msg { tag, regs }
    }
}

/// Prints the vCPU's trace points: count, exact total cost and average per exit class
/// (timebase ticks), and GUEST_RUN (guest-mode time, not an exit), so that the totals of
/// all rows add up to the vCPU's time (docs/adr/0023-exit-accounting.md).
pub fn print_trace(vcpu: ThreadId, vm: Option<usize>) {
    if sys::trace_control(kestrel_abi::tracectl::READ, vcpu).is_err() {
        return;
    }
    let t = sys::utcb().trace;
    match vm {
        Some(i) => println!("vmm: vm{i} trace points (cost in timebase ticks)"),
        None => println!("vmm: trace points (cost in timebase ticks)"),
    }
    for tp in TracePoint::ALL {
        let c = t[tp as usize];
        if c.count > 0 {
            println!(
                "vmm:   {:<18} {:>8}  total {:>12} avg {:>5}",
                tp.name(),
                c.count,
                c.sum(),
                c.sum() / c.count as u64
            );
        }
    }
}
