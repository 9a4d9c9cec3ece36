//! `memcpy` and `memset` for native programs, in PowerPC assembly.
//!
//! Rust's `compiler_builtins` gives every `no_std` program a `memcpy` (weak) that moves
//! one word per five instructions (and, when source and destination are not equally
//! aligned, one byte per three). Every message byte through the fabric is copied a few
//! times (user buffer, DMA window, the fabric's copy, back), so the copy loop is most of
//! what a large message costs in guest instructions. These strong definitions replace
//! the weak ones: 16 bytes per nine instructions when source and destination share their
//! alignment modulo 4 (word loads and stores, as Linux's `copy_32.S` does, unrolled
//! four times), bytes otherwise; `memset` stores 16 bytes per five instructions.
//!
//! Only volatile registers (r0, r3..r10, CTR, CR0) are used (SysV PowerPC ABI). Not in
//! Linux-personality programs: their C library brings its own.
//!
//! Checked on the target by `kestrel-selftest` (every alignment pair and length up to
//! 80 bytes against a byte loop) and by every test that moves messages.

core::arch::global_asm!(
    "    .section .text.memcpy, \"ax\"",
    "    .globl memcpy",
    "    .type memcpy, @function",
    "    .balign 16",
    // r3 = destination (returned), r4 = source, r5 = length; r6 = destination cursor.
    "memcpy:",
    "    mr 6, 3",
    "    cmplwi 5, 16",
    "    blt 3f",
    "    xor 0, 3, 4",
    "    andi. 0, 0, 3",
    "    bne 3f",
    // Same alignment: bytes up to the destination's word boundary first.
    "    neg 0, 3",
    "    andi. 0, 0, 3",
    "    beq 1f",
    "    mtctr 0",
    "    subf 5, 0, 5",
    "    addi 4, 4, -1",
    "    addi 6, 6, -1",
    "0:  lbzu 7, 1(4)",
    "    stbu 7, 1(6)",
    "    bdnz 0b",
    "    addi 4, 4, 1",
    "    addi 6, 6, 1",
    // 16-byte blocks.
    "1:  srwi. 0, 5, 4",
    "    beq 3f",
    "    mtctr 0",
    "    andi. 5, 5, 15",
    "    addi 4, 4, -4",
    "    addi 6, 6, -4",
    "2:  lwz 7, 4(4)",
    "    lwz 8, 8(4)",
    "    lwz 9, 12(4)",
    "    lwzu 10, 16(4)",
    "    stw 7, 4(6)",
    "    stw 8, 8(6)",
    "    stw 9, 12(6)",
    "    stwu 10, 16(6)",
    "    bdnz 2b",
    "    addi 4, 4, 4",
    "    addi 6, 6, 4",
    // The rest (or everything, when short or differently aligned), a byte at a time.
    "3:  cmplwi 5, 0",
    "    beqlr",
    "    mtctr 5",
    "    addi 4, 4, -1",
    "    addi 6, 6, -1",
    "4:  lbzu 7, 1(4)",
    "    stbu 7, 1(6)",
    "    bdnz 4b",
    "    blr",
    "    .size memcpy, . - memcpy",
    "",
    "    .section .text.memset, \"ax\"",
    "    .globl memset",
    "    .type memset, @function",
    "    .balign 16",
    // r3 = destination (returned), r4 = byte value, r5 = length; r6 = cursor.
    "memset:",
    "    mr 6, 3",
    "    clrlwi 4, 4, 24",
    "    cmplwi 5, 16",
    "    blt 3f",
    "    rlwimi 4, 4, 8, 16, 23",
    "    rlwimi 4, 4, 16, 0, 15",
    "    neg 0, 3",
    "    andi. 0, 0, 3",
    "    beq 1f",
    "    mtctr 0",
    "    subf 5, 0, 5",
    "    addi 6, 6, -1",
    "0:  stbu 4, 1(6)",
    "    bdnz 0b",
    "    addi 6, 6, 1",
    "1:  srwi. 0, 5, 4",
    "    beq 3f",
    "    mtctr 0",
    "    andi. 5, 5, 15",
    "    addi 6, 6, -4",
    "2:  stw 4, 4(6)",
    "    stw 4, 8(6)",
    "    stw 4, 12(6)",
    "    stwu 4, 16(6)",
    "    bdnz 2b",
    "    addi 6, 6, 4",
    "3:  cmplwi 5, 0",
    "    beqlr",
    "    mtctr 5",
    "    addi 6, 6, -1",
    "4:  stbu 4, 1(6)",
    "    bdnz 4b",
    "    blr",
    "    .size memset, . - memset",
);

extern "C" {
    fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
    fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8;
}

/// Copies `src` into `dst` (equal lengths) with the `memcpy` above, called by name (a
/// `copy_from_slice` of a known small length would be inlined instead): for its test.
pub fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: two distinct slices (one borrowed mutably) of the same length.
    unsafe { memcpy(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
}

/// Fills `dst` with `v` with the `memset` above: for its test.
pub fn fill_bytes(dst: &mut [u8], v: u8) {
    // SAFETY: `dst` is a valid mutable slice of `dst.len()` bytes.
    unsafe { memset(dst.as_mut_ptr(), i32::from(v) | 0x100, dst.len()) };
}
