//! Target `vtlb`: the virtual TLB (`kestrel_vtlb`) driven the way the kernel drives it,
//! against the reference model `kestrel_testkit::vtlb` (QEMU's `helper_440_tlbwe`, `tlbre`
//! and `ppcemb_tlb_check` in hex constants, host memory as a map of aligned pages; shared
//! with `vtlb/tests/model.rs`, as are the rules a hit and a shadow slot must obey).
//!
//! Input: a host map (up to eight aligned host pages, optionally one 256 MiB RWX page at
//! guest-physical 0), then operations: `tlbwe` of one word or of a whole entry (each word
//! followed by `ShadowTlb::invalidate_guest_write`, as the kernel's emulator does),
//! `tlbre`, `tlbsx`, TLB misses (`shadow_fill`, then `ShadowTlb::insert` on a hit), guest
//! PID, `MSR[PR]`, `MSR[IS]` and `MSR[DS]` switches, host mappings added and revoked.
//!
//! Checked: `tlbwe`/`tlbre`/`tlbsx` agree with the model (and reject word 3); every fill's
//! kind agrees with the model, and a hit is exactly guest ∩ VMM rights with Fig. 5's TID,
//! its page inside the guest's first match and one host page, as large as allowed;
//! `insert` reports only slots that were occupied; and after every operation every
//! occupied shadow slot is still correct for the current guest PID, mode and TLB (the
//! invariant the kernel relies on: a hardware entry never grants more than the guest TLB
//! and the VMM allow), with no two slots overlapping under a common hardware PID.
//!
//! `MSR[IS]` and `MSR[DS]` switch independently (the kernel flushes on either): fetches
//! fill from space IS and data from space DS, and while they differ each hit is narrowed to
//! its access class (`HwEntry::restricted_to`) as the kernel's `virt/mmu.rs` does; a slot's
//! X permission is then judged in space IS and its R/W permissions in space DS. (This is
//! the safety side of issue 9's finding 1; the livelock itself is a liveness question the
//! kernel's on-target regression test covers.)

use crate::input::{Input, SeedWriter};
use kestrel_abi::Rights;
use kestrel_testkit::vtlb::{
    check_entry, check_fill, multi_hit, EntryDraw, HostMap, RefTlb, Region, EA_ANCHORS,
    GPA_ANCHORS, OFFSETS,
};
use kestrel_vtlb::{
    needs_flush, split_fill, Access, Event, FillResult, GuestTlb, HwEntry, Placement, ShadowTlb,
    SplitFill, SPLIT_PAGE,
};

/// Shadow slots: few, so that fills evict each other.
const SLOTS: usize = 8;

// ---------------------------------------------------------------------------------------
// Input decoding

const SIZE_CODES: [u32; 11] = [0, 1, 2, 3, 4, 5, 7, 9, 0xA, 6, 8];

/// An offset: one of the shared values most of the time (so entries nest), else any.
fn offset(input: &mut Input) -> u32 {
    let b = input.u8();
    if b < 0xC0 {
        OFFSETS[usize::from(b) % OFFSETS.len()]
    } else {
        input.u32()
    }
}

/// The three words and MMUCR that write one entry (the generator of `model.rs`).
fn entry_write(input: &mut Input) -> (u32, [u32; 3], u32) {
    let index = input.u8();
    let index = if index & 0x80 != 0 {
        input.u32()
    } else {
        u32::from(index % 20)
    };
    let anchor = input.pick(&EA_ANCHORS);
    let off = offset(input);
    let c = input.u8();
    let code = if c < 0xF0 {
        SIZE_CODES[usize::from(c) % SIZE_CODES.len()]
    } else {
        u32::from(c & 0xF)
    };
    let flags = input.u8();
    let (aligned, valid, ts) = (flags & 0x0F != 0, flags & 0x70 != 0, flags & 0x80 != 0);
    let tid = input.pick(&[0u8, 0, 1, 2, 3]);
    let ganchor = input.pick(&GPA_ANCHORS);
    let goff = input.u32() % (64 << 20);
    let erpn = input.u8();
    let perms = input.u8();
    let perms = match perms >> 6 {
        0 | 1 => u32::from(perms & 0x3F),
        2 => (u32::from(perms & 7) << 3) | u32::from(perms & 7),
        _ => 0x3F,
    };
    let attr = input.u32();
    let junk = input.u32();
    let mmucr_other = input.u32();

    let words = EntryDraw {
        anchor,
        offset: off,
        code,
        aligned,
        valid,
        ts,
        gpa: ganchor.wrapping_add(goff),
        erpn: if erpn >= 0xE0 {
            u32::from(erpn & 0xF)
        } else {
            0
        },
        perms,
        attr,
        junk,
    }
    .words();
    (index, words, (mmucr_other & !0xFF) | u32::from(tid))
}

fn region(input: &mut Input) -> Region {
    let anchor = input.pick(&GPA_ANCHORS);
    let off = input.u32() % (64 << 20);
    let l = input.u8();
    let log = match l % 7 {
        0..=3 => 12 + u32::from(l >> 3) % 5,
        4 | 5 => 17 + u32::from(l >> 3) % 8,
        _ => 25 + u32::from(l >> 3) % 4,
    };
    let host = input.u32();
    let flags = input.u8();
    let size = 1u32 << log;
    let gpa = u64::from(anchor.wrapping_add(off) & !(size - 1))
        | if flags & 0x80 != 0 { 1 << 32 } else { 0 };
    Region {
        gpa,
        size,
        host: host & !(size - 1),
        rights: Rights(flags & 7),
        device: flags & 0x38 == 0x38,
    }
}

/// A guest access: near a valid entry (taking its TID and TS), or at a raw address.
fn query(input: &mut Input, model: &RefTlb, pid: u8, ts: bool) -> (u32, u8, bool) {
    let how = input.u8();
    let pick = input.u8();
    let off = offset(input);
    let raw = input.u32();
    let valid = model.valid();
    if how < 0xD0 && !valid.is_empty() {
        let e = valid[usize::from(pick) % valid.len()];
        let ea = e.epn.wrapping_add((u64::from(off) % e.span()) as u32);
        if how & 1 == 0 {
            return (ea, if e.tid == 0 { pid } else { e.tid }, e.ts);
        }
        return (ea, pid, ts);
    }
    (raw, pid, ts)
}

// ---------------------------------------------------------------------------------------
// The target

/// Operation selectors, for [`seed`].
pub mod op {
    pub const TLBWE: u8 = 0;
    pub const WRITE_ENTRY: u8 = 1;
    pub const TLBRE: u8 = 2;
    pub const TLBSX: u8 = 3;
    pub const FILL: u8 = 4;
    pub const PID: u8 = 5;
    pub const PR: u8 = 6;
    pub const TS: u8 = 7;
    pub const REVOKE: u8 = 8;
    pub const MAP: u8 = 9;
    pub const COUNT: u8 = 10;
}

/// The guest PIDs the fuzzer switches between.
const PIDS: [u8; 5] = [0, 1, 2, 3, 0xFF];

/// The hardware TID the kernel would have allocated for (guest PID, user mode): one per
/// pair, never 0 (ADR 0024).
fn tid_of(pid: u8, pr: bool) -> u8 {
    let i = PIDS.iter().position(|&p| p == pid).expect("a fuzzer PID") as u8;
    1 + 2 * i + pr as u8
}

/// The (guest PID, user mode) of a TID from [`tid_of`].
fn pid_mode_of(tid: u8) -> (u8, bool) {
    (PIDS[((tid - 1) / 2) as usize], (tid - 1) % 2 == 1)
}

struct State {
    guest: GuestTlb,
    model: RefTlb,
    shadow: ShadowTlb<SLOTS>,
    host: HostMap,
    pid: u8,
    pr: bool,
    /// `MSR[IS]` (fetches) and `MSR[DS]` (data).
    is: bool,
    ds: bool,
}

impl State {
    fn tlbwe(&mut self, index: u32, word: u32, value: u32, mmucr: u32) {
        let ok = self.guest.tlbwe(index, word, value, mmucr).is_ok();
        assert_eq!(
            ok,
            self.model.tlbwe(index, word, value, mmucr),
            "tlbwe word {word}"
        );
        if ok {
            let _ = needs_flush(Event::GuestTlbWrite { index });
            self.shadow.invalidate_guest_write(0, &self.guest, index);
        }
    }
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut host = HostMap::default();
    let flags = input.u8();
    if flags & 1 != 0 {
        host.insert(Region {
            gpa: 0,
            size: 1 << 28,
            host: 0x4000_0000,
            rights: Rights::RWX,
            device: false,
        });
    }
    for _ in 0..(flags >> 1) % 9 {
        let r = region(&mut input);
        host.insert(r);
    }
    let mut s = State {
        guest: GuestTlb::new(),
        model: RefTlb::new(),
        shadow: ShadowTlb::new(),
        host,
        pid: 0,
        pr: false,
        is: false,
        ds: false,
    };
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::TLBWE => {
                let (index, words, mmucr) = entry_write(&mut input);
                let word = u32::from(input.u8() % 4);
                let value = words.get(word as usize).copied().unwrap_or(words[0]);
                s.tlbwe(index, word, value, mmucr);
            }
            op::WRITE_ENTRY => {
                let (index, words, mmucr) = entry_write(&mut input);
                for (word, value) in words.into_iter().enumerate() {
                    s.tlbwe(index, word as u32, value, mmucr);
                }
            }
            op::TLBRE => {
                let index = u32::from(input.u8());
                let word = u32::from(input.u8() % 4);
                let mmucr = input.u32();
                let got = s.guest.tlbre(index, word, mmucr).ok();
                assert_eq!(
                    got,
                    s.model.tlbre(index, word, mmucr),
                    "tlbre {index} word {word}"
                );
            }
            op::TLBSX => {
                let (ea, pid, ts) = query(&mut input, &s.model, s.pid, s.ds);
                let other = input.u32() & !0x1_00FF;
                let mmucr = other | u32::from(pid) | if ts { 0x1_0000 } else { 0 };
                let want = s.model.first_match(ea, pid, ts).map(|i| i as u32);
                assert_eq!(s.guest.tlbsx(ea, mmucr), want, "tlbsx {ea:#x}");
                assert_eq!(
                    s.guest.lookup(ea, pid, ts).map(|(i, _)| i),
                    want,
                    "lookup {ea:#x}"
                );
            }
            op::FILL => {
                let (ea, _, _) = query(&mut input, &s.model, s.pid, s.ds);
                let access = input.pick(&[Access::Read, Access::Write, Access::Execute]);
                if s.is != s.ds && access != Access::Execute {
                    // An instruction at `pc` accessing `ea` while the guest runs split: its
                    // fetch is filled first, then its data access must not evict the fetch
                    // entry (issue 9 finding 1: else the two fills alternate forever).
                    let (pc, _, _) = query(&mut input, &s.model, s.pid, s.is);
                    let fetch = fill(&mut s, pc, Access::Execute, pc);
                    let free = s.shadow.occupied().len() < SLOTS as u32;
                    let data = fill(&mut s, ea, access, pc);
                    if let (Some(f), Some(d)) = (fetch, data) {
                        assert!(
                            !(d.invalidate.contains(f.slot) || free && d.slot == f.slot),
                            "split: the data fill at {ea:#x} evicts the fetch entry of pc {pc:#x}"
                        );
                    }
                } else {
                    fill(&mut s, ea, access, ea);
                }
            }
            op::PID => {
                let pid = input.pick(&PIDS);
                // Tagged TIDs: every (PID, mode) has its own, so nothing is dropped; the
                // invariant check below judges every slot under its own TID's PID and mode.
                assert!(!needs_flush(Event::GuestAddressSpaceSwitch));
                s.pid = pid;
            }
            op::PR => {
                assert!(!needs_flush(Event::GuestUserKernelSwitch));
                s.pr = !s.pr;
            }
            op::TS => {
                assert!(needs_flush(Event::GuestTranslationSpaceSwitch));
                // mtmsr/rfi changing IS, DS or both (a split is legal on the 440).
                let which = input.u8() % 3;
                s.shadow.invalidate_owner(0);
                s.is ^= which != 1;
                s.ds ^= which != 0;
            }
            op::REVOKE => {
                let pick = usize::from(input.u8());
                let mut keys: Vec<(u32, u64)> = s.host.pages.keys().copied().collect();
                keys.sort_unstable();
                if let Some(&k) = keys.get(pick % keys.len().max(1)) {
                    let r = s.host.pages.remove(&k).expect("listed");
                    assert!(!needs_flush(Event::HostMappingRevoked));
                    s.shadow.invalidate_host_range(r.host, u64::from(r.size));
                }
            }
            _ => {
                let r = region(&mut input);
                s.host.insert(r);
            }
        }
        check_slots(&s);
    }
}

/// A TLB miss at `ea` for `access` by the instruction at `pc`, as the kernel handles it:
/// checked against the model, then the entry (narrowed by `split_fill` while the guest
/// runs split) goes into the shadow TLB. Returns where it went.
fn fill(s: &mut State, ea: u32, access: Access, pc: u32) -> Option<Placement> {
    let (model, map) = (&s.model, &s.host);
    let ts = if access == Access::Execute {
        s.is
    } else {
        s.ds
    };
    let got = check_fill(&s.guest, model, map, ea, (s.pid, s.pr, ts), access)
        .unwrap_or_else(|m| panic!("{m}"));
    if s.is != s.ds {
        let split = split_fill(&s.guest, map, ea, s.pid, s.pr, access, s.is, s.ds, pc);
        assert_eq!(
            split_fill(&s.guest, map, ea, s.pid, s.pr, access, s.is, s.ds, pc),
            split
        );
        match (split, got) {
            (SplitFill::Fill(FillResult::Hit { .. }), FillResult::Hit { .. }) => {}
            (SplitFill::Fill(r), _) => assert_eq!(r, got, "split fill {ea:#x}: not a hit"),
            (SplitFill::Emulate, FillResult::Hit { .. }) => {
                assert_ne!(access, Access::Execute, "split: a fetch is always filled")
            }
            (SplitFill::Emulate, _) => panic!("split: emulating {ea:#x} the guest may not do"),
        }
    }
    let FillResult::Hit { hw, guest_index } = got else {
        return None;
    };
    // With MSR[IS] != MSR[DS] the kernel installs what `split_fill` says: the hit narrowed
    // to SPLIT_PAGE and to the access class's permissions, or nothing (it emulates).
    let hw = if s.is != s.ds {
        let split = split_fill(&s.guest, map, ea, s.pid, s.pr, access, s.is, s.ds, pc);
        let SplitFill::Fill(FillResult::Hit {
            hw: n,
            guest_index: ng,
        }) = split
        else {
            return None;
        };
        let class = if access == Access::Execute {
            Rights::X
        } else {
            Rights::RW
        };
        assert_eq!(ng, guest_index, "split: same guest entry");
        assert!(
            n.bytes() <= SPLIT_PAGE.bytes() && n.bytes() <= hw.bytes(),
            "{n:x?}"
        );
        assert!(
            n.contains(ea) && hw.contains(n.epn),
            "{n:x?} inside {hw:x?}"
        );
        assert_eq!(
            n.rpn_base,
            hw.rpn_base + (n.epn - hw.epn),
            "split: same translation"
        );
        assert_eq!(
            n.perms,
            hw.perms.intersect(class),
            "split: the access class only"
        );
        assert_eq!((n.tid, n.wimge), (hw.tid, hw.wimge));
        n
    } else {
        hw
    };
    let before = s.shadow.occupied();
    let hw = hw.tagged(tid_of(s.pid, s.pr));
    let placement = s.shadow.insert(0, hw, guest_index);
    assert!(placement.slot < SLOTS);
    assert_eq!(
        placement.invalidate.0 & !before.0,
        0,
        "invalidates only occupied slots"
    );
    assert!(!placement.invalidate.contains(placement.slot));
    let slot = s
        .shadow
        .slot(placement.slot)
        .expect("the new slot is occupied");
    assert_eq!((slot.hw, slot.guest_index), (hw, guest_index & 63));
    assert!(s
        .shadow
        .derived_from(0, guest_index)
        .contains(placement.slot));
    Some(placement)
}

/// Every occupied slot is right for the current context; no two overlap under a common
/// hardware PID.
fn check_slots(s: &State) {
    let occupied: Vec<usize> = s.shadow.occupied().collect();
    for &i in &occupied {
        let slot = s.shadow.slot(i).expect("occupied");
        assert!(
            s.shadow.derived_from(0, slot.guest_index).contains(i),
            "slot {i} filed under its guest index"
        );
        // A slot serves fetches with its X permission (translation space IS) and data with
        // R and W (space DS): each part must be right for its space.
        let gi = slot.guest_index as usize;
        for (keep, ts) in [(Rights::X, s.is), (Rights::RW, s.ds)] {
            let part = HwEntry {
                perms: slot.hw.perms.intersect(keep),
                ..slot.hw
            };
            if !part.perms.is_empty() {
                let (pid, pr) = pid_mode_of(slot.hw.tid);
                check_entry(&s.model, &s.host, &part, gi, (pid, pr, ts)).unwrap_or_else(|m| {
                    panic!("stale shadow slot {i} (IS {}, DS {}): {m}", s.is, s.ds)
                });
            }
        }
        for &j in occupied.iter().filter(|&&j| j > i) {
            let other = s.shadow.slot(j).expect("occupied").hw;
            assert!(
                !multi_hit(&slot.hw, &other),
                "slots {i} and {j} overlap: {:x?} {:x?}",
                slot.hw,
                other
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Seeds

/// A seed: the identity host page, then `n` whole-entry writes at the anchors, a fill per
/// entry in both modes, a PID switch, a `tlbsx`, a `tlbre` and a revocation.
pub fn seed(n: u8, variant: u8) -> Vec<u8> {
    let mut w = SeedWriter::default();
    w.u8(1 | (2 << 1));
    for k in 0..2u8 {
        // region(): anchor, offset, log, host, flags
        w.u8(k)
            .u32(u32::from(k) << 20)
            .u8(k * 8)
            .u32(0x2000_0000)
            .u8(7);
    }
    for i in 0..n {
        w.u8(op::WRITE_ENTRY);
        // entry_write(): index, anchor, offset, code, flags, tid, ganchor, goff, erpn,
        // perms, attr, junk, mmucr
        w.u8(i)
            .u8(i.wrapping_add(variant))
            .u8(i)
            .u8(i.wrapping_mul(3).wrapping_add(variant));
        w.u8(0x7F)
            .u8(variant % 5)
            .u8(0)
            .u32(u32::from(i) << 12)
            .u8(0);
        w.u8(if variant.is_multiple_of(2) {
            0x3F
        } else {
            0x80 | 5
        })
        .u32(0)
        .u32(0)
        .u32(0);
    }
    for pr in 0..2 {
        for i in 0..n {
            w.u8(op::FILL).u8(0).u8(i).u8(i).u32(0).u8(i % 3);
        }
        if pr == 0 {
            w.u8(op::PR);
        }
    }
    w.u8(op::PID).u8(variant % 5);
    w.u8(op::TLBSX).u8(0).u8(0).u8(0).u32(0).u32(0);
    w.u8(op::TLBRE).u8(0).u8(0).u32(0xFF);
    w.u8(op::FILL).u8(0).u8(1).u8(2).u32(0).u8(0);
    w.u8(op::REVOKE).u8(variant);
    w.u8(op::TS)
        .u8(variant % 3)
        .u8(op::FILL)
        .u8(0)
        .u8(0)
        .u8(0)
        .u32(0)
        .u8(1);
    w.bytes
}

/// Issue 9 finding 1's reproducer as a seed: guest TLB entry 0 maps EA 0..16 MiB in TS 0
/// to guest-physical 0, entry 1 the same EAs in TS 1 to guest-physical 16 MiB; the guest
/// sets `MSR[DS]` only and loads from its own code page, then from another page.
pub fn split_seed() -> Vec<u8> {
    let mut w = SeedWriter::default();
    w.u8(1); // the 256 MiB RWX host page at guest-physical 0, no other regions
    for (index, ts, goff) in [(0u8, 0x7Fu8, 0u32), (1, 0xFF, 16 << 20)] {
        // entry_write(): index, anchor 0, offset 0, SIZE 16 MiB (SIZE_CODES[6]), flags,
        // TID 0, GPA anchor 0, offset, no ERPN, all permissions, attr, junk, MMUCR.
        w.u8(op::WRITE_ENTRY)
            .u8(index)
            .u8(0)
            .u8(0)
            .u8(6)
            .u8(ts)
            .u8(0)
            .u8(0)
            .u32(goff);
        w.u8(0).u8(0xC0).u32(0).u32(0).u32(0);
    }
    w.u8(op::TS).u8(1); // DS = 1, IS = 0
    for data_offset in [6u8, 5] {
        // Data at entry 1 + OFFSETS[data_offset] (read), fetched from entry 0 + 0x12_3400.
        w.u8(op::FILL).u8(0).u8(1).u8(data_offset).u32(0).u8(0);
        w.u8(0).u8(0).u8(6).u32(0);
    }
    w.bytes
}
