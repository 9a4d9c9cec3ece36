//! The in-kernel virtual TLB glue (paper §3.2): guest TLB misses are resolved here from
//! the guest's TLB (first stage) and the VM space's page table (second stage), and
//! the merged translation is written into the guest slots of the hardware TLB.

use super::{inject, trace, virt_fault, Kernel, VmState};
use crate::api::{frame_of, ipc, space, thread, thread::FaultWait};
use crate::arch::{msr, tlb, vector, TrapFrame};
use kestrel_abi::{label, MsgTag, Rights, TracePoint, VirtFault, PAGE_SIZE};
use kestrel_vtlb::{
    shadow_fill, split_fill, Access, FillResult, GuestPhysMap, HostPage, HwEntry, ShadowTlb,
    SlotMask, SplitFill, TlbError,
};

/// Hardware TLB slots used for the running VM.
pub const GUEST_SLOTS: usize = (tlb::KERNEL_FIRST - tlb::GUEST_FIRST) as usize;
pub type Shadow = ShadowTlb<GUEST_SLOTS>;

/// Second stage: the VM space's page table (guest-physical → host-physical).
struct VmSpace<'a> {
    k: &'a Kernel,
    sid: u16,
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

/// Invalidates every hardware entry of the running VM.
pub fn flush_shadow(k: &mut Kernel) {
    for v in k.vm.vcpus.iter_mut() {
        v.fetch_page = 0;
    }
    invalidate_slots(k.vm.shadow.flush_all());
}

/// The running vCPU `vi` loaded another guest PID (already in its state).
pub fn guest_pid_switch(k: &mut Kernel, vi: usize) {
    for v in k.vm.vcpus.iter_mut() {
        v.fetch_page = 0;
    }
    if k.vm.shadow_owner != vi as u8 {
        return;
    }
    let VmState { shadow, vcpus, .. } = &mut k.vm;
    let m = shadow.guest_pid_switch(&vcpus[vi].tlb, vcpus[vi].s.pid as u8);
    invalidate_slots(m);
}

/// Invalidates the hardware entries of the shadow slots in `mask` (one per set bit).
#[inline(always)]
fn invalidate_slots(mask: SlotMask) {
    for slot in mask {
        tlb::invalidate(tlb::GUEST_FIRST + slot as u32);
    }
}

/// A guest TLB write to `index` made behind the instruction emulator's back (the VMM's
/// `VcpuControl`): drop the hardware entries derived from it and the fetch cache.
pub fn guest_tlb_written(k: &mut Kernel, vi: usize, index: u32) {
    k.vm.vcpus[vi].fetch_page = 0;
    let VmState { shadow, vcpus, .. } = &mut k.vm;
    invalidate_slots(shadow.invalidate_guest_write(&vcpus[vi].tlb, index));
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
/// address in that page is unchanged). An invalid word number changes nothing.
/// Not inlined: its register pressure would otherwise weigh on every fast-path exit.
#[inline(never)]
pub fn guest_tlbwe(
    k: &mut Kernel,
    vi: usize,
    index: u32,
    word: u32,
    value: u32,
) -> Result<(), TlbError> {
    let VmState { shadow, vcpus, .. } = &mut k.vm;
    let v = &mut vcpus[vi];
    let old = v.tlb.live_block(index);
    v.tlb.tlbwe(index, word, value, v.s.mmucr)?;
    let new = if word == 0 {
        v.tlb.live_block(index)
    } else {
        old
    };
    if v.fetch_page != 0 {
        let page = v.fetch_page & !(PAGE_SIZE - 1);
        if block_covers_page(old, page) || block_covers_page(new, page) {
            v.fetch_page = 0;
        }
    }
    invalidate_slots(shadow.invalidate_guest_write(&v.tlb, index));
    if word == 2 {
        prefill(k, vi, index);
    }
    Ok(())
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
/// translation space (that flushes the shadow) or when the fill would not be a plain hit
/// (in split mode, as [`split_fill`] says for the retried instruction at SRR0).
fn prefill(k: &mut Kernel, vi: usize, index: u32) {
    if k.vm.shadow_owner != vi as u8 {
        return;
    }
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
        install(k, hw, guest_index);
    }
}

/// Records `hw` (derived from guest entry `guest_index`) in the shadow and writes it to
/// its hardware slot, invalidating the slots it displaces.
#[inline(always)]
fn install(k: &mut Kernel, hw: HwEntry, guest_index: u32) {
    let place = k.vm.shadow.insert(hw, guest_index);
    invalidate_slots(place.invalidate);
    let (w0, w1, w2) = hw.words();
    tlb::write(tlb::GUEST_FIRST + place.slot as u32, hw.tid, w0, w1, w2);
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
    let hpa = space::translate(k, k.threads[v.thread].space, gpa as u32, Rights::R)?;
    if whole_page {
        k.vm.vcpus[vi].fetch_page = page | 1;
        k.vm.vcpus[vi].fetch_host = hpa & !(PAGE_SIZE - 1);
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

/// A hardware TLB miss or storage exception of the running vCPU.
pub fn tlb_fault(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    f: &mut TrapFrame,
    ea: u32,
    access: Access,
    esr: u32,
) -> Option<usize> {
    let (guest_msr, pr, pid) = {
        let s = &k.vm.vcpus[vi].s;
        (s.msr, s.msr & msr::PR != 0, s.pid as u8)
    };
    let (is, ds) = (guest_msr & msr::IS != 0, guest_msr & msr::DS != 0);
    let is_fetch = access == Access::Execute;
    let sid = k.threads[cur].space;
    let gmap = VmSpace { k, sid };
    let tlb = &k.vm.vcpus[vi].tlb;
    let res = if is_split(guest_msr) {
        // Fetches and data accesses translate through different guest spaces.
        match split_fill(tlb, &gmap, ea, pid, pr, access, is, ds, f.regs.ip) {
            SplitFill::Fill(r) => Some(r),
            SplitFill::Emulate => None,
        }
    } else {
        Some(shadow_fill(
            tlb,
            &gmap,
            ea,
            pid,
            pr,
            access,
            if is_fetch { is } else { ds },
        ))
    };
    let tp = if is_fetch {
        TracePoint::ItlbMiss
    } else {
        TracePoint::DtlbMiss
    };
    let t0 = crate::arch::spr::timebase();
    let out = match res {
        None => {
            // The data page is the instruction's own page under another translation:
            // perform the access in software (counted as a data TLB miss).
            super::split::emulate(k, cur, vi, f)
        }
        Some(FillResult::Hit { hw, guest_index }) => {
            install(k, hw, guest_index);
            None
        }
        Some(FillResult::PhysMiss { gpa }) => return phys_miss(k, cur, vi, f, gpa, access),
        Some(other) => {
            guest_fault(k, vi, f, ea, access, esr, other);
            None
        }
    };
    let cost = crate::arch::spr::timebase()
        .saturating_sub(t0)
        .min(u32::MAX as u64) as u32;
    trace(k, vi, tp, cost);
    let _ = frame_of;
    out
}

/// Reflects a [`FillResult::GuestMiss`] (TLB miss) or [`FillResult::GuestProtection`]
/// (storage interrupt) of `access` at `ea` into the guest, with DEAR and ESR[ST] (from
/// `esr`) for data accesses, as the hardware would.
pub fn guest_fault(
    k: &mut Kernel,
    vi: usize,
    f: &mut TrapFrame,
    ea: u32,
    access: Access,
    esr: u32,
    res: FillResult,
) {
    let is_fetch = access == Access::Execute;
    let s = &mut k.vm.vcpus[vi].s;
    if !is_fetch {
        s.dear = ea;
        s.esr = esr & crate::arch::esr::ST;
    }
    let pc = f.regs.ip;
    if res == FillResult::GuestMiss {
        let vector = if is_fetch {
            vector::ITLB_MISS
        } else {
            vector::DTLB_MISS
        };
        inject(k, vi, f, vector, pc);
    } else {
        if is_fetch {
            s.esr = 0;
        }
        inject(
            k,
            vi,
            f,
            if is_fetch { vector::ISI } else { vector::DSI },
            pc,
        );
        trace(k, vi, TracePoint::ExceptReflect, 0);
    }
}

/// The guest allows `access` to guest-physical `gpa` but the VM space has no frame there
/// with the right: device memory becomes an MMIO virtualization fault to the VMM, an
/// instruction fetch above 4 GiB a machine check, anything else a page-fault IPC to the
/// vCPU's pager (the VMM), after whose reply the guest retries the instruction.
pub fn phys_miss(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    f: &mut TrapFrame,
    gpa: u64,
    access: Access,
) -> Option<usize> {
    let is_fetch = access == Access::Execute;
    let sid = k.threads[cur].space;
    // Device memory: pages the VMM declared (a device pte without a frame in the VM
    // space) and everything above 4 GiB, which a VM space cannot map.
    let device = gpa > u32::MAX as u64 || space::is_declared_device(k, sid, gpa as u32);
    if device && !is_fetch {
        let pc = f.regs.ip;
        let insn = guest_read_u32(k, vi, pc, true).unwrap_or(0);
        trace(k, vi, TracePoint::SyscallIpc, 0);
        return virt_fault(k, cur, vi, VirtFault::Mmio, insn, gpa);
    }
    if gpa > u32::MAX as u64 {
        // An instruction fetch from device memory above 4 GiB: nothing to run.
        let pc = f.regs.ip;
        k.vm.vcpus[vi].s.mcsr = 0;
        inject(k, vi, f, vector::MACHINE_CHECK, pc);
        return None;
    }
    let gpa = gpa as u32;
    let right = access.right();
    let tag = MsgTag::new(label::PAGEFAULT | right.0 as u16, kestrel_abi::pf::WORDS, 0);
    let pager = k.threads[cur].pager;
    let pc = f.regs.ip;
    trace(k, vi, TracePoint::PageFaultIpc, 0);
    match ipc::fault_ipc(
        k,
        cur,
        FaultWait::PageFault,
        pager,
        [tag.0, gpa, pc, 0, 0, 0, 0],
    ) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            thread::stop(
                k,
                cur,
                format_args!(
                    "guest-physical fault at {gpa:#010x} (pc {pc:#010x}) and no VMM pager"
                ),
            );
            None
        }
    }
}
