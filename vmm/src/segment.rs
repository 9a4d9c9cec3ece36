//! Guest-physical memory as linear segments (paper §4.2: "the VMM organizes guest-physical
//! memory in linear segments ... checks whether the accessed guest-physical address is
//! within the segment limits").
//!
//! A [`Segment`] maps a contiguous guest-physical range onto an equally long range of the
//! VMM's own address space, where the VMM holds the backing memory: the VMM answers a
//! guest's page fault by mapping (L4 map item) the backing page from there, and it reads or
//! writes guest memory there when emulating an instruction. [`GuestMemory`] holds up to `N`
//! disjoint segments and finds the one an access falls in.
//!
//! Invariants:
//! - a segment is at least one byte long, lies below 2^36 in guest-physical space (the 440's
//!   physical addresses are 36 bits: TLB word 1 ERPN:RPN, PPC440 UM "Memory Management")
//!   and inside the VMM's 32-bit address space; [`Segment::new`] is the only constructor;
//! - the segments of a [`GuestMemory`] never overlap in guest-physical space and are kept
//!   sorted by base. Host ranges may alias (two guest ranges backed by the same memory);
//! - an access translates only if all of its bytes lie in one segment; one that runs past
//!   a segment's end is rejected even if another segment follows without a gap, so a
//!   caller never gets a host range that is only partly what it asked for;
//! - no arithmetic here can overflow: guest-physical values are computed in `u64` from
//!   values below 2^36 and 2^32, host offsets are below a segment's size.

use core::fmt;
use kestrel_devices::bus::{GuestRam, OutOfRam};

/// Width of a 440 physical address in bits.
pub const GUEST_PHYS_BITS: u32 = 36;

/// One past the highest guest-physical address: 64 GiB.
pub const GUEST_PHYS_LIMIT: u64 = 1 << GUEST_PHYS_BITS;

/// One past the highest address of the VMM's 32-bit address space.
const HOST_LIMIT: u64 = 1 << 32;

/// A guest-physical address, below [`GUEST_PHYS_LIMIT`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct GuestPhysAddr(u64);

impl GuestPhysAddr {
    /// `addr`, if it fits the 440's 36-bit physical address space.
    pub const fn new(addr: u64) -> Result<GuestPhysAddr, SegmentError> {
        if addr < GUEST_PHYS_LIMIT {
            Ok(GuestPhysAddr(addr))
        } else {
            Err(SegmentError::AddressTooWide)
        }
    }

    /// A 32-bit address: always valid (the low 4 GiB, where a 440 guest's RAM and most of
    /// its devices live).
    pub const fn from_u32(addr: u32) -> GuestPhysAddr {
        GuestPhysAddr(addr as u64)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + offset`, if that is still a guest-physical address.
    pub const fn checked_add(self, offset: u64) -> Option<GuestPhysAddr> {
        match self.0.checked_add(offset) {
            Some(a) if a < GUEST_PHYS_LIMIT => Some(GuestPhysAddr(a)),
            _ => None,
        }
    }
}

impl fmt::Display for GuestPhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpa:{:#011x}", self.0)
    }
}

/// An address in the VMM's own (32-bit virtual) address space, where it keeps the memory
/// that backs guest-physical memory.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct HostAddr(u32);

impl HostAddr {
    pub const fn new(addr: u32) -> HostAddr {
        HostAddr(addr)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + offset`, if that does not wrap past the end of the address space.
    pub const fn checked_add(self, offset: u32) -> Option<HostAddr> {
        match self.0.checked_add(offset) {
            Some(a) => Some(HostAddr(a)),
            None => None,
        }
    }
}

impl fmt::Display for HostAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host:{:#010x}", self.0)
    }
}

/// Why a segment or an access was rejected. Each message says what is wrong and, where
/// it is a configuration mistake, what to change.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SegmentError {
    /// The address is beyond the 440's 36-bit physical address space (64 GiB).
    AddressTooWide,
    /// A segment must be at least one byte long.
    EmptySegment,
    /// The segment would run past the end of the 36-bit guest-physical address space;
    /// lower its base or shrink it.
    GuestRangeOverflow,
    /// The segment's backing memory would run past the end of the VMM's 32-bit address
    /// space; lower its host base or shrink it.
    HostRangeOverflow,
    /// The segment overlaps `existing` in guest-physical space; move or shrink one of them.
    Overlap { existing: Segment },
    /// Every segment slot is in use; build the VMM with a larger segment capacity.
    Full,
    /// An access of zero bytes has no address range to check.
    EmptyAccess,
    /// No segment contains the address: the guest touched guest-physical memory it does
    /// not have (inject a machine check or stop the guest).
    Unmapped,
    /// The access starts inside a segment but runs past its end (or into the next
    /// segment); split it at the segment boundary.
    CrossesSegmentEnd,
}

impl SegmentError {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AddressTooWide => "address beyond the 36-bit guest-physical address space",
            Self::EmptySegment => "segment must be at least one byte long",
            Self::GuestRangeOverflow => {
                "segment runs past the 36-bit guest-physical address space (lower or shrink it)"
            }
            Self::HostRangeOverflow => {
                "segment backing runs past the VMM's 32-bit address space (lower or shrink it)"
            }
            Self::Overlap { .. } => "segment overlaps an existing one (move or shrink one)",
            Self::Full => "no free segment slot (raise the segment capacity)",
            Self::EmptyAccess => "zero-byte access",
            Self::Unmapped => "guest-physical address not in any segment",
            Self::CrossesSegmentEnd => "access runs past the end of its segment (split it)",
        }
    }
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if let Self::Overlap { existing } = self {
            write!(f, ": {existing}")?;
        }
        Ok(())
    }
}

/// A guest-physical range `[guest_base, guest_base + size)` backed by the VMM's memory at
/// `[host_base, host_base + size)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Segment {
    guest_base: GuestPhysAddr,
    size: u32,
    host_base: HostAddr,
}

impl Segment {
    /// Checks that the segment is non-empty and that both ranges fit their address spaces
    /// (ending exactly at 2^36 or 2^32 is allowed).
    pub const fn new(
        guest_base: GuestPhysAddr,
        size: u32,
        host_base: HostAddr,
    ) -> Result<Segment, SegmentError> {
        if size == 0 {
            return Err(SegmentError::EmptySegment);
        }
        // Both sums are below 2^37: no u64 overflow.
        if guest_base.0 + size as u64 > GUEST_PHYS_LIMIT {
            return Err(SegmentError::GuestRangeOverflow);
        }
        if host_base.0 as u64 + size as u64 > HOST_LIMIT {
            return Err(SegmentError::HostRangeOverflow);
        }
        Ok(Segment {
            guest_base,
            size,
            host_base,
        })
    }

    pub const fn guest_base(&self) -> GuestPhysAddr {
        self.guest_base
    }

    pub const fn size(&self) -> u32 {
        self.size
    }

    pub const fn host_base(&self) -> HostAddr {
        self.host_base
    }

    /// One past the last guest-physical byte (at most [`GUEST_PHYS_LIMIT`]).
    pub const fn guest_end(&self) -> u64 {
        self.guest_base.0 + self.size as u64
    }

    pub const fn contains(&self, gpa: GuestPhysAddr) -> bool {
        self.guest_base.0 <= gpa.0 && gpa.0 < self.guest_end()
    }

    /// Whether the guest-physical ranges share a byte.
    pub const fn overlaps(&self, other: &Segment) -> bool {
        self.guest_base.0 < other.guest_end() && other.guest_base.0 < self.guest_end()
    }

    /// The host address of `len` bytes at `gpa`, if all of them lie in this segment.
    pub const fn translate(&self, gpa: GuestPhysAddr, len: u32) -> Result<HostAddr, SegmentError> {
        if len == 0 {
            return Err(SegmentError::EmptyAccess);
        }
        if !self.contains(gpa) {
            return Err(SegmentError::Unmapped);
        }
        // gpa is inside, so offset < size; offset + len < 2^33 cannot overflow u64.
        let offset = gpa.0 - self.guest_base.0;
        if offset + len as u64 > self.size as u64 {
            return Err(SegmentError::CrossesSegmentEnd);
        }
        // host_base + size <= 2^32 (checked in `new`) and offset < size.
        Ok(HostAddr(self.host_base.0 + offset as u32))
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{:#011x}, {:#011x}) -> {}",
            self.guest_base.0,
            self.guest_end(),
            self.host_base
        )
    }
}

/// Placeholder for unused slots; never visible outside `GuestMemory`.
const UNUSED: Segment = Segment {
    guest_base: GuestPhysAddr(0),
    size: 0,
    host_base: HostAddr(0),
};

/// A guest's physical memory map: up to `N` disjoint segments, sorted by guest base.
#[derive(Clone, Debug)]
pub struct GuestMemory<const N: usize> {
    /// `slots[..len]` are the segments, sorted by `guest_base`; the rest are `UNUSED`.
    slots: [Segment; N],
    len: usize,
}

impl<const N: usize> Default for GuestMemory<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> GuestMemory<N> {
    pub const fn new() -> Self {
        GuestMemory {
            slots: [UNUSED; N],
            len: 0,
        }
    }

    /// The segments, sorted by guest base.
    pub fn segments(&self) -> &[Segment] {
        &self.slots[..self.len]
    }

    pub const fn len(&self) -> usize {
        self.len
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `segment`. Fails without changing anything if it overlaps an existing segment
    /// or all `N` slots are in use.
    pub fn add(&mut self, segment: Segment) -> Result<(), SegmentError> {
        // Validate first: overlap, then capacity.
        if let Some(existing) = self.segments().iter().find(|s| s.overlaps(&segment)) {
            return Err(SegmentError::Overlap {
                existing: *existing,
            });
        }
        if self.len == N {
            return Err(SegmentError::Full);
        }
        let at = self
            .segments()
            .partition_point(|s| s.guest_base < segment.guest_base);
        self.slots.copy_within(at..self.len, at + 1);
        self.slots[at] = segment;
        self.len += 1;
        Ok(())
    }

    /// The segment containing `gpa`.
    pub fn segment_of(&self, gpa: GuestPhysAddr) -> Option<&Segment> {
        // The last segment starting at or below gpa is the only one that can contain it.
        let after = self.segments().partition_point(|s| s.guest_base <= gpa);
        let candidate = self.segments().get(after.checked_sub(1)?)?;
        candidate.contains(gpa).then_some(candidate)
    }

    /// The host address of `len` bytes at `gpa`, if all of them lie in one segment.
    pub fn translate(&self, gpa: GuestPhysAddr, len: u32) -> Result<HostAddr, SegmentError> {
        if len == 0 {
            return Err(SegmentError::EmptyAccess);
        }
        self.segment_of(gpa)
            .ok_or(SegmentError::Unmapped)?
            .translate(gpa, len)
    }
}

/// Guest RAM as a device model sees it ([`GuestRam`]): the segments of a [`GuestMemory`]
/// over the VMM's memory that backs them, given as one byte slice starting at host address
/// `host_base`. Every access is checked twice: against the segments (all bytes in one) and
/// against the slice (the translated host range must lie in it).
pub struct SegmentRam<'a, const N: usize> {
    pub map: GuestMemory<N>,
    host_base: u32,
    bytes: &'a mut [u8],
}

impl<'a, const N: usize> SegmentRam<'a, N> {
    /// `bytes` is the VMM memory at host addresses `host_base..host_base + bytes.len()`.
    pub fn new(map: GuestMemory<N>, host_base: u32, bytes: &'a mut [u8]) -> Self {
        SegmentRam {
            map,
            host_base,
            bytes,
        }
    }

    /// The slice range backing `len` bytes at `gpa`.
    fn range(&self, gpa: u64, len: usize) -> Option<core::ops::Range<usize>> {
        let g = GuestPhysAddr::new(gpa).ok()?;
        let host = self.map.translate(g, u32::try_from(len).ok()?).ok()?.get();
        let start = host.checked_sub(self.host_base)? as usize;
        let end = start.checked_add(len)?;
        (end <= self.bytes.len()).then_some(start..end)
    }
}

impl<const N: usize> GuestRam for SegmentRam<'_, N> {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), OutOfRam> {
        let r = self.range(gpa, buf.len()).ok_or(OutOfRam {
            gpa,
            len: buf.len(),
        })?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), OutOfRam> {
        let r = self.range(gpa, data.len()).ok_or(OutOfRam {
            gpa,
            len: data.len(),
        })?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::string::ToString;
    use std::vec::Vec;

    fn gpa(a: u64) -> GuestPhysAddr {
        GuestPhysAddr::new(a).expect("test address below 2^36")
    }

    fn seg(guest: u64, size: u32, host: u32) -> Segment {
        Segment::new(gpa(guest), size, HostAddr::new(host)).expect("valid test segment")
    }

    #[test]
    fn addresses_are_36_bits() {
        assert_eq!(
            GuestPhysAddr::new(GUEST_PHYS_LIMIT - 1).map(GuestPhysAddr::get),
            Ok((1 << 36) - 1)
        );
        assert_eq!(
            GuestPhysAddr::new(GUEST_PHYS_LIMIT),
            Err(SegmentError::AddressTooWide)
        );
        assert_eq!(
            GuestPhysAddr::new(u64::MAX),
            Err(SegmentError::AddressTooWide)
        );
        assert_eq!(
            gpa(GUEST_PHYS_LIMIT - 2).checked_add(1),
            Some(gpa(GUEST_PHYS_LIMIT - 1))
        );
        assert_eq!(gpa(GUEST_PHYS_LIMIT - 1).checked_add(1), None);
        assert_eq!(gpa(1).checked_add(u64::MAX), None);
        assert_eq!(GuestPhysAddr::from_u32(u32::MAX).get(), 0xFFFF_FFFF);
        assert_eq!(HostAddr::new(u32::MAX).checked_add(1), None);
        assert_eq!(gpa(0xE_F600_0300).to_string(), "gpa:0xef6000300");
    }

    #[test]
    fn segment_validation() {
        let h = HostAddr::new(0x1000_0000);
        assert_eq!(Segment::new(gpa(0), 0, h), Err(SegmentError::EmptySegment));
        // Ending exactly at 2^36 or 2^32 is fine; one byte more is not.
        assert!(Segment::new(gpa(GUEST_PHYS_LIMIT - 4096), 4096, h).is_ok());
        assert_eq!(
            Segment::new(gpa(GUEST_PHYS_LIMIT - 4096), 4097, h),
            Err(SegmentError::GuestRangeOverflow)
        );
        assert_eq!(
            Segment::new(gpa(GUEST_PHYS_LIMIT - 1), u32::MAX, h),
            Err(SegmentError::GuestRangeOverflow)
        );
        assert!(Segment::new(gpa(0), 0x1000, HostAddr::new(0xFFFF_F000)).is_ok());
        assert_eq!(
            Segment::new(gpa(0), 0x1001, HostAddr::new(0xFFFF_F000)),
            Err(SegmentError::HostRangeOverflow)
        );
        assert!(Segment::new(gpa(0), u32::MAX, HostAddr::new(1)).is_ok());
        assert_eq!(
            Segment::new(gpa(0), u32::MAX, HostAddr::new(2)),
            Err(SegmentError::HostRangeOverflow)
        );
    }

    #[test]
    fn segment_translate() {
        // 128 MiB of guest RAM at 0, backed at 0x4000_0000 in the VMM.
        let ram = seg(0, 128 << 20, 0x4000_0000);
        assert_eq!(ram.translate(gpa(0), 4), Ok(HostAddr::new(0x4000_0000)));
        assert_eq!(
            ram.translate(gpa(0x1234), 1),
            Ok(HostAddr::new(0x4000_1234))
        );
        let last = (128 << 20) - 4;
        assert_eq!(
            ram.translate(gpa(last), 4),
            Ok(HostAddr::new(0x4000_0000 + last as u32))
        );
        assert_eq!(
            ram.translate(gpa(last), 5),
            Err(SegmentError::CrossesSegmentEnd)
        );
        assert_eq!(
            ram.translate(gpa(last + 1), 4),
            Err(SegmentError::CrossesSegmentEnd)
        );
        assert_eq!(
            ram.translate(gpa(128 << 20), 1),
            Err(SegmentError::Unmapped)
        );
        assert_eq!(ram.translate(gpa(0), 0), Err(SegmentError::EmptyAccess));
        assert_eq!(
            ram.translate(gpa(0), u32::MAX),
            Err(SegmentError::CrossesSegmentEnd)
        );
        // A segment at the very top of both address spaces.
        let top = seg(GUEST_PHYS_LIMIT - 16, 16, u32::MAX - 15);
        assert_eq!(
            top.translate(gpa(GUEST_PHYS_LIMIT - 1), 1),
            Ok(HostAddr::new(u32::MAX))
        );
        assert_eq!(
            top.translate(gpa(GUEST_PHYS_LIMIT - 1), u32::MAX),
            Err(SegmentError::CrossesSegmentEnd)
        );
    }

    #[test]
    fn guest_memory_keeps_segments_sorted_and_disjoint() {
        let mut mem = GuestMemory::<4>::new();
        assert!(mem.is_empty());
        mem.add(seg(0x1000_0000, 0x1000, 0x2000)).expect("first");
        mem.add(seg(0, 0x1000, 0)).expect("below");
        mem.add(seg(0x1_0000_0000, 0x1000, 0x3000))
            .expect("above 4 GiB");
        let bases: Vec<u64> = mem
            .segments()
            .iter()
            .map(|s| s.guest_base().get())
            .collect();
        assert_eq!(bases, [0, 0x1000_0000, 0x1_0000_0000]);
        // Overlap at either end, or containment, is rejected and changes nothing.
        let existing = seg(0x1000_0000, 0x1000, 0x2000);
        for bad in [
            seg(0x0FFF_FFFF, 2, 0),
            seg(0x1000_0FFF, 1, 0),
            seg(0x0F00_0000, 1 << 28, 0),
        ] {
            assert_eq!(mem.add(bad), Err(SegmentError::Overlap { existing }));
        }
        assert_eq!(mem.len(), 3);
        // Touching is not overlapping.
        mem.add(seg(0x1000, 0x1000, 0x1000)).expect("adjacent");
        assert_eq!(mem.add(seg(0x5000, 1, 0)), Err(SegmentError::Full));
        assert_eq!(mem.len(), 4);
    }

    #[test]
    fn guest_memory_translate() {
        let mut mem = GuestMemory::<4>::new();
        mem.add(seg(0, 0x1000, 0x8000)).expect("low");
        mem.add(seg(0x1000, 0x1000, 0x2_0000))
            .expect("adjacent, backed elsewhere");
        mem.add(seg(0xE_F600_0000, 0x1000, 0x9000)).expect("high");
        assert_eq!(mem.translate(gpa(0xFFC), 4), Ok(HostAddr::new(0x8FFC)));
        assert_eq!(mem.translate(gpa(0x1000), 4), Ok(HostAddr::new(0x2_0000)));
        // Straddles two segments that are adjacent in guest space: rejected.
        assert_eq!(
            mem.translate(gpa(0xFFE), 4),
            Err(SegmentError::CrossesSegmentEnd)
        );
        assert_eq!(mem.translate(gpa(0x2000), 1), Err(SegmentError::Unmapped));
        assert_eq!(
            mem.translate(gpa(0xE_F600_0FFF), 1),
            Ok(HostAddr::new(0x9FFF))
        );
        assert_eq!(
            mem.translate(gpa(0xE_F600_1000), 1),
            Err(SegmentError::Unmapped)
        );
        assert_eq!(mem.translate(gpa(5), 0), Err(SegmentError::EmptyAccess));
        assert_eq!(
            mem.segment_of(gpa(0x1FFF)).map(Segment::host_base),
            Some(HostAddr::new(0x2_0000))
        );
        assert_eq!(mem.segment_of(gpa(GUEST_PHYS_LIMIT - 1)), None);
        assert_eq!(
            GuestMemory::<0>::new().translate(gpa(0), 1),
            Err(SegmentError::Unmapped)
        );
        assert_eq!(
            GuestMemory::<0>::new().add(seg(0, 1, 0)),
            Err(SegmentError::Full)
        );
    }

    #[test]
    fn errors_have_messages() {
        let all = [
            SegmentError::AddressTooWide,
            SegmentError::EmptySegment,
            SegmentError::GuestRangeOverflow,
            SegmentError::HostRangeOverflow,
            SegmentError::Overlap {
                existing: seg(0, 1, 0),
            },
            SegmentError::Full,
            SegmentError::EmptyAccess,
            SegmentError::Unmapped,
            SegmentError::CrossesSegmentEnd,
        ];
        for e in all {
            assert!(!e.to_string().is_empty());
        }
        let overlap = SegmentError::Overlap {
            existing: seg(0x1000, 0x1000, 0x8000),
        };
        assert!(overlap
            .to_string()
            .ends_with("[0x000001000, 0x000002000) -> host:0x00008000"));
    }

    /// The reference model: a plain list of accepted segments, searched linearly.
    struct Model {
        segments: Vec<(u64, u64, u32)>, // guest base, guest end, host base
        capacity: usize,
    }

    impl Model {
        fn add(&mut self, base: u64, size: u32, host: u32) -> Result<(), ()> {
            let end = base + size as u64;
            let valid = size > 0
                && end <= GUEST_PHYS_LIMIT
                && host as u64 + size as u64 <= 1 << 32
                && self.segments.iter().all(|&(b, e, _)| end <= b || e <= base)
                && self.segments.len() < self.capacity;
            if valid {
                self.segments.push((base, end, host));
                Ok(())
            } else {
                Err(())
            }
        }

        fn translate(&self, addr: u64, len: u32) -> Result<u32, SegmentError> {
            if len == 0 {
                return Err(SegmentError::EmptyAccess);
            }
            let &(base, end, host) = self
                .segments
                .iter()
                .find(|&&(b, e, _)| b <= addr && addr < e)
                .ok_or(SegmentError::Unmapped)?;
            if addr + len as u64 > end {
                return Err(SegmentError::CrossesSegmentEnd);
            }
            Ok(host + (addr - base) as u32)
        }
    }

    /// Guest bases crowded into a small window (so segments collide) or at the top of the
    /// 36-bit space; sizes small or huge; host bases low or at the top of 32 bits.
    fn arb_candidate() -> impl Strategy<Value = (u64, u32, u32)> {
        let base = prop_oneof![
            0u64..0x4000,
            (GUEST_PHYS_LIMIT - 0x4000)..(GUEST_PHYS_LIMIT + 0x10),
            any::<u64>(),
        ];
        let size = prop_oneof![0u32..0x1000, any::<u32>()];
        let host = prop_oneof![0u32..0x1_0000, (u32::MAX - 0x4000)..=u32::MAX];
        (base, size, host)
    }

    fn arb_access() -> impl Strategy<Value = (u64, u32)> {
        let addr = prop_oneof![
            0u64..0x5000,
            (GUEST_PHYS_LIMIT - 0x5000)..GUEST_PHYS_LIMIT,
            0u64..GUEST_PHYS_LIMIT,
        ];
        let len = prop_oneof![0u32..=8, 0u32..0x2000, any::<u32>()];
        (addr, len)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn guest_memory_matches_reference_model(
            candidates in prop::collection::vec(arb_candidate(), 0..16),
            accesses in prop::collection::vec(arb_access(), 0..64),
        ) {
            let mut mem = GuestMemory::<6>::new();
            let mut model = Model { segments: Vec::new(), capacity: 6 };
            for (base, size, host) in candidates {
                let ours = GuestPhysAddr::new(base)
                    .and_then(|g| Segment::new(g, size, HostAddr::new(host)))
                    .and_then(|s| mem.add(s));
                let theirs =
                    if base < GUEST_PHYS_LIMIT { model.add(base, size, host) } else { Err(()) };
                prop_assert_eq!(
                    ours.is_ok(),
                    theirs.is_ok(),
                    "add {:#x}+{:#x} -> {:#x}: {:?}", base, size, host, ours
                );
            }
            prop_assert_eq!(mem.len(), model.segments.len());
            for pair in mem.segments().windows(2) {
                prop_assert!(pair[0].guest_end() <= pair[1].guest_base().get(), "sorted, disjoint");
            }
            for (addr, len) in accesses {
                let ours = mem.translate(gpa(addr), len).map(HostAddr::get);
                prop_assert_eq!(ours, model.translate(addr, len), "access {:#x}+{:#x}", addr, len);
                if let Ok(host) = ours {
                    // The whole host range lies inside the segment's backing.
                    let s = mem.segment_of(gpa(addr)).expect("translated, so mapped");
                    let backing_end = s.host_base().get() as u64 + s.size() as u64;
                    prop_assert!(host as u64 + len as u64 <= backing_end);
                }
            }
        }

        #[test]
        fn accesses_straddling_a_segment_end_are_rejected(
            base in 0u64..(GUEST_PHYS_LIMIT - (1 << 32)),
            size in 1u32..0x10_0000,
            host in 0u32..0x1000_0000,
            inside in 1u32..=128,
            beyond in 1u32..=128,
        ) {
            let s = Segment::new(gpa(base), size, HostAddr::new(host)).expect("fits");
            let inside = inside.min(size);
            let start = s.guest_end() - inside as u64;
            // Exactly up to the end: fine. One byte or more past it: rejected.
            let last_bytes = Ok(HostAddr::new(host + size - inside));
            prop_assert_eq!(s.translate(gpa(start), inside), last_bytes);
            let too_long = s.translate(gpa(start), inside + beyond);
            prop_assert_eq!(too_long, Err(SegmentError::CrossesSegmentEnd));
            prop_assert_eq!(s.translate(gpa(s.guest_end()), 1), Err(SegmentError::Unmapped));
            if base > 0 {
                prop_assert_eq!(s.translate(gpa(base - 1), 2), Err(SegmentError::Unmapped));
            }
        }

        #[test]
        fn never_panics(
            base in any::<u64>(),
            size in any::<u32>(),
            host in any::<u32>(),
            addr in any::<u64>(),
            len in any::<u32>(),
            offset in any::<u64>(),
        ) {
            let g = GuestPhysAddr::new(base);
            let _ = GuestPhysAddr::new(addr).map(|a| a.checked_add(offset));
            let _ = HostAddr::new(host).checked_add(size);
            if let Ok(s) = g.and_then(|g| Segment::new(g, size, HostAddr::new(host))) {
                let mut mem = GuestMemory::<2>::new();
                prop_assert!(mem.add(s).is_ok());
                if let Ok(a) = GuestPhysAddr::new(addr) {
                    let _ = s.translate(a, len);
                    let _ = mem.translate(a, len);
                    let _ = mem.segment_of(a);
                }
                let _ = s.to_string();
            }
        }
    }

    #[test]
    fn segment_ram_reads_and_writes_inside_segments_only() {
        let mut map = GuestMemory::<2>::new();
        map.add(seg(0, 0x100, 0x1000)).unwrap();
        map.add(seg(0x7_0000_0000, 0x100, 0x1100)).unwrap();
        let mut host = std::vec![0u8; 0x200];
        let mut ram = SegmentRam::new(map, 0x1000, &mut host);
        ram.write(0x10, b"kestrel").unwrap();
        ram.write(0x7_0000_00f8, &[9; 8]).unwrap();
        let mut buf = [0u8; 7];
        ram.read(0x10, &mut buf).unwrap();
        assert_eq!(&buf, b"kestrel");
        // Past a segment's end, between segments, beyond 2^36: refused, nothing written.
        assert_eq!(
            ram.write(0xfc, &[1; 8]),
            Err(OutOfRam { gpa: 0xfc, len: 8 })
        );
        assert!(ram.read(0x100, &mut [0]).is_err());
        assert!(ram.read(1 << 40, &mut [0]).is_err());
        // `ram`'s borrow of `host` ends with its last use above.
        assert_eq!(&host[0x10..0x17], b"kestrel");
        assert_eq!(host[0x1f8..0x200], [9; 8]);
        assert_eq!(host[0xfc..0x100], [0; 4]);
    }

    #[test]
    fn segment_ram_checks_the_backing_slice() {
        let mut map = GuestMemory::<1>::new();
        // The segment claims more host memory than the slice has.
        map.add(seg(0, 0x100, 0x1000)).unwrap();
        let mut host = std::vec![0u8; 0x80];
        let mut ram = SegmentRam::new(map, 0x1000, &mut host);
        assert!(ram.write(0x7c, &[1; 4]).is_ok());
        assert!(ram.write(0x7e, &[1; 4]).is_err());
    }
}
