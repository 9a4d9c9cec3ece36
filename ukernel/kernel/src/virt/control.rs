//! The VMM's calls on vCPUs: `VcpuControl` (state, transfer masks, virtual interrupt
//! line, guest TLB and MMIO set-up) and `TraceControl` (the exit trace points).

use super::mmu;
use super::pv;
use super::vcpu::{
    guest_time, merge, update_dec, vcpu_of, GUEST_MSR_MASK, TRACE_RETIRED, VCPU_MSR,
};
use crate::api::{frame_of, space, thread, Kernel};
use kestrel_abi::{
    tracectl, vcpuctl, KError, ThreadId, TraceCounter, Utcb, VcpuState, NUM_FAULT_CLASSES,
    NUM_TRACEPOINTS, PAGE_SIZE,
};

fn caller_utcb(k: &Kernel, cur: usize) -> &'static mut Utcb {
    thread::utcb(k, cur)
}

/// `VcpuControl(dest, op, a, b, c)`: allowed to the root task and to threads in the
/// space of the vCPU's exception handler (its VMM).
pub fn sys_vcpu_control(k: &mut Kernel, cur: usize, r: &[u32; 5]) -> Result<(), KError> {
    let j = thread::lookup(k, ThreadId(r[0])).ok_or(KError::InvalidThread)?;
    let vi = vcpu_of(k, j).ok_or(KError::InvalidThread)?;
    let cs = k.threads[cur].space;
    let vmm_space = thread::lookup(k, k.threads[j].exc_handler).map(|h| k.threads[h].space);
    if !k.spaces[cs as usize].privileged && vmm_space != Some(cs) {
        return Err(KError::NoPrivilege);
    }
    let (op, a, b, c) = (r[1], r[2], r[3], r[4]);
    match op {
        vcpuctl::GET_STATE => {
            update_dec(k, vi);
            let f = frame_of(k, j);
            let mut s = k.vm.vcpus[vi].s;
            s.gpr = f.regs.gpr;
            s.cr = f.regs.cr;
            s.lr = f.regs.lr;
            s.ctr = f.regs.ctr;
            s.xer = f.regs.xer;
            s.pc = f.regs.ip;
            // DEC as the guest would read it now (the shadow keeps the last write).
            let d = k.vm.vcpus[vi].timers.dec_deadline;
            if d != 0 {
                s.dec = d.saturating_sub(guest_time(k, vi)) as u32;
            }
            caller_utcb(k, cur).vcpu = s;
        }
        vcpuctl::SET_STATE => {
            if j == k.current {
                return Err(KError::Busy);
            }
            let s: VcpuState = caller_utcb(k, cur).vcpu;
            let f = frame_of(k, j);
            f.regs.gpr = s.gpr;
            f.regs.cr = s.cr;
            f.regs.lr = s.lr;
            f.regs.ctr = s.ctr;
            f.regs.xer = s.xer;
            f.regs.ip = s.pc;
            f.regs.msr = VCPU_MSR;
            // The DEC deadline is in the vCPU's guest time (the caller runs in host time).
            let now = guest_time(k, vi);
            let v = &mut k.vm.vcpus[vi];
            v.s = s;
            v.s.msr &= GUEST_MSR_MASK & !crate::arch::msr::WE;
            v.s.ivpr &= ppc440::ivor::PREFIX.mask();
            for ivor in v.s.ivor.iter_mut() {
                *ivor &= ppc440::ivor::OFFSET.mask();
            }
            v.timers.dec_deadline = kestrel_guestcpu::timer::dec_deadline(now, s.dec);
            mmu::vcpu_state_written(k, vi);
        }
        vcpuctl::SET_TRANSFER_MASK => {
            if a as usize >= NUM_FAULT_CLASSES || b & !kestrel_abi::xfer::ALL != 0 {
                return Err(KError::InvalidParam);
            }
            k.vm.vcpus[vi].masks[a as usize] = b;
        }
        vcpuctl::SET_IRQ => {
            k.vm.vcpus[vi].s.irq_line = (a != 0) as u32;
        }
        vcpuctl::SET_TLB => {
            let u = caller_utcb(k, cur);
            let (w0, w1, w2, tid) = (u.mr[1], u.mr[2], u.mr[3], u.mr[4]);
            let index = b;
            if index >= ppc440::tlb::ENTRIES {
                return Err(KError::InvalidParam);
            }
            let mmucr = tid & 0xff;
            let t = &mut k.vm.vcpus[vi].tlb;
            t.tlbwe(index, 0, w0, mmucr)
                .map_err(|_| KError::InvalidParam)?;
            t.tlbwe(index, 1, w1, mmucr)
                .map_err(|_| KError::InvalidParam)?;
            t.tlbwe(index, 2, w2, mmucr)
                .map_err(|_| KError::InvalidParam)?;
            mmu::guest_tlb_written(k, vi, index);
        }
        vcpuctl::DECLARE_MMIO => {
            // Pages of [b, b + c) in the VM space; no limit but the kernel's page pool.
            let end = b.checked_add(c).ok_or(KError::InvalidParam)?;
            if a > 1 || b % PAGE_SIZE != 0 || c % PAGE_SIZE != 0 {
                return Err(KError::InvalidParam);
            }
            let sid = k.threads[k.vm.vcpus[vi].thread].space;
            let mut page = b;
            while page < end {
                space::declare_device(k, sid, page, a == 1).map_err(|_| KError::OutOfMemory)?;
                page += PAGE_SIZE;
            }
        }
        vcpuctl::SET_PV => {
            if a > 1 {
                return Err(KError::InvalidParam);
            }
            pv::set_enabled(k, vi, a == 1);
        }
        _ => return Err(KError::InvalidParam),
    }
    Ok(())
}

/// `TraceControl(op, space_spec)`: `space_spec` names a vCPU for its own counters, or
/// is nil for the sum over all VMs. Reading copies the counters to the UTCB.
pub fn sys_trace_control(k: &mut Kernel, cur: usize, op: u32, who: ThreadId) -> Result<(), KError> {
    let cs = k.threads[cur].space;
    let privileged = k.spaces[cs as usize].privileged;
    let vi = if who.is_nil() {
        // The all-VMs view: root task only.
        if !privileged {
            return Err(KError::NoPrivilege);
        }
        None
    } else {
        let j = thread::lookup(k, who).ok_or(KError::InvalidThread)?;
        let vi = vcpu_of(k, j).ok_or(KError::InvalidThread)?;
        // One VM's counters: the root task or that VM's VMM.
        let vmm_space = thread::lookup(k, k.threads[j].exc_handler).map(|h| k.threads[h].space);
        if !privileged && vmm_space != Some(cs) {
            return Err(KError::NoPrivilege);
        }
        Some(vi)
    };
    match op {
        tracectl::READ => {
            let counters: [TraceCounter; NUM_TRACEPOINTS] = match vi {
                Some(vi) => k.vm.vcpus[vi].trace,
                None => {
                    // SAFETY: single CPU; only the kernel writes the counters.
                    let mut all = unsafe { *core::ptr::addr_of!(TRACE_RETIRED) };
                    for v in k.vm.vcpus.iter() {
                        for (a, c) in all.iter_mut().zip(v.trace.iter()) {
                            merge(a, c);
                        }
                    }
                    all
                }
            };
            caller_utcb(k, cur).trace = counters;
        }
        tracectl::RESET => {
            let zero = [TraceCounter::default(); NUM_TRACEPOINTS];
            match vi {
                Some(vi) => k.vm.vcpus[vi].trace = zero,
                None => {
                    for v in k.vm.vcpus.iter_mut() {
                        v.trace = zero;
                    }
                    // SAFETY: as above.
                    unsafe { *core::ptr::addr_of_mut!(TRACE_RETIRED) = zero };
                }
            }
        }
        _ => return Err(KError::InvalidParam),
    }
    Ok(())
}
