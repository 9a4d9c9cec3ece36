//! Virtualization faults: the IPC that hands a guest trap the kernel does not complete to
//! the vCPU's VMM (`kestrel_abi::VirtFaultMsg`, with the registers its transfer mask asks
//! for), the VMM's reply, and the two ways a guest memory access the kernel cannot
//! complete leaves it: a guest TLB miss or protection fault reflected into the guest, or a
//! guest-physical miss sent to the VMM (device memory: an `Mmio` fault; RAM: a page-fault
//! IPC to the pager).

use super::inject::inject;
use super::mmu;
use super::vcpu::{exit_class, vcpu_of};
use crate::api::{frame_of, ipc, space, thread, thread::FaultWait, Kernel};
use crate::arch::{msr, spr, vector, TrapFrame};
use kestrel_abi::{
    label, xfer, FaultReply, Inject, MsgTag, TracePoint, Utcb, VirtFault, VirtFaultMsg, XferRegs,
    XferTlb, REG_MRS,
};
use kestrel_vtlb::{Access, FillResult};

/// Sends a virtualization fault for the current vCPU thread `cur` to its VMM; `gpa` is
/// the full guest-physical address of an `Mmio` access (else 0).
pub fn virt_fault(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    class: VirtFault,
    insn: u32,
    gpa: u64,
) -> Option<usize> {
    let msg = fault_message(k, cur, vi, class, insn, gpa);
    let handler = k.threads[cur].exc_handler;
    match ipc::fault_ipc(k, cur, FaultWait::VirtFault, handler, msg) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            let pc = msg[1];
            thread::stop(k, cur, format_args!("vCPU fault ({class:?}, insn {insn:#010x}, pc {pc:#010x}) and no VMM to handle it"));
            None
        }
    }
}

/// The transfer mask a fault of `class` for instruction `insn` is sent with.
#[inline(always)]
fn fault_mask(k: &Kernel, vi: usize, class: VirtFault, insn: u32) -> u32 {
    let mut mask = k.vm.vcpus[vi].masks[class as usize];
    if class == VirtFault::Mmio && is_fp_load_store(insn) {
        // The VMM needs the FP register the access reads or writes.
        mask |= xfer::FPRS;
    }
    mask
}

/// Records the pending fault (mask, instruction, effective address), writes the long
/// parts of the message into the vCPU's own (kernel-only) UTCB, and returns MR0..MR6.
/// (`glue::fastpath`'s `__vfault_dcr` does the same for the short form of an
/// `Instruction` fault.)
#[inline(always)]
fn fault_message(
    k: &mut Kernel,
    cur: usize,
    vi: usize,
    class: VirtFault,
    insn: u32,
    gpa: u64,
) -> [u32; 7] {
    let mask = fault_mask(k, vi, class, insn);
    if mask & xfer::FPRS != 0 && k.vm.fp_owner == vi as u8 {
        // The real FPU holds the guest's registers: `Vcpu::fpr` must be current for
        // the delivery (`fault_delivered`).
        crate::arch::fpu::save(&mut k.vm.vcpus[vi].fpr);
    }
    k.vm.vcpus[vi].fault_mask = mask;
    k.vm.vcpus[vi].fault_insn = insn;
    k.vm.vcpus[vi].fault_ea = spr::read::<{ ppc440::spr::DEAR }>();
    let (pc, rs_value) = {
        let f = frame_of(k, cur);
        (f.regs.ip, f.regs.gpr[((insn >> 21) & 31) as usize])
    };
    if mask != 0 {
        // Long parts of the message go through the vCPU's own (kernel-only) UTCB.
        let u = thread::utcb(k, cur);
        let f = frame_of(k, cur);
        let regs = XferRegs {
            gpr: f.regs.gpr,
            special: [f.regs.cr, f.regs.lr, f.regs.ctr, f.regs.xer],
        };
        regs.encode(mask, &mut u.mr);
        if mask & xfer::TLB != 0 {
            let v = &k.vm.vcpus[vi];
            let ts = v.s.msr & msr::IS != 0;
            let tlb_index = v
                .tlb
                .lookup(pc, v.s.pid as u8, ts)
                .map_or(u32::MAX, |(i, _)| i);
            XferTlb {
                pid: v.s.pid,
                mmucr: v.s.mmucr,
                tlb_index,
            }
            .encode(&mut u.mr);
        }
    }
    let m = VirtFaultMsg {
        class,
        pc,
        insn,
        gpa,
        msr: k.vm.vcpus[vi].s.msr,
        mask,
        rs_value,
    };
    let (tag, mr) = m.encode();
    [tag.0, mr[0], mr[1], mr[2], mr[3], mr[4], mr[5]]
}

/// Applies the VMM's reply to a virtualization fault of vCPU thread `d`.
/// `regs` are the reply's MR0..MR6 (sent in registers), `long` the sender's UTCB
/// message registers (MR7 and up).
pub fn apply_reply(
    k: &mut Kernel,
    d: usize,
    tag: MsgTag,
    regs: &[u32; REG_MRS],
    sender: &Utcb,
) -> bool {
    let long = &sender.mr;
    let Some(vi) = vcpu_of(k, d) else { return true };
    let mask = k.vm.vcpus[vi].fault_mask;
    let mr = [regs[1], regs[2], regs[3], regs[4], regs[5], regs[6]];
    let r = FaultReply::decode(tag, &mr);
    let f = frame_of(k, d);
    if let Some(pc) = r.pc {
        f.regs.ip = pc;
    }
    if r.regs {
        if let Some(g) = XferRegs::decode_gprs(mask, tag.untyped(), long) {
            f.regs.gpr = *g;
        }
        if let Some(s) = XferRegs::decode_special(mask, tag.untyped(), long) {
            [f.regs.cr, f.regs.lr, f.regs.ctr, f.regs.xer] = s;
        }
    }
    if let Some((i, v)) = r.set_gpr {
        f.regs.gpr[i as usize] = v;
    }
    if r.fprs && mask & xfer::FPRS != 0 {
        k.vm.vcpus[vi].fpr = sender.fp;
        if k.vm.fp_owner == vi as u8 {
            crate::arch::fpu::load(&k.vm.vcpus[vi].fpr);
        }
    }
    if let Some(level) = r.irq {
        k.vm.vcpus[vi].s.irq_line = level as u32;
    }
    if let Some(level) = r.crit {
        k.vm.vcpus[vi].s.crit_line = level as u32;
    }
    let f = frame_of(k, d);
    let pc = f.regs.ip;
    match r.inject {
        Some(Inject::Dsi) => {
            // As the hardware would report it: the effective address, ESR[ST] for stores.
            let v = &mut k.vm.vcpus[vi];
            v.s.dear = v.fault_ea;
            v.s.esr = if ppc440::decode::writes_memory(v.fault_insn) {
                crate::arch::esr::ST
            } else {
                0
            };
            inject(k, vi, f, vector::DSI, pc);
        }
        Some(Inject::Program) => {
            k.vm.vcpus[vi].s.esr = crate::arch::esr::PIL;
            inject(k, vi, f, vector::PROGRAM, pc);
        }
        Some(Inject::MachineCheck) => inject(k, vi, f, vector::MACHINE_CHECK, pc),
        None => {}
    }
    !r.stop
}

/// Whether `insn` is an FP load or store (primary opcodes 48-55, or opcode 31 decoded).
#[inline]
fn is_fp_load_store(insn: u32) -> bool {
    match insn >> 26 {
        48..=55 => true,
        31 => {
            matches!(ppc440::decode::decode(insn), ppc440::decode::Insn::LoadStore(ls) if ls.is_fp())
        }
        _ => false,
    }
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
        // A guest protection fault is reflected, not a TLB miss.
        exit_class(k, vi, TracePoint::ExceptReflect);
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
        let insn = mmu::guest_read_u32(k, vi, pc, true).unwrap_or(0);
        exit_class(k, vi, TracePoint::SyscallIpc);
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
    exit_class(k, vi, TracePoint::PageFaultIpc);
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
