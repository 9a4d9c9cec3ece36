//! Target `guestcpu`: the guest CPU's privileged-instruction semantics
//! (`kestrel_guestcpu`) driven the way the kernel's trap-and-emulate path drives them, one
//! step at a time, with `tlbwe`/`tlbre`/`tlbsx` checked against testkit's reference TLB
//! (`kestrel_testkit::vtlb::RefTlb`, as `guestcpu/tests/model.rs` does).
//!
//! Input: the guest MSR, then steps: an instruction word (privileged templates with any
//! fields, every SPR number, or any word) decoded by `insn::classify` and executed by the
//! matching function (`mfmsr`, `mtmsr`, `wrtee[i]`, `mfspr`/`mtspr` with their effects
//! applied as the kernel applies them, `tlbre`/`tlbwe`/`tlbsx[.]`, `rfi`/`rfci`/`rfmci`);
//! an interrupt entry of any vector; delivery of what `msr::deliverable` says; the time base
//! moving and the timers brought up to it; GPR, XER and SPR-field writes and interrupt
//! lines (the state the guest controls); and the split-space plan of any load/store word.
//!
//! Checked after each step: no panic; the guest MSR holds only `msr::GUEST_MSR_MASK` bits
//! and never WE; `msr::real_msr` always has `VCPU_MSR` (PR, EE, ME, IS, DS), adds only FP
//! (only while the vCPU owns the FPU and the guest set FP) and DE (exactly when the guest
//! asked for debug events), nothing else. Per step: `mtspr` of a read-only SPR (PIR, PVR,
//! the time-base read ports) and every `SprExit` leave the state unchanged; a completed
//! `mtspr` changes at most the SPR's own field, by its rule; `mfspr` is `None` exactly for
//! the VMM's SPRs and the time base's write ports; MSR changes report the old and new MSR and change nothing else; returns
//! and interrupt entries save and restore the right pair and land at IVPR|IVOR; the timers
//! only set TSR bits, keep a live deadline in the future, and `maybe_pending` is never
//! false while an interrupt becomes pending; `tlbwe`/`tlbre`/`tlbsx` agree with the
//! reference TLB, `TlbWrite` reports the live blocks before and after, and every entry's
//! live block agrees with the reference (the written one after each `tlbwe`, all at the end); the split plan names only bytes
//! at the instruction's effective address (the line holding it for `dcbz`), of the
//! instruction's length, at most `split::MAX_BYTES`, and a step without an access touches
//! no GPR.

use crate::input::{Input, SeedWriter};
use kestrel_abi::{FrameRegs, VcpuState};
use kestrel_guestcpu::insn::{classify, Privileged};
use kestrel_guestcpu::msr::{self, MsrWrite, Return, GUEST_MSR_MASK, VCPU_MSR};
use kestrel_guestcpu::split::{self, Op, Step, MAX_BYTES, STRING_COUNT};
use kestrel_guestcpu::spr::{self, Hardware, Rule, SprEffect, SprExit};
use kestrel_guestcpu::timer::{self, Timers};
use kestrel_guestcpu::tlb::{self, TlbOp};
use kestrel_ppc440::decode::{self, opcd, xo19, xo31, Insn, DCACHE_LINE};
use kestrel_ppc440::{encode, ivor, msr as m, spr as pspr};
use kestrel_testkit::vtlb::RefTlb;
use kestrel_vtlb::{Access, GuestTlb};

/// Steps per input at most (libFuzzer's speed stays high; longer inputs repeat patterns).
const MAX_STEPS: usize = 256;

/// Step selectors, for [`seed`].
pub mod op {
    /// An instruction word from [`super::insn_word`], classified and executed.
    pub const INSN: u8 = 0;
    /// An interrupt entry: vector (byte), pc (u32).
    pub const INTERRUPT: u8 = 1;
    /// Deliver what `deliverable` says, if anything.
    pub const DELIVER: u8 = 2;
    /// The time base moves on by a u32 and the timers are brought up to it.
    pub const TICK: u8 = 3;
    /// A GPR (byte) := u32.
    pub const GPR: u8 = 4;
    /// XER and CR := u32, u32.
    pub const XER: u8 = 5;
    /// The shadow field of SPR (u16 % 1024) := u32 (outside `mtspr`: loaded state).
    pub const FIELD: u8 = 6;
    /// Interrupt lines: byte (bit 0 external, bit 1 critical), and the FPU owner bit 2.
    pub const LINES: u8 = 7;
    /// The split-space plan of a load/store word from [`super::access_word`].
    pub const SPLIT: u8 = 8;
    pub const COUNT: u8 = 9;
}

/// Instruction templates of [`insn_word`], for [`seed`].
pub mod tpl {
    pub const MFMSR: u8 = 0;
    pub const MTMSR: u8 = 1;
    pub const WRTEE: u8 = 2;
    pub const WRTEEI: u8 = 3;
    pub const MFSPR: u8 = 4;
    pub const MTSPR: u8 = 5;
    pub const TLBWE: u8 = 6;
    pub const TLBRE: u8 = 7;
    pub const TLBSX: u8 = 8;
    pub const RETURN: u8 = 9;
    pub const X_FORM: u8 = 10;
    pub const RAW: u8 = 11;
    pub const COUNT: u8 = 12;
}

const fn x_form(rt: u32, ra: u32, rb: u32, xo: u32, rc: bool) -> u32 {
    (opcd::X << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1) | rc as u32
}

fn reg(input: &mut Input) -> u32 {
    input.below(32)
}

/// A word select: mostly 0..=3 (3 is invalid), sometimes any 5-bit field.
fn word_select(input: &mut Input) -> u32 {
    let b = input.u8();
    if b < 0xC0 {
        u32::from(b % 4)
    } else {
        u32::from(b % 32)
    }
}

/// A privileged instruction word (a template with any fields), or any word.
pub fn insn_word(input: &mut Input) -> u32 {
    match input.below(u32::from(tpl::COUNT)) as u8 {
        tpl::MFMSR => encode::mfmsr(reg(input)),
        tpl::MTMSR => encode::mtmsr(reg(input)),
        tpl::WRTEE => encode::wrtee(reg(input)),
        tpl::WRTEEI => encode::wrteei(input.bool()),
        tpl::MFSPR => encode::mfspr(reg(input), u32::from(input.u16()) % 1024),
        tpl::MTSPR => {
            let n = u32::from(input.u16()) % 1024;
            encode::mtspr(n, reg(input))
        }
        tpl::TLBWE => {
            let (rs, ra) = (reg(input), reg(input));
            x_form(rs, ra, word_select(input), xo31::TLBWE, false)
        }
        tpl::TLBRE => {
            let (rt, ra) = (reg(input), reg(input));
            x_form(rt, ra, word_select(input), xo31::TLBRE, false)
        }
        tpl::TLBSX => {
            let (rt, ra, rb) = (reg(input), reg(input), reg(input));
            x_form(rt, ra, rb, xo31::TLBSX, input.bool())
        }
        tpl::RETURN => {
            let xo = input.pick(&[xo19::RFI, xo19::RFCI, xo19::RFMCI]);
            (opcd::XL << 26) | (xo << 1)
        }
        tpl::X_FORM => (opcd::X << 26) | (input.u32() & 0x03FF_FFFF),
        _ => input.u32(),
    }
}

/// The X-form extended opcodes the split plan treats apart from the decoder's table.
const SPLIT_XO: [u32; 10] = [
    xo31::LWARX,
    xo31::STWCX,
    xo31::LSWI,
    xo31::LSWX,
    xo31::STSWI,
    xo31::STSWX,
    xo31::DCBZ,
    xo31::DCBST,
    xo31::DCBF,
    xo31::ICBI,
];

/// A data-access word: a D-form load/store (primary opcodes 32..=55), an X-form of the
/// split plan's own list, any X-form, or any word.
pub fn access_word(input: &mut Input) -> u32 {
    let kind = input.u8() % 4;
    let fields = input.u32();
    match kind {
        0 => ((32 + u32::from(input.u8()) % 24) << 26) | (fields & 0x03FF_FFFF),
        1 => {
            let xo = input.pick(&SPLIT_XO);
            (opcd::X << 26) | (fields & 0x03FF_F800) | (xo << 1) | (fields & 1)
        }
        2 => (opcd::X << 26) | (fields & 0x03FF_FFFF),
        _ => fields,
    }
}

struct Hw {
    tb: u64,
}

impl Hardware for Hw {
    fn timebase(&self) -> u64 {
        self.tb
    }
    fn pvr(&self) -> u32 {
        0x4224_1234
    }
}

struct State {
    s: VcpuState,
    t: Timers,
    regs: FrameRegs,
    tlb: GuestTlb,
    model: RefTlb,
    /// The guest's time base.
    now: u64,
    owns_fpu: bool,
    fpr: [u64; 33],
}

/// The SPRs that are read-only for the guest: `mtspr` to them must change nothing.
const READ_ONLY: [u32; 4] = [pspr::PIR, pspr::PVR, pspr::TBL_R, pspr::TBU_R];

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut st = State {
        s: VcpuState {
            msr: input.u32() & GUEST_MSR_MASK & !m::WE,
            ..VcpuState::default()
        },
        t: Timers::default(),
        regs: FrameRegs::default(),
        tlb: GuestTlb::new(),
        model: RefTlb::new(),
        now: 0,
        owns_fpu: false,
        fpr: [0; 33],
    };
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        step(&mut st, &mut input);
        check(&st);
    }
    check_tlb(&st);
}

fn step(st: &mut State, input: &mut Input) {
    match input.below(u32::from(op::COUNT)) as u8 {
        op::INSN => {
            let word = insn_word(input);
            execute(st, word);
            // Every word also goes through the split plan (the kernel plans any word that
            // reached it through a data access).
            plan(st, word);
        }
        op::INTERRUPT => {
            let vector = input.below(16);
            let pc = input.u32();
            interrupt(st, vector, pc);
        }
        op::DELIVER => {
            let s = &st.s;
            let pending = msr::interrupt_pending(s);
            let d = msr::deliverable(s);
            assert!(d.is_none() || pending, "deliverable but not pending");
            assert!(!msr::wakeup_pending(s) || pending, "wakes but not pending");
            if pending {
                assert!(
                    msr::maybe_pending(s, st.t.dec_deadline, || st.now),
                    "pending, but the fast tier's test says no"
                );
            }
            if let Some((vector, _)) = d {
                assert!(vector < 16);
                let pc = st.regs.ip;
                interrupt(st, vector, pc);
                // What it delivered is masked now (EE off; CE off for a critical one).
                assert_ne!(msr::deliverable(&st.s), Some(d.expect("some")));
            }
        }
        op::TICK => {
            let before = st.s;
            let deadline = st.t.dec_deadline;
            let last = st.t.timer_tb;
            st.now = st.now.wrapping_add(u64::from(input.u32()));
            let now = st.now;
            let maybe = msr::maybe_pending(&before, deadline, || now);
            timer::update(&mut st.s, &mut st.t, now);
            let s = &st.s;
            assert_eq!(
                VcpuState {
                    tsr: s.tsr,
                    dec: s.dec,
                    ..before
                },
                *s,
                "timers change only TSR and DEC"
            );
            assert_eq!(s.tsr & before.tsr, before.tsr, "timers only set TSR bits");
            assert!(s.dec == before.dec || s.dec == 0);
            assert_eq!(st.t.timer_tb, now);
            if deadline != 0 && now >= deadline {
                assert_ne!(s.tsr & kestrel_ppc440::tsr::DIS, 0, "expired: TSR[DIS]");
                assert!(
                    st.t.dec_deadline == 0
                        || st.t.dec_deadline > now
                        || st.t.dec_deadline == u64::MAX,
                    "a reloaded deadline is in the future (or the time base's end)"
                );
            } else {
                assert_eq!(st.t.dec_deadline, deadline);
            }
            if msr::interrupt_pending(s) {
                assert!(
                    maybe,
                    "maybe_pending said no, but after the timers an interrupt is pending \
                     (deadline {deadline:#x}, last {last:#x}, now {now:#x})"
                );
            }
        }
        op::GPR => {
            let r = input.below(32) as usize;
            st.regs.gpr[r] = input.u32();
        }
        op::XER => {
            st.regs.xer = input.u32();
            st.regs.cr = input.u32();
        }
        op::FIELD => {
            let n = u32::from(input.u16()) % 1024;
            let v = input.u32();
            if let Some(f) = spr::field_mut(&mut st.s, n) {
                *f = if n == pspr::PID { v & 0xFF } else { v };
            }
        }
        op::LINES => {
            let b = input.u8();
            st.s.irq_line = u32::from(b & 1);
            st.s.crit_line = u32::from(b >> 1 & 1);
            st.owns_fpu = b & 4 != 0;
        }
        _ => {
            let word = access_word(input);
            plan(st, word);
        }
    }
}

/// The guest's invariants after every step.
fn check(st: &State) {
    let g = st.s.msr;
    assert_eq!(
        g & !GUEST_MSR_MASK,
        0,
        "guest MSR {g:#x}: unimplemented bits"
    );
    assert_eq!(
        g & m::WE,
        0,
        "guest MSR {g:#x}: WE is a request, never stored"
    );
    for owns in [false, true] {
        let real = msr::real_msr(&st.s, owns);
        assert_eq!(
            real & VCPU_MSR,
            VCPU_MSR,
            "real MSR {real:#x} lacks the vCPU's bits"
        );
        assert_eq!(
            real & !(VCPU_MSR | m::FP | m::DE),
            0,
            "real MSR {real:#x}: bits beyond the vCPU's, FP and DE"
        );
        assert_eq!(
            real & m::FP != 0,
            owns && g & m::FP != 0,
            "real MSR[FP] only while the guest owns the FPU and set FP"
        );
        assert_eq!(real & m::DE != 0, msr::guest_debug_events(&st.s));
    }
}

/// Every guest TLB entry's live block agrees with the reference (after each `tlbwe` the
/// written entry is checked; this covers the rest once per input).
fn check_tlb(st: &State) {
    for i in 0..64u32 {
        assert_eq!(
            st.tlb.live_block(i),
            block(&st.model, i),
            "entry {i}: live block"
        );
    }
}

/// The reference entry's live block as (base, mask) over 32 bits.
fn block(model: &RefTlb, index: u32) -> Option<(u32, u32)> {
    model.e[index as usize & 63]
        .block()
        .map(|(lo, hi)| (lo as u32, (!(hi - lo - 1)) as u32))
}

/// An MSR change as reported: old and new as in the state, nothing but the MSR changed.
fn check_msr_write(before: &VcpuState, after: &VcpuState, w: MsrWrite, what: &str) {
    assert_eq!(w.old, before.msr, "{what}: old MSR");
    assert_eq!(w.new, after.msr, "{what}: new MSR");
    assert_eq!(
        VcpuState {
            msr: after.msr,
            ..*before
        },
        *after,
        "{what}: changed more than the MSR"
    );
}

fn interrupt(st: &mut State, vector: u32, pc: u32) {
    let before = st.s;
    let (target, w) = msr::interrupt(&mut st.s, vector, pc);
    let s = &st.s;
    assert_eq!((w.old, w.new, w.wait), (before.msr, s.msr, false));
    assert_eq!(s.msr & !before.msr, 0, "an interrupt only clears MSR bits");
    assert_eq!(
        s.msr & (m::WE | m::EE | m::PR | m::FP | m::IS | m::DS | m::FE0 | m::FE1),
        0,
        "interrupt: supervisor, translation space 0, EE off"
    );
    let mut expect = before;
    expect.msr = s.msr;
    match ivor::class(vector) {
        ivor::Class::NonCritical => (expect.srr0, expect.srr1) = (pc, before.msr),
        ivor::Class::Critical => {
            assert_eq!(s.msr & (m::CE | m::DE), 0);
            (expect.csrr0, expect.csrr1) = (pc, before.msr);
        }
        ivor::Class::MachineCheck => {
            assert_eq!(s.msr & (m::CE | m::DE | m::ME), 0);
            (expect.mcsrr0, expect.mcsrr1) = (pc, before.msr);
        }
    }
    assert_eq!(expect, *s, "interrupt {vector}: saved pair");
    assert_eq!(
        target,
        (before.ivpr & 0xFFFF_0000) | (before.ivor[vector as usize] & 0xFFF0),
        "interrupt {vector}: IVPR | IVOR"
    );
    st.regs.ip = target;
}

fn execute(st: &mut State, word: u32) {
    let before = st.s;
    match classify(word) {
        Privileged::Mfmsr { rt } => {
            assert!(rt < 32);
            st.regs.gpr[rt] = st.s.msr;
        }
        Privileged::Mtmsr { rs } => {
            let v = st.regs.gpr[rs];
            let w = msr::mtmsr(&mut st.s, v);
            check_msr_write(&before, &st.s, w, "mtmsr");
            assert_eq!(st.s.msr, v & GUEST_MSR_MASK & !m::WE);
            assert_eq!(w.wait, v & m::WE != 0);
        }
        Privileged::Wrtee { rs } => {
            let v = st.regs.gpr[rs];
            let w = msr::wrtee(&mut st.s, v);
            check_msr_write(&before, &st.s, w, "wrtee");
            assert_eq!(st.s.msr, (before.msr & !m::EE) | (v & m::EE));
            assert!(!w.wait);
        }
        Privileged::Wrteei { e } => {
            let w = msr::wrteei(&mut st.s, e);
            check_msr_write(&before, &st.s, w, "wrteei");
            assert_eq!(st.s.msr, msr::with_ee(before.msr, e));
            assert_eq!(word & (1 << 15) != 0, e, "wrteei: E is instruction bit 16");
        }
        Privileged::Mfspr { rt, spr: n } => {
            assert!(n < 1024);
            let hw = Hw { tb: st.now };
            let got = spr::mfspr(&st.s, st.t.dec_deadline, n, &hw);
            // The VMM's SPRs and the time base's write ports are not read by the kernel.
            let readable = spr::kernel_emulates(n) && n != pspr::TBL_W && n != pspr::TBU_W;
            assert_eq!(got.is_some(), readable, "mfspr {n}");
            if spr::is_plain(n) {
                assert_eq!(got, spr::field(&st.s, n).copied(), "mfspr {n}: plain");
            }
            match n {
                pspr::TBL_R => assert_eq!(got, Some(st.now as u32)),
                pspr::TBU_R => assert_eq!(got, Some((st.now >> 32) as u32)),
                _ => {}
            }
            if let Some(v) = got {
                st.regs.gpr[rt] = v;
            }
        }
        Privileged::Mtspr { rs, spr: n } => mtspr(st, n, st.regs.gpr[rs]),
        Privileged::Tlb(op) => tlb_op(st, op, word),
        Privileged::Return(kind) => {
            let (pc, srr1) = match kind {
                Return::Rfi => (before.srr0, before.srr1),
                Return::Rfci => (before.csrr0, before.csrr1),
                Return::Rfmci => (before.mcsrr0, before.mcsrr1),
            };
            let (to, w) = msr::return_from(&mut st.s, kind);
            check_msr_write(&before, &st.s, w, "return from interrupt");
            assert_eq!(to, pc, "{kind:?}: pc from the pair");
            assert_eq!(st.s.msr, srr1 & GUEST_MSR_MASK & !m::WE);
            assert_eq!(w.wait, srr1 & m::WE != 0);
            st.regs.ip = to;
        }
        Privileged::NoEffect | Privileged::Other => {}
        Privileged::IndexedDcr { ra } => assert!(ra < 32),
    }
}

fn mtspr(st: &mut State, n: u32, val: u32) {
    let before = st.s;
    let now = st.now;
    let got = spr::mtspr(&mut st.s, n, val, now);
    if READ_ONLY.contains(&n) || !spr::kernel_emulates(n) {
        assert_eq!(got, Err(SprExit::Vmm), "mtspr {n}: read-only or the VMM's");
    }
    let effect = match got {
        Err(e) => {
            assert_eq!(
                st.s, before,
                "mtspr {n} = {val:#x}: {e:?} changed the state"
            );
            if e == SprExit::Reset {
                assert_eq!(n, pspr::DBCR0);
            }
            return;
        }
        Ok(e) => e,
    };
    // At most the SPR's own field changed.
    let mut expect = before;
    if let (Some(f), Some(&v)) = (spr::field_mut(&mut expect, n), spr::field(&st.s, n)) {
        *f = v;
    }
    assert_eq!(expect, st.s, "mtspr {n}: changed another field");
    let old = spr::field(&before, n).copied();
    let new = spr::field(&st.s, n).copied();
    match (spr::rule(n), effect) {
        (None, SprEffect::TbJump { after, delta }) => {
            assert!(
                n == pspr::TBL_W || n == pspr::TBU_W,
                "time-base jump from {n}"
            );
            if n == pspr::TBL_W {
                assert_eq!((after >> 32, after as u32), (now >> 32, val));
            } else {
                assert_eq!(((after >> 32) as u32, after as u32), (val, now as u32));
            }
            assert_eq!(now.wrapping_add(delta), after);
            // The kernel moves everything kept on the guest's time base along.
            st.now = after;
            if st.t.dec_deadline != 0 {
                st.t.dec_deadline = st.t.dec_deadline.wrapping_add(delta);
            }
        }
        (Some(Rule::Copy), SprEffect::None) => assert_eq!(new, Some(val)),
        (Some(Rule::Clear), SprEffect::None) => assert_eq!(new, old.map(|o| o & !val)),
        (Some(Rule::Mask(mask)), SprEffect::None) => assert_eq!(new, Some(val & mask)),
        (Some(Rule::WriteThrough), SprEffect::WriteThrough { spr, value }) => {
            assert_eq!((spr, value, new), (n, val, Some(val)))
        }
        (Some(Rule::Pid), e) => {
            assert_eq!(new, Some(val & 0xFF));
            assert_eq!(
                e == SprEffect::PidSwitch,
                old != new,
                "PID switch iff changed"
            );
            assert!(e == SprEffect::PidSwitch || e == SprEffect::None);
        }
        (Some(Rule::Dec), SprEffect::DecDeadline(d)) => {
            assert_eq!(new, Some(val));
            assert_eq!(d == 0, val == 0, "DEC 0 stops the decrementer");
            assert!(d == 0 || d > now || d == u64::MAX, "a deadline in the past");
            st.t.dec_deadline = d;
        }
        (Some(Rule::Dbcr0), SprEffect::Dbcr0(real)) => {
            assert_eq!(new, Some(val));
            assert_eq!(real & !spr::DBCR0_EVENTS, 0, "real DBCR0: only the events");
        }
        (r, e) => panic!("mtspr {n}: rule {r:?} with effect {e:?}"),
    }
}

fn tlb_op(st: &mut State, op: TlbOp, word: u32) {
    let before = st.s;
    match op {
        TlbOp::We { rs, ra, ws } => {
            let (index, w, value) = tlb::tlbwe_operands(&st.regs, word);
            assert_eq!((index, w, value), (st.regs.gpr[ra], ws, st.regs.gpr[rs]));
            let mmucr = st.s.mmucr;
            let old = block(&st.model, index);
            let got = tlb::tlbwe(&mut st.tlb, mmucr, index, w, value);
            let ok = st.model.tlbwe(index, w, value, mmucr);
            assert_eq!(got.is_ok(), ok, "tlbwe {index} word {w}: accepted");
            if let Ok(wr) = got {
                let new = block(&st.model, index);
                assert_eq!((wr.index, wr.word), (index, w));
                assert_eq!(wr.old, old, "tlbwe {index}: old live block");
                assert_eq!(wr.new, if w == 0 { new } else { old }, "tlbwe: new block");
                assert_eq!(wr.is_dead(), old.is_none() && wr.new.is_none());
            }
            assert_eq!(
                st.tlb.live_block(index),
                block(&st.model, index),
                "tlbwe {index}"
            );
            assert_eq!(st.s, before, "tlbwe changes no vCPU register");
        }
        TlbOp::Re { rt, ra, ws } => {
            let index = st.regs.gpr[ra];
            let regs = st.regs;
            let expect = st.model.tlbre(index, ws, st.s.mmucr);
            let got = tlb::tlbre(&st.tlb, &mut st.s.mmucr, &mut st.regs, word);
            match expect {
                None => {
                    assert!(got.is_err(), "tlbre word {ws}");
                    assert_eq!((st.regs, st.s), (regs, before), "a failed tlbre");
                }
                Some((v, mmucr)) => {
                    assert!(got.is_ok(), "tlbre word {ws}");
                    let mut r = regs;
                    r.gpr[rt] = v;
                    assert_eq!(st.regs, r, "tlbre {index} word {ws}: RT");
                    assert_eq!(st.s.mmucr, mmucr.unwrap_or(before.mmucr), "tlbre: MMUCR");
                    assert_eq!(
                        VcpuState {
                            mmucr: before.mmucr,
                            ..st.s
                        },
                        before
                    );
                }
            }
        }
        TlbOp::Sx { rt, ra, rb, rc } => {
            let regs = st.regs;
            let ea = if ra == 0 { 0 } else { regs.gpr[ra] }.wrapping_add(regs.gpr[rb]);
            let mmucr = st.s.mmucr;
            let hit = st
                .model
                .first_match(ea, mmucr as u8, mmucr & (1 << 16) != 0);
            tlb::tlbsx(&st.tlb, mmucr, &mut st.regs, word);
            let mut r = regs;
            if let Some(i) = hit {
                r.gpr[rt] = i as u32;
            }
            if rc {
                let cr0 = (hit.is_some() as u32) << 1 | regs.xer >> 31;
                r.cr = (regs.cr & 0x0FFF_FFFF) | cr0 << 28;
            }
            assert_eq!(st.regs, r, "tlbsx {ea:#x}: RT and CR");
            assert_eq!(st.s, before);
        }
    }
}

/// The effective address the instruction names, from its fields alone: D-form
/// (RA|0) + EXTS(D), X-form (RA|0) + (RB), string immediates (RA|0).
fn named_ea(word: u32, gpr: &[u32; 32]) -> u32 {
    let ra = decode::RA.get(word) as usize;
    let base = if ra == 0 { 0 } else { gpr[ra] };
    if decode::OPCD.get(word) == opcd::X {
        if matches!(decode::XO.get(word), xo31::LSWI | xo31::STSWI) {
            base
        } else {
            base.wrapping_add(gpr[decode::RB.get(word) as usize])
        }
    } else {
        base.wrapping_add(word as u16 as i16 as i32 as u32)
    }
}

fn plan(st: &mut State, word: u32) {
    let regs = st.regs;
    let debug = msr::guest_debug_events(&st.s);
    let step = split::plan(word, &mut st.regs, debug);
    let p = match step {
        Step::Access(p) => p,
        Step::Done => {
            // Only a failing unaligned `stwcx.` (CR0) or an empty string.
            assert_eq!(st.regs.gpr, regs.gpr, "{word:#010x}: Done touched a GPR");
            assert_eq!((st.regs.xer, st.regs.ip), (regs.xer, regs.ip));
            return;
        }
        Step::Alignment { ea } => {
            assert_eq!(st.regs, regs);
            assert_eq!(ea, named_ea(word, &regs.gpr), "alignment: DEAR");
            assert_ne!(ea & 3, 0);
            return;
        }
        Step::Illegal | Step::Unable(_) => {
            assert_eq!(st.regs, regs, "{word:#010x}: {step:?} changed registers");
            return;
        }
    };
    assert_eq!(st.regs, regs, "planning an access changes no register");
    let ea = named_ea(word, &regs.gpr);
    let len = p.len as usize;
    assert!((1..=MAX_BYTES).contains(&len), "{word:#010x}: length {len}");
    match p.op {
        Op::Zero => {
            assert_eq!(
                (p.ea, p.len),
                (ea & !(DCACHE_LINE - 1), DCACHE_LINE),
                "dcbz"
            );
        }
        _ => assert_eq!(p.ea, ea, "{word:#010x}: the access starts at the EA"),
    }
    // The whole access lies in the instruction's range [EA, EA + length) (its line for
    // `dcbz`), modulo 2^32 as the hardware wraps.
    let expect_len = match p.op {
        Op::Transfer(ls) => {
            let Insn::LoadStore(d) = decode::decode(word) else {
                panic!("{word:#010x}: a transfer of a non-load/store")
            };
            assert_eq!(d, ls);
            ls.access_len()
        }
        Op::Zero => DCACHE_LINE,
        Op::Touch => 1,
        Op::Reserve { .. } | Op::Conditional { .. } => {
            assert_eq!(ea & 3, 0, "reservations are word-aligned");
            4
        }
        Op::StringLoad { .. } | Op::StringStore { .. } => {
            if matches!(decode::XO.get(word), xo31::LSWI | xo31::STSWI) {
                match decode::RB.get(word) {
                    0 => 32,
                    nb => nb,
                }
            } else {
                regs.xer & STRING_COUNT
            }
        }
    };
    assert_eq!(p.len, expect_len, "{word:#010x}: length");
    let access = if split::writes(p.op) {
        Access::Write
    } else {
        Access::Read
    };
    assert_eq!(p.access, access, "{word:#010x}: access kind");
    assert!(!(split::reads(p.op) && split::writes(p.op)));
    // The register transfers stay within the plan's bytes and touch no other state.
    let mut bytes = [0u8; MAX_BYTES];
    let bytes = &mut bytes[..len];
    split::store(p.op, &regs, &st.fpr, bytes);
    let mut r = regs;
    split::load(p.op, bytes, &mut r, &mut st.fpr);
    split::finish(&p, &mut r);
    assert_eq!(
        (r.cr, r.xer, r.ip, r.msr),
        (regs.cr, regs.xer, regs.ip, regs.msr)
    );
}

// ---------------------------------------------------------------------------------------
// Seeds

fn x_insn(w: &mut SeedWriter, template: u8) -> &mut SeedWriter {
    w.u8(op::INSN).u8(template)
}

/// A seed: `mtspr` then `mfspr` of the SPR numbers `sprs` with values in GPRs, MSR
/// traffic, returns and interrupts, timers, TLB writes, reads and searches, and split plans.
pub fn seed(variant: u8, sprs: core::ops::Range<u16>) -> Vec<u8> {
    let mut w = SeedWriter::default();
    w.u32(m::CE | m::EE | m::ME | if variant % 2 == 1 { m::IS } else { 0 });
    w.u8(op::GPR)
        .u8(3)
        .u32(0x1234_5678 ^ u32::from(variant) << 8);
    w.u8(op::GPR)
        .u8(4)
        .u32(0x8000_0000 | m::EE | m::PR | m::IS | m::DS);
    for n in sprs {
        x_insn(&mut w, tpl::MTSPR).u16(n).u8(3);
        x_insn(&mut w, tpl::MFSPR).u8(5).u16(n);
    }
    // MSR traffic: mtmsr of r4 (WE, PR, IS, DS, EE), wrtee, wrteei, mfmsr.
    x_insn(&mut w, tpl::MTMSR).u8(4);
    x_insn(&mut w, tpl::WRTEE).u8(3);
    x_insn(&mut w, tpl::WRTEEI).u8(1);
    x_insn(&mut w, tpl::MFMSR).u8(6);
    // Interrupts of each class, then the returns.
    for (vector, pc) in [
        (ivor::CRITICAL, 0x100u32),
        (ivor::MACHINE_CHECK, 0x200),
        (ivor::PROGRAM, 0x700),
    ] {
        w.u8(op::INTERRUPT).u8(vector as u8).u32(pc);
    }
    for k in 0..3u8 {
        x_insn(&mut w, tpl::RETURN).u8(k);
    }
    // Timers: TCR with every interrupt enable and auto-reload, DECAR, DEC, time passes.
    w.u8(op::GPR)
        .u8(7)
        .u32(0x0FC0_0000 | u32::from(variant & 3) << 24);
    x_insn(&mut w, tpl::MTSPR).u16(pspr::TCR as u16).u8(7);
    w.u8(op::GPR).u8(8).u32(0x1000);
    x_insn(&mut w, tpl::MTSPR).u16(pspr::DECAR as u16).u8(8);
    x_insn(&mut w, tpl::MTSPR).u16(pspr::DEC as u16).u8(8);
    w.u8(op::LINES).u8(variant & 7);
    for k in 0..4u32 {
        w.u8(op::TICK).u32(0x1_0000 << (4 * k));
        w.u8(op::DELIVER);
    }
    // The time base near its end: TBU = ~0, DEC, time passes.
    w.u8(op::GPR).u8(9).u32(u32::MAX);
    x_insn(&mut w, tpl::MTSPR).u16(pspr::TBU_W as u16).u8(9);
    x_insn(&mut w, tpl::MTSPR).u16(pspr::DEC as u16).u8(8);
    w.u8(op::TICK).u32(0x10);
    // TLB: three words of entry r10 from r11, read back, search.
    w.u8(op::GPR).u8(10).u32(u32::from(variant % 8));
    w.u8(op::FIELD)
        .u16(pspr::MMUCR as u16)
        .u32(u32::from(variant % 4));
    for (ws, value) in [
        (0u8, 0x0000_0210 | u32::from(variant) << 12),
        (1, 0x0000_1000),
        (2, 0x3F),
        (3, 0),
    ] {
        w.u8(op::GPR).u8(11).u32(value);
        x_insn(&mut w, tpl::TLBWE).u8(11).u8(10).u8(ws);
        x_insn(&mut w, tpl::TLBRE).u8(12).u8(10).u8(ws);
    }
    w.u8(op::GPR).u8(13).u32(u32::from(variant) << 12);
    x_insn(&mut w, tpl::TLBSX).u8(14).u8(0).u8(13).u8(1);
    // Split plans: lwz, stmw, lswx, dcbz, lwarx, stwcx. over r13.
    w.u8(op::XER).u32(0x2000_0000 | 13).u32(0);
    for word in [
        encode::lwz(5, 8, 13),
        encode::stw(5, -4, 13),
        (47 << 26) | (28 << 21) | (13 << 16) | 0x10,
        x_form(20, 13, 3, xo31::LSWX, false),
        x_form(0, 13, 3, xo31::DCBZ, false),
        x_form(5, 13, 3, xo31::LWARX, false),
        x_form(5, 0, 13, xo31::STWCX, true),
        x_form(6, 13, 9, xo31::STSWI, false),
    ] {
        // access_word() kind 3: any word.
        w.u8(op::SPLIT).u8(3).u32(word);
    }
    w.bytes
}

/// The seeds: every SPR number, 64 at a time, in varied states.
pub fn seeds() -> Vec<Vec<u8>> {
    (0..16u8)
        .map(|i| seed(i, u16::from(i) * 64..u16::from(i) * 64 + 64))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn fields_of_the_shared_helpers() {
        use super::*;
        assert_eq!(x_form(1, 2, 3, xo31::DCBZ, false) >> 26, opcd::X);
        let mut i = Input::new(&[tpl::MFSPR, 1, 0x01, 0x1F]);
        assert_eq!(insn_word(&mut i), encode::mfspr(1, 0x11F));
    }
}
