//! Physical memory for root tasks (sigma0 role) and a small pager loop.
//!
//! The root space sees free RAM at `SIGMA0_WINDOW + phys`; touching or mapping a
//! window page makes the kernel map it (see `docs/adr/0002-memory-and-tlb.md`). A
//! [`FrameAllocator`] hands out window pages; [`map_reply`] builds the answer to a
//! page-fault IPC. Programs the root task started get RAM from it instead
//! ([`crate::root::ram`], [`crate::pager::RootRam`]).

use crate::ipc::{reply_wait, Msg};
use crate::sys::kernel_info;
use kestrel_abi::{fault::pf, kinfo, label, Fpage, MapItem, Rights, ThreadId, PAGE_SIZE};

/// Bump allocator with a small free list over the free physical range.
pub struct FrameAllocator {
    next: u32,
    end: u32,
    window: u32,
    free: [u32; 64],
    nfree: usize,
}

impl FrameAllocator {
    /// Asks the kernel for the free range. Root task only.
    pub fn from_kernel() -> Option<FrameAllocator> {
        let [first, end, window, _] = kernel_info(kinfo::MEMORY).ok()?;
        Some(FrameAllocator {
            next: first,
            end,
            window,
            free: [0; 64],
            nfree: 0,
        })
    }

    /// A zeroed page; returns its address in the root's window.
    pub fn alloc(&mut self) -> Option<u32> {
        let va = if self.nfree > 0 {
            self.nfree -= 1;
            self.free[self.nfree]
        } else {
            if self.next.checked_add(PAGE_SIZE)? > self.end {
                return None;
            }
            let p = self.next;
            self.next += PAGE_SIZE;
            self.window + p
        };
        // SAFETY: `va` is a window page owned by this allocator, mapped by the kernel on
        // first touch; nobody else writes it until it is handed out.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, PAGE_SIZE as usize) };
        Some(va)
    }

    /// Returns a page (its mappings elsewhere should be unmapped first).
    pub fn free(&mut self, va: u32) {
        if self.nfree < self.free.len() {
            self.free[self.nfree] = va;
            self.nfree += 1;
        }
    }

    /// Bytes still available from the bump region.
    pub fn remaining(&self) -> u32 {
        self.end - self.next
    }
}

/// The boot-module area (QEMU's `-initrd`), readable by the root task through its
/// sigma0 window. Root task only.
pub fn boot_modules() -> Option<&'static [u8]> {
    let [phys, size, _, _] = kernel_info(kinfo::BOOT_MODULE).ok()?;
    let [_, _, window, _] = kernel_info(kinfo::MEMORY).ok()?;
    // SAFETY: the kernel maps the boot modules read-only into the root space's window
    // on first touch and never changes them; the slice is only read.
    Some(unsafe { core::slice::from_raw_parts((window + phys) as *const u8, size as usize) })
}

/// A page-fault message as received by a pager.
#[derive(Clone, Copy, Debug)]
pub struct PageFault {
    pub addr: u32,
    pub ip: u32,
    /// r = 4, w = 2, x = 1.
    pub access: Rights,
}

impl PageFault {
    pub fn parse(m: &Msg) -> Option<PageFault> {
        if !label::is_pagefault(m.label()) || m.tag.untyped() < pf::WORDS as usize {
            return None;
        }
        Some(PageFault {
            addr: m.mr(pf::ADDR),
            ip: m.mr(pf::IP),
            access: Rights((m.label() & 7) as u8),
        })
    }
}

/// Reply that maps the page at `src` (in the pager's space) to the faulting page.
pub fn map_reply(fault_addr: u32, src: u32, rights: Rights) -> Msg {
    let mut m = Msg::new(0);
    m.push_item(MapItem::map(fault_addr, Fpage::page(src, rights)));
    m
}

/// Serves page faults forever: `resolve(faulter, fault)` returns the reply to send
/// (usually a [`map_reply`]) or `None` to leave the faulter blocked.
pub fn pager_loop(mut resolve: impl FnMut(ThreadId, &Msg) -> Option<Msg>) -> ! {
    let mut pending: Option<(ThreadId, Msg)> = None;
    loop {
        let r = match pending.take() {
            Some((to, msg)) => reply_wait(to, &msg),
            None => crate::ipc::receive(ThreadId::ANY, kestrel_abi::Timeout::NEVER),
        };
        if let Ok((from, msg)) = r {
            if let Some(reply) = resolve(from, &msg) {
                pending = Some((from, reply));
            }
        }
    }
}
