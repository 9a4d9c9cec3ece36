//! The PowerPC 440 core: registers, TLB, exception entry, FPU. Nothing here knows about
//! threads or IPC, and nothing here uses another kernel module (docs/adr/0010); the rest
//! of the kernel sees only the names exported below.
//!
//! Every architectural number (SPRs, MSR/ESR/timer bits, TLB words, vector numbers) is
//! `kestrel_ppc440`'s; this module has the code that uses them.

pub mod entry;
pub mod fpu;
pub mod spr;
pub mod tlb;

pub use entry::{entry_tb, TrapFrame, FRAME_SIZE};

/// MSR bits (`kestrel_ppc440::msr`) and the MSR values the kernel runs with.
pub mod msr {
    pub use ppc440::msr::{CE, DE, DS, EE, FE0, FE1, FP, IS, ME, PR, WE};

    /// MSR of native user threads: translation space 0, interrupts on.
    pub const USER: u32 = PR | EE | ME;
    /// MSR the kernel runs with (interrupts off except machine check).
    pub const KERNEL: u32 = ME;
    /// MSR of the idle loop: supervisor, external/decrementer interrupts on.
    pub const IDLE: u32 = ME | EE;
}

pub use ppc440::{esr, ivor as vector, tcr, tsr};

/// Requests a system reset through DBCR0[RST] (bits 2:3 = 0b11). Under QEMU with
/// `-no-reboot` this ends the emulator with status 0.
pub fn system_reset() -> ! {
    spr::write::<{ ppc440::spr::DBCR0 }>(0x3000_0000);
    loop {
        core::hint::spin_loop();
    }
}

/// Whether `[phys, phys + len)` lies inside RAM (below `ram_end`).
fn in_ram(phys: u32, len: usize, ram_end: u32) -> bool {
    (phys as u64) + (len as u64) <= ram_end as u64
}

/// Copies `buf.len()` bytes from physical `phys` through the kernel's 1:1 RAM mapping.
/// Returns false (and reads nothing) unless the whole range is RAM.
pub fn read_phys_bytes(phys: u32, buf: &mut [u8], ram_end: u32) -> bool {
    if !in_ram(phys, buf.len(), ram_end) {
        return false;
    }
    for (i, b) in buf.iter_mut().enumerate() {
        // SAFETY: the range is RAM below `ram_end`, mapped 1:1 for the kernel
        // (tlb::install_kernel_map); byte reads have no alignment requirement.
        *b = unsafe { ((phys as usize + i) as *const u8).read_volatile() };
    }
    true
}

/// Copies `buf` to physical `phys` through the kernel's 1:1 RAM mapping, then writes the
/// touched data cache blocks back and invalidates them in the instruction cache (the
/// bytes may be code the guest runs next). Returns false (and writes nothing) unless the
/// whole range is RAM.
pub fn write_phys_bytes(phys: u32, buf: &[u8], ram_end: u32) -> bool {
    if !in_ram(phys, buf.len(), ram_end) {
        return false;
    }
    for (i, b) in buf.iter().enumerate() {
        // SAFETY: as in `read_phys_bytes`; the caller checked that the guest and the VMM
        // allow this store to this RAM, which belongs to the guest's VM.
        unsafe { ((phys as usize + i) as *mut u8).write_volatile(*b) };
    }
    let line = ppc440::decode::DCACHE_LINE;
    let mut a = phys & !(line - 1);
    while (a as u64) < phys as u64 + buf.len() as u64 {
        // SAFETY: cache block operations on RAM the kernel maps; they change no data.
        unsafe { core::arch::asm!("dcbst 0, {a}", "msync", "icbi 0, {a}", a = in(reg) a) };
        a += line;
    }
    // SAFETY: a context synchronization, no memory effect.
    unsafe { core::arch::asm!("isync") };
    true
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
