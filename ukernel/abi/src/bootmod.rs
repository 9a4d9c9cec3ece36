//! The boot-module archive: what QEMU's `-initrd` carries when the root task needs more
//! than its own ELF (for example a VMM and its guest images).
//!
//! Layout (big-endian words): `magic "KSTRLMOD" | count | count × entry`, where an entry
//! is `name[24] (NUL-padded) | offset | size`, offsets from the archive start. Entry 0
//! is the root task. A plain ELF instead of an archive is a root task alone. The kernel
//! lets the root task read the whole archive (read-only) through its sigma0 window; the
//! root task (`kestrel-root`) starts the modules named by `root.start=` as programs and
//! maps the archive read-only to a program that asks (`root::Request::Archive`).

pub const MAGIC: [u8; 8] = *b"KSTRLMOD";
pub const NAME_LEN: usize = 24;
pub const ENTRY_LEN: usize = NAME_LEN + 8;
pub const HEADER_LEN: usize = 12;

/// One module of an archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Module<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// Number of modules, or `None` if `archive` is not a (well-formed) archive.
pub fn count(archive: &[u8]) -> Option<usize> {
    if archive.get(..8)? != MAGIC {
        return None;
    }
    let n = be32(archive, 8)? as usize;
    let table_end = HEADER_LEN.checked_add(n.checked_mul(ENTRY_LEN)?)?;
    if table_end > archive.len() {
        return None;
    }
    Some(n)
}

/// Module `i` of `archive`, bounds-checked.
pub fn get(archive: &[u8], i: usize) -> Option<Module<'_>> {
    if i >= count(archive)? {
        return None;
    }
    let e = HEADER_LEN + i * ENTRY_LEN;
    let name_bytes = archive.get(e..e + NAME_LEN)?;
    let len = name_bytes.iter().position(|&c| c == 0).unwrap_or(NAME_LEN);
    let name = core::str::from_utf8(&name_bytes[..len]).ok()?;
    let off = be32(archive, e + NAME_LEN)? as usize;
    let size = be32(archive, e + NAME_LEN + 4)? as usize;
    let data = archive.get(off..off.checked_add(size)?)?;
    Some(Module { name, data })
}

/// The module called `name`.
pub fn find<'a>(archive: &'a [u8], name: &str) -> Option<Module<'a>> {
    (0..count(archive)?)
        .filter_map(|i| get(archive, i))
        .find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn build(mods: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(mods.len() as u32).to_be_bytes());
        let mut off = HEADER_LEN + mods.len() * ENTRY_LEN;
        for (name, data) in mods {
            let mut n = [0u8; NAME_LEN];
            n[..name.len()].copy_from_slice(name.as_bytes());
            out.extend_from_slice(&n);
            out.extend_from_slice(&(off as u32).to_be_bytes());
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            off += data.len();
        }
        for (_, data) in mods {
            out.extend_from_slice(data);
        }
        out
    }

    #[test]
    fn roundtrip() {
        let a = build(&[("root", b"\x7fELFroot"), ("guest", b"guest-image")]);
        assert_eq!(count(&a), Some(2));
        assert_eq!(get(&a, 0).unwrap().data, b"\x7fELFroot");
        assert_eq!(find(&a, "guest").unwrap().data, b"guest-image");
        assert_eq!(find(&a, "nope"), None);
        assert_eq!(get(&a, 2), None);
    }

    #[test]
    fn plain_elf_is_not_an_archive() {
        assert_eq!(count(b"\x7fELF\x01\x02\x01"), None);
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), i in 0usize..8) {
            let mut b = bytes.clone();
            if b.len() >= 8 { b[..8].copy_from_slice(&MAGIC); }
            let _ = count(&b);
            let _ = get(&b, i);
        }
    }
}
