//! The shadow policy of the paper's §3.2 ("Virtual TLB", "Virtual Address Space
//! Protection"): merge guest-virtual → guest-physical (the [`GuestTlb`]) →
//! host-physical (the VM's guest-physical mappings, a [`GuestPhysMap`]) into one hardware
//! TLB entry with the rights of the guest's current mode, to be tagged with the hardware
//! TID of (vCPU, guest PID, guest mode) (instead of the paper's Fig. 5 TIDs 0/1/2), and
//! say when such entries must be flushed.
//!
//! Invariants of every [`HwEntry`] that [`shadow_fill`] returns (the paper: "the hardware
//! TLB always contains a subset of the virtual TLB"):
//! - **Range.** Every address it covers is translated, by the guest TLB's first match in
//!   index order (same guest PID and TS), by the *same* guest entry as the faulting
//!   address, and the whole guest-physical image lies inside one host mapping. So the
//!   hardware translation of every covered address equals the two-stage translation.
//! - **Rights.** Its permissions are a subset of the guest entry's permissions for the
//!   guest mode it was filled in (the only mode whose TID it gets), intersected with the
//!   rights the VMM granted; they always include the faulting access.
//! - **Tagged.** It carries the rights of the guest mode it was filled in (user permissions
//!   in guest user mode, supervisor permissions in guest kernel mode, [`mode_rights`]). The
//!   kernel tags it with the hardware TID it allocated for (vCPU, guest PID, guest mode)
//!   from the one pool of 8-bit TIDs it shares with native address spaces, and loads that
//!   TID into the PID register while the guest runs in that PID and mode. A guest
//!   address-space switch, a user/kernel switch and a world switch then only load another
//!   hardware PID; a guest global entry (guest TID 0) is shadowed separately under each
//!   (PID, mode) TID, never under hardware TID 0 (which would match every PID).
//! - **Space.** It lives in translation space 1 (guests run with `MSR[IS,DS]` = 1), which
//!   the kernel, the VMM and native tasks never use; the guest's own TS is folded away,
//!   which is why a guest TS change drops that vCPU's entries (see [`Event`]).
//!
//! [`ShadowTlb`] is the kernel's exact record of the hardware TLB slots it refills, for
//! native spaces and guests alike: one replacement policy over all of them, and for each
//! guest slot its owner (vCPU), hardware TID and the guest entry it came from, so that a
//! guest `tlbwe`, a revoked host mapping or a recycled TID drops exactly the slots
//! derived from it (docs/adr/0024-tagged-shadow-tlb.md).
//!
//! A hardware entry serves fetches and data alike, in the one hardware translation space
//! and under the one hardware PID. While a guest runs with `MSR[IS]` != `MSR[DS]` ("split":
//! its fetches use guest TS = IS, its data accesses TS = DS), the same effective address
//! may translate differently for the two, so the kernel fills through [`split_fill`]
//! instead: every entry is narrowed to its access class ([`HwEntry::restricted_to`]) and
//! to at most [`SPLIT_PAGE`], so that a fetch page and a data page coexist whenever they
//! are different 4 KiB pages; when the data page of an access is the page its own
//! instruction is fetched from, no pair of entries can serve both, and [`split_fill`]
//! answers [`SplitFill::Emulate`]: the kernel performs that one access in software
//! (docs/adr/0012-split-translation-spaces.md).

use crate::guest::{word0, word1, word2, GuestTlb, PageSize, Perms, Wimge};
use crate::index::{pop_lowest, BlockIndex};
use kestrel_abi::Rights;

/// The TID [`shadow_fill`] leaves in a [`HwEntry`]: the kernel tags every entry with the
/// hardware TID of (vCPU, guest PID, guest mode) ([`HwEntry::tagged`]) before installing
/// it. Hardware TID 0 matches every PID, so a guest entry never carries it.
pub const UNTAGGED: u8 = 0;

/// Number of guest owners (vCPUs) a [`ShadowTlb`] tells apart.
pub const OWNERS: usize = 8;

/// The guest-granted rights of a guest entry with `perms` while the guest runs with
/// `MSR[PR]` = `guest_pr`: its user permissions in user mode, its supervisor permissions
/// in kernel mode. Each mode has its own hardware TID, so an entry carries exactly its
/// mode's rights.
pub const fn mode_rights(perms: Perms, guest_pr: bool) -> Rights {
    if guest_pr {
        perms.user
    } else {
        perms.supervisor
    }
}

/// The kind of access that missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    Execute,
}

impl Access {
    /// The right this access needs.
    pub const fn right(self) -> Rights {
        match self {
            Access::Read => Rights::R,
            Access::Write => Rights::W,
            Access::Execute => Rights::X,
        }
    }
}

/// One host mapping of the VM's guest-physical space: the aligned window of `size` bytes
/// containing the asked-for guest-physical address starts at host-physical `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPage {
    base: u32,
    size: u32,
    rights: Rights,
    device: bool,
}

impl HostPage {
    /// Validates: `size` is a power of two of at least 4 KiB and `base` is aligned to it.
    /// `rights` are what the VMM granted; `device` marks I/O memory (mapped I and G).
    pub const fn new(base: u32, size: u32, rights: Rights, device: bool) -> Option<HostPage> {
        if !size.is_power_of_two() || size < 4096 || base & (size - 1) != 0 {
            return None;
        }
        Some(HostPage {
            base,
            size,
            rights: Rights(rights.0 & 7),
            device,
        })
    }
    pub const fn base(&self) -> u32 {
        self.base
    }
    pub const fn size(&self) -> u32 {
        self.size
    }
    pub const fn rights(&self) -> Rights {
        self.rights
    }
    pub const fn device(&self) -> bool {
        self.device
    }
    /// The host-physical address of `gpa`, which must lie in this mapping's window.
    pub const fn host_address(&self, gpa: u64) -> u32 {
        self.base + (gpa as u32 & (self.size - 1))
    }
}

/// The VM's second translation stage, guest-physical → host-physical, as the kernel's
/// mapping database knows it (the VMM establishes it as the VM's pager).
pub trait GuestPhysMap {
    /// The host mapping containing `gpa`, or `None` if the VMM has mapped nothing there.
    fn translate(&self, gpa: u64) -> Option<HostPage>;
}

/// A hardware TLB entry for a guest: always valid, always translation space 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwEntry {
    /// Effective page base, aligned to `size`.
    pub epn: u32,
    pub size: PageSize,
    /// Host-physical page base, aligned to `size`.
    pub rpn_base: u32,
    /// The hardware TID: [`UNTAGGED`] as [`shadow_fill`] returns it, the TID of (vCPU,
    /// guest PID, guest mode) once the kernel tagged it ([`HwEntry::tagged`]).
    pub tid: u8,
    /// Problem-state permissions (UR/UW/UX): guests always run in problem state, so the
    /// supervisor permissions stay 0.
    pub perms: Rights,
    pub wimge: Wimge,
}

impl HwEntry {
    pub const fn bytes(&self) -> u32 {
        self.size.bytes()
    }

    /// Whether `ea` lies in the entry's page.
    pub const fn contains(&self, ea: u32) -> bool {
        ea & !(self.bytes() - 1) == self.epn
    }

    /// Whether the entry's page overlaps the effective-address range `[base, base + len)`.
    pub const fn overlaps(&self, base: u32, len: u64) -> bool {
        ranges_overlap(self.epn as u64, self.bytes() as u64, base as u64, len)
    }

    /// Whether the hardware uses the entry while PID `pid` is loaded (guest entries are
    /// never tagged with TID 0, which would match every PID).
    pub const fn visible_with_pid(&self, pid: u8) -> bool {
        self.tid == pid
    }

    /// The entry tagged with hardware TID `tid`.
    pub const fn tagged(self, tid: u8) -> HwEntry {
        HwEntry { tid, ..self }
    }

    /// The entry with only the permissions of `access`'s class kept: execute for
    /// fetches, read and write for data. Needed while the guest runs with `MSR[IS]` !=
    /// `MSR[DS]`, when the fill was computed for one translation space only.
    pub const fn restricted_to(self, access: Access) -> HwEntry {
        let keep = match access {
            Access::Execute => Rights::X,
            Access::Read | Access::Write => Rights::RW,
        };
        HwEntry {
            perms: self.perms.intersect(keep),
            ..self
        }
    }

    /// The entry cut down to the aligned page of `size` around `ea` (which it must
    /// contain), with the host page moved along; unchanged if it is no larger than `size`.
    pub const fn narrowed(self, ea: u32, size: PageSize) -> HwEntry {
        if self.size.bytes() <= size.bytes() {
            return self;
        }
        let epn = ea & !(size.bytes() - 1);
        HwEntry {
            epn,
            size,
            rpn_base: self.rpn_base.wrapping_add(epn.wrapping_sub(self.epn)),
            ..self
        }
    }

    /// The three `tlbwe` words (word 0 with V and TS = 1); the TID goes through
    /// `MMUCR[STID]` and is [`HwEntry::tid`].
    pub fn words(&self) -> (u32, u32, u32) {
        let w0 = word0::SIZE.set(
            (self.epn & word0::EPN.mask()) | word0::V.mask() | word0::TS.mask(),
            self.size.code() as u32,
        );
        let w1 = self.rpn_base & word1::RPN.mask();
        let mut w2 = word2::WIMGE.set(0, self.wimge.0 as u32);
        if self.perms.contains(Rights::X) {
            w2 |= word2::UX.mask();
        }
        if self.perms.contains(Rights::W) {
            w2 |= word2::UW.mask();
        }
        if self.perms.contains(Rights::R) {
            w2 |= word2::UR.mask();
        }
        (w0, w1, w2)
    }
}

const fn ranges_overlap(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a < b + b_len && b < a + a_len
}

/// What the kernel's TLB-miss handler does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillResult {
    /// Write `hw` into the hardware TLB (and record `guest_index` in the [`ShadowTlb`]),
    /// then resume the guest.
    Hit { hw: HwEntry, guest_index: u32 },
    /// No guest TLB entry matches: inject an instruction/data TLB-miss interrupt.
    GuestMiss,
    /// The first matching guest entry denies the access in the guest's current mode:
    /// inject an instruction/data storage interrupt.
    GuestProtection,
    /// The guest allows the access but the VMM has not mapped `gpa`, or not with the
    /// needed right: send the VMM a page-fault IPC for `gpa` (second stage).
    PhysMiss { gpa: u64 },
}

/// Handles a hardware TLB miss (or protection fault) of a guest at `ea` for `access`.
/// `guest_pid` is the guest's PID register, `guest_msr_pr` its `MSR[PR]`, and `guest_ts`
/// its `MSR[IS]` for fetches or `MSR[DS]` for data accesses.
///
/// Order: the guest TLB's first match in index order (none: [`FillResult::GuestMiss`]);
/// its permissions in the current guest mode ([`FillResult::GuestProtection`]); the host
/// mapping of the guest-physical address and the VMM's rights
/// ([`FillResult::PhysMiss`]); otherwise a [`FillResult::Hit`] whose page is the largest
/// 440 size that fits the guest page, the host mapping, and no earlier guest entry.
pub fn shadow_fill<M: GuestPhysMap + ?Sized>(
    guest: &GuestTlb,
    gmap: &M,
    ea: u32,
    guest_pid: u8,
    guest_msr_pr: bool,
    access: Access,
    guest_ts: bool,
) -> FillResult {
    let Some((index, entry)) = guest.lookup(ea, guest_pid, guest_ts) else {
        return FillResult::GuestMiss;
    };
    let guest_rights = mode_rights(entry.perms(), guest_msr_pr);
    if !guest_rights.contains(access.right()) {
        return FillResult::GuestProtection;
    }
    let gpa = entry.translate(ea);
    let host = match gmap.translate(gpa) {
        Some(host) if host.rights().contains(access.right()) => host,
        _ => return FillResult::PhysMiss { gpa },
    };

    let size = hw_page_size(
        guest,
        index,
        ea,
        guest_pid,
        guest_ts,
        entry.size_bytes().min(host.size() as u64),
    );
    let mask = !(size.bytes() - 1);
    let wimge = if host.device() {
        entry.wimge().union(Wimge::I).union(Wimge::G)
    } else {
        entry.wimge()
    };
    let hw = HwEntry {
        epn: ea & mask,
        size,
        rpn_base: host.host_address(gpa) & mask,
        tid: UNTAGGED,
        perms: guest_rights.intersect(host.rights()),
        wimge,
    };
    FillResult::Hit {
        hw,
        guest_index: index,
    }
}

/// The largest page a shadow entry has while the guest runs split (`MSR[IS]` !=
/// `MSR[DS]`): small enough that the page an instruction is fetched from and the pages it
/// reads or writes are separate entries unless they are the same 4 KiB page, large
/// enough that 4 KiB guest pages (Linux's) still fill with one entry each.
pub const SPLIT_PAGE: PageSize = PageSize::K4;

/// What the kernel does with a guest TLB miss or storage fault while the guest runs split
/// (`MSR[IS]` != `MSR[DS]`); see [`split_fill`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitFill {
    /// What [`shadow_fill`] would do, with a [`FillResult::Hit`] already narrowed to
    /// [`SPLIT_PAGE`] and restricted to the access class.
    Fill(FillResult),
    /// The data access at the fault address is allowed (a hit for its translation space),
    /// but its page overlaps the page the faulting instruction itself is fetched from,
    /// whose fetch translation differs or whose entry would be evicted: no hardware entry
    /// can serve both, so the kernel performs this one access in software.
    Emulate,
}

/// Handles a hardware TLB miss or storage fault at `ea` for `access` while the guest runs
/// with `MSR[IS]` = `is` != `MSR[DS]` = `ds`; `pc` is the address of the faulting
/// instruction (for a fetch, `ea` itself).
///
/// The fill is [`shadow_fill`]'s for the access's translation space (`is` for fetches,
/// `ds` for data), narrowed to [`SPLIT_PAGE`] and restricted to the access class, so an
/// entry never lets a fetch use a data translation or the reverse. A fetch is always
/// filled. A data fill whose page overlaps the fetch page of `pc` (the fill a fetch of
/// `pc` gets) would evict that entry, and the retried instruction would miss on its
/// fetch again: that fill is [`SplitFill::Emulate`] instead. Every instruction therefore
/// completes after at most one fetch fill per data fill, or has its access emulated: no
/// guest TLB contents can make two fills evict each other forever.
#[allow(clippy::too_many_arguments)]
pub fn split_fill<M: GuestPhysMap + ?Sized>(
    guest: &GuestTlb,
    gmap: &M,
    ea: u32,
    guest_pid: u8,
    guest_msr_pr: bool,
    access: Access,
    is: bool,
    ds: bool,
    pc: u32,
) -> SplitFill {
    let fetch = access == Access::Execute;
    let ts = if fetch { is } else { ds };
    let res = shadow_fill(guest, gmap, ea, guest_pid, guest_msr_pr, access, ts);
    let FillResult::Hit { hw, guest_index } = res else {
        return SplitFill::Fill(res);
    };
    let hw = hw.narrowed(ea, SPLIT_PAGE).restricted_to(access);
    if !fetch {
        let f = shadow_fill(
            guest,
            gmap,
            pc,
            guest_pid,
            guest_msr_pr,
            Access::Execute,
            is,
        );
        if let FillResult::Hit { hw: f, .. } = f {
            let f = f.narrowed(pc, SPLIT_PAGE);
            if blocks_overlap(f.epn, !(f.bytes() - 1), hw.epn, !(hw.bytes() - 1)) {
                return SplitFill::Emulate;
            }
        }
    }
    SplitFill::Fill(FillResult::Hit { hw, guest_index })
}

/// The largest 440 page size of at most `limit` bytes whose aligned page around `ea`
/// overlaps none of the guest entries before `index` that could match in this context
/// (they would win the first-match rule for part of the page): one pass over those
/// entries, see [`GuestTlb::first_match_span`] for why that is enough.
///
/// 1 KiB always qualifies: guest entries are aligned blocks of at least 1 KiB, so one
/// that overlaps the 1 KiB block around `ea` contains it, and with it `ea`; it would
/// then be the first match instead of `index`.
fn hw_page_size(guest: &GuestTlb, index: u32, ea: u32, pid: u8, ts: bool, limit: u64) -> PageSize {
    PageSize::largest_at_most(guest.first_match_span(index, ea, pid, ts, limit))
        .unwrap_or(PageSize::K1)
}

/// The original definition of [`hw_page_size`] (every size, every earlier entry): the
/// reference the one-pass version is tested against.
#[cfg(test)]
fn hw_page_size_reference(
    guest: &GuestTlb,
    index: u32,
    ea: u32,
    pid: u8,
    ts: bool,
    limit: u64,
) -> PageSize {
    let earlier = &guest.entries()[..index as usize];
    PageSize::ALL
        .iter()
        .rev()
        .copied()
        .filter(|s| u64::from(s.bytes()) <= limit)
        .find(|s| {
            let base = ea & !(s.bytes() - 1);
            !earlier.iter().any(|e| {
                e.in_context(pid, ts)
                    && e.block().is_some_and(|(b, len)| {
                        ranges_overlap(base as u64, s.bytes() as u64, b as u64, len)
                    })
            })
        })
        .unwrap_or(PageSize::K1)
}

/// Things that happen to a running VM, for [`needs_flush`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The guest loaded another PID (a guest address-space switch).
    GuestAddressSpaceSwitch,
    /// The guest changed `MSR[IS]` or `MSR[DS]`: entries were filled for the other space.
    GuestTranslationSpaceSwitch,
    /// Another VM or a native task gets the core.
    WorldSwitch,
    /// The guest's `MSR[PR]` changed (system call, interrupt, return to user).
    GuestUserKernelSwitch,
    /// A trap to the kernel or the VMM that resumes the same VM.
    VmmTrapAndResume,
    /// The guest wrote word 0, 1 or 2 of its TLB entry `index`.
    GuestTlbWrite { index: u32 },
    /// The VMM revoked part of the VM's guest-physical memory.
    HostMappingRevoked,
}

/// Whether `event` requires dropping *every* shadow entry of the vCPU (§3.2, with tagged
/// TIDs instead of Fig. 5's three):
/// - guest translation-space switch: yes, entries carry no guest TS;
/// - guest address-space switch, user/kernel switch, world switch: no, every (vCPU, guest
///   PID, mode) has its own hardware TID and the kernel only loads another PID;
/// - VMM trap and resume: no, the VMM and the kernel run in translation space 0;
/// - guest TLB write: no, only the entries derived from or shadowed by that guest entry
///   go ([`ShadowTlb::invalidate_guest_write`]);
/// - host mapping revoked: no, only the entries onto the revoked host memory go
///   ([`ShadowTlb::invalidate_host_range`]).
pub const fn needs_flush(event: Event) -> bool {
    match event {
        Event::GuestTranslationSpaceSwitch => true,
        Event::GuestAddressSpaceSwitch
        | Event::WorldSwitch
        | Event::GuestUserKernelSwitch
        | Event::VmmTrapAndResume
        | Event::GuestTlbWrite { .. }
        | Event::HostMappingRevoked => false,
    }
}

/// A set of shadow slots (bit `i` = slot `i`); iterates in ascending order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SlotMask(pub u64);

impl SlotMask {
    pub const EMPTY: SlotMask = SlotMask(0);

    pub const fn contains(self, slot: usize) -> bool {
        slot < 64 && self.0 & (1 << slot) != 0
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }
}

impl Iterator for SlotMask {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let slot = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(slot)
    }
}

/// One occupied guest slot: the hardware entry (tagged), the guest TLB index it came from
/// and the vCPU (owner, below [`OWNERS`]) whose guest TLB that is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub hw: HwEntry,
    pub guest_index: u32,
    pub owner: u8,
}

/// Where [`ShadowTlb::insert`] put an entry: write it to hardware slot `slot` and
/// invalidate the hardware slots in `invalidate` (entries it would have overlapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub slot: usize,
    pub invalidate: SlotMask,
}

/// An unoccupied slot's contents (never visible: [`ShadowTlb::slot`] checks occupancy).
const NO_SLOT: Slot = Slot {
    hw: HwEntry {
        epn: 0,
        size: PageSize::K1,
        rpn_base: 0,
        tid: 0,
        perms: Rights(0),
        wimge: Wimge(0),
    },
    guest_index: 0,
    owner: 0,
};

/// Whether two aligned power-of-two blocks, given as base and `!(size - 1)`, overlap:
/// they do iff they agree above the larger size.
#[inline(always)]
const fn blocks_overlap(a: u32, a_mask: u32, b: u32, b_mask: u32) -> bool {
    (a ^ b) & a_mask & b_mask == 0
}

/// The kernel's record of the `N` (1..=64) hardware TLB slots it refills (every slot but
/// the pinned kernel entries): slot `i` stands for whichever hardware index the kernel
/// assigns it. A slot is free, *native* (a native space's translation-space-0 refill,
/// known by its hardware TID only) or a *guest* slot (a tagged [`HwEntry`] in translation
/// space 1, with its owner and origin). One replacement policy serves both kinds: a free
/// slot if there is one, else the next slot of a round robin over all `N`.
///
/// Invariant: no two guest slots with the same TID overlap (the 440 leaves multiple hits
/// undefined; slots with different TIDs are never visible together), every guest slot
/// names its owner and guest index, and every method that drops slots returns them, so
/// the kernel can invalidate exactly those hardware entries. Native refills need no
/// overlap check: they follow a miss, so no entry of their TID matched.
///
/// Layout: `occupied` has bit `i` for each guest slot, `native` for each native slot, and
/// dropping slots only clears their bits. `filed` has the slots ever written by a guest
/// fill: `slots[i]` (with `epn`/`mask`, its page as base and `!(bytes - 1)`) keeps the last
/// guest entry slot `i` held, which stays filed in `index` (by 16 MiB region and 4 KiB page
/// number), in `derived[slots[i].guest_index]` and in `owned[slots[i].owner]` until the slot
/// is written by a guest fill again. So every lookup ANDs with `occupied`: a page is tested
/// only against the few guest slots that may overlap it, and the slots of owner `o`
/// derived from guest entry `g` are `derived[g] & owned[o] & occupied`, which makes
/// dropping them O(1). `tid` holds the hardware TID of every slot, guest or native.
#[derive(Clone, Debug)]
pub struct ShadowTlb<const N: usize> {
    slots: [Slot; N],
    epn: [u32; N],
    mask: [u32; N],
    tid: [u8; N],
    occupied: u64,
    native: u64,
    filed: u64,
    index: BlockIndex,
    derived: [u64; 64],
    owned: [u64; OWNERS],
    next_victim: usize,
}

impl<const N: usize> Default for ShadowTlb<N> {
    fn default() -> Self {
        ShadowTlb::new()
    }
}

impl<const N: usize> PartialEq for ShadowTlb<N> {
    /// Equal guest slots (contents included), native slots (TIDs) and next victim.
    fn eq(&self, other: &Self) -> bool {
        self.occupied == other.occupied
            && self.native == other.native
            && self.next_victim == other.next_victim
            && SlotMask(self.occupied).all(|i| self.slots[i] == other.slots[i])
            && SlotMask(self.native).all(|i| self.tid[i] == other.tid[i])
    }
}

impl<const N: usize> Eq for ShadowTlb<N> {}

impl<const N: usize> ShadowTlb<N> {
    const SLOTS_FIT_A_MASK: () = assert!(N >= 1 && N <= 64, "a ShadowTlb has 1..=64 slots");
    /// Every slot.
    const ALL: u64 = if N == 64 {
        u64::MAX
    } else {
        (1u64 << (N % 64)) - 1
    };

    /// All slots free.
    pub const fn new() -> ShadowTlb<N> {
        #[allow(clippy::let_unit_value)]
        let () = Self::SLOTS_FIT_A_MASK;
        ShadowTlb {
            slots: [NO_SLOT; N],
            epn: [0; N],
            mask: [0; N],
            tid: [0; N],
            occupied: 0,
            native: 0,
            filed: 0,
            index: BlockIndex::new(),
            derived: [0; 64],
            owned: [0; OWNERS],
            next_victim: 0,
        }
    }

    /// Guest slot `slot`, if it is one.
    pub fn slot(&self, slot: usize) -> Option<&Slot> {
        if slot < N && self.occupied & (1 << slot) != 0 {
            Some(&self.slots[slot])
        } else {
            None
        }
    }

    /// The guest slots.
    pub fn occupied(&self) -> SlotMask {
        SlotMask(self.occupied)
    }

    /// The native slots.
    pub fn native(&self) -> SlotMask {
        SlotMask(self.native)
    }

    /// The hardware TID of slot `slot`, if it holds an entry (guest or native).
    pub fn tid_of(&self, slot: usize) -> Option<u8> {
        if slot < N && (self.occupied | self.native) & (1 << slot) != 0 {
            Some(self.tid[slot])
        } else {
            None
        }
    }

    /// The guest slots of `owner`.
    pub fn owned_by(&self, owner: u8) -> SlotMask {
        SlotMask(self.owned[owner as usize % OWNERS] & self.occupied)
    }

    /// The slots of `owner` derived from its guest entry `guest_index` (low six bits used).
    pub fn derived_from(&self, owner: u8, guest_index: u32) -> SlotMask {
        SlotMask(
            self.derived[(guest_index & 63) as usize]
                & self.owned[owner as usize % OWNERS]
                & self.occupied,
        )
    }

    /// The guest slot the hardware would translate `ea` with while PID `hw_pid` is loaded.
    pub fn lookup(&self, ea: u32, hw_pid: u8) -> Option<(usize, &Slot)> {
        let mut m = self.occupied;
        while m != 0 {
            let i = pop_lowest(&mut m);
            if ea & self.mask[i] == self.epn[i] && self.tid[i] == hw_pid {
                return Some((i, &self.slots[i]));
            }
        }
        None
    }

    /// The slot the next entry goes to: the lowest of `preferred` if any, else the lowest
    /// free slot, else the round robin's next victim (which may hold anything).
    #[inline(always)]
    fn choose(&mut self, preferred: u64) -> usize {
        let free = !(self.occupied | self.native) & Self::ALL;
        if preferred != 0 {
            preferred.trailing_zeros() as usize
        } else if free != 0 {
            free.trailing_zeros() as usize
        } else {
            let victim = self.next_victim;
            self.next_victim = if victim + 1 >= N { 0 } else { victim + 1 };
            victim
        }
    }

    /// Records `hw` (tagged with its hardware TID, derived from guest entry `guest_index`
    /// of `owner`'s guest TLB). Guest slots it would overlap under the same TID are
    /// dropped; the entry takes the first of them, else a free slot, else the round
    /// robin's victim (a native or any guest slot, overwritten in place, not reported).
    pub fn insert(&mut self, owner: u8, hw: HwEntry, guest_index: u32) -> Placement {
        let hw_mask = !(hw.bytes() - 1);
        let mut clash = 0u64;
        let mut m = self.candidates(hw.epn, hw_mask);
        while m != 0 {
            let i = pop_lowest(&mut m);
            if blocks_overlap(self.epn[i], self.mask[i], hw.epn, hw_mask) && self.tid[i] == hw.tid {
                clash |= 1 << i;
            }
        }
        let slot = self.choose(clash);
        self.occupied &= !clash;
        let bit = 1u64 << slot;
        self.native &= !bit;
        if self.filed & bit != 0 {
            let old = &self.slots[slot];
            self.derived[(old.guest_index & 63) as usize] &= !bit;
            self.owned[old.owner as usize % OWNERS] &= !bit;
            self.index.remove(slot, self.epn[slot], self.mask[slot]);
        }
        let guest_index = guest_index & 63;
        let owner = owner % OWNERS as u8;
        self.slots[slot] = Slot {
            hw,
            guest_index,
            owner,
        };
        self.epn[slot] = hw.epn;
        self.mask[slot] = hw_mask;
        self.tid[slot] = hw.tid;
        self.occupied |= bit;
        self.filed |= bit;
        self.derived[guest_index as usize] |= bit;
        self.owned[owner as usize] |= bit;
        self.index.insert(slot, hw.epn, hw_mask);
        Placement {
            slot,
            invalidate: SlotMask(clash & !bit),
        }
    }

    /// Records a native refill tagged `tid` and returns its slot (a free one, else the
    /// round robin's victim, whatever it held).
    #[inline]
    pub fn insert_native(&mut self, tid: u8) -> usize {
        let slot = self.choose(0);
        let bit = 1u64 << slot;
        self.occupied &= !bit;
        self.native |= bit;
        self.tid[slot] = tid;
        slot
    }

    /// Slot `slot` was invalidated in hardware (a native page flush).
    pub fn invalidate_slot(&mut self, slot: usize) {
        if slot < N {
            self.occupied &= !(1 << slot);
            self.native &= !(1 << slot);
        }
    }

    /// Drops the slots of `owner` derived from its guest entry `guest_index`.
    #[inline]
    pub fn invalidate_guest_index(&mut self, owner: u8, guest_index: u32) -> SlotMask {
        let gone = self.derived_from(owner, guest_index);
        self.occupied &= !gone.0;
        gone
    }

    /// Drops the guest slots whose page overlaps the effective range `[base, base + len)`.
    pub fn invalidate_overlapping(&mut self, base: u32, len: u64) -> SlotMask {
        self.remove(|s| s.hw.overlaps(base, len))
    }

    /// Drops the guest slots whose host-physical page overlaps `[base, base + len)`.
    pub fn invalidate_host_range(&mut self, base: u32, len: u64) -> SlotMask {
        self.remove(|s| ranges_overlap(s.hw.rpn_base as u64, s.hw.bytes() as u64, base as u64, len))
    }

    /// After `owner`'s guest wrote any word of its entry `index` (already applied to
    /// `guest`): drops the owner's slots derived from that entry's old contents, and those
    /// that the new contents now shadow under the first-match rule (any of the owner's
    /// slots overlapping its page, whatever their TID).
    #[inline]
    pub fn invalidate_guest_write(&mut self, owner: u8, guest: &GuestTlb, index: u32) -> SlotMask {
        let derived = self.invalidate_guest_index(owner, index);
        let Some((base, block_mask)) = guest.live_block(index) else {
            return derived;
        };
        let mut shadowed = 0u64;
        let mut m = self.candidates(base, block_mask) & self.owned[owner as usize % OWNERS];
        while m != 0 {
            let i = pop_lowest(&mut m);
            if blocks_overlap(self.epn[i], self.mask[i], base, block_mask) {
                shadowed |= 1 << i;
            }
        }
        self.occupied &= !shadowed;
        SlotMask(derived.0 | shadowed)
    }

    /// [`ShadowTlb::invalidate_guest_write`] for a write of word `word` only: words 1 and 2
    /// (RPN, attributes, permissions) change neither the entry's page, TS, TID nor
    /// validity, so no other entry's first-match region changes and only the slots derived
    /// from the entry go; word 0 takes the full rule.
    #[inline]
    pub fn invalidate_guest_word(
        &mut self,
        owner: u8,
        guest: &GuestTlb,
        index: u32,
        word: u32,
    ) -> SlotMask {
        if word == 0 {
            self.invalidate_guest_write(owner, guest, index)
        } else {
            self.invalidate_guest_index(owner, index)
        }
    }

    /// Drops every guest slot of `owner` (its guest changed translation space, or the
    /// vCPU goes away).
    pub fn invalidate_owner(&mut self, owner: u8) -> SlotMask {
        let gone = self.owned_by(owner);
        self.occupied &= !gone.0;
        gone
    }

    /// Drops every slot, guest or native, tagged `tid` (the TID is being recycled).
    pub fn invalidate_tid(&mut self, tid: u8) -> SlotMask {
        let mut gone = 0u64;
        let mut m = self.occupied | self.native;
        while m != 0 {
            let s = pop_lowest(&mut m);
            if self.tid[s] == tid {
                gone |= 1 << s;
            }
        }
        self.occupied &= !gone;
        self.native &= !gone;
        SlotMask(gone)
    }

    /// Drops every guest slot.
    pub fn flush_guests(&mut self) -> SlotMask {
        let gone = self.occupied;
        self.occupied = 0;
        SlotMask(gone)
    }

    /// Drops every slot, guest and native.
    pub fn flush_all(&mut self) -> SlotMask {
        let gone = self.occupied | self.native;
        self.occupied = 0;
        self.native = 0;
        SlotMask(gone)
    }

    /// The guest slots that may overlap the aligned block (base, `!(size - 1)`).
    #[inline(always)]
    fn candidates(&self, base: u32, mask: u32) -> u64 {
        self.index.overlapping(base, mask, self.occupied) & self.occupied
    }

    fn remove(&mut self, pred: impl Fn(&Slot) -> bool) -> SlotMask {
        let mut gone = 0u64;
        let mut m = self.occupied;
        while m != 0 {
            let s = pop_lowest(&mut m);
            if pred(&self.slots[s]) {
                gone |= 1 << s;
            }
        }
        self.occupied &= !gone;
        SlotMask(gone)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::guest::mmucr;
    use std::vec::Vec;

    use kestrel_ppc440::tlb::{word0, word2};

    const V: u32 = word0::V.mask();
    const TS: u32 = word0::TS.mask();
    /// UR UW UX only (guest user may, guest kernel may not).
    const USER_ONLY: u32 = word2::UR.mask() | word2::UW.mask() | word2::UX.mask();
    /// SR SW SX only.
    const KERNEL_ONLY: u32 = word2::SR.mask() | word2::SW.mask() | word2::SX.mask();
    const ALL_PERMS: u32 = USER_ONLY | KERNEL_ONLY;

    /// Guest-physical memory given as (gpa base, size, host base, rights, device).
    struct Map(&'static [(u64, u32, u32, Rights, bool)]);

    impl GuestPhysMap for Map {
        fn translate(&self, gpa: u64) -> Option<HostPage> {
            self.0
                .iter()
                .find(|(base, size, ..)| gpa >= *base && gpa < base + u64::from(*size))
                .map(|&(_, size, host, rights, device)| {
                    HostPage::new(host, size, rights, device).expect("valid test map")
                })
        }
    }

    /// 64 MiB of RAM at guest-physical 0 in 4 KiB pages, RWX, at host 0x1000_0000.
    const RAM_4K: Map = Map(&[(0, 64 << 20, 0x1000_0000, Rights::RWX, false)]);

    fn tlb(entries: &[(u32, [u32; 3], u8)]) -> GuestTlb {
        let mut t = GuestTlb::new();
        for &(index, words, tid) in entries {
            for (word, value) in words.iter().enumerate() {
                t.tlbwe(index, word as u32, *value, mmucr::STID.set(0, tid as u32))
                    .expect("word is 0..=2");
            }
        }
        t
    }

    fn hit(r: FillResult) -> (HwEntry, u32) {
        match r {
            FillResult::Hit { hw, guest_index } => (hw, guest_index),
            other => panic!("expected a hit, got {other:?}"),
        }
    }

    /// Test TIDs standing for (guest PID 5, user) and (guest PID 5, kernel).
    const TID_U5: u8 = 11;
    const TID_K5: u8 = 12;

    #[test]
    fn fills_are_untagged_and_carry_their_modes_rights() {
        let t = tlb(&[(0, [V | 0x10, 0, ALL_PERMS], 0)]);
        for pr in [false, true] {
            let (hw, index) = hit(shadow_fill(&t, &RAM_4K, 0x10, 5, pr, Access::Write, false));
            assert_eq!(index, 0);
            assert_eq!(hw.tid, UNTAGGED);
            assert_eq!(hw.perms, Rights::RWX);
            assert_eq!(hw.words().2 & 0x3F, 0x38, "user permissions only");
            assert_eq!(hw.tagged(TID_U5).tid, TID_U5);
        }
    }

    #[test]
    fn differing_permissions_give_each_mode_its_own() {
        // Typical kernel-owned page that user mode may only read.
        let t = tlb(&[(0, [V | 0x10, 0, 0x08 | KERNEL_ONLY], 0)]);
        let (hw, _) = hit(shadow_fill(&t, &RAM_4K, 0x10, 5, true, Access::Read, false));
        assert_eq!(hw.perms, Rights::R);
        let (hw, _) = hit(shadow_fill(
            &t,
            &RAM_4K,
            0x10,
            5,
            false,
            Access::Write,
            false,
        ));
        assert_eq!(hw.perms, Rights::RWX);
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x10, 5, true, Access::Write, false),
            FillResult::GuestProtection
        );
        let perms = t.entry(0).perms();
        assert_eq!(mode_rights(perms, true), Rights::R);
        assert_eq!(mode_rights(perms, false), Rights::RWX);
    }

    #[test]
    fn pages_of_one_mode_only_fault_in_the_other() {
        let user = tlb(&[(0, [V | 0x10, 0, USER_ONLY], 0)]);
        assert!(matches!(
            shadow_fill(&user, &RAM_4K, 0, 0, true, Access::Execute, false),
            FillResult::Hit { .. }
        ));
        assert_eq!(
            shadow_fill(&user, &RAM_4K, 0, 0, false, Access::Read, false),
            FillResult::GuestProtection
        );
        let kernel = tlb(&[(0, [V | 0x10, 0, KERNEL_ONLY], 0)]);
        assert!(matches!(
            shadow_fill(&kernel, &RAM_4K, 0, 0, false, Access::Execute, false),
            FillResult::Hit { .. }
        ));
        assert_eq!(
            shadow_fill(&kernel, &RAM_4K, 0, 0, true, Access::Read, false),
            FillResult::GuestProtection
        );
    }

    #[test]
    fn result_kinds() {
        let t = tlb(&[(0, [0x8000_0000 | V | 0x90, 0x0000_0000, 0x08 | 0x01], 0)]);
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x7FFF_FFFF, 0, true, Access::Read, false),
            FillResult::GuestMiss
        );
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x8000_0000, 0, true, Access::Read, true),
            FillResult::GuestMiss,
            "other TS"
        );
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x8000_0000, 0, true, Access::Write, false),
            FillResult::GuestProtection
        );
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x8400_0000, 0, true, Access::Read, false),
            FillResult::PhysMiss { gpa: 0x0400_0000 },
            "beyond the 64 MiB the VMM mapped"
        );
        let ro = Map(&[(0, 1 << 20, 0x2000_0000, Rights::R, false)]);
        let rw = tlb(&[(0, [V | 0x50, 0, ALL_PERMS], 0)]);
        assert_eq!(
            shadow_fill(&rw, &ro, 0x10, 0, true, Access::Write, false),
            FillResult::PhysMiss { gpa: 0x10 }
        );
        let (hw, _) = hit(shadow_fill(&rw, &ro, 0x10, 0, true, Access::Read, false));
        assert_eq!(hw.perms, Rights::R, "guest RWX ∩ VMM R");
    }

    #[test]
    fn hardware_page_is_the_largest_that_fits_guest_and_host() {
        // A 256 MiB guest page at 0xC000_0000 → guest-physical 0 (Linux's lowmem entry).
        let t = tlb(&[(0, [0xC000_0000 | V | 0x90, 0, KERNEL_ONLY], 0)]);
        let (hw, _) = hit(shadow_fill(
            &t,
            &RAM_4K,
            0xC123_4567,
            0,
            false,
            Access::Read,
            false,
        ));
        assert_eq!(
            (hw.size, hw.epn, hw.rpn_base),
            (PageSize::M16, 0xC100_0000, 0x1100_0000),
            "host maps 64 MiB"
        );
        let small = Map(&[(0x0123_4000, 4096, 0x3000_0000, Rights::RWX, false)]);
        let (hw, _) = hit(shadow_fill(
            &t,
            &small,
            0xC123_4567,
            0,
            false,
            Access::Read,
            false,
        ));
        assert_eq!(
            (hw.size, hw.epn, hw.rpn_base),
            (PageSize::K4, 0xC123_4000, 0x3000_0000)
        );
        // A 2 MiB host mapping (not a 440 size) gives 1 MiB pages.
        let two_meg = Map(&[(0x0120_0000, 2 << 20, 0x3020_0000, Rights::RWX, false)]);
        let (hw, _) = hit(shadow_fill(
            &t,
            &two_meg,
            0xC134_5678,
            0,
            false,
            Access::Read,
            false,
        ));
        assert_eq!(
            (hw.size, hw.epn, hw.rpn_base),
            (PageSize::M1, 0xC130_0000, 0x3030_0000)
        );
        // A QEMU-only 4 MiB guest page gives 1 MiB hardware pages.
        let t = tlb(&[(0, [0x0040_0000 | V | 0x60, 0x0040_0000, ALL_PERMS], 0)]);
        let (hw, _) = hit(shadow_fill(
            &t,
            &RAM_4K,
            0x0065_4321,
            0,
            true,
            Access::Read,
            false,
        ));
        assert_eq!(
            (hw.size, hw.epn, hw.rpn_base),
            (PageSize::M1, 0x0060_0000, 0x1060_0000)
        );
        // A 1 KiB guest page gives a 1 KiB hardware page.
        let t = tlb(&[(0, [0x0000_2400 | V, 0x0000_0C00, ALL_PERMS], 0)]);
        let (hw, _) = hit(shadow_fill(
            &t,
            &RAM_4K,
            0x2410,
            0,
            true,
            Access::Read,
            false,
        ));
        assert_eq!(
            (hw.size, hw.epn, hw.rpn_base),
            (PageSize::K1, 0x2400, 0x1000_0C00)
        );
    }

    #[test]
    fn earlier_entries_shrink_the_page_so_they_keep_priority() {
        // Entry 0: 4 KiB at 0x1000 without permissions; entry 1: 1 MiB at 0 with all.
        let t = tlb(&[
            (0, [0x1000 | V | 0x10, 0, 0], 0),
            (1, [V | 0x50, 0, ALL_PERMS], 0),
        ]);
        let big = Map(&[(0, 1 << 20, 0x2000_0000, Rights::RWX, false)]);
        assert_eq!(
            shadow_fill(&t, &big, 0x1800, 0, true, Access::Read, false),
            FillResult::GuestProtection
        );
        let (hw, index) = hit(shadow_fill(&t, &big, 0x0, 0, true, Access::Read, false));
        assert_eq!((index, hw.size, hw.epn), (1, PageSize::K4, 0));
        let (hw, _) = hit(shadow_fill(&t, &big, 0x2000, 0, true, Access::Read, false));
        assert_eq!((hw.size, hw.epn), (PageSize::K4, 0x2000));
        let (hw, _) = hit(shadow_fill(&t, &big, 0x4000, 0, true, Access::Read, false));
        assert_eq!((hw.size, hw.epn), (PageSize::K16, 0x4000));
        let (hw, _) = hit(shadow_fill(
            &t,
            &big,
            0x8_0000,
            0,
            true,
            Access::Read,
            false,
        ));
        assert_eq!((hw.size, hw.epn), (PageSize::K256, 0x8_0000));
        // Entries of another PID or TS cannot win, so they do not shrink anything.
        for (tid, ts) in [(7u8, 0), (0, TS)] {
            let t = tlb(&[
                (0, [0x1000 | V | ts | 0x10, 0, 0], tid),
                (1, [V | 0x50, 0, ALL_PERMS], 0),
            ]);
            let (hw, _) = hit(shadow_fill(&t, &big, 0x0, 3, true, Access::Read, false));
            assert_eq!(hw.size, PageSize::M1, "tid {tid} ts {ts:#x}");
        }
    }

    #[test]
    fn attributes_are_copied_and_device_memory_is_forced_uncached_guarded() {
        // W M E set by the guest.
        let t = tlb(&[(0, [V | 0x10, 0, 0x0800 | 0x0200 | 0x0080 | ALL_PERMS], 0)]);
        let (hw, _) = hit(shadow_fill(&t, &RAM_4K, 0, 0, true, Access::Read, false));
        assert_eq!(hw.wimge, Wimge(0b10101));
        let dev = Map(&[(0, 4096, 0xEF60_0000, Rights::RW, true)]);
        let (hw, _) = hit(shadow_fill(&t, &dev, 0, 0, true, Access::Read, false));
        assert_eq!(hw.wimge, Wimge(0b11111));
        assert_eq!(hw.perms, Rights::RW, "no execute from the device");
    }

    #[test]
    fn erpn_reaches_the_second_stage() {
        let t = tlb(&[(0, [V | 0x10, 0x0000_1000 | 0x1, ALL_PERMS], 0)]);
        assert_eq!(
            shadow_fill(&t, &RAM_4K, 0x20, 0, true, Access::Read, false),
            FillResult::PhysMiss { gpa: 0x1_0000_1020 }
        );
    }

    #[test]
    fn words_encode_a_valid_ts1_user_entry() {
        let hw = HwEntry {
            epn: 0xC123_4000,
            size: PageSize::K4,
            rpn_base: 0x3000_0000,
            tid: TID_K5,
            perms: Rights::RX,
            wimge: Wimge::I.union(Wimge::G),
        };
        assert_eq!(
            hw.words(),
            (
                0xC123_4000 | V | TS | 0x10,
                0x3000_0000,
                0x0500 | 0x20 | 0x08
            )
        );
        let big = HwEntry {
            epn: 0x4000_0000,
            size: PageSize::G1,
            perms: Rights::W,
            wimge: Wimge::default(),
            ..hw
        };
        assert_eq!(
            big.words(),
            (0x4000_0000 | V | TS | 0xA0, 0x3000_0000, 0x10)
        );
        assert_eq!(hw.restricted_to(Access::Execute).perms, Rights::X);
        assert_eq!(hw.restricted_to(Access::Read).perms, Rights::R);
    }

    #[test]
    fn host_pages_are_validated() {
        assert!(HostPage::new(0x1000, 4096, Rights::R, false).is_some());
        assert!(HostPage::new(0x8000_0000, 1 << 31, Rights::R, false).is_some());
        assert!(
            HostPage::new(0x1000, 2048, Rights::R, false).is_none(),
            "below 4 KiB"
        );
        assert!(
            HostPage::new(0x1000, 0x3000, Rights::R, false).is_none(),
            "not a power of two"
        );
        assert!(
            HostPage::new(0x1000, 0x2000, Rights::R, false).is_none(),
            "misaligned"
        );
        assert_eq!(
            HostPage::new(0, 4096, Rights(0xFF), false).map(|h| h.rights()),
            Some(Rights::RWX)
        );
    }

    #[test]
    fn flush_policy_follows_section_3_2_with_tagged_tids() {
        assert!(!needs_flush(Event::GuestAddressSpaceSwitch));
        assert!(needs_flush(Event::GuestTranslationSpaceSwitch));
        assert!(!needs_flush(Event::WorldSwitch));
        assert!(!needs_flush(Event::GuestUserKernelSwitch));
        assert!(!needs_flush(Event::VmmTrapAndResume));
        assert!(!needs_flush(Event::GuestTlbWrite { index: 3 }));
        assert!(!needs_flush(Event::HostMappingRevoked));
    }

    fn page(epn: u32, tid: u8, rpn_base: u32) -> HwEntry {
        HwEntry {
            epn,
            size: PageSize::K4,
            rpn_base,
            tid,
            perms: Rights::R,
            wimge: Wimge::default(),
        }
    }

    #[test]
    fn shadow_slots_track_their_owner_and_guest_index() {
        let mut s = ShadowTlb::<8>::new();
        assert_eq!(s.insert(0, page(0x1000, TID_K5, 0x10_0000), 3).slot, 0);
        assert_eq!(s.insert(0, page(0x2000, TID_U5, 0x20_0000), 4).slot, 1);
        assert_eq!(s.insert(0, page(0x3000, TID_K5, 0x30_0000), 3).slot, 2);
        // Another vCPU's entry 3 is another guest entry.
        assert_eq!(s.insert(1, page(0x1000, 40, 0x10_0000), 3).slot, 3);
        assert_eq!(s.invalidate_guest_index(0, 3).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(s.occupied().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(s.invalidate_guest_index(0, 3), SlotMask::EMPTY);
        assert_eq!(s.slot(1).map(|x| (x.guest_index, x.owner)), Some((4, 0)));
        assert_eq!(s.slot(3).map(|x| (x.guest_index, x.owner)), Some((3, 1)));
        assert_eq!(s.invalidate_owner(1).collect::<Vec<_>>(), [3]);
        assert_eq!(s.flush_all().collect::<Vec<_>>(), [1]);
        assert_eq!(s.occupied(), SlotMask::EMPTY);
    }

    #[test]
    fn entries_of_different_tids_may_overlap_and_only_their_tid_sees_them() {
        let mut s = ShadowTlb::<8>::new();
        s.insert(0, page(0x1000, TID_U5, 0x10_0000), 1);
        let p = s.insert(0, page(0x1000, TID_K5, 0x10_0000), 1);
        assert_eq!((p.slot, p.invalidate), (1, SlotMask::EMPTY));
        assert_eq!(s.lookup(0x1234, TID_U5).map(|(i, _)| i), Some(0));
        assert_eq!(s.lookup(0x1234, TID_K5).map(|(i, _)| i), Some(1));
        assert_eq!(s.lookup(0x1234, 0), None, "PID 0 sees no guest entry");
        let big = HwEntry {
            size: PageSize::K16,
            epn: 0,
            ..page(0, TID_K5, 0x10_0000)
        };
        let p = s.insert(0, big, 2);
        assert_eq!(
            (p.slot, p.invalidate),
            (1, SlotMask::EMPTY),
            "replaces its own TID's"
        );
        assert_eq!(s.occupied(), SlotMask(0b11));
    }

    #[test]
    fn native_and_guest_slots_share_one_round_robin() {
        let mut s = ShadowTlb::<3>::new();
        assert_eq!(s.insert_native(7), 0);
        s.insert(0, page(0x1000, TID_U5, 0), 0);
        assert_eq!(s.insert_native(8), 2);
        assert_eq!(
            (s.native(), s.occupied()),
            (SlotMask(0b101), SlotMask(0b010))
        );
        // Full: the victims go round, whatever they hold.
        assert_eq!(s.insert(0, page(0x3000, TID_U5, 0), 2).slot, 0);
        assert_eq!(s.insert_native(9), 1);
        assert_eq!(
            s.occupied(),
            SlotMask(0b001),
            "the guest slot 1 was overwritten"
        );
        assert_eq!(s.derived_from(0, 0), SlotMask::EMPTY);
        assert_eq!(s.insert(0, page(0x5000, TID_U5, 0), 4).slot, 2);
        assert_eq!(s.tid_of(1), Some(9));
        // A recycled TID loses its slots, native or guest.
        assert_eq!(s.invalidate_tid(TID_U5), SlotMask(0b101));
        assert_eq!(s.invalidate_tid(9), SlotMask(0b010));
        assert_eq!(s.insert_native(3), 0, "free slots first");
        s.invalidate_slot(0);
        assert_eq!(s.tid_of(0), None);
    }

    #[test]
    fn a_guest_write_drops_derived_and_newly_shadowed_slots_of_its_owner() {
        let mut s = ShadowTlb::<8>::new();
        s.insert(0, page(0x1000, TID_U5, 0), 5); // derived from guest 5
        s.insert(0, page(0x9000, TID_K5, 0), 9); // derived from guest 9
        s.insert(0, page(0x4_0000, TID_U5, 0), 9);
        s.insert(1, page(0x9000, 40, 0), 9); // another vCPU's
                                             // The guest now writes entry 5 as a 64 KiB page over 0..0x1_0000, hiding 0x9000.
        let mut t = GuestTlb::new();
        t.tlbwe(5, 0, V | 0x30, 0).expect("word 0");
        assert_eq!(s.invalidate_guest_write(0, &t, 5), SlotMask(0b011));
        assert_eq!(s.occupied(), SlotMask(0b1100));
        // An invalid new entry drops only what was derived from it.
        let t = GuestTlb::new();
        assert_eq!(s.invalidate_guest_write(0, &t, 9), SlotMask(0b100));
    }

    #[test]
    fn revoking_host_memory_drops_the_slots_onto_it() {
        let mut s = ShadowTlb::<8>::new();
        s.insert(0, page(0x1000, TID_U5, 0x10_0000), 0);
        s.insert(0, page(0x2000, TID_U5, 0x10_1000), 0);
        s.insert(1, page(0x3000, 40, 0x20_0000), 0);
        s.insert_native(6);
        assert_eq!(s.invalidate_host_range(0x10_1000, 0x1000), SlotMask(0b010));
        assert_eq!(s.invalidate_host_range(0, 1 << 32), SlotMask(0b101));
        assert_eq!(s.native().len(), 1, "native slots are not guest memory");
        assert_eq!(s.flush_guests(), SlotMask::EMPTY);
    }

    #[test]
    fn slot_masks_iterate_in_order() {
        let m = SlotMask(0x8000_0000_0000_0005);
        assert_eq!(m.len(), 3);
        assert!(
            m.contains(0) && m.contains(2) && m.contains(63) && !m.contains(1) && !m.contains(64)
        );
        assert_eq!(m.collect::<Vec<_>>(), [0, 2, 63]);
    }

    // --------------------------------------------------------------------------------
    // The indexed structures against their original definitions, on random histories
    // --------------------------------------------------------------------------------

    use proptest::prelude::*;

    /// A plain `ShadowTlb`: an array of slots (free, native with a TID, or guest) scanned
    /// with predicates.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum RefSlot {
        Free,
        Native(u8),
        Guest(Slot),
    }

    #[derive(Clone, Debug)]
    struct RefShadow<const N: usize> {
        slots: [RefSlot; N],
        next_victim: usize,
    }

    impl<const N: usize> RefShadow<N> {
        fn new() -> Self {
            RefShadow {
                slots: [RefSlot::Free; N],
                next_victim: 0,
            }
        }
        fn guest(&self, i: usize) -> Option<Slot> {
            match self.slots[i] {
                RefSlot::Guest(s) => Some(s),
                _ => None,
            }
        }
        fn select(&self, pred: impl Fn(&Slot) -> bool) -> SlotMask {
            SlotMask(
                (0..N)
                    .filter(|&i| self.guest(i).is_some_and(|s| pred(&s)))
                    .fold(0, |m, i| m | 1 << i),
            )
        }
        fn remove(&mut self, pred: impl Fn(&Slot) -> bool) -> SlotMask {
            let gone = self.select(pred);
            for s in gone {
                self.slots[s] = RefSlot::Free;
            }
            gone
        }
        fn lookup(&self, ea: u32, hw_pid: u8) -> Option<(usize, Slot)> {
            (0..N).find_map(|i| {
                self.guest(i)
                    .filter(|s| s.hw.contains(ea) && s.hw.tid == hw_pid)
                    .map(|s| (i, s))
            })
        }
        fn choose(&mut self, preferred: SlotMask) -> usize {
            match preferred.into_iter().next() {
                Some(slot) => slot,
                None => match self.slots.iter().position(|s| *s == RefSlot::Free) {
                    Some(free) => free,
                    None => {
                        let victim = self.next_victim;
                        self.next_victim = (victim + 1) % N;
                        victim
                    }
                },
            }
        }
        fn insert(&mut self, owner: u8, hw: HwEntry, guest_index: u32) -> Placement {
            let clash =
                self.select(|s| s.hw.overlaps(hw.epn, hw.bytes() as u64) && s.hw.tid == hw.tid);
            let slot = self.choose(clash);
            for s in clash {
                self.slots[s] = RefSlot::Free;
            }
            self.slots[slot] = RefSlot::Guest(Slot {
                hw,
                guest_index: guest_index & 63,
                owner: owner % OWNERS as u8,
            });
            Placement {
                slot,
                invalidate: SlotMask(clash.0 & !(1 << slot)),
            }
        }
        fn insert_native(&mut self, tid: u8) -> usize {
            let slot = self.choose(SlotMask::EMPTY);
            self.slots[slot] = RefSlot::Native(tid);
            slot
        }
        fn invalidate_guest_index(&mut self, owner: u8, guest_index: u32) -> SlotMask {
            self.remove(|s| s.owner == owner && s.guest_index == guest_index & 63)
        }
        fn invalidate_overlapping(&mut self, base: u32, len: u64) -> SlotMask {
            self.remove(|s| s.hw.overlaps(base, len))
        }
        fn invalidate_host_range(&mut self, base: u32, len: u64) -> SlotMask {
            self.remove(|s| {
                ranges_overlap(s.hw.rpn_base as u64, s.hw.bytes() as u64, base as u64, len)
            })
        }
        fn invalidate_guest_write(&mut self, owner: u8, guest: &GuestTlb, index: u32) -> SlotMask {
            let derived = self.invalidate_guest_index(owner, index);
            let shadowed = match guest.entry(index).block() {
                Some((base, len)) => self.remove(|s| s.owner == owner && s.hw.overlaps(base, len)),
                None => SlotMask::EMPTY,
            };
            SlotMask(derived.0 | shadowed.0)
        }
        fn invalidate_owner(&mut self, owner: u8) -> SlotMask {
            self.remove(|s| s.owner == owner)
        }
        fn invalidate_tid(&mut self, tid: u8) -> SlotMask {
            let mut gone = 0u64;
            for i in 0..N {
                let hit = match self.slots[i] {
                    RefSlot::Native(t) => t == tid,
                    RefSlot::Guest(s) => s.hw.tid == tid,
                    RefSlot::Free => false,
                };
                if hit {
                    self.slots[i] = RefSlot::Free;
                    gone |= 1 << i;
                }
            }
            SlotMask(gone)
        }
        fn flush_all(&mut self) -> SlotMask {
            let gone = (0..N)
                .filter(|&i| self.slots[i] != RefSlot::Free)
                .fold(0, |m, i| m | 1 << i);
            self.slots = [RefSlot::Free; N];
            SlotMask(gone)
        }
    }

    /// The original `PageSize::largest_at_most`.
    fn largest_at_most_reference(bytes: u64) -> Option<PageSize> {
        PageSize::ALL
            .iter()
            .rev()
            .copied()
            .find(|s| u64::from(s.bytes()) <= bytes)
    }

    #[test]
    fn largest_at_most_equals_the_reference() {
        for log in 0..=40u32 {
            for bytes in [
                (1u64 << log) - 1,
                1 << log,
                (1 << log) + 1,
                (1 << log) * 3 / 2,
            ] {
                assert_eq!(
                    PageSize::largest_at_most(bytes),
                    largest_at_most_reference(bytes),
                    "{bytes:#x}"
                );
            }
        }
        assert_eq!(PageSize::largest_at_most(u64::MAX), Some(PageSize::G1));
    }

    /// Addresses clustered around a few anchors, so that entries nest and overlap.
    fn clustered() -> impl Strategy<Value = u32> {
        let anchors = [
            0u32,
            0x0040_0000,
            0x1000_0000,
            0xC000_0000,
            0xC0F0_0000,
            0xFFC0_0000,
        ];
        (
            prop::sample::select(anchors.to_vec()),
            prop_oneof![3 => (0u32..(1 << 24)).prop_map(|o| o & !0x3FF), 1 => any::<u32>()],
        )
            .prop_map(|(a, o)| a.wrapping_add(o))
    }

    /// A guest TLB write: index, word, value, MMUCR. Word 0 values get clustered EPNs,
    /// mostly aligned, every SIZE code, V mostly set, TS now and then; TIDs 0..=3.
    fn guest_write() -> impl Strategy<Value = (u32, u32, u32, u32)> {
        (
            0u32..64,
            0u32..3,
            clustered(),
            0u32..16,
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.85),
            prop::bool::weighted(0.2),
            0u32..4,
            any::<u32>(),
        )
            .prop_map(|(index, word, ea, code, aligned, valid, ts, tid, junk)| {
                let value = if word == 0 {
                    let size = 1u64 << (10 + 2 * code.min(11));
                    let epn = if aligned {
                        (u64::from(ea) & !(size - 1)) as u32
                    } else {
                        ea & !0x3FF
                    };
                    epn | (code << 4) | if valid { V } else { 0 } | if ts { TS } else { 0 }
                } else {
                    junk
                };
                (index, word, value, (junk & !0xFF) | tid)
            })
    }

    /// The index the guest TLB keeps, recomputed from its entries.
    fn check_guest_index(t: &GuestTlb) -> Result<(), TestCaseError> {
        for ts in [false, true] {
            let live = (0..64)
                .filter(|&i| t.entry(i).block().is_some() && t.entry(i).ts() == ts)
                .fold(0u64, |m, i| m | 1 << i);
            prop_assert_eq!(t.live(ts), live);
        }
        for i in 0..64usize {
            if let Some((base, len)) = t.entry(i as u32).block() {
                prop_assert_eq!(t.block_of(i), (base, !(len - 1) as u32));
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn lookup_and_one_pass_page_size_equal_the_original_scans(
            writes in prop::collection::vec(guest_write(), 0..120),
            queries in prop::collection::vec((clustered(), 0u8..4, prop::bool::weighted(0.2), 0u32..23), 1..32),
        ) {
            let mut t = GuestTlb::new();
            for &(index, word, value, mmucr) in &writes {
                t.tlbwe(index, word, value, mmucr).expect("word 0..=2");
            }
            check_guest_index(&t)?;
            for &(ea, pid, ts, limit_log) in &queries {
                let first = t.entries().iter().position(|e| e.matches(ea, pid, ts));
                prop_assert_eq!(t.lookup(ea, pid, ts).map(|(i, _)| i as usize), first);
                // Every index up to the first match satisfies the precondition.
                for index in 0..=first.unwrap_or(63) as u32 {
                    for limit in [1u64 << (10 + limit_log), 1 << 24, 1 << 32, 4096] {
                        prop_assert_eq!(
                            hw_page_size(&t, index, ea, pid, ts, limit),
                            hw_page_size_reference(&t, index, ea, pid, ts, limit),
                            "index {} ea {:#x} limit {:#x}", index, ea, limit
                        );
                    }
                }
            }
        }

        #[test]
        fn the_indexed_shadow_equals_the_original(
            writes in prop::collection::vec(guest_write(), 0..64),
            ops in prop::collection::vec((0u32..10, clustered(), 0u32..64, 0u8..4, any::<bool>(), guest_write()), 1..120),
        ) {
            let mut t = GuestTlb::new();
            for &(index, word, value, mmucr) in &writes {
                t.tlbwe(index, word, value, mmucr).expect("word 0..=2");
            }
            let mut fast = ShadowTlb::<12>::new();
            let mut slow = RefShadow::<12>::new();
            // Owners 0..3 (vCPUs), TIDs 1..=4 (owner = TID % 3, so owners share none).
            for &(kind, ea, index, pid, ts, write) in &ops {
                let tid = 1 + pid;
                let owner = tid % 3;
                match kind {
                    0..=2 => {
                        // A fill as the kernel does it, else an arbitrary aligned page.
                        let hw = match shadow_fill(&t, &RAM_4K, ea, pid, pid & 1 != 0, Access::Read, ts) {
                            FillResult::Hit { hw, .. } if kind != 2 => hw.tagged(tid),
                            _ => {
                                let size = PageSize::ALL[(index % 9) as usize];
                                HwEntry { epn: ea & !(size.bytes() - 1), size, rpn_base: ea & !(size.bytes() - 1), tid, perms: Rights::R, wimge: Wimge(0) }
                            }
                        };
                        prop_assert_eq!(fast.insert(owner, hw, index), slow.insert(owner, hw, index));
                    }
                    3 => prop_assert_eq!(fast.invalidate_guest_index(owner, index), slow.invalidate_guest_index(owner, index)),
                    4 => {
                        let (windex, word, value, mmucr) = write;
                        t.tlbwe(windex, word, value, mmucr).expect("word 0..=2");
                        prop_assert_eq!(fast.invalidate_guest_write(owner, &t, windex), slow.invalidate_guest_write(owner, &t, windex));
                    }
                    5 => prop_assert_eq!(fast.insert_native(tid + 10 * (index as u8 & 1)), slow.insert_native(tid + 10 * (index as u8 & 1))),
                    6 => {
                        let len = 1u64 << (index % 33);
                        if index % 2 == 0 {
                            prop_assert_eq!(fast.invalidate_overlapping(ea, len), slow.invalidate_overlapping(ea, len));
                        } else {
                            prop_assert_eq!(fast.invalidate_host_range(ea, len), slow.invalidate_host_range(ea, len));
                        }
                    }
                    7 => prop_assert_eq!(fast.invalidate_tid(tid + 10 * (index as u8 & 1)), slow.invalidate_tid(tid + 10 * (index as u8 & 1))),
                    8 => prop_assert_eq!(fast.invalidate_owner(owner), slow.invalidate_owner(owner)),
                    _ => {
                        if index == 0 {
                            prop_assert_eq!(fast.flush_all(), slow.flush_all());
                        }
                    }
                }
                // Same slots, same lookups, and the per-owner, per-guest-index masks agree.
                for i in 0..12 {
                    prop_assert_eq!(fast.slot(i).copied(), slow.guest(i));
                    let want = match slow.slots[i] {
                        RefSlot::Free => None,
                        RefSlot::Native(t) => Some(t),
                        RefSlot::Guest(s) => Some(s.hw.tid),
                    };
                    prop_assert_eq!(fast.tid_of(i), want);
                }
                prop_assert_eq!(fast.occupied(), slow.select(|_| true));
                for o in 0..3u8 {
                    prop_assert_eq!(fast.owned_by(o), slow.select(|s| s.owner == o));
                    for g in 0..64 {
                        prop_assert_eq!(fast.derived_from(o, g), slow.select(|s| s.owner == o && s.guest_index == g));
                    }
                }
                for pid in 0..6u8 {
                    prop_assert_eq!(fast.lookup(ea, pid).map(|(i, s)| (i, *s)), slow.lookup(ea, pid));
                }
                // The block index, the derived and owner masks hold exactly the filed
                // slots' last entries, and every guest slot is filed.
                prop_assert_eq!(fast.occupied & !fast.filed, 0);
                prop_assert_eq!(fast.occupied & fast.native, 0);
                let mut index = BlockIndex::new();
                let mut derived = [0u64; 64];
                let mut owned = [0u64; OWNERS];
                for s in SlotMask(fast.filed) {
                    let Slot { hw, guest_index, owner } = fast.slots[s];
                    prop_assert_eq!((fast.epn[s], fast.mask[s]), (hw.epn, !(hw.bytes() - 1)));
                    index.insert(s, hw.epn, !(hw.bytes() - 1));
                    derived[guest_index as usize] |= 1 << s;
                    owned[owner as usize] |= 1 << s;
                }
                prop_assert_eq!(&fast.index, &index);
                prop_assert_eq!(fast.derived, derived);
                prop_assert_eq!(fast.owned, owned);
            }
        }
    }

    /// Issue 9's reproducer: TS0 maps EA 0..16 MiB to guest-physical 0..16 MiB, TS1 maps
    /// the same EAs to 16..32 MiB (32 MiB of RAM at host 0x1000_0000 in one 16 MiB-aligned
    /// linear region per half, so unified fills would be 16 MiB pages).
    fn split_reproducer() -> (GuestTlb, Map) {
        const SIZE_16M: u32 = 0x70;
        let t = tlb(&[
            (0, [V | SIZE_16M, 0, KERNEL_ONLY], 0),
            (1, [V | TS | SIZE_16M, 0x0100_0000, KERNEL_ONLY], 0),
        ]);
        let map = Map(&[
            (0, 16 << 20, 0x1000_0000, Rights::RWX, false),
            (16 << 20, 16 << 20, 0x1100_0000, Rights::RWX, false),
        ]);
        (t, map)
    }

    fn split_hit(r: SplitFill) -> HwEntry {
        match r {
            SplitFill::Fill(FillResult::Hit { hw, .. }) => hw,
            other => panic!("expected a hit, got {other:?}"),
        }
    }

    #[test]
    fn narrowing_moves_the_host_page_along_and_keeps_small_pages() {
        let hw = HwEntry {
            epn: 0x0100_0000,
            size: PageSize::M16,
            rpn_base: 0x2000_0000,
            tid: TID_K5,
            perms: Rights::RWX,
            wimge: Wimge(0),
        };
        let n = hw.narrowed(0x0123_4567, PageSize::K4);
        assert_eq!(
            (n.epn, n.size, n.rpn_base),
            (0x0123_4000, PageSize::K4, 0x2023_4000)
        );
        let k1 = HwEntry {
            epn: 0x400,
            size: PageSize::K1,
            ..hw
        };
        assert_eq!(k1.narrowed(0x500, PageSize::K4), k1);
    }

    #[test]
    fn split_load_in_the_code_page_is_emulated_and_elsewhere_filled_small() {
        let (t, map) = split_reproducer();
        let pc = 0x0040_1230;
        // IS = 0, DS = 1 (the reproducer's `mtmsr(DS|ME)`): the fetch uses entry 0.
        let f = split_hit(split_fill(
            &t,
            &map,
            pc,
            0,
            false,
            Access::Execute,
            false,
            true,
            pc,
        ));
        assert_eq!(
            (f.epn, f.size, f.rpn_base),
            (0x0040_1000, PageSize::K4, 0x1040_1000)
        );
        assert_eq!(f.perms, Rights::X);
        for access in [Access::Read, Access::Write] {
            assert_eq!(
                split_fill(&t, &map, pc + 0x10, 0, false, access, false, true, pc),
                SplitFill::Emulate,
                "{access:?} in the instruction's own page"
            );
            let d = split_hit(split_fill(
                &t,
                &map,
                0x0040_5008,
                0,
                false,
                access,
                false,
                true,
                pc,
            ));
            assert_eq!(
                (d.epn, d.size, d.rpn_base),
                (0x0040_5000, PageSize::K4, 0x1140_5000)
            );
            assert_eq!(d.perms, Rights::RW);
            // The two entries coexist in the shadow TLB.
            let mut shadow = ShadowTlb::<8>::new();
            let a = shadow.insert(0, f.tagged(TID_K5), 0);
            let b = shadow.insert(0, d.tagged(TID_K5), 1);
            assert!(b.invalidate.is_empty() && a.slot != b.slot);
            assert_eq!(shadow.lookup(pc, TID_K5).map(|(i, _)| i), Some(a.slot));
            assert_eq!(
                shadow.lookup(0x0040_5008, TID_K5).map(|(i, _)| i),
                Some(b.slot)
            );
        }
        // IS = 1, DS = 0: fetches through entry 1, data through entry 0.
        let f = split_hit(split_fill(
            &t,
            &map,
            pc,
            0,
            false,
            Access::Execute,
            true,
            false,
            pc,
        ));
        assert_eq!((f.rpn_base, f.perms), (0x1140_1000, Rights::X));
        assert_eq!(
            split_fill(
                &t,
                &map,
                pc - 0x200,
                0,
                false,
                Access::Read,
                true,
                false,
                pc
            ),
            SplitFill::Emulate
        );
        let d = split_hit(split_fill(
            &t,
            &map,
            0x0080_0000,
            0,
            false,
            Access::Read,
            true,
            false,
            pc,
        ));
        assert_eq!((d.rpn_base, d.perms), (0x1080_0000, Rights::RW));
    }

    #[test]
    fn split_faults_that_are_not_hits_pass_through() {
        let (t, map) = split_reproducer();
        // No TS1 entry above 16 MiB: a data TLB miss for the guest, never an emulation.
        assert_eq!(
            split_fill(
                &t,
                &map,
                0x0100_0000,
                0,
                false,
                Access::Read,
                false,
                true,
                0x0100_0000
            ),
            SplitFill::Fill(FillResult::GuestMiss)
        );
        // Supervisor-only pages in guest user mode: protection, even in the code page.
        assert_eq!(
            split_fill(&t, &map, 0x10, 0, true, Access::Read, false, true, 0x14),
            SplitFill::Fill(FillResult::GuestProtection)
        );
    }
}
