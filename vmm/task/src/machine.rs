//! One virtual bamboo machine: guest RAM as a linear segment, the two UARTs and the
//! UIC, and the emulation of the faults the kernel passes up.

use kestrel_abi::{xfer, FaultReply, Inject, ThreadId, TracePoint, VirtFault, VirtFaultMsg, XferRegs, PAGE_SIZE};
use kestrel_devices::{Uart16550, Uic};
use kestrel_user::{println, sys};
use kestrel_ppc440::dcr::{uic::COUNT as UIC_DCRS, UIC0_BASE as UIC_DCR};
use kestrel_ppc440::decode::{decode, AccessKind, Insn, Width};
use kestrel_vmm_core::segment::{GuestMemory, GuestPhysAddr, HostAddr, Segment};

/// Guest-physical page holding both UARTs (bamboo: 0xEF600300 and 0xEF600400).
pub const UART_PAGE: u32 = 0xEF60_0000;
const UART0: u32 = 0xEF60_0300;
const UART1: u32 = 0xEF60_0400;
/// bamboo's device space, which an OS guest probes.
const DEVICE_SPACE: u32 = 0xE000_0000;
const DEVICE_SPACE_LAST: u32 = 0xEFFF_FFFF;
/// Unmodelled accesses logged per VM.
const UNMODELLED_LOG_LINES: u32 = 8;
/// Alignment of guest RAM in host memory: the 440's 16 MiB page.
const SEGMENT_ALIGN: u32 = 16 << 20;

fn is_uart(gpa: u64) -> bool {
    let in_uart = |base: u32| gpa.wrapping_sub(base as u64) < kestrel_devices::UART_REGS as u64;
    in_uart(UART0) || in_uart(UART1)
}

pub enum Outcome {
    Reply(FaultReply),
    /// The guest idles: send this reply when its timers may have fired or input came.
    Idle(FaultReply),
    GuestReset,
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
}

impl ConsoleOut {
    fn put(&mut self, b: u8) {
        if b == b'\n' {
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

pub struct Machine {
    mem: GuestMemory<1>,
    uart0: Uart16550,
    uart1: Uart16550,
    uic: Uic,
    out: ConsoleOut,
    /// Index of this VM (for log lines).
    id: usize,
    /// Unmodelled accesses so far.
    unmodelled: u32,
    input: heapless::Deque<u8, INPUT_QUEUE>,
    /// The reply held back while the guest idles.
    pub held: Option<FaultReply>,
    /// An OS guest probes all of the board's device space (unmodelled parts get data
    /// storage exceptions); a bare-metal guest touching it is stopped.
    os: bool,
}

impl Machine {
    /// A machine whose guest RAM is the `size` bytes at `first` in the VMM's space
    /// (physically contiguous, zeroed, and aligned to 16 MiB physically and virtually, so
    /// the kernel can back it with large hardware pages; the root task hands it out so).
    pub fn new(first: u32, size: u32, id: usize, prefixed: bool, os: bool) -> Result<Machine, &'static str> {
        if first & (SEGMENT_ALIGN - 1) != 0 {
            return Err("guest RAM is not 16 MiB aligned");
        }
        let mut mem = GuestMemory::new();
        let seg = Segment::new(GuestPhysAddr::from_u32(0), size, HostAddr::new(first)).map_err(|e| e.as_str())?;
        mem.add(seg).map_err(|e| e.as_str())?;
        Ok(Machine {
            mem,
            uart0: Uart16550::new(),
            uart1: Uart16550::new(),
            // QEMU's UIC ignores the polarity register; so does the model, to match.
            uic: Uic::without_polarity(),
            out: ConsoleOut { line: [0; 128], len: 0, prefix: if prefixed { Some(id) } else { None }, continues: false },
            id,
            unmodelled: 0,

            input: heapless::Deque::new(),
            held: None,
            os,
        })
    }

    /// The VMM-side block backing guest-physical `gpa`, if it is RAM: the largest
    /// naturally aligned block (up to 16 MiB) around `gpa` that lies inside the segment,
    /// as `(host base, log2 size)`. Mapping whole blocks lets the kernel use large
    /// hardware pages for the guest and saves a page fault per 4 KiB.
    pub fn backing_block(&self, gpa: u32) -> Option<(u32, u32)> {
        (PAGE_SIZE.trailing_zeros()..=SEGMENT_ALIGN.trailing_zeros()).rev().find_map(|log2| {
            let base = gpa & !((1u32 << log2) - 1);
            let host = self.mem.translate(GuestPhysAddr::from_u32(base), 1 << log2).ok()?.get();
            (host & ((1u32 << log2) - 1) == 0).then_some((host, log2))
        })
    }

    /// Whether guest-physical `gpa` is device space that traps as MMIO when touched.
    pub fn is_device_space(&self, gpa: u32) -> bool {
        self.os && (DEVICE_SPACE..=DEVICE_SPACE_LAST).contains(&gpa)
    }

    /// Copies the guest ELF's segments to their guest-physical addresses.
    pub fn load_elf(&mut self, image: &[u8]) -> Result<u32, &'static str> {
        let size = self.mem.segments()[0].size();
        let plan = kestrel_kcore::elf::load_plan(image, 0x1000, size).map_err(|e| e.as_str())?;
        for seg in plan.segments.iter() {
            let host = self
                .mem
                .translate(GuestPhysAddr::from_u32(seg.vaddr), seg.memsz)
                .map_err(|e| e.as_str())?
                .get();
            let off = seg.file_offset as usize;
            let src = image.get(off..off + seg.filesz as usize).ok_or("segment outside the image")?;
            // SAFETY: `host..host+memsz` lies inside the guest RAM segment, which this
            // task allocated and maps read-write; no vCPU runs yet.
            unsafe {
                core::ptr::copy_nonoverlapping(src.as_ptr(), host as *mut u8, src.len());
            }
        }
        Ok(plan.entry)
    }

    /// Copies an ELF image to the physical addresses of its segments (an OS kernel);
    /// returns the physical entry point.
    pub fn load_elf_physical(&mut self, image: &[u8]) -> Result<u32, &'static str> {
        let size = self.mem.segments()[0].size();
        let plan = kestrel_kcore::elf::load_plan_physical(image, 0, size).map_err(|e| e.as_str())?;
        for seg in plan.segments.iter() {
            let off = seg.file_offset as usize;
            let src = image.get(off..off + seg.filesz as usize).ok_or("segment outside the image")?;
            self.load_blob(seg.vaddr, src)?;
        }
        Ok(plan.entry)
    }

    /// Copies `data` to guest-physical `gpa`.
    pub fn load_blob(&mut self, gpa: u32, data: &[u8]) -> Result<(), &'static str> {
        if data.is_empty() {
            return Ok(());
        }
        let host = self
            .mem
            .translate(GuestPhysAddr::from_u32(gpa), data.len() as u32)
            .map_err(|e| e.as_str())?
            .get();
        // SAFETY: `host..host+len` lies inside the guest RAM segment this task
        // allocated and maps read-write; the vCPU does not run yet.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), host as *mut u8, data.len()) };
        Ok(())
    }

    /// Handles one virtualization fault and builds the reply.
    ///
    /// With an empty transfer mask (the default set by `start_vcpu`), the message has
    /// only pc, instruction, guest-physical address, MSR and the value of the register
    /// in the instruction's RS/RT field; a result register is set with
    /// `FaultReply::set_gpr`. Rare forms that need more (load/store with update) read
    /// and write the whole state with `VcpuControl`.
    pub fn handle(&mut self, vcpu: ThreadId, f: &VirtFaultMsg) -> Outcome {
        let (pc, insn, rs_value) = (f.pc, f.insn, f.rs_value);
        let has_regs = f.mask & xfer::GPRS != 0;
        let words = VirtFaultMsg::words(f.mask) as usize;
        let mut gpr = XferRegs::decode_gprs(f.mask, words, &sys::utcb().mr).unwrap_or([0; 32]);
        let mut next = pc.wrapping_add(4);
        let mut inject = None;
        let mut result: Option<(usize, u32)> = None;
        match f.class {
            VirtFault::Mmio => {
                let gpa = f.gpa;
                match decode(insn) {
                    Insn::LoadStore(ls) if !ls.op().multiple() && ls.width() == Width::Byte && is_uart(gpa) => {
                        let gpa = gpa as u32;
                        if ls.update() && !has_regs {
                            return self.mmio_with_state(vcpu, ls, gpa, pc);
                        }
                        match ls.kind() {
                            AccessKind::Load => {
                                let v = self.mmio_read(gpa);
                                result = Some((ls.rt_rs().index(), ls.load_result(v as u32)));
                            }
                            AccessKind::Store => {
                                let src = if has_regs { gpr[ls.rt_rs().index()] } else { rs_value };
                                self.mmio_write(gpa, ls.store_data(src) as u8);
                            }
                        }
                        if ls.update() {
                            gpr[ls.ra().index()] = ls.effective_address(&gpr);
                        }
                    }
                    other => {
                        // Nothing modelled answers there (or not with that access width):
                        // the guest gets a data storage exception, never a silent value.
                        let what = match other {
                            Insn::LoadStore(ls) => match ls.kind() {
                                AccessKind::Load => "load",
                                AccessKind::Store => "store",
                            },
                            _ => "access",
                        };
                        self.log_unmodelled(format_args!(
                            "{what} at unmodelled device address {gpa:#010x} by instruction {insn:#010x} at pc {pc:#010x}: data storage exception"
                        ));
                        inject = Some(Inject::Dsi);
                        next = pc;
                    }
                }
            }
            VirtFault::Instruction => match decode(insn) {
                Insn::Mfdcr { rt, dcr } if self.dcr_modelled(dcr.number() as u32) => {
                    result = Some((rt.index(), self.dcr_read(dcr.number() as u32)))
                }
                Insn::Mtdcr { dcr, rs } if self.dcr_modelled(dcr.number() as u32) => {
                    let v = if has_regs { gpr[rs.index()] } else { rs_value };
                    self.dcr_write(dcr.number() as u32, v)
                }
                Insn::Mfdcr { dcr, .. } | Insn::Mtdcr { dcr, .. } => {
                    let n = dcr.number();
                    self.log_unmodelled(format_args!(
                        "access to unmodelled DCR {n:#x} by instruction {insn:#010x} at pc {pc:#010x}: machine check"
                    ));
                    inject = Some(Inject::MachineCheck);
                    next = pc;
                }
                other => {
                    println!("vmm: vm{}: unhandled instruction {:#010x} ({:?}) at pc {:#010x}: program exception", self.id, insn, other, pc);
                    inject = Some(Inject::Program);
                    next = pc;
                }
            },
            VirtFault::Idle => {
                // Resume at the mtmsr/wrtee: it re-checks for pending interrupts.
                return Outcome::Idle(self.with_lines(FaultReply::resume(pc)));
            }
            VirtFault::Halt => return Outcome::GuestReset,
        }
        let mut reply = self.with_lines(FaultReply::resume(next));
        reply.inject = inject;
        if has_regs {
            if let Some((r, v)) = result {
                gpr[r] = v;
            }
            // cr/lr/ctr/xer go back as received.
            let special = XferRegs::decode_special(f.mask, words, &sys::utcb().mr).unwrap_or([0; 4]);
            reply = reply.with_regs(&XferRegs { gpr, special });
        } else if let Some((r, v)) = result {
            reply = reply.set_gpr(r as u8, v);
        }
        Outcome::Reply(reply)
    }

    /// Shows a partial console line (a shell prompt) once the guest waits for input.
    pub fn flush_console(&mut self) {
        if self.out.len > 0 {
            self.out.write_buffered(false);
        }
    }

    /// Console input for this VM's UART0: queued, and fed into the UART's receive FIFO
    /// as the guest drains it. Bytes beyond the queue are dropped (as a real UART
    /// overruns), with no effect on the VMM.
    pub fn console_input(&mut self, b: u8) {
        let _ = self.input.push_back(b);
        self.feed_input();
    }

    fn feed_input(&mut self) {
        while self.uart0.can_accept_input() {
            let Some(b) = self.input.pop_front() else { break };
            self.uart0.push_input(b);
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

    /// The external and critical interrupt outputs, from the device models' outputs.
    fn lines(&mut self) -> (bool, bool) {
        self.uic.set_input(0, self.uart0.irq());
        self.uic.set_input(1, self.uart1.irq());
        (self.uic.irq_output(), self.uic.crit_output())
    }

    /// A byte MMIO access with update: read the vCPU's state, emulate, write it back.
    fn mmio_with_state(&mut self, vcpu: ThreadId, ls: kestrel_ppc440::decode::LoadStore, gpa: u32, pc: u32) -> Outcome {
        if sys::vcpu_control(vcpu, kestrel_abi::vcpuctl::GET_STATE, 0, 0, 0).is_err() {
            return Outcome::GuestReset;
        }
        let mut st = sys::utcb().vcpu;
        let ea = ls.effective_address(&st.gpr);
        match ls.kind() {
            AccessKind::Load => {
                let v = self.mmio_read(gpa);
                st.gpr[ls.rt_rs().index()] = ls.load_result(v as u32);
            }
            AccessKind::Store => {
                let v = ls.store_data(st.gpr[ls.rt_rs().index()]) as u8;
                self.mmio_write(gpa, v);
            }
        }
        st.gpr[ls.ra().index()] = ea;
        st.pc = pc.wrapping_add(4);
        sys::utcb().vcpu = st;
        if sys::vcpu_control(vcpu, kestrel_abi::vcpuctl::SET_STATE, 0, 0, 0).is_err() {
            return Outcome::GuestReset;
        }
        Outcome::Reply(self.with_lines(FaultReply::resume(st.pc)))
    }

    fn mmio_read(&mut self, gpa: u32) -> u8 {
        match gpa {
            a if a.wrapping_sub(UART0) < kestrel_devices::UART_REGS => {
                let v = self.uart0.read(a - UART0);
                if !self.input.is_empty() {
                    self.feed_input();
                }
                v
            }
            a if a.wrapping_sub(UART1) < kestrel_devices::UART_REGS => self.uart1.read(a - UART1),
            // `handle` sends only UART registers here.
            _ => 0xff,
        }
    }

    /// One log line per unmodelled access, naming the VM; after [`UNMODELLED_LOG_LINES`]
    /// of them, one last line says the rest are not logged (a guest could flood the
    /// console otherwise).
    fn log_unmodelled(&mut self, what: core::fmt::Arguments) {
        self.unmodelled += 1;
        if self.unmodelled <= UNMODELLED_LOG_LINES {
            println!("vmm: vm{}: {}", self.id, what);
        } else if self.unmodelled == UNMODELLED_LOG_LINES + 1 {
            println!("vmm: vm{}: more unmodelled accesses; not logging them", self.id);
        }
    }

    fn mmio_write(&mut self, gpa: u32, v: u8) {
        let out = &mut self.out;
        let mut tx = |b: u8| out.put(b);
        match gpa {
            a if a.wrapping_sub(UART0) < kestrel_devices::UART_REGS => self.uart0.write(a - UART0, v, &mut tx),
            // UART1 has no back end: its output is dropped, as with QEMU's `-serial null`.
            a if a.wrapping_sub(UART1) < kestrel_devices::UART_REGS => self.uart1.write(a - UART1, v, &mut |_| {}),
            // `handle` sends only UART registers here.
            _ => {}
        }
    }

    fn dcr_modelled(&self, dcr: u32) -> bool {
        dcr.wrapping_sub(UIC_DCR) < UIC_DCRS
    }

    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.uic.read_dcr(dcr - UIC_DCR)
    }

    fn dcr_write(&mut self, dcr: u32, v: u32) {
        self.uic.write_dcr(dcr - UIC_DCR, v);
    }
}

/// The IPC message of a fault reply (register parts go to this thread's UTCB).
pub fn reply_msg(r: &FaultReply) -> kestrel_user::ipc::Msg {
    let (tag, regs) = r.encode(&mut sys::utcb().mr);
    kestrel_user::ipc::Msg { tag, regs }
}

/// Prints the vCPU's trace points: count and cost per exit class (timebase ticks).
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
            let sum = ((c.sum_hi as u64) << 32) | c.sum_lo as u64;
            println!("vmm:   {:<18} {:>8}  min {:>5} max {:>6} avg {:>5}", tp.name(), c.count, c.min, c.max, sum / c.count as u64);
        }
    }
}
