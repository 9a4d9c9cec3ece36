//! The virtualization interface (`kestrel_abi::vcpu`), with the root as a tiny VMM:
//! it creates vCPUs (`ThreadControl` with `tcflags::VCPU`), sets their state, guest
//! TLB, transfer masks and interrupt line (`VcpuControl`), backs guest-physical pages
//! with its own frames by answering the vCPU's page faults, answers virtualization
//! faults, and reads the exit trace points (`TraceControl`).
//!
//! Every guest is a handful of hand-assembled PowerPC 440 instructions in one code
//! frame at guest-physical [`CODE_GPA`], reached through guest TLB entry 0 (a 1:1
//! 256 MiB supervisor mapping, the ePAPR entry state the real VMM uses). Guests end
//! with a reset request (`mtspr DBCR0` with DBCR0[RST]), which the kernel reports as a
//! `VirtFault::Halt` message. vCPUs run below the root's priority, so a guest only
//! runs while the root waits for it, and every wait is bounded.

use crate::children::{echo_once, spin_counter, SPINS};
use crate::common::{
    call_failed, elapsed_us, expect_ipc_error, expect_kerror, ipc_failed, kerr_code, lbl, note,
    recv_from, report, report_from, set_name, timebase_hz, TestResult, QUIET, WAIT,
};
use crate::pager::Frame;
use crate::threads::{entry, registers, Thread, CHILD_PRIORITY};
use core::sync::atomic::Ordering::Relaxed;
use kestrel_abi::{
    exreg, label, tcflags, tracectl, vcpuctl, vfault, xfer, FaultReply, IpcError, IpcPhase, KError,
    Rights, ThreadId, Timeout, Timeouts, TraceCounter, TracePoint, VcpuState, VirtFault,
    VirtFaultMsg, NUM_TRACEPOINTS, PAGE_SIZE,
};
use kestrel_user::ipc::{self, Msg};
use kestrel_user::mem::{map_reply, PageFault};
use kestrel_user::sys;

pub mod pv;

/// Guest-physical (and, through guest TLB entry 0, guest-virtual) address of the code
/// page; guests start at its first word.
const CODE_GPA: u32 = 0x4000;
/// Where guest exception handlers live: IVPR = 0 and IVORn = this address, so the
/// handler is in the (already mapped) code page.
const HANDLER: u32 = CODE_GPA + 0x100;
/// Below the root: a guest runs only while the root waits for it.
const VCPU_PRIORITY: u32 = CHILD_PRIORITY - 10;

/// Instruction encodings, register numbers and bits, all from `kestrel_ppc440` (the encoders
/// are round-trip tested against its decoder there), under the short names the guests use,
/// plus the reset request every guest ends with.
mod ppc {
    pub use kestrel_ppc440::dbcr0::RST_SYSTEM as DBCR0_RST;
    pub use kestrel_ppc440::dcr::UIC0_BASE as UIC_DCR;
    pub use kestrel_ppc440::encode::{
        addi, li, lis, lwz, mfdcr, mfmsr, mfspr, mtctr, mtmsr, mtspr, stw, wrteei, BDNZ_SELF,
        B_SELF, ILLEGAL, SC,
    };
    pub use kestrel_ppc440::esr::{PIL as ESR_PIL, ST as ESR_ST};
    pub use kestrel_ppc440::msr::{CE as MSR_CE, EE as MSR_EE, ME as MSR_ME, WE as MSR_WE};
    pub use kestrel_ppc440::spr::{
        DBCR0, DEAR, DEC, ESR, IVOR2, IVOR4, IVOR6, IVOR8, IVPR, PID, SPRG0, SRR0, SRR1,
    };
    use kestrel_ppc440::tlb::{word0, word2, PageSize};

    /// Guest TLB entry 0: 256 MiB at 0, 1:1, supervisor read/write/execute.
    pub const ENTRY0_W0: u32 = word0::V.mask() | PageSize::M256.word0();
    pub const ENTRY0_W2: u32 = word2::SX.mask() | word2::SW.mask() | word2::SR.mask();

    /// The reset request every guest ends with: `lis r31, 0x3000; mtspr DBCR0, r31`
    /// (the second word faults as `VirtFault::Halt`).
    pub const HALT: [u32; 2] = [lis(31, (DBCR0_RST >> 16) as u16), mtspr(DBCR0, 31)];
}

// ---------------------------------------------------------------------------------
// The tiny VMM.
// ---------------------------------------------------------------------------------

/// One VM with one vCPU whose code page is a frame of ours. Dropping it deletes the
/// vCPU (and with it the VM space) first, then frees the frames.
struct Vm {
    vcpu: Thread,
    code: Frame,
    /// A second guest-physical page some tests back: (guest-physical page, frame).
    data: Option<(u32, Frame)>,
}

impl Vm {
    /// Creates a vCPU (not started) in a new VM space with the root as its pager and
    /// VMM, `code` at [`CODE_GPA`], pc there, MSR 0, and guest TLB entry 0 mapping
    /// 0..256 MiB 1:1 for the guest supervisor.
    fn new(code: &[u32]) -> Result<Vm, &'static str> {
        let frame = Frame::alloc()?;
        let vcpu = Thread::reserve()?;
        let id = vcpu.id();
        sys::thread_control_flags(id, id, VCPU_PRIORITY, ThreadId::ROOT, 0, tcflags::VCPU)
            .map_err(|e| call_failed("ThreadControl (create vCPU)", e))?;
        let vm = Vm {
            vcpu,
            code: frame,
            data: None,
        };
        vm.load(CODE_GPA, code);
        set_state(
            id,
            &VcpuState {
                pc: CODE_GPA,
                msr: 0,
                ..VcpuState::default()
            },
        )?;
        // Guest TLB entry 0 (PPC440 UM §5.4): word 0 = EPN 0 | V | SIZE 256 MiB (9),
        // TS 0; word 1 = RPN 0; word 2 = SX|SW|SR; TID 0 (matches every PID).
        set_tlb(id, 0, [ppc::ENTRY0_W0, 0, ppc::ENTRY0_W2], 0)
            .map_err(|e| call_failed("VcpuControl(SET_TLB)", e))?;
        Ok(vm)
    }

    fn id(&self) -> ThreadId {
        self.vcpu.id()
    }

    /// Writes guest instructions (or data) at guest-physical `gpa` in the code page.
    fn load(&self, gpa: u32, words: &[u32]) {
        for (i, &w) in words.iter().enumerate() {
            self.code.write(gpa - CODE_GPA + 4 * i as u32, w);
        }
    }

    /// Backs guest-physical page `gpa` with a fresh zeroed frame (mapped on its fault).
    fn back(&mut self, gpa: u32) -> Result<&Frame, &'static str> {
        let frame = Frame::alloc()?;
        Ok(&self.data.insert((gpa, frame)).1)
    }

    fn start(&self) -> TestResult {
        sys::exchange_registers(self.id(), exreg::START, 0, 0, ThreadId::NIL, ThreadId::NIL)
            .map_err(|e| call_failed("ExchangeRegisters (start vCPU)", e))?;
        Ok(())
    }

    /// The next message from the vCPU, raw (nothing is served).
    fn recv(&self) -> Result<Msg, &'static str> {
        recv_from(self.id())
    }

    /// Replies to the vCPU's pending fault and waits for its next message.
    fn reply_recv(&self, reply: &Msg) -> Result<Msg, &'static str> {
        let (_, m, r) = ipc::ipc(
            self.id(),
            self.id(),
            Timeouts::new(Timeout::ZERO, WAIT),
            reply,
        );
        r.map_err(|e| ipc_failed("reply to the vCPU, then wait for its next exit", e))?;
        Ok(m)
    }

    /// The frame backing guest-physical `gpa`, if this VM has one.
    fn backing(&self, gpa: u32) -> Option<u32> {
        let page = gpa & !(PAGE_SIZE - 1);
        if page == CODE_GPA {
            return Some(self.code.va());
        }
        match &self.data {
            Some((p, f)) if *p == page => Some(f.va()),
            _ => None,
        }
    }

    /// Serves page faults on backed pages, starting with `m`, until another message
    /// arrives; returns it.
    fn serve(&self, mut m: Msg) -> Result<Msg, &'static str> {
        for _ in 0..8 {
            let Some(pf) = PageFault::parse(&m) else {
                return Ok(m);
            };
            let Some(frame) = self.backing(pf.addr) else {
                return Ok(m);
            };
            m = self.reply_recv(&map_reply(pf.addr, frame, Rights::RWX))?;
        }
        note(format_args!("still faulting at {:#x}", m.mr(1)));
        Err("the vCPU keeps faulting on pages that were mapped")
    }

    /// Starts the vCPU and runs it up to its first exit other than a served page fault.
    fn run(&self) -> Result<Msg, &'static str> {
        self.start()?;
        self.serve(self.recv()?)
    }

    /// Replies to the pending fault and runs up to the next unserved exit.
    fn resume(&self, reply: &Msg) -> Result<Msg, &'static str> {
        self.serve(self.reply_recv(reply)?)
    }

    fn state(&self) -> Result<VcpuState, &'static str> {
        get_state(self.id())
    }

    /// The vCPU's own trace counters.
    fn trace(&self) -> Result<[TraceCounter; NUM_TRACEPOINTS], &'static str> {
        read_trace(self.id())
    }
}

fn get_state(id: ThreadId) -> Result<VcpuState, &'static str> {
    sys::vcpu_control(id, vcpuctl::GET_STATE, 0, 0, 0)
        .map_err(|e| call_failed("VcpuControl(GET_STATE)", e))?;
    Ok(sys::utcb().vcpu)
}

fn set_state(id: ThreadId, s: &VcpuState) -> TestResult {
    sys::utcb().vcpu = *s;
    sys::vcpu_control(id, vcpuctl::SET_STATE, 0, 0, 0)
        .map_err(|e| call_failed("VcpuControl(SET_STATE)", e))
}

/// `VcpuControl(SET_TLB)`: guest TLB entry `index` from MR1..MR3, its TID in MR4.
fn set_tlb(id: ThreadId, index: u32, words: [u32; 3], tid: u32) -> Result<(), KError> {
    let u = sys::utcb();
    u.mr[1..4].copy_from_slice(&words);
    u.mr[4] = tid;
    sys::vcpu_control(id, vcpuctl::SET_TLB, 0, index, 0)
}

fn read_trace(who: ThreadId) -> Result<[TraceCounter; NUM_TRACEPOINTS], &'static str> {
    sys::trace_control(tracectl::READ, who).map_err(|e| call_failed("TraceControl(READ)", e))?;
    Ok(sys::utcb().trace)
}

fn count(t: &[TraceCounter; NUM_TRACEPOINTS], tp: TracePoint) -> u32 {
    t[tp as usize].count
}

/// Checks that `m` is a virtualization fault of `class` at guest pc `pc`.
fn expect_virt(m: &Msg, class: VirtFault, pc: u32) -> TestResult {
    let want = label::VIRT_FAULT | class as u16;
    if m.label() != want {
        if label::is_pagefault(m.label()) {
            note(format_args!(
                "page fault at {:#x} (pc {:#x}) instead of {class:?}",
                m.mr(1),
                m.mr(2)
            ));
        } else {
            note(format_args!(
                "label {:#06x}, MR1 {:#x}, MR2 {:#010x}; expected {want:#06x} ({class:?})",
                m.label(),
                m.mr(1),
                m.mr(2)
            ));
        }
        return Err("not the expected virtualization fault");
    }
    ensure!(
        m.mr(vfault::PC) == pc,
        "the virtualization fault reports the wrong pc",
        "{class:?} at pc {:#x} (insn {:#010x}), expected pc {pc:#x}",
        m.mr(vfault::PC),
        m.mr(vfault::INSN)
    );
    Ok(())
}

/// Guest register `r` as carried in a fault message (transfer mask with GPRS).
fn gpr(m: &Msg, r: usize) -> u32 {
    m.mr(vfault::GPR0 + r)
}

/// A reply to a virtualization fault: continue at `pc` with `flags` and no state.
fn reply_pc(pc: u32, flags: u32) -> Msg {
    Msg::with_words(0, &[pc, flags])
}

/// A reply that also installs all GPRs and cr/lr/ctr/xer (MR8..MR43).
fn reply_full(pc: u32, flags: u32, gprs: &[u32; 32], special: [u32; 4]) -> Msg {
    reply_full_set(pc, flags, [0, 0], gprs, special)
}

/// Like [`reply_full`], with MR3/MR4 (the `REPLY_SET_GPR` index and value).
fn reply_full_set(pc: u32, flags: u32, set: [u32; 2], gprs: &[u32; 32], special: [u32; 4]) -> Msg {
    let mut r = reply_pc(pc, flags);
    r.push(set[0]);
    r.push(set[1]);
    for _ in vfault::REPLY_GPR_VALUE + 1..vfault::GPR0 {
        r.push(0);
    }
    for &g in gprs {
        r.push(g);
    }
    for s in special {
        r.push(s);
    }
    r
}

/// The GPRs and cr/lr/ctr/xer of a fault message sent with the default mask.
fn regs_of(m: &Msg) -> ([u32; 32], [u32; 4]) {
    let mut g = [0; 32];
    for (r, v) in g.iter_mut().enumerate() {
        *v = gpr(m, r);
    }
    let s = [
        m.mr(vfault::CR),
        m.mr(vfault::CR + 1),
        m.mr(vfault::CR + 2),
        m.mr(vfault::CR + 3),
    ];
    (g, s)
}

/// Spins on the timebase for `us` microseconds (needs no kernel tick).
fn busy_wait_us(us: u64) -> TestResult {
    let hz = timebase_hz()?;
    let t0 = sys::timebase();
    while elapsed_us(t0, sys::timebase(), hz) < us {}
    Ok(())
}

/// Checks that the kernel tick runs, without relying on it: a thread at the root's
/// priority gets the processor within 50 ms of the root spinning only if timeslices
/// end, i.e. if decrementer interrupts arrive.
fn kernel_ticks() -> TestResult {
    SPINS.store(0, Relaxed);
    let spinner = Thread::local(spin_counter, 0, CHILD_PRIORITY)?;
    busy_wait_us(50_000)?;
    let spun = SPINS.load(Relaxed);
    drop(spinner);
    ensure!(
        spun > 0,
        "the kernel tick is not running (no timeslice ended in 50 ms), so no interrupt can reach a spinning guest",
        "a thread at the root's priority never ran while the root spun for 50 ms"
    );
    Ok(())
}

/// Exit accounting adds up (docs/adr/0023-exit-accounting.md): between two halts of a
/// guest, GUEST_RUN plus every exit's cost is the time that passed (the first halt's
/// exit, ended by the root's reply, included), within the difference of the two halts'
/// delivery to the root; and every kernel entry from the guest ends one GUEST_RUN and
/// is exactly one exit. The loop mixes assembly-tier exits (mfmsr, mtspr SPRG0, mfspr
/// PID), Rust-tier ones (mtspr PID) and whatever host ticks hit it.
pub fn exit_accounting() -> TestResult {
    const LOOPS: i16 = 3000;
    // bdnz back to the loop's first instruction, 5 words before it.
    let bdnz_back = kestrel_ppc440::encode::bc(0b10000, 0, -20, false);
    let segment = [
        ppc::li(5, LOOPS),
        ppc::mtctr(5),
        ppc::mfmsr(3),
        ppc::mtspr(ppc::SPRG0, 3),
        ppc::mfspr(4, ppc::PID),
        ppc::mtspr(ppc::PID, 4),
        addi_r6(),
        bdnz_back,
    ];
    let mut code = [0u32; 2 * 10];
    code[..8].copy_from_slice(&segment);
    code[8..10].copy_from_slice(&ppc::HALT);
    code[10..18].copy_from_slice(&segment);
    code[18..20].copy_from_slice(&ppc::HALT);
    let vm = Vm::new(&code)?;
    let m = vm.run()?;
    let t1 = sys::timebase();
    expect_virt(&m, VirtFault::Halt, at(9))?;
    let before = vm.trace()?;
    let (tag, regs) = FaultReply::resume(at(10)).encode(None, &mut sys::utcb().mr);
    let m = vm.resume(&Msg { tag, regs })?;
    let t2 = sys::timebase();
    expect_virt(&m, VirtFault::Halt, at(19))?;
    let after = vm.trace()?;
    let delta = |tp: TracePoint| {
        let (a, b) = (after[tp as usize], before[tp as usize]);
        (a.count.wrapping_sub(b.count), a.sum().wrapping_sub(b.sum()))
    };
    let (runs, guest) = delta(TracePoint::GuestRun);
    let (mut exits, mut exit_ticks) = (0u32, 0u64);
    for tp in TracePoint::ALL.into_iter().filter(|tp| tp.is_exit()) {
        let (c, t) = delta(tp);
        exits += c;
        exit_ticks += t;
    }
    let elapsed = t2 - t1;
    let accounted = guest + exit_ticks;
    let off = accounted.abs_diff(elapsed);
    note(format_args!(
        "elapsed {elapsed} ticks, GUEST_RUN {guest} ({runs} runs) + {exits} exits {exit_ticks} = {accounted}"
    ));
    ensure!(
        off <= elapsed / 50 + 2000,
        "GUEST_RUN + the exits' costs are not the elapsed time",
        "elapsed {elapsed}, accounted {accounted} (GUEST_RUN {guest}, exits {exit_ticks})"
    );
    ensure!(
        delta(TracePoint::EmulMfmsr).0 == LOOPS as u32
            && delta(TracePoint::EmulMtspr).0 == 2 * LOOPS as u32
            && delta(TracePoint::EmulMfspr).0 == LOOPS as u32,
        "the loop's exits are not counted once each",
        "mfmsr {}, mtspr {}, mfspr {}",
        delta(TracePoint::EmulMfmsr).0,
        delta(TracePoint::EmulMtspr).0,
        delta(TracePoint::EmulMfspr).0
    );
    ensure!(
        delta(TracePoint::SyscallIpc).0 == 1,
        "the first halt's fault IPC is not one SYSCALL_IPC exit once the guest resumed",
        "{}",
        delta(TracePoint::SyscallIpc).0
    );
    ensure!(
        runs == exits && guest > 0,
        "every kernel entry from the guest must end one GUEST_RUN and be one exit",
        "GUEST_RUN count {runs}, exits {exits}, GUEST_RUN ticks {guest}"
    );
    Ok(())
}

/// `addi r6, r6, 1`: guest work between exits.
const fn addi_r6() -> u32 {
    ppc::addi(6, 6, 1)
}

/// The guest-pc of word `i` of the code page.
const fn at(i: u32) -> u32 {
    CODE_GPA + 4 * i
}

// ---------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------

/// A new vCPU exists (inactive, root as pager and exception handler), starts with a
/// zeroed state, returns the state set with SET_STATE (reserved IVPR/IVOR bits and
/// non-Book-E MSR bits dropped), and is gone after deletion; a vCPU created in the
/// freed slot starts clean.
pub fn create_and_state() -> TestResult {
    let t = Thread::reserve()?;
    let id = t.id();
    sys::thread_control_flags(id, id, VCPU_PRIORITY, ThreadId::ROOT, 0, tcflags::VCPU)
        .map_err(|e| call_failed("ThreadControl (create vCPU)", e))?;
    let r = registers(id)?;
    ensure!(
        r.state & exreg::STATE_INACTIVE != 0,
        "a new vCPU is not inactive",
        "state {:#x}",
        r.state
    );
    ensure!(
        r.pager == ThreadId::ROOT && r.exc_handler == ThreadId::ROOT,
        "the vCPU's pager and exception handler are not the pager argument",
        "pager {:?}, exception handler {:?}",
        r.pager,
        r.exc_handler
    );
    let fresh = get_state(id)?;
    ensure!(
        fresh == VcpuState::default(),
        "a new vCPU's state is not all zero",
        "{fresh:?}"
    );

    let mut want = VcpuState {
        cr: 0x2400_0048,
        lr: 0x0000_4444,
        ctr: 0x0000_0ccc,
        xer: 0x2000_0000,
        pc: 0x0001_2340,
        msr: ppc::MSR_ME | ppc::MSR_CE,
        srr0: 0x0000_5550,
        srr1: ppc::MSR_ME,
        csrr0: 0x0000_6660,
        esr: ppc::ESR_PIL,
        dear: 0xdead_bee0,
        ivpr: 0x0003_0000,
        pid: 5,
        usprg0: 0x1234_5678,
        ..VcpuState::default()
    };
    for (i, g) in want.gpr.iter_mut().enumerate() {
        *g = 0x0101_0101 * i as u32 + 7;
    }
    for (i, s) in want.sprg.iter_mut().enumerate() {
        *s = 0xa000_0000 | i as u32;
    }
    for (i, v) in want.ivor.iter_mut().enumerate() {
        *v = 0x100 * i as u32 + 0x20;
    }
    set_state(id, &want)?;
    let got = get_state(id)?;
    if got != want {
        note(format_args!("set {want:?}"));
        note(format_args!("got {got:?}"));
        return Err("GET_STATE does not return what SET_STATE installed");
    }
    let r = registers(id)?;
    ensure!(
        r.ip == want.pc,
        "SET_STATE's pc is not the thread's ip",
        "ip {:#x}",
        r.ip
    );

    // Reserved bits: IVPR[16:31], IVOR[0:15] and [28:31], MSR bits Book E does not define.
    let mut junk = VcpuState {
        ivpr: want.ivpr | 0x1234,
        msr: want.msr | 0x8000_0001,
        ..want
    };
    junk.ivor[6] |= 0xffff_000f;
    set_state(id, &junk)?;
    let got = get_state(id)?;
    ensure!(
        got.ivpr == want.ivpr,
        "IVPR keeps its reserved low bits",
        "{:#x}",
        got.ivpr
    );
    ensure!(
        got.ivor[6] == want.ivor[6],
        "IVOR6 keeps reserved bits",
        "{:#x}",
        got.ivor[6]
    );
    ensure!(
        got.msr == want.msr,
        "the guest MSR keeps bits Book E does not define",
        "{:#x}",
        got.msr
    );

    drop(t);
    let r = sys::vcpu_control(id, vcpuctl::GET_STATE, 0, 0, 0);
    expect_kerror("VcpuControl on a deleted vCPU", r, &[KError::InvalidThread])?;
    let r = sys::exchange_registers(id, 0, 0, 0, ThreadId::NIL, ThreadId::NIL);
    expect_kerror(
        "ExchangeRegisters on a deleted vCPU",
        r,
        &[KError::InvalidThread],
    )?;

    // The next vCPU (most likely in the slot just freed) sees nothing of the old one.
    let vm = Vm::new(&[])?;
    let s = vm.state()?;
    let clean = VcpuState {
        pc: CODE_GPA,
        ..VcpuState::default()
    };
    ensure!(
        s == clean,
        "a new vCPU inherits state from a deleted one",
        "{s:?}"
    );
    let tr = vm.trace()?;
    ensure!(
        tr.iter().all(|c| c.count == 0),
        "a new vCPU inherits trace counters"
    );
    Ok(())
}

/// The kernel emulates li/mtspr SPRG0/mfspr SPRG0/mfmsr without exits; `mfdcr` reaches
/// the VMM as an instruction fault with the registers; the reply's registers are
/// installed; the reset request arrives as a Halt fault.
pub fn runs_guest_code() -> TestResult {
    let mfdcr = ppc::mfdcr(6, ppc::UIC_DCR);
    let vm = Vm::new(&[
        ppc::li(3, 42),
        ppc::mtspr(ppc::SPRG0, 3),
        ppc::mfspr(4, ppc::SPRG0),
        ppc::mfmsr(5),
        mfdcr,
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Instruction, at(4))?;
    ensure!(
        m.mr(vfault::INSN) == mfdcr,
        "MR2 is not the mfdcr word",
        "{:#010x}",
        m.mr(vfault::INSN)
    );
    ensure!(
        m.mr(vfault::GPA) == 0,
        "MR3 is not 0 for an instruction fault",
        "{:#x}",
        m.mr(vfault::GPA)
    );
    ensure!(
        m.mr(vfault::MSR) == 0,
        "MR4 (guest MSR) is not 0",
        "{:#x}",
        m.mr(vfault::MSR)
    );
    ensure!(
        m.mr(vfault::MASK) == xfer::DEFAULT,
        "MR5 is not the default mask",
        "{:#x}",
        m.mr(vfault::MASK)
    );
    ensure!(
        m.tag.untyped() == vfault::WORDS as usize,
        "the fault message does not carry the GPRs and cr/lr/ctr/xer",
        "{} words",
        m.tag.untyped()
    );
    ensure!(
        (gpr(&m, 3), gpr(&m, 4), gpr(&m, 5)) == (42, 42, 0),
        "r3/r4/r5 do not show li, mtspr/mfspr SPRG0 and mfmsr",
        "r3 {:#x}, r4 {:#x}, r5 {:#x}",
        gpr(&m, 3),
        gpr(&m, 4),
        gpr(&m, 5)
    );

    let (mut g, mut special) = regs_of(&m);
    g[6] = 0x1234;
    special[1] = 0x4242; // lr
    let m = vm.resume(&reply_full(at(5), 0, &g, special))?;
    expect_virt(&m, VirtFault::Halt, at(6))?;
    ensure!(
        m.mr(vfault::INSN) == ppc::HALT[1],
        "MR2 is not the mtspr DBCR0 word",
        "{:#010x}",
        m.mr(vfault::INSN)
    );
    ensure!(
        gpr(&m, 31) == ppc::DBCR0_RST,
        "r31 is not the reset value",
        "{:#x}",
        gpr(&m, 31)
    );

    let s = vm.state()?;
    ensure!(
        s.gpr[6] == 0x1234,
        "the reply's r6 was not installed",
        "r6 {:#x}",
        s.gpr[6]
    );
    ensure!(
        s.lr == 0x4242,
        "the reply's lr was not installed",
        "lr {:#x}",
        s.lr
    );
    ensure!(
        s.sprg[0] == 42,
        "the guest's SPRG0 is not 42",
        "{:#x}",
        s.sprg[0]
    );
    ensure!(
        s.pc == at(6),
        "GET_STATE's pc is not the halting instruction",
        "{:#x}",
        s.pc
    );
    ensure!(
        s.dbcr0 & ppc::DBCR0_RST == 0,
        "the reset request stuck in DBCR0",
        "{:#x}",
        s.dbcr0
    );
    let t = vm.trace()?;
    ensure!(
        count(&t, TracePoint::EmulMtspr) >= 1
            && count(&t, TracePoint::EmulMfspr) >= 1
            && count(&t, TracePoint::EmulMfmsr) == 1,
        "the emulated instructions are not in the trace points",
        "mtspr {}, mfspr {}, mfmsr {}",
        count(&t, TracePoint::EmulMtspr),
        count(&t, TracePoint::EmulMfspr),
        count(&t, TracePoint::EmulMfmsr)
    );
    Ok(())
}

/// Guest-physical memory is the VMM's: the first fetch faults to the pager with the
/// code page's guest-physical address; a data load to an unmapped page faults with
/// its exact address; after mapping, loads and stores reach the VMM's frame.
pub fn page_fault_second_stage() -> TestResult {
    const DATA: u32 = 0x6000;
    let mut vm = Vm::new(&[
        ppc::li(3, (DATA + 0x10) as i16),
        ppc::lwz(4, 0, 3),
        ppc::stw(4, 4, 3),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    vm.start()?;
    let m = vm.recv()?;
    ensure!(
        m.label() == label::PAGEFAULT | Rights::X.0 as u16,
        "the first fetch is not an execute page fault",
        "label {:#06x}, MR1 {:#x}",
        m.label(),
        m.mr(1)
    );
    ensure!(
        m.mr(1) == CODE_GPA && m.mr(2) == CODE_GPA,
        "the fetch fault has the wrong address or ip",
        "MR1 {:#x}, MR2 {:#x}",
        m.mr(1),
        m.mr(2)
    );
    let m = vm.reply_recv(&map_reply(CODE_GPA, vm.code.va(), Rights::RWX))?;
    ensure!(
        m.label() == label::PAGEFAULT | Rights::R.0 as u16,
        "the load is not a read page fault",
        "label {:#06x}, MR1 {:#x}",
        m.label(),
        m.mr(1)
    );
    ensure!(
        m.mr(1) == DATA + 0x10 && m.mr(2) == at(1),
        "the load fault has the wrong address or ip",
        "MR1 {:#x}, MR2 {:#x}",
        m.mr(1),
        m.mr(2)
    );
    let data = vm.back(DATA)?;
    data.write(0x10, 0xcafe_f00d);
    let frame = data.va();
    let m = vm.reply_recv(&map_reply(DATA + 0x10, frame, Rights::RWX))?;
    let m = vm.serve(m)?;
    expect_virt(&m, VirtFault::Halt, at(4))?;
    ensure!(
        gpr(&m, 4) == 0xcafe_f00d,
        "the guest did not read the VMM's frame",
        "r4 {:#x}",
        gpr(&m, 4)
    );
    let stored = vm.data.as_ref().map(|(_, f)| f.read(0x14)).unwrap_or(0);
    ensure!(
        stored == 0xcafe_f00d,
        "the guest's store did not reach the VMM's frame",
        "{stored:#x}"
    );
    let t = vm.trace()?;
    ensure!(
        count(&t, TracePoint::PageFaultIpc) == 2,
        "PAGEFAULT_IPC does not count the two faults",
        "{}",
        count(&t, TracePoint::PageFaultIpc)
    );
    Ok(())
}

/// The trace points count the exits of one vCPU, sum over all VMs (also over deleted
/// vCPUs), and reset to zero.
pub fn trace_points() -> TestResult {
    const N: usize = 16;
    let mut code = [ppc::mfmsr(3); N + 2];
    code[N..].copy_from_slice(&ppc::HALT);
    let vm = Vm::new(&code)?;
    sys::trace_control(tracectl::RESET, vm.id())
        .map_err(|e| call_failed("TraceControl(RESET)", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, at(N as u32 + 1))?;
    let mine = vm.trace()?;
    let c = mine[TracePoint::EmulMfmsr as usize];
    ensure!(
        c.count == N as u32,
        "EMUL_MFMSR does not count the guest's mfmsr",
        "count {}, expected {N}",
        c.count
    );
    for tp in TracePoint::ALL {
        let c = mine[tp as usize];
        ensure!(
            c.count != 0 || c.sum() == 0,
            "an unused trace counter is not zero",
            "{}",
            tp.name()
        );
    }
    ensure!(
        mine[TracePoint::GuestRun as usize].sum() > 0,
        "GUEST_RUN counts no guest time"
    );
    ensure!(
        count(&mine, TracePoint::PageFaultIpc) == 1,
        "PAGEFAULT_IPC is not 1",
        "{}",
        count(&mine, TracePoint::PageFaultIpc)
    );
    // The Halt fault IPC is still in progress (an exit is recorded when the guest
    // resumes): `exit_accounting` checks that it is counted then.
    ensure!(
        count(&mine, TracePoint::SyscallIpc) == 0,
        "the Halt fault IPC in progress is already counted"
    );
    let all = read_trace(ThreadId::NIL)?;
    for tp in TracePoint::ALL {
        ensure!(
            count(&all, tp) >= count(&mine, tp),
            "the all-VMs view counts less than one vCPU",
            "{}: all {}, vCPU {}",
            tp.name(),
            count(&all, tp),
            count(&mine, tp)
        );
    }
    sys::trace_control(tracectl::RESET, vm.id())
        .map_err(|e| call_failed("TraceControl(RESET)", e))?;
    let after = vm.trace()?;
    ensure!(
        after == [TraceCounter::default(); NUM_TRACEPOINTS],
        "RESET does not zero the vCPU's counters"
    );

    // A deleted vCPU's exits stay in the all-VMs view.
    let vm2 = Vm::new(&code)?;
    vm2.run()?;
    let before = count(&read_trace(ThreadId::NIL)?, TracePoint::EmulMfmsr);
    drop(vm2);
    let after = count(&read_trace(ThreadId::NIL)?, TracePoint::EmulMfmsr);
    ensure!(
        after >= before && before >= N as u32,
        "deleting a vCPU drops its exits from the all-VMs view",
        "EMUL_MFMSR before {before}, after {after}"
    );
    sys::trace_control(tracectl::RESET, ThreadId::NIL)
        .map_err(|e| call_failed("TraceControl(RESET, nil)", e))?;
    let all = read_trace(ThreadId::NIL)?;
    ensure!(
        all.iter().all(|c| c.count == 0),
        "RESET of all VMs leaves counts"
    );
    Ok(())
}

/// A transfer mask of 0 shrinks the fault message to the header (with the RS/RT value
/// in MR6), the reply's registers are then ignored but `REPLY_SET_GPR` still sets one;
/// `xfer::TLB` adds the guest TLB context; bad classes and bits are refused.
pub fn transfer_mask() -> TestResult {
    let mfdcr = ppc::mfdcr(3, ppc::UIC_DCR);
    let vm = Vm::new(&[
        ppc::li(6, 7),
        ppc::li(3, 0x77),
        mfdcr,
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let set = |class: u32, mask: u32| {
        sys::vcpu_control(vm.id(), vcpuctl::SET_TRANSFER_MASK, class, mask, 0)
    };
    expect_kerror(
        "SET_TRANSFER_MASK class 7",
        set(7, xfer::DEFAULT),
        &[KError::InvalidParam],
    )?;
    expect_kerror(
        "SET_TRANSFER_MASK class 4",
        set(4, xfer::DEFAULT),
        &[KError::InvalidParam],
    )?;
    expect_kerror(
        "SET_TRANSFER_MASK bit 4",
        set(VirtFault::Instruction as u32, 1 << 4),
        &[KError::InvalidParam],
    )?;
    expect_kerror(
        "SET_TRANSFER_MASK bit 31",
        set(VirtFault::Instruction as u32, 1 << 31),
        &[KError::InvalidParam],
    )?;
    set(VirtFault::Mmio as u32, xfer::TLB).map_err(|e| call_failed("SET_TRANSFER_MASK TLB", e))?;
    set(VirtFault::Instruction as u32, 0).map_err(|e| call_failed("SET_TRANSFER_MASK 0", e))?;
    set(VirtFault::Halt as u32, xfer::DEFAULT | xfer::TLB)
        .map_err(|e| call_failed("SET_TRANSFER_MASK all", e))?;

    let m = vm.run()?;
    expect_virt(&m, VirtFault::Instruction, at(2))?;
    ensure!(
        m.tag.untyped() < vfault::GPR0,
        "a mask-0 fault message carries registers",
        "{} words",
        m.tag.untyped()
    );
    ensure!(
        m.tag.untyped() == vfault::SHORT_WORDS as usize,
        "a mask-0 fault message is not SHORT_WORDS long",
        "{} words, SHORT_WORDS = {}",
        m.tag.untyped(),
        vfault::SHORT_WORDS
    );
    ensure!(
        m.mr(vfault::MASK) == 0,
        "MR5 does not show mask 0",
        "{:#x}",
        m.mr(vfault::MASK)
    );
    ensure!(
        m.mr(vfault::INSN) == mfdcr,
        "MR2 is not the mfdcr word",
        "{:#010x}",
        m.mr(vfault::INSN)
    );
    ensure!(
        m.mr(vfault::RS_VALUE) == 0x77,
        "MR6 is not the value of the instruction's RT register",
        "{:#x}",
        m.mr(vfault::RS_VALUE)
    );
    // Registers in the reply to a mask-0 fault must not be installed; SET_GPR is.
    let g = [0x5555_5555; 32];
    let reply = reply_full_set(at(3), vfault::REPLY_SET_GPR, [3, 0xabc], &g, [0; 4]);
    let m = vm.resume(&reply)?;
    expect_virt(&m, VirtFault::Halt, at(4))?;
    ensure!(
        m.tag.untyped() == vfault::WORDS_TLB as usize,
        "the Halt message with xfer::TLB is not WORDS_TLB long",
        "{} words",
        m.tag.untyped()
    );
    ensure!(
        gpr(&m, 6) == 7,
        "registers of a reply to a mask-0 fault were installed",
        "r6 {:#x}",
        gpr(&m, 6)
    );
    ensure!(
        gpr(&m, 3) == 0xabc,
        "REPLY_SET_GPR did not set r3",
        "r3 {:#x}",
        gpr(&m, 3)
    );
    let tlb = (
        m.mr(vfault::PID),
        m.mr(vfault::MMUCR),
        m.mr(vfault::TLB_INDEX),
    );
    ensure!(
        tlb == (0, 0, 0),
        "the TLB context is not PID 0, MMUCR 0, entry 0",
        "PID {:#x}, MMUCR {:#x}, index {:#x}",
        tlb.0,
        tlb.1,
        tlb.2
    );
    Ok(())
}

/// A child in another space reports the outcome of vCPU calls on `vcpu`, waits for
/// the root's GO, and reports again.
extern "C" fn vcpu_prober(vcpu: u32) {
    set_name("vcpu-prober");
    let v = ThreadId(vcpu);
    for _ in 0..2 {
        report(&[
            kerr_code(&sys::vcpu_control(v, vcpuctl::GET_STATE, 0, 0, 0)),
            kerr_code(&sys::vcpu_control(v, vcpuctl::SET_IRQ, 0, 0, 0)),
            kerr_code(&sys::vcpu_control(
                v,
                vcpuctl::SET_TRANSFER_MASK,
                0,
                xfer::DEFAULT,
                0,
            )),
        ]);
        if ipc::receive(ThreadId::ROOT, WAIT).is_err() {
            return;
        }
    }
}

/// Error paths of ThreadControl(VCPU), VcpuControl and TraceControl, and the rule that
/// only the root and the VMM's space may control a vCPU.
pub fn control_errors() -> TestResult {
    let vm = Vm::new(&[])?;
    let nobody = Thread::reserve()?;
    let ctl = |id: ThreadId, op: u32| sys::vcpu_control(id, op, 0, 0, 0);
    expect_kerror(
        "VcpuControl on a native thread",
        ctl(ThreadId::ROOT, vcpuctl::GET_STATE),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "VcpuControl on a nonexistent id",
        ctl(nobody.id(), vcpuctl::GET_STATE),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "VcpuControl on nil",
        ctl(ThreadId::NIL, vcpuctl::GET_STATE),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "VcpuControl unknown op",
        ctl(vm.id(), vcpuctl::SET_PV + 1),
        &[KError::InvalidParam],
    )?;
    expect_kerror(
        "VcpuControl op 0xffffffff",
        ctl(vm.id(), u32::MAX),
        &[KError::InvalidParam],
    )?;
    expect_kerror(
        "TraceControl on a native thread",
        sys::trace_control(tracectl::READ, ThreadId::ROOT),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "TraceControl on a nonexistent id",
        sys::trace_control(tracectl::READ, nobody.id()),
        &[KError::InvalidThread],
    )?;
    expect_kerror(
        "TraceControl unknown op",
        sys::trace_control(2, vm.id()),
        &[KError::InvalidParam],
    )?;

    // ThreadControl: a vCPU needs its own new space; unknown flags are refused. On a
    // wrong success the guard deletes whatever was created.
    let t = Thread::reserve()?;
    let r = sys::thread_control_flags(
        t.id(),
        ThreadId::ROOT,
        VCPU_PRIORITY,
        ThreadId::ROOT,
        0,
        tcflags::VCPU,
    );
    expect_kerror(
        "ThreadControl(VCPU) in the root space",
        r,
        &[KError::InvalidSpace],
    )?;
    let r = sys::thread_control_flags(
        t.id(),
        vm.id(),
        VCPU_PRIORITY,
        ThreadId::ROOT,
        0,
        tcflags::VCPU,
    );
    expect_kerror(
        "ThreadControl(VCPU) in a VM space",
        r,
        &[KError::InvalidSpace],
    )?;
    let r = sys::thread_control_flags(t.id(), t.id(), VCPU_PRIORITY, ThreadId::ROOT, 0, 1 << 2);
    expect_kerror(
        "ThreadControl with unknown flag bit 2",
        r,
        &[KError::InvalidParam],
    )?;
    let r = sys::thread_control_flags(
        t.id(),
        t.id(),
        VCPU_PRIORITY,
        ThreadId::ROOT,
        0,
        tcflags::VCPU | 1 << 31,
    );
    expect_kerror(
        "ThreadControl with VCPU and unknown flag bit 31",
        r,
        &[KError::InvalidParam],
    )?;
    let r = sys::exchange_registers(t.id(), 0, 0, 0, ThreadId::NIL, ThreadId::NIL);
    expect_kerror(
        "a refused ThreadControl left a thread",
        r,
        &[KError::InvalidThread],
    )?;

    // A child space that is not the VMM's may not touch the vCPU; once its thread is
    // the vCPU's exception handler (its VMM), it may.
    let child = Thread::space(entry(vcpu_prober), vm.id().0)?;
    let m = report_from(child.id())?;
    let no = KError::NoPrivilege as u32;
    ensure!(
        (m.mr(1), m.mr(2), m.mr(3)) == (no, no, no),
        "a thread outside the VMM's space controls a vCPU",
        "GET_STATE {}, SET_IRQ {}, SET_TRANSFER_MASK {} (NoPrivilege = {no})",
        m.mr(1),
        m.mr(2),
        m.mr(3)
    );
    sys::exchange_registers(
        vm.id(),
        exreg::SET_EXC_HANDLER,
        0,
        0,
        ThreadId::NIL,
        child.id(),
    )
    .map_err(|e| call_failed("ExchangeRegisters (vCPU exception handler)", e))?;
    ipc::send(child.id(), &Msg::new(lbl::GO), WAIT)
        .map_err(|e| ipc_failed("GO to the prober", e))?;
    let m = report_from(child.id())?;
    ensure!(
        (m.mr(1), m.mr(2), m.mr(3)) == (0, 0, 0),
        "the VMM's space cannot control its vCPU",
        "GET_STATE {}, SET_IRQ {}, SET_TRANSFER_MASK {}",
        m.mr(1),
        m.mr(2),
        m.mr(3)
    );
    Ok(())
}

/// Guest faults stay inside the guest or its VM: an illegal instruction is a program
/// exception delivered to the guest's own handler; `REPLY_STOP` and a KILL reply to a
/// page fault stop only that vCPU, and the rest of the system carries on.
pub fn guest_kill_isolated() -> TestResult {
    // An illegal instruction at word 2 lands at IVPR | IVOR6 (IVPR is 0).
    let vm = Vm::new(&[
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR6, 3),
        ppc::ILLEGAL,
        ppc::B_SELF,
    ])?;
    vm.load(
        HANDLER,
        &[
            ppc::mfspr(3, ppc::SRR0),
            ppc::mfspr(4, ppc::ESR),
            ppc::mfspr(5, ppc::SRR1),
            ppc::HALT[0],
            ppc::HALT[1],
        ],
    );
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 16)?;
    ensure!(
        gpr(&m, 3) == at(2),
        "SRR0 is not the illegal instruction",
        "srr0 {:#x}",
        gpr(&m, 3)
    );
    ensure!(
        gpr(&m, 4) & ppc::ESR_PIL != 0,
        "ESR[PIL] is not set",
        "esr {:#x}",
        gpr(&m, 4)
    );
    ensure!(
        gpr(&m, 5) == 0,
        "SRR1 is not the guest's MSR before the exception (0)",
        "srr1 {:#x}",
        gpr(&m, 5)
    );
    let s = vm.trace()?;
    ensure!(
        count(&s, TracePoint::ExceptReflect) >= 1,
        "EXCEPT_REFLECT does not count the program exception"
    );
    // REPLY_STOP stops the vCPU.
    ipc::send(
        vm.id(),
        &reply_pc(m.mr(vfault::PC), vfault::REPLY_STOP),
        WAIT,
    )
    .map_err(|e| ipc_failed("REPLY_STOP reply", e))?;
    let st = registers(vm.id())?.state;
    ensure!(
        st & exreg::STATE_DEAD != 0,
        "REPLY_STOP did not stop the vCPU",
        "state {st:#x}"
    );
    drop(vm);

    // A load from guest-physical 16 MiB, which the VMM refuses with KILL.
    const UNBACKED: u32 = 0x0100_0000;
    let vm = Vm::new(&[
        ppc::lis(3, (UNBACKED >> 16) as u16),
        ppc::lwz(4, 0, 3),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let m = vm.run()?;
    let pf = PageFault::parse(&m).ok_or("the unbacked load is not a page fault")?;
    ensure!(
        pf.addr == UNBACKED && pf.ip == at(1),
        "the page fault names the wrong address or ip",
        "addr {:#x}, ip {:#x}",
        pf.addr,
        pf.ip
    );
    ipc::send(vm.id(), &Msg::new(label::KILL), WAIT).map_err(|e| ipc_failed("KILL reply", e))?;
    let st = registers(vm.id())?.state;
    ensure!(
        st & exreg::STATE_DEAD != 0,
        "the KILL reply did not stop the vCPU",
        "state {st:#x}"
    );
    ensure!(
        st & (exreg::STATE_SENDING | exreg::STATE_RECEIVING) == 0,
        "the killed vCPU is still in an IPC",
        "state {st:#x}"
    );
    let r = ipc::send(vm.id(), &Msg::new(0), WAIT);
    expect_ipc_error(
        "send to the killed vCPU",
        r,
        IpcError::NoPartner,
        IpcPhase::Send,
    )?;
    // Its VMM and other threads carry on.
    let echo = Thread::local(echo_once, 0, CHILD_PRIORITY)?;
    ipc::send(echo.id(), &Msg::with_words(lbl::GO, &[41]), WAIT)
        .map_err(|e| ipc_failed("send to the echo", e))?;
    let m = report_from(echo.id())?;
    ensure!(
        m.mr(1) == 42,
        "the IPC round trip after the kill gave the wrong answer",
        "{:#x}",
        m.mr(1)
    );
    Ok(())
}

/// Iterations of the guests' bounded spin loop: far longer than the root's [`QUIET`]
/// wait, so a guest still spins when the root comes back, yet finite, so a lost
/// interrupt (or a lost kernel tick) ends in a Halt at a known pc instead of a hang.
const SPIN: u16 = 0x2000; // << 16 iterations (about half a second under QEMU)

/// The virtual external interrupt line: a guest spinning with MSR[EE] takes the
/// interrupt at IVPR | IVOR4 by the next kernel entry after SET_IRQ(1); a line raised
/// before the guest enables EE is delivered right after `wrteei 1`; a pulse the guest
/// never saw is not delivered.
pub fn irq_injection() -> TestResult {
    let code = [
        ppc::li(3, 0),
        ppc::mtspr(ppc::IVPR, 3),
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR4, 3),
        ppc::lis(7, SPIN),
        ppc::mtctr(7),
        ppc::wrteei(true),
        ppc::BDNZ_SELF,
        ppc::HALT[0],
        ppc::HALT[1],
    ];
    let spin_pc = at(7);
    let no_irq_pc = at(9);
    let handler = [
        ppc::mfspr(3, ppc::SRR0),
        ppc::mfmsr(4),
        ppc::mfspr(5, ppc::SRR1),
        ppc::HALT[0],
        ppc::HALT[1],
    ];
    let halt_pc = HANDLER + 16;
    let took_irq = |m: &Msg| -> TestResult {
        if m.label() == label::VIRT_FAULT | VirtFault::Halt as u16 && m.mr(vfault::PC) == no_irq_pc
        {
            note(format_args!(
                "the guest spun {} iterations with MSR[EE] and the line raised",
                (SPIN as u32) << 16
            ));
            return Err("the raised interrupt line was never delivered");
        }
        expect_virt(m, VirtFault::Halt, halt_pc)?;
        ensure!(
            gpr(m, 3) == spin_pc,
            "SRR0 is not the spinning instruction",
            "srr0 {:#x}",
            gpr(m, 3)
        );
        ensure!(
            gpr(m, 4) & ppc::MSR_EE == 0,
            "MSR[EE] is still set in the handler",
            "msr {:#x}",
            gpr(m, 4)
        );
        ensure!(
            gpr(m, 5) & ppc::MSR_EE != 0,
            "SRR1 does not hold the interrupted MSR[EE]",
            "srr1 {:#x}",
            gpr(m, 5)
        );
        Ok(())
    };

    // 1. Raised while the guest spins with EE set: it needs a kernel entry, the tick.
    kernel_ticks()?;
    let vm = Vm::new(&code)?;
    vm.load(HANDLER, &handler);
    let quiet = |vm: &Vm, why: &'static str| -> TestResult {
        match ipc::receive(vm.id(), QUIET) {
            Err(e) if e.error == IpcError::Timeout => Ok(()),
            Err(e) => Err(ipc_failed(why, e)),
            Ok((_, m)) => {
                if m.label() == label::VIRT_FAULT | VirtFault::Halt as u16
                    && m.mr(vfault::PC) == no_irq_pc
                {
                    note(format_args!(
                        "the guest finished {} iterations before the root's {} us timeout",
                        (SPIN as u32) << 16,
                        QUIET.as_us()
                    ));
                    return Err("the root's receive timeout did not expire while a vCPU spun (no kernel tick?)");
                }
                note(format_args!("label {:#06x}, MR1 {:#x}", m.label(), m.mr(1)));
                Err(why)
            }
        }
    };
    vm.start()?;
    let first = vm.recv()?;
    // The code page fault; after the reply the guest spins.
    PageFault::parse(&first).ok_or("the first exit is not the code page fault")?;
    ipc::send(
        vm.id(),
        &map_reply(CODE_GPA, vm.code.va(), Rights::RWX),
        WAIT,
    )
    .map_err(|e| ipc_failed("map reply", e))?;
    quiet(&vm, "the spinning guest exited before any interrupt")?;
    // A pulse while the guest cannot enter the kernel is never seen.
    let irq = |v: u32| sys::vcpu_control(vm.id(), vcpuctl::SET_IRQ, v, 0, 0);
    irq(1)
        .and_then(|()| irq(0))
        .map_err(|e| call_failed("VcpuControl(SET_IRQ) pulse", e))?;
    quiet(&vm, "a lowered interrupt line was delivered")?;
    irq(1).map_err(|e| call_failed("VcpuControl(SET_IRQ, 1)", e))?;
    took_irq(&vm.recv()?)?;
    ensure!(
        count(&vm.trace()?, TracePoint::ExceptExternal) == 1,
        "EXCEPT_EXTERNAL is not 1"
    );
    irq(0).map_err(|e| call_failed("VcpuControl(SET_IRQ, 0)", e))?;
    ensure!(
        vm.state()?.irq_line == 0,
        "SET_IRQ(0) did not lower the line"
    );
    drop(vm);

    // 2. Raised before the guest enables EE: delivered right after `wrteei 1`.
    let vm = Vm::new(&code)?;
    vm.load(HANDLER, &handler);
    sys::vcpu_control(vm.id(), vcpuctl::SET_IRQ, 1, 0, 0)
        .map_err(|e| call_failed("VcpuControl(SET_IRQ, 1)", e))?;
    let m = vm.run()?;
    took_irq(&m)?;
    ensure!(
        gpr(&m, 3) == spin_pc,
        "the pending interrupt was not taken right after wrteei 1",
        "srr0 {:#x}",
        gpr(&m, 3)
    );
    ensure!(
        vm.state()?.irq_line == 1,
        "delivery lowered the (level) line"
    );
    Ok(())
}

/// The VMM's reply can inject exceptions: `REPLY_PROGRAM` is an illegal-instruction
/// program exception at the reply's pc; `REPLY_DSI` a data storage exception with
/// DEAR = the fault's MR3 and, as for any DSI (Book E §7.6.3), ESR describing this
/// access (ESR[ST] for a store) rather than whatever an earlier exception left there.
pub fn reply_injects_exceptions() -> TestResult {
    let mfdcr = ppc::mfdcr(5, ppc::UIC_DCR);
    let vm = Vm::new(&[
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR6, 3),
        mfdcr,
        ppc::B_SELF,
    ])?;
    vm.load(
        HANDLER,
        &[
            ppc::mfspr(3, ppc::SRR0),
            ppc::mfspr(4, ppc::ESR),
            ppc::HALT[0],
            ppc::HALT[1],
        ],
    );
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Instruction, at(2))?;
    let m = vm.resume(&reply_pc(at(2), vfault::REPLY_PROGRAM))?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 12)?;
    ensure!(
        gpr(&m, 3) == at(2),
        "SRR0 of the injected program exception is not the reply's pc",
        "{:#x}",
        gpr(&m, 3)
    );
    ensure!(
        gpr(&m, 4) == ppc::ESR_PIL,
        "ESR of the injected program exception is not PIL",
        "{:#x}",
        gpr(&m, 4)
    );
    drop(vm);

    const DEV: u32 = 0x0100_0000;
    let store = ppc::stw(4, 4, 3);
    let vm = Vm::new(&[
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR2, 3),
        ppc::lis(3, (DEV >> 16) as u16),
        ppc::li(4, 0x55),
        store,
        ppc::B_SELF,
    ])?;
    vm.load(
        HANDLER,
        &[
            ppc::mfspr(3, ppc::SRR0),
            ppc::mfspr(4, ppc::ESR),
            ppc::mfspr(5, ppc::DEAR),
            ppc::HALT[0],
            ppc::HALT[1],
        ],
    );
    // An earlier, unrelated exception left ESR[PIL] set.
    set_state(
        vm.id(),
        &VcpuState {
            pc: CODE_GPA,
            esr: ppc::ESR_PIL,
            ..VcpuState::default()
        },
    )?;
    sys::vcpu_control(vm.id(), vcpuctl::DECLARE_MMIO, 1, DEV, PAGE_SIZE)
        .map_err(|e| call_failed("VcpuControl(DECLARE_MMIO)", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Mmio, at(4))?;
    ensure!(
        m.mr(vfault::RS_VALUE) == 0x55,
        "MR6 is not the stored register's value",
        "{:#x}",
        m.mr(vfault::RS_VALUE)
    );
    let m = vm.resume(&reply_pc(at(4), vfault::REPLY_DSI))?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 16)?;
    ensure!(
        gpr(&m, 3) == at(4),
        "SRR0 of the injected DSI is not the store",
        "{:#x}",
        gpr(&m, 3)
    );
    ensure!(
        gpr(&m, 5) == DEV + 4,
        "DEAR of the injected DSI is not MR3 of the fault",
        "{:#x}",
        gpr(&m, 5)
    );
    ensure!(
        gpr(&m, 4) == ppc::ESR_ST,
        "an injected DSI leaves the guest's ESR as an earlier exception set it",
        "ESR {:#010x} in the DSI handler after a store; expected ST ({:#010x}) only",
        gpr(&m, 4),
        ppc::ESR_ST
    );
    Ok(())
}

/// Guest `sc` is the guest kernel's business: the kernel reflects it to IVPR | IVOR8
/// with SRR0 after the `sc` (Book E §7.6.10).
pub fn syscall_reflected() -> TestResult {
    let vm = Vm::new(&[
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR8, 3),
        ppc::li(3, 5),
        ppc::SC,
        ppc::B_SELF,
    ])?;
    vm.load(
        HANDLER,
        &[ppc::mfspr(4, ppc::SRR0), ppc::HALT[0], ppc::HALT[1]],
    );
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 8)?;
    ensure!(
        gpr(&m, 4) == at(4),
        "SRR0 is not the instruction after sc",
        "srr0 {:#x}",
        gpr(&m, 4)
    );
    ensure!(
        gpr(&m, 3) == 5,
        "the guest's r3 changed across sc",
        "r3 {:#x}",
        gpr(&m, 3)
    );
    ensure!(
        count(&vm.trace()?, TracePoint::ExceptSyscall) == 1,
        "EXCEPT_SYSCALL is not 1"
    );
    Ok(())
}

/// `mtmsr` with MSR[WE] and nothing pending is an Idle fault; the VMM resumes the
/// guest at the reported pc, which is the instruction after the `mtmsr`.
pub fn idle_fault() -> TestResult {
    let vm = Vm::new(&[
        ppc::lis(3, (ppc::MSR_WE >> 16) as u16),
        ppc::mtmsr(3),
        ppc::mfmsr(5),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Idle, at(2))?;
    ensure!(
        m.mr(vfault::INSN) == ppc::mtmsr(3),
        "MR2 is not the mtmsr word",
        "{:#010x}",
        m.mr(vfault::INSN)
    );
    ensure!(
        m.mr(vfault::MSR) & ppc::MSR_WE == 0,
        "the guest MSR keeps WE",
        "{:#x}",
        m.mr(vfault::MSR)
    );
    let m = vm.resume(&reply_pc(m.mr(vfault::PC), 0))?;
    expect_virt(&m, VirtFault::Halt, at(4))?;
    ensure!(
        gpr(&m, 5) & ppc::MSR_WE == 0,
        "mfmsr shows MSR[WE] after the idle exit",
        "{:#x}",
        gpr(&m, 5)
    );
    ensure!(
        count(&vm.trace()?, TracePoint::GuestIdle) == 1,
        "GUEST_IDLE is not 1"
    );
    Ok(())
}

/// DECLARE_MMIO turns guest accesses to declared guest-physical pages into Mmio faults
/// (the message's gpa = the address); undeclaring them makes the same page fault to
/// the pager again.
pub fn mmio_fault() -> TestResult {
    const DEV: u32 = 0x0100_0000;
    let load = ppc::lwz(4, 4, 3);
    let mut vm = Vm::new(&[
        ppc::lis(3, (DEV >> 16) as u16),
        load,
        ppc::lwz(5, 8, 3),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let mmio = |on: u32| sys::vcpu_control(vm.id(), vcpuctl::DECLARE_MMIO, on, DEV, PAGE_SIZE);
    mmio(1).map_err(|e| call_failed("VcpuControl(DECLARE_MMIO)", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Mmio, at(1))?;
    let f = VirtFaultMsg::decode(m.tag, &m.regs).ok_or("the Mmio fault does not decode")?;
    ensure!(
        f.gpa == (DEV + 4) as u64,
        "the fault's gpa is not the device address",
        "{:#x}",
        f.gpa
    );
    ensure!(
        m.mr(vfault::GPA) == DEV + 4,
        "MR3 is not the device address",
        "{:#x}",
        m.mr(vfault::GPA)
    );
    ensure!(
        m.mr(vfault::INSN) == load,
        "MR2 is not the load",
        "{:#010x}",
        m.mr(vfault::INSN)
    );
    mmio(0).map_err(|e| call_failed("VcpuControl(DECLARE_MMIO, undeclare)", e))?;
    let (mut g, special) = regs_of(&m);
    g[4] = 0x5151;
    let m = vm.reply_recv(&reply_full(at(2), 0, &g, special))?;
    let pf = PageFault::parse(&m).ok_or("a load from a cleared MMIO range is not a page fault")?;
    ensure!(
        pf.addr == DEV + 8,
        "the page fault names the wrong address",
        "{:#x}",
        pf.addr
    );
    vm.back(DEV)?.write(8, 0x7777);
    let m = vm.serve(m)?;
    expect_virt(&m, VirtFault::Halt, at(4))?;
    ensure!(
        (gpr(&m, 4), gpr(&m, 5)) == (0x5151, 0x7777),
        "the loads did not get the VMM's values",
        "r4 {:#x}, r5 {:#x}",
        gpr(&m, 4),
        gpr(&m, 5)
    );
    Ok(())
}

/// A guest-physical address above 4 GiB (the guest TLB's ERPN, as BG/P's devices at
/// 0x7_3000_0000) is device memory: an Mmio fault carrying the full address, answered
/// with the typed reply (a load result, no register file).
pub fn mmio_above_4g() -> TestResult {
    const EA: u32 = 0x3000_0000;
    const GPA: u64 = 0x7_3000_0010;
    let load = ppc::lwz(4, 0x10, 3);
    let vm = Vm::new(&[
        ppc::lis(3, (EA >> 16) as u16),
        load,
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    // Guest TLB entry 1: EPN 0x30000000, V, 4 KiB; RPN 0x30000000 with ERPN 7; SR|SW.
    set_tlb(vm.id(), 1, [EA | 0x200 | (1 << 4), EA | 7, 0x3], 0)
        .map_err(|e| call_failed("VcpuControl(SET_TLB)", e))?;
    sys::vcpu_control(
        vm.id(),
        vcpuctl::SET_TRANSFER_MASK,
        VirtFault::Mmio as u32,
        0,
        0,
    )
    .map_err(|e| call_failed("SET_TRANSFER_MASK", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Mmio, at(1))?;
    let f = VirtFaultMsg::decode(m.tag, &m.regs).ok_or("the Mmio fault does not decode")?;
    ensure!(
        f.gpa == GPA,
        "the fault does not carry the 36-bit address",
        "gpa {:#x}",
        f.gpa
    );
    ensure!(
        f.insn == load && f.mask == 0,
        "wrong instruction or mask",
        "insn {:#010x} mask {:#x}",
        f.insn,
        f.mask
    );
    let (tag, regs) = FaultReply::resume(at(2))
        .set_gpr(4, 0x4242)
        .encode(None, &mut sys::utcb().mr);
    let m = vm.reply_recv(&Msg { tag, regs })?;
    expect_virt(&m, VirtFault::Halt, at(3))?;
    ensure!(
        gpr(&m, 4) == 0x4242,
        "the load did not get the VMM's value",
        "r4 {:#x}",
        gpr(&m, 4)
    );
    Ok(())
}

/// An FP load or store to device memory carries the guest's FP registers (the kernel adds
/// `xfer::FPRS` to an empty mask) in the VMM's UTCB FP area, and a reply `with_fprs`
/// installs them: the VMM emulates `lfd` by writing FPR1, and the guest's `stfd` of FPR1
/// then shows that value.
pub fn mmio_fp_transfer() -> TestResult {
    use kestrel_ppc440::decode::{encode, AddrMode, Fpr, Gpr, Insn, LoadStore, LsOp};
    const DEV: u32 = 0x0100_0000;
    const VALUE: u64 = 0x4009_21fb_5444_2d18;
    let fp = |op: LsOp, d: i16| -> Result<u32, &'static str> {
        let (f, ra) = (Fpr::new(1).ok_or("fpr")?, Gpr::new(3).ok_or("gpr")?);
        let ls = LoadStore::new_fp(op, f, ra, AddrMode::D { d }).map_err(|e| e.as_str())?;
        Ok(encode(&Insn::LoadStore(ls)))
    };
    let (lfd, stfd) = (fp(LsOp::Lfd, 0)?, fp(LsOp::Stfd, 8)?);
    let vm = Vm::new(&[
        ppc::lis(3, (DEV >> 16) as u16),
        lfd,
        stfd,
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    // The guest has its FPU enabled.
    set_state(
        vm.id(),
        &VcpuState {
            pc: CODE_GPA,
            msr: kestrel_ppc440::msr::FP,
            ..VcpuState::default()
        },
    )?;
    sys::vcpu_control(vm.id(), vcpuctl::DECLARE_MMIO, 1, DEV, PAGE_SIZE)
        .map_err(|e| call_failed("DECLARE_MMIO", e))?;
    sys::vcpu_control(
        vm.id(),
        vcpuctl::SET_TRANSFER_MASK,
        VirtFault::Mmio as u32,
        0,
        0,
    )
    .map_err(|e| call_failed("SET_TRANSFER_MASK", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Mmio, at(1))?;
    let f = VirtFaultMsg::decode(m.tag, &m.regs).ok_or("the Mmio fault does not decode")?;
    ensure!(
        f.mask == xfer::FPRS,
        "the lfd fault does not carry the FP registers alone",
        "mask {:#x}",
        f.mask
    );
    sys::utcb().fp[1] = VALUE;
    let (tag, regs) = FaultReply::resume(at(2))
        .with_fprs()
        .encode(None, &mut sys::utcb().mr);
    sys::utcb().fp[1] = VALUE;
    let m = vm.reply_recv(&Msg { tag, regs })?;
    expect_virt(&m, VirtFault::Mmio, at(2))?;
    let f = VirtFaultMsg::decode(m.tag, &m.regs).ok_or("the Mmio fault does not decode")?;
    ensure!(
        f.insn == stfd && f.gpa == (DEV + 8) as u64,
        "not the stfd",
        "insn {:#010x} gpa {:#x}",
        f.insn,
        f.gpa
    );
    let got = sys::utcb().fp[1];
    ensure!(
        got == VALUE,
        "FPR1 is not what the reply to the lfd installed",
        "{got:#x}"
    );
    let (tag, regs) = FaultReply::resume(at(3)).encode(None, &mut sys::utcb().mr);
    let m = vm.reply_recv(&Msg { tag, regs })?;
    expect_virt(&m, VirtFault::Halt, at(4))?;
    Ok(())
}

/// GET_STATE is the state "as the guest sees it" (`VcpuState`): a running virtual
/// decrementer must read lower than what was set, and no higher than what the guest
/// itself just read with `mfspr DEC`.
pub fn state_running_decrementer() -> TestResult {
    const START: u32 = 0x7fff_0000;
    let vm = Vm::new(&[
        ppc::mfspr(3, ppc::DEC),
        ppc::mfdcr(6, ppc::UIC_DCR),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    let s = VcpuState {
        pc: CODE_GPA,
        dec: START,
        ..VcpuState::default()
    };
    set_state(vm.id(), &s)?;
    busy_wait_us(5_000)?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Instruction, at(1))?;
    let guest_saw = gpr(&m, 3);
    ensure!(
        guest_saw < START,
        "the guest's decrementer does not count down",
        "DEC {guest_saw:#x}"
    );
    let dec = vm.state()?.dec;
    ensure!(
        dec <= guest_saw,
        "GET_STATE reports the decrementer as last written, not its current count",
        "GET_STATE dec {dec:#x}, the guest read {guest_saw:#x} earlier (set {START:#x})"
    );
    Ok(())
}

/// vCPUs are a bounded kernel resource: creating more than the kernel has fails with
/// OutOfMemory and leaves no thread behind; deleting one makes room again.
pub fn slots_exhausted_and_reused() -> TestResult {
    const TRY: usize = 16;
    let mut made: [Option<Thread>; TRY] = [const { None }; TRY];
    let mut limit = None;
    for (i, slot) in made.iter_mut().enumerate() {
        let t = Thread::reserve()?;
        match sys::thread_control_flags(
            t.id(),
            t.id(),
            VCPU_PRIORITY,
            ThreadId::ROOT,
            0,
            tcflags::VCPU,
        ) {
            Ok(()) => *slot = Some(t),
            Err(KError::OutOfMemory) => {
                let r = sys::exchange_registers(t.id(), 0, 0, 0, ThreadId::NIL, ThreadId::NIL);
                expect_kerror("the refused vCPU exists", r, &[KError::InvalidThread])?;
                limit = Some(i);
                break;
            }
            Err(e) => return Err(call_failed("ThreadControl (create vCPU)", e)),
        }
    }
    let Some(limit) = limit else {
        note(format_args!("{TRY} vCPUs created"));
        return Err("no limit on vCPUs");
    };
    ensure!(limit >= 1, "not even one vCPU can be created");
    made[0] = None;
    let t = Thread::reserve()?;
    sys::thread_control_flags(
        t.id(),
        t.id(),
        VCPU_PRIORITY,
        ThreadId::ROOT,
        0,
        tcflags::VCPU,
    )
    .map_err(|e| call_failed("ThreadControl (vCPU in a freed slot)", e))?;
    let s = get_state(t.id())?;
    ensure!(s == VcpuState::default(), "a reused vCPU slot is not clean");
    Ok(())
}
