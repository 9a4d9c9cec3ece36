//! The in-kernel virtual TLB glue (paper §3.2): guest TLB misses are resolved here from
//! the guest's TLB (first stage) and the VM space's page table (second stage), and
//! the merged translation is written into the hardware TLB, tagged with the hardware TID
//! of (vCPU, guest PID, guest mode) (docs/adr/0024-tagged-shadow-tlb.md).
//!
//! TIDs come from the kernel's one pool (`kcore::pid`, shared with native spaces) on first
//! use and stay with their (vCPU, guest PID, mode) until the pool runs dry and takes the
//! longest-held one back (with a flush of its entries): a guest PID write, a user/kernel
//! switch and a world switch only load the PID register. Every vCPU keeps its TID table
//! (`Vcpu::tids`) and the two TIDs of its current guest PID (`Vcpu::hw_tid`), which the
//! PID register holds while the guest runs; 0 there (no TID yet) makes every guest access
//! miss, and the miss allocates. Guest entries live in the refillable hardware entries
//! next to native refills; `Kernel::tlb` places both and records every entry's owner.

use super::vcpu::{Vcpu, NO_VCPU, NVCPUS};
use crate::api::{space, Kernel};
use crate::arch::{msr, spr, tlb, TrapFrame};
use kestrel_abi::{Rights, TracePoint, PAGE_SIZE};
use kestrel_guestcpu::tlb as gtlb;
use kestrel_kcore::pid::{guest_of, guest_owner};
use kestrel_vtlb::{
    shadow_fill, split_fill, Access, FillResult, GuestPhysMap, HostPage, HwEntry, SlotMask,
    SplitFill, TlbError,
};

const _: () = assert!(NVCPUS <= kestrel_vtlb::OWNERS);
const _: () = assert!(NVCPUS <= kestrel_kcore::pid::GUEST_VCPUS);

/// Second stage: the VM space's page table (guest-physical → host-physical).
pub struct VmSpace<'a> {
    k: &'a Kernel,
    sid: u16,
}

impl<'a> VmSpace<'a> {
    /// The VM space of vCPU thread slot `thread`.
    pub fn of(k: &'a Kernel, thread: usize) -> Self {
        VmSpace {
            k,
            sid: k.threads[thread].space,
        }
    }
}

impl GuestPhysMap for VmSpace<'_> {
    fn translate(&self, gpa: u64) -> Option<HostPage> {
        if gpa > u32::MAX as u64 {
            return None;
        }
        // A fully mapped linear 16 MiB region backs guest pages with large hardware pages.
        if let Some((host, flags)) = space::linear_region(self.k, self.sid, gpa as u32) {
            let size = 1 << space::LINEAR_SHIFT;
            let rights = Rights((flags & space::pte::RIGHTS) as u8);
            return HostPage::new(host, size, rights, flags & space::pte::DEVICE != 0);
        }
        let (e, _) = space::lookup(self.k, self.sid, gpa as u32)?;
        let rights = Rights((e & space::pte::RIGHTS) as u8);
        HostPage::new(
            e & !(PAGE_SIZE - 1),
            PAGE_SIZE,
            rights,
            e & space::pte::DEVICE != 0,
        )
    }
}

/// Index of (guest PID, privileged) in `Vcpu::tids`.
#[inline(always)]
pub const fn tid_key(guest_pid: u8, privileged: bool) -> usize {
    (guest_pid as usize) << 1 | privileged as usize
}

/// The PID register's value for vCPU `v` in its current guest PID and mode (0: no TID
/// yet, every access misses and the miss allocates one).
#[inline(always)]
pub fn current_hw_pid(v: &Vcpu) -> u32 {
    v.hw_tid[(v.s.msr & msr::PR != 0) as usize]
}

/// The hardware TID of (vCPU `vi`, guest PID `guest_pid`, guest privilege `privileged`
/// (guest `MSR[PR]` = 0)): a table lookup, and an allocation from the shared pool on a
/// miss (which may take the longest-held TID from its owner, with a flush of its
/// entries). The fast paths call it for guest PID writes.
#[inline(always)]
pub fn guest_hw_pid(k: &mut Kernel, vi: usize, guest_pid: u8, privileged: bool) -> u8 {
    let t = k.vm.vcpus[vi].tids[tid_key(guest_pid, privileged)];
    if t != 0 {
        return t;
    }
    assign_guest_tid(k, vi, guest_pid, privileged)
}

#[inline(never)]
fn assign_guest_tid(k: &mut Kernel, vi: usize, guest_pid: u8, privileged: bool) -> u8 {
    let t = space::grant_tid(k, guest_owner(vi, guest_pid, privileged));
    let v = &mut k.vm.vcpus[vi];
    v.tids[tid_key(guest_pid, privileged)] = t;
    if v.s.pid as u8 == guest_pid {
        v.hw_tid[!privileged as usize] = t as u32;
        if is_running(k, vi) {
            spr::write::<{ ppc440::spr::PID }>(current_hw_pid(&k.vm.vcpus[vi]));
        }
    }
    t
}

/// Whether vCPU `vi`'s thread is the one running (its TIDs are in the PID register).
#[inline(always)]
fn is_running(k: &Kernel, vi: usize) -> bool {
    k.threads
        .get(k.current)
        .is_some_and(|t| t.vcpu != NO_VCPU && t.vcpu as usize == vi)
}

/// The pool took `tid` from guest owner `owner` (the core flushes its entries): forget it,
/// and if it is the running vCPU's current TID, load PID 0 until a miss allocates another.
pub fn guest_tid_evicted(k: &mut Kernel, owner: u16, tid: u8) {
    let Some((vi, guest_pid, privileged)) = guest_of(owner) else {
        return;
    };
    let Some(v) = k.vm.vcpus.get_mut(vi) else {
        return;
    };
    let key = tid_key(guest_pid, privileged);
    if v.tids[key] != tid {
        return;
    }
    v.tids[key] = 0;
    if v.s.pid as u8 == guest_pid {
        v.hw_tid[!privileged as usize] = 0;
        if is_running(k, vi) {
            spr::write::<{ ppc440::spr::PID }>(current_hw_pid(&k.vm.vcpus[vi]));
        }
    }
}

/// Gives every TID of vCPU `vi` back to the pool, with its entries (the vCPU goes away).
pub fn release_tids(k: &mut Kernel, vi: usize) {
    for key in 0..k.vm.vcpus[vi].tids.len() {
        let t = k.vm.vcpus[vi].tids[key];
        if t != 0 {
            k.vm.vcpus[vi].tids[key] = 0;
            space::release_tid(k, t);
        }
    }
    k.vm.vcpus[vi].hw_tid = [0; 2];
    flush_vcpu(k, vi);
}

/// Invalidates every hardware entry of every guest (a host mapping of some VM was revoked).
pub fn flush_shadow(k: &mut Kernel) {
    for v in k.vm.vcpus.iter_mut() {
        v.fetch_page = 0;
    }
    invalidate_slots(k.tlb.flush_guests());
}

/// Invalidates every hardware entry of vCPU `vi` (its translation space changed).
pub fn flush_vcpu(k: &mut Kernel, vi: usize) {
    k.vm.vcpus[vi].fetch_page = 0;
    invalidate_slots(k.tlb.invalidate_owner(vi as u8));
}

/// The VMM replaced vCPU `vi`'s state (its PID, MSR and so translation space may all have
/// changed): drop its entries and take the TIDs of its (new) guest PID.
pub fn vcpu_state_written(k: &mut Kernel, vi: usize) {
    flush_vcpu(k, vi);
    guest_pid_switch(k, vi);
}

/// vCPU `vi` loaded another guest PID (already in its state): take the TIDs of that PID
/// (no flush: the old PID's entries stay, under their own TIDs), load the PID register if
/// it runs, and drop the fetch cache unless its page translates alike under every PID.
#[inline]
pub fn guest_pid_switch(k: &mut Kernel, vi: usize) {
    let v = &mut k.vm.vcpus[vi];
    let pid = v.s.pid as u8;
    v.hw_tid = [
        v.tids[tid_key(pid, true)] as u32,
        v.tids[tid_key(pid, false)] as u32,
    ];
    if !v.fetch_global {
        v.fetch_page = 0;
    }
    if is_running(k, vi) {
        spr::write::<{ ppc440::spr::PID }>(current_hw_pid(&k.vm.vcpus[vi]));
    }
}

/// Invalidates the hardware entries of the slots in `mask` (slot `i` = hardware entry `i`).
#[inline(always)]
fn invalidate_slots(mask: SlotMask) {
    for slot in mask {
        tlb::invalidate(slot as u32);
    }
}

/// A guest TLB write to `index` made behind the instruction emulator's back (the VMM's
/// `VcpuControl`): drop the hardware entries derived from it and the fetch cache.
pub fn guest_tlb_written(k: &mut Kernel, vi: usize, index: u32) {
    k.vm.vcpus[vi].fetch_page = 0;
    let m = k
        .tlb
        .invalidate_guest_write(vi as u8, &k.vm.vcpus[vi].tlb, index);
    invalidate_slots(m);
}

/// Whether the guest block `(base, mask)` (aligned, `mask = !(size - 1)`) overlaps the
/// 4 KiB page at `page`: two aligned blocks overlap iff they agree above the larger size.
#[inline(always)]
fn block_covers_page(block: Option<(u32, u32)>, page: u32) -> bool {
    block.is_some_and(|(base, mask)| (base ^ page) & mask & !(PAGE_SIZE - 1) == 0)
}

/// A guest `tlbwe` of the running vCPU `vi` (the guest's MMUCR supplies the TID): writes
/// its TLB, then drops the hardware entries derived from the entry's old contents or
/// shadowed by its new ones, and the fetch cache only if the entry's old or new page
/// overlaps the cached page (otherwise the first match, and so the translation, of every
/// address in that page is unchanged). Words 1 and 2 drop only the derived entries
/// (`ShadowTlb::invalidate_guest_word`). An invalid word number changes nothing.
/// Not inlined: its register pressure would otherwise weigh on every fast-path exit.
#[inline(never)]
pub fn guest_tlbwe(
    k: &mut Kernel,
    vi: usize,
    index: u32,
    word: u32,
    value: u32,
) -> Result<(), TlbError> {
    let v = &mut k.vm.vcpus[vi];
    let w = gtlb::tlbwe(&mut v.tlb, v.s.mmucr, index, word, value)?;
    if w.is_dead() {
        // A write to an entry that was not live and is not now (Linux's flushes write
        // word 0 = 0): no slot derives from it (slots of an entry go when it stops being
        // live), it shadows nothing and covers no page.
        return Ok(());
    }
    let (old, new) = (w.old, w.new);
    if v.fetch_page != 0 {
        let page = v.fetch_page & !(PAGE_SIZE - 1);
        if block_covers_page(old, page) || block_covers_page(new, page) {
            v.fetch_page = 0;
        }
    }
    invalidate_slots(k.tlb.invalidate_guest_word(vi as u8, &v.tlb, index, word));
    if word == 2 {
        prefill(k, vi, index);
    }
    Ok(())
}

/// Emulates the guest TLB instruction `insn` (tlbre, tlbwe, tlbsx[.]) of vCPU `vi`, whose
/// registers are in `f`, except for advancing the pc: its trace point, or `None`, having
/// changed nothing, when `insn` is none of them or names no valid word (the caller then
/// raises the illegal-instruction program interrupt or takes the general path). The one
/// emulation of these instructions, for every tier (the assembly tier's
/// `__tlb_insn_fast`, `fast::program`, `emulate`).
#[inline(always)]
pub fn tlb_insn(k: &mut Kernel, vi: usize, f: &mut TrapFrame, insn: u32) -> Option<TracePoint> {
    use ppc440::decode::{self, opcd::X, xo31};
    if decode::OPCD.get(insn) != X {
        return None;
    }
    match decode::XO.get(insn) {
        xo31::TLBWE => {
            let (index, word, value) = gtlb::tlbwe_operands(&f.regs, insn);
            guest_tlbwe(k, vi, index, word, value).ok()?;
            Some(TracePoint::EmulTlbwe)
        }
        xo31::TLBRE => {
            let v = &mut k.vm.vcpus[vi];
            gtlb::tlbre(&v.tlb, &mut v.s.mmucr, &mut f.regs, insn).ok()?;
            Some(TracePoint::EmulTlbre)
        }
        xo31::TLBSX => {
            let v = &k.vm.vcpus[vi];
            gtlb::tlbsx(&v.tlb, v.s.mmucr, &mut f.regs, insn);
            Some(TracePoint::EmulTlbsx)
        }
        _ => None,
    }
}

/// Whether a guest MSR has `MSR[IS]` != `MSR[DS]`: fetches and data accesses then use
/// different guest translation spaces, and fills go through [`split_fill`].
#[inline(always)]
pub fn is_split(guest_msr: u32) -> bool {
    (guest_msr & msr::IS != 0) != (guest_msr & msr::DS != 0)
}

/// The guest has just completed entry `index` (word 2 is the last word its TLB-miss
/// handler writes, Linux's included): if the entry covers the address of the miss the
/// guest is handling (DEAR for data, else SRR0 for a fetch), fill the hardware entry now,
/// exactly as the miss that the guest's retry would take after `rfi` would fill it. That
/// saves the retry's exit. The fill is computed for the guest's current PID and
/// translation spaces (so the shadow invariant holds whatever the guest does next) and
/// its mode after `rfi` (SRR1[PR]); nothing is filled when the `rfi` would switch the
/// translation space (that drops the vCPU's entries) or when the fill would not be a
/// plain hit (in split mode, as [`split_fill`] says for the retried instruction at SRR0).
/// Not inlined into [`guest_tlbwe`], whose other cases stay small.
#[inline(never)]
fn prefill(k: &mut Kernel, vi: usize, index: u32) {
    let v = &k.vm.vcpus[vi];
    let Some((base, mask)) = v.tlb.live_block(index) else {
        return;
    };
    let s = &v.s;
    let (ea, access, ts_bit) = if (s.dear ^ base) & mask == 0 {
        (s.dear, Access::Read, msr::DS)
    } else if (s.srr0 ^ base) & mask == 0 {
        (s.srr0, Access::Execute, msr::IS)
    } else {
        return;
    };
    if (s.msr ^ s.srr1) & (msr::IS | msr::DS) != 0 {
        return;
    }
    let (ts, pr, pid) = (s.msr & ts_bit != 0, s.srr1 & msr::PR != 0, s.pid as u8);
    let sid = k.threads[v.thread].space;
    let gmap = VmSpace { k, sid };
    let res = if is_split(s.msr) {
        let (is, ds) = (s.msr & msr::IS != 0, s.msr & msr::DS != 0);
        match split_fill(&v.tlb, &gmap, ea, pid, pr, access, is, ds, s.srr0) {
            SplitFill::Fill(r) => r,
            SplitFill::Emulate => return,
        }
    } else {
        shadow_fill(&v.tlb, &gmap, ea, pid, pr, access, ts)
    };
    if let FillResult::Hit { hw, guest_index } = res {
        let tid = guest_hw_pid(k, vi, pid, !pr);
        install(k, vi, hw.tagged(tid), guest_index);
    }
}

/// Records `hw` (tagged, derived from guest entry `guest_index` of vCPU `vi`) in the
/// kernel's TLB record and writes it to the hardware entry the record chose, invalidating
/// the entries it displaces. Every guest translation enters the hardware TLB here.
#[inline(always)]
pub fn install(k: &mut Kernel, vi: usize, hw: HwEntry, guest_index: u32) {
    let place = k.tlb.insert(vi as u8, hw, guest_index);
    invalidate_slots(place.invalidate);
    let (w0, w1, w2) = hw.words();
    tlb::write(place.slot as u32, hw.tid, w0, w1, w2);
}

/// Guest-virtual → host-physical for the kernel's own reads of guest memory (fetching
/// the instruction to emulate): the same two stages as a fill, in software.
#[inline(always)]
pub fn guest_fetch(k: &mut Kernel, vi: usize, pc: u32) -> Option<u32> {
    let page = pc & !(PAGE_SIZE - 1);
    if k.vm.vcpus[vi].fetch_page == page | 1 {
        let hp = k.vm.vcpus[vi].fetch_host;
        return crate::arch::read_phys_u32(hp | (pc & (PAGE_SIZE - 1)), k.mem.ram_end);
    }
    guest_fetch_slow(k, vi, pc)
}

#[inline(never)]
fn guest_fetch_slow(k: &mut Kernel, vi: usize, pc: u32) -> Option<u32> {
    let page = pc & !(PAGE_SIZE - 1);
    let v = &k.vm.vcpus[vi];
    let (pid, ts) = (v.s.pid as u8, v.s.msr & msr::IS != 0);
    let (index, e) = v.tlb.lookup(pc, pid, ts)?;
    let gpa = e.translate(pc);
    if gpa > u32::MAX as u64 {
        return None;
    }
    // Cache the page only if this entry translates all of it: at least 4 KiB, and no
    // earlier (1 KiB) entry wins for part of it.
    let whole_page = e.size_bytes() >= PAGE_SIZE as u64
        && v.tlb.first_match_span(index, pc, pid, ts, PAGE_SIZE as u64) >= PAGE_SIZE as u64;
    let global = whole_page && v.tlb.global_for_page(index, page, ts);
    let hpa = space::translate(k, k.threads[v.thread].space, gpa as u32, Rights::R)?;
    if whole_page {
        k.vm.vcpus[vi].fetch_page = page | 1;
        k.vm.vcpus[vi].fetch_host = hpa & !(PAGE_SIZE - 1);
        k.vm.vcpus[vi].fetch_global = global;
    }
    crate::arch::read_phys_u32(hpa, k.mem.ram_end)
}

/// Reads a guest word by software translation (no caching).
pub fn guest_read_u32(k: &Kernel, vi: usize, ea: u32, fetch: bool) -> Option<u32> {
    let v = &k.vm.vcpus[vi];
    let ts = v.s.msr & if fetch { msr::IS } else { msr::DS } != 0;
    let (_, e) = v.tlb.lookup(ea, v.s.pid as u8, ts)?;
    let gpa = e.translate(ea);
    if gpa > u32::MAX as u64 {
        return None;
    }
    let sid = k.threads[v.thread].space;
    let hpa = space::translate(k, sid, gpa as u32, Rights::R)?;
    crate::arch::read_phys_u32(hpa, k.mem.ram_end)
}

/// The data fill for `ea` and `access` in the guest's current mode, PID and data
/// translation space (`MSR[DS]`), at the VM's full page size: what the kernel's software
/// translation of a guest data access checks (`split::emulate`).
pub fn data_fill(k: &Kernel, vi: usize, ea: u32, access: Access) -> FillResult {
    let v = &k.vm.vcpus[vi];
    let s = &v.s;
    let sid = k.threads[v.thread].space;
    shadow_fill(
        &v.tlb,
        &VmSpace { k, sid },
        ea,
        s.pid as u8,
        s.msr & msr::PR != 0,
        access,
        s.msr & msr::DS != 0,
    )
}
