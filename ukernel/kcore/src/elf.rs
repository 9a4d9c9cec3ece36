//! The load plan for the root task: which parts of a boot-module ELF image go where in
//! the new address space, with which rights (System V ABI, "Program Loading"; PowerPC
//! ELF32 big-endian, `EM_PPC` = 20).
//!
//! The image comes from outside the kernel, so every field is checked before the plan
//! is returned, and no input makes this code panic. Only the ELF header and program
//! headers are read, through the `elf` crate in explicit big-endian byte order
//! (see `Cargo.toml`). Section headers are ignored.
//!
//! Invariants of a returned [`LoadPlan`]:
//! - 1..=[`MAX_SEGMENTS`] segments, one per `PT_LOAD` with a non-zero `p_memsz`, in
//!   program-header order;
//! - each has `filesz <= memsz`, its file bytes `[file_offset, file_offset + filesz)`
//!   inside the image, its memory `[vaddr, vaddr + memsz)` inside `[user_base, user_end)`
//!   without overflow, non-empty rights, and no byte of memory shared with another
//!   segment (two segments may still share a 4 KiB page at their boundary; the loader
//!   then maps that page with the union of their rights);
//! - `entry` lies inside an executable segment.

use core::fmt;

use elf::endian::BigEndian;
use elf::ElfBytes;
use kestrel_abi::Rights;

/// Most `PT_LOAD` segments a plan holds.
pub const MAX_SEGMENTS: usize = 8;

const EHDR_LEN: usize = 52;
const PHDR_LEN: usize = 32;
const ELFCLASS32: u8 = 1;
const ELFDATA2MSB: u8 = 2;
const EV_CURRENT: u8 = 1;
const ET_EXEC: u16 = 2;
const EM_PPC: u16 = 20;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
/// `e_phnum` value meaning "the count is in section header 0": not supported.
const PN_XNUM: u16 = 0xffff;

/// One region to map: `memsz` bytes at `vaddr`, the first `filesz` of them copied from
/// the image at `file_offset`, the rest zero.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Segment {
    pub vaddr: u32,
    pub memsz: u32,
    pub file_offset: u32,
    pub filesz: u32,
    /// From `p_flags`: PF_R = 4, PF_W = 2, PF_X = 1, the same bits as [`Rights`].
    pub rights: Rights,
}

impl Segment {
    /// One past the last byte. Exact for every segment of a [`LoadPlan`], which never
    /// reaches the top of the address space.
    pub const fn end(&self) -> u32 {
        self.vaddr.saturating_add(self.memsz)
    }
}

/// A validated description of how to load an image.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LoadPlan {
    pub entry: u32,
    pub segments: heapless::Vec<Segment, MAX_SEGMENTS>,
}

/// Why an image cannot be loaded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ElfError {
    /// The image is shorter than an ELF header.
    TooShort,
    /// The image does not start with the ELF magic number.
    NotElf,
    /// The image is not a 32-bit ELF (ELFCLASS32).
    NotElf32,
    /// The image is not big-endian (ELFDATA2MSB).
    NotBigEndian,
    /// The ELF version is not 1 (EV_CURRENT).
    BadVersion,
    /// The image is not for PowerPC (EM_PPC = 20).
    NotPowerPc,
    /// The image is not an executable (ET_EXEC); link it statically, without -pie.
    NotExecutable,
    /// The program header table is missing, has an entry size below 32 bytes, or lies
    /// outside the image.
    BadProgramHeaders,
    /// The image needs a dynamic linker (PT_INTERP or PT_DYNAMIC); link it statically.
    Dynamic,
    /// The image has no loadable segment.
    NoSegments,
    /// The image has more than [`MAX_SEGMENTS`] loadable segments.
    TooManySegments,
    /// A segment has a file size larger than its memory size.
    FileSizeExceedsMemSize,
    /// A segment's file bytes lie outside the image.
    FileRangeOutsideImage,
    /// A segment lies outside the user part of the address space; check the link address.
    OutsideUserSpace,
    /// Two segments overlap in memory.
    Overlap,
    /// A segment has no read, write or execute permission.
    NoRights,
    /// The entry point is not inside an executable segment.
    EntryNotExecutable,
}

impl ElfError {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TooShort => "image shorter than an ELF header",
            Self::NotElf => "not an ELF image (bad magic)",
            Self::NotElf32 => "not a 32-bit ELF image",
            Self::NotBigEndian => "not a big-endian ELF image",
            Self::BadVersion => "unknown ELF version",
            Self::NotPowerPc => "ELF image is not for PowerPC",
            Self::NotExecutable => "ELF image is not an executable (link statically, no -pie)",
            Self::BadProgramHeaders => "ELF program header table is missing or malformed",
            Self::Dynamic => "ELF image needs a dynamic linker (link statically)",
            Self::NoSegments => "ELF image has no loadable segment",
            Self::TooManySegments => "ELF image has too many loadable segments",
            Self::FileSizeExceedsMemSize => "ELF segment file size exceeds its memory size",
            Self::FileRangeOutsideImage => "ELF segment data lies outside the image",
            Self::OutsideUserSpace => {
                "ELF segment lies outside user space (check the link address)"
            }
            Self::Overlap => "ELF segments overlap",
            Self::NoRights => "ELF segment has no access rights",
            Self::EntryNotExecutable => "ELF entry point is not in an executable segment",
        }
    }
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Checks `image` and describes how to load it into `[user_base, user_end)`.
pub fn load_plan(image: &[u8], user_base: u32, user_end: u32) -> Result<LoadPlan, ElfError> {
    plan(image, user_base, user_end, false)
}

/// Like [`load_plan`], but for loading an image into *physical* memory, as a boot
/// loader (or a VMM loading a guest kernel) does: segments go to their `p_paddr`, which
/// must lie in `[base, end)`, and the entry point is translated from its virtual address
/// to the physical address of the same byte (QEMU's `-kernel` does the same).
pub fn load_plan_physical(image: &[u8], base: u32, end: u32) -> Result<LoadPlan, ElfError> {
    plan(image, base, end, true)
}

fn plan(image: &[u8], user_base: u32, user_end: u32, physical: bool) -> Result<LoadPlan, ElfError> {
    let ehdr = image.get(..EHDR_LEN).ok_or(ElfError::TooShort)?;
    if ehdr[..4] != *b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    if ehdr[4] != ELFCLASS32 {
        return Err(ElfError::NotElf32);
    }
    if ehdr[5] != ELFDATA2MSB {
        return Err(ElfError::NotBigEndian);
    }
    if ehdr[6] != EV_CURRENT {
        return Err(ElfError::BadVersion);
    }
    let file =
        ElfBytes::<BigEndian>::minimal_parse(image).map_err(|_| ElfError::BadProgramHeaders)?;
    let hdr = &file.ehdr;
    if hdr.version != u32::from(EV_CURRENT) {
        return Err(ElfError::BadVersion);
    }
    if hdr.e_machine != EM_PPC {
        return Err(ElfError::NotPowerPc);
    }
    if hdr.e_type != ET_EXEC {
        return Err(ElfError::NotExecutable);
    }
    let mut entry = u32::try_from(hdr.e_entry).map_err(|_| ElfError::BadProgramHeaders)?;
    let mut entry_translated = !physical;
    if hdr.e_phnum == 0 || hdr.e_phnum == PN_XNUM || usize::from(hdr.e_phentsize) < PHDR_LEN {
        return Err(ElfError::BadProgramHeaders);
    }
    let table = file.segments().ok_or(ElfError::BadProgramHeaders)?;

    let mut segments = heapless::Vec::<Segment, MAX_SEGMENTS>::new();
    for ph in table.iter() {
        match ph.p_type {
            PT_LOAD => {}
            PT_DYNAMIC | PT_INTERP => return Err(ElfError::Dynamic),
            _ => continue,
        }
        // ELF32 fields are 32-bit; the crate widens them to u64.
        let narrow = |v: u64| u32::try_from(v).map_err(|_| ElfError::BadProgramHeaders);
        let (offset, vaddr, filesz, memsz, flags) = (
            narrow(ph.p_offset)?,
            narrow(ph.p_vaddr)?,
            narrow(ph.p_filesz)?,
            narrow(ph.p_memsz)?,
            ph.p_flags,
        );
        if memsz == 0 {
            continue;
        }
        let vaddr = if physical {
            let paddr = narrow(ph.p_paddr)?;
            // The segment may wrap past 2^32 in virtual space (the physical range is
            // checked below), so the entry's offset in it is taken modulo 2^32 too.
            let offset = entry.wrapping_sub(vaddr);
            if !entry_translated && offset < memsz {
                entry = paddr.wrapping_add(offset);
                entry_translated = true;
            }
            paddr
        } else {
            vaddr
        };
        let seg = Segment {
            vaddr,
            memsz,
            file_offset: offset,
            filesz,
            rights: Rights((flags & 7) as u8),
        };
        check_segment(&seg, image.len(), user_base, user_end)?;
        if segments
            .iter()
            .any(|s| seg.vaddr < s.end() && s.vaddr < seg.end())
        {
            return Err(ElfError::Overlap);
        }
        segments.push(seg).map_err(|_| ElfError::TooManySegments)?;
    }
    if segments.is_empty() {
        return Err(ElfError::NoSegments);
    }
    let runs_entry =
        |s: &Segment| s.rights.contains(Rights::X) && entry >= s.vaddr && entry < s.end();
    if !segments.iter().any(runs_entry) {
        return Err(ElfError::EntryNotExecutable);
    }
    Ok(LoadPlan { entry, segments })
}

fn check_segment(
    s: &Segment,
    image_len: usize,
    user_base: u32,
    user_end: u32,
) -> Result<(), ElfError> {
    if s.filesz > s.memsz {
        return Err(ElfError::FileSizeExceedsMemSize);
    }
    let file_end = u64::from(s.file_offset) + u64::from(s.filesz);
    if file_end > image_len as u64 {
        return Err(ElfError::FileRangeOutsideImage);
    }
    let mem_end = u64::from(s.vaddr) + u64::from(s.memsz);
    if s.vaddr < user_base || mem_end > u64::from(user_end) {
        return Err(ElfError::OutsideUserSpace);
    }
    if s.rights.is_empty() {
        return Err(ElfError::NoRights);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_abi::{USER_BASE, USER_END};
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn physical_plan_uses_paddr_and_translates_entry() {
        // A Linux-like image: linked at 0xC0000000, loaded at physical 0.
        let mut img = image(
            0xC000_0010,
            &[(PT_LOAD, 0x1000, 0xC000_0000, 0x2000, 0x3000, 7)],
            0x3000,
        );
        // p_paddr is the fourth word of the first program header.
        let at = EHDR_LEN + 12;
        img[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
        let p = load_plan_physical(&img, 0, 64 << 20).unwrap();
        assert_eq!(p.entry, 0x10);
        assert_eq!(p.segments[0].vaddr, 0);
        assert_eq!(p.segments[0].memsz, 0x3000);
        // The virtual plan rejects the same image for a low user range.
        assert!(load_plan(&img, 0, 64 << 20).is_err());
        // A physical address beyond the given memory is refused.
        img[at..at + 4].copy_from_slice(&0x0400_0000u32.to_be_bytes());
        assert!(load_plan_physical(&img, 0, 64 << 20).is_err());
    }

    /// Found by the `elf` fuzz target: a segment whose virtual range wraps past 2^32
    /// around the entry point made the entry translation subtract with overflow (a panic
    /// with overflow checks, as in host tests). The offset is taken modulo 2^32.
    #[test]
    fn physical_plan_with_a_wrapping_virtual_segment_does_not_panic() {
        let mut img = image(
            0x100,
            &[(PT_LOAD, 0x1000, 0xFFFF_F000, 0x10, 0x2000, 7)],
            0x1010,
        );
        let at = EHDR_LEN + 12;
        img[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
        let p = load_plan_physical(&img, 0, 64 << 20).unwrap();
        assert_eq!(p.entry, 0x1100);
        assert_eq!(p.segments[0].vaddr, 0);
    }

    /// `(p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_flags)`
    type Ph = (u32, u32, u32, u32, u32, u32);

    /// Writes an ELF32 big-endian PowerPC executable with the given program headers,
    /// padded with a recognisable byte pattern up to `len` bytes.
    fn image(entry: u32, phs: &[Ph], len: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"\x7fELF");
        b.extend_from_slice(&[ELFCLASS32, ELFDATA2MSB, EV_CURRENT, 0]);
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&ET_EXEC.to_be_bytes());
        b.extend_from_slice(&EM_PPC.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes()); // e_version
        b.extend_from_slice(&entry.to_be_bytes());
        b.extend_from_slice(&(EHDR_LEN as u32).to_be_bytes()); // e_phoff
        b.extend_from_slice(&0u32.to_be_bytes()); // e_shoff
        b.extend_from_slice(&0u32.to_be_bytes()); // e_flags
        for h in [EHDR_LEN as u16, PHDR_LEN as u16, phs.len() as u16, 40, 0, 0] {
            b.extend_from_slice(&h.to_be_bytes());
        }
        assert_eq!(b.len(), EHDR_LEN);
        for &(t, off, vaddr, filesz, memsz, flags) in phs {
            for w in [t, off, vaddr, vaddr, filesz, memsz, flags, 0x1000] {
                b.extend_from_slice(&w.to_be_bytes());
            }
        }
        while b.len() < len {
            b.push(b.len() as u8);
        }
        b
    }

    const TEXT: Ph = (PT_LOAD, 0x1000, 0x1000_0000, 0x800, 0x800, 5);
    const DATA: Ph = (PT_LOAD, 0x2000, 0x1001_0000, 0x100, 0x3000, 6);

    fn plan(img: &[u8]) -> Result<LoadPlan, ElfError> {
        load_plan(img, USER_BASE, USER_END)
    }

    #[test]
    fn plans_text_and_data() {
        let stack = (0x6474_e551, 0, 0, 0, 0, 6); // PT_GNU_STACK is ignored
        let img = image(0x1000_0100, &[TEXT, DATA, stack], 0x2100);
        let p = plan(&img).unwrap();
        assert_eq!(p.entry, 0x1000_0100);
        assert_eq!(
            p.segments.as_slice(),
            [
                Segment {
                    vaddr: 0x1000_0000,
                    memsz: 0x800,
                    file_offset: 0x1000,
                    filesz: 0x800,
                    rights: Rights::RX
                },
                Segment {
                    vaddr: 0x1001_0000,
                    memsz: 0x3000,
                    file_offset: 0x2000,
                    filesz: 0x100,
                    rights: Rights::RW
                },
            ]
        );
    }

    #[test]
    fn header_checks() {
        let good = image(0x1000_0100, &[TEXT], 0x1800);
        assert!(plan(&good).is_ok());
        let with = |off: usize, bytes: &[u8]| {
            let mut b = good.clone();
            b[off..off + bytes.len()].copy_from_slice(bytes);
            plan(&b)
        };
        assert_eq!(plan(&good[..51]), Err(ElfError::TooShort));
        assert_eq!(with(0, b"\x7fELG"), Err(ElfError::NotElf));
        assert_eq!(with(4, &[2]), Err(ElfError::NotElf32));
        assert_eq!(with(5, &[1]), Err(ElfError::NotBigEndian));
        assert_eq!(with(6, &[2]), Err(ElfError::BadVersion));
        assert_eq!(with(18, &[0, 21]), Err(ElfError::NotPowerPc));
        assert_eq!(with(16, &[0, 3]), Err(ElfError::NotExecutable));
        assert_eq!(with(42, &[0, 16]), Err(ElfError::BadProgramHeaders));
        assert_eq!(with(44, &[0, 0]), Err(ElfError::BadProgramHeaders));
        assert_eq!(with(44, &[0xff, 0xff]), Err(ElfError::BadProgramHeaders));
        assert_eq!(
            with(28, &[0xff, 0xff, 0xff, 0xf0]),
            Err(ElfError::BadProgramHeaders)
        );
        assert_eq!(
            with(24, &[0x10, 0, 0x08, 0]),
            Err(ElfError::EntryNotExecutable)
        );
    }

    #[test]
    fn segment_checks() {
        let e = 0x1000_0100;
        let one = |ph: Ph| plan(&image(e, &[TEXT, ph], 0x3000));
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x1001_0000, 0x200, 0x100, 6)),
            Err(ElfError::FileSizeExceedsMemSize)
        );
        assert_eq!(
            one((PT_LOAD, 0x2f00, 0x1001_0000, 0x200, 0x200, 6)),
            Err(ElfError::FileRangeOutsideImage)
        );
        assert_eq!(
            one((PT_LOAD, 0xffff_ff00, 0x1001_0000, 0x200, 0x200, 6)),
            Err(ElfError::FileRangeOutsideImage)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x0fff_f000, 0x100, 0x1000, 6)),
            Err(ElfError::OutsideUserSpace)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0xefff_f000, 0x100, 0x1001, 6)),
            Err(ElfError::OutsideUserSpace)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0xffff_f000, 0x100, 0x2000, 6)),
            Err(ElfError::OutsideUserSpace)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x1000_07ff, 0x100, 0x100, 6)),
            Err(ElfError::Overlap)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x0fff_ff00, 0, 0x101, 6)),
            Err(ElfError::OutsideUserSpace)
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x1000_0800, 0x100, 0x100, 0)),
            Err(ElfError::NoRights)
        );
        assert_eq!(
            one((PT_INTERP, 0x2000, 0, 0x10, 0, 4)),
            Err(ElfError::Dynamic)
        );
        // Adjacent segments sharing a page are fine; empty ones are dropped.
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x1000_0800, 0x100, 0x100, 6))
                .unwrap()
                .segments
                .len(),
            2
        );
        assert_eq!(
            one((PT_LOAD, 0x2000, 0x1000_0000, 0, 0, 6))
                .unwrap()
                .segments
                .len(),
            1
        );
        let many: Vec<Ph> = (0..9)
            .map(|i| (PT_LOAD, 0x1000, 0x1000_0000 + i * 0x1000, 0x10, 0x10, 5))
            .collect();
        assert_eq!(
            plan(&image(e, &many, 0x2000)),
            Err(ElfError::TooManySegments)
        );
        assert_eq!(
            plan(&image(e, &[(4, 0, 0, 0, 0, 4)], 0x100)),
            Err(ElfError::NoSegments)
        );
        // The entry must be in an executable segment, not merely a mapped one.
        assert_eq!(
            plan(&image(0x1001_0000, &[TEXT, DATA], 0x3000)),
            Err(ElfError::EntryNotExecutable)
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = plan(&bytes);
        }

        #[test]
        fn mutated_images_never_panic_and_plans_hold(
            edits in proptest::collection::vec((0..180usize, any::<u8>()), 1..10),
            cut in 0..0x3000usize,
            base in prop_oneof![Just(USER_BASE), any::<u32>()],
            end in prop_oneof![Just(USER_END), any::<u32>()],
        ) {
            let mut img = image(0x1000_0100, &[TEXT, DATA, (4, 0, 0, 0, 0, 4)], 0x3000);
            for (pos, val) in edits {
                img[pos] = val;
            }
            img.truncate(cut.max(1));
            if let Ok(p) = load_plan(&img, base, end) {
                prop_assert!(!p.segments.is_empty());
                for (i, s) in p.segments.iter().enumerate() {
                    prop_assert!(s.filesz <= s.memsz);
                    prop_assert!(s.file_offset as u64 + s.filesz as u64 <= img.len() as u64);
                    prop_assert!(s.vaddr >= base && s.vaddr as u64 + s.memsz as u64 <= end as u64);
                    prop_assert!(!s.rights.is_empty());
                    for t in &p.segments[i + 1..] {
                        prop_assert!(s.end() <= t.vaddr || t.end() <= s.vaddr);
                    }
                }
                prop_assert!(p.segments.iter().any(|s| s.rights.contains(Rights::X) && p.entry >= s.vaddr && p.entry < s.end()));
            }
        }
    }
}
