//! Where things live: the virtual-address regions of child spaces (and what the
//! pager does with a fault in each), and the addresses the
//! adversarial tests aim at.

use kestrel_abi::FIRST_THREAD_NO;

/// Private zero-filled memory: the pager backs each page with a fresh frame, per
/// faulting thread.
pub const HEAP_BASE: u32 = 0x3000_0000;
pub const HEAP_END: u32 = 0x3010_0000;

/// The receive window of puppets for map and grant items (2^[`SHARED_LOG2`] bytes).
/// The pager never maps anything here: a fault in this region is counted and left
/// unanswered, which is how tests see that a mapping they revoked is really gone.
pub const SHARED_BASE: u32 = 0x4000_0000;
pub const SHARED_LOG2: u32 = 24;

/// An address no one maps (inside the refused shared region).
pub const UNMAPPED: u32 = 0x4800_0000;

/// On a read fault here the pager maps one read-only page filled with
/// [`RO_PATTERN`]; it refuses every other access.
pub const RO_BASE: u32 = 0x5000_0000;
pub const RO_END: u32 = 0x5010_0000;
pub const RO_PATTERN: u32 = 0x5a5a_5a5a;

/// Child stacks: [`STACK_STRIDE`] bytes per thread number, backed on demand.
pub const STACK_BASE: u32 = 0x6000_0000;
pub const STACK_STRIDE: u32 = 0x1_0000;
pub const STACK_END: u32 = STACK_BASE + STACK_STRIDE * 128;

/// Kernel memory (the kernel image starts here); user access must trap.
pub const KERNEL_ADDR: u32 = 0x0010_0000;

/// QEMU bamboo's second 16550 UART (the kernel uses only the first) and its UIC line.
pub const UART1_BASE: u32 = 0xEF60_0400;
pub const UART1_IRQ: u32 = 1;

/// One past the highest stack address of thread number `n` (a child's stack top).
pub const fn stack_top(n: u32) -> u32 {
    STACK_BASE + (n - FIRST_THREAD_NO + 1) * STACK_STRIDE
}

/// Pages the pager backs with private frames (stacks and heap).
pub const fn is_private(addr: u32) -> bool {
    (addr >= HEAP_BASE && addr < HEAP_END) || (addr >= STACK_BASE && addr < STACK_END)
}

pub const fn is_read_only(addr: u32) -> bool {
    addr >= RO_BASE && addr < RO_END
}

/// True if `addr` lies in this task's code.
pub fn is_text(addr: u32) -> bool {
    let (start, text_end, _) = kestrel_user::pager::image();
    addr >= start && addr < text_end
}
