//! The reference guest TLB and host memory of the vTLB tests, and the rules every shadow
//! (hardware) entry must obey: used by `vtlb/tests/model.rs` and the `vtlb` fuzz target.
//!
//! The model is written from QEMU's `helper_440_tlbwe`/`tlbre` and `ppcemb_tlb_check`
//! with hex constants and 32-bit wrapping arithmetic, independently of the crate's field
//! declarations, plus the hardware's choices the crate documents (the E bit is kept,
//! `tlbsx` compares `MMUCR[STS]`). Host memory is a map of aligned host pages.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use kestrel_abi::Rights;
use kestrel_vtlb::{
    mode_rights, shadow_fill, Access, FillResult, GuestPhysMap, GuestTlb, HostPage, HwEntry,
    PageSize, Perms, Wimge, UNTAGGED,
};

// ---------------------------------------------------------------------------------------
// Reference model of the guest TLB

/// One entry as QEMU's `ppcemb_tlb_t` holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct RefEntry {
    pub epn: u32,
    /// Bytes, computed in 32 bits like QEMU: 0 for SIZE codes 0xB..=0xF.
    pub size: u32,
    pub ts: bool,
    pub valid: bool,
    pub tid: u8,
    /// Word 1 as kept: RPN | ERPN.
    pub rpn: u32,
    /// Word 2 as kept: U0-U3, WIMG (QEMU's 0xFF00), E (0x80, kept like the hardware),
    /// and the six permission bits.
    pub w2: u32,
}

impl RefEntry {
    pub fn mask(&self) -> u32 {
        !self.size.wrapping_sub(1)
    }

    /// QEMU's `ppcemb_tlb_check` plus the AS comparison.
    pub fn matches(&self, ea: u32, pid: u8, ts: bool) -> bool {
        self.valid
            && (self.tid == 0 || self.tid == pid)
            && self.ts == ts
            && ea & self.mask() == self.epn
    }

    pub fn translate(&self, ea: u32) -> u64 {
        let low = (self.rpn & self.mask()) | (ea & !self.mask());
        u64::from(low) | (u64::from(self.rpn & 0xF) << 32)
    }

    /// The bytes the entry spans (a SIZE of 0 stands for 4 GiB).
    pub fn span(&self) -> u64 {
        if self.size == 0 {
            1u64 << 32
        } else {
            u64::from(self.size)
        }
    }

    /// The set of addresses the entry can match, as a half-open range (empty: None).
    pub fn block(&self) -> Option<(u64, u64)> {
        if !self.valid || self.epn & !self.mask() != 0 {
            return None;
        }
        Some((u64::from(self.epn), u64::from(self.epn) + self.span()))
    }

    pub fn user(&self) -> Rights {
        Rights(
            ((self.w2 & 0x08 != 0) as u8) * 4
                + ((self.w2 & 0x10 != 0) as u8) * 2
                + (self.w2 & 0x20 != 0) as u8,
        )
    }

    pub fn supervisor(&self) -> Rights {
        Rights(
            ((self.w2 & 0x01 != 0) as u8) * 4
                + ((self.w2 & 0x02 != 0) as u8) * 2
                + (self.w2 & 0x04 != 0) as u8,
        )
    }

    /// The permissions the 440 applies with `MSR[PR]` = `pr`.
    pub fn rights(&self, pr: bool) -> Rights {
        if pr {
            self.user()
        } else {
            self.supervisor()
        }
    }

    pub fn wimge(&self) -> u8 {
        ((self.w2 >> 7) & 0x1F) as u8
    }
}

/// QEMU's `booke_page_size_to_tlb`, with `tlbre`'s fallback to 1 for unknown sizes.
fn size_code_of(size: u32) -> u32 {
    match size {
        0x400 => 0,
        0x1000 => 1,
        0x4000 => 2,
        0x1_0000 => 3,
        0x4_0000 => 4,
        0x10_0000 => 5,
        0x40_0000 => 6,
        0x100_0000 => 7,
        0x400_0000 => 8,
        0x1000_0000 => 9,
        0x4000_0000 => 0xA,
        _ => 1,
    }
}

/// The reference guest TLB: 64 entries.
#[derive(Clone, Debug)]
pub struct RefTlb {
    pub e: Vec<RefEntry>,
}

impl Default for RefTlb {
    fn default() -> Self {
        Self::new()
    }
}

impl RefTlb {
    pub fn new() -> RefTlb {
        // Reset entries hold word 0 = 0: SIZE code 0, 1 KiB.
        let reset = RefEntry {
            size: 1024,
            ..RefEntry::default()
        };
        RefTlb { e: vec![reset; 64] }
    }

    /// `tlbwe`: false (and nothing changed) for word numbers above 2.
    pub fn tlbwe(&mut self, index: u32, word: u32, value: u32, mmucr: u32) -> bool {
        if word > 2 {
            return false;
        }
        let e = &mut self.e[(index & 0x3F) as usize];
        match word {
            0 => {
                e.epn = value & 0xFFFF_FC00;
                e.size = 1024u32 << (2 * ((value >> 4) & 0xF));
                e.ts = value & 0x100 != 0;
                e.valid = value & 0x200 != 0;
                e.tid = (mmucr & 0xFF) as u8;
            }
            1 => e.rpn = value & 0xFFFF_FC0F,
            _ => e.w2 = value & (0xFF00 | 0x80 | 0x3F),
        }
        true
    }

    /// `tlbre`: the word read and, for word 0, the new MMUCR; None for words above 2.
    pub fn tlbre(&self, index: u32, word: u32, mmucr: u32) -> Option<(u32, Option<u32>)> {
        let e = &self.e[(index & 0x3F) as usize];
        match word {
            0 => {
                let v = e.epn
                    | (size_code_of(e.size) << 4)
                    | if e.ts { 0x100 } else { 0 }
                    | if e.valid { 0x200 } else { 0 };
                Some((v, Some((mmucr & !0xFF) | u32::from(e.tid))))
            }
            1 => Some((e.rpn, None)),
            2 => Some((e.w2, None)),
            _ => None,
        }
    }

    pub fn first_match(&self, ea: u32, pid: u8, ts: bool) -> Option<usize> {
        self.e.iter().position(|e| e.matches(ea, pid, ts))
    }

    /// The valid entries, in index order.
    pub fn valid(&self) -> Vec<&RefEntry> {
        self.e.iter().filter(|e| e.valid).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Reference host memory: aligned host pages keyed by (log2 size, guest-physical base)

/// One host page under guest-physical memory.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub gpa: u64,
    pub size: u32,
    pub host: u32,
    pub rights: Rights,
    pub device: bool,
}

impl Region {
    pub fn end(&self) -> u64 {
        self.gpa + u64::from(self.size)
    }
}

#[derive(Clone, Debug, Default)]
pub struct HostMap {
    pub pages: BTreeMap<(u32, u64), Region>,
}

impl HostMap {
    /// Adds `r` unless it overlaps a page already there.
    pub fn insert(&mut self, r: Region) {
        if self
            .pages
            .values()
            .all(|o| r.end() <= o.gpa || o.end() <= r.gpa)
        {
            self.pages.insert((r.size.trailing_zeros(), r.gpa), r);
        }
    }

    /// Reference lookup: a plain scan.
    pub fn region_of(&self, gpa: u64) -> Option<Region> {
        self.pages
            .values()
            .copied()
            .find(|r| gpa >= r.gpa && gpa < r.end())
    }
}

impl GuestPhysMap for HostMap {
    fn translate(&self, gpa: u64) -> Option<HostPage> {
        (12..32)
            .find_map(|log| self.pages.get(&(log, gpa & !((1u64 << log) - 1))))
            .map(|r| {
                HostPage::new(r.host, r.size, r.rights, r.device).expect("regions are aligned")
            })
    }
}

// ---------------------------------------------------------------------------------------
// Input anchors (both generators cluster addresses the same way)

/// Effective addresses cluster around a few places so that entries overlap and queries hit.
pub const EA_ANCHORS: [u32; 5] = [
    0x0000_0000,
    0x0040_0000,
    0x1000_0000,
    0xC000_0000,
    0xFFC0_0000,
];
/// Guest-physical addresses cluster likewise, so that host pages back some of them.
pub const GPA_ANCHORS: [u32; 4] = [0x0000_0000, 0x0080_0000, 0x0400_0000, 0x1000_0000];
/// Offsets into anchors and pages: a few shared values, so that entries nest inside each
/// other and queries land on the host pages placed under entries.
pub const OFFSETS: [u32; 8] = [
    0, 0x400, 0x1000, 0x3000, 0x1_0000, 0x10_0000, 0x12_3400, 0x100_0000,
];

/// The raw material of one generated guest entry write; the property tests and the fuzz
/// target draw it their own way and compose the words here.
pub struct EntryDraw {
    /// An effective-address anchor and the offset from it (taken modulo 16 MiB).
    pub anchor: u32,
    pub offset: u32,
    /// The SIZE code (0..=0xF).
    pub code: u32,
    /// Whether the EPN is aligned to the page size (else: only to 1 KiB).
    pub aligned: bool,
    pub valid: bool,
    pub ts: bool,
    /// The guest-physical address (RPN before masking) and the ERPN bits (0..=0xF).
    pub gpa: u32,
    pub erpn: u32,
    /// The six permission bits, the attribute bits (only 0xFF80 kept) and random junk for
    /// the parity and reserved bits the entry must ignore.
    pub perms: u32,
    pub attr: u32,
    pub junk: u32,
}

impl EntryDraw {
    /// The three `tlbwe` words.
    pub fn words(&self) -> [u32; 3] {
        let size = 1u64 << (10 + 2 * self.code.min(11));
        let raw = self.anchor.wrapping_add(self.offset % (16 << 20)) & 0xFFFF_FC00;
        let epn = if self.aligned {
            (u64::from(raw) & !(size - 1)) as u32
        } else {
            raw
        };
        let w0 = epn
            | (self.code << 4)
            | if self.valid { 0x200 } else { 0 }
            | if self.ts { 0x100 } else { 0 }
            | (self.junk & 0xF);
        let w1 = (self.gpa & 0xFFFF_FC00) | self.erpn | (self.junk & 0x3F0);
        let w2 = self.perms | (self.attr & 0xFF80) | (self.junk & 0xFFFF_0040);
        [w0, w1, w2]
    }
}

// ---------------------------------------------------------------------------------------
// The checks

/// What a fill does, without its hardware entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    Hit(usize),
    GuestMiss,
    GuestProtection,
    PhysMiss(u64),
}

/// What the reference model says a fill must do.
pub fn reference_kind(
    model: &RefTlb,
    map: &HostMap,
    ea: u32,
    pid: u8,
    pr: bool,
    access: Access,
    ts: bool,
) -> Kind {
    let Some(i) = model.first_match(ea, pid, ts) else {
        return Kind::GuestMiss;
    };
    let e = &model.e[i];
    if !e.rights(pr).contains(access.right()) {
        return Kind::GuestProtection;
    }
    let gpa = e.translate(ea);
    match map.region_of(gpa) {
        Some(r) if r.rights.contains(access.right()) => Kind::Hit(i),
        _ => Kind::PhysMiss(gpa),
    }
}

/// What the crate's fill did.
pub fn kind_of(r: &FillResult) -> Kind {
    match *r {
        FillResult::Hit { guest_index, .. } => Kind::Hit(guest_index as usize),
        FillResult::GuestMiss => Kind::GuestMiss,
        FillResult::GuestProtection => Kind::GuestProtection,
        FillResult::PhysMiss { gpa } => Kind::PhysMiss(gpa),
    }
}

/// Whether two half-open ranges overlap.
pub fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The addresses a hardware entry maps, half-open.
pub fn hw_range(hw: &HwEntry) -> (u64, u64) {
    (u64::from(hw.epn), u64::from(hw.epn) + u64::from(hw.bytes()))
}

/// Whether an earlier (index < `gi`) entry that can match in context overlaps `range`.
pub fn shadowed_by_earlier(
    model: &RefTlb,
    gi: usize,
    range: (u64, u64),
    pid: u8,
    ts: bool,
) -> bool {
    model.e[..gi].iter().any(|e| {
        (e.tid == 0 || e.tid == pid) && e.ts == ts && e.block().is_some_and(|b| overlaps(b, range))
    })
}

/// The rules every hardware entry derived from guest entry `gi` must obey while it is
/// tagged with the hardware TID of (guest PID `pid`, guest mode `pr`) and the guest's
/// translation space is `ts`: an architected, aligned page inside the first-match region
/// of an entry in context, linear translation through one host page (the two-stage
/// translation), rights within the guest's for mode `pr` ∩ VMM, device pages I and G.
/// Err: what broke.
pub fn check_entry(
    model: &RefTlb,
    map: &HostMap,
    hw: &HwEntry,
    gi: usize,
    (pid, pr, ts): (u8, bool, bool),
) -> Result<(), String> {
    let e = &model.e[gi];
    let range = hw_range(hw);
    let fail = |what: &str| {
        Err(format!(
            "{what}: {hw:x?} from entry {gi} {e:x?} (pid {pid}, ts {ts})"
        ))
    };
    if !PageSize::ALL.contains(&hw.size)
        || hw.epn & (hw.bytes() - 1) != 0
        || hw.rpn_base & (hw.bytes() - 1) != 0
    {
        return fail("size or alignment");
    }
    if !(e.valid && (e.tid == 0 || e.tid == pid) && e.ts == ts) {
        return fail("source entry not in context");
    }
    let Some(block) = e.block() else {
        return fail("source entry has no block");
    };
    if !(block.0 <= range.0 && range.1 <= block.1) {
        return fail("outside the guest page");
    }
    if shadowed_by_earlier(model, gi, range, pid, ts) {
        return fail("an earlier guest entry wins inside the page");
    }
    for a in [range.0 as u32, (range.1 - 1) as u32] {
        if model.first_match(a, pid, ts) != Some(gi) {
            return fail("not the first match at both ends");
        }
    }
    let gpa0 = e.translate(hw.epn);
    if e.translate((range.1 - 1) as u32) != gpa0 + u64::from(hw.bytes()) - 1 {
        return fail("guest translation not linear");
    }
    let Some(r) = map.region_of(gpa0) else {
        return fail("no host page");
    };
    if gpa0 + u64::from(hw.bytes()) > r.end() {
        return fail("more than one host page");
    }
    if u64::from(hw.rpn_base) != u64::from(r.host) + (gpa0 - r.gpa) {
        return fail("not the two-stage translation");
    }
    if !r.rights.contains(hw.perms) {
        return fail("more than the VMM's rights");
    }
    if r.device && !Wimge(hw.wimge.0).contains(Wimge::I.union(Wimge::G)) {
        return fail("device page without I and G");
    }
    if !e.rights(pr).contains(hw.perms) {
        return fail(if pr {
            "more than the guest's user rights"
        } else {
            "more than the guest's supervisor rights"
        });
    }
    Ok(())
}

/// Checks a hit of `shadow_fill` for `access` at `ea` (guest in `pid`, `pr`, `ts`) from
/// guest entry `gi`: untagged (the kernel tags it), covers `ea`, rights exactly
/// guest ∩ VMM and allowing the access, the attributes (device pages I and G), the
/// [`check_entry`] rules, as large as allowed (the next architected size breaks a rule),
/// and its `tlbwe` words. Err: what broke.
#[allow(clippy::too_many_arguments)]
pub fn check_hit(
    model: &RefTlb,
    map: &HostMap,
    hw: &HwEntry,
    gi: usize,
    ea: u32,
    (pid, pr, ts): (u8, bool, bool),
    access: Access,
) -> Result<(), String> {
    let e = &model.e[gi];
    let fail = |what: String| Err(format!("fill {ea:#x} {access:?}: {what}: {hw:x?}"));
    let perms = Perms {
        user: e.user(),
        supervisor: e.supervisor(),
    };
    if hw.tid != UNTAGGED {
        return fail("tagged by the fill (the kernel tags it)".into());
    }
    if mode_rights(perms, pr) != e.rights(pr) {
        return fail("mode rights differ from the model's".into());
    }
    if !hw.contains(ea) {
        return fail("does not cover the faulting address".into());
    }
    let Some(r) = map.region_of(e.translate(ea)) else {
        return fail("a hit without a host page".into());
    };
    if hw.perms != e.rights(pr).intersect(r.rights) {
        return fail("rights not guest ∩ VMM".into());
    }
    if !hw.perms.contains(access.right()) {
        return fail("does not allow the faulting access".into());
    }
    let wimge = if r.device {
        e.wimge() | 0b01010
    } else {
        e.wimge()
    };
    if hw.wimge != Wimge(wimge) {
        return fail(format!("WIMGE, not {wimge:#x}"));
    }
    check_entry(model, map, hw, gi, (pid, pr, ts)).or_else(fail)?;
    if let Some(bigger) = PageSize::ALL.iter().find(|s| s.bytes() > hw.bytes()) {
        let b = u64::from(bigger.bytes());
        let base = u64::from(ea) & !(b - 1);
        let guest_size = e.block().map(|(s, t)| t - s).expect("matched");
        if !(b > guest_size
            || b > u64::from(r.size)
            || shadowed_by_earlier(model, gi, (base, base + b), pid, ts))
        {
            return fail(format!("{bigger:?} would have fit"));
        }
    }
    let (w0, w1, w2) = hw.words();
    let user_rwx = u32::from(hw.perms.contains(Rights::R))
        | u32::from(hw.perms.contains(Rights::W)) << 1
        | u32::from(hw.perms.contains(Rights::X)) << 2;
    if w0 != hw.epn | 0x200 | 0x100 | (u32::from(hw.size.code()) << 4)
        || w1 != hw.rpn_base
        || w2 & 0x07 != 0
        || (w2 >> 3) & 0x7 != user_rwx
        || (w2 >> 7) & 0x1F != u32::from(hw.wimge.0)
        || w2 & !0x0FBF != 0
    {
        return fail(format!("tlbwe words {w0:#x} {w1:#x} {w2:#x}"));
    }
    Ok(())
}

/// Whether the hardware could hit `a` and `b` at once: equal TIDs (guest entries are
/// never tagged 0, the TID every PID matches) and overlapping ranges.
pub fn multi_hit(a: &HwEntry, b: &HwEntry) -> bool {
    (a.tid == b.tid || a.tid == 0 || b.tid == 0) && overlaps(hw_range(a), hw_range(b))
}

/// One TLB miss as the kernel handles it: `shadow_fill` for `access` at `ea` with the
/// guest in (`pid`, `pr`, `ts`), its kind checked against [`reference_kind`] and a hit
/// against [`check_hit`]. Ok: what the fill returned; Err: what broke.
pub fn check_fill(
    guest: &GuestTlb,
    model: &RefTlb,
    map: &HostMap,
    ea: u32,
    (pid, pr, ts): (u8, bool, bool),
    access: Access,
) -> Result<FillResult, String> {
    let got = shadow_fill(guest, map, ea, pid, pr, access, ts);
    let want = reference_kind(model, map, ea, pid, pr, access, ts);
    if kind_of(&got) != want {
        return Err(format!(
            "fill {ea:#x} {access:?} pid {pid} pr {pr} ts {ts}: {got:x?}, the model says {want:x?}"
        ));
    }
    if let FillResult::Hit { hw, guest_index } = got {
        check_hit(
            model,
            map,
            &hw,
            guest_index as usize,
            ea,
            (pid, pr, ts),
            access,
        )?;
    }
    Ok(got)
}
