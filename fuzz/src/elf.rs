//! Target `elf`: the ELF load planner (`kestrel_kcore::elf`) the kernel runs on the root
//! task's image, the root task on boot modules and the VMM on guest kernels.
//!
//! Input: a selector byte (virtual or physical plan, and which address range: the
//! kernel's user range, a guest's RAM, or two numbers from the input), then the image.
//! Checked for an accepted image, independently of the planner (the program headers are
//! re-read here with plain big-endian slicing): one segment per `PT_LOAD` with a non-zero
//! `p_memsz`, in order, each matching its header (`p_vaddr` or `p_paddr`), at most
//! `MAX_SEGMENTS`; `filesz <= memsz`; file bytes inside the image; memory inside the
//! range without wrapping; rights non-empty; no byte shared between segments; the entry
//! inside an executable segment; and the same image cut short inside its file data is
//! refused. A rejected image has a message. Images without the ELF magic, of another
//! class, byte order or machine, or not executables are always refused.

use crate::input::Input;
use kestrel_abi::{USER_BASE, USER_END};
use kestrel_kcore::elf::{load_plan, load_plan_physical, LoadPlan, MAX_SEGMENTS};

/// The address ranges the callers use: the kernel (root task) and the root task
/// (programs) plan for the user part of a space; the VMM plans a Linux guest physically
/// and a bare-metal guest virtually, both into its RAM (64 MiB here).
const RANGES: [(u32, u32); 3] = [(USER_BASE, USER_END), (0, 64 << 20), (0x1000, 64 << 20)];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let sel = input.u8();
    let physical = sel & 0x80 != 0;
    let (base, end) = match sel & 0x7F {
        r if (r as usize) < RANGES.len() * 40 => RANGES[r as usize % RANGES.len()],
        _ => (input.u32(), input.u32()),
    };
    let image = input.rest();
    check(image, base, end, physical);
}

/// Plans `image` for `[base, end)` and checks the result.
pub fn check(image: &[u8], base: u32, end: u32, physical: bool) {
    let plan = |img: &[u8]| {
        if physical {
            load_plan_physical(img, base, end)
        } else {
            load_plan(img, base, end)
        }
    };
    let result = plan(image);
    let header_ok = image.len() >= 52
        && image[..4] == *b"\x7fELF"
        && image[4] == 1
        && image[5] == 2
        && be16(image, 16) == Some(2)
        && be16(image, 18) == Some(20);
    let p = match result {
        Err(e) => {
            assert!(!e.as_str().is_empty());
            return;
        }
        Ok(p) => p,
    };
    assert!(header_ok, "accepted an image with a bad ELF header");
    check_plan(&p, image, base, end, physical);
    // Cut inside the last file byte of some segment: must be refused.
    if let Some(need) = p
        .segments
        .iter()
        .filter(|s| s.filesz > 0)
        .map(|s| s.file_offset as usize + s.filesz as usize)
        .max()
    {
        assert!(
            plan(&image[..need - 1]).is_err(),
            "accepted an image cut inside its file data"
        );
    }
}

fn check_plan(p: &LoadPlan, image: &[u8], base: u32, end: u32, physical: bool) {
    let n = p.segments.len();
    assert!((1..=MAX_SEGMENTS).contains(&n), "{n} segments");
    // Re-read the program headers.
    let phoff = be32(image, 28).expect("header checked") as usize;
    let phentsize = usize::from(be16(image, 42).expect("header checked"));
    let phnum = usize::from(be16(image, 44).expect("header checked"));
    let mut loads = Vec::new();
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let field =
            |k: usize| be32(image, at + 4 * k).expect("accepted headers lie inside the image");
        let (p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags) = (
            field(0),
            field(1),
            field(2),
            field(3),
            field(4),
            field(5),
            field(6),
        );
        assert!(p_type != 2 && p_type != 3, "accepted PT_DYNAMIC/PT_INTERP");
        if p_type == 1 && p_memsz != 0 {
            loads.push((
                p_offset,
                if physical { p_paddr } else { p_vaddr },
                p_filesz,
                p_memsz,
                p_flags,
            ));
        }
    }
    assert_eq!(loads.len(), n, "one segment per PT_LOAD with memory");
    for (s, &(off, addr, filesz, memsz, flags)) in p.segments.iter().zip(&loads) {
        assert_eq!(
            (s.file_offset, s.vaddr, s.filesz, s.memsz),
            (off, addr, filesz, memsz),
            "{s:?}"
        );
        assert_eq!(u32::from(s.rights.0), flags & 7, "rights from p_flags");
        assert!(s.filesz <= s.memsz);
        assert!(
            u64::from(s.file_offset) + u64::from(s.filesz) <= image.len() as u64,
            "{s:?}: file bytes"
        );
        assert!(
            s.vaddr >= base && u64::from(s.vaddr) + u64::from(s.memsz) <= u64::from(end),
            "{s:?} in [{base:#x}, {end:#x})"
        );
        assert_eq!(
            u64::from(s.end()),
            u64::from(s.vaddr) + u64::from(s.memsz),
            "end is exact"
        );
        assert!(s.rights.0 & 7 != 0, "{s:?}: no rights");
    }
    for (i, a) in p.segments.iter().enumerate() {
        for b in &p.segments[i + 1..] {
            assert!(
                a.end() <= b.vaddr || b.end() <= a.vaddr,
                "{a:?} overlaps {b:?}"
            );
        }
    }
    assert!(
        p.segments
            .iter()
            .any(|s| s.rights.0 & 1 != 0 && s.vaddr <= p.entry && p.entry < s.end()),
        "entry {:#x} not in an executable segment",
        p.entry
    );
}

/// A PowerPC ELF32 big-endian executable with program headers
/// `(p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags)` (the layout of the
/// `image()` helper in `ukernel/kcore/src/elf.rs`'s tests), padded to `len` bytes.
pub fn image(entry: u32, phs: &[(u32, u32, u32, u32, u32, u32, u32)], len: usize) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"\x7fELF");
    b.extend_from_slice(&[1, 2, 1, 0]);
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&2u16.to_be_bytes());
    b.extend_from_slice(&20u16.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&entry.to_be_bytes());
    b.extend_from_slice(&52u32.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    for h in [52u16, 32, phs.len() as u16, 40, 0, 0] {
        b.extend_from_slice(&h.to_be_bytes());
    }
    for &(t, off, vaddr, paddr, filesz, memsz, flags) in phs {
        for w in [t, off, vaddr, paddr, filesz, memsz, flags, 0x1000] {
            b.extend_from_slice(&w.to_be_bytes());
        }
    }
    while b.len() < len {
        b.push(b.len() as u8);
    }
    b
}
