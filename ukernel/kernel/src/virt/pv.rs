//! Linux's paravirtual interface (`kestrel_abi::pv`, docs/adr/0025-paravirtual-linux.md):
//! the hypercalls a guest supervisor makes with `sc` and r0 = `SC_MAGIC_R0`, and the
//! per-vCPU magic page (Linux's `struct kvm_vcpu_arch_shared`) through which a patched
//! guest kernel reads and writes its MSR[EE], SRR0/1, SPRG0-7, DEAR and ESR without
//! trapping.
//!
//! The page is kept consistent by synchronising at the kernel's boundaries, while
//! [`Vcpu::s`](super::vcpu::Vcpu) stays the one authoritative copy for all of the kernel's own
//! code: on every kernel entry from a vCPU whose page is live, [`pv_in`] takes the fields
//! the guest may have written (EE only of the MSR); before every return to it,
//! [`pv_out`] writes the state back, with `int_pending`. The page is "live" from the
//! first time the kernel maps it into the guest's TLB (before that the guest cannot have
//! touched it), so a guest that asks for the page but never uses it pays nothing. A live
//! vCPU skips the assembly tier of the program interrupt; its Rust tier syncs only the
//! fields it may touch ([`fast_in`], [`fast_out`]: MSR[EE], SRR0/1) and leaves the
//! `mfspr`/`mtspr` of the page's other SPRs to the full path.
//!
//! Invariants: the page is visible only to this vCPU's guest supervisor (hardware TID of
//! the guest kernel, never executable); it is zeroed whenever the guest maps it (no bytes
//! of another VM survive in a reused vCPU slot); no asynchronous interrupt is injected
//! while `critical` equals the guest's r1 in supervisor mode.

use super::mmu;
use super::vcpu::{self, update_dec, wakeup_pending, NVCPUS};
use crate::api::Kernel;
use crate::arch::{msr, TrapFrame};
use kestrel_abi::pv::{self, SharedPage};
use kestrel_abi::{TracePoint, PAGE_SIZE};
use kestrel_vtlb::{HwEntry, PageSize, Wimge};

/// The paravirtual state of one vCPU (`Vcpu::pv`), kept with the vCPU's record.
pub use super::vcpu::Pv;

/// What the kernel does after a hypercall.
pub enum Hypercall {
    /// Answered (the result registers are set): resume the guest; the exit's trace point.
    Done(TracePoint),
    /// `EV_IDLE` with nothing pending: wait as for MSR[WE] (an `Idle` fault to the VMM,
    /// for the instruction `pv::HCALL_INSNS[2]`), which resumes the guest after the `sc`
    /// once an interrupt may be pending.
    Wait,
}

/// One vCPU's magic page: exactly one page, nothing else in it.
#[repr(C, align(4096))]
pub struct MagicPage(pub SharedPage);
const _: () = assert!(core::mem::size_of::<MagicPage>() == PAGE_SIZE as usize);

/// The magic pages, one per vCPU slot. Kernel RAM is mapped 1:1, so a page's address is
/// also its physical address (what the guest's hardware TLB entry points to).
static mut MAGIC: [MagicPage; NVCPUS] = [const { MagicPage(SharedPage::ZERO) }; NVCPUS];

/// vCPU `vi`'s magic page.
#[inline(always)]
fn page(_k: &mut Kernel, vi: usize) -> &mut SharedPage {
    // SAFETY: single CPU, kernel entered with interrupts off; the only references to
    // `MAGIC` are made here, each tied to the caller's unique `&mut Kernel` borrow, so no
    // two are live at once. The guest writes the page only while the kernel is not running.
    unsafe { &mut (*core::ptr::addr_of_mut!(MAGIC))[vi].0 }
}

/// Physical address of vCPU `vi`'s magic page.
fn page_phys(vi: usize) -> u32 {
    // SAFETY: only an address inside the static is computed.
    (unsafe { core::ptr::addr_of!(MAGIC[vi]) }) as u32
}

/// `vcpuctl::SET_PV`: turns the interface on or off; off also unmaps the page.
pub fn set_enabled(k: &mut Kernel, vi: usize, on: bool) {
    k.vm.vcpus[vi].pv = Pv { on, ..Pv::OFF };
    mmu::flush_vcpu(k, vi);
}

/// Whether vCPU `vi` has a live magic page (the fast paths leave it alone).
#[inline(always)]
pub fn live(k: &Kernel, vi: usize) -> bool {
    k.vm.vcpus[vi].pv.live
}

/// A guest `sc` (`f.regs.ip` already past it): if it is a hypercall, answers it and says
/// what follows; `None` for a system call.
pub fn hypercall(k: &mut Kernel, vi: usize, f: &mut TrapFrame) -> Option<Hypercall> {
    let v = &k.vm.vcpus[vi];
    if !v.pv.on || v.s.msr & msr::PR != 0 || f.regs.gpr[0] != pv::SC_MAGIC_R0 {
        return None;
    }
    let token = f.regs.gpr[11];
    let (status, r4) = match token {
        pv::HC_FEATURES => (pv::EV_SUCCESS, Some(pv::FEATURE_MAGIC_PAGE)),
        pv::HC_PPC_MAP_MAGIC_PAGE => {
            map(k, vi, f.regs.gpr[4] & !(PAGE_SIZE - 1));
            (pv::EV_SUCCESS, Some(pv::MAGIC_FEAT_MAS0_TO_SPRG7))
        }
        pv::EV_IDLE => {
            f.regs.gpr[3] = pv::EV_SUCCESS;
            if wakeup_pending(k, vi) {
                return Some(Hypercall::Done(TracePoint::GuestIdle));
            }
            return Some(Hypercall::Wait);
        }
        _ => (pv::EV_UNIMPLEMENTED, None),
    };
    f.regs.gpr[3] = status;
    if let Some(r4) = r4 {
        f.regs.gpr[4] = r4;
    }
    Some(Hypercall::Done(TracePoint::ExceptSyscall))
}

/// `HC_PPC_MAP_MAGIC_PAGE`: a zeroed page at `ea`, filled on the guest's first access.
fn map(k: &mut Kernel, vi: usize, ea: u32) {
    // The whole page: a reused vCPU slot keeps nothing of the VM before.
    // SAFETY: as in `page`: the only reference to this vCPU's page during this call.
    unsafe { (*core::ptr::addr_of_mut!(MAGIC))[vi] = MagicPage(SharedPage::ZERO) };
    let Pv { on, mapped, .. } = k.vm.vcpus[vi].pv;
    if !mapped {
        // Once per vCPU (until the VMM turns the interface off and on): the evidence in the
        // log that the guest found the interface.
        crate::kprintln!(
            "kestrel: vCPU {vi}: guest mapped the paravirtual magic page at {ea:#010x}"
        );
    }
    k.vm.vcpus[vi].pv = Pv {
        on,
        mapped: true,
        live: false,
        ea,
    };
    // Drop every hardware entry of the vCPU: one may translate the new page's address, or
    // an old magic entry may still point elsewhere.
    mmu::flush_vcpu(k, vi);
}

/// The data TLB miss of vCPU `vi` at `ea` hits the magic page (guest supervisor mode, the
/// page's address): installs the hardware entry (read/write, never execute, visible under
/// the guest kernel's TID only) and returns true. The page goes live first.
pub fn fill_magic(k: &mut Kernel, vi: usize, ea: u32) -> bool {
    let v = &k.vm.vcpus[vi];
    if !v.pv.mapped || v.s.msr & msr::PR != 0 || ea & !(PAGE_SIZE - 1) != v.pv.ea {
        return false;
    }
    if !v.pv.live {
        k.vm.vcpus[vi].pv.live = true;
        pv_out(k, vi);
        // The assembly fast path must now leave this vCPU to the full path.
        vcpu::set_current(None);
    }
    // The TID of the guest's current PID in kernel mode: guest user mode never sees it.
    let pid = k.vm.vcpus[vi].s.pid as u8;
    let tid = mmu::guest_hw_pid(k, vi, pid, true);
    let hw = HwEntry {
        epn: k.vm.vcpus[vi].pv.ea,
        size: PageSize::K4,
        rpn_base: page_phys(vi),
        tid,
        perms: kestrel_abi::Rights::RW,
        wimge: Wimge(0),
    };
    mmu::install(k, vi, hw, MAGIC_GUEST_INDEX);
    true
}

/// The guest TLB index the kernel's TLB record files the magic entry under: a guest write
/// to that entry drops it (it is refilled on the next access).
const MAGIC_GUEST_INDEX: u32 = 63;

/// Kernel entry from vCPU `vi`: takes what the guest may have written into its page.
#[inline(always)]
pub fn pv_in(k: &mut Kernel, vi: usize) {
    if live(k, vi) {
        pv_in_live(k, vi);
    }
}

#[inline(never)]
fn pv_in_live(k: &mut Kernel, vi: usize) {
    let p = *page(k, vi);
    let s = &mut k.vm.vcpus[vi].s;
    s.msr = (s.msr & !pv::SHARED_MSR_BITS) | (p.msr as u32 & pv::SHARED_MSR_BITS);
    s.srr0 = p.srr0 as u32;
    s.srr1 = p.srr1 as u32;
    s.sprg[0] = p.sprg0 as u32;
    s.sprg[1] = p.sprg1 as u32;
    s.sprg[2] = p.sprg2 as u32;
    s.sprg[3] = p.sprg3 as u32;
    s.dear = p.dar as u32;
    s.esr = p.esr;
    // SPRG4-7 are user-readable: the real registers follow.
    let high = [p.sprg4, p.sprg5, p.sprg6, p.sprg7];
    for (i, v) in high.iter().enumerate() {
        if s.sprg[4 + i] != *v as u32 {
            vcpu::write_sprg_through(s, ppc440::spr::SPRG4 + i as u32, *v as u32);
        }
    }
}

/// The Rust tier of the program interrupt (`fast::program`) for a live vCPU about to
/// emulate `insn`: it touches no page field but MSR[EE] and SRR0/1, so only those come
/// from the page (the page stays the truth for the others while the guest runs). Returns
/// false for an `mfspr`/`mtspr` of another field the page holds (SPRG0-7, ESR, DEAR): the
/// full path (with [`pv_in`]) emulates that one.
#[inline(always)]
pub fn fast_in(k: &mut Kernel, vi: usize, insn: u32) -> bool {
    use ppc440::decode::{opcd::X, spr_number, xo31, OPCD, XO};
    if OPCD.get(insn) == X && matches!(XO.get(insn), xo31::MFSPR | xo31::MTSPR) {
        use ppc440::spr::{DEAR, ESR, SPRG0, SPRG7};
        let n = spr_number(insn);
        if (SPRG0..=SPRG7).contains(&n) || n == ESR || n == DEAR {
            return false;
        }
    }
    let p = page(k, vi);
    let (m, srr0, srr1) = (p.msr as u32, p.srr0 as u32, p.srr1 as u32);
    let s = &mut k.vm.vcpus[vi].s;
    s.msr = (s.msr & !pv::SHARED_MSR_BITS) | (m & pv::SHARED_MSR_BITS);
    s.srr0 = srr0;
    s.srr1 = srr1;
    true
}

/// After the Rust tier emulated an instruction of live vCPU `vi` (guest MSR `old` before):
/// MSR and SRR0/1 back into the page; on a switch to guest user mode, SPRG4-7 from the page
/// into the real registers, which guest user mode reads directly.
#[inline(always)]
pub fn fast_out(k: &mut Kernel, vi: usize, old: u32) {
    let s = k.vm.vcpus[vi].s;
    let p = page(k, vi);
    p.msr = s.msr as u64;
    p.srr0 = s.srr0 as u64;
    p.srr1 = s.srr1 as u64;
    if (old ^ s.msr) & msr::PR != 0 {
        let high = [p.sprg4, p.sprg5, p.sprg6, p.sprg7];
        let s = &mut k.vm.vcpus[vi].s;
        for (i, v) in high.iter().enumerate() {
            if s.sprg[4 + i] != *v as u32 {
                vcpu::write_sprg_through(s, ppc440::spr::SPRG4 + i as u32, *v as u32);
            }
        }
    }
}

/// Before resuming vCPU `vi`: writes its state into its page.
#[inline(always)]
pub fn pv_out(k: &mut Kernel, vi: usize) {
    if live(k, vi) {
        pv_out_live(k, vi);
    }
}

#[inline(never)]
fn pv_out_live(k: &mut Kernel, vi: usize) {
    update_dec(k, vi);
    let s = k.vm.vcpus[vi].s;
    let p = page(k, vi);
    p.msr = s.msr as u64;
    p.srr0 = s.srr0 as u64;
    p.srr1 = s.srr1 as u64;
    p.sprg0 = s.sprg[0] as u64;
    p.sprg1 = s.sprg[1] as u64;
    p.sprg2 = s.sprg[2] as u64;
    p.sprg3 = s.sprg[3] as u64;
    p.sprg4 = s.sprg[4] as u64;
    p.sprg5 = s.sprg[5] as u64;
    p.sprg6 = s.sprg[6] as u64;
    p.sprg7 = s.sprg[7] as u64;
    p.dar = s.dear as u64;
    p.esr = s.esr;
    // Uniprocessor guests are CPU 0 (as `mfspr PIR` reads).
    p.pir = 0;
    p.int_pending = kestrel_guestcpu::msr::interrupt_pending(&s) as u32;
}

/// Whether vCPU `vi` (frame `f`) is in a critical section of its patched code: live page,
/// guest supervisor mode, and the page's `critical` equal to r1 (low words, a 32-bit
/// guest). No asynchronous interrupt is injected then.
#[inline(always)]
pub fn in_critical(k: &mut Kernel, vi: usize, f: &TrapFrame) -> bool {
    live(k, vi)
        && k.vm.vcpus[vi].s.msr & msr::PR == 0
        && page(k, vi).critical as u32 == f.regs.gpr[1]
}
