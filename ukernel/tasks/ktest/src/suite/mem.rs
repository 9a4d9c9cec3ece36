//! Memory: map, grant and unmap between spaces, rights, page faults to the pager,
//! and what separates address spaces.
//!
//! Most tests script puppets (see `puppet`): the root maps one of its frames into a
//! puppet's window at `SHARED_BASE` and has the puppet read, write or pass the page
//! on. A mapping that should be gone is checked twice: the puppet's access must
//! block (no answer), and the pager must have received the fault.

use crate::children::{stack_toucher, TOUCH_PAGES};
use crate::common::{call_failed, report_from, TestResult};
use crate::layout::{self, HEAP_BASE, RO_BASE, RO_PATTERN, SHARED_BASE};
use crate::pager::{self, Frame};
use crate::puppet::{self, op};
use crate::threads::{entry, Thread};
use kestrel_abi::{spacectl, tcflags, unmapflags, vcpuctl, Fpage, KError, Rights, ThreadId};
use kestrel_user::sys;

/// Checks that the pager's last fault from `p` was a refused one at `addr` (a write
/// if `write`).
fn faulted_at(p: ThreadId, addr: u32, write: bool) -> TestResult {
    let s = pager::stats(p)?;
    ensure!(
        s.refused > 0 && s.last_addr == addr,
        "the pager did not see the expected fault",
        "thread {p:?}: {} faults, {} refused, last at {:#x} (access {:#x})",
        s.faults,
        s.refused,
        s.last_addr,
        s.last_access
    );
    ensure!(
        !write || s.last_was_write(),
        "the fault was not reported as a write",
        "access {:#x}",
        s.last_access
    );
    Ok(())
}

/// A frame with a recognisable first and last word.
fn pattern_frame(tag: u32) -> Result<Frame, &'static str> {
    let f = Frame::alloc()?;
    f.write(0, tag);
    f.write(0xffc, !tag);
    Ok(f)
}

/// A child reads a page the root mapped to it and sees the root's data.
pub fn map_child_reads_page() -> TestResult {
    let f = pattern_frame(0xcafe_0001)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give(p.id(), SHARED_BASE, f.va(), Rights::R)?;
    let (first, last) = (
        puppet::read(p.id(), SHARED_BASE)?,
        puppet::read(p.id(), SHARED_BASE + 0xffc)?,
    );
    ensure!(
        first == 0xcafe_0001 && last == !0xcafe_0001,
        "the child sees other data",
        "{first:#x} {last:#x}"
    );
    Ok(())
}

/// A page mapped read-write is shared: writes show up on both sides.
pub fn map_shared_writes_both_ways() -> TestResult {
    let f = pattern_frame(0)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give(p.id(), SHARED_BASE, f.va(), Rights::RW)?;
    puppet::write(p.id(), SHARED_BASE + 8, 0x1234_5678)?;
    ensure!(
        f.read(8) == 0x1234_5678,
        "the root does not see the child's write",
        "{:#x}",
        f.read(8)
    );
    f.write(12, 0x8765_4321);
    let v = puppet::read(p.id(), SHARED_BASE + 12)?;
    ensure!(
        v == 0x8765_4321,
        "the child does not see the root's write",
        "{v:#x}"
    );
    Ok(())
}

/// A read-only mapping: reading works, writing faults to the pager as a write.
pub fn map_read_only_write_faults() -> TestResult {
    let f = pattern_frame(0x0bad_f00d)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give(p.id(), SHARED_BASE, f.va(), Rights::R)?;
    ensure!(
        puppet::read(p.id(), SHARED_BASE)? == 0x0bad_f00d,
        "the child cannot read the page"
    );
    puppet::write_blocks(p.id(), SHARED_BASE)?;
    faulted_at(p.id(), SHARED_BASE, true)?;
    ensure!(
        f.read(0) == 0x0bad_f00d,
        "a write through a read-only mapping got through"
    );
    Ok(())
}

/// Grant moves the mapping: the receiver has it, the granter has lost it.
pub fn grant_moves_mapping() -> TestResult {
    let f = pattern_frame(0x6a6a_0001)?;
    let a = Thread::space(puppet::entry(), 0)?;
    let b = Thread::space(puppet::entry(), 0)?;
    puppet::give(a.id(), SHARED_BASE, f.va(), Rights::RW)?;
    ensure!(
        puppet::read(a.id(), SHARED_BASE)? == 0x6a6a_0001,
        "the granter cannot read the page"
    );
    puppet::pass_on(a.id(), b.id(), SHARED_BASE, Rights::RW, true)?;
    ensure!(
        puppet::read(b.id(), SHARED_BASE)? == 0x6a6a_0001,
        "the receiver of the grant sees other data"
    );
    puppet::write(b.id(), SHARED_BASE + 4, 77)?;
    ensure!(
        f.read(4) == 77,
        "the granted page is no longer the root's frame"
    );
    puppet::read_blocks(a.id(), SHARED_BASE)?;
    faulted_at(a.id(), SHARED_BASE, false)
}

/// A grant that fails because the kernel's page pool is empty (the receiver needs a new
/// leaf table) fails with NoMemory and leaves the page with the granter, mapped and
/// readable; once the pool has room again the same grant works. (The kernel used to
/// move the mapping before allocating the receiver's leaf: the page was lost from both
/// sides and its mapping-database node leaked.) The pool is emptied with vCPUs declaring
/// all of their guest-physical space device memory (a leaf per 2 MiB).
pub fn grant_without_kernel_memory_keeps_page() -> TestResult {
    const VCPUS: usize = 4;
    const MMIO_SIZE: u32 = 0xffff_f000;
    let f = pattern_frame(0x6a6a_0002)?;
    let a = Thread::space(puppet::entry(), 0)?;
    let b = Thread::space(puppet::entry(), 0)?;
    puppet::give(a.id(), SHARED_BASE, f.va(), Rights::RW)?;
    ensure!(
        puppet::read(a.id(), SHARED_BASE)? == 0x6a6a_0002,
        "the granter cannot read the page"
    );
    // The same command once with memory, to a third puppet: whatever stack pages the
    // granter's side of it touches are mapped before the pool is empty (their faults
    // could not be answered then).
    let c = Thread::space(puppet::entry(), 0)?;
    puppet::pass_on(a.id(), c.id(), SHARED_BASE, Rights::R, false)?;
    let mut vcpus: [Option<Thread>; VCPUS] = [const { None }; VCPUS];
    let mut exhausted = false;
    for slot in vcpus.iter_mut() {
        let t = Thread::reserve()?;
        sys::thread_control_flags(t.id(), t.id(), 1, ThreadId::ROOT, 0, tcflags::VCPU)
            .map_err(|e| call_failed("ThreadControl (create vCPU)", e))?;
        let r = sys::vcpu_control(t.id(), vcpuctl::DECLARE_MMIO, 1, 0, MMIO_SIZE);
        *slot = Some(t);
        match r {
            Ok(_) => {}
            Err(KError::OutOfMemory) => {
                exhausted = true;
                break;
            }
            Err(e) => return Err(call_failed("VcpuControl(DECLARE_MMIO)", e)),
        }
    }
    ensure!(exhausted, "the kernel's page pool did not run out");
    let failed = puppet::pass_on(a.id(), b.id(), SHARED_BASE, Rights::RW, true).is_err();
    // The pool back (the VM spaces go with their vCPUs) before anything can fail.
    drop(vcpus);
    ensure!(
        failed,
        "a grant needing a leaf table succeeded with the pool empty"
    );
    ensure!(
        puppet::read(a.id(), SHARED_BASE)? == 0x6a6a_0002,
        "the granter lost the page in a grant that failed"
    );
    puppet::pass_on(a.id(), b.id(), SHARED_BASE, Rights::RW, true)?;
    ensure!(
        puppet::read(b.id(), SHARED_BASE)? == 0x6a6a_0002,
        "the receiver of the grant sees other data"
    );
    puppet::read_blocks(a.id(), SHARED_BASE)?;
    faulted_at(a.id(), SHARED_BASE, false)?;
    Ok(())
}

/// Unmap revokes recursively: root → B → C; the root unmaps; B and C both fault,
/// and the root keeps its own mapping.
pub fn unmap_revokes_recursively() -> TestResult {
    let f = pattern_frame(0x0dd0_0001)?;
    let b = Thread::space(puppet::entry(), 0)?;
    let c = Thread::space(puppet::entry(), 0)?;
    puppet::give(b.id(), SHARED_BASE, f.va(), Rights::RW)?;
    puppet::pass_on(b.id(), c.id(), SHARED_BASE, Rights::RW, false)?;
    ensure!(
        puppet::read(b.id(), SHARED_BASE)? == 0x0dd0_0001,
        "B cannot read the page before the unmap"
    );
    ensure!(
        puppet::read(c.id(), SHARED_BASE)? == 0x0dd0_0001,
        "C cannot read the page before the unmap"
    );
    sys::unmap(Fpage::page(f.va(), Rights::RWX), 0).map_err(|e| call_failed("Unmap", e))?;
    ensure!(f.read(0) == 0x0dd0_0001, "the root lost its own page");
    puppet::read_blocks(b.id(), SHARED_BASE)?;
    faulted_at(b.id(), SHARED_BASE, false)?;
    puppet::read_blocks(c.id(), SHARED_BASE)?;
    faulted_at(c.id(), SHARED_BASE, false)
}

/// Unmapping only W leaves a read-only mapping: reads work, writes fault.
pub fn unmap_write_downgrades() -> TestResult {
    let f = pattern_frame(0)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give(p.id(), SHARED_BASE, f.va(), Rights::RW)?;
    puppet::write(p.id(), SHARED_BASE, 1)?;
    sys::unmap(Fpage::page(f.va(), Rights::W), 0).map_err(|e| call_failed("Unmap(W)", e))?;
    ensure!(
        puppet::read(p.id(), SHARED_BASE)? == 1,
        "the downgraded page is not readable any more"
    );
    puppet::write_blocks(p.id(), SHARED_BASE)?;
    faulted_at(p.id(), SHARED_BASE, true)?;
    ensure!(f.read(0) == 1, "a write got through the downgraded mapping");
    Ok(())
}

/// FLUSH_OWN removes the caller's own mapping too (here: a child's).
pub fn unmap_flush_own() -> TestResult {
    let f = pattern_frame(0x0f1e_0001)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give(p.id(), SHARED_BASE, f.va(), Rights::RW)?;
    ensure!(
        puppet::read(p.id(), SHARED_BASE)? == 0x0f1e_0001,
        "the child cannot read the page"
    );
    let code = puppet::unmap(p.id(), SHARED_BASE, Rights::RWX, unmapflags::FLUSH_OWN)?;
    ensure!(code == 0, "the child's Unmap failed", "status {code}");
    puppet::read_blocks(p.id(), SHARED_BASE)?;
    faulted_at(p.id(), SHARED_BASE, false)?;
    ensure!(
        f.read(0) == 0x0f1e_0001,
        "the child's flush removed the root's page"
    );
    Ok(())
}

/// Sixteen of the pager's frames that are one 64 KiB-aligned host block, with frame `i`'s
/// first word `tag + i` (the kernel refills such a block mapped alike with one 64 KiB
/// entry, ADR 0040). The other frames taken on the way are freed on return.
fn large_block(tag: u32) -> Result<[Frame; 16], &'static str> {
    const BLOCK: u32 = 64 << 10;
    let mut taken: [Option<Frame>; 96] = core::array::from_fn(|_| None);
    let mut start = None;
    for i in 0..taken.len() {
        let f = Frame::alloc()?;
        let va = f.va();
        taken[i] = Some(f);
        let run = match start {
            Some(s) if va == taken[i - 1].as_ref().map_or(0, |p| p.va()) + PAGE => Some(s),
            _ => (va % BLOCK == 0).then_some(i),
        };
        start = run;
        if let Some(s) = run {
            if i - s == 15 {
                let block: [Frame; 16] =
                    core::array::from_fn(|k| taken[s + k].take().expect("taken above"));
                for (k, f) in block.iter().enumerate() {
                    f.write(0, tag + k as u32);
                }
                return Ok(block);
            }
        }
    }
    Err("the pager gave no 16 contiguous frames of an aligned 64 KiB block")
}

const PAGE: u32 = kestrel_abi::PAGE_SIZE;

/// A 64 KiB block mapped as one (one TLB entry covers it) still obeys every page's
/// rights: once W is unmapped from one page, that page's writes fault, even after the
/// other pages of the block were used again (whose entry must not grant it W).
pub fn large_entry_follows_each_page() -> TestResult {
    let block = large_block(0x6400_0000)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give_block(p.id(), SHARED_BASE, block[0].va(), 16, Rights::RW)?;
    let at = |k: u32| SHARED_BASE + k * PAGE;
    for k in [5u32, 0, 15, 7] {
        let v = puppet::read(p.id(), at(k))?;
        ensure!(
            v == 0x6400_0000 + k,
            "the block reads wrong",
            "page {k}: {v:#x}"
        );
    }
    puppet::write(p.id(), at(3), 0x33)?;
    ensure!(
        block[3].read(0) == 0x33,
        "a write through the block went elsewhere"
    );
    // W off page 3: its reads still work; pages 9 and 8 stay writable and readable.
    sys::unmap(Fpage::page(block[3].va(), Rights::W), 0).map_err(|e| call_failed("Unmap(W)", e))?;
    ensure!(
        puppet::read(p.id(), at(3))? == 0x33,
        "page 3 is not readable any more"
    );
    puppet::write(p.id(), at(9), 0x99)?;
    ensure!(block[9].read(0) == 0x99, "page 9 is not writable any more");
    ensure!(
        puppet::read(p.id(), at(8))? == 0x6400_0008,
        "page 8 reads wrong"
    );
    puppet::write_blocks(p.id(), at(3))?;
    faulted_at(p.id(), at(3), true)?;
    ensure!(
        block[3].read(0) == 0x33,
        "a write got through the downgraded page"
    );
    Ok(())
}

/// A 64 KiB block's page that goes away faults at once, though the block was mapped by
/// one large entry a moment before.
pub fn large_entry_unmapped_page_faults() -> TestResult {
    let block = large_block(0x6500_0000)?;
    let p = Thread::space(puppet::entry(), 0)?;
    puppet::give_block(p.id(), SHARED_BASE, block[0].va(), 16, Rights::RW)?;
    let at = |k: u32| SHARED_BASE + k * PAGE;
    ensure!(
        puppet::read(p.id(), at(2))? == 0x6500_0002,
        "the block reads wrong"
    );
    ensure!(
        puppet::read(p.id(), at(12))? == 0x6500_000c,
        "the block reads wrong"
    );
    sys::unmap(Fpage::page(block[12].va(), Rights::RWX), 0).map_err(|e| call_failed("Unmap", e))?;
    puppet::read_blocks(p.id(), at(12))?;
    faulted_at(p.id(), at(12), false)
}

/// A child's stack comes page by page from the pager.
pub fn pagefault_stack_pages() -> TestResult {
    let t = Thread::space(entry(stack_toucher), 0)?;
    let sum = report_from(t.id())?.mr(1);
    let expected: u32 = (1..=TOUCH_PAGES).sum();
    ensure!(
        sum == expected,
        "the stack lost data",
        "sum {sum}, expected {expected}"
    );
    let s = pager::stats(t.id())?;
    ensure!(
        s.private >= TOUCH_PAGES && s.refused == 0,
        "the pager did not serve the stack pages",
        "{} faults, {} private, {} refused",
        s.faults,
        s.private,
        s.refused
    );
    Ok(())
}

/// The fault message names the exact address, the access and the instruction.
pub fn pagefault_message_contents() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    // Warm up, so that no code or stack page of the puppet faults after the access.
    ensure!(
        puppet::read(p.id(), HEAP_BASE)? == 0,
        "fresh heap memory is not zero"
    );
    puppet::write(p.id(), HEAP_BASE + 4, 0)?;
    let addr = HEAP_BASE + 0x1124;
    ensure!(
        puppet::read(p.id(), addr)? == 0,
        "fresh heap memory is not zero"
    );
    let s = pager::stats(p.id())?;
    ensure!(
        s.last_addr == addr,
        "the fault address is wrong",
        "{:#x}, expected {addr:#x}",
        s.last_addr
    );
    ensure!(
        s.last_access == Rights::R.0 as u32,
        "a read was not reported as a read",
        "access {:#x}",
        s.last_access
    );
    ensure!(
        layout::is_text(s.last_ip),
        "the fault's ip is not in the code",
        "ip {:#x}",
        s.last_ip
    );
    let addr = HEAP_BASE + 0x2238;
    puppet::write(p.id(), addr, 7)?;
    let s = pager::stats(p.id())?;
    ensure!(
        s.last_addr == addr,
        "the fault address is wrong",
        "{:#x}, expected {addr:#x}",
        s.last_addr
    );
    ensure!(
        s.last_was_write(),
        "a write was not reported as a write",
        "access {:#x}",
        s.last_access
    );
    ensure!(puppet::read(p.id(), addr)? == 7, "the written word is gone");
    Ok(())
}

/// A page the pager maps read-only: reading works, writing faults as a write.
pub fn pagefault_read_only_region() -> TestResult {
    let p = Thread::space(puppet::entry(), 0)?;
    let v = puppet::read(p.id(), RO_BASE + 8)?;
    ensure!(
        v == RO_PATTERN,
        "the read-only page has other data",
        "{v:#x}"
    );
    puppet::write_blocks(p.id(), RO_BASE + 8)?;
    faulted_at(p.id(), RO_BASE + 8, true)
}

/// The same address in two spaces is two different pages.
pub fn spaces_are_isolated() -> TestResult {
    let a = Thread::space(puppet::entry(), 0)?;
    let b = Thread::space(puppet::entry(), 0)?;
    puppet::write(a.id(), HEAP_BASE, 0xa)?;
    ensure!(
        puppet::read(b.id(), HEAP_BASE)? == 0,
        "a space sees another space's write"
    );
    puppet::write(b.id(), HEAP_BASE, 0xb)?;
    ensure!(
        puppet::read(a.id(), HEAP_BASE)? == 0xa,
        "a space's write changed another space"
    );
    ensure!(
        puppet::read(b.id(), HEAP_BASE)? == 0xb,
        "a space lost its own write"
    );
    Ok(())
}

/// Two threads of one space share its mappings and know their own ids.
pub fn threads_share_their_space() -> TestResult {
    let f = pattern_frame(0x5ace_0001)?;
    let one = Thread::space(puppet::entry(), 0)?;
    let two = Thread::in_space_of(&one, puppet::entry(), 0)?;
    puppet::give(one.id(), SHARED_BASE, f.va(), Rights::RW)?;
    ensure!(
        puppet::read(two.id(), SHARED_BASE)? == 0x5ace_0001,
        "a mapping given to one thread is not in its space"
    );
    puppet::write(two.id(), HEAP_BASE + 16, 0x22)?;
    ensure!(
        puppet::read(one.id(), HEAP_BASE + 16)? == 0x22,
        "the threads see different memory"
    );
    for t in [&one, &two] {
        let me = puppet::command(t.id(), op::WHOAMI, &[])?.mr(1);
        ensure!(
            me == t.id().0,
            "a thread's UTCB holds another id",
            "{me:#x} for {:?}",
            t.id()
        );
    }
    Ok(())
}

/// Every space has its own hardware PID.
pub fn spaces_have_distinct_pids() -> TestResult {
    let a = Thread::space(puppet::entry(), 0)?;
    let b = Thread::space(puppet::entry(), 0)?;
    let a2 = Thread::in_space_of(&a, puppet::entry(), 0)?;
    let pid = |t: ThreadId| {
        sys::space_control(t, spacectl::GET_PID, 0)
            .map_err(|e| call_failed("SpaceControl(GET_PID)", e))
    };
    let (root, pa, pb, pa2) = (
        pid(ThreadId::ROOT)?,
        pid(a.id())?,
        pid(b.id())?,
        pid(a2.id())?,
    );
    ensure!(
        root != 0 && pa != 0 && pb != 0,
        "a space has PID 0 (the kernel's)",
        "root {root}, a {pa}, b {pb}"
    );
    ensure!(
        root != pa && root != pb && pa != pb,
        "two spaces share a PID",
        "root {root}, a {pa}, b {pb}"
    );
    ensure!(
        pa == pa2,
        "two threads of one space report different PIDs",
        "{pa} vs {pa2}"
    );
    let unused = Thread::reserve()?;
    crate::common::expect_kerror(
        "GET_PID of no space",
        sys::space_control(unused.id(), spacectl::GET_PID, 0),
        &[KError::InvalidSpace],
    )
}

/// The runtime's `memcpy` and `memset` (`kestrel_user::memops`, assembly) against a byte
/// loop: every source and destination alignment, every length up to 80 bytes and a few
/// page-sized ones, nothing written outside the destination. (`fill_bytes` passes the value
/// with a bit above the byte set: only the byte may be stored.)
pub fn memops_match_a_byte_loop() -> TestResult {
    use kestrel_user::memops::{copy_bytes, fill_bytes};
    const GUARD: u8 = 0xEE;
    let mut src = [0u8; 4200];
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let mut dst = [GUARD; 4200];
    let lens = (0..=80usize).chain([127, 128, 129, 4096, 4099]);
    for len in lens {
        for s in 0..4usize {
            for d in 0..4usize {
                dst.fill(GUARD);
                copy_bytes(&mut dst[8 + d..8 + d + len], &src[s..s + len]);
                let ok = dst[..8 + d].iter().all(|&b| b == GUARD)
                    && dst[8 + d..8 + d + len] == src[s..s + len]
                    && dst[8 + d + len..].iter().all(|&b| b == GUARD);
                ensure!(
                    ok,
                    "memcpy copied wrongly",
                    "len {len}, source +{s}, destination +{d}"
                );
            }
        }
        for d in 0..4usize {
            dst.fill(GUARD);
            fill_bytes(&mut dst[8 + d..8 + d + len], 0x5A);
            let ok = dst[..8 + d].iter().all(|&b| b == GUARD)
                && dst[8 + d..8 + d + len].iter().all(|&b| b == 0x5A)
                && dst[8 + d + len..].iter().all(|&b| b == GUARD);
            ensure!(ok, "memset filled wrongly", "len {len}, destination +{d}");
        }
    }
    Ok(())
}
