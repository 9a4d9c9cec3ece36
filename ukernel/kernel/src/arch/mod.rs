//! The PowerPC 440 core: registers, TLB, exception entry. Nothing here knows about
//! threads or IPC; the generic kernel sees only the names exported below.
//!
//! Bit numbers in comments follow the PPC440 core user's manual (MSB-0); the
//! conversion to masks happens once, in the constants.

pub mod entry;
pub mod fpu;
pub mod spr;
pub mod tlb;

pub use entry::{TrapFrame, FRAME_SIZE};

/// Machine State Register bits (PPC440 UM §2.2.1, "MSR").
pub mod msr {
    /// Wait state enable (bit 13).
    pub const WE: u32 = 1 << (31 - 13);
    /// Critical interrupt enable (bit 14).
    pub const CE: u32 = 1 << (31 - 14);
    /// External interrupt enable (bit 16).
    pub const EE: u32 = 1 << (31 - 16);
    /// Problem state (bit 17).
    pub const PR: u32 = 1 << (31 - 17);
    /// Floating point available (bit 18).
    pub const FP: u32 = 1 << (31 - 18);
    /// Machine check enable (bit 19).
    pub const ME: u32 = 1 << (31 - 19);
    /// Debug interrupt enable (bit 22).
    pub const DE: u32 = 1 << (31 - 22);
    /// Instruction address space (bit 26).
    pub const IS: u32 = 1 << (31 - 26);
    /// Data address space (bit 27).
    pub const DS: u32 = 1 << (31 - 27);

    /// MSR of native user threads: translation space 0, interrupts on.
    pub const USER: u32 = PR | EE | ME;
    /// MSR the kernel runs with (interrupts off except machine check).
    pub const KERNEL: u32 = ME;
    /// MSR of the idle loop: supervisor, external/decrementer interrupts on.
    pub const IDLE: u32 = ME | EE;
}

/// Exception Syndrome Register bits (PPC440 UM §6.5.8).
pub mod esr {
    /// Illegal instruction (bit 4).
    pub const PIL: u32 = 1 << (31 - 4);
    /// Privileged instruction (bit 5).
    pub const PPR: u32 = 1 << (31 - 5);
    /// Trap (bit 6).
    pub const PTR: u32 = 1 << (31 - 6);
    /// Store operation (bit 8).
    pub const ST: u32 = 1 << (31 - 8);
}

/// Interrupt vector numbers = IVOR index (Book E / PPC440 UM Table 6-2).
pub mod vector {
    pub const CRITICAL: u32 = 0;
    pub const MACHINE_CHECK: u32 = 1;
    pub const DSI: u32 = 2;
    pub const ISI: u32 = 3;
    pub const EXTERNAL: u32 = 4;
    pub const ALIGNMENT: u32 = 5;
    pub const PROGRAM: u32 = 6;
    pub const FP_UNAVAILABLE: u32 = 7;
    pub const SYSCALL: u32 = 8;
    pub const AP_UNAVAILABLE: u32 = 9;
    pub const DECREMENTER: u32 = 10;
    pub const FIT: u32 = 11;
    pub const WATCHDOG: u32 = 12;
    pub const DTLB_MISS: u32 = 13;
    pub const ITLB_MISS: u32 = 14;
    pub const DEBUG: u32 = 15;

    pub const NAMES: [&str; 16] = [
        "critical input", "machine check", "data storage", "instruction storage", "external",
        "alignment", "program", "FP unavailable", "system call", "AP unavailable",
        "decrementer", "fixed-interval timer", "watchdog", "data TLB miss",
        "instruction TLB miss", "debug",
    ];
}

/// Timer Control / Status Register bits (PPC440 UM §8).
pub mod timer {
    /// TCR[DIE] (bit 5): decrementer interrupt enable.
    pub const TCR_DIE: u32 = 1 << (31 - 5);
    /// TCR[ARE] (bit 9): auto-reload from DECAR.
    pub const TCR_ARE: u32 = 1 << (31 - 9);
    /// TSR[DIS] (bit 4): decrementer interrupt status (write 1 to clear).
    pub const TSR_DIS: u32 = 1 << (31 - 4);
    /// TSR[FIS] (bit 5) and TSR[WIS] (bit 1), TSR[ENW] (bit 0).
    pub const TSR_FIS: u32 = 1 << (31 - 5);
    pub const TSR_WIS: u32 = 1 << (31 - 1);
    pub const TSR_ENW: u32 = 1 << 31;
}

/// Requests a system reset through DBCR0[RST] (bits 2:3 = 0b11). Under QEMU with
/// `-no-reboot` this ends the emulator with status 0.
pub fn system_reset() -> ! {
    spr::write::<{ spr::DBCR0 }>(0x3000_0000);
    loop {
        core::hint::spin_loop();
    }
}

/// Reads an instruction or data word at a physical address through the kernel's 1:1
/// RAM mapping. Returns `None` outside RAM.
pub fn read_phys_u32(phys: u32, ram_end: u32) -> Option<u32> {
    if phys & 3 != 0 || phys >= ram_end {
        return None;
    }
    // SAFETY: RAM below `ram_end` is mapped 1:1 for the kernel (tlb::install_kernel_map)
    // and `phys` is aligned; a racy read of user memory is harmless on one CPU.
    Some(unsafe { (phys as *const u32).read_volatile() })
}
