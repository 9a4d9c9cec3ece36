//! Property tests of the virtual TLB against a plain reference model
//! (`kestrel_testkit::vtlb`, shared with the `vtlb` fuzz target, as are the rules a hit
//! and a shadow slot must obey).
//!
//! The model is written from QEMU's `helper_440_tlbwe`/`tlbre` and `ppcemb_tlb_check`
//! with hex constants and 32-bit wrapping arithmetic, independently of the crate's field
//! declarations, plus the hardware's choices the crate documents (the E bit is kept,
//! `tlbsx` compares `MMUCR[STS]`). Host memory is a map of aligned host pages.
//!
//! Checked: the kind of every fill agrees with the model; every hardware entry is, over
//! its whole range, a subset of the guest TLB's first match (current mode) and of the
//! host mapping, untagged with the rights of its mode; its page is as large as allowed;
//! `tlbwe`/`tlbre` round-trip every word; `tlbsx` and `lookup` agree with a linear search;
//! and across random sequences of two vCPUs' guest writes, fills, mode/PID/TS switches,
//! revocations, native refills and recycled TIDs the tagged shadow TLB never holds an
//! entry that breaks these rules or that another TID or vCPU could hit.

use kestrel_abi::Rights;
use kestrel_ppc440::mmucr;
use kestrel_testkit::vtlb::{
    self, check_entry, kind_of, multi_hit, reference_kind, EntryDraw, HostMap, Kind, RefTlb,
    Region, EA_ANCHORS, GPA_ANCHORS, OFFSETS,
};
use kestrel_vtlb::{
    mode_rights, needs_flush, shadow_fill, split_fill, Access, Event, FillResult, GuestTlb,
    HwEntry, PageSize, ShadowTlb, SplitFill, Wimge, SPLIT_PAGE, UNTAGGED,
};
use proptest::prelude::*;
use proptest::sample::Index;

// ------------------------------------------------------------------------------------
// Generators
// ------------------------------------------------------------------------------------

/// Offsets into anchors and pages: mostly a few shared values, so that entries nest inside
/// each other and queries land on the host pages placed under entries.
fn offset() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => prop::sample::select(OFFSETS.to_vec()),
        2 => any::<u32>(),
    ]
}

fn size_code() -> impl Strategy<Value = u32> {
    prop_oneof![
        12 => prop::sample::select(vec![0u32, 1, 2, 3, 4, 5, 7, 9, 0xA]),
        1 => Just(6u32),
        1 => Just(8u32),
        1 => 0xBu32..=0xF,
    ]
}

/// Six permission bits: random, or equal user and supervisor permissions, or all.
fn perm_bits() -> impl Strategy<Value = u32> {
    prop_oneof![2 => 0u32..64, 1 => (0u32..8).prop_map(|r| (r << 3) | r), 1 => Just(0x3F)]
}

/// The three words (plus MMUCR) that write one whole guest entry, with parity and
/// reserved bits set at random (the entry must ignore them).
#[derive(Clone, Debug)]
struct EntryWrite {
    index: u32,
    words: [u32; 3],
    mmucr: u32,
}

fn entry_write() -> impl Strategy<Value = EntryWrite> {
    let place = (
        0u32..20,
        0usize..EA_ANCHORS.len(),
        offset(),
        size_code(),
        prop::bool::weighted(0.9),
    );
    let flags = (
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.2),
        prop::sample::select(vec![0u8, 0, 1, 2, 3]),
    );
    let target = (
        0usize..GPA_ANCHORS.len(),
        0u32..(64 << 20),
        prop::bool::weighted(0.1),
        1u32..16,
    );
    let attrs = (perm_bits(), any::<u32>(), any::<u32>(), any::<u32>());
    (place, flags, target, attrs).prop_map(
        |(
            (index, anchor, off, code, aligned),
            (valid, ts, tid),
            (ganchor, goff, ext, erpn),
            (perms, attr, junk, mmucr_other),
        )| {
            let words = EntryDraw {
                anchor: EA_ANCHORS[anchor],
                offset: off,
                code,
                aligned,
                valid,
                ts,
                gpa: GPA_ANCHORS[ganchor].wrapping_add(goff),
                erpn: if ext { erpn } else { 0 },
                perms,
                attr,
                junk,
            }
            .words();
            // Now and then an index with garbage above the six bits the 440 uses.
            let index = if junk >> 31 != 0 {
                index | (junk & 0x7FFF_FFC0)
            } else {
                index
            };
            EntryWrite {
                index,
                words,
                mmucr: (mmucr_other & !0xFF) | u32::from(tid),
            }
        },
    )
}

fn region() -> impl Strategy<Value = Region> {
    (
        0usize..GPA_ANCHORS.len(),
        0u32..(64 << 20),
        prop_oneof![4 => 12u32..=16, 2 => 17u32..=24, 1 => 25u32..=28],
        any::<u32>(),
        0u8..8,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(anchor, off, log, host, rights, device, high)| {
            let size = 1u32 << log;
            let gpa = u64::from(GPA_ANCHORS[anchor].wrapping_add(off) & !(size - 1))
                | if high { 1 << 32 } else { 0 };
            Region {
                gpa,
                size,
                host: host & !(size - 1),
                rights: Rights(rights),
                device,
            }
        })
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![
        Just(Access::Read),
        Just(Access::Write),
        Just(Access::Execute)
    ]
}

/// A guest access: near a valid entry (`near` picks which, and the offset in it; `aim`
/// takes that entry's TID and TS as the PID and TS) or at a raw address.
#[derive(Clone, Debug)]
struct Query {
    near: Option<(Index, u32, bool)>,
    raw_ea: u32,
    pid: u8,
    pr: bool,
    access: Access,
    ts: bool,
}

fn query() -> impl Strategy<Value = Query> {
    (
        prop::option::weighted(0.8, (any::<Index>(), offset(), prop::bool::weighted(0.7))),
        any::<u32>(),
        prop::sample::select(vec![0u8, 1, 2, 3]),
        any::<bool>(),
        access(),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(near, raw_ea, pid, pr, access, ts)| Query {
            near,
            raw_ea,
            pid,
            pr,
            access,
            ts,
        })
}

impl Query {
    /// The access's (EA, PID, TS) against the entries in `model`.
    fn resolve(&self, model: &RefTlb) -> (u32, u8, bool) {
        let valid = model.valid();
        match &self.near {
            Some((pick, off, aim)) if !valid.is_empty() => {
                let e = valid[pick.index(valid.len())];
                let ea = e.epn.wrapping_add((u64::from(*off) % e.span()) as u32);
                if *aim {
                    (ea, if e.tid == 0 { self.pid } else { e.tid }, e.ts)
                } else {
                    (ea, self.pid, self.ts)
                }
            }
            _ => (self.raw_ea, self.pid, self.ts),
        }
    }
}

/// Host memory under one guest entry's guest-physical range: `pick` chooses the entry,
/// which is tiled with host pages of at least `1 << log` bytes (at most 64 tiles, at
/// most 256 MiB), with per-tile rights, device flag and holes taken from `seed`.
#[derive(Clone, Debug)]
struct Backing {
    pick: Index,
    log: u32,
    host: u32,
    seed: u64,
}

fn backing() -> impl Strategy<Value = Backing> {
    (
        any::<Index>(),
        prop_oneof![3 => 12u32..=16, 2 => 17u32..=24, 1 => 25u32..=28],
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(pick, log, host, seed)| Backing {
            pick,
            log,
            host,
            seed,
        })
}

/// The host map: `backings` placed under the guest's entries first, then `regions`.
fn build_host(model: &RefTlb, backings: &[Backing], regions: &[Region]) -> HostMap {
    let mut map = HostMap::default();
    let valid = model.valid();
    for b in backings {
        if valid.is_empty() {
            break;
        }
        let e = valid[b.pick.index(valid.len())];
        let len = e.span().min(1 << 28);
        let tile = (1u64 << b.log).max(len / 64);
        let start = e.translate(e.epn) & !(tile - 1);
        for i in 0..(len.div_ceil(tile)) {
            let bits = b.seed.rotate_right((i * 5) as u32);
            if bits & 0x18 == 0x18 {
                continue; // a hole
            }
            map.insert(Region {
                gpa: start + i * tile,
                size: tile as u32,
                host: (b.host & !(tile as u32 - 1)).wrapping_add((i * tile) as u32),
                rights: if bits & 0x20 == 0 {
                    Rights::RWX
                } else {
                    Rights((bits & 7) as u8)
                },
                device: bits & 0x3C0 == 0x3C0,
            });
        }
    }
    for r in regions {
        map.insert(*r);
    }
    map
}

/// Builds the crate's TLB and the model from the same writes.
fn build(writes: &[EntryWrite]) -> (GuestTlb, RefTlb) {
    let mut guest = GuestTlb::new();
    let mut model = RefTlb::new();
    for w in writes {
        for (word, value) in w.words.iter().enumerate() {
            guest
                .tlbwe(w.index, word as u32, *value, w.mmucr)
                .expect("words 0..=2 are valid");
            model.tlbwe(w.index, word as u32, *value, w.mmucr);
        }
    }
    (guest, model)
}

// ------------------------------------------------------------------------------------
// The checks
// ------------------------------------------------------------------------------------

/// Checks one fill against the model (`kestrel_testkit::vtlb::check_fill`: the kind, and
/// for a hit: untagged, exact rights and attributes, range subset, maximal size and
/// the tlbwe words).
fn check_fill(
    guest: &GuestTlb,
    model: &RefTlb,
    map: &HostMap,
    q: &Query,
) -> Result<(), TestCaseError> {
    let (ea, pid, ts) = q.resolve(model);
    vtlb::check_fill(guest, model, map, ea, (pid, q.pr, ts), q.access)
        .map(drop)
        .map_err(TestCaseError::fail)
}

// ------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fills_agree_with_the_model_and_stay_inside_guest_and_host(
        writes in prop::collection::vec(entry_write(), 0..24),
        backings in prop::collection::vec(backing(), 0..12),
        regions in prop::collection::vec(region(), 0..6),
        queries in prop::collection::vec(query(), 1..24),
    ) {
        let (guest, model) = build(&writes);
        let map = build_host(&model, &backings, &regions);
        for q in &queries {
            check_fill(&guest, &model, &map, q)?;
        }
    }

    #[test]
    fn tlbwe_then_tlbre_round_trips_every_word(
        before in prop::collection::vec(entry_write(), 0..4),
        index in any::<u32>(), word in 0u32..3, value in any::<u32>(), mmucr_w in any::<u32>(), mmucr_r in any::<u32>(),
    ) {
        let (mut guest, mut model) = build(&before);
        let others: Vec<_> = (0..3).filter(|w| *w != word).map(|w| guest.tlbre(index, w, 0).expect("valid word")).collect();
        guest.tlbwe(index, word, value, mmucr_w).expect("valid word");
        prop_assert!(model.tlbwe(index, word, value, mmucr_w));
        let (read, new_mmucr) = guest.tlbre(index, word, mmucr_r).expect("valid word");
        prop_assert_eq!(Some((read, new_mmucr)), model.tlbre(index, word, mmucr_r));
        let keep = [0xFFFF_FFF0u32, 0xFFFF_FC0F, 0x0000_FFBF][word as usize];
        if word == 0 {
            let code = (value >> 4) & 0xF;
            let code = if code <= 0xA { code } else { 1 };
            prop_assert_eq!(read, (value & keep & !0xF0) | (code << 4));
            prop_assert_eq!(new_mmucr, Some((mmucr_r & !0xFF) | (mmucr_w & 0xFF)));
        } else {
            prop_assert_eq!(read, value & keep);
            prop_assert_eq!(new_mmucr, None);
        }
        let after: Vec<_> = (0..3).filter(|w| *w != word).map(|w| guest.tlbre(index, w, 0).expect("valid word")).collect();
        prop_assert_eq!(others, after, "the other words are untouched");
    }

    #[test]
    fn bad_word_numbers_fail_and_change_nothing(
        before in prop::collection::vec(entry_write(), 0..8),
        index in any::<u32>(), word in 3u32.., value in any::<u32>(), mmucr in any::<u32>(),
    ) {
        let (mut guest, _) = build(&before);
        let copy = guest.clone();
        prop_assert!(guest.tlbwe(index, word, value, mmucr).is_err());
        prop_assert!(guest.tlbre(index, word, mmucr).is_err());
        prop_assert_eq!(guest, copy);
    }

    #[test]
    fn tlbsx_and_lookup_agree_with_a_linear_search(
        writes in prop::collection::vec(entry_write(), 0..24),
        queries in prop::collection::vec((query(), any::<u32>()), 1..24),
    ) {
        let (guest, model) = build(&writes);
        for (q, mmucr_other) in &queries {
            let (ea, pid, ts) = q.resolve(&model);
            let mmucr = (mmucr_other & !(mmucr::STS.mask() | mmucr::STID.mask())) | u32::from(pid) | if ts { mmucr::STS.mask() } else { 0 };
            let want = model.first_match(ea, pid, ts);
            prop_assert_eq!(guest.tlbsx(ea, mmucr).map(|i| i as usize), want);
            let got = guest.lookup(ea, pid, ts);
            prop_assert_eq!(got.map(|(i, _)| i as usize), want);
            if let (Some((_, e)), Some(i)) = (got, want) {
                let r = &model.e[i];
                prop_assert_eq!(e.translate(ea), r.translate(ea));
                prop_assert_eq!((e.valid(), e.ts(), e.tid(), e.epn()), (r.valid, r.ts, r.tid, r.epn));
                prop_assert_eq!(e.size_bytes(), if r.size == 0 { 1 << 32 } else { u64::from(r.size) });
                prop_assert_eq!(e.rpn(), u64::from(r.rpn & 0xFFFF_FC00) | u64::from(r.rpn & 0xF) << 32);
                prop_assert_eq!((e.perms().user, e.perms().supervisor), (r.user(), r.supervisor()));
                prop_assert_eq!(e.wimge(), Wimge(r.wimge()));
                prop_assert_eq!(u32::from(e.user_attributes()), r.w2 >> 12 & 0xF);
            }
        }
    }

    #[test]
    fn mode_rights_are_the_guest_rights_of_the_mode(bits in 0u32..64, pr in any::<bool>()) {
        let user = Rights(((bits >> 3 & 1) * 4 + (bits >> 4 & 1) * 2 + (bits >> 5 & 1)) as u8);
        let sup = Rights(((bits & 1) * 4 + (bits >> 1 & 1) * 2 + (bits >> 2 & 1)) as u8);
        let rights = mode_rights(kestrel_vtlb::Perms { user, supervisor: sup }, pr);
        prop_assert_eq!(rights, if pr { user } else { sup });
    }

    /// The tagged shadow TLB (ADR 0024) across random activity of two vCPUs (each its
    /// own guest TLB, PID, mode and TS) and native refills, all sharing a few hardware
    /// slots and a pool of only a few TIDs (so TIDs are recycled all the time, as the
    /// kernel's pool of 255 is when it runs dry). After every step: every guest slot's TID
    /// is currently allocated to (its owner, some guest PID, some mode), so no entry
    /// survives its TID's recycling and no vCPU can hit another's entry; every guest slot
    /// is a subset of its owner's guest TLB (first match under that PID and the owner's
    /// TS, that mode's rights) and of the VM's memory; no two slots with one TID overlap;
    /// no slot survives the overwrite of the guest entry it came from; and guest PID
    /// and mode switches drop nothing.
    #[test]
    fn the_tagged_shadow_stays_a_subset_across_vcpus_and_recycled_tids(
        initial in prop::collection::vec((entry_write(), 0usize..2), 0..24),
        backings in prop::collection::vec(backing(), 0..12),
        regions in prop::collection::vec(region(), 0..6),
        ops in prop::collection::vec((op(), 0usize..2), 1..80),
    ) {
        let mut vcpus = [Vcpu::new(), Vcpu::new()];
        for (w, v) in &initial {
            vcpus[*v].write(w);
        }
        let mut map = build_host(&vcpus[0].model, &backings, &regions);
        let mut shadow = ShadowTlb::<12>::new();
        let mut pool = TidPool::default();
        for (op, v) in &ops {
            let owner = *v as u8;
            match op {
                Op::Write(w) => {
                    let before = shadow.derived_from(owner, w.index);
                    let event = Event::GuestTlbWrite { index: w.index };
                    prop_assert!(!needs_flush(event), "a guest TLB write flushes selectively");
                    let c = &mut vcpus[*v];
                    for (word, value) in w.words.iter().enumerate() {
                        c.guest.tlbwe(w.index, word as u32, *value, w.mmucr).expect("valid word");
                        c.model.tlbwe(w.index, word as u32, *value, w.mmucr);
                        shadow.invalidate_guest_word(owner, &c.guest, w.index, word as u32);
                    }
                    prop_assert_eq!(shadow.occupied().0 & before.0, 0, "derived slots survived the overwrite");
                }
                Op::WriteWord { index, word, value, mmucr } => {
                    let before = shadow.derived_from(owner, *index);
                    let c = &mut vcpus[*v];
                    c.guest.tlbwe(*index, *word, *value, *mmucr).expect("valid word");
                    c.model.tlbwe(*index, *word, *value, *mmucr);
                    // What the kernel does: words 1 and 2 drop only the derived slots.
                    shadow.invalidate_guest_word(owner, &c.guest, *index, *word);
                    prop_assert_eq!(shadow.occupied().0 & before.0, 0, "derived slots survived the overwrite");
                }
                Op::Access(q) => {
                    let c = &vcpus[*v];
                    let (ea, _, _) = q.resolve(&c.model);
                    let got = shadow_fill(&c.guest, &map, ea, c.pid, c.pr, q.access, c.ts);
                    prop_assert_eq!(kind_of(&got), reference_kind(&c.model, &map, ea, c.pid, c.pr, q.access, c.ts));
                    if let FillResult::Hit { hw, guest_index } = got {
                        let tid = pool.tid(&mut shadow, Key::Guest(owner, c.pid, c.pr));
                        let placed = shadow.insert(owner, hw.tagged(tid), guest_index);
                        prop_assert!(!placed.invalidate.contains(placed.slot));
                        prop_assert_eq!(shadow.lookup(ea, tid).map(|(i, _)| i), Some(placed.slot), "the hardware now uses it");
                    }
                }
                Op::SetPid(p) => {
                    prop_assert!(!needs_flush(Event::GuestAddressSpaceSwitch));
                    vcpus[*v].pid = *p;
                }
                Op::SetPr(p) => {
                    prop_assert!(!needs_flush(Event::GuestUserKernelSwitch));
                    vcpus[*v].pr = *p;
                }
                Op::SetTs(t) => {
                    if *t != vcpus[*v].ts {
                        prop_assert!(needs_flush(Event::GuestTranslationSpaceSwitch));
                        shadow.invalidate_owner(owner);
                        vcpus[*v].ts = *t;
                    }
                }
                Op::Revoke(pick) => {
                    let keys: Vec<_> = map.pages.keys().copied().collect();
                    if !keys.is_empty() {
                        let r = map.pages.remove(&keys[pick.index(keys.len())]).expect("present");
                        prop_assert!(!needs_flush(Event::HostMappingRevoked));
                        shadow.invalidate_host_range(r.host, u64::from(r.size));
                    }
                }
                Op::Native(space) => {
                    let tid = pool.tid(&mut shadow, Key::Native(*space));
                    shadow.insert_native(tid);
                }
            }
            check_tagged_shadow(&shadow, &vcpus, &pool, &map)?;
        }
    }
}

/// One vCPU of the tagged-shadow property: its guest TLB, the model, and its PID, mode
/// and translation space.
struct Vcpu {
    guest: GuestTlb,
    model: RefTlb,
    pid: u8,
    pr: bool,
    ts: bool,
}

impl Vcpu {
    fn new() -> Vcpu {
        Vcpu {
            guest: GuestTlb::new(),
            model: RefTlb::new(),
            pid: 0,
            pr: false,
            ts: false,
        }
    }
    fn write(&mut self, w: &EntryWrite) {
        for (word, value) in w.words.iter().enumerate() {
            self.guest
                .tlbwe(w.index, word as u32, *value, w.mmucr)
                .expect("valid word");
            self.model.tlbwe(w.index, word as u32, *value, w.mmucr);
        }
    }
}

/// Who holds a hardware TID: a native space, or (vCPU, guest PID, guest user mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Native(u8),
    Guest(u8, u8, bool),
}

/// The kernel's TID pool in small (`kcore::pid` steals the longest-held TID when dry and
/// the kernel then drops every slot tagged with it): TIDs 1..=POOL.
#[derive(Default)]
struct TidPool {
    /// (TID, holder) in allocation order.
    held: Vec<(u8, Key)>,
}

const POOL: u8 = 5;

impl TidPool {
    fn tid(&mut self, shadow: &mut ShadowTlb<12>, key: Key) -> u8 {
        if let Some(&(t, _)) = self.held.iter().find(|(_, k)| *k == key) {
            return t;
        }
        let t = if self.held.len() < POOL as usize {
            (1..=POOL)
                .find(|t| self.held.iter().all(|(h, _)| h != t))
                .expect("free")
        } else {
            let (t, _) = self.held.remove(0);
            shadow.invalidate_tid(t);
            t
        };
        self.held.push((t, key));
        t
    }
    fn holder(&self, tid: u8) -> Option<Key> {
        self.held.iter().find(|(t, _)| *t == tid).map(|(_, k)| *k)
    }
}

/// The invariants of the tagged shadow (see the property above).
fn check_tagged_shadow(
    shadow: &ShadowTlb<12>,
    vcpus: &[Vcpu; 2],
    pool: &TidPool,
    map: &HostMap,
) -> Result<(), TestCaseError> {
    let slots: Vec<_> = shadow
        .occupied()
        .map(|i| *shadow.slot(i).expect("occupied"))
        .collect();
    for (i, s) in slots.iter().enumerate() {
        let Some(Key::Guest(owner, pid, pr)) = pool.holder(s.hw.tid) else {
            return Err(TestCaseError::fail(format!(
                "slot {s:x?}: its TID is not a guest TID now"
            )));
        };
        prop_assert_eq!(owner, s.owner, "the TID belongs to another vCPU");
        let c = &vcpus[owner as usize];
        check_entry(
            &c.model,
            map,
            &s.hw,
            s.guest_index as usize,
            (pid, pr, c.ts),
        )
        .map_err(TestCaseError::fail)?;
        for t in &slots[i + 1..] {
            prop_assert!(!multi_hit(&s.hw, &t.hw), "multi-hit: {:?} {:?}", s, t);
        }
    }
    for i in shadow.native() {
        let tid = shadow.tid_of(i).expect("native slot");
        prop_assert!(
            matches!(pool.holder(tid), Some(Key::Native(_))),
            "native slot {} with TID {}",
            i,
            tid
        );
    }
    Ok(())
}

/// The hardware TID the split property tags its entries with (one guest PID and mode).
const SPLIT_TID: u8 = 9;

/// Whether slot entry `hw` lets the hardware perform `access` at `ea` under the hardware
/// PID [`SPLIT_TID`].
fn hw_allows(hw: &HwEntry, ea: u32, access: Access) -> bool {
    hw.contains(ea) && hw.visible_with_pid(SPLIT_TID) && hw.perms.contains(access.right())
}

/// The host address the model's two-stage translation gives `ea` in space `ts`.
fn model_host(model: &RefTlb, map: &HostMap, ea: u32, pid: u8, ts: bool) -> Option<u64> {
    let e = &model.e[model.first_match(ea, pid, ts)?];
    let gpa = e.translate(ea);
    let r = map.region_of(gpa)?;
    Some(u64::from(r.host) + (gpa - r.gpa))
}

/// One split-mode instruction as the hardware runs it against `shadow`: the fetch of
/// `pc` (space `is`), then one data access at `ea` (space `ds`), each retried after the
/// kernel's fill, until it completes, raises a guest exception or is emulated. Returns
/// the number of fills, failing on any fill that breaks the subset rules, on a hardware
/// hit that translates differently from the model, and after 8 fills (a livelock).
#[allow(clippy::too_many_arguments)]
fn run_split_instruction<const N: usize>(
    shadow: &mut ShadowTlb<N>,
    guest: &GuestTlb,
    model: &RefTlb,
    map: &HostMap,
    (pid, pr, is): (u8, bool, bool),
    pc: u32,
    ea: u32,
    access: Access,
) -> Result<u32, TestCaseError> {
    let ds = !is;
    let mut fills = 0;
    loop {
        prop_assert!(fills <= 8, "livelock: pc {:#x} ea {:#x}", pc, ea);
        // Instruction fetch.
        let fetched = shadow.lookup(pc, SPLIT_TID).map(|(_, s)| *s);
        match fetched {
            Some(s) if hw_allows(&s.hw, pc, Access::Execute) => {
                prop_assert_eq!(
                    Some(u64::from(s.hw.rpn_base + (pc - s.hw.epn))),
                    model_host(model, map, pc, pid, is),
                    "fetch uses the IS translation"
                );
            }
            _ => {
                let r = split_fill(guest, map, pc, pid, pr, Access::Execute, is, ds, pc);
                match r {
                    SplitFill::Fill(FillResult::Hit { hw, guest_index }) => {
                        prop_assert!(hw.contains(pc) && hw.bytes() <= SPLIT_PAGE.bytes());
                        prop_assert_eq!(hw.perms, hw.perms.intersect(Rights::X));
                        check_entry(model, map, &hw, guest_index as usize, (pid, pr, is))
                            .map_err(TestCaseError::fail)?;
                        shadow.insert(0, hw.tagged(SPLIT_TID), guest_index);
                        fills += 1;
                        continue;
                    }
                    SplitFill::Fill(_) => return Ok(fills),
                    SplitFill::Emulate => {
                        prop_assert!(false, "a fetch is never emulated");
                    }
                }
            }
        }
        // Data access.
        let used = shadow.lookup(ea, SPLIT_TID).map(|(_, s)| *s);
        match used {
            Some(s) if hw_allows(&s.hw, ea, access) => {
                prop_assert_eq!(
                    Some(u64::from(s.hw.rpn_base + (ea - s.hw.epn))),
                    model_host(model, map, ea, pid, ds),
                    "data uses the DS translation"
                );
                return Ok(fills);
            }
            _ => match split_fill(guest, map, ea, pid, pr, access, is, ds, pc) {
                SplitFill::Fill(FillResult::Hit { hw, guest_index }) => {
                    prop_assert!(hw.contains(ea) && hw.bytes() <= SPLIT_PAGE.bytes());
                    prop_assert_eq!(hw.perms, hw.perms.intersect(Rights::RW));
                    check_entry(model, map, &hw, guest_index as usize, (pid, pr, ds))
                        .map_err(TestCaseError::fail)?;
                    shadow.insert(0, hw.tagged(SPLIT_TID), guest_index);
                    fills += 1;
                }
                SplitFill::Fill(_) => return Ok(fills),
                SplitFill::Emulate => {
                    // Only when the data page is the instruction's own 4 KiB page and the
                    // access itself is allowed.
                    prop_assert_eq!((ea ^ pc) & !0xFFF, 0, "emulated only in the code page");
                    prop_assert_eq!(
                        reference_kind(model, map, ea, pid, pr, access, ds),
                        Kind::Hit(model.first_match(ea, pid, ds).expect("hit"))
                    );
                    return Ok(fills);
                }
            },
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// MSR[IS] != MSR[DS] (issue 9, finding 1): for any guest TLB and host memory, and
    /// any sequence of instructions (fetch at one address, data access at another, often
    /// the same page), every instruction completes, faults into the guest or is emulated
    /// after a bounded number of fills; every fill is small, restricted to its access class
    /// and a subset of the guest's translation for that class; and no two shadow entries
    /// ever hit at once.
    #[test]
    fn split_translation_spaces_never_livelock(
        initial in prop::collection::vec(entry_write(), 1..16),
        backings in prop::collection::vec(backing(), 1..12),
        insns in prop::collection::vec((query(), query(), 0u32..4, access()), 1..24),
        is in any::<bool>(),
        pid in prop::sample::select(vec![0u8, 1, 2, 3]),
        pr in any::<bool>(),
    ) {
        let (guest, model) = build(&initial);
        let map = build_host(&model, &backings, &[]);
        let mut shadow = ShadowTlb::<6>::new();
        for (fetch_q, data_q, near, access) in &insns {
            let access = if *access == Access::Execute { Access::Read } else { *access };
            let (pc, _, _) = fetch_q.resolve(&model);
            let pc = pc & !3;
            // Half the time the data address is in the code's own page.
            let ea = match near {
                0 | 1 => (pc & !0xFFF) | (data_q.raw_ea & 0xFFF),
                _ => data_q.resolve(&model).0,
            };
            run_split_instruction(&mut shadow, &guest, &model, &map, (pid, pr, is), pc, ea, access)?;
            let slots: Vec<_> = shadow.occupied().map(|i| *shadow.slot(i).expect("occupied")).collect();
            for (i, s) in slots.iter().enumerate() {
                for t in &slots[i + 1..] {
                    prop_assert!(
                        !multi_hit(&s.hw, &t.hw),
                        "multi-hit: {:?} {:?}", s, t
                    );
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(EntryWrite),
    WriteWord {
        index: u32,
        word: u32,
        value: u32,
        mmucr: u32,
    },
    Access(Query),
    SetPid(u8),
    SetPr(bool),
    SetTs(bool),
    Revoke(Index),
    /// A native refill by native space `n`.
    Native(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => entry_write().prop_map(Op::Write),
        2 => (entry_write(), 0u32..3).prop_map(|(w, word)| Op::WriteWord { index: w.index, word, value: w.words[word as usize], mmucr: w.mmucr }),
        10 => query().prop_map(Op::Access),
        3 => prop::sample::select(vec![0u8, 1, 2, 3]).prop_map(Op::SetPid),
        2 => any::<bool>().prop_map(Op::SetPr),
        1 => prop::bool::weighted(0.2).prop_map(Op::SetTs),
        1 => any::<Index>().prop_map(Op::Revoke),
        3 => (0u8..3).prop_map(Op::Native),
    ]
}

/// The typical Linux layout, spelled out: the kernel's 256 MiB lowmem page, a user text
/// page both modes may use, and a user stack page; host RAM in 4 KiB pages.
#[test]
fn linux_like_layout_shadows_per_mode() {
    let (guest, model) = build(&[
        // 0xC000_0000 → 0, 256 MiB, supervisor RWX only, TID 0 (pinned kernel entry).
        EntryWrite {
            index: 63,
            words: [0xC000_0000 | 0x200 | 0x90, 0, 0x07],
            mmucr: 0,
        },
        // 0x1000_0000 user text, UR UX SR SX (same both ways), PID 5.
        EntryWrite {
            index: 0,
            words: [0x1000_0000 | 0x200 | 0x10, 0x0020_0000, 0x28 | 0x05],
            mmucr: 5,
        },
        // 0x7FFF_F000 user stack, UR UW SR SW.
        EntryWrite {
            index: 1,
            words: [0x7FFF_F000 | 0x200 | 0x10, 0x0030_0000, 0x18 | 0x03],
            mmucr: 5,
        },
    ]);
    let mut map = HostMap::default();
    for page in 0..0x1000u64 {
        map.insert(Region {
            gpa: page << 12,
            size: 4096,
            host: 0x0800_0000 + ((page as u32) << 12),
            rights: Rights::RWX,
            device: false,
        });
    }
    let fill = |ea, pr, access| shadow_fill(&guest, &map, ea, 5, pr, access, false);
    let FillResult::Hit { hw, .. } = fill(0xC000_1234, false, Access::Write) else {
        panic!("kernel data")
    };
    assert_eq!(
        (hw.tid, hw.epn, hw.size, hw.rpn_base, hw.perms),
        (
            UNTAGGED,
            0xC000_1000,
            PageSize::K4,
            0x0800_1000,
            Rights::RWX
        )
    );
    assert_eq!(
        fill(0xC000_1234, true, Access::Read),
        FillResult::GuestProtection,
        "user cannot touch the kernel"
    );
    let FillResult::Hit { hw, .. } = fill(0x1000_0010, true, Access::Execute) else {
        panic!("user text")
    };
    assert_eq!((hw.tid, hw.perms), (UNTAGGED, Rights::RX));
    let FillResult::Hit { hw: k, .. } = fill(0x1000_0010, false, Access::Read) else {
        panic!("user text from the kernel")
    };
    assert_eq!(
        k, hw,
        "equal rights: the same entry, tagged per mode by the kernel"
    );
    let FillResult::Hit { hw, .. } = fill(0x7FFF_F800, true, Access::Write) else {
        panic!("user stack")
    };
    assert_eq!((hw.tid, hw.perms), (UNTAGGED, Rights::RW));
    assert_eq!(fill(0x2000_0000, true, Access::Read), FillResult::GuestMiss);
    assert_eq!(
        reference_kind(&model, &map, 0x2000_0000, 5, true, Access::Read, false),
        Kind::GuestMiss
    );
}
