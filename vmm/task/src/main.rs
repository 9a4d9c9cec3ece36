//! The user-level VMM (paper §4), running as Kestrel's root task.
//!
//! It takes the guest image from the boot-module archive (module `guest`), gives the VM
//! one linear segment of guest-physical RAM, creates one vCPU, and then serves the
//! vCPU's faults in an IPC loop:
//! - second-stage page faults: map the segment page backing the guest-physical address;
//! - MMIO (the bamboo UART page): decode the load/store and run the UART models;
//! - instructions the kernel does not emulate: mfdcr/mtdcr on the UIC's DCRs;
//! - a reset request (DBCR0[RST]): print the trace points and stop the machine.
//! The guest's console bytes go straight to the kernel console, so a guest prints the
//! same lines natively and in the VM.
#![no_std]
#![no_main]

mod machine;

use kestrel_abi::{bootmod, label, tcflags, vcpuctl, vfault, ThreadId, Timeout, VcpuState, VirtFault};
use kestrel_user::ipc::{receive, reply_wait, Msg};
use kestrel_user::mem::{boot_modules, map_reply, FrameAllocator, PageFault};
use kestrel_user::{println, rt, sys};
use machine::{Machine, Outcome};

const VCPU: ThreadId = ThreadId::new(70, 1);
const VCPU_PRIORITY: u32 = 90;
/// Guest RAM: one linear segment at guest-physical 0.
const GUEST_RAM: u32 = 32 << 20;
/// Guest RAM for an OS guest; its device tree must say the same.
const LINUX_RAM: u32 = 64 << 20;
/// Where QEMU's bamboo places the device tree and the initrd, and its initial stack.
const DTB_GPA: u32 = 0x0180_0000;
const INITRD_GPA: u32 = 0x0190_0000;
const INITIAL_SP: u32 = 0x00ff_fff8;

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("vmm");
    let Some(guest) = boot_modules().and_then(|a| bootmod::find(a, "guest")) else {
        println!("vmm: no module named \"guest\" in the boot-module archive");
        return;
    };
    let Some(mut frames) = FrameAllocator::from_kernel() else {
        println!("vmm: cannot query physical memory");
        return;
    };
    // With a device tree module the guest is an OS kernel booted the ePAPR way (Linux):
    // image at its physical addresses, initrd and device tree where QEMU's bamboo puts
    // them, r3 = device tree. Otherwise a bare-metal program.
    let archive = boot_modules().unwrap_or(&[]);
    let dtb = bootmod::find(archive, "dtb");
    let initrd = bootmod::find(archive, "initrd");
    let ram = if dtb.is_some() { LINUX_RAM } else { GUEST_RAM };
    let mut m = match Machine::new(&mut frames, ram) {
        Ok(m) => m,
        Err(e) => {
            println!("vmm: cannot set up guest memory: {e}");
            return;
        }
    };
    let loaded = match dtb {
        None => m.load_elf(guest.data).map(|e| (e, 0, 0)),
        Some(dtb) => m.load_elf_physical(guest.data).and_then(|e| {
            m.load_blob(DTB_GPA, dtb.data)?;
            if let Some(rd) = initrd {
                m.load_blob(INITRD_GPA, rd.data)?;
            }
            println!(
                "vmm: OS guest: entry {:#x}, device tree at {:#x}, initrd {} KiB at {:#x}, {} MiB RAM",
                e, DTB_GPA, initrd.map_or(0, |r| r.data.len() >> 10), INITRD_GPA, ram >> 20
            );
            Ok((e, DTB_GPA, INITIAL_SP))
        }),
    };
    let (entry, r3, r1) = match loaded {
        Ok(x) => x,
        Err(e) => {
            println!("vmm: cannot load the guest image: {e}");
            return;
        }
    };
    if let Err(e) = start_vcpu(entry, r3, r1, dtb.is_some()) {
        println!("vmm: cannot start the vCPU: {:?} ({})", e, e.as_str());
        return;
    }
    serve(&mut m);
}

/// Creates the vCPU in a fresh VM space with this thread as its pager and VMM, and
/// starts it in the ePAPR-like entry state: pc at the image entry, MSR 0, one TLB
/// entry mapping the first 256 MiB 1:1 for the guest supervisor.
fn start_vcpu(entry: u32, r3: u32, r1: u32, os: bool) -> Result<(), kestrel_abi::KError> {
    let me = sys::my_id();
    sys::thread_control_flags(VCPU, VCPU, VCPU_PRIORITY, me, 0, tcflags::VCPU)?;
    let _ = sys::set_name("vmm");
    let u = sys::utcb();
    u.vcpu = VcpuState { pc: entry, ..VcpuState::default() };
    u.vcpu.gpr[3] = r3;
    u.vcpu.gpr[1] = r1;
    sys::vcpu_control(VCPU, vcpuctl::SET_STATE, 0, 0, 0)?;
    // Guest TLB entry 0: EPN 0, valid, TS 0, 256 MiB; RPN 0; SX|SW|SR; TID 0.
    u.mr[1] = 0x200 | (9 << 4);
    u.mr[2] = 0;
    u.mr[3] = 0x7;
    u.mr[4] = 0;
    sys::vcpu_control(VCPU, vcpuctl::SET_TLB, 0, 0, 0)?;
    sys::vcpu_control(VCPU, vcpuctl::SET_MMIO, 0, machine::UART_PAGE, 0x1000)?;
    if os {
        // An OS probes more of the board (the PCI host bridge): all device space traps.
        sys::vcpu_control(VCPU, vcpuctl::SET_MMIO, 1, 0xE000_0000, 0x1000_0000)?;
    }
    // Device exits carry no register file: the RS value rides in MR6 and results come
    // back with REPLY_SET_GPR (see `Machine::handle`).
    sys::vcpu_control(VCPU, vcpuctl::SET_TRANSFER_MASK, VirtFault::Instruction as u32, 0, 0)?;
    sys::vcpu_control(VCPU, vcpuctl::SET_TRANSFER_MASK, VirtFault::Mmio as u32, 0, 0)?;
    sys::exchange_registers(VCPU, kestrel_abi::exreg::START, 0, 0, ThreadId::NIL, ThreadId::NIL)?;
    Ok(())
}

/// The fault-IPC loop.
fn serve(m: &mut Machine) {
    let mut pending: Option<Msg> = None;
    loop {
        let r = match pending.take() {
            Some(reply) => reply_wait(VCPU, &reply),
            None => receive(ThreadId::ANY, Timeout::NEVER),
        };
        let (from, msg) = match r {
            Ok(x) => x,
            Err(e) => {
                println!("vmm: IPC failed: {:?}", e);
                return;
            }
        };
        if from != VCPU {
            continue;
        }
        if let Some(pf) = PageFault::parse(&msg) {
            pending = Some(match m.backing_block(pf.addr) {
                Some((host, log2)) => match kestrel_abi::Fpage::new(host, log2, kestrel_abi::Rights::RWX) {
                    Some(fp) => {
                        let mut r = Msg::new(0);
                        r.push_item(kestrel_abi::MapItem::map(pf.addr, fp));
                        r
                    }
                    None => map_reply(pf.addr, host, kestrel_abi::Rights::RWX),
                },
                None => {
                    println!("vmm: guest touched unbacked guest-physical {:#010x} (pc {:#010x}); stopping it", pf.addr, pf.ip);
                    Msg::new(label::KILL)
                }
            });
            continue;
        }
        if !label::is_virt_fault(msg.label()) {
            println!("vmm: unexpected message label {:#06x} from the vCPU", msg.label());
            continue;
        }
        let class = VirtFault::from_raw((msg.label() & 0xf) as u32);
        match m.handle(VCPU, class, &msg) {
            Outcome::Reply(reply) => pending = Some(reply),
            Outcome::GuestReset => {
                machine::print_trace(VCPU);
                println!("vmm: guest requested a reset; stopping");
                rt::exit(0);
            }
        }
        let _ = vfault::PC;
    }
}
