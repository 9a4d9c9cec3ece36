//! Boot: from QEMU's entry state to the first user instruction of the root task.
//!
//! QEMU enters `_start` at the ELF entry with r3 = device tree, MSR = 0 and its own
//! 1:1 TLB entries 0 and 1. We read the board facts from the device tree, install
//! the kernel's pinned TLB entries (dropping QEMU's), wire the vectors, carve physical
//! memory (kernel image | kernel pool | device tree + boot module | root image | free),
//! load the root task from the boot module (QEMU's `-initrd`), and start it.

use crate::api::{frame_of, kernel, space, thread, Kernel, IDLE};
use crate::arch::{self, msr, spr, tcr, tlb, tsr};
use crate::platform::{uart::Uart, uic, IrqController};
use kestrel_abi::{
    Rights, ThreadId, PAGE_SHIFT, PAGE_SIZE, ROOT_PRIORITY, ROOT_THREAD_NO, USER_BASE, USER_END,
};
use kestrel_kcore::{bootinfo::BoardInfo, elf};

extern "C" {
    static __kernel_end: u8;
}

/// Virtual address of the root thread's UTCB (the runtime's convention: 0x7F00_0000 +
/// thread number * 4 KiB).
const ROOT_UTCB: u32 = 0x7f00_0000 + ROOT_THREAD_NO * 0x1000;
/// RAM the kernel uses at most (one pinned 256 MiB TLB entry).
const MAX_RAM: u64 = 0x1000_0000;
/// Kernel tick.
const TICK_US: u32 = 1000;

fn halt_with(msg: &str) -> ! {
    crate::kprintln!("KERNEL PANIC: boot failed: {}", msg);
    crate::platform::shutdown(3)
}

#[no_mangle]
extern "C" fn kestrel_boot(fdt: *const u8) -> ! {
    // SAFETY: QEMU passes a valid flattened device tree in r3; its header's totalsize
    // (big-endian word at offset 4) bounds it. QEMU's boot TLB maps it 1:1.
    let blob = unsafe {
        let size = u32::from_be_bytes(*(fdt.add(4) as *const [u8; 4])) as usize;
        core::slice::from_raw_parts(fdt, size.min(1 << 20))
    };
    let board = BoardInfo::from_fdt(blob);
    let uart_phys = board
        .as_ref()
        .ok()
        .and_then(|b| b.uart0.as_ref())
        .map(|u| u.phys as u32)
        .unwrap_or(0xEF60_0300);
    tlb::install_kernel_map(uart_phys & !(PAGE_SIZE - 1));
    Uart::init((tlb::KERNEL_IO_VA + (uart_phys & (PAGE_SIZE - 1))) as usize);
    crate::kprintln!(
        "\nKestrel microkernel for PowerPC 440 (ABI v{})",
        kestrel_abi::ABI_VERSION
    );
    let board = match board {
        Ok(b) => b,
        Err(e) => halt_with(e.as_str()),
    };
    arch::entry::install_vectors();
    spr::write_msr(msr::KERNEL);
    if let Some(u) = &board.uic {
        if u.dcr_base != uic::DCR_BASE {
            halt_with("interrupt controller is not at DCR 0xC0");
        }
    }
    crate::platform::irq_controller().init();

    let k = kernel();
    let kernel_end = core::ptr::addr_of!(__kernel_end) as u32;
    let ram_end = board.mem_size.min(MAX_RAM) as u32;
    let fdt_start = fdt as u32;
    let fdt_end = fdt_start + blob.len() as u32;
    let (mod_start, mod_end) = board
        .initrd
        .unwrap_or_else(|| halt_with("no boot module (pass the root task with -initrd)"));
    let pool_end = fdt_start.min(mod_start) & !(PAGE_SIZE - 1);
    k.kmem.init(kernel_end, pool_end);
    let mut next_free = fdt_end.max(mod_end).next_multiple_of(PAGE_SIZE);
    k.mem.ram_end = ram_end;
    k.mem.module = (mod_start, mod_end - mod_start);
    k.mem.tb_hz = board.timebase_hz;
    k.mem.tick_us = TICK_US;
    let args = board.bootargs.as_bytes();
    let n = args.len().min(k.mem.bootargs.len());
    k.mem.bootargs[..n].copy_from_slice(&args[..n]);
    k.mem.bootargs_len = n;
    if board.bootargs_len > n {
        crate::kprintln!(
            "kestrel: the command line is {} bytes; only its first {n} reach the root task",
            board.bootargs_len
        );
    }
    crate::kprintln!(
        "kestrel: {} MiB RAM, timebase {} MHz, kernel {:#x}..{:#x}, pool {} KiB, boot module {} KiB",
        ram_end >> 20, board.timebase_hz / 1_000_000, 0x0010_0000, kernel_end,
        (pool_end - kernel_end) >> 10, (mod_end - mod_start) >> 10
    );

    // The root task: a privileged space with one thread, loaded from the boot module.
    let sid = space::create(k, true).unwrap_or_else(|| halt_with("no address space"));
    let root = (ROOT_THREAD_NO - kestrel_abi::FIRST_THREAD_NO) as usize;
    if thread::create(
        k,
        root,
        ThreadId::ROOT.version(),
        sid,
        ROOT_PRIORITY as u8,
        ThreadId::NIL,
        ROOT_UTCB,
    )
    .is_err()
    {
        halt_with("cannot create the root thread");
    }
    k.threads[root].name[..4].copy_from_slice(b"root");
    k.threads[root].scheduler = ThreadId::ROOT;
    // SAFETY: the boot module lies in RAM (QEMU placed it), mapped 1:1, and nothing
    // writes it while we read it.
    let module = unsafe {
        core::slice::from_raw_parts(mod_start as *const u8, (mod_end - mod_start) as usize)
    };
    // An archive of boot modules starts with the root task; a plain ELF is the root task.
    let image = match kestrel_abi::bootmod::count(module) {
        Some(_) => match kestrel_abi::bootmod::get(module, 0) {
            Some(m) => m.data,
            None => halt_with("boot module archive has no root task"),
        },
        None => module,
    };
    let plan = elf::load_plan(image, USER_BASE, USER_END).unwrap_or_else(|e| halt_with(e.as_str()));
    for seg in plan.segments.iter() {
        let first = seg.vaddr & !(PAGE_SIZE - 1);
        let last = (seg.vaddr + seg.memsz - 1) & !(PAGE_SIZE - 1);
        let mut va = first;
        while va <= last {
            let frame = match space::lookup(k, sid, va) {
                Some((e, node)) => {
                    // A page shared by two segments gets the union of their rights.
                    let _ = space::set_pte(k, sid, va, e | seg.rights.0 as u32, node);
                    e & !(PAGE_SIZE - 1)
                }
                None => {
                    let f = next_free;
                    next_free += PAGE_SIZE;
                    if next_free > ram_end {
                        halt_with("root task does not fit in RAM");
                    }
                    // SAFETY: `f` is free RAM above the boot module, mapped 1:1.
                    unsafe { core::ptr::write_bytes(f as *mut u8, 0, PAGE_SIZE as usize) };
                    let node = k
                        .mapdb
                        .insert_root(sid, va >> PAGE_SHIFT, f >> PAGE_SHIFT, Rights::RWX)
                        .unwrap_or_else(|_| halt_with("mapping database full"));
                    if space::set_pte(k, sid, va, f | seg.rights.0 as u32, node).is_err() {
                        halt_with("kernel pool exhausted");
                    }
                    f
                }
            };
            // Copy the part of the file image that falls into this page.
            let page_lo = va.max(seg.vaddr);
            let page_hi = (va + PAGE_SIZE).min(seg.vaddr + seg.filesz);
            if page_lo < page_hi {
                let off = (seg.file_offset + (page_lo - seg.vaddr)) as usize;
                let len = (page_hi - page_lo) as usize;
                // SAFETY: destination is the frame backing `page_lo` (in RAM, 1:1); the
                // source range was bounds-checked by `load_plan`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        image[off..off + len].as_ptr(),
                        (frame + (page_lo - va)) as *mut u8,
                        len,
                    );
                }
            }
            va += PAGE_SIZE;
        }
    }
    k.mem.free_start = next_free;
    {
        let f = frame_of(k, root);
        f.regs.ip = plan.entry;
    }
    k.threads[root].state = thread::State::Ready;

    thread::init_idle(k, idle_loop as *const () as usize);
    start_timer(k, &board);
    crate::kprintln!(
        "kestrel: root task entry {:#x}, {} KiB free for it",
        plan.entry,
        (ram_end - next_free) >> 10
    );
    let frame = super::switch::switch_to(k, root);
    // SAFETY: `switch_to` made the root thread current; its frame is complete.
    unsafe { arch::entry::resume(frame) }
}

fn start_timer(k: &Kernel, board: &BoardInfo) {
    let period = (board.timebase_hz as u64 * k.mem.tick_us as u64 / 1_000_000) as u32;
    // Auto-reload and the interrupt enable go in before DEC starts counting: without
    // -icount QEMU's decrementer runs on host time, and a DEC that expired before ARE was
    // set would never reload (the kernel would never tick).
    spr::write::<{ ppc440::spr::DECAR }>(period);
    spr::write::<{ ppc440::spr::TSR }>(tsr::DIS | tsr::FIS | tsr::WIS);
    spr::write::<{ ppc440::spr::TCR }>(tcr::DIE | tcr::ARE);
    spr::write::<{ ppc440::spr::DEC }>(period);
}

/// The idle thread: wait for interrupts in supervisor mode.
extern "C" fn idle_loop() -> ! {
    loop {
        spr::write_msr(msr::IDLE | msr::WE);
    }
}

#[allow(dead_code)]
const _IDLE: usize = IDLE;
