//! Virtual memory layout of a native address space, the UTCB, and the register frame
//! exchanged by `ExchangeRegisters(GET_FRAME/SET_FRAME)`.
//!
//! ```text
//! 0x0000_0000 ┬ kernel: physical RAM 1:1, supervisor only (TID 0)
//! 0x1000_0000 ┼ USER_BASE: native tasks link here
//! 0x8000_0000 ┼ SIGMA0_WINDOW: in the root space only, RAM at phys + 0x8000_0000
//! 0xE000_0000 ┼ DEVICE_WINDOW: in the root space only, device pages 1:1 (I|G)
//! 0xF000_0000 ┼ USER_END: kernel I/O mappings above
//! ```

/// Lowest user virtual address.
pub const USER_BASE: u32 = 0x1000_0000;
/// One past the highest user virtual address.
pub const USER_END: u32 = 0xF000_0000;
/// Root space only: a fault at `SIGMA0_WINDOW + p` maps free physical page `p`.
pub const SIGMA0_WINDOW: u32 = 0x8000_0000;
/// Size of the sigma0 RAM window (RAM above 256 MiB is not used).
pub const SIGMA0_WINDOW_SIZE: u32 = 0x1000_0000;
/// Root space only: a fault at `p` in this window maps device page `p` uncached.
pub const DEVICE_WINDOW: u32 = 0xE000_0000;
pub const DEVICE_WINDOW_END: u32 = 0xF000_0000;

/// True if `[addr, addr+len)` lies in user space.
pub const fn is_user_range(addr: u32, len: u32) -> bool {
    match addr.checked_add(len) {
        Some(end) => addr >= USER_BASE && end <= USER_END,
        None => false,
    }
}

/// User-readable SPR holding the current thread's UTCB address: SPRG4's user read port
/// (the kernel writes it through `kestrel_ppc440::spr::SPRG4`).
pub const UTCB_SPR: u32 = kestrel_ppc440::spr::SPRG4R;

/// The user thread control block: one 4 KiB page per thread, mapped by the kernel at the
/// address given to `ThreadControl`, readable and writable by the thread.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Utcb {
    /// Message registers. MR0..MR6 are passed in r6..r12 and are *not* read from here.
    pub mr: [u32; crate::ipc::NUM_MRS],
    /// Receive window for map/grant items (BR0 in L4 X.2); nil refuses mappings.
    pub acceptor: u32,
    /// This thread's id, written by the kernel.
    pub my_global_id: u32,
    /// Error detail of the last failed call, written by the kernel.
    pub error_code: u32,
    /// Free for the user runtime (thread-local pointer).
    pub user_defined: [u32; 5],
    /// Scratch area for `ExchangeRegisters(GET_FRAME/SET_FRAME)`.
    pub frame: FrameRegs,
    /// Scratch area for `VcpuControl(GET_STATE/SET_STATE)`.
    pub vcpu: crate::vcpu::VcpuState,
    /// Filled by `TraceControl(READ)`.
    pub trace: [crate::vcpu::TraceCounter; crate::vcpu::NUM_TRACEPOINTS],
    /// FP transfer area ([`crate::vcpu::xfer::FPRS`]): a virtualization fault that carries
    /// the guest's FP state delivers FPR0..FPR31 and the FPSCR (index 32, in its low word)
    /// here; a reply with [`crate::vcpu::FaultReply::fprs`] installs them from here.
    pub fp: [u64; 33],
}

const _: () = assert!(core::mem::size_of::<Utcb>() <= 4096);

/// Offsets (in words) used by code that cannot use the struct.
pub const UTCB_ACCEPTOR_WORD: usize = crate::ipc::NUM_MRS;

/// A thread's user register state as the kernel saved it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct FrameRegs {
    pub gpr: [u32; 32],
    pub cr: u32,
    pub lr: u32,
    pub ctr: u32,
    pub xer: u32,
    /// Instruction pointer (SRR0).
    pub ip: u32,
    /// MSR the thread runs with (SRR1); only user-changeable bits are honoured.
    pub msr: u32,
}
