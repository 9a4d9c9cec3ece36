//! Address spaces: per-space page tables, the mapping operations (map, grant, unmap)
//! on top of the mapping database, and software TLB refill.
//!
//! Page table: a 2048-entry root (2 MiB per entry) inside the [`Space`], pointing to
//! 4 KiB leaf frames from the kernel pool with 512 `(pte, node)` word pairs. A pte is
//! `frame << 12 | flags`; `node` is the mapping-database node of the mapping (or
//! `NIL_NODE` for kernel-owned UTCB pages, which user code cannot unmap or map on).
//!
//! Invariant: a hardware TLB entry tagged with a space's PID is always a subset of
//! a present pte of that space; every pte change flushes the matching TLB entry.

use super::Kernel;
use crate::arch::tlb;
use core::cell::Cell;
use kestrel_abi::{
    map_target, Fpage, IpcError, MapItem, Rights, DEVICE_WINDOW, DEVICE_WINDOW_END, PAGE_SHIFT,
    PAGE_SIZE, SIGMA0_WINDOW, USER_BASE, USER_END,
};
use kestrel_kcore::mapdb::{NodeId, Revoked, NIL_NODE};
use ppc440::tlb::{flags, PageSize};

pub const ROOT_ENTRIES: usize = 2048;
const LEAF_SHIFT: u32 = 21;
const LEAF_ENTRIES: u32 = 512;

/// pte flag bits (low 12 bits; rights use the ABI's r4/w2/x1 encoding).
pub mod pte {
    pub const RIGHTS: u32 = 0x7;
    /// Uncached, guarded device page.
    pub const DEVICE: u32 = 0x8;
    /// Kernel-owned page (UTCB): not in the mapping database.
    pub const KERNEL: u32 = 0x10;
    pub const VALID: u32 = 0x20;
}

/// `repr(C)`: the IPC fast path reads `pid` at a fixed offset.
#[repr(C)]
pub struct Space {
    pub live: bool,
    /// Hardware PID, 0 when none is assigned (assigned lazily on switch).
    pub pid: u8,
    pub nthreads: u16,
    pub privileged: bool,
    /// A VM's guest-physical space: every address is the guest's.
    pub vm: bool,
    /// A Linux personality space: Linux system calls go to the exception handler.
    pub linux: bool,
    /// Highest priority any thread of the space may be given (`kcore::prio`); the root
    /// space's is `MAX_PRIORITY`, every other space's is set when its first thread is made.
    pub ceiling: u8,
    pub root: [u32; ROOT_ENTRIES],
    /// Per 16 MiB region of the first 256 MiB: whether the region is mapped as one
    /// host-contiguous block (see [`linear_region`]). Filled on demand, cleared by every
    /// pte change in the region.
    pub linear: [Cell<u32>; LINEAR_REGIONS],
}

impl Space {
    /// A free slot. A function, not a constant: `linear` is interior-mutable, and each slot
    /// needs its own cells.
    pub const fn empty() -> Space {
        Space {
            live: false,
            pid: 0,
            nthreads: 0,
            privileged: false,
            vm: false,
            linux: false,
            ceiling: 0,
            root: [0; ROOT_ENTRIES],
            linear: [const { Cell::new(LINEAR_UNKNOWN) }; LINEAR_REGIONS],
        }
    }
}

/// Size of a [`Space::linear`] region (the 440's 16 MiB page).
pub const LINEAR_SHIFT: u32 = 24;
pub const LINEAR_REGIONS: usize = 16;
const LINEAR_UNKNOWN: u32 = 0;
const LINEAR_NO: u32 = 1;

/// If the 16 MiB region around `va` is mapped completely, onto one host-physical block
/// aligned to 16 MiB, with the same pte flags throughout: `(host base, pte flags)`.
/// The answer is cached in the space until a pte of the region changes. A VM's second
/// stage uses it to back guest pages with large hardware pages (paper §4: guest memory
/// is a linear segment).
pub fn linear_region(k: &Kernel, sid: u16, va: u32) -> Option<(u32, u32)> {
    let r = (va >> LINEAR_SHIFT) as usize;
    let cell = k.spaces[sid as usize].linear.get(r)?;
    let mut v = cell.get();
    if v == LINEAR_UNKNOWN {
        v = scan_linear(k, sid, (r as u32) << LINEAR_SHIFT);
        cell.set(v);
    }
    (v & pte::VALID != 0).then_some((v & !(PAGE_SIZE - 1), v & (pte::RIGHTS | pte::DEVICE)))
}

fn scan_linear(k: &Kernel, sid: u16, base: u32) -> u32 {
    let Some((first, _)) = lookup(k, sid, base) else {
        return LINEAR_NO;
    };
    let host = first & !(PAGE_SIZE - 1);
    let flags = first & (PAGE_SIZE - 1);
    if host & ((1 << LINEAR_SHIFT) - 1) != 0 || flags & pte::KERNEL != 0 {
        return LINEAR_NO;
    }
    let s = &k.spaces[sid as usize];
    for ri in (base >> LEAF_SHIFT)..((base >> LEAF_SHIFT) + (1 << (LINEAR_SHIFT - LEAF_SHIFT))) {
        let leaf = s.root[ri as usize];
        if leaf == 0 {
            return LINEAR_NO;
        }
        let expect = host + ((ri << LEAF_SHIFT) - base);
        for i in 0..LEAF_ENTRIES {
            // SAFETY: `leaf` is a kernel pool page of this space's page table; `i` < 512.
            let e = unsafe { ((leaf + i * 8) as *const u32).read() };
            if e != (expect + i * PAGE_SIZE) | flags {
                return LINEAR_NO;
            }
        }
    }
    host | flags
}

fn forget_linear(k: &Kernel, sid: u16, va: u32) {
    if let Some(c) = k.spaces[sid as usize]
        .linear
        .get((va >> LINEAR_SHIFT) as usize)
    {
        c.set(LINEAR_UNKNOWN);
    }
}

/// Leaf table entry pointer for `va` (None when no leaf exists).
fn leaf_slot(s: &Space, va: u32) -> Option<*mut u32> {
    let leaf = s.root[(va >> LEAF_SHIFT) as usize];
    if leaf == 0 {
        return None;
    }
    let idx = (va >> PAGE_SHIFT) & (LEAF_ENTRIES - 1);
    Some((leaf + idx * 8) as *mut u32)
}

/// The `(pte, node)` of `va` in space `sid`, if present.
pub fn lookup(k: &Kernel, sid: u16, va: u32) -> Option<(u32, NodeId)> {
    let p = leaf_slot(&k.spaces[sid as usize], va)?;
    // SAFETY: leaf frames are kernel pool pages owned by this space; `p` is in bounds.
    let (e, n) = unsafe { (p.read(), p.add(1).read()) };
    if e & pte::VALID != 0 {
        Some((e, n))
    } else {
        None
    }
}

/// Makes sure the leaf table covering `va` in `sid` exists (allocating it from the pool).
/// Called before a mapping-database change whose pte must then be written: once a node
/// is created or moved, a failing allocation would leave it with no pte, a node nobody
/// can reach or free (and, for a grant, the page gone from the granter).
fn ensure_leaf(k: &mut Kernel, sid: u16, va: u32) -> Result<(), IpcError> {
    let ri = (va >> LEAF_SHIFT) as usize;
    if k.spaces[sid as usize].root[ri] == 0 {
        let leaf = k.kmem.alloc().ok_or(IpcError::NoMemory)?;
        k.spaces[sid as usize].root[ri] = leaf;
    }
    Ok(())
}

/// Sets the pte of `va` (allocating a leaf) and flushes any stale TLB entry.
pub fn set_pte(k: &mut Kernel, sid: u16, va: u32, e: u32, node: NodeId) -> Result<(), IpcError> {
    ensure_leaf(k, sid, va)?;
    let p = leaf_slot(&k.spaces[sid as usize], va).expect("leaf allocated above");
    // SAFETY: as in `lookup`; the kernel is the only writer of page tables.
    unsafe {
        p.write(e | pte::VALID);
        p.add(1).write(node);
    }
    forget_linear(k, sid, va);
    flush_va(k, sid, va);
    Ok(())
}

/// Declares (`on`) or undeclares the page of `va` in VM space `sid` emulated device
/// memory: a pte with [`pte::DEVICE`] and neither frame nor [`pte::VALID`], so every
/// lookup still finds the page unmapped, while a guest access there becomes an MMIO
/// fault ([`is_declared_device`]). A mapped page is left as it is.
pub fn declare_device(k: &mut Kernel, sid: u16, va: u32, on: bool) -> Result<(), IpcError> {
    let ri = (va >> LEAF_SHIFT) as usize;
    if k.spaces[sid as usize].root[ri] == 0 {
        if !on {
            return Ok(());
        }
        let leaf = k.kmem.alloc().ok_or(IpcError::NoMemory)?;
        k.spaces[sid as usize].root[ri] = leaf;
    }
    let p = leaf_slot(&k.spaces[sid as usize], va).expect("leaf present");
    // SAFETY: as in `lookup`; the kernel is the only writer of page tables.
    unsafe {
        if p.read() & pte::VALID == 0 {
            p.write(if on { pte::DEVICE } else { 0 });
            p.add(1).write(NIL_NODE);
        }
    }
    Ok(())
}

/// Whether the page of `va` in `sid` is declared device memory ([`declare_device`]).
#[inline]
pub fn is_declared_device(k: &Kernel, sid: u16, va: u32) -> bool {
    // SAFETY: as in `lookup`.
    leaf_slot(&k.spaces[sid as usize], va)
        .is_some_and(|p| unsafe { p.read() } & (pte::VALID | pte::DEVICE) == pte::DEVICE)
}

pub fn clear_pte(k: &mut Kernel, sid: u16, va: u32) {
    if let Some(p) = leaf_slot(&k.spaces[sid as usize], va) {
        // SAFETY: as in `lookup`.
        unsafe {
            p.write(0);
            p.add(1).write(NIL_NODE);
        }
    }
    forget_linear(k, sid, va);
    flush_va(k, sid, va);
}

fn flush_va(k: &mut Kernel, sid: u16, va: u32) {
    let pid = k.spaces[sid as usize].pid;
    if pid != 0 {
        if let Some(i) = tlb::flush_page(va, pid) {
            k.tlb.invalidate_slot(i as usize);
        }
    }
}

/// Creates an empty space in a free slot.
pub fn create(k: &mut Kernel, privileged: bool) -> Option<u16> {
    let sid = k.spaces.iter().position(|s| !s.live)?;
    let s = &mut k.spaces[sid];
    s.live = true;
    s.pid = 0;
    s.nthreads = 0;
    s.privileged = privileged;
    s.vm = false;
    s.linux = false;
    // The creator of an unprivileged space sets its ceiling (thread::sys_thread_control).
    s.ceiling = if privileged {
        kestrel_abi::MAX_PRIORITY as u8
    } else {
        0
    };
    s.root = [0; ROOT_ENTRIES];
    for c in s.linear.iter() {
        c.set(LINEAR_UNKNOWN);
    }
    Some(sid as u16)
}

/// Tears down a space: revokes every mapping it holds (and everything derived from
/// them), frees its page tables and UTCB frames, and releases its PID.
pub fn destroy(k: &mut Kernel, sid: u16) {
    for ri in 0..ROOT_ENTRIES {
        let leaf = k.spaces[sid as usize].root[ri];
        if leaf == 0 {
            continue;
        }
        for i in 0..LEAF_ENTRIES {
            let va = ((ri as u32) << LEAF_SHIFT) | (i << PAGE_SHIFT);
            if let Some((e, node)) = lookup(k, sid, va) {
                if e & pte::KERNEL != 0 {
                    k.kmem.free(e & !(PAGE_SIZE - 1));
                    clear_pte(k, sid, va);
                } else {
                    revoke_node(k, node, Rights::RWX, true);
                }
            }
        }
        k.spaces[sid as usize].root[ri] = 0;
        k.kmem.free(leaf);
    }
    let pid = k.spaces[sid as usize].pid;
    if pid != 0 {
        release_tid(k, pid);
    }
    // Built at compile time and copied in (a runtime `Space::empty()` is 11 instructions longer).
    k.spaces[sid as usize] = const { Space::empty() };
}

/// Hardware PID for `sid`, assigning (and possibly stealing) one.
#[inline(always)]
pub fn ensure_pid(k: &mut Kernel, sid: u16) -> u8 {
    let pid = k.spaces[sid as usize].pid;
    if pid != 0 {
        return pid;
    }
    assign_pid(k, sid)
}

#[inline(never)]
fn assign_pid(k: &mut Kernel, sid: u16) -> u8 {
    let pid = grant_tid(k, sid);
    k.spaces[sid as usize].pid = pid;
    pid
}

/// A hardware TID for `owner` (a native space id, or a guest's `kcore::pid::guest_owner`
/// code), which must hold none, from the one pool native spaces and guests share. When the
/// pool is dry the TID held longest is taken from its owner (a space loses its `pid`, a
/// guest its entry in its vCPU's TID table) and every TLB entry tagged with it goes.
#[inline(never)]
pub fn grant_tid(k: &mut Kernel, owner: u16) -> u8 {
    let g = k.pids.alloc_new(owner);
    if let Some(victim) = g.evicted {
        if kestrel_kcore::pid::guest_of(victim).is_some() {
            super::hooks::guest_tid_evicted(k, victim, g.pid);
        } else {
            k.spaces[victim as usize].pid = 0;
        }
    }
    if g.flush {
        flush_tid(k, g.pid);
    }
    g.pid
}

/// Invalidates every refillable TLB entry tagged `tid`, native or guest (the record in
/// `Kernel::tlb` says which).
pub fn flush_tid(k: &mut Kernel, tid: u8) {
    for slot in k.tlb.invalidate_tid(tid) {
        tlb::invalidate(slot as u32);
    }
}

/// Gives `tid` back to the pool (its owner goes away), flushing its entries now so a
/// later grant of it finds none.
pub fn release_tid(k: &mut Kernel, tid: u8) {
    flush_tid(k, tid);
    k.pids.free(tid);
}

/// Revokes `rights` from everything derived from `node` (and from `node` itself if
/// `include_self`), fixing page tables and TLB entries of every affected space.
pub fn revoke_node(k: &mut Kernel, node: NodeId, rights: Rights, include_self: bool) {
    let Kernel {
        mapdb, spaces, tlb, ..
    } = k;
    let mut vm_touched = false;
    // An invalid node means there is nothing left to revoke.
    let _ = mapdb.revoke(node, rights, include_self, &mut |r: Revoked| {
        vm_touched |= spaces[r.space as usize].vm;
        apply_revoked(spaces, tlb, &r)
    });
    if vm_touched {
        // Hardware entries of a VM are keyed by guest-virtual address: drop them all.
        super::hooks::host_mapping_revoked(k);
    }
}

/// Applies one revocation result to the page table of the affected space. Only
/// rewrites existing leaf entries, so it needs no allocation.
fn apply_revoked(spaces: &mut [Space], hw: &mut super::HwTlb, r: &Revoked) {
    let va = r.vpage << PAGE_SHIFT;
    let s = &spaces[r.space as usize];
    let Some(p) = leaf_slot(s, va) else { return };
    if let Some(c) = s.linear.get((va >> LINEAR_SHIFT) as usize) {
        c.set(LINEAR_UNKNOWN);
    }
    // SAFETY: as in `lookup`; the kernel is the only writer of page tables.
    unsafe {
        let e = p.read();
        if e & pte::VALID == 0 || p.add(1).read() != r.node {
            return;
        }
        if r.new_rights.is_empty() {
            p.write(0);
            p.add(1).write(NIL_NODE);
        } else {
            p.write((e & !pte::RIGHTS) | r.new_rights.0 as u32);
        }
    }
    if s.pid != 0 {
        if let Some(i) = tlb::flush_page(va, s.pid) {
            hw.invalidate_slot(i as usize);
        }
    }
}

/// The root space's sigma0 windows: resolve a fault at `va` by creating an
/// idempotent root mapping of free RAM or of a device page.
pub fn sigma0_resolve(k: &mut Kernel, sid: u16, va: u32) -> bool {
    if !k.spaces[sid as usize].privileged {
        return false;
    }
    let (frame_addr, flags) =
        if (SIGMA0_WINDOW..SIGMA0_WINDOW + kestrel_abi::SIGMA0_WINDOW_SIZE).contains(&va) {
            let phys = va - SIGMA0_WINDOW;
            let (mstart, msize) = k.mem.module;
            if phys.wrapping_sub(mstart) < msize {
                // The boot modules: readable, so the root task can load what they contain.
                (phys & !(PAGE_SIZE - 1), Rights::R.0 as u32)
            } else if phys < k.mem.free_start || phys >= k.mem.ram_end {
                return false;
            } else {
                (phys & !(PAGE_SIZE - 1), Rights::RWX.0 as u32)
            }
        } else if (DEVICE_WINDOW..DEVICE_WINDOW_END).contains(&va) {
            (va & !(PAGE_SIZE - 1), Rights::RW.0 as u32 | pte::DEVICE)
        } else {
            return false;
        };
    if lookup(k, sid, va).is_some() {
        return true;
    }
    // The leaf first: a root node without its pte could never be found or freed again.
    if ensure_leaf(k, sid, va).is_err() {
        return false;
    }
    let Ok(node) = k.mapdb.insert_root(
        sid,
        va >> PAGE_SHIFT,
        frame_addr >> PAGE_SHIFT,
        Rights((flags & 7) as u8),
    ) else {
        return false;
    };
    set_pte(k, sid, va & !(PAGE_SIZE - 1), frame_addr | flags, node).is_ok()
}

/// Looks up `va` in `sid`, resolving sigma0 windows on the way.
pub fn lookup_or_sigma0(k: &mut Kernel, sid: u16, va: u32) -> Option<(u32, NodeId)> {
    if let Some(x) = lookup(k, sid, va) {
        return Some(x);
    }
    if sigma0_resolve(k, sid, va) {
        lookup(k, sid, va)
    } else {
        None
    }
}

/// What the thread can do with the page of pte `e`: its rights, plus read where it may
/// write (the 440 has no write-only pages: [`refill`] gives `UR` with `UW`). `Unmap` may
/// take only the read right from a page and leave it writable; the refill and the kernel's
/// own accesses to user buffers (`translate`) must agree with the TLB entry, or a read
/// works or faults depending on whether the entry happens to be in the TLB. (Mappings keep
/// the raw rights: the mapping database gives a child no right its parent lacks.)
fn effective_rights(e: u32) -> Rights {
    let r = Rights((e & pte::RIGHTS) as u8);
    if r.contains(Rights::W) {
        Rights(r.0 | Rights::R.0)
    } else {
        r
    }
}

/// Software TLB refill: installs `va` of the current space if its pte grants
/// `access`. Returns false if the access must become a page fault.
pub fn refill(k: &mut Kernel, sid: u16, va: u32, access: Rights) -> bool {
    let Some((e, _)) = lookup_or_sigma0(k, sid, va) else {
        return false;
    };
    install(k, sid, va, e, access)
}

/// [`refill`] for a pte that is already present: the TLB-miss fast path
/// (`glue::trap::tlb_miss_fast`), which leaves sigma0's on-demand mappings and every
/// fault to the general path. Returns false, having changed nothing, unless `va` is
/// present in `sid` with `access`.
#[inline(always)]
pub fn refill_present(k: &mut Kernel, sid: u16, va: u32, access: Rights) -> bool {
    match lookup(k, sid, va) {
        Some((e, _)) => install(k, sid, va, e, access),
        None => false,
    }
}

/// Writes the TLB entry for `va` of `sid` from its pte `e` if `e` grants `access`.
#[inline(always)]
fn install(k: &mut Kernel, sid: u16, va: u32, e: u32, access: Rights) -> bool {
    if !effective_rights(e).contains(access) {
        return false;
    }
    let pid = ensure_pid(k, sid);
    // A whole 64 KiB block mapped alike and host-contiguous goes in one entry: sixteen
    // times the TLB's reach for images, heaps and DMA windows the root task hands out in
    // aligned blocks. Entries of this TID inside the block go first (the 440 must never
    // match one address twice); every later pte change in the block flushes the entry
    // (`flush_va`'s `tlbsx` finds the entry covering the page).
    let (epn, rpn, size) = match block64(k, sid, va, e) {
        Some(phys) => {
            let base = va & !(BLOCK64 - 1);
            for page in (base..base + BLOCK64).step_by(PAGE_SIZE as usize) {
                if let Some(i) = tlb::flush_page(page, pid) {
                    k.tlb.invalidate_slot(i as usize);
                }
            }
            (base, phys, PageSize::K64)
        }
        None => (va & !(PAGE_SIZE - 1), e & !(PAGE_SIZE - 1), PageSize::K4),
    };
    let mut w2 = 0;
    if e & Rights::R.0 as u32 != 0 {
        w2 |= flags::UR;
    }
    if e & Rights::W.0 as u32 != 0 {
        w2 |= flags::UW | flags::UR;
    }
    if e & Rights::X.0 as u32 != 0 {
        w2 |= flags::UX;
    }
    if e & pte::DEVICE != 0 {
        w2 |= flags::I | flags::G;
    }
    let idx = k.tlb.insert_native(pid) as u32;
    tlb::write(idx, pid, epn | flags::V | size.word0(), rpn, w2);
    true
}

/// Bytes of the large pages native refills use.
const BLOCK64: u32 = 64 << 10;

/// The host-physical base of the 64 KiB block around `va` in native space `sid` if all its
/// sixteen ptes are present with the flags of `va`'s pte `e` (neither device nor kernel
/// pages) and map one 64 KiB-aligned host block in order; `None` otherwise (the scan stops
/// at the first page that differs).
#[inline(always)]
fn block64(k: &Kernel, sid: u16, va: u32, e: u32) -> Option<u32> {
    let flags = e & (PAGE_SIZE - 1);
    if flags & (pte::DEVICE | pte::KERNEL) != 0 || k.spaces[sid as usize].vm {
        return None;
    }
    let base = va & !(BLOCK64 - 1);
    let phys = (e & !(PAGE_SIZE - 1)).wrapping_sub(va - base);
    if phys & (BLOCK64 - 1) != 0 {
        return None;
    }
    // A leaf covers 2 MiB, so the block's ptes are consecutive in one leaf.
    let first = leaf_slot(&k.spaces[sid as usize], base)?;
    for i in 0..BLOCK64 / PAGE_SIZE {
        // SAFETY: `first` is the block's first pte in a leaf of this space (a kernel pool
        // page); the block's 16 ptes (two words each) lie inside that leaf.
        let v = unsafe { first.add(2 * i as usize).read() };
        if v != (phys + i * PAGE_SIZE) | flags {
            return None;
        }
    }
    Some(phys)
}

/// Physical address of user byte `va` in `sid` if mapped with `access`.
pub fn translate(k: &Kernel, sid: u16, va: u32, access: Rights) -> Option<u32> {
    let (e, _) = lookup(k, sid, va)?;
    if e & pte::DEVICE != 0 || !effective_rights(e).contains(access) {
        return None;
    }
    Some((e & !(PAGE_SIZE - 1)) | (va & (PAGE_SIZE - 1)))
}

/// Maps (or grants) the pages of `item` from space `src` into space `dst` through the
/// receive window `window` (L4 X.2 map semantics, see `kestrel_abi::map_target`).
pub fn map_item(
    k: &mut Kernel,
    src: u16,
    dst: u16,
    item: MapItem,
    window: Fpage,
) -> Result<(), IpcError> {
    let (sbase, dbase, log2) =
        map_target(item.fpage, window, item.hot_spot).ok_or(IpcError::MapFailed)?;
    let pages: u64 = 1u64 << (log2 - PAGE_SHIFT);
    let mut mapped = 0u32;
    let mut i: u64 = 0;
    while i < pages {
        let sva = sbase.wrapping_add((i as u32) << PAGE_SHIFT);
        let dva = dbase.wrapping_add((i as u32) << PAGE_SHIFT);
        // Skip whole empty leaves of the source quickly (complete-space fpages).
        if k.spaces[src as usize].root[(sva >> LEAF_SHIFT) as usize] == 0
            && !k.spaces[src as usize].privileged
        {
            let skip = (LEAF_ENTRIES - ((sva >> PAGE_SHIFT) & (LEAF_ENTRIES - 1))) as u64;
            i += skip;
            continue;
        }
        i += 1;
        if !k.spaces[dst as usize].vm && !(USER_BASE..USER_END).contains(&dva) {
            continue;
        }
        let Some((se, snode)) = lookup_or_sigma0(k, src, sva) else {
            continue;
        };
        if se & pte::KERNEL != 0 {
            continue;
        }
        let rights = item
            .fpage
            .rights()
            .intersect(Rights((se & pte::RIGHTS) as u8));
        if rights.is_empty() {
            continue;
        }
        // The destination's leaf before the mapping database moves or derives a node:
        // after that, `set_pte` must not fail (a grant has already taken the page from
        // the source; a node without a pte leaks).
        ensure_leaf(k, dst, dva)?;
        if let Some((de, dnode)) = lookup(k, dst, dva) {
            if de & pte::KERNEL != 0 {
                return Err(IpcError::MapFailed);
            }
            if dnode == snode {
                // Mapping a page onto itself: nothing to do.
                mapped += 1;
                continue;
            }
            // Replace the old mapping (a pager upgrading rights re-maps the page).
            revoke_node(k, dnode, Rights::RWX, true);
        }
        let flags = (se & (pte::DEVICE)) | rights.0 as u32;
        let frame = se & !(PAGE_SIZE - 1);
        if item.grant {
            let Kernel {
                mapdb, spaces, tlb, ..
            } = &mut *k;
            let node = mapdb
                .grant_revoking(snode, dst, dva >> PAGE_SHIFT, rights, &mut |r: Revoked| {
                    apply_revoked(spaces, tlb, &r)
                })
                .map_err(|_| IpcError::MapFailed)?;
            clear_pte(k, src, sva);
            set_pte(k, dst, dva, frame | flags, node).expect("leaf allocated above");
        } else {
            let node = k
                .mapdb
                .map(snode, dst, dva >> PAGE_SHIFT, rights)
                .map_err(|_| IpcError::NoMemory)?;
            if let Err(e) = set_pte(k, dst, dva, frame | flags, node) {
                revoke_node(k, node, Rights::RWX, true);
                return Err(e);
            }
        }
        mapped += 1;
    }
    if mapped == 0 {
        return Err(IpcError::MapFailed);
    }
    Ok(())
}

/// `Unmap`: revoke `fpage.rights()` from mappings derived from the caller's pages.
pub fn unmap(k: &mut Kernel, sid: u16, fpage: Fpage, flush_own: bool) {
    let base = fpage.base();
    let pages: u64 = fpage.size() >> PAGE_SHIFT;
    let mut i = 0u64;
    while i < pages {
        let va = base.wrapping_add((i as u32) << PAGE_SHIFT);
        if k.spaces[sid as usize].root[(va >> LEAF_SHIFT) as usize] == 0 {
            i += (LEAF_ENTRIES - ((va >> PAGE_SHIFT) & (LEAF_ENTRIES - 1))) as u64;
            continue;
        }
        i += 1;
        if let Some((e, node)) = lookup(k, sid, va) {
            if e & pte::KERNEL == 0 {
                revoke_node(k, node, fpage.rights(), flush_own);
            }
        }
    }
}

/// Maps a fresh kernel-owned UTCB page at `va` in `sid`; returns its physical address.
pub fn map_utcb(k: &mut Kernel, sid: u16, va: u32) -> Result<u32, kestrel_abi::KError> {
    if va & (PAGE_SIZE - 1) != 0 || !(USER_BASE..USER_END).contains(&va) {
        return Err(kestrel_abi::KError::UtcbArea);
    }
    if lookup(k, sid, va).is_some() {
        return Err(kestrel_abi::KError::UtcbArea);
    }
    let f = k.kmem.alloc().ok_or(kestrel_abi::KError::OutOfMemory)?;
    if set_pte(k, sid, va, f | pte::KERNEL | Rights::RW.0 as u32, NIL_NODE).is_err() {
        k.kmem.free(f);
        return Err(kestrel_abi::KError::OutOfMemory);
    }
    Ok(f)
}

/// Removes a UTCB page mapped by [`map_utcb`].
pub fn unmap_utcb(k: &mut Kernel, sid: u16, va: u32) {
    if let Some((e, _)) = lookup(k, sid, va) {
        if e & pte::KERNEL != 0 {
            k.kmem.free(e & !(PAGE_SIZE - 1));
            clear_pte(k, sid, va);
        }
    }
}
