//! Interrupt vectors: the IVOR index of each interrupt (Book E "Interrupt Vector Offset
//! Registers"; PPC440 UM "Interrupts and Exceptions", Table 6-2), its name and its class.
//!
//! The vector number is also the index of the IVOR that holds its handler's offset
//! ([`crate::spr::ivor`]). Constants are plain `u32` so that they match the vector numbers
//! the kernel's exception entry passes around and can be `const` asm operands.

/// Critical input.
pub const CRITICAL: u32 = 0;
/// Machine check.
pub const MACHINE_CHECK: u32 = 1;
/// Data storage.
pub const DSI: u32 = 2;
/// Instruction storage.
pub const ISI: u32 = 3;
/// External input.
pub const EXTERNAL: u32 = 4;
/// Alignment.
pub const ALIGNMENT: u32 = 5;
/// Program (illegal or privileged instruction, trap).
pub const PROGRAM: u32 = 6;
/// Floating-point unavailable.
pub const FP_UNAVAILABLE: u32 = 7;
/// System call.
pub const SYSCALL: u32 = 8;
/// Auxiliary processor unavailable.
pub const AP_UNAVAILABLE: u32 = 9;
/// Decrementer.
pub const DECREMENTER: u32 = 10;
/// Fixed-interval timer.
pub const FIT: u32 = 11;
/// Watchdog timer.
pub const WATCHDOG: u32 = 12;
/// Data TLB error (miss).
pub const DTLB_MISS: u32 = 13;
/// Instruction TLB error (miss).
pub const ITLB_MISS: u32 = 14;
/// Debug.
pub const DEBUG: u32 = 15;

/// IVPR[IVP] (bits 0:15): the vectors' common prefix; the other bits read as 0.
pub const PREFIX: crate::Field = crate::Field::bits(0, 15);
/// IVORn[IVO] (bits 16:27): vector n's offset from the prefix; the other bits read as 0.
pub const OFFSET: crate::Field = crate::Field::bits(16, 27);

/// Number of vectors (IVOR0-IVOR15).
pub const COUNT: u32 = 16;

/// Names for logs, by vector number.
pub const NAMES: [&str; COUNT as usize] = [
    "critical input",
    "machine check",
    "data storage",
    "instruction storage",
    "external input",
    "alignment",
    "program",
    "FP unavailable",
    "system call",
    "AP unavailable",
    "decrementer",
    "fixed-interval timer",
    "watchdog",
    "data TLB miss",
    "instruction TLB miss",
    "debug",
];

/// The name of `vector`, or "?" outside 0..16.
pub fn name(vector: u32) -> &'static str {
    NAMES.get(vector as usize).copied().unwrap_or("?")
}

/// Whether interrupts of `vector` arrive independently of the instruction stream.
pub const fn is_asynchronous(vector: u32) -> bool {
    matches!(
        vector,
        CRITICAL | MACHINE_CHECK | EXTERNAL | DECREMENTER | FIT | WATCHDOG
    )
}

/// Which save/restore registers and return instruction an interrupt class uses (Book E
/// "Interrupt Classes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// SRR0/SRR1, `rfi`.
    NonCritical,
    /// CSRR0/CSRR1, `rfci`.
    Critical,
    /// MCSRR0/MCSRR1, `rfmci` (the 440's machine-check class).
    MachineCheck,
}

/// The class of `vector`: critical input, watchdog and debug are critical; machine check
/// has its own; everything else is non-critical.
pub const fn class(vector: u32) -> Class {
    match vector {
        CRITICAL | WATCHDOG | DEBUG => Class::Critical,
        MACHINE_CHECK => Class::MachineCheck,
        _ => Class::NonCritical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_classes_and_ivors() {
        assert_eq!(name(DECREMENTER), "decrementer");
        assert_eq!(name(16), "?");
        assert_eq!(class(WATCHDOG), Class::Critical);
        assert_eq!(class(DEBUG), Class::Critical);
        assert_eq!(class(MACHINE_CHECK), Class::MachineCheck);
        assert_eq!(class(PROGRAM), Class::NonCritical);
        assert!(is_asynchronous(EXTERNAL) && !is_asynchronous(PROGRAM));
        assert_eq!(crate::spr::ivor(DEBUG), Some(crate::spr::IVOR15));
        assert_eq!(crate::spr::ivor(SYSCALL), Some(crate::spr::IVOR8));
        assert_eq!(PREFIX.mask(), 0xffff_0000);
        assert_eq!(OFFSET.mask(), 0x0000_fff0);
    }
}
