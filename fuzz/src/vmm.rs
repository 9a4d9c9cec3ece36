//! Target `vmm`: the VMM's pure core on the virtual bamboo board (`kestrel_vmm_core`):
//! every virtualization fault a guest can provoke, run through `fault::handle` against
//! the attached UARTs and UIC, plus the guest-physical memory map and the device buses.
//!
//! Input: operations. A fault is built from a class, an instruction (a load or store of
//! any form with random registers, `mfdcr`/`mtdcr` near the UIC's DCRs, or any word),
//! a guest-physical address (in or near a UART, in the device space, anywhere below
//! 2^56), `rs_value` and pc, with or without the register file and FP registers; it goes
//! through the fault-message codec first (encode, decode: the handler sees what the
//! kernel's message carries). Other operations feed console input, and add segments to
//! and translate addresses through a `GuestMemory`, and ranges to a `Bus`, against plain
//! models. Every line the fault path logs goes through the VMM's per-guest log limit
//! (`diag::LogLimit`, with a policy and a clock from the input).
//!
//! Checked: the outcome fits the class (Idle resumes at pc, Halt halts, NeedRegisters
//! only for update forms without registers); a reply resumes at pc + 4 exactly when
//! nothing was injected, and an injection comes with exactly one log line; results go
//! to the register file or to `set_gpr`, never both, and FP results only with FP
//! registers; byte accesses to the UART registers and `mfdcr`/`mtdcr` of UIC0 always
//! succeed; after every step the UIC's MSR is SR & ER through the DCR bus and UART0's
//! interrupt line at the UIC matches the UART's output. Segments: `add` accepts exactly
//! the non-overlapping ones while there is room, keeps them sorted, and `translate`
//! agrees with a linear search. Buses: `insert` refuses exactly the empty, wrapping and
//! overlapping ranges, and `find` agrees with a linear search. Log limit: at most
//! `first` lines in full per kind, then summaries at least `interval` apart with positive
//! counts and running totals, and at the end every event in exactly one line.

use crate::input::{Input, SeedWriter};
use core::cell::RefCell;
use kestrel_abi::{FaultReply, Inject, MsgTag, VirtFault, VirtFaultMsg, GPA_BITS};
use kestrel_devices::bus::DcrDevice;
use kestrel_devices::Uic;
use kestrel_ppc440::decode::{decode, AccessKind, Insn};
use kestrel_ppc440::encode;
use kestrel_vmm_core::board::Window;
use kestrel_vmm_core::board::{BAMBOO, UART0, UART1};
use kestrel_vmm_core::bus::Bus;
use kestrel_vmm_core::diag::{Kind, LogLimit, Policy, Verdict};
use kestrel_vmm_core::fault::{handle, Outcome, Unmodelled};
use kestrel_vmm_core::segment::{GuestMemory, GuestPhysAddr, HostAddr, Segment, SegmentError};
use std::rc::Rc;

/// Primary opcodes of the D-form loads and stores (lwz .. stfdu).
const D_FORM: core::ops::RangeInclusive<u32> = 32..=55;
/// Extended opcodes (under primary 31) of X-form loads and stores, `dcbz` and `stwcx.`.
const X_FORM: [u32; 30] = [
    23, 55, 87, 119, 151, 183, 215, 247, 279, 311, 343, 375, 407, 439, 534, 662, 790, 918, 535,
    567, 599, 631, 663, 695, 727, 759, 983, 1014, 150, 20,
];
const UIC_DCR: u32 = 0xC0;

/// Operation selectors, for [`seed`].
pub mod op {
    pub const FAULT: u8 = 0;
    pub const CONSOLE: u8 = 1;
    pub const SEGMENT: u8 = 2;
    pub const TRANSLATE: u8 = 3;
    pub const BUS: u8 = 4;
    pub const COUNT: u8 = 5;
}

fn uart_base(d: &kestrel_vmm_core::board::Device) -> u64 {
    match d.window {
        Window::Mmio { base, .. } => base,
        Window::Dcr { .. } => unreachable!("UARTs are MMIO devices"),
    }
}

/// An instruction word for a fault.
fn instruction(input: &mut Input) -> u32 {
    let kind = input.u8();
    let (rt, ra, rb) = (
        u32::from(input.u8() % 32),
        u32::from(input.u8() % 32),
        u32::from(input.u8() % 32),
    );
    match kind % 8 {
        0..=3 => {
            let opcd = D_FORM.start() + u32::from(input.u8()) % 24;
            (opcd << 26) | (rt << 21) | (ra << 16) | u32::from(input.u16())
        }
        4 | 5 => {
            let xo = input.pick(&X_FORM);
            (31 << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1)
        }
        6 => {
            let dcr = match input.u8() {
                b @ 0..=0xEF => UIC_DCR + u32::from(b % 12),
                _ => u32::from(input.u16()) & 0x3FF,
            };
            if input.bool() {
                encode::mfdcr(rt, dcr)
            } else {
                encode::mtdcr(dcr, rt)
            }
        }
        _ => input.u32(),
    }
}

/// A guest-physical address for an Mmio fault.
fn address(input: &mut Input) -> u64 {
    match input.u8() % 6 {
        0 | 1 => uart_base(&UART0) + u64::from(input.u8() % 10),
        2 => uart_base(&UART1) + u64::from(input.u8() % 10),
        3 => {
            let (start, end) = BAMBOO.device_space;
            start + u64::from(input.u32()) % (end - start)
        }
        4 => uart_base(&UART0) - 8 + u64::from(input.u8() % 32),
        _ => input.u64() & ((1 << GPA_BITS) - 1),
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let machine = BAMBOO
        .attach(Vec::<u8>::new())
        .expect("the bamboo board attaches");
    let mut gpr = [0u32; 32];
    let mut fpr = [0u64; 33];
    let mut memory = GuestMemory::<4>::new();
    let mut model_segments: Vec<Segment> = Vec::new();
    let mut bus = Bus::<dyn DcrDevice>::new();
    let mut model_ranges: Vec<(u64, u64)> = Vec::new();
    let policy = Policy {
        first: input.below(9),
        interval: u64::from(input.u16()),
    };
    let mut diag = Diag::new(policy);
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::FAULT => {
                let class = VirtFault::from_raw(u32::from(input.u8() % 4)).expect("0..4");
                let insn = instruction(&mut input);
                let gpa = if class == VirtFault::Mmio {
                    address(&mut input)
                } else {
                    0
                };
                let (pc, msr, rs_value) = (input.u32(), input.u32(), input.u32());
                let with = input.u8();
                diag.now += u64::from(input.u8()) * 64;
                let msg = VirtFaultMsg {
                    class,
                    pc,
                    insn,
                    gpa,
                    msr,
                    mask: u32::from(with >> 4) & 0xF,
                    rs_value,
                };
                let (tag, mr) = msg.encode();
                let msg = VirtFaultMsg::decode(tag, &mr).expect("an encoded fault decodes");
                for r in gpr.iter_mut() {
                    *r = r.wrapping_mul(0x9E37_79B9).wrapping_add(rs_value);
                }
                let fault_regs = (with & 1 != 0).then_some(&mut gpr);
                let fault_fprs = (with & 2 != 0).then_some(&mut fpr);
                fault(&msg, fault_regs, fault_fprs, &machine.buses, &mut diag);
            }
            op::CONSOLE => {
                let mut console = machine.console.borrow_mut();
                let could = console.can_accept_input();
                assert_eq!(console.push_input(input.u8()), could);
            }
            op::SEGMENT => {
                let base = GuestPhysAddr::new(input.u64() % (1 << 37));
                let size = input.u32() >> input.below(32);
                let host = HostAddr::new(input.u32());
                let Ok(base) = base else {
                    continue;
                };
                let Ok(segment) = Segment::new(base, size, host) else {
                    assert!(
                        size == 0
                            || base.get() + u64::from(size) > 1 << 36
                            || u64::from(host.get()) + u64::from(size) > 1 << 32,
                        "a valid segment was refused"
                    );
                    continue;
                };
                let overlaps = model_segments.iter().any(|s| s.overlaps(&segment));
                match memory.add(segment) {
                    Ok(()) => {
                        assert!(
                            !overlaps && model_segments.len() < 4,
                            "add accepted {segment}"
                        );
                        model_segments.push(segment);
                    }
                    Err(SegmentError::Overlap { existing }) => {
                        assert!(existing.overlaps(&segment) && model_segments.contains(&existing))
                    }
                    Err(SegmentError::Full) => assert!(!overlaps && model_segments.len() == 4),
                    Err(e) => panic!("add: unexpected {e}"),
                }
                let bases: Vec<u64> = memory
                    .segments()
                    .iter()
                    .map(|s| s.guest_base().get())
                    .collect();
                assert!(bases.windows(2).all(|w| w[0] < w[1]), "segments sorted");
            }
            op::TRANSLATE => {
                let near = input.u8();
                let gpa = match model_segments.get(usize::from(near) % 8) {
                    Some(s) => s
                        .guest_base()
                        .get()
                        .wrapping_add(u64::from(input.u32()) >> input.below(32)),
                    None => input.u64(),
                } % (1 << 36);
                let len = input.u32() >> input.below(33).min(31);
                let gpa = GuestPhysAddr::new(gpa).expect("below 2^36");
                let want = match model_segments.iter().find(|s| s.contains(gpa)) {
                    _ if len == 0 => Err(SegmentError::EmptyAccess),
                    None => Err(SegmentError::Unmapped),
                    Some(s) if gpa.get() + u64::from(len) > s.guest_end() => {
                        Err(SegmentError::CrossesSegmentEnd)
                    }
                    Some(s) => Ok(s.host_base().get() + (gpa.get() - s.guest_base().get()) as u32),
                };
                assert_eq!(
                    memory.translate(gpa, len).map(HostAddr::get),
                    want,
                    "translate {gpa} {len}"
                );
            }
            _ => {
                let base = if input.bool() {
                    u64::from(input.u16())
                } else {
                    input.u64()
                };
                let size = if input.bool() {
                    u64::from(input.u8())
                } else {
                    input.u64()
                };
                let dev: Rc<RefCell<dyn DcrDevice>> = Rc::new(RefCell::new(Uic::new()));
                let bad = size == 0 || base.checked_add(size - 1).is_none();
                let overlaps = !bad
                    && model_ranges
                        .iter()
                        .any(|&(b, s)| base <= b + (s - 1) && b <= base + (size - 1));
                let got = bus.insert(base, size, "dev", dev);
                assert_eq!(
                    got.is_ok(),
                    !bad && !overlaps,
                    "insert [{base:#x} +{size:#x}): {got:?}"
                );
                if got.is_ok() {
                    model_ranges.push((base, size));
                }
                let addr = if input.bool() {
                    base.wrapping_add(u64::from(input.u8()))
                } else {
                    input.u64()
                };
                let len = u64::from(input.u8() % 9);
                let want = model_ranges
                    .iter()
                    .find(|&&(b, s)| addr >= b && addr - b < s)
                    .filter(|&&(b, s)| len <= s - (addr - b))
                    .map(|&(b, _)| addr - b);
                assert_eq!(
                    bus.find(addr, len).map(|r| r.2),
                    want,
                    "find {addr:#x} {len}"
                );
            }
        }
        let irq = machine.console.borrow().uart.irq();
        check_board(&machine.buses, &machine.uic, irq);
    }
    diag.finish();
}

/// The VMM's per-guest log limit (`kestrel_vmm_core::diag`), fed with every line the
/// fault path wants to log, with the accounting it promises: at most `first` lines in
/// full per kind (the last one says so), then summaries at least `interval` apart, each
/// with a positive count and the running total; at the end every event is in exactly one
/// line.
struct Diag {
    limit: LogLimit,
    policy: Policy,
    now: u64,
    full: [u64; Kind::COUNT],
    summarized: [u64; Kind::COUNT],
    last_line: [u64; Kind::COUNT],
}

impl Diag {
    fn new(policy: Policy) -> Diag {
        Diag {
            limit: LogLimit::new(policy),
            policy,
            now: 0,
            full: [0; Kind::COUNT],
            summarized: [0; Kind::COUNT],
            last_line: [0; Kind::COUNT],
        }
    }

    fn event(&mut self, kind: Kind) {
        let k = kind as usize;
        let first = u64::from(self.policy.first);
        match self.limit.event(kind, self.now) {
            Verdict::Log { last } => {
                self.full[k] += 1;
                assert!(
                    self.full[k] <= first,
                    "{kind:?}: more than {first} lines in full"
                );
                assert_eq!(
                    last,
                    self.full[k] == first,
                    "{kind:?}: the last line in full"
                );
                self.last_line[k] = self.now;
            }
            Verdict::Summary(s) => {
                assert_eq!(
                    self.full[k], first,
                    "{kind:?}: summary before the lines in full"
                );
                assert_eq!(s.kind, kind);
                assert!(s.suppressed >= 1, "{s:?}: empty summary");
                assert_eq!(s.total, self.limit.total(kind), "{s:?}: running total");
                assert!(
                    self.now - self.last_line[k] >= self.policy.interval,
                    "{kind:?}: summaries {} ticks apart",
                    self.now - self.last_line[k]
                );
                assert!(!s.to_string().is_empty());
                self.summarized[k] += s.suppressed;
                self.last_line[k] = self.now;
            }
            Verdict::Quiet => {
                assert_eq!(
                    self.full[k], first,
                    "{kind:?}: quiet before the lines in full"
                )
            }
        }
    }

    /// The VM stops: the summaries still owed account for every event.
    fn finish(mut self) {
        let owed: Vec<_> = self.limit.finish().collect();
        for s in owed {
            assert!(s.suppressed >= 1);
            self.summarized[s.kind as usize] += s.suppressed;
        }
        for kind in Kind::ALL {
            let k = kind as usize;
            assert_eq!(
                self.full[k] + self.summarized[k],
                self.limit.total(kind),
                "{kind:?}: every event in exactly one line"
            );
        }
    }
}

/// Runs one fault and checks the outcome.
fn fault(
    msg: &VirtFaultMsg,
    gpr: Option<&mut [u32; 32]>,
    fpr: Option<&mut [u64; 33]>,
    buses: &kestrel_vmm_core::fault::Buses,
    diag: &mut Diag,
) {
    let (had_gpr, had_fpr) = (gpr.is_some(), fpr.is_some());
    let mut logged: Vec<Unmodelled> = Vec::new();
    let outcome = handle(msg, gpr, fpr, buses, &mut |u| logged.push(u));
    for u in &logged {
        assert!(!u.to_string().is_empty());
        diag.event(u.kind());
    }
    let insn = decode(msg.insn);
    let what = format!(
        "{insn} ({:#010x}) {:?} at {:#x}",
        msg.insn, msg.class, msg.gpa
    );
    match outcome {
        Outcome::Halt => assert_eq!(msg.class, VirtFault::Halt, "{what}"),
        Outcome::Idle(r) => {
            assert_eq!(msg.class, VirtFault::Idle, "{what}");
            assert_eq!(r, FaultReply::resume(msg.pc));
        }
        Outcome::NeedRegisters => {
            assert!(!had_gpr, "{what}: asked for registers it had");
            assert!(matches!(insn, Insn::LoadStore(ls) if ls.update()), "{what}");
        }
        Outcome::Reply(r) => {
            assert!(
                matches!(msg.class, VirtFault::Mmio | VirtFault::Instruction),
                "{what}"
            );
            assert!(
                !r.stop && !r.regs && r.irq.is_none() && r.crit.is_none(),
                "{what}: {r:?}"
            );
            if r.inject.is_some() {
                assert_eq!(
                    r.pc,
                    Some(msg.pc),
                    "{what}: an injection resumes at the instruction"
                );
                assert_eq!(logged.len(), 1, "{what}: one log line per injection");
                assert!(r.set_gpr.is_none() && !r.fprs, "{what}: {r:?}");
            } else {
                assert_eq!(
                    r.pc,
                    Some(msg.pc.wrapping_add(4)),
                    "{what}: done, next instruction"
                );
                assert!(logged.is_empty(), "{what}: logged a handled access");
            }
            if had_gpr {
                assert!(
                    r.set_gpr.is_none(),
                    "{what}: result both in registers and reply"
                );
            }
            if r.fprs {
                assert!(had_fpr, "{what}: FP result without FP registers");
            }
            if let Some((reg, _)) = r.set_gpr {
                assert!(reg < 32);
            }
            // What must always work: byte accesses to UART registers, UIC0's DCRs.
            match insn {
                Insn::LoadStore(ls)
                    if msg.class == VirtFault::Mmio
                        && ls.width().bytes() == 1
                        && !ls.op().multiple()
                        && [UART0, UART1]
                            .iter()
                            .any(|d| (uart_base(d)..uart_base(d) + 8).contains(&msg.gpa)) =>
                {
                    assert!(r.inject.is_none(), "{what}: UART byte access refused");
                    if ls.kind() == AccessKind::Load && !had_gpr {
                        assert_eq!(
                            r.set_gpr.map(|(g, _)| g),
                            Some(ls.rt_rs().number()),
                            "{what}"
                        );
                    }
                }
                Insn::Mfdcr { dcr, .. } | Insn::Mtdcr { dcr, .. }
                    if msg.class == VirtFault::Instruction
                        && (UIC_DCR..UIC_DCR + 9).contains(&u32::from(dcr.number())) =>
                {
                    assert!(r.inject.is_none(), "{what}: UIC DCR refused");
                }
                _ => {}
            }
            let dcr_insn = matches!(
                insn,
                Insn::Mfdcr { .. } | Insn::Mtdcr { .. } | Insn::Mfdcrx { .. } | Insn::Mtdcrx { .. }
            );
            if msg.class == VirtFault::Instruction && r.inject.is_none() {
                assert!(dcr_insn, "{what}: emulated");
            }
            if let Some(Inject::MachineCheck) = r.inject {
                assert!(dcr_insn, "{what}");
            }
        }
    }
    // The reply survives its own codec.
    if let Outcome::Reply(r) | Outcome::Idle(r) = outcome {
        let mut long = [0; kestrel_abi::NUM_MRS];
        let (tag, mr) = r.encode(None, &mut long);
        assert_eq!(FaultReply::decode(tag, &mr), r);
        let _ = MsgTag(tag.0).validate();
    }
}

/// Board invariants: the UIC's MSR is SR & ER through the DCR bus, and UART0's line at
/// the UIC follows the UART's interrupt output.
fn check_board(buses: &kestrel_vmm_core::fault::Buses, uic: &RefCell<Uic>, uart0_irq: bool) {
    let read = |offset: u32| {
        buses
            .dcr
            .read(UIC_DCR + offset)
            .expect("UIC0 is on the DCR bus")
    };
    let (sr, er, msr) = (read(0), read(2), read(6));
    assert_eq!(msr, sr & er, "UIC MSR through the DCR bus");
    let line0 = kestrel_devices::uic::line_bit(0);
    let level = uic.borrow().inputs() & line0 != 0;
    assert_eq!(level, uart0_irq, "UART0's line at the UIC follows the UART");
}

/// A seed: a UART driver's initialisation and a few characters through MMIO faults
/// (what Linux's 8250 driver does), UIC setup through DCR faults, then a segment, a
/// translation and a bus range.
pub fn seed(variant: u8) -> Vec<u8> {
    let mut w = SeedWriter::default();
    // Log policy: 8 lines in full, summaries 4096 ticks apart.
    w.u8(8).u16(4096);
    let uart = |w: &mut SeedWriter, store: bool, reg: u8, value: u32| {
        // op, class Mmio, instruction kind 0 (D-form), rt, ra, rb, opcode index,
        // displacement, address kind 0 (UART0) and offset, pc, msr, rs_value, with.
        let opcd = if store { 38 - 32 } else { 34 - 32 }; // stb / lbz
        w.u8(op::FAULT)
            .u8(1)
            .u8(0)
            .u8(3)
            .u8(4)
            .u8(0)
            .u8(opcd)
            .u16(u16::from(reg));
        w.u8(0)
            .u8(reg)
            .u32(0x100)
            .u32(0)
            .u32(value)
            .u8(variant & 3)
            .u8(variant);
    };
    for (reg, value) in [
        (3u8, 0x80u32),
        (0, 12),
        (1, 0),
        (3, 3),
        (2, 0xC7),
        (4, 0x0B),
        (1, 0x05),
    ] {
        uart(&mut w, true, reg, value);
    }
    for c in b"ok\n" {
        uart(&mut w, true, 0, u32::from(*c));
    }
    w.u8(op::CONSOLE).u8(b'x');
    for reg in [5u8, 0, 2, 6] {
        uart(&mut w, false, reg, 0);
    }
    for (dcr, store) in [(2u8, true), (0, true), (6, false), (7, false)] {
        // op, class Instruction, kind 6 (DCR), rt, ra, rb, dcr selector, mf/mt.
        w.u8(op::FAULT)
            .u8(0)
            .u8(6)
            .u8(5)
            .u8(0)
            .u8(0)
            .u8(dcr)
            .bool(!store);
        w.u32(0x200).u32(0).u32(0x8000_0000).u8(variant & 1).u8(1);
    }
    // A guest probing: unmodelled device words and DCRs, an unhandled instruction, again and
    // again (the log limit's full lines, summaries and the final account).
    for i in 0..12u8 {
        // Mmio: D-form lwz at a device-space address (kind 3, 32-bit offset).
        w.u8(op::FAULT).u8(1).u8(0).u8(3).u8(4).u8(0).u8(0).u16(0);
        w.u8(3)
            .u32(0x0100_0000 * u32::from(i))
            .u32(0x300)
            .u32(0)
            .u32(0)
            .u8(0)
            .u8(i * 20);
        // Instruction: mfdcr of DCR 0x3FF (kind 6, selector above 0xEF escapes to a u16).
        w.u8(op::FAULT)
            .u8(0)
            .u8(6)
            .u8(5)
            .u8(0)
            .u8(0)
            .u8(0xF0)
            .u16(0x3FF)
            .bool(true);
        w.u32(0x304).u32(0).u32(0).u8(1).u8(i * 21);
        // Instruction: any word (kind 7): mtspr to an SPR the 440 lacks.
        w.u8(op::FAULT)
            .u8(0)
            .u8(7)
            .u8(0)
            .u8(0)
            .u8(0)
            .u32(encode::mtspr(1000, 3));
        w.u32(0x308).u32(0).u32(0).u8(0).u8(255);
    }
    w.u8(op::SEGMENT)
        .u64(0)
        .u32(64 << 20)
        .u8(0)
        .u32(0x1000_0000);
    w.u8(op::TRANSLATE).u8(0).u32(0x1234).u8(0).u32(4).u8(0);
    w.u8(op::BUS)
        .bool(true)
        .u16(0xC0)
        .bool(true)
        .u8(9)
        .bool(true)
        .u8(3)
        .u8(4);
    w.bytes
}
