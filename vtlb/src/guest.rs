//! The guest-visible PowerPC 440 TLB: 64 entries of three words, written with `tlbwe`,
//! read with `tlbre` and searched with `tlbsx`, exactly as the guest would see them on
//! QEMU's `-M bamboo` (PPC440 core user's manual ch. 5; QEMU `target/ppc/mmu_helper.c`
//! `helper_440_tlbwe/tlbre/tlbsx` and `mmu_common.c` `mmubooke_check_tlb`).
//!
//! Invariants:
//! - An entry stores only the bits the 440 keeps: parity (TPAR, PAR1, PAR2) and reserved
//!   bits are dropped on `tlbwe` and read back as 0. Everything else reads back as written.
//! - All translation (guest `lookup`, `tlbsx`) uses the one matching rule of
//!   [`GuestEntry::matches`]: the first entry in index order that matches wins; its
//!   permissions are checked only afterwards, so an earlier entry that denies the access
//!   hides a later one that would allow it (QEMU `mmubooke_get_physical_address`).
//!
//! Behaviour where the manual leaves a choice, and which one we take:
//! - **Undefined SIZE codes.** The 440 defines 0,1,2,3,4,5,7,9,0xA (1K..1G). QEMU
//!   computes every code as `1024 << (2 * code)`: code 6 is a 4 MiB page and code 8 a
//!   64 MiB page (Book E sizes the 440 lacks), and codes 0xB..=0xF overflow 32 bits to
//!   size 0, so the mask is 0 and the entry matches *every* address when its EPN is 0 and
//!   none otherwise. We model those as 4 GiB pages, which is the same thing. `tlbre` cannot
//!   convert size 0 back and QEMU reports SIZE = 1 (4 KiB) for them; so do we.
//! - **EPN bits below the page size.** QEMU stores EPN as written and compares
//!   `(ea & mask) == EPN`, so an entry whose EPN is not aligned to its size never matches
//!   (for lookups and `tlbsx` alike) but reads back unchanged. We do the same. RPN bits
//!   below the page size are ignored in translation.
//! - **E (little-endian) bit.** The manual stores it; QEMU drops it (it keeps word-2 bits
//!   16:23 only). We store it and read it back like the hardware, so that a guest can
//!   see what it wrote; QEMU translates every page big-endian either way.
//! - **`tlbsx` and `MMUCR[STS]`.** The manual compares TS with `MMUCR[STS]`; QEMU's helper
//!   ignores STS. We follow the manual (a guest such as Linux's boot code can hold a TS=0
//!   and a TS=1 entry for the same address and must find the one it asks for).
//! - **Word numbers above 2** are an invalid instruction form: [`TlbError::InvalidWord`];
//!   QEMU raises a program interrupt (illegal instruction), and so should the emulator.
//! - **ERPN** extends the real address to 36 bits (QEMU applies it for the 440).

use crate::index::{pop_lowest, BlockIndex};
use core::fmt;
use kestrel_abi::Rights;
use kestrel_ppc440::Field;

pub use kestrel_ppc440::mmucr;
pub use kestrel_ppc440::tlb::{word0, word1, word2, PageSize, Wimge, ENTRIES};

/// `tlbwe`/`tlbre` use only the low six bits of the index register.
const INDEX_MASK: u32 = ENTRIES - 1;

/// Bits of word 0 an entry keeps (everything but TPAR).
const WORD0_KEEP: u32 = word0::EPN.mask() | word0::V.mask() | word0::TS.mask() | word0::SIZE.mask();
/// Bits of word 1 an entry keeps (RPN and ERPN).
const WORD1_KEEP: u32 = word1::RPN.mask() | word1::ERPN.mask();
/// Bits of word 2 an entry keeps (U0-U3, WIMGE, the six permissions).
const WORD2_KEEP: u32 = word2::U0_U3.mask()
    | word2::WIMGE.mask()
    | word2::UX.mask()
    | word2::UW.mask()
    | word2::UR.mask()
    | word2::SX.mask()
    | word2::SW.mask()
    | word2::SR.mask();

/// Page size in bytes of any 4-bit SIZE code, as QEMU computes it (see the module doc):
/// `1 KiB << 2*code` for codes 0..=0xA (so 6 is 4 MiB and 8 is 64 MiB) and 4 GiB for
/// codes 0xB..=0xF. Only the low four bits of `code` are used.
pub const fn size_bytes(code: u8) -> u64 {
    let code = code & 0xF;
    if code <= 0xA {
        1024u64 << (2 * code as u32)
    } else {
        1u64 << 32
    }
}

/// The SIZE code `tlbre` reports for a stored code: QEMU cannot express the codes whose
/// size overflows (0xB..=0xF) and reports 1 (4 KiB) for them.
const fn readback_size_code(code: u8) -> u8 {
    if code & 0xF <= 0xA {
        code & 0xF
    } else {
        PageSize::K4.code()
    }
}

/// An entry's access permissions, per privilege level, as [`Rights`] (R, W, X).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Perms {
    /// UR, UW, UX: problem state (`MSR[PR]` = 1).
    pub user: Rights,
    /// SR, SW, SX: supervisor state (`MSR[PR]` = 0).
    pub supervisor: Rights,
}

impl Perms {
    /// The permissions that apply with `MSR[PR]` = `pr`.
    pub const fn for_mode(self, pr: bool) -> Rights {
        if pr {
            self.user
        } else {
            self.supervisor
        }
    }
}

/// Decodes one privilege level's permission bits into [`Rights`].
const fn rights_of(word2: u32, r: Field, w: Field, x: Field) -> Rights {
    let mut bits = 0;
    if r.is_set(word2) {
        bits |= Rights::R.0;
    }
    if w.is_set(word2) {
        bits |= Rights::W.0;
    }
    if x.is_set(word2) {
        bits |= Rights::X.0;
    }
    Rights(bits)
}

/// [`Rights`] of each value of a three-bit permission group laid out like SX SW SR
/// (X in bit 2, W in bit 1, R in bit 0): a table, so decoding costs one load.
const GROUP_RIGHTS: [Rights; 8] = {
    // UX UW UR sit exactly three bits above SX SW SR.
    assert!(word2::SR.shift() == 0 && word2::SW.shift() == 1 && word2::SX.shift() == 2);
    assert!(word2::UR.shift() == 3 && word2::UW.shift() == 4 && word2::UX.shift() == 5);
    let mut t = [Rights(0); 8];
    let mut v = 0;
    while v < 8 {
        t[v] = rights_of(v as u32, word2::SR, word2::SW, word2::SX);
        v += 1;
    }
    t
};

/// One TLB entry as stored: the kept bits of the three words plus the 8-bit TID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GuestEntry {
    word0: u32,
    word1: u32,
    word2: u32,
    tid: u8,
}

impl GuestEntry {
    /// V: whether the entry takes part in translation at all.
    pub const fn valid(&self) -> bool {
        word0::V.is_set(self.word0)
    }

    /// TS: the translation space the entry belongs to.
    pub const fn ts(&self) -> bool {
        word0::TS.is_set(self.word0)
    }

    /// TID: the process ID the entry belongs to; 0 matches every PID.
    pub const fn tid(&self) -> u8 {
        self.tid
    }

    /// EPN as an address, exactly as written (bits below the page size included).
    pub const fn epn(&self) -> u32 {
        self.word0 & word0::EPN.mask()
    }

    /// The SIZE code as written (0..=0xF).
    pub const fn size_code(&self) -> u8 {
        word0::SIZE.get(self.word0) as u8
    }

    /// Page size in bytes (QEMU's reading of undefined codes, see [`size_bytes`]).
    pub const fn size_bytes(&self) -> u64 {
        size_bytes(self.size_code())
    }

    /// The architected page size, or `None` for an undefined SIZE code.
    pub const fn page_size(&self) -> Option<PageSize> {
        PageSize::from_code(self.size_code())
    }

    /// ERPN:RPN as a 36-bit real page address, exactly as written.
    pub const fn rpn(&self) -> u64 {
        ((word1::ERPN.get(self.word1) as u64) << 32) | (self.word1 & word1::RPN.mask()) as u64
    }

    /// UX UW UR / SX SW SR.
    pub const fn perms(&self) -> Perms {
        Perms {
            user: GROUP_RIGHTS[((self.word2 >> word2::UR.shift()) & 7) as usize],
            supervisor: GROUP_RIGHTS[(self.word2 & 7) as usize],
        }
    }

    pub const fn wimge(&self) -> Wimge {
        Wimge(word2::WIMGE.get(self.word2) as u8)
    }

    /// U0..U3 as a four-bit value (U0 most significant).
    pub const fn user_attributes(&self) -> u8 {
        word2::U0_U3.get(self.word2) as u8
    }

    /// `!(size - 1)` over 64 bits; 0 for the 4 GiB reading of undefined codes.
    const fn mask(&self) -> u64 {
        !(self.size_bytes() - 1)
    }

    /// The effective-address block `(base, size)` this entry can translate, or `None` if
    /// it can translate nothing (invalid, or EPN not aligned to the size).
    pub const fn block(&self) -> Option<(u32, u64)> {
        if !self.valid() {
            return None;
        }
        let epn = self.epn() as u64;
        if epn & self.mask() != epn {
            return None;
        }
        Some((self.epn(), self.size_bytes()))
    }

    /// [`GuestEntry::block`] as `(base, mask)` with `mask = !(size - 1)` in 32 bits (0 for
    /// the 4 GiB reading), computed without 64-bit arithmetic.
    #[inline(always)]
    const fn block_mask(&self) -> Option<(u32, u32)> {
        let code = self.size_code() as u32;
        let span = if code <= 0xA {
            (1024u32 << (2 * code)) - 1
        } else {
            u32::MAX
        };
        let epn = self.epn();
        if !self.valid() || epn & span != 0 {
            return None;
        }
        Some((epn, !span))
    }

    /// Whether the entry can translate addresses for process `pid` in space `ts`
    /// (valid, TID 0 or equal to `pid`, TS equal to `ts`).
    pub const fn in_context(&self, pid: u8, ts: bool) -> bool {
        self.valid() && (self.tid == 0 || self.tid == pid) && self.ts() == ts
    }

    /// The 440's match rule: valid, TID 0 or `pid`, TS equal to `ts`, and
    /// `ea & mask == EPN` (QEMU `ppcemb_tlb_check` plus the AS check of
    /// `mmubooke_check_tlb`).
    pub const fn matches(&self, ea: u32, pid: u8, ts: bool) -> bool {
        self.in_context(pid, ts) && (ea as u64 & self.mask()) == self.epn() as u64
    }

    /// The real (guest-physical) address of `ea` through this entry:
    /// `ERPN:(RPN & mask) | (ea & !mask)`. Meaningful only when the entry matches `ea`.
    pub const fn translate(&self, ea: u32) -> u64 {
        let mask = self.mask();
        let rpn = (self.word1 & word1::RPN.mask()) as u64;
        ((word1::ERPN.get(self.word1) as u64) << 32) | (rpn & mask) | (ea as u64 & !mask)
    }

    /// The three words as `tlbre` returns them.
    pub const fn words(&self) -> [u32; 3] {
        let w0 = word0::SIZE.set(self.word0, readback_size_code(self.size_code()) as u32);
        [w0, self.word1, self.word2]
    }
}

/// Errors of the TLB instructions. Each message says what the emulator must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbError {
    /// The instruction's word-select field is above 2: an invalid instruction form; inject
    /// a program interrupt (illegal instruction) as QEMU does.
    InvalidWord { word: u32 },
}

impl fmt::Display for TlbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlbError::InvalidWord { word } => write!(
                f,
                "tlbwe/tlbre word {word} does not exist (0..=2): inject an illegal-instruction program interrupt"
            ),
        }
    }
}

/// The whole guest TLB. Starts with every entry invalid (all words and TIDs 0).
///
/// Besides the 64 entries it keeps an index that `tlbwe` word 0 maintains (everything in
/// it is a function of the entries, so equality of two TLBs is equality of their entries):
/// - `base`/`mask`: each *live* entry's block (valid, EPN aligned to the size) as an
///   aligned base and a 32-bit mask (`!(size - 1)`, 0 for the 4 GiB reading), so that it
///   matches `ea` iff `ea & mask == base` (plus the TID and TS checks);
/// - `live[ts]`: the live entries of translation space `ts`, bit `i` = entry `i`;
/// - `index`: the live entries' blocks in a [`BlockIndex`] (by 16 MiB region and 4 KiB
///   page number). A lookup tests only `index.at(ea) & live[ts]`, in index order, so the
///   first match stays the first match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestTlb {
    entries: [GuestEntry; ENTRIES as usize],
    base: [u32; ENTRIES as usize],
    mask: [u32; ENTRIES as usize],
    live: [u64; 2],
    index: BlockIndex,
}

impl Default for GuestTlb {
    fn default() -> Self {
        GuestTlb::new()
    }
}

impl GuestTlb {
    pub const fn new() -> GuestTlb {
        GuestTlb {
            entries: [GuestEntry {
                word0: 0,
                word1: 0,
                word2: 0,
                tid: 0,
            }; ENTRIES as usize],
            base: [0; ENTRIES as usize],
            mask: [0; ENTRIES as usize],
            live: [0; 2],
            index: BlockIndex::new(),
        }
    }

    /// Entry `index` (low six bits used, as by the instructions).
    pub fn entry(&self, index: u32) -> &GuestEntry {
        &self.entries[(index & INDEX_MASK) as usize]
    }

    /// All entries in index order.
    pub fn entries(&self) -> &[GuestEntry] {
        &self.entries
    }

    /// The live entries (valid, EPN aligned: those with a [`GuestEntry::block`]) of
    /// translation space `ts`, bit `i` = entry `i`.
    pub fn live(&self, ts: bool) -> u64 {
        self.live[ts as usize]
    }

    /// The block of live entry `i` as `(base, mask)`: it contains `ea` iff
    /// `ea & mask == base` (mask 0: the 4 GiB reading). Meaningless for other entries.
    #[inline(always)]
    pub(crate) fn block_of(&self, i: usize) -> (u32, u32) {
        (self.base[i], self.mask[i])
    }

    /// `tlbwe value, index, word` with the guest's current `mmucr`. Word 0 also sets the
    /// entry's TID from `MMUCR[STID]`; words 1 and 2 leave the other words alone.
    #[inline(always)]
    pub fn tlbwe(&mut self, index: u32, word: u32, value: u32, mmucr: u32) -> Result<(), TlbError> {
        if word > 2 {
            return Err(TlbError::InvalidWord { word });
        }
        let i = (index & INDEX_MASK) as usize;
        match word {
            0 => {
                let old = self.entries[i];
                let entry = &mut self.entries[i];
                entry.word0 = value & WORD0_KEEP;
                entry.tid = mmucr::STID.get(mmucr) as u8;
                let new = *entry;
                self.reindex(i, &old, &new);
            }
            1 => self.entries[i].word1 = value & WORD1_KEEP,
            _ => self.entries[i].word2 = value & WORD2_KEEP,
        }
        Ok(())
    }

    /// Moves entry `i` in the index from its old word 0 to its new one.
    #[inline]
    fn reindex(&mut self, i: usize, old: &GuestEntry, new: &GuestEntry) {
        let bit = 1u64 << i;
        if (self.live[0] | self.live[1]) & bit != 0 {
            self.live[old.ts() as usize] &= !bit;
            self.index.remove(i, self.base[i], self.mask[i]);
        }
        if let Some((base, mask)) = new.block_mask() {
            self.live[new.ts() as usize] |= bit;
            self.base[i] = base;
            self.mask[i] = mask;
            self.index.insert(i, base, mask);
        }
    }

    /// Entry `index`'s block as `(base, mask)` with `mask = !(size - 1)` in 32 bits (0 for
    /// the 4 GiB reading), if it is live: [`GuestEntry::block`] in another form.
    #[inline(always)]
    pub fn live_block(&self, index: u32) -> Option<(u32, u32)> {
        self.entries[(index & INDEX_MASK) as usize].block_mask()
    }

    /// `tlbre index, word` with the guest's current `mmucr`: the word's value and, for
    /// word 0, the new MMUCR (STID replaced by the entry's TID, other bits kept).
    pub fn tlbre(&self, index: u32, word: u32, mmucr: u32) -> Result<(u32, Option<u32>), TlbError> {
        if word > 2 {
            return Err(TlbError::InvalidWord { word });
        }
        let entry = self.entry(index);
        let value = match word {
            0 => word0::SIZE.set(entry.word0, readback_size_code(entry.size_code()) as u32),
            1 => entry.word1,
            _ => entry.word2,
        };
        let new_mmucr = if word == 0 {
            Some(mmucr::STID.set(mmucr, entry.tid as u32))
        } else {
            None
        };
        Ok((value, new_mmucr))
    }

    /// `tlbsx ea`: the index of the first entry matching `ea` for PID `MMUCR[STID]` in
    /// space `MMUCR[STS]`.
    pub fn tlbsx(&self, ea: u32, mmucr: u32) -> Option<u32> {
        self.lookup(ea, mmucr::STID.get(mmucr) as u8, mmucr::STS.is_set(mmucr))
            .map(|(index, _)| index)
    }

    /// The entry translating `ea` for process `pid` in space `ts` (`MSR[IS]` for fetches,
    /// `MSR[DS]` for data): the first match in index order, whatever its permissions.
    pub fn lookup(&self, ea: u32, pid: u8, ts: bool) -> Option<(u32, &GuestEntry)> {
        let mut candidates = self.index.at(ea) & self.live[ts as usize];
        while candidates != 0 {
            let i = pop_lowest(&mut candidates);
            if ea & self.mask[i] == self.base[i] {
                let e = &self.entries[i];
                if e.tid == 0 || e.tid == pid {
                    return Some((i as u32, e));
                }
            }
        }
        None
    }

    /// The largest power of two `s` of at most `limit` bytes such that no entry before
    /// `index` that can match for `pid` in `ts` overlaps the aligned block of `s` bytes
    /// around `ea` (so `index`, if it contains that block, is its first match throughout).
    ///
    /// Precondition: no such earlier entry contains `ea` itself, as when `index` is
    /// `ea`'s first match. Then the result is at least 1 KiB (or `limit` rounded down to a
    /// power of two, if smaller).
    ///
    /// Why one pass suffices: guest blocks are aligned powers of two. For an earlier
    /// entry with block `[b, b + 2^k)` that does not contain `ea`, let `h` be the highest
    /// bit in which `ea` and `b` differ; `h >= k` because they differ above the block
    /// size. The aligned `2^m` block around `ea` and the entry's block overlap iff `ea`
    /// and `b` agree above bit `max(m, k) - 1`, i.e. iff `h < max(m, k)`, i.e. (as
    /// `h >= k`) iff `m > h`. So with `L` = `limit` rounded down to a power of two, the
    /// answer is `min(L, 2^min(h))` over those entries, whatever their sizes. Entries that
    /// do not overlap the aligned block of `L` bytes around `ea` cannot bind (they give
    /// `2^h >= L`), so only the [`BlockIndex`] candidates for that block are read.
    pub fn first_match_span(&self, index: u32, ea: u32, pid: u8, ts: bool, limit: u64) -> u64 {
        if limit == 0 {
            return 0;
        }
        let limit_log = (63 - limit.leading_zeros()).min(32);
        let block_mask = if limit_log == 32 {
            0
        } else {
            !((1u32 << limit_log) - 1)
        };
        let below = (1u64 << (index & INDEX_MASK)) - 1;
        let all = self.live[ts as usize] & below;
        let mut candidates = self.index.overlapping(ea & block_mask, block_mask, all) & all;
        let mut high = limit_log;
        while candidates != 0 {
            let i = pop_lowest(&mut candidates);
            let tid = self.entries[i].tid;
            if tid == 0 || tid == pid {
                let lz = (ea ^ self.base[i]).leading_zeros();
                // ea ^ base == 0 only if the precondition fails: then nothing is safe.
                high = high.min(31u32.saturating_sub(lz));
            }
        }
        1u64 << high
    }

    /// Whether live entry `index` of space `ts`, which translates the 4 KiB page at `page`
    /// (aligned) under some PID, translates it under *every* PID: it is global (TID 0) and
    /// no earlier live entry of that space with a non-zero TID overlaps the page. The
    /// kernel keeps its one-page fetch cache across guest PID writes only for such pages.
    pub fn global_for_page(&self, index: u32, page: u32, ts: bool) -> bool {
        let index = (index & INDEX_MASK) as usize;
        if self.entries[index].tid != 0 {
            return false;
        }
        let mask = !(4096u32 - 1);
        let earlier = self.live[ts as usize] & ((1u64 << index) - 1);
        let mut candidates = self.index.overlapping(page & mask, mask, earlier) & earlier;
        while candidates != 0 {
            let i = pop_lowest(&mut candidates);
            let (base, bmask) = self.block_of(i);
            if self.entries[i].tid != 0 && (base ^ page) & bmask & mask == 0 {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: u32 = word0::V.mask();
    const TS: u32 = word0::TS.mask();

    fn size(code: u32) -> u32 {
        word0::SIZE.put(code)
    }

    /// A TLB with one entry at `index`: word 0..2 and TID.
    fn with_entry(index: u32, w: [u32; 3], tid: u8) -> GuestTlb {
        let mut t = GuestTlb::new();
        for (word, value) in w.iter().enumerate() {
            t.tlbwe(index, word as u32, *value, tid as u32).unwrap();
        }
        t
    }

    #[test]
    fn field_layout_matches_qemu_constants() {
        // The masks QEMU's helper_440_tlbwe uses, spelled as hex.
        assert_eq!(word0::EPN.mask(), 0xFFFF_FC00);
        assert_eq!(word0::V.mask(), 0x200);
        assert_eq!(word0::TS.mask(), 0x100);
        assert_eq!(word0::SIZE.mask(), 0xF0);
        assert_eq!(word0::TPAR.mask(), 0xF);
        assert_eq!(WORD1_KEEP, 0xFFFF_FC0F);
        assert_eq!(word1::PAR1.mask(), 0x300);
        assert_eq!(word2::PAR2.mask(), 0xC000_0000);
        assert_eq!(word2::U0_U3.mask(), 0xF000);
        assert_eq!(word2::WIMGE.mask(), 0x0F80);
        assert_eq!(word2::SR.mask(), 0x1);
        assert_eq!(word2::SW.mask(), 0x2);
        assert_eq!(word2::SX.mask(), 0x4);
        assert_eq!(word2::UR.mask(), 0x8);
        assert_eq!(word2::UW.mask(), 0x10);
        assert_eq!(word2::UX.mask(), 0x20);
        assert_eq!(WORD2_KEEP, 0xFFBF);
        // Linux's PPC44x_MMUCR_STS and PPC44x_MMUCR_TID.
        assert_eq!(mmucr::STS.mask(), 0x0001_0000);
        assert_eq!(mmucr::STID.mask(), 0xFF);
        assert_eq!(mmucr::SWOA.mask(), 0x0100_0000);
        assert_eq!(mmucr::U1TE.mask(), 0x0040_0000);
        assert_eq!(mmucr::U2SWOAE.mask(), 0x0020_0000);
        assert_eq!(mmucr::DULXE.mask(), 0x0008_0000);
        assert_eq!(mmucr::IULXE.mask(), 0x0004_0000);
    }

    #[test]
    fn every_page_size_translates_its_whole_block_and_nothing_else() {
        for s in PageSize::ALL {
            let bytes = s.bytes();
            // Place the page at an address aligned to its size but not to twice its size.
            let base = if bytes >= 0x4000_0000 {
                0x4000_0000
            } else {
                bytes * 3
            };
            let rpn = bytes.wrapping_mul(5) & !(bytes - 1);
            let t = with_entry(7, [base | V | size(s.code() as u32), rpn, 0x3F], 0);
            let e = t.entry(7);
            assert_eq!(e.page_size(), Some(s));
            assert_eq!(e.size_bytes(), bytes as u64);
            assert_eq!(
                t.lookup(base, 9, false).map(|(i, _)| i),
                Some(7),
                "{s:?} first byte"
            );
            assert_eq!(
                t.lookup(base + (bytes - 1), 9, false).map(|(i, _)| i),
                Some(7),
                "{s:?} last byte"
            );
            assert_eq!(
                t.lookup(base.wrapping_sub(1), 9, false),
                None,
                "{s:?} byte before"
            );
            assert_eq!(
                t.lookup(base.wrapping_add(bytes), 9, false),
                None,
                "{s:?} byte after"
            );
            assert_eq!(e.translate(base + (bytes - 1)), (rpn + bytes - 1) as u64);
            assert_eq!(t.tlbre(7, 0, 0).unwrap().0 & 0xF0, size(s.code() as u32));
        }
        let bytes: [u32; 9] = [
            1 << 10,
            1 << 12,
            1 << 14,
            1 << 16,
            1 << 18,
            1 << 20,
            1 << 24,
            1 << 28,
            1 << 30,
        ];
        assert_eq!(PageSize::ALL.map(PageSize::bytes), bytes);
        for code in 0..16u8 {
            assert_eq!(
                PageSize::from_code(code).map(PageSize::code),
                [0, 1, 2, 3, 4, 5, 7, 9, 0xA]
                    .contains(&code)
                    .then_some(code)
            );
        }
    }

    #[test]
    fn erpn_extends_the_real_address() {
        let t = with_entry(0, [0x1000_0000 | V | size(1), 0x2000_0000 | 0xA, 0x3F], 0);
        let e = t.entry(0);
        assert_eq!(e.rpn(), 0xA_2000_0000);
        assert_eq!(e.translate(0x1000_0123), 0xA_2000_0123);
        assert_eq!(t.tlbre(0, 1, 0).unwrap(), (0x2000_000A, None));
    }

    #[test]
    fn rpn_bits_below_the_page_size_are_ignored_in_translation() {
        let t = with_entry(0, [0x0010_0000 | V | size(5), 0x0034_5400, 0x3F], 0);
        assert_eq!(t.entry(0).translate(0x0010_0010), 0x0030_0010);
        assert_eq!(
            t.tlbre(0, 1, 0).unwrap().0,
            0x0034_5400,
            "reads back as written"
        );
    }

    #[test]
    fn tid_zero_matches_any_pid_and_other_tids_only_their_own() {
        let shared = with_entry(3, [0x8000 | V | size(1), 0, 0x3F], 0);
        for pid in [0u8, 1, 7, 255] {
            assert!(shared.lookup(0x8000, pid, false).is_some());
        }
        let private = with_entry(3, [0x8000 | V | size(1), 0, 0x3F], 7);
        assert!(private.lookup(0x8000, 7, false).is_some());
        assert!(
            private.lookup(0x8000, 0, false).is_none(),
            "PID 0 is not a wildcard"
        );
        assert!(private.lookup(0x8000, 8, false).is_none());
    }

    #[test]
    fn translation_space_must_match() {
        let t = with_entry(3, [0x8000 | V | TS | size(1), 0, 0x3F], 0);
        assert!(t.lookup(0x8000, 0, true).is_some());
        assert!(t.lookup(0x8000, 0, false).is_none());
        assert_eq!(t.tlbsx(0x8000, mmucr::STS.mask()), Some(3));
        assert_eq!(
            t.tlbsx(0x8000, 0),
            None,
            "tlbsx compares MMUCR[STS] (the manual; QEMU ignores it)"
        );
    }

    #[test]
    fn first_match_in_index_order_wins_even_without_permission() {
        let mut t = GuestTlb::new();
        // Entry 2: 4 KiB, no permissions at all. Entry 5: 1 MiB around it, everything.
        for (word, v) in [0x0010_0000 | V | size(1), 0x0000_0000, 0]
            .iter()
            .enumerate()
        {
            t.tlbwe(2, word as u32, *v, 0).unwrap();
        }
        for (word, v) in [0x0010_0000 | V | size(5), 0x0100_0000, 0x3F]
            .iter()
            .enumerate()
        {
            t.tlbwe(5, word as u32, *v, 0).unwrap();
        }
        let (i, e) = t.lookup(0x0010_0800, 0, false).unwrap();
        assert_eq!(i, 2);
        assert_eq!(e.perms(), Perms::default());
        assert_eq!(
            t.lookup(0x0010_1000, 0, false).map(|(i, _)| i),
            Some(5),
            "outside entry 2"
        );
        assert_eq!(t.tlbsx(0x0010_0800, 0), Some(2));
    }

    #[test]
    fn invalid_entries_never_match() {
        let t = with_entry(0, [0x8000 | size(1), 0, 0x3F], 0);
        assert!(t.lookup(0x8000, 0, false).is_none());
        assert!(t.entry(0).block().is_none());
    }

    #[test]
    fn qemu_only_sizes_4m_and_64m() {
        let t = with_entry(0, [0x0040_0000 | V | size(6), 0, 0x3F], 0);
        assert_eq!(t.entry(0).size_bytes(), 4 << 20);
        assert_eq!(t.entry(0).page_size(), None);
        assert!(t.lookup(0x007F_FFFF, 0, false).is_some());
        assert!(t.lookup(0x0080_0000, 0, false).is_none());
        assert_eq!(t.tlbre(0, 0, 0).unwrap().0, 0x0040_0000 | V | size(6));
        let t = with_entry(0, [0x0400_0000 | V | size(8), 0, 0x3F], 0);
        assert_eq!(t.entry(0).size_bytes(), 64 << 20);
        assert!(t.lookup(0x07FF_FFFF, 0, false).is_some());
        assert!(t.lookup(0x0800_0000, 0, false).is_none());
    }

    #[test]
    fn overflowing_size_codes_cover_everything_only_at_epn_zero() {
        for code in 0xB..=0xF {
            let t = with_entry(0, [V | size(code), 0x1000_0001, 0x3F], 0);
            assert_eq!(t.entry(0).size_bytes(), 1 << 32);
            for ea in [0, 0x1234_5678, 0xFFFF_FFFF] {
                assert!(
                    t.lookup(ea, 0, false).is_some(),
                    "code {code:#x} ea {ea:#x}"
                );
                assert_eq!(
                    t.entry(0).translate(ea),
                    0x1_0000_0000 | ea as u64,
                    "RPN masked away, ERPN kept"
                );
            }
            assert_eq!(
                t.tlbre(0, 0, 0).unwrap().0,
                V | size(1),
                "reads back as SIZE=1 (QEMU)"
            );
            let t = with_entry(0, [0x0001_0000 | V | size(code), 0, 0x3F], 0);
            assert!(
                t.lookup(0x0001_0000, 0, false).is_none(),
                "nonzero EPN never matches"
            );
            assert!(t.entry(0).block().is_none());
        }
    }

    #[test]
    fn epn_not_aligned_to_the_size_never_matches() {
        let t = with_entry(0, [0x0010_1000 | V | size(5), 0, 0x3F], 0);
        assert!(t.lookup(0x0010_1000, 0, false).is_none());
        assert!(t.lookup(0x0010_0000, 0, false).is_none());
        assert_eq!(t.tlbsx(0x0010_1000, 0), None);
        assert_eq!(t.tlbre(0, 0, 0).unwrap().0, 0x0010_1000 | V | size(5));
    }

    #[test]
    fn bad_word_numbers_are_rejected_without_side_effects() {
        let mut t = GuestTlb::new();
        for word in [3, 4, 31, u32::MAX] {
            assert_eq!(
                t.tlbwe(0, word, 0xFFFF_FFFF, 0xFF),
                Err(TlbError::InvalidWord { word })
            );
            assert_eq!(t.tlbre(0, word, 0), Err(TlbError::InvalidWord { word }));
        }
        assert_eq!(t, GuestTlb::new());
    }

    #[test]
    fn index_uses_the_low_six_bits() {
        let mut t = GuestTlb::new();
        t.tlbwe(64 + 5, 1, 0x1234_5400, 0).unwrap();
        assert_eq!(t.tlbre(5, 1, 0).unwrap().0, 0x1234_5400);
        assert_eq!(t.tlbre(0xFFFF_FFC5, 1, 0).unwrap().0, 0x1234_5400);
    }

    #[test]
    fn tid_moves_through_mmucr_stid() {
        let mut t = GuestTlb::new();
        let mmucr = mmucr::STS.mask() | mmucr::SWOA.mask() | 0x42;
        t.tlbwe(9, 0, 0x8000 | V | size(1), mmucr).unwrap();
        assert_eq!(t.entry(9).tid(), 0x42);
        // Words 1 and 2 do not touch the TID.
        t.tlbwe(9, 1, 0, 0x17).unwrap();
        t.tlbwe(9, 2, 0, 0x17).unwrap();
        assert_eq!(t.entry(9).tid(), 0x42);
        let (_, new) = t.tlbre(9, 0, 0xFFFF_FF00 | 0x99).unwrap();
        assert_eq!(
            new,
            Some(0xFFFF_FF42),
            "STID replaced, other MMUCR bits kept"
        );
        assert_eq!(t.tlbre(9, 1, 0x99).unwrap().1, None);
        assert_eq!(t.tlbre(9, 2, 0x99).unwrap().1, None);
    }

    #[test]
    fn parity_and_reserved_bits_read_as_zero() {
        let t = with_entry(0, [0xFFFF_FFFF; 3], 0);
        assert_eq!(
            t.tlbre(0, 0, 0).unwrap().0,
            0xFFFF_FF10,
            "EPN, V, TS kept; TPAR 0; SIZE 0xF reads as 1"
        );
        assert_eq!(t.tlbre(0, 1, 0).unwrap().0, 0xFFFF_FC0F);
        assert_eq!(t.tlbre(0, 2, 0).unwrap().0, 0x0000_FFBF);
    }

    #[test]
    fn word2_decodes_perms_wimge_and_user_attributes() {
        let w2 = word2::U0_U3.set(0, 0b1010)
            | word2::WIMGE.set(0, 0b01011)
            | word2::UR.mask()
            | word2::SX.mask()
            | word2::SW.mask();
        let t = with_entry(0, [0, 0, w2], 0);
        let e = t.entry(0);
        assert_eq!(e.user_attributes(), 0b1010);
        assert_eq!(e.wimge(), Wimge(0b01011));
        assert!(
            e.wimge().contains(Wimge::I)
                && e.wimge().contains(Wimge::G)
                && e.wimge().contains(Wimge::E)
        );
        assert!(!e.wimge().contains(Wimge::W));
        assert_eq!(
            e.perms(),
            Perms {
                user: Rights::R,
                supervisor: Rights(Rights::W.0 | Rights::X.0)
            }
        );
        assert_eq!(e.perms().for_mode(true), Rights::R);
    }

    #[test]
    fn writes_of_one_word_leave_the_others_alone() {
        let mut t = with_entry(4, [0x8000 | V | size(1), 0x9000, 0x3F], 3);
        t.tlbwe(4, 2, 0x08, 3).unwrap();
        assert_eq!(t.entry(4).epn(), 0x8000);
        assert_eq!(t.entry(4).rpn(), 0x9000);
        t.tlbwe(4, 0, 0xA000 | size(2), 5).unwrap();
        assert_eq!(t.entry(4).rpn(), 0x9000);
        assert_eq!(t.entry(4).perms().user, Rights::R);
        assert!(!t.entry(4).valid());
    }

    #[test]
    fn largest_at_most_picks_architected_sizes() {
        assert_eq!(PageSize::largest_at_most(1023), None);
        assert_eq!(PageSize::largest_at_most(1024), Some(PageSize::K1));
        assert_eq!(
            PageSize::largest_at_most(8 << 20),
            Some(PageSize::M1),
            "no 4 MiB on the 440"
        );
        assert_eq!(PageSize::largest_at_most(1 << 32), Some(PageSize::G1));
    }

    /// The lookup index equals the one recomputed from the entries after every write of
    /// a long pseudo-random history (clustered addresses, every SIZE code, both spaces).
    #[test]
    fn the_lookup_index_follows_every_write() {
        let mut t = GuestTlb::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3_000 {
            let r = next();
            let anchor =
                [0u32, 0x00F0_0000, 0x1000_0000, 0xC000_0000, 0xFFF0_0000][(r % 5) as usize];
            let ea = anchor.wrapping_add((r >> 8) as u32 & 0x01FF_FC00);
            let code = ((r >> 40) & 0xF) as u32;
            let bytes = size_bytes(code as u8);
            let epn = if r >> 44 & 3 != 0 {
                (u64::from(ea) & !(bytes - 1)) as u32
            } else {
                ea
            };
            let w0 = epn
                | size(code)
                | if r >> 46 & 7 != 0 { V } else { 0 }
                | if r >> 49 & 3 == 0 { TS } else { 0 };
            let word = (r >> 51) as u32 % 3;
            t.tlbwe(
                (r >> 54) as u32,
                word,
                if word == 0 { w0 } else { r as u32 },
                (r >> 60) as u32,
            )
            .unwrap();

            let mut live = [0u64; 2];
            let mut index = BlockIndex::new();
            for (i, e) in t.entries().iter().enumerate() {
                if let Some((base, len)) = e.block() {
                    live[e.ts() as usize] |= 1 << i;
                    assert_eq!((t.base[i], t.mask[i]), (base, !(len - 1) as u32));
                    assert_eq!(t.live_block(i as u32), Some((base, !(len - 1) as u32)));
                    assert_eq!(e.block_mask(), Some((base, !(len - 1) as u32)));
                    index.insert(i, base, !(len - 1) as u32);
                } else {
                    assert_eq!(t.live_block(i as u32), None);
                    assert_eq!(e.block_mask(), None);
                }
            }
            assert_eq!(t.live, live);
            assert_eq!(t.index, index);
        }
    }

    #[test]
    fn permission_decoding_table_equals_the_field_definition() {
        for w2 in 0..64u32 {
            let t = with_entry(0, [0, 0, w2], 0);
            let p = t.entry(0).perms();
            assert_eq!(
                p.user,
                rights_of(w2, word2::UR, word2::UW, word2::UX),
                "{w2:#x}"
            );
            assert_eq!(
                p.supervisor,
                rights_of(w2, word2::SR, word2::SW, word2::SX),
                "{w2:#x}"
            );
        }
    }

    #[test]
    fn a_page_is_global_only_without_an_earlier_pid_entry_over_it() {
        let mut t = GuestTlb::new();
        // 0: 4 KiB at 0x3000 for PID 5; 1: 1 MiB at 0 global; 2: 4 KiB at 0x7000 for PID 6.
        let entries = [
            (0u32, 0x3000 | V | size(1), 5),
            (1, V | size(5), 0),
            (2, 0x7000 | V | size(1), 6),
        ];
        for (index, w0, tid) in entries {
            t.tlbwe(index, 0, w0, tid).expect("word 0");
            t.tlbwe(index, 2, 0x3F, 0).expect("word 2");
        }
        assert!(t.global_for_page(1, 0x1000, false));
        assert!(
            !t.global_for_page(1, 0x3000, false),
            "PID 5 sees entry 0 there"
        );
        assert!(t.global_for_page(1, 0x7000, false), "entry 2 comes later");
        assert!(
            !t.global_for_page(0, 0x3000, false),
            "entry 0 is not global"
        );
    }
}
