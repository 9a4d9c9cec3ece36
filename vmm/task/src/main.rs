//! The user-level VMM (paper §4), a program the root task (`kestrel-root`) starts.
//!
//! It runs `vmm.vms=N` virtual machines (kernel command line; default 1, at most
//! [`MAX_VMS`]). Each VM gets its own linear segment of guest-physical RAM, its own
//! address space and vCPU thread, and its own device models; one fault-IPC loop serves
//! them all. What only the root task may do, the VMM asks it for (`kestrel_user::root`):
//! guest RAM (16 MiB-aligned blocks), thread numbers and the vCPUs themselves, UART0's
//! page and interrupt line, and a read-only view of the boot-module archive (guest
//! images). The fault loop:
//! - second-stage page faults: map the segment block backing the guest-physical address;
//! - MMIO (the bamboo UART page, and for an OS guest all of device space): decode the
//!   load/store and run the device models;
//! - instructions the kernel does not emulate: mfdcr/mtdcr on the UIC's DCRs;
//! - idle (the guest set MSR[WE] with nothing pending): the vCPU stays blocked until its
//!   next timer may fire or console input arrives, so an idle VM costs no CPU;
//! - a reset request (DBCR0[RST]): print that VM's trace points and stop it; the VMM
//!   exits when every VM has stopped (and the root task stops the machine once every
//!   program it started has ended).
//!
//! What the log says about a guest that it could repeat in a loop (unhandled instructions,
//! unmodelled device and DCR accesses) goes through one rate limit per VM and kind
//! (`kestrel_vmm_core::diag`): the first lines in full, then counted summaries, the last when
//! the VM stops. vCPU threads are named `vm<N>.vcpu0` for the kernel's lines.
//!
//! A VM that dies (the kernel kills a vCPU that misbehaves, or it powers off) leaves the
//! others running. Console: each VM's UART0 output goes to the real console, prefixed
//! `[vmN] ` when more than one VM runs; console input goes to one VM at a time (see
//! [`console`]).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::rc::Rc;
use core::cell::RefCell;

mod console;
mod fabric;
mod machine;
mod trace_mark;

use console::Console;
use fabric::VmFabric;
use kestrel_abi::{
    bootmod, kinfo, label, vcpuctl, ThreadId, Timeout, Timeouts, VcpuState, VirtFault,
};
use kestrel_ppc440::tlb::{word0, word2, PageSize};
use kestrel_user::ipc::{ipc, receive, Msg};
use kestrel_user::mem::{map_reply, PageFault};
use kestrel_user::{println, root, rt, sys};
use kestrel_vmm_core::fabric::{Node, VmEndpoint};
use machine::{Machine, Outcome};

/// Most VMs one VMM runs (guest RAM and kernel thread slots bound it in practice).
const MAX_VMS: usize = 4;
/// The vCPUs' priority: the one the root task's ceilings are built around.
const VCPU_PRIORITY: u32 = kestrel_abi::root::VCPU_PRIORITY;
/// Where the VMM sees the boot-module archive (16 MiB aligned, read-only, from the root).
const ARCHIVE_VA: u32 = 0x6000_0000;
/// Where VM i's guest RAM lives in the VMM's space: `GUEST_RAM_VA + i * GUEST_RAM_STRIDE`.
const GUEST_RAM_VA: u32 = 0x2000_0000;
/// 256 MiB: room for the largest `vmm.mem=` (4 VMs end at [`ARCHIVE_VA`]).
const GUEST_RAM_STRIDE: u32 = 256 << 20;
/// Alignment of guest RAM (physical and virtual): the 440's largest page, 16 MiB.
const GUEST_RAM_ALIGN_LOG2: u32 = 24;
/// Guest RAM for a bare-metal guest: one linear segment at guest-physical 0.
const GUEST_RAM: u32 = 32 << 20;
/// Guest RAM for an OS guest unless `vmm.mem=MB` says otherwise; its device tree says the same.
const LINUX_RAM: u32 = 64 << 20;
/// Bounds of `vmm.mem=MB`: the initrd is loaded at 25 MiB, and the kernel uses at most 256 MiB.
const MIN_OS_RAM_MB: u32 = 32;
const MAX_OS_RAM_MB: u32 = 240;
/// Where QEMU's bamboo places the device tree and the initrd, and its initial stack.
const DTB_GPA: u32 = 0x0180_0000;
const INITRD_GPA: u32 = 0x0190_0000;
const INITIAL_SP: u32 = 0x00ff_fff8;
/// Longest an idle vCPU stays blocked before it looks at its timers again.
const IDLE_SLICE_US: u32 = 1000;

/// What the VMM knows about one VM's vCPU.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Running, or blocked in a fault the VMM is about to answer.
    Running,
    /// Idle until time base `until` (or console input): the reply is held back.
    Idle {
        until: u64,
    },
    /// Stalled by the collective network's back-pressure (its store completed a packet
    /// that a VM with a full reception FIFO receives, `stall`): the reply is held back
    /// until no receiver of that packet is full, or time base `until` at the latest (a VM
    /// that never reads must not stop its senders for longer; the fabric then drops, as
    /// ISSUE10's contract says). VMs that do not send to the full one are never held.
    Stalled {
        until: u64,
        stall: kestrel_vmm_core::fabric::Stall,
    },
    Stopped,
}

/// Longest a VM stays stalled by the collective's back-pressure.
const STALL_US: u32 = 100_000;

struct Vm<F: VmFabric> {
    vcpu: ThreadId,
    machine: Machine<F>,
    run: Run,
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("vmm");
    // Every VMM line starts with "vmm: " (tests parse them); guest lines carry `[vmN] `.
    kestrel_user::console::set_unprefixed();
    let archive = match root::archive(ARCHIVE_VA) {
        Ok(a) => a,
        Err(e) => {
            println!("vmm: no boot-module archive: {e}");
            return;
        }
    };
    let nvms = vm_count();
    match boot_option("vmm.pv=").as_deref() {
        None | Some("on") => {}
        Some("off") => println!("vmm: vmm.pv=off: no paravirtual interface (full virtualization)"),
        Some(v) => {
            println!("vmm: vmm.pv={v} is neither on nor off; the paravirtual interface stays on")
        }
    }
    let vcpus: heapless::Vec<ThreadId, MAX_VMS> = match root::threads(nvms as u32) {
        Ok(ids) => ids.collect(),
        Err(e) => {
            println!("vmm: no thread numbers for the vCPUs: {e}");
            return;
        }
    };
    // The node's interconnect: every VM is one endpoint of it. By default the node's one
    // fabric, the service kestrel-fabric, shared with the native programs (ADR 0032);
    // `vmm.fabric=local` gives the VMs a private in-process engine instead, and so does a
    // node without the service (with a line saying so).
    let local = || Rc::new(RefCell::new(fabric::Local::new(Default::default())));
    let choice = boot_option("vmm.fabric=");
    match choice.as_deref() {
        Some("local") => {
            println!("vmm: vmm.fabric=local: the VMs' fabric is a private in-process engine that no native program shares");
            return run(archive, &vcpus, &local());
        }
        None | Some("service") => {}
        Some(v) => println!("vmm: vmm.fabric={v} is neither service nor local; using the default"),
    }
    let private = "the VMs' fabric is a private in-process engine that no native program shares";
    // The service maps each VM's RAM into a window of its own, at most WINDOW_MAX bytes.
    let largest = (0..MAX_VMS)
        .map(|i| vm_ram(archive, i).unwrap_or(GUEST_RAM))
        .max()
        .unwrap_or(GUEST_RAM);
    if largest > kestrel_fabric::proto::layout::WINDOW_MAX {
        println!(
            "vmm: a VM of {} MiB does not fit the fabric service's window ({} MiB); {private}",
            largest >> 20,
            kestrel_fabric::proto::layout::WINDOW_MAX >> 20
        );
        return run(archive, &vcpus, &local());
    }
    match kestrel_fabric_client::service::Service::connect() {
        Ok(f) => {
            println!(
                "vmm: the VMs' fabric is the node's service kestrel-fabric ({:?}), shared with its native programs",
                f.thread()
            );
            run(archive, &vcpus, &Rc::new(RefCell::new(f)))
        }
        Err(e) => {
            let but = if choice.as_deref() == Some("service") {
                "vmm.fabric=service, but "
            } else {
                ""
            };
            println!("vmm: {but}{e}; {private}");
            run(archive, &vcpus, &local())
        }
    }
}

/// Creates a VM per vCPU in `vcpus`, each an endpoint of `node`, and serves them.
fn run<F: VmFabric>(archive: &[u8], vcpus: &[ThreadId], node: &Node<F>) {
    let nvms = vcpus.len();
    let mut vms: heapless::Vec<Vm<F>, MAX_VMS> = heapless::Vec::new();
    for (i, &vcpu) in vcpus.iter().enumerate() {
        match create_vm(i, nvms, archive, vcpu, node) {
            Ok(vm) => {
                let _ = vms.push(vm);
            }
            Err(e) => {
                println!("vmm: vm{i}: {e}");
                if i == 0 {
                    return;
                }
                println!("vmm: running {} VM(s) instead of {}", vms.len(), nvms);
                break;
            }
        }
    }
    let mut console = Console::new(vms.len());
    serve(&mut vms, &mut console, node);
}

/// The value of option `name` (e.g. `vmm.vms=`) on the kernel command line.
fn boot_option(name: &str) -> Option<heapless::String<16>> {
    let mut buf = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut buf);
    let args = core::str::from_utf8(&buf[..n]).unwrap_or("");
    let v = args
        .split_ascii_whitespace()
        .find_map(|a| a.strip_prefix(name))?;
    heapless::String::try_from(v)
        .ok()
        .or_else(|| heapless::String::try_from("(too long)").ok())
}

/// An OS guest's RAM: `vmm.mem=MB` from the kernel command line (scripts/kestrel_qemu.py
/// checks what fits before it boots), else [`LINUX_RAM`].
fn os_guest_ram() -> Result<u32, &'static str> {
    let Some(v) = boot_option("vmm.mem=") else {
        return Ok(LINUX_RAM);
    };
    match v.parse::<u32>() {
        Ok(mb) if (MIN_OS_RAM_MB..=MAX_OS_RAM_MB).contains(&mb) => Ok(mb << 20),
        _ => {
            println!(
                "vmm: vmm.mem={v} is not a size in MiB from {MIN_OS_RAM_MB} to {MAX_OS_RAM_MB}"
            );
            Err("bad vmm.mem= option")
        }
    }
}

/// `vmm.vms=N` from the kernel command line, clamped to 1..=MAX_VMS.
fn vm_count() -> usize {
    let Some(v) = boot_option("vmm.vms=") else {
        return 1;
    };
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_VMS).contains(&n) => n,
        _ => {
            println!("vmm: vmm.vms={v} is not a number from 1 to {MAX_VMS}; running 1 VM");
            1
        }
    }
}

/// Whether VMs get Linux's paravirtual interface (`kestrel_abi::pv`: the `/hypervisor` node
/// and the kernel's hypercalls and magic page): yes unless the kernel command line says
/// `vmm.pv=off`.
fn paravirt() -> bool {
    boot_option("vmm.pv=").as_deref() != Some("off")
}

/// VM `i`'s guest RAM: an OS guest's (an `initrd`, `bootargs` or `dtb` module, see
/// [`create_vm`]) from `vmm.mem=`, a bare-metal guest's [`GUEST_RAM`] (a VM with its own
/// `bare<i>` module is bare-metal whatever the others run).
fn vm_ram(archive: &[u8], i: usize) -> Result<u32, &'static str> {
    let mut own = heapless::String::<16>::new();
    let _ = core::fmt::write(&mut own, format_args!("bare{i}"));
    let os = bootmod::find(archive, &own).is_none()
        && ["dtb", "initrd", "bootargs"]
            .iter()
            .any(|m| bootmod::find(archive, m).is_some());
    if os {
        os_guest_ram()
    } else {
        Ok(GUEST_RAM)
    }
}

/// The guest command line when the archive has no `bootargs` module.
const DEFAULT_BOOTARGS: &str = "console=ttyS0 panic=1";

/// Builds VM `i`: RAM, guest image, vCPU. The guest image is module `bare<i>` if the
/// archive has one: a bare-metal program for this VM alone, whatever the other VMs run (the
/// device attacker of issue 18 beside Linux VMs). Else it is module `guest<i>` if the
/// archive has one, else `guest`, and with an `initrd`, `bootargs` or `dtb` module the guest
/// is an OS kernel booted the ePAPR way (Linux): image at its physical addresses, initrd
/// and device tree where QEMU's bamboo puts them, r3 = device tree. The device tree is
/// generated ([`kestrel_devtree`]: exactly the devices this VMM models) with the command
/// line from module `bootargs`; a `dtb` module replaces it. Otherwise the guest is a
/// bare-metal program.
fn create_vm<F: VmFabric>(
    i: usize,
    nvms: usize,
    archive: &[u8],
    vcpu: ThreadId,
    node: &Node<F>,
) -> Result<Vm<F>, &'static str> {
    let mut own = heapless::String::<16>::new();
    let _ = core::fmt::write(&mut own, format_args!("bare{i}"));
    let bare = bootmod::find(archive, &own);
    own.clear();
    let _ = core::fmt::write(&mut own, format_args!("guest{i}"));
    let guest = bare
        .or_else(|| bootmod::find(archive, &own))
        .or_else(|| bootmod::find(archive, "guest"))
        .ok_or("no module named \"guest\" in the boot-module archive")?;
    let dtb = bootmod::find(archive, "dtb");
    let initrd = bootmod::find(archive, "initrd");
    let bootargs = bootmod::find(archive, "bootargs");
    let os = bare.is_none() && (dtb.is_some() || initrd.is_some() || bootargs.is_some());
    if bare.is_some() {
        println!("vmm: vm{i}: bare-metal guest from module bare{i}");
    }
    let ram = vm_ram(archive, i)?;
    let ram_va = GUEST_RAM_VA + i as u32 * GUEST_RAM_STRIDE;
    if let Err(e) = root::ram(ram_va, ram, GUEST_RAM_ALIGN_LOG2) {
        println!("vmm: vm{i}: {} MiB of guest RAM: {e}", ram >> 20);
        return Err("no guest RAM");
    }
    let mut m = Machine::new(ram_va, ram, i, nvms > 1, os, node)?;
    let (entry, r3, r1) = if !os {
        // A bare-metal guest learns its VM index in r3 (the isolation test uses it).
        (m.load_elf(guest.data)?, i as u32, 0)
    } else {
        let e = m.load_elf_physical(guest.data)?;
        let rd = initrd.map(|r| r.data).unwrap_or(&[]);
        m.load_blob(INITRD_GPA, rd)?;
        let generated;
        let (tree, kind) = match dtb {
            Some(d) => (d.data, "from the archive"),
            None => {
                let args = match bootargs {
                    Some(b) => core::str::from_utf8(b.data)
                        .map_err(|_| "module bootargs is not UTF-8")?
                        .trim(),
                    None => DEFAULT_BOOTARGS,
                };
                let mut board = kestrel_devtree::BambooVm::new(ram, args);
                board.board = machine::BOARD;
                let e = m.endpoint();
                let c = e.coords();
                board.fabric = Some(kestrel_devtree::FabricPlace {
                    node_address: e.node_address(),
                    coords: [c.x, c.y, c.z],
                });
                board.paravirt = paravirt();
                board.timebase_hz = (ticks_per_us() * 1_000_000) as u32;
                board.cpu_hz = board.timebase_hz;
                if !rd.is_empty() {
                    board.initrd = Some((INITRD_GPA, INITRD_GPA + rd.len() as u32));
                }
                generated = kestrel_devtree::bamboo_dtb(&board).map_err(|e| {
                    println!("vmm: vm{i}: device tree: {e}");
                    "cannot generate the device tree"
                })?;
                (&generated[..], "generated")
            }
        };
        if DTB_GPA + tree.len() as u32 > INITRD_GPA {
            return Err("device tree larger than the room before the initrd");
        }
        m.load_blob(DTB_GPA, tree)?;
        println!(
            "vmm: vm{i}: OS guest: entry {:#x}, device tree ({kind}, {} bytes) at {:#x}, initrd {} KiB at {:#x}, {} MiB RAM",
            e,
            tree.len(),
            DTB_GPA,
            rd.len() >> 10,
            INITRD_GPA,
            ram >> 20
        );
        (e, DTB_GPA, INITIAL_SP)
    };
    start_vcpu(i, vcpu, entry, r3, r1)?;
    Ok(Vm {
        vcpu,
        machine: m,
        run: Run::Running,
    })
}

/// Has the root task create the vCPU of VM `vm` in a fresh VM space with this thread as
/// its pager and VMM, names it `vm<N>.vcpu0` (kernel lines about it say so), and starts it
/// in the ePAPR-like entry state: pc at the image entry, MSR 0, one TLB entry mapping the
/// first 256 MiB 1:1 for the guest supervisor.
fn start_vcpu(vm: usize, vcpu: ThreadId, entry: u32, r3: u32, r1: u32) -> Result<(), &'static str> {
    if let Err(e) = root::vcpu(vcpu, VCPU_PRIORITY) {
        println!("vmm: vCPU {vcpu:?}: {e}");
        return Err("the root task did not create the vCPU");
    }
    let mut name = heapless::String::<{ kestrel_abi::THREAD_NAME_LEN }>::new();
    let _ = core::fmt::write(&mut name, format_args!("vm{vm}.vcpu0"));
    if let Err(e) = sys::set_thread_name(vcpu, &name) {
        println!("vmm: vm{vm}: cannot name its vCPU: {}", e.as_str());
    }
    set_up_vcpu(vcpu, entry, r3, r1).map_err(|e| e.as_str())
}

fn set_up_vcpu(vcpu: ThreadId, entry: u32, r3: u32, r1: u32) -> Result<(), kestrel_abi::KError> {
    let u = sys::utcb();
    u.vcpu = VcpuState {
        pc: entry,
        ..VcpuState::default()
    };
    u.vcpu.gpr[3] = r3;
    u.vcpu.gpr[1] = r1;
    sys::vcpu_control(vcpu, vcpuctl::SET_STATE, 0, 0, 0)?;
    sys::vcpu_control(vcpu, vcpuctl::SET_PV, paravirt() as u32, 0, 0)?;
    // Guest TLB entry 0: EPN 0, valid, TS 0, 256 MiB; RPN 0; SX|SW|SR; TID 0.
    u.mr[1] = word0::V.mask() | PageSize::M256.word0();
    u.mr[2] = 0;
    u.mr[3] = word2::SX.mask() | word2::SW.mask() | word2::SR.mask();
    u.mr[4] = 0;
    sys::vcpu_control(vcpu, vcpuctl::SET_TLB, 0, 0, 0)?;
    machine::declare_mmio(vcpu)?;
    // Device exits carry no register file: the RS value rides in MR6 and results come
    // back with `FaultReply::set_gpr` (see `Machine::handle`).
    sys::vcpu_control(
        vcpu,
        vcpuctl::SET_TRANSFER_MASK,
        VirtFault::Instruction as u32,
        0,
        0,
    )?;
    sys::vcpu_control(
        vcpu,
        vcpuctl::SET_TRANSFER_MASK,
        VirtFault::Mmio as u32,
        0,
        0,
    )?;
    sys::exchange_registers(
        vcpu,
        kestrel_abi::exreg::START,
        0,
        0,
        ThreadId::NIL,
        ThreadId::NIL,
    )?;
    Ok(())
}

/// Time-base ticks per microsecond (the guest reads the same time base).
fn ticks_per_us() -> u64 {
    match sys::kernel_info(kinfo::CLOCK) {
        Ok([hz, ..]) if hz >= 1_000_000 => hz as u64 / 1_000_000,
        _ => 400,
    }
}

/// The fault-IPC loop for all VMs.
fn serve<F: VmFabric>(vms: &mut [Vm<F>], console: &mut Console, node: &Node<F>) {
    let tpu = ticks_per_us();
    let idle_ticks = IDLE_SLICE_US as u64 * tpu;
    let mut pending: Option<(ThreadId, Msg)> = None;
    let marks = trace_mark::enabled();
    // When the in-process engine's timer runs next (every IDLE_SLICE_US while work waits).
    let mut next_poll: Option<u64> = None;
    loop {
        let any_idle = vms
            .iter()
            .any(|v| matches!(v.run, Run::Idle { .. } | Run::Stalled { .. }));
        // The in-process engine's timer: DMA work its per-call budget left is continued
        // here, every millisecond while there is any, never inside a VM's exit.
        let fabric_work = node.borrow().pending_work();
        let wait = if any_idle || fabric_work {
            Timeout::from_us(IDLE_SLICE_US)
        } else {
            Timeout::NEVER
        };
        let r = match pending.take() {
            Some((mut to, mut reply)) => loop {
                let (from, msg, r) = ipc(
                    to,
                    ThreadId::ANY,
                    Timeouts::new(Timeout::ZERO, wait),
                    &reply,
                );
                // The lean path: the hottest device exits (UIC0's DCRs) of a running VM,
                // answered with the next reply-and-wait while no VM is idle (nothing
                // else then needs the loop's bookkeeping).
                if r.is_ok() && !any_idle && !fabric_work {
                    if let Some(next) = lean_exit(vms, from, &msg) {
                        (to, reply) = (from, next);
                        continue;
                    }
                }
                break match r {
                    Err(e) if e.phase == kestrel_abi::IpcPhase::Send => {
                        // The vCPU went away (killed by the kernel, or deleted).
                        println!("vmm: reply to {:?} failed: {:?}", to, e);
                        vm_gone(vms, to, "did not take the VMM's reply");
                        continue;
                    }
                    r => r.map(|()| (from, msg)),
                };
            },
            None => receive(ThreadId::ANY, wait),
        };
        if !node.borrow().pending_work() {
            next_poll = None;
        } else {
            let now = sys::timebase();
            match next_poll {
                // Work was left: the timer fires IDLE_SLICE_US from now.
                None => next_poll = Some(now + idle_ticks),
                Some(at) if now < at => {}
                Some(_) => {
                    next_poll = Some(now + idle_ticks);
                    node.borrow_mut().run_pending();
                    let changed = node.borrow_mut().take_changed().unwrap_or(0);
                    if changed != 0 {
                        fabric_changed(vms, changed);
                    }
                    release_stalled(vms);
                }
            }
        }
        if any_idle {
            // (Nothing else makes a VM idle or stalled while this thread waits.)
            wake_idle(vms, console, false);
        }
        let (from, msg) = match r {
            Ok(x) => x,
            Err(e) if e.error == kestrel_abi::IpcError::Timeout => continue,
            Err(e) => {
                println!("vmm: IPC failed: {:?}", e);
                continue;
            }
        };
        // The lean path (also when a VM idles).
        if let Some(reply) = lean_exit(vms, from, &msg) {
            pending = Some((from, reply));
            continue;
        }
        if from.irq_line() == Some(console::UART_IRQ) {
            if console.input(vms.iter_mut().map(|v| &mut v.machine)) {
                let f = console.focus();
                if vms[f].run == Run::Running {
                    let vcpu = vms[f].vcpu;
                    vms[f].machine.sync_irq(vcpu);
                }
                wake_idle(vms, console, true);
            }
            // Acknowledge (unmask the line) with the next receive.
            pending = Some((from, Msg::new(0)));
            continue;
        }
        if msg.label() == kestrel_fabric::proto::EVENT && node.borrow().events_from() == Some(from)
        {
            // The fabric service: another client changed our VMs' lines or queues.
            node.borrow().note_event();
            let changed = node.borrow_mut().take_changed().unwrap_or(0);
            if changed != 0 {
                fabric_changed(vms, changed);
            }
            continue;
        }
        let Some(vi) = vms.iter().position(|v| v.vcpu == from) else {
            continue;
        };
        let vm = &mut vms[vi];
        if let Some(pf) = PageFault::parse(&msg) {
            let reply = page_fault_reply(vi, vm.vcpu, &vm.machine, &pf);
            if reply.label() == label::KILL {
                // The kernel stops the vCPU when it delivers this reply.
                vm.run = Run::Stopped;
                vm.machine.finish_log();
            }
            pending = Some((from, reply));
            if vms.iter().all(|v| v.run == Run::Stopped) {
                let (to, reply) = pending.take().expect("set above");
                let _ = kestrel_user::ipc::reply(to, &reply);
                shut_down(vms, node);
            }
            continue;
        }
        if !label::is_virt_fault(msg.label()) {
            println!(
                "vmm: vm{vi}: unexpected message label {:#06x} from the vCPU",
                msg.label()
            );
            continue;
        }
        let Some(fault) = kestrel_abi::VirtFaultMsg::decode(msg.tag, &msg.regs) else {
            stop_vm(vms, vi, "sent a virtualization fault of an unknown class");
            continue;
        };
        let outcome = vm.machine.handle(vm.vcpu, &fault);
        if let Some(mark) = vm.machine.take_trace_mark().filter(|_| marks) {
            trace_mark::print(vm.vcpu, (vms.len() > 1).then_some(vi), &mark);
        }
        if vms[vi].machine.touched_bgp {
            // Interrupt lines of other VMs the fault changed (a packet delivered to them).
            let changed = vms[vi].machine.endpoint().take_changed() & !vms[vi].machine.fabric_bit();
            if changed != 0 {
                fabric_changed(vms, changed);
            }
            // The hardware's back-pressure: a sender does not overrun a receiver's FIFO.
            release_stalled(vms);
        }
        let stall = if vms[vi].machine.touched_bgp {
            stall_after(vms, vi, &fault)
        } else {
            None
        };
        if let (Some(stall), Outcome::Reply(_)) = (stall, &outcome) {
            let Outcome::Reply(reply) = outcome else {
                unreachable!("matched above")
            };
            vms[vi].machine.held = Some(reply);
            vms[vi].run = Run::Stalled {
                until: sys::timebase() + STALL_US as u64 * tpu,
                stall,
            };
            continue;
        }
        let vm = &mut vms[vi];
        match outcome {
            Outcome::Reply(reply) => pending = Some((from, vm.machine.reply_msg(&reply))),
            Outcome::Idle(reply) => {
                vm.machine.flush_console();
                vm.run = Run::Idle {
                    until: sys::timebase() + idle_ticks,
                };
                vm.machine.held = Some(reply);
            }
            Outcome::GuestReset => {
                stop_vm(vms, vi, "guest requested a reset");
            }
            Outcome::Halted => {
                stop_vm(
                    vms,
                    vi,
                    "the kernel halted its vCPU (see the kernel's line)",
                );
            }
        }
        if vms.iter().all(|v| v.run == Run::Stopped) {
            shut_down(vms, node);
        }
    }
}

/// Every VM has stopped: detaches their endpoints (on the service, the last client's detach
/// ends it, so the run still stops by itself) and exits.
fn shut_down<F: VmFabric>(vms: &[Vm<F>], node: &Node<F>) -> ! {
    println!("vmm: every VM has stopped; shutting down");
    for v in vms {
        node.borrow_mut().detach(v.machine.endpoint().ep());
    }
    rt::exit(0)
}

/// The reply to a device exit the VMM answers without its loop's bookkeeping (UIC0's
/// DCRs, `Machine::uic_dcr`), if message `msg` from `from` is one.
#[inline(always)]
fn lean_exit<F: VmFabric>(vms: &mut [Vm<F>], from: ThreadId, msg: &Msg) -> Option<Msg> {
    if !label::is_virt_fault(msg.label()) {
        return None;
    }
    let vm = vms.iter_mut().find(|v| v.vcpu == from)?;
    let fault = kestrel_abi::VirtFaultMsg::decode(msg.tag, &msg.regs)?;
    vm.machine.uic_dcr(&fault)
}

/// Brings the VMs whose fabric endpoints changed (bit k = endpoint k) up to date: their
/// BIC lines and UIC0 input, and the kernel's view of their interrupt input. An idle VM
/// whose interrupt output went up is answered at once (its held reply carries the lines).
fn fabric_changed<F: VmFabric>(vms: &mut [Vm<F>], changed: u32) {
    for i in 0..vms.len() {
        if changed & vms[i].machine.fabric_bit() == 0 {
            continue;
        }
        vms[i].machine.bgp_update();
        match vms[i].run {
            Run::Running => {
                let vcpu = vms[i].vcpu;
                vms[i].machine.sync_irq(vcpu);
            }
            Run::Idle { .. } if vms[i].machine.irq_pending() => wake(vms, i),
            _ => {}
        }
    }
}

/// The VMs as the collective's back-pressure sees them: `(can_drain, endpoint)`, where a
/// VM can drain its FIFOs when it is running or idle (not stopped, and not stalled
/// itself: two VMs must not wait for each other).
fn drainers<F: VmFabric>(vms: &[Vm<F>]) -> impl Iterator<Item = (bool, &VmEndpoint<F>)> {
    vms.iter().map(|v| {
        let drains = matches!(v.run, Run::Running | Run::Idle { .. });
        (drains, v.machine.endpoint())
    })
}

/// Whether VM `vi` must be held after its fault `f` (`kestrel_vmm_core::fabric::stall_after`).
fn stall_after<F: VmFabric>(
    vms: &[Vm<F>],
    vi: usize,
    f: &kestrel_abi::VirtFaultMsg,
) -> Option<kestrel_vmm_core::fabric::Stall> {
    if !vms[vi].machine.has_collective() {
        return None;
    }
    let sender = vms[vi].machine.endpoint();
    kestrel_vmm_core::fabric::stall_after(&machine::BOARD, f, sender, drainers(vms))
}

/// Answers the VMs stalled by back-pressure whose receivers have room again.
fn release_stalled<F: VmFabric>(vms: &mut [Vm<F>]) {
    for i in 0..vms.len() {
        let Run::Stalled { stall, .. } = vms[i].run else {
            continue;
        };
        let sender = vms[i].machine.endpoint();
        if !kestrel_vmm_core::fabric::still_stalled(stall, sender, drainers(vms)) {
            wake(vms, i);
        }
    }
}

/// Answers idle VM `i` now (its held reply, with the current interrupt lines).
fn wake<F: VmFabric>(vms: &mut [Vm<F>], i: usize) {
    vms[i].run = Run::Running;
    let Some(reply) = vms[i].machine.held.take() else {
        return;
    };
    let reply = vms[i].machine.with_lines(reply);
    let msg = vms[i].machine.reply_msg(&reply);
    if kestrel_user::ipc::reply(vms[i].vcpu, &msg).is_err() {
        let id = vms[i].vcpu;
        vm_gone(vms, id, "did not take the VMM's reply");
    }
}

/// Answers the idle VMs whose slice ran out (or all idle VMs with input, if `input`).
fn wake_idle<F: VmFabric>(vms: &mut [Vm<F>], console: &Console, input: bool) {
    let now = sys::timebase();
    for i in 0..vms.len() {
        let until = match vms[i].run {
            Run::Idle { until } => until,
            Run::Stalled { until, .. } => {
                if now >= until {
                    wake(vms, i);
                }
                continue;
            }
            _ => continue,
        };
        let has_input = input && console.focus() == i;
        if now < until && !has_input {
            continue;
        }
        wake(vms, i);
    }
}

fn page_fault_reply<F: VmFabric>(vi: usize, vcpu: ThreadId, m: &Machine<F>, pf: &PageFault) -> Msg {
    if m.is_device_space(pf.addr) && !pf.access.contains(kestrel_abi::Rights::X) {
        // Unmodelled device space, declared lazily page by page: the guest retries the
        // access, which becomes an MMIO fault (answered with a data storage exception).
        let page = pf.addr & !(kestrel_abi::PAGE_SIZE - 1);
        if sys::vcpu_control(vcpu, vcpuctl::DECLARE_MMIO, 1, page, kestrel_abi::PAGE_SIZE).is_ok() {
            return Msg::new(0);
        }
    }
    if pf.access.contains(kestrel_abi::Rights::X) {
        let mut devices = machine::BOARD.devices_on_page(pf.addr as u64).peekable();
        if devices.peek().is_some() || m.is_device_space(pf.addr) {
            // Device memory holds no instructions the VMM could give the guest.
            let mut names = heapless::String::<64>::new();
            for (i, d) in devices.enumerate() {
                let _ = names.push_str(if i == 0 { " (page of " } else { ", " });
                let _ = names.push_str(d.name);
            }
            let _ = names.push_str(if names.is_empty() {
                " (no device there)"
            } else {
                ")"
            });
            println!(
                "vmm: vm{vi}: guest fetched an instruction from device memory at guest-physical {:#010x}{names} (pc {:#010x}); stopping it",
                pf.addr, pf.ip
            );
            return Msg::new(label::KILL);
        }
    }
    match m.backing_block(pf.addr) {
        Some((host, log2)) => match kestrel_abi::Fpage::new(host, log2, kestrel_abi::Rights::RWX) {
            Some(fp) => {
                let mut r = Msg::new(0);
                r.push_item(kestrel_abi::MapItem::map(pf.addr, fp));
                r
            }
            None => map_reply(pf.addr, host, kestrel_abi::Rights::RWX),
        },
        None => {
            println!(
                "vmm: vm{vi}: guest touched unbacked guest-physical {:#010x} (pc {:#010x}); stopping it",
                pf.addr, pf.ip
            );
            Msg::new(label::KILL)
        }
    }
}

fn vm_gone<F: VmFabric>(vms: &mut [Vm<F>], vcpu: ThreadId, why: &str) {
    if let Some(i) = vms.iter().position(|v| v.vcpu == vcpu) {
        if vms[i].run != Run::Stopped {
            vms[i].machine.finish_log();
            println!("vmm: vm{i}: vCPU {why}; the other VMs carry on");
            vms[i].run = Run::Stopped;
        }
    }
}

fn stop_vm<F: VmFabric>(vms: &mut [Vm<F>], vi: usize, why: &str) {
    let many = vms.len() > 1;
    vms[vi].machine.finish_log();
    machine::print_trace(vms[vi].vcpu, if many { Some(vi) } else { None });
    println!("vmm: vm{vi}: {why}; stopping it");
    vms[vi].run = Run::Stopped;
    if let Err(e) = root::delete_thread(vms[vi].vcpu) {
        println!("vmm: vm{vi}: cannot delete its vCPU: {e}");
    }
}
