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
    /// Declare guest-physical range [r6, r6 + r7) device memory (slot r5 % 4): guest
    /// accesses there become `VirtFault::Mmio` messages. Size 0 clears the slot.
    pub const SET_MMIO: u32 = 5;
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
    /// unimplemented SPRs, illegal instructions). MR2 holds the instruction word.
    Instruction = 0,
    /// A guest load/store to guest-physical memory the VMM has not mapped (device
    /// regions): MR3 = guest-physical address (low word), MR4 = high bits.
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
/// are installed from the reply). The fixed header (pc, instruction, msr, fault
/// address) is always sent.
pub mod xfer {
    /// r0..r31 in MR8..MR39.
    pub const GPRS: u32 = 1 << 0;
    /// cr, lr, ctr, xer in MR40..MR43.
    pub const SPECIAL: u32 = 1 << 1;
    /// Guest TLB context in MR44..MR46: guest PID, MMUCR, and the index of the guest
    /// TLB entry translating the faulting pc (`u32::MAX` if none).
    pub const TLB: u32 = 1 << 2;
    pub const DEFAULT: u32 = GPRS | SPECIAL;
}

/// Virtualization fault message: tag label [`crate::label::VIRT_FAULT`] | class.
pub mod vfault {
    /// MR1: guest pc of the faulting instruction (for `Idle`: where the guest resumes,
    /// the instruction after the `mtmsr`/`rfi` that asked to wait).
    pub const PC: usize = 1;
    /// MR2: the instruction word.
    pub const INSN: usize = 2;
    /// MR3: guest-physical address (MMIO), else 0.
    pub const GPA: usize = 3;
    /// MR4: guest MSR (virtual).
    pub const MSR: usize = 4;
    /// MR5: the transfer mask used for this message.
    pub const MASK: usize = 5;
    /// MR6: the value of the GPR named by the instruction's bits 6:10 (RS/RT), so a
    /// VMM emulating a store or mtdcr needs no register transfer at all.
    pub const RS_VALUE: usize = 6;
    /// MR8..MR39: r0..r31 when `xfer::GPRS`.
    pub const GPR0: usize = 8;
    /// MR40..MR43: cr, lr, ctr, xer when `xfer::SPECIAL`.
    pub const CR: usize = 40;
    pub const WORDS: u32 = 43;
    /// MR44..MR46 when `xfer::TLB`: guest PID, MMUCR, guest TLB index of the pc.
    pub const PID: usize = 44;
    pub const MMUCR: usize = 45;
    pub const TLB_INDEX: usize = 46;
    pub const WORDS_TLB: u32 = 46;
    /// Words of a message without register transfer (MR1..MR6).
    pub const SHORT_WORDS: u32 = 6;

    /// Reply: MR1 = new pc; MR2 = flags below; GPRs/SPECIAL at the same MRs when
    /// the reply's tag has enough words (the mask of the request applies).
    pub const REPLY_PC: usize = 1;
    pub const REPLY_FLAGS: usize = 2;
    /// Reply flag: raise the virtual external interrupt input.
    pub const REPLY_IRQ_RAISE: u32 = 1 << 0;
    /// Reply flag: lower it.
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
    pub const REPLY_GPR_INDEX: usize = 3;
    pub const REPLY_GPR_VALUE: usize = 4;
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

/// One trace point: how often an exit class happened and what it cost, in timebase
/// ticks measured from kernel entry to the return to the guest (or to the IPC send).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TraceCounter {
    pub count: u32,
    pub min: u32,
    pub max: u32,
    /// Sum of costs, low and high word.
    pub sum_lo: u32,
    pub sum_hi: u32,
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
}

pub const NUM_TRACEPOINTS: usize = 22;

impl TracePoint {
    pub const ALL: [TracePoint; NUM_TRACEPOINTS] = [
        Self::SyscallIpc, Self::ExceptDecr, Self::EmulMtmsr, Self::EmulWrtee, Self::EmulMfmsr,
        Self::EmulWrteei, Self::ItlbMiss, Self::EmulRfi, Self::DtlbMiss, Self::EmulTlbwe,
        Self::EmulMfspr, Self::EmulMtspr, Self::EmulTlbre, Self::EmulTlbsx, Self::EmulRfciMci,
        Self::EmulCacheTlbOp, Self::ExceptSyscall, Self::ExceptReflect, Self::ExceptExternal,
        Self::PageFaultIpc, Self::GuestIdle, Self::ExceptFitWdt,
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
        }
    }
}
