//! Virtualization ABI: vCPU threads, virtualization-fault messages, state transfer
//! masks, and the trace points that count VM exits (paper §3.1, §5 Table 1).
//!
//! A vCPU is a thread created by `ThreadControl` with [`tcflags::VCPU`] in a fresh
//! space: that space is the VM's guest-physical address space, paged by the VMM.
//! The vCPU runs the guest in user mode and translation space 1; the kernel emulates
//! the hot privileged instructions itself and sends everything else to the vCPU's
//! exception handler (the VMM) as a virtualization fault.

/// `ThreadControl` flags (r8).
pub mod tcflags {
    /// The new thread is a vCPU (requires a new space: `space_spec == dest`).
    pub const VCPU: u32 = 1 << 0;
    /// r10 holds a priority ceiling: for a new space, its ceiling (at most the ceiling of
    /// the space of the new thread's scheduler; without the flag it inherits that ceiling);
    /// for an existing thread, the new ceiling of its space (threads above it are lowered
    /// to it). See `docs/adr/0013-priorities.md`.
    pub const CEILING: u32 = 1 << 1;
    /// Every defined bit.
    pub const ALL: u32 = VCPU | CEILING;
}

/// `VcpuControl(dest, op, a, b)` operations (r4).
pub mod vcpuctl {
    /// Copy the vCPU's complete [`super::VcpuState`] to the caller's UTCB `vcpu` area.
    pub const GET_STATE: u32 = 0;
    /// Install the complete [`super::VcpuState`] from the caller's UTCB `vcpu` area.
    /// The vCPU must not be running (it is blocked in a fault or not started).
    pub const SET_STATE: u32 = 1;
    /// Set the state-transfer mask (r6) for fault class r5 ([`super::VirtFault`]).
    pub const SET_TRANSFER_MASK: u32 = 2;
    /// Raise (r5 = 1) or lower (r5 = 0) the vCPU's virtual external interrupt input.
    pub const SET_IRQ: u32 = 3;
    /// Write guest TLB entry r6 from UTCB MR1..MR3 (words 0..2) and MR4 (its TID), for
    /// setting up the guest's initial translation (ePAPR entry state).
    pub const SET_TLB: u32 = 4;
    /// Declare (r5 = 1) or undeclare (r5 = 0) the guest-physical pages [r6, r6 + r7)
    /// emulated device memory: guest loads and stores there become
    /// [`super::VirtFault::Mmio`] faults. The declaration lives in the VM space's page
    /// table (a device pte without a frame), so there is no limit on the number of
    /// regions; pages that are mapped (RAM) keep their mapping. Page-aligned, below
    /// 4 GiB (guest-physical addresses above 4 GiB are always device memory).
    pub const DECLARE_MMIO: u32 = 5;
    /// Turn the paravirtual interface ([`crate::pv`]) on (r5 = 1) or off (r5 = 0): with it
    /// on, a guest-supervisor `sc` with r0 = [`crate::pv::SC_MAGIC_R0`] is a hypercall the
    /// kernel answers; off (a new vCPU's state), every `sc` is the guest's system call and
    /// the magic page is unmapped.
    pub const SET_PV: u32 = 6;
}

/// `TraceControl(op, space_spec)` operations (r3); `space_spec` nil = all VMs.
pub mod tracectl {
    /// Copy the counters (`NUM_TRACEPOINTS` × [`super::TraceCounter`]) to the UTCB's
    /// `trace` area.
    pub const READ: u32 = 0;
    /// Reset the counters.
    pub const RESET: u32 = 1;
}

/// What a virtualization fault message reports (low nibble of its label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum VirtFault {
    /// A privileged or unknown instruction the kernel does not emulate (mfdcr/mtdcr,
    /// unimplemented SPRs, illegal instructions); [`VirtFaultMsg::insn`] is the word.
    Instruction = 0,
    /// A guest load/store to declared device memory ([`vcpuctl::DECLARE_MMIO`]) or
    /// above 4 GiB; [`VirtFaultMsg::gpa`] is the full guest-physical address.
    Mmio = 1,
    /// The guest set MSR[WE]: it waits for an interrupt.
    Idle = 2,
    /// The guest requested a reset (DBCR0[RST]) or stopped in a way the kernel cannot
    /// continue (for example a critical-class exception with no handler state).
    Halt = 3,
}

pub const NUM_FAULT_CLASSES: usize = 4;

impl VirtFault {
    pub const fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Instruction,
            1 => Self::Mmio,
            2 => Self::Idle,
            3 => Self::Halt,
            _ => return None,
        })
    }
}

/// Transfer-mask bits: which parts of the vCPU state ride on a fault message (and
/// are installed from the reply). The fixed header ([`VirtFaultMsg`]) is always sent.
pub mod xfer {
    /// r0..r31 ([`super::XferRegs::gpr`]).
    pub const GPRS: u32 = 1 << 0;
    /// cr, lr, ctr, xer ([`super::XferRegs::special`]).
    pub const SPECIAL: u32 = 1 << 1;
    /// Guest TLB context ([`super::XferTlb`]): guest PID, MMUCR, and the index of the
    /// guest TLB entry translating the faulting pc (`u32::MAX` if none).
    pub const TLB: u32 = 1 << 2;
    pub const DEFAULT: u32 = GPRS | SPECIAL;
    /// Every bit a transfer mask may have.
    /// FPR0..FPR31 and the FPSCR, in the receiver's [`crate::Utcb::fp`] (they do not fit
    /// the message registers). The kernel adds this bit on its own to an `Mmio` fault
    /// whose instruction is an FP load or store, so a VMM can emulate it.
    pub const FPRS: u32 = 1 << 3;
    pub const ALL: u32 = GPRS | SPECIAL | TLB | FPRS;
}

/// The wire layout of virtualization-fault messages and replies. Only
/// [`VirtFaultMsg`], [`XferRegs`], [`XferTlb`] and [`FaultReply`] read and write it; the
/// kernel and the VMM use those types. (ktest checks the layout word by word.)
///
/// Fault message, tag label [`crate::label::VIRT_FAULT`] | class:
///
/// | MR    | contents                                                              |
/// |-------|-----------------------------------------------------------------------|
/// | 1     | guest pc of the faulting instruction                                  |
/// | 2     | the instruction word                                                  |
/// | 3     | guest-physical address bits 0..31 (Mmio; else 0)                      |
/// | 4     | guest MSR (virtual)                                                   |
/// | 5     | bits 0..7: the transfer mask; bits 8..31: guest-physical bits 32..55  |
/// | 6     | value of the GPR named by the instruction's bits 6:10 (RS/RT)         |
/// | 8..39 | r0..r31 (`xfer::GPRS`; zero under `SPECIAL`/`TLB` alone)              |
/// | 40..43| cr, lr, ctr, xer (`xfer::SPECIAL`)                                    |
/// | 44..46| guest PID, MMUCR, guest TLB index of the pc (`xfer::TLB`)             |
///
/// With `xfer::FPRS` the FP registers and FPSCR are in the receiver's `Utcb::fp`.
///
/// Reply: MR1 = new pc, MR2 = flags, MR3/MR4 = GPR index and value (`REPLY_SET_GPR`);
/// GPRs/SPECIAL at the message's MRs when the reply's tag has enough words (the mask
/// of the request applies); FPRs from the replier's `Utcb::fp` with `REPLY_FPRS`.
pub mod vfault {
    pub const PC: usize = 1;
    pub const INSN: usize = 2;
    pub const GPA: usize = 3;
    pub const MSR: usize = 4;
    /// Transfer mask (low 8 bits) and guest-physical address bits 32..55.
    pub const MASK: usize = 5;
    pub const MASK_BITS: u32 = 0xff;
    pub const GPA_HI_SHIFT: u32 = 8;
    pub const RS_VALUE: usize = 6;
    pub const GPR0: usize = 8;
    pub const CR: usize = 40;
    pub const WORDS: u32 = 43;
    pub const PID: usize = 44;
    pub const MMUCR: usize = 45;
    pub const TLB_INDEX: usize = 46;
    pub const WORDS_TLB: u32 = 46;
    /// Words of a message without register transfer (MR1..MR6).
    pub const SHORT_WORDS: u32 = 6;

    pub const REPLY_PC: usize = 1;
    pub const REPLY_FLAGS: usize = 2;
    /// Reply flag: raise the virtual external interrupt input.
    pub const REPLY_IRQ_RAISE: u32 = 1 << 0;
    /// Reply flag: lower it (wins over raise).
    pub const REPLY_IRQ_LOWER: u32 = 1 << 1;
    /// Reply flag: inject a machine check into the guest at pc.
    pub const REPLY_MACHINE_CHECK: u32 = 1 << 2;
    /// Reply flag: inject a data storage exception (DEAR = the faulting effective
    /// address, ESR[ST] for stores).
    pub const REPLY_DSI: u32 = 1 << 3;
    /// Reply flag: inject a program exception (illegal instruction).
    pub const REPLY_PROGRAM: u32 = 1 << 4;
    /// Reply flag: stop the vCPU.
    pub const REPLY_STOP: u32 = 1 << 5;
    /// Reply flags: raise / lower the virtual critical interrupt input.
    pub const REPLY_CRIT_RAISE: u32 = 1 << 6;
    pub const REPLY_CRIT_LOWER: u32 = 1 << 7;
    /// Reply flag: set GPR MR3 (0..31) to MR4 (a load or mfdcr result) without
    /// transferring the register file.
    pub const REPLY_SET_GPR: u32 = 1 << 8;
    /// Reply flag: install FPR0..FPR31 and the FPSCR from the replier's
    /// [`crate::Utcb::fp`] (only after a fault sent with `xfer::FPRS`).
    pub const REPLY_FPRS: u32 = 1 << 9;
    pub const REPLY_GPR_INDEX: usize = 3;
    pub const REPLY_GPR_VALUE: usize = 4;
}

/// Guest-physical address bits a fault message carries (MR3 and 24 bits of MR5); the
/// 440's physical addresses have 36 (ERPN 4 bits + 32).
pub const GPA_BITS: u32 = 56;
const _: () = assert!(GPA_BITS >= 36);

/// The fixed part of a virtualization fault message (MR0..MR6, sent in registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtFaultMsg {
    pub class: VirtFault,
    /// Guest pc of the faulting instruction (for `Idle`: where the guest resumes, the
    /// instruction after the `mtmsr`/`rfi` that asked to wait).
    pub pc: u32,
    /// The instruction word (0 if it could not be fetched).
    pub insn: u32,
    /// Guest-physical address of an `Mmio` access (below 2^[`GPA_BITS`]); for a `Halt`
    /// on an exception the kernel cannot deliver, the exception vector; for an
    /// `Instruction` fault of `mfdcrx`/`mtdcrx`, the value of RA (the DCR number); else 0.
    pub gpa: u64,
    /// The guest's (virtual) MSR.
    pub msr: u32,
    /// The transfer mask ([`xfer`]) this message was sent with.
    pub mask: u32,
    /// The value of the GPR named by the instruction's bits 6:10 (RS/RT), so a VMM
    /// emulating a store or mtdcr needs no register transfer at all.
    pub rs_value: u32,
}

impl VirtFaultMsg {
    /// Untyped words of a message sent with transfer mask `mask`.
    pub const fn words(mask: u32) -> u32 {
        if mask & xfer::TLB != 0 {
            vfault::WORDS_TLB
        } else if mask & (xfer::GPRS | xfer::SPECIAL) != 0 {
            vfault::WORDS
        } else {
            vfault::SHORT_WORDS
        }
    }

    /// The tag and MR1..MR6. Address bits from [`GPA_BITS`] up and mask bits above
    /// [`xfer::ALL`] are dropped.
    #[inline(always)]
    pub const fn encode(&self) -> (crate::MsgTag, [u32; 6]) {
        let tag = crate::MsgTag::new(
            crate::label::VIRT_FAULT | self.class as u16,
            Self::words(self.mask & xfer::ALL),
            0,
        );
        let hi = ((self.gpa >> 32) as u32) << vfault::GPA_HI_SHIFT;
        let mask = self.mask & xfer::ALL;
        (
            tag,
            [
                self.pc,
                self.insn,
                self.gpa as u32,
                self.msr,
                hi | mask,
                self.rs_value,
            ],
        )
    }

    /// Parses a received message (tag and MR1..MR6); `None` if it is not a
    /// virtualization fault of a known class.
    #[inline(always)]
    pub const fn decode(tag: crate::MsgTag, mr: &[u32; 6]) -> Option<VirtFaultMsg> {
        if !crate::label::is_virt_fault(tag.label()) {
            return None;
        }
        let Some(class) = VirtFault::from_raw((tag.label() & 0xf) as u32) else {
            return None;
        };
        let w5 = mr[vfault::MASK - 1];
        Some(VirtFaultMsg {
            class,
            pc: mr[vfault::PC - 1],
            insn: mr[vfault::INSN - 1],
            gpa: ((w5 >> vfault::GPA_HI_SHIFT) as u64) << 32 | mr[vfault::GPA - 1] as u64,
            msr: mr[vfault::MSR - 1],
            mask: w5 & vfault::MASK_BITS,
            rs_value: mr[vfault::RS_VALUE - 1],
        })
    }
}

/// The register file parts of a fault message or reply that ride in the UTCB's
/// message registers (MR8 and up), under [`xfer::GPRS`] and [`xfer::SPECIAL`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XferRegs {
    pub gpr: [u32; 32],
    /// cr, lr, ctr, xer.
    pub special: [u32; 4],
}

impl XferRegs {
    /// Writes the parts `mask` selects into `mr` (UTCB message registers); the rest of
    /// MR8..MR43 becomes 0. Nothing is written when `mask` has neither part.
    pub fn encode(&self, mask: u32, mr: &mut [u32; crate::NUM_MRS]) {
        if mask & (xfer::GPRS | xfer::SPECIAL | xfer::TLB) == 0 {
            return;
        }
        let g = &mut mr[vfault::GPR0..vfault::GPR0 + 32];
        if mask & xfer::GPRS != 0 {
            g.copy_from_slice(&self.gpr);
        } else {
            g.fill(0);
        }
        let s = &mut mr[vfault::CR..vfault::CR + 4];
        if mask & xfer::SPECIAL != 0 {
            s.copy_from_slice(&self.special);
        } else {
            s.fill(0);
        }
    }

    /// The GPRs of a message or reply of `words` untyped words sent under `mask`.
    #[inline]
    pub fn decode_gprs(mask: u32, words: usize, mr: &[u32; crate::NUM_MRS]) -> Option<&[u32; 32]> {
        if mask & xfer::GPRS == 0 || words < vfault::GPR0 + 31 {
            return None;
        }
        mr[vfault::GPR0..vfault::GPR0 + 32].try_into().ok()
    }

    /// cr, lr, ctr, xer of a message or reply of `words` untyped words sent under `mask`.
    pub fn decode_special(mask: u32, words: usize, mr: &[u32; crate::NUM_MRS]) -> Option<[u32; 4]> {
        (mask & xfer::SPECIAL != 0 && words >= vfault::CR + 3).then(|| {
            [
                mr[vfault::CR],
                mr[vfault::CR + 1],
                mr[vfault::CR + 2],
                mr[vfault::CR + 3],
            ]
        })
    }
}

/// Guest TLB context of a fault message ([`xfer::TLB`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XferTlb {
    pub pid: u32,
    pub mmucr: u32,
    /// Index of the guest TLB entry translating the faulting pc, `u32::MAX` if none.
    pub tlb_index: u32,
}

impl XferTlb {
    pub fn encode(&self, mr: &mut [u32; crate::NUM_MRS]) {
        mr[vfault::PID] = self.pid;
        mr[vfault::MMUCR] = self.mmucr;
        mr[vfault::TLB_INDEX] = self.tlb_index;
    }

    /// The TLB context of a message of `words` untyped words sent under `mask`.
    pub fn decode(mask: u32, words: usize, mr: &[u32; crate::NUM_MRS]) -> Option<XferTlb> {
        (mask & xfer::TLB != 0 && words >= vfault::TLB_INDEX).then(|| XferTlb {
            pid: mr[vfault::PID],
            mmucr: mr[vfault::MMUCR],
            tlb_index: mr[vfault::TLB_INDEX],
        })
    }
}

/// An exception a [`FaultReply`] injects into the guest at the reply's pc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// Data storage (DEAR = the faulting effective address, ESR[ST] for stores).
    Dsi,
    /// Program (illegal instruction).
    Program,
    MachineCheck,
}

/// The VMM's answer to a virtualization fault, built with
/// `FaultReply::resume(pc).set_gpr(r, v).irq(level)...` and sent as
/// [`FaultReply::encode`]; the kernel reads it back with [`FaultReply::decode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultReply {
    /// Where the vCPU resumes (`None`, only from an empty reply: where it stopped).
    pub pc: Option<u32>,
    /// New level of the virtual external interrupt input (`None`: unchanged).
    pub irq: Option<bool>,
    /// New level of the virtual critical interrupt input (`None`: unchanged).
    pub crit: Option<bool>,
    pub inject: Option<Inject>,
    /// Stop the vCPU instead of resuming it.
    pub stop: bool,
    /// Install the FP state from the replier's [`crate::Utcb::fp`] (after a fault that
    /// carried it, [`xfer::FPRS`]).
    pub fprs: bool,
    /// Set GPR `.0` (0..31) to `.1` without transferring the register file.
    pub set_gpr: Option<(u8, u32)>,
    /// The reply carries a register file ([`XferRegs`], in the UTCB's message
    /// registers): its GPRs are installed under a request mask with [`xfer::GPRS`],
    /// cr/lr/ctr/xer under [`xfer::SPECIAL`] ([`XferRegs::decode_gprs`] and
    /// [`XferRegs::decode_special`] with the reply's word count read them).
    pub regs: bool,
}

impl FaultReply {
    /// Resume the vCPU at `pc`.
    pub const fn resume(pc: u32) -> FaultReply {
        FaultReply {
            pc: Some(pc),
            irq: None,
            crit: None,
            inject: None,
            stop: false,
            fprs: false,
            set_gpr: None,
            regs: false,
        }
    }

    /// Also set GPR `r` (0..31) to `value` (a load or mfdcr result).
    pub const fn set_gpr(mut self, r: u8, value: u32) -> FaultReply {
        self.set_gpr = Some((r & 31, value));
        self
    }

    /// Also set the virtual external interrupt input to `level`.
    pub const fn irq(mut self, level: bool) -> FaultReply {
        self.irq = Some(level);
        self
    }

    /// Also set the virtual critical interrupt input to `level`.
    pub const fn crit(mut self, level: bool) -> FaultReply {
        self.crit = Some(level);
        self
    }

    /// Also inject exception `e` at the reply's pc.
    pub const fn inject(mut self, e: Inject) -> FaultReply {
        self.inject = Some(e);
        self
    }

    /// Also install the FP state in this thread's [`crate::Utcb::fp`].
    pub const fn with_fprs(mut self) -> FaultReply {
        self.fprs = true;
        self
    }

    /// Stop the vCPU.
    pub const fn stop(mut self) -> FaultReply {
        self.stop = true;
        self
    }

    /// Also install the register file `encode` is given (the parts the request's
    /// transfer mask selects).
    pub const fn with_regs(mut self) -> FaultReply {
        self.regs = true;
        self
    }

    /// The tag and MR1..MR6. With [`Self::regs`], `regs` (all zero if `None`) is written
    /// to `long` (the sender's UTCB message registers). A reply without pc is empty (the
    /// vCPU resumes where it stopped and nothing else changes).
    #[inline]
    pub fn encode(
        &self,
        regs: Option<&XferRegs>,
        long: &mut [u32; crate::NUM_MRS],
    ) -> (crate::MsgTag, [u32; 6]) {
        let mut mr = [0u32; 6];
        let Some(pc) = self.pc else {
            return (crate::MsgTag::new(0, 0, 0), mr);
        };
        mr[vfault::REPLY_PC - 1] = pc;
        let mut flags = match self.irq {
            Some(true) => vfault::REPLY_IRQ_RAISE,
            Some(false) => vfault::REPLY_IRQ_LOWER,
            None => 0,
        };
        flags |= match self.crit {
            Some(true) => vfault::REPLY_CRIT_RAISE,
            Some(false) => vfault::REPLY_CRIT_LOWER,
            None => 0,
        };
        flags |= match self.inject {
            Some(Inject::Dsi) => vfault::REPLY_DSI,
            Some(Inject::Program) => vfault::REPLY_PROGRAM,
            Some(Inject::MachineCheck) => vfault::REPLY_MACHINE_CHECK,
            None => 0,
        };
        if self.stop {
            flags |= vfault::REPLY_STOP;
        }
        if self.fprs {
            flags |= vfault::REPLY_FPRS;
        }
        let mut words = vfault::REPLY_FLAGS as u32;
        if let Some((r, v)) = self.set_gpr {
            flags |= vfault::REPLY_SET_GPR;
            mr[vfault::REPLY_GPR_INDEX - 1] = r as u32 & 31;
            mr[vfault::REPLY_GPR_VALUE - 1] = v;
            words = vfault::REPLY_GPR_VALUE as u32;
        }
        mr[vfault::REPLY_FLAGS - 1] = flags;
        if self.regs {
            regs.copied()
                .unwrap_or_default()
                .encode(xfer::GPRS | xfer::SPECIAL, long);
            words = vfault::WORDS;
        }
        (crate::MsgTag::new(0, words, 0), mr)
    }

    /// Reads a reply (tag and MR1..MR6). Unknown flags are ignored; a register file is
    /// reported only if the tag's word count covers it.
    #[inline(always)]
    pub fn decode(tag: crate::MsgTag, mr: &[u32; 6]) -> FaultReply {
        let u = tag.untyped();
        let flags = if u >= vfault::REPLY_FLAGS {
            mr[vfault::REPLY_FLAGS - 1]
        } else {
            0
        };
        let level = |raise: u32, lower: u32| {
            if flags & lower != 0 {
                Some(false)
            } else if flags & raise != 0 {
                Some(true)
            } else {
                None
            }
        };
        let inject = if flags & vfault::REPLY_DSI != 0 {
            Some(Inject::Dsi)
        } else if flags & vfault::REPLY_PROGRAM != 0 {
            Some(Inject::Program)
        } else if flags & vfault::REPLY_MACHINE_CHECK != 0 {
            Some(Inject::MachineCheck)
        } else {
            None
        };
        FaultReply {
            pc: (u >= vfault::REPLY_PC).then_some(mr[vfault::REPLY_PC - 1]),
            irq: level(vfault::REPLY_IRQ_RAISE, vfault::REPLY_IRQ_LOWER),
            crit: level(vfault::REPLY_CRIT_RAISE, vfault::REPLY_CRIT_LOWER),
            inject,
            stop: flags & vfault::REPLY_STOP != 0,
            fprs: flags & vfault::REPLY_FPRS != 0,
            set_gpr: (flags & vfault::REPLY_SET_GPR != 0 && u >= vfault::REPLY_GPR_VALUE).then(
                || {
                    (
                        (mr[vfault::REPLY_GPR_INDEX - 1] & 31) as u8,
                        mr[vfault::REPLY_GPR_VALUE - 1],
                    )
                },
            ),
            regs: u >= vfault::WORDS as usize,
        }
    }
}

/// The complete architectural state of a vCPU as the guest sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct VcpuState {
    pub gpr: [u32; 32],
    pub cr: u32,
    pub lr: u32,
    pub ctr: u32,
    pub xer: u32,
    pub pc: u32,
    /// The guest's (virtual) MSR.
    pub msr: u32,
    pub srr0: u32,
    pub srr1: u32,
    pub csrr0: u32,
    pub csrr1: u32,
    pub mcsrr0: u32,
    pub mcsrr1: u32,
    pub sprg: [u32; 8],
    pub usprg0: u32,
    pub esr: u32,
    pub dear: u32,
    pub mcsr: u32,
    pub ivpr: u32,
    pub ivor: [u32; 16],
    pub pid: u32,
    pub mmucr: u32,
    pub dec: u32,
    pub decar: u32,
    pub tcr: u32,
    pub tsr: u32,
    pub dbcr0: u32,
    pub dbcr1: u32,
    pub dbcr2: u32,
    pub dbsr: u32,
    pub ccr0: u32,
    pub ccr1: u32,
    /// Virtual external interrupt input (1 = asserted).
    pub irq_line: u32,
    /// Virtual critical interrupt input (1 = asserted).
    pub crit_line: u32,
    pub iac: [u32; 4],
    pub dac: [u32; 2],
    pub dvc: [u32; 2],
}

/// Words of [`VcpuState`] (it travels in the UTCB's `vcpu` area).
pub const VCPU_STATE_WORDS: usize = core::mem::size_of::<VcpuState>() / 4;

/// One trace point: how often an exit class happened and what it cost in total, in
/// timebase ticks. An exit's cost runs from the first instructions of the kernel's
/// interrupt vector to the return to the guest (the `rfi`), including the VMM's time and
/// any other thread's that ran before the vCPU resumed; [`TracePoint::GuestRun`] counts
/// the time in between (docs/adr/0023-exit-accounting.md). Only count and sum are kept
/// (the hot paths update them in a handful of instructions); the sum is exact, so
/// `sum / count` is the average and the sum over all classes adds up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TraceCounter {
    pub count: u32,
    /// Sum of costs, low and high word.
    pub sum_lo: u32,
    pub sum_hi: u32,
}

impl TraceCounter {
    pub const ZERO: TraceCounter = TraceCounter {
        count: 0,
        sum_lo: 0,
        sum_hi: 0,
    };

    /// The total cost in ticks.
    pub const fn sum(&self) -> u64 {
        ((self.sum_hi as u64) << 32) | self.sum_lo as u64
    }

    /// Records one event that cost `ticks`.
    #[inline(always)]
    pub fn add(&mut self, ticks: u32) {
        self.count = self.count.wrapping_add(1);
        let (lo, carry) = self.sum_lo.overflowing_add(ticks);
        self.sum_lo = lo;
        self.sum_hi = self.sum_hi.wrapping_add(carry as u32);
    }

    /// Adds the events of `b` (for views over several vCPUs).
    pub fn merge(&mut self, b: &TraceCounter) {
        self.count = self.count.wrapping_add(b.count);
        let (lo, carry) = self.sum_lo.overflowing_add(b.sum_lo);
        self.sum_lo = lo;
        self.sum_hi = self
            .sum_hi
            .wrapping_add(b.sum_hi)
            .wrapping_add(carry as u32);
    }
}

/// Trace points, under the paper's names where it has them (Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum TracePoint {
    /// Virtualization fault IPC to the VMM (the paper counts IPCs as SYSCALL_IPC).
    SyscallIpc = 0,
    /// Virtual decrementer interrupt injected.
    ExceptDecr = 1,
    EmulMtmsr = 2,
    EmulWrtee = 3,
    EmulMfmsr = 4,
    EmulWrteei = 5,
    /// Guest instruction TLB miss handled in the kernel (shadow fill or injection).
    ItlbMiss = 6,
    EmulRfi = 7,
    DtlbMiss = 8,
    EmulTlbwe = 9,
    EmulMfspr = 10,
    EmulMtspr = 11,
    EmulTlbre = 12,
    EmulTlbsx = 13,
    /// rfci / rfmci.
    EmulRfciMci = 14,
    /// tlbsync, iccci, dccci, dcbi, msync-class cache/TLB maintenance.
    EmulCacheTlbOp = 15,
    /// Guest system call reflected into the guest.
    ExceptSyscall = 16,
    /// Other guest exceptions reflected (program, alignment, FP unavailable, DSI, ISI).
    ExceptReflect = 17,
    /// Virtual external interrupt injected.
    ExceptExternal = 18,
    /// Second-stage (guest-physical) page fault sent to the VMM.
    PageFaultIpc = 19,
    /// Guest idle (MSR[WE]) exit.
    GuestIdle = 20,
    /// Virtual fixed-interval timer or watchdog interrupt injected.
    ExceptFitWdt = 21,
    /// The host's timer tick taken while the guest ran (the kernel's scheduler tick).
    HostTick = 22,
    /// A host device interrupt taken while the guest ran.
    HostIrq = 23,
    /// A guest exception the kernel handles itself without reflecting it or asking the
    /// VMM: FP unavailable with the guest's MSR[FP] set (the lazy FPU switch), the
    /// single step after an emulated `lwarx`.
    KernelInternal = 24,
    /// Not an exit: the time the vCPU spent in guest mode, from a return to the guest to
    /// the next kernel entry (count = entries into the guest). Exit sums leave it out.
    GuestRun = 25,
}

pub const NUM_TRACEPOINTS: usize = 26;

impl TracePoint {
    pub const ALL: [TracePoint; NUM_TRACEPOINTS] = [
        Self::SyscallIpc,
        Self::ExceptDecr,
        Self::EmulMtmsr,
        Self::EmulWrtee,
        Self::EmulMfmsr,
        Self::EmulWrteei,
        Self::ItlbMiss,
        Self::EmulRfi,
        Self::DtlbMiss,
        Self::EmulTlbwe,
        Self::EmulMfspr,
        Self::EmulMtspr,
        Self::EmulTlbre,
        Self::EmulTlbsx,
        Self::EmulRfciMci,
        Self::EmulCacheTlbOp,
        Self::ExceptSyscall,
        Self::ExceptReflect,
        Self::ExceptExternal,
        Self::PageFaultIpc,
        Self::GuestIdle,
        Self::ExceptFitWdt,
        Self::HostTick,
        Self::HostIrq,
        Self::KernelInternal,
        Self::GuestRun,
    ];

    /// The name in the paper's style (Table 1).
    pub const fn name(self) -> &'static str {
        match self {
            Self::SyscallIpc => "SYSCALL_IPC",
            Self::ExceptDecr => "EXCEPT_DECR",
            Self::EmulMtmsr => "EMUL_MTMSR",
            Self::EmulWrtee => "EMUL_WRTEE",
            Self::EmulMfmsr => "EMUL_MFMSR",
            Self::EmulWrteei => "EMUL_WRTEEI",
            Self::ItlbMiss => "ITLB_MISS",
            Self::EmulRfi => "EMUL_RFI",
            Self::DtlbMiss => "DTLB_MISS",
            Self::EmulTlbwe => "EMUL_TLBWE",
            Self::EmulMfspr => "EMUL_MFSPR",
            Self::EmulMtspr => "EMUL_MTSPR",
            Self::EmulTlbre => "EMUL_TLBRE",
            Self::EmulTlbsx => "EMUL_TLBSX",
            Self::EmulRfciMci => "EMUL_RFCI_RFMCI",
            Self::EmulCacheTlbOp => "EMUL_CACHE_TLB_OP",
            Self::ExceptSyscall => "EXCEPT_SYSCALL",
            Self::ExceptReflect => "EXCEPT_REFLECT",
            Self::ExceptExternal => "EXCEPT_EXTERNAL",
            Self::PageFaultIpc => "PAGEFAULT_IPC",
            Self::GuestIdle => "GUEST_IDLE",
            Self::ExceptFitWdt => "EXCEPT_FIT_WDT",
            Self::HostTick => "HOST_TICK",
            Self::HostIrq => "HOST_IRQ",
            Self::KernelInternal => "KERNEL_INTERNAL",
            Self::GuestRun => "GUEST_RUN",
        }
    }

    /// Whether this point counts exits (all but [`TracePoint::GuestRun`]).
    pub const fn is_exit(self) -> bool {
        !matches!(self, Self::GuestRun)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{label, MsgTag, NUM_MRS};
    use proptest::prelude::*;

    fn class() -> impl Strategy<Value = VirtFault> {
        (0u32..NUM_FAULT_CLASSES as u32).prop_map(|c| VirtFault::from_raw(c).unwrap())
    }

    fn fault_msg() -> impl Strategy<Value = VirtFaultMsg> {
        (
            class(),
            any::<u32>(),
            any::<u32>(),
            0u64..1 << GPA_BITS,
            any::<u32>(),
            0..=xfer::ALL,
            any::<u32>(),
        )
            .prop_map(|(class, pc, insn, gpa, msr, mask, rs_value)| VirtFaultMsg {
                class,
                pc,
                insn,
                gpa,
                msr,
                mask,
                rs_value,
            })
    }

    fn inject() -> impl Strategy<Value = Option<Inject>> {
        prop_oneof![
            Just(None),
            Just(Some(Inject::Dsi)),
            Just(Some(Inject::Program)),
            Just(Some(Inject::MachineCheck))
        ]
    }

    fn reply() -> impl Strategy<Value = FaultReply> {
        (
            any::<u32>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            inject(),
            any::<bool>(),
            any::<Option<(u8, u32)>>(),
            any::<(bool, bool)>(),
        )
            .prop_map(
                |(pc, irq, crit, inject, stop, set_gpr, (regs, fprs))| FaultReply {
                    pc: Some(pc),
                    irq,
                    crit,
                    inject,
                    stop,
                    set_gpr: set_gpr.map(|(r, v)| (r & 31, v)),
                    regs,
                    fprs,
                },
            )
    }

    proptest! {
        #[test]
        fn fault_message_round_trips(m in fault_msg()) {
            let (tag, mr) = m.encode();
            prop_assert_eq!(tag.untyped() as u32, VirtFaultMsg::words(m.mask));
            prop_assert!(tag.validate().is_ok());
            prop_assert_eq!(VirtFaultMsg::decode(tag, &mr), Some(m));
        }

        #[test]
        fn fault_registers_round_trip(mask in 0..=xfer::ALL, gpr in any::<[u32; 32]>(), special in any::<[u32; 4]>(),
                                      tlb in any::<(u32, u32, u32)>()) {
            let mut mr = [0xdead_beef; NUM_MRS];
            let regs = XferRegs { gpr, special };
            let t = XferTlb { pid: tlb.0, mmucr: tlb.1, tlb_index: tlb.2 };
            regs.encode(mask, &mut mr);
            if mask & xfer::TLB != 0 {
                t.encode(&mut mr);
            }
            let words = VirtFaultMsg::words(mask) as usize;
            prop_assert_eq!(XferRegs::decode_gprs(mask, words, &mr), (mask & xfer::GPRS != 0).then_some(&gpr));
            prop_assert_eq!(XferRegs::decode_special(mask, words, &mr), (mask & xfer::SPECIAL != 0).then_some(special));
            prop_assert_eq!(XferTlb::decode(mask, words, &mr), (mask & xfer::TLB != 0).then_some(t));
        }

        #[test]
        fn reply_round_trips(r in reply(), gpr in any::<[u32; 32]>(), special in any::<[u32; 4]>()) {
            let mut long = [0; NUM_MRS];
            let regs = XferRegs { gpr, special };
            let (tag, mr) = r.encode(Some(&regs), &mut long);
            prop_assert!(tag.validate().is_ok());
            prop_assert_eq!(FaultReply::decode(tag, &mr), r);
            // The request's mask decides which register parts the kernel installs.
            for mask in 0..=xfer::ALL {
                let g = XferRegs::decode_gprs(mask, tag.untyped(), &long);
                prop_assert_eq!(g, (r.regs && mask & xfer::GPRS != 0).then_some(&gpr));
                let s = XferRegs::decode_special(mask, tag.untyped(), &long);
                prop_assert_eq!(s, (r.regs && mask & xfer::SPECIAL != 0).then_some(special));
            }
        }

        /// Whatever words a (possibly hostile) VMM sends, decoding never panics and
        /// names a register 0..31.
        #[test]
        fn any_reply_decodes(tag in any::<u32>(), mr in any::<[u32; 6]>(), long in proptest::collection::vec(any::<u32>(), NUM_MRS), mask in any::<u32>()) {
            let long: [u32; NUM_MRS] = long.try_into().unwrap();
            let r = FaultReply::decode(MsgTag(tag), &mr);
            prop_assert!(r.set_gpr.is_none_or(|(i, _)| i < 32));
            let _ = (XferRegs::decode_gprs(mask, MsgTag(tag).untyped(), &long), XferRegs::decode_special(mask, MsgTag(tag).untyped(), &long));
        }

        #[test]
        fn any_message_decodes(tag in any::<u32>(), mr in any::<[u32; 6]>()) {
            if let Some(m) = VirtFaultMsg::decode(MsgTag(tag), &mr) {
                prop_assert!(label::is_virt_fault(MsgTag(tag).label()));
                prop_assert!(m.gpa < 1 << GPA_BITS);
                prop_assert!(m.mask <= vfault::MASK_BITS);
            }
        }
    }

    /// BG/P's devices sit above 4 GiB: the address survives the message.
    #[test]
    fn high_device_address_survives() {
        let m = VirtFaultMsg {
            class: VirtFault::Mmio,
            pc: 0x100,
            insn: 0x8003_0000,
            gpa: 0x7_3000_0010,
            msr: 0,
            mask: 0,
            rs_value: 0,
        };
        let (tag, mr) = m.encode();
        assert_eq!(tag.untyped(), vfault::SHORT_WORDS as usize);
        assert_eq!(VirtFaultMsg::decode(tag, &mr).unwrap().gpa, 0x7_3000_0010);
    }

    /// An empty reply resumes where the vCPU stopped and changes nothing else.
    #[test]
    fn empty_reply() {
        let r = FaultReply::default();
        let (tag, mr) = r.encode(None, &mut [0; NUM_MRS]);
        assert_eq!(tag.untyped(), 0);
        assert_eq!(FaultReply::decode(tag, &mr), r);
    }

    /// A device load result needs four words and no register file.
    #[test]
    fn set_gpr_reply_is_short() {
        let mut long = [0; NUM_MRS];
        let (tag, mr) = FaultReply::resume(0x104)
            .set_gpr(5, 0x41)
            .irq(false)
            .encode(None, &mut long);
        assert_eq!(tag.untyped(), 4);
        assert_eq!(
            mr[..4],
            [
                0x104,
                vfault::REPLY_SET_GPR | vfault::REPLY_IRQ_LOWER,
                5,
                0x41
            ]
        );
        assert_eq!(long, [0; NUM_MRS]);
    }

    /// `ALL` lists every point once, at its own index, under distinct names; only
    /// GUEST_RUN is not an exit.
    #[test]
    fn trace_points_are_listed_once() {
        for (i, tp) in TracePoint::ALL.iter().enumerate() {
            assert_eq!(*tp as usize, i);
            assert_eq!(tp.is_exit(), *tp != TracePoint::GuestRun);
            for other in &TracePoint::ALL[..i] {
                assert_ne!(tp.name(), other.name());
            }
        }
    }

    proptest! {
        /// The 64-bit sum is exact whatever the order of adds and merges.
        #[test]
        fn trace_counter_sums_are_exact(ticks in proptest::collection::vec(any::<u32>(), 0..64), split in 0usize..64) {
            let split = split.min(ticks.len());
            let (mut a, mut b, mut all) = (TraceCounter::ZERO, TraceCounter::ZERO, TraceCounter::ZERO);
            for &t in &ticks[..split] {
                a.add(t);
                all.add(t);
            }
            for &t in &ticks[split..] {
                b.add(t);
                all.add(t);
            }
            a.merge(&b);
            prop_assert_eq!(a, all);
            prop_assert_eq!(all.count as usize, ticks.len());
            prop_assert_eq!(all.sum(), ticks.iter().map(|&t| t as u64).sum::<u64>());
        }
    }
}
