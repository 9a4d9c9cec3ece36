//! Finds `/chosen/bootargs` in the flattened device tree passed in r3 (ePAPR §5.4,
//! devicetree specification §5), for the selftest's few options.
//!
//! The tree is untrusted input: every offset is checked against the blob's size before it
//! is read, and anything unexpected means "no bootargs". The blob must lie in the first
//! 32 MiB, the RAM the selftest assumes (QEMU's bamboo puts it at 24 MiB), so that a bogus
//! r3 never makes it touch memory that may not exist.

/// The first address past the RAM the selftest assumes (mapped by the RAM entry).
const MAPPED_END: u32 = 32 << 20;
/// Blobs larger than this are not believed.
const MAX_SIZE: u32 = 1 << 20;

const MAGIC: u32 = 0xD00D_FEED;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

/// A bounds-checked view of the blob.
struct Blob {
    base: u32,
    size: u32,
}

impl Blob {
    fn byte(&self, off: u32) -> Option<u8> {
        if off >= self.size {
            return None;
        }
        // SAFETY: `base..base + size` lies inside the RAM mapping (checked in `bootargs`),
        // and reading RAM has no side effects.
        Some(unsafe { ((self.base + off) as *const u8).read_volatile() })
    }

    fn be32(&self, off: u32) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..4 {
            v = (v << 8) | self.byte(off.checked_add(i)?)? as u32;
        }
        Some(v)
    }

    /// Length of the NUL-terminated string at `off` (without the NUL).
    fn strlen(&self, off: u32) -> Option<u32> {
        let mut n = 0;
        while self.byte(off.checked_add(n)?)? != 0 {
            n += 1;
        }
        Some(n)
    }

    /// Whether the NUL-terminated string at `off` equals `s`.
    fn str_eq(&self, off: u32, s: &[u8]) -> Option<bool> {
        let n = self.strlen(off)?;
        if n as usize != s.len() {
            return Some(false);
        }
        Some(
            s.iter()
                .enumerate()
                .all(|(i, &c)| self.byte(off + i as u32) == Some(c)),
        )
    }
}

/// Up to 128 bytes of `/chosen/bootargs`, copied into `buf`; returns the length, or 0 when
/// there is no valid tree or no bootargs.
pub fn bootargs(fdt: u32, buf: &mut [u8; 128]) -> usize {
    find(fdt, buf).unwrap_or(0)
}

fn find(fdt: u32, buf: &mut [u8; 128]) -> Option<usize> {
    if !fdt.is_multiple_of(4) || fdt == 0 || fdt >= MAPPED_END - 40 {
        return None;
    }
    let header = Blob {
        base: fdt,
        size: 40,
    };
    if header.be32(0)? != MAGIC {
        return None;
    }
    let size = header.be32(4)?;
    if !(40..=MAX_SIZE).contains(&size) || fdt.checked_add(size)? > MAPPED_END {
        return None;
    }
    let blob = Blob { base: fdt, size };
    let structs = blob.be32(8)?;
    let strings = blob.be32(12)?;
    let mut off = structs;
    let mut depth = 0u32;
    let mut in_chosen = false;
    loop {
        let token = blob.be32(off)?;
        off = off.checked_add(4)?;
        match token {
            BEGIN_NODE => {
                let len = blob.strlen(off)?;
                depth += 1;
                in_chosen = depth == 2 && blob.str_eq(off, b"chosen")?;
                off = (off.checked_add(len + 1)? + 3) & !3;
            }
            END_NODE => {
                depth = depth.checked_sub(1)?;
                in_chosen = false;
            }
            PROP => {
                let len = blob.be32(off)?;
                let name = blob.be32(off + 4)?;
                let value = off + 8;
                if in_chosen && blob.str_eq(strings.checked_add(name)?, b"bootargs")? {
                    let n = (len as usize).min(buf.len());
                    for (i, b) in buf.iter_mut().take(n).enumerate() {
                        *b = blob.byte(value + i as u32)?;
                    }
                    // The value is NUL-terminated; keep what precedes the NUL.
                    return Some(buf[..n].iter().position(|&c| c == 0).unwrap_or(n));
                }
                off = (value.checked_add(len)? + 3) & !3;
            }
            NOP => {}
            END => return None,
            _ => return None,
        }
    }
}
