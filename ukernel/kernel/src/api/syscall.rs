//! System-call dispatch: decode r0 and the argument registers, call the handler,
//! write results back into the caller's frame.

use super::{frame_of, ipc, space, thread, Kernel};
use crate::platform::{self, IrqController};
use kestrel_abi::{
    exc, kdebug, kinfo, label, spacectl, unmapflags, ExceptionClass, Fpage, KError, MsgTag,
    Syscall, ThreadId, ABI_VERSION, MAX_THREAD_NO, REG_MRS, SIGMA0_WINDOW, SYSCALL_BASE,
    THREAD_NAME_LEN,
};

/// Handles the system call of thread `cur`; returns a thread to switch to, if any.
/// Inlined into its one caller (`glue::trap::dispatch`): the VMM's replies come this way.
#[inline(always)]
pub fn dispatch(k: &mut Kernel, cur: usize) -> Option<usize> {
    let raw = frame_of(k, cur).regs.gpr[0];
    let nr = if raw >= SYSCALL_BASE {
        raw - SYSCALL_BASE
    } else if raw != Syscall::Ipc as u32 && k.spaces[k.threads[cur].space as usize].linux {
        return reflect_linux(k, cur);
    } else {
        raw
    };
    let Some(nr) = Syscall::from_raw(nr) else {
        frame_of(k, cur).regs.gpr[3] = KError::NoSyscall as u32;
        return None;
    };
    if nr == Syscall::Ipc {
        return ipc::sys_ipc(k, cur);
    }
    let r = frame_of(k, cur).regs.gpr;
    let mut out = [0u32; 5];
    let res: Result<(), KError> = match nr {
        Syscall::Ipc => unreachable!("handled above"),
        Syscall::ThreadControl => {
            thread::sys_thread_control(k, cur, &[r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]])
        }
        Syscall::ExchangeRegisters => {
            thread::sys_exchange_registers(k, cur, &[r[3], r[4], r[5], r[6], r[7], r[8]]).map(|o| {
                out = o;
            })
        }
        Syscall::ThreadSwitch => {
            let dest = ThreadId(r[3]);
            frame_of(k, cur).regs.gpr[3] = 0;
            return yield_to(k, cur, dest);
        }
        Syscall::Schedule => thread::sys_schedule(k, cur, &[r[3], r[4], r[5]]),
        Syscall::Unmap => {
            let fp = Fpage(r[3]);
            if fp.is_nil() || !fp.is_mappable() || r[4] & !unmapflags::FLUSH_OWN != 0 {
                Err(KError::InvalidParam)
            } else {
                let sid = k.threads[cur].space;
                space::unmap(k, sid, fp, r[4] & unmapflags::FLUSH_OWN != 0);
                Ok(())
            }
        }
        Syscall::SpaceControl => space_control(k, cur, r[3], r[4]).map(|v| out[0] = v),
        Syscall::InterruptControl => interrupt_control(k, cur, r[3], ThreadId(r[4]), r[5]),
        Syscall::KernelInfo => kernel_info(k, cur, r[3]).map(|v| out[..4].copy_from_slice(&v)),
        Syscall::VcpuControl => super::hooks::vcpu_control(k, cur, &[r[3], r[4], r[5], r[6], r[7]]),
        Syscall::TraceControl => super::hooks::trace_control(k, cur, r[3], ThreadId(r[4])),
        Syscall::KDebug => kdebug(k, cur, r[3], r[4], r[5], ThreadId(r[6])).map(|v| {
            out[0] = v[0];
            out[1] = v[1];
        }),
    };
    let f = frame_of(k, cur);
    f.regs.gpr[3] = match res {
        Ok(()) => 0,
        Err(e) => e as u32,
    };
    if res.is_ok() {
        f.regs.gpr[4..9].copy_from_slice(&out);
    }
    None
}

/// A Linux system call (`sc` with r0 = 1..`SYSCALL_BASE` in a Linux personality space):
/// the thread blocks in an exception IPC of class `Syscall` to its exception handler (the
/// personality server), whose reply sets r3 and CR0[SO] (`ipc::transfer`). SRR0 already
/// points after the `sc`, so the thread resumes there.
fn reflect_linux(k: &mut Kernel, cur: usize) -> Option<usize> {
    let r = frame_of(k, cur).regs.gpr;
    let ip = frame_of(k, cur).regs.ip;
    // MR7..MR10 travel in the caller's UTCB, as a vCPU's extra fault words do (`src_mr`).
    thread::utcb(k, cur).mr[REG_MRS..=exc::SYSCALL_WORDS as usize].copy_from_slice(&r[5..9]);
    let tag = MsgTag::new(label::EXCEPTION, exc::SYSCALL_WORDS, 0);
    let msg = [
        tag.0,
        ip,
        r[1],
        ExceptionClass::Syscall as u32,
        r[0],
        r[3],
        r[4],
    ];
    let handler = k.threads[cur].exc_handler;
    match ipc::fault_ipc(k, cur, thread::FaultWait::LinuxSyscall, handler, msg) {
        Ok(h) => h,
        Err(ipc::NoFaultHandler) => {
            thread::stop(
                k,
                cur,
                format_args!(
                    "Linux system call {} at ip {ip:#010x}, no personality server (exception handler)",
                    r[0]
                ),
            );
            None
        }
    }
}

fn privileged(k: &Kernel, cur: usize) -> bool {
    k.spaces[k.threads[cur].space as usize].privileged
}

/// `ThreadSwitch`: give up the processor (to `dest` if it is ready).
fn yield_to(k: &mut Kernel, cur: usize, dest: ThreadId) -> Option<usize> {
    let p = k.threads[cur].prio;
    if let Some(d) = thread::lookup(k, dest) {
        if d != cur && k.threads[d].runnable() && k.rq.contains(d) {
            k.rq.remove(d);
            k.rq.enqueue(cur, p);
            k.current = super::IDLE;
            return Some(d);
        }
    }
    if matches!(k.rq.highest(), Some((_, top)) if top >= p) {
        k.rq.enqueue(cur, p);
        k.current = super::IDLE;
    }
    None
}

fn space_control(k: &mut Kernel, cur: usize, space: u32, control: u32) -> Result<u32, KError> {
    if !privileged(k, cur) {
        return Err(KError::NoPrivilege);
    }
    let j = thread::lookup(k, ThreadId(space)).ok_or(KError::InvalidSpace)?;
    let sid = k.threads[j].space;
    if control & !(spacectl::GET_PID | spacectl::SET_UTCB_AREA | spacectl::LINUX) != 0 {
        return Err(KError::InvalidParam);
    }
    if control & spacectl::SET_UTCB_AREA != 0 {
        // UTCB pages are placed per thread by ThreadControl; no separate area exists.
        return Err(KError::InvalidParam);
    }
    if control & spacectl::LINUX != 0 {
        if k.spaces[sid as usize].privileged || k.spaces[sid as usize].vm {
            // The root's calls must stay Kestrel's; a VM's `sc` is its guest's.
            return Err(KError::InvalidSpace);
        }
        k.spaces[sid as usize].linux = true;
    }
    Ok(space::ensure_pid(k, sid) as u32)
}

fn interrupt_control(
    k: &mut Kernel,
    cur: usize,
    line: u32,
    handler: ThreadId,
    flags: u32,
) -> Result<(), KError> {
    if !privileged(k, cur) {
        return Err(KError::NoPrivilege);
    }
    let pic = platform::irq_controller();
    if line >= pic.lines() {
        return Err(KError::InvalidIrq);
    }
    if flags & !(kestrel_abi::irqflags::EDGE | kestrel_abi::irqflags::ACTIVE_LOW) != 0 {
        return Err(KError::InvalidParam);
    }
    if handler.is_nil() {
        pic.disable(line);
        k.set_irq_pending(line as usize, false);
        k.irqs[line as usize] = super::IrqLine {
            handler: usize::MAX,
            pending: false,
            in_service: false,
        };
        return Ok(());
    }
    let h = thread::lookup(k, handler).ok_or(KError::InvalidThread)?;
    let irq = &mut k.irqs[line as usize];
    if irq.handler != usize::MAX && irq.handler != h {
        return Err(KError::InvalidIrq);
    }
    k.set_irq_pending(line as usize, false);
    k.irqs[line as usize] = super::IrqLine {
        handler: h,
        pending: false,
        in_service: false,
    };
    pic.enable(
        line,
        flags & kestrel_abi::irqflags::EDGE != 0,
        flags & kestrel_abi::irqflags::ACTIVE_LOW == 0,
    );
    Ok(())
}

fn kernel_info(k: &Kernel, cur: usize, op: u32) -> Result<[u32; 4], KError> {
    match op {
        kinfo::MEMORY if privileged(k, cur) => {
            Ok([k.mem.free_start, k.mem.ram_end, SIGMA0_WINDOW, 0])
        }
        kinfo::BOOT_MODULE if privileged(k, cur) => Ok([k.mem.module.0, k.mem.module.1, 0, 0]),
        kinfo::MEMORY | kinfo::BOOT_MODULE => Err(KError::NoPrivilege),
        kinfo::BOOTARGS => {
            let u = thread::utcb(k, cur);
            let n = k.mem.bootargs_len;
            for (i, w) in
                u.mr.iter_mut()
                    .enumerate()
                    .take(kestrel_abi::BOOTARGS_LEN / 4)
            {
                let mut b = [0u8; 4];
                for (j, byte) in b.iter_mut().enumerate() {
                    if i * 4 + j < n {
                        *byte = k.mem.bootargs[i * 4 + j];
                    }
                }
                *w = u32::from_be_bytes(b);
            }
            Ok([n as u32, 0, 0, 0])
        }
        kinfo::CLOCK => Ok([k.mem.tb_hz, k.mem.tick_us, 0, 0]),
        kinfo::VERSION => Ok([ABI_VERSION, MAX_THREAD_NO, 0, 0]),
        _ => Err(KError::InvalidParam),
    }
}

/// Copies at most `N` bytes of a user buffer, validating every page.
fn read_user<const N: usize>(
    k: &Kernel,
    cur: usize,
    addr: u32,
    len: u32,
) -> Result<([u8; N], usize), KError> {
    let len = len as usize;
    if len > N || !kestrel_abi::is_user_range(addr, len as u32) {
        return Err(KError::InvalidBuffer);
    }
    let sid = k.threads[cur].space;
    let mut buf = [0u8; N];
    for (i, b) in buf.iter_mut().enumerate().take(len) {
        let va = addr + i as u32;
        let pa =
            space::translate(k, sid, va, kestrel_abi::Rights::R).ok_or(KError::InvalidBuffer)?;
        // SAFETY: `pa` is a RAM byte mapped readable in the caller's space (translate
        // checks the pte and rejects device pages); RAM is mapped 1:1 for the kernel.
        *b = unsafe { (pa as *const u8).read_volatile() };
    }
    Ok((buf, len))
}

fn kdebug(
    k: &mut Kernel,
    cur: usize,
    op: u32,
    a: u32,
    b: u32,
    who: ThreadId,
) -> Result<[u32; 2], KError> {
    match op {
        kdebug::PUTC => {
            crate::platform::uart::Uart::console().putc(a as u8);
            Ok([0; 2])
        }
        kdebug::WRITE => {
            if b > kdebug::WRITE_MAX {
                return Err(KError::InvalidParam);
            }
            let mut done = 0;
            while done < b {
                let n = (b - done).min(128);
                let (buf, len) = read_user::<128>(k, cur, a.wrapping_add(done), n)?;
                crate::platform::uart::Uart::console().write_bytes(&buf[..len]);
                done += n;
            }
            Ok([0; 2])
        }
        kdebug::SET_NAME => {
            // Whom ExchangeRegisters may reach may be named (so kernel lines name a VMM's
            // vCPUs); nil names the caller.
            let j = if who == ThreadId::NIL {
                cur
            } else {
                thread::reachable(k, cur, who)?
            };
            let (buf, len) =
                read_user::<THREAD_NAME_LEN>(k, cur, a, b.min(THREAD_NAME_LEN as u32))?;
            k.threads[j].name = [0; THREAD_NAME_LEN];
            k.threads[j].name[..len].copy_from_slice(&buf[..len]);
            Ok([0; 2])
        }
        kdebug::SHUTDOWN => {
            if !privileged(k, cur) {
                return Err(KError::NoPrivilege);
            }
            crate::platform::shutdown(a)
        }
        kdebug::TIMEBASE => {
            let tb = crate::arch::spr::timebase();
            Ok([(tb >> 32) as u32, tb as u32])
        }
        _ => Err(KError::InvalidParam),
    }
}
