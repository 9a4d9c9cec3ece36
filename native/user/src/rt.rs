//! Start-up code, thread spawning, program exit and the panic handler for native tasks.

use crate::sys::{exchange_registers, my_id, shutdown, thread_control, thread_control_all};
use core::arch::global_asm;
use core::sync::atomic::{AtomicU32, Ordering};
use kestrel_abi::{exreg, root, KError, ThreadId, MAX_THREAD_NO};

// `_start`: the kernel enters the root task's first thread at the ELF entry with the
// stack pointer undefined; we switch to the static main stack and call Rust.
// Not with the `linux` feature: there the program is a Linux program, started by its C
// library's own `_start`.
#[cfg(not(feature = "linux"))]
global_asm!(
    r#"
    .section .text.start, "ax"
    .global _start
_start:
    lis 1, __kestrel_main_stack_top@ha
    addi 1, 1, __kestrel_main_stack_top@l
    li 0, 0
    stwu 0, -16(1)
    bl __kestrel_rt_main
1:  b 1b

    .section .bss.kestrel_stack, "aw", @nobits
    .balign 16
    .space 65536
    .global __kestrel_main_stack_top
__kestrel_main_stack_top:
    .space 16
    "#
);

// `__kestrel_thread_start`: entry for spawned threads; the spawner stored the entry
// function and its argument in the two words at the initial stack pointer.
global_asm!(
    r#"
    .text
    .global __kestrel_thread_start
__kestrel_thread_start:
    lwz 12, 0(1)
    lwz 3, 4(1)
    li 0, 0
    stwu 0, -16(1)
    mtctr 12
    bctrl
    bl __kestrel_thread_exit
2:  b 2b
    "#
);

#[cfg(not(feature = "linux"))]
extern "C" {
    fn task_main();
}

extern "C" {
    fn __kestrel_thread_start();
}

/// The program's first thread (the one that runs `task_main`), nil before start-up.
static MAIN_THREAD: AtomicU32 = AtomicU32::new(0);
/// The program's name from r3..r8 at start-up (`kestrel_abi::root::name_words`).
static NAME: [AtomicU32; root::NAME_WORDS] = [const { AtomicU32::new(0) }; root::NAME_WORDS];

#[cfg(not(feature = "linux"))]
// `_start` leaves r3..r8 alone, so the program's name given by the root task arrives here
// as the arguments (all zero for the root task itself, which the kernel starts).
#[no_mangle]
extern "C" fn __kestrel_rt_main(w0: u32, w1: u32, w2: u32, w3: u32, w4: u32, w5: u32) -> ! {
    for (slot, w) in NAME.iter().zip([w0, w1, w2, w3, w4, w5]) {
        slot.store(w, Ordering::Relaxed);
    }
    MAIN_THREAD.store(my_id().0, Ordering::Relaxed);
    // SAFETY: `task_main` is provided by the task binary with this exact signature.
    unsafe { task_main() };
    exit(0)
}

/// The program's name as the root task gave it (empty for the root task itself).
pub fn program_name() -> ([u8; root::NAME_WORDS * 4], usize) {
    let w: [u32; root::NAME_WORDS] = core::array::from_fn(|i| NAME[i].load(Ordering::Relaxed));
    root::name_from_words(&w)
}

/// True if this task is the root task (the kernel started it; it holds the privileges).
pub fn is_root_task() -> bool {
    let main = MAIN_THREAD.load(Ordering::Relaxed);
    main == ThreadId::ROOT.0 || (main == 0 && my_id() == ThreadId::ROOT)
}

/// Ends the calling thread: the root task's first thread shuts the machine down; a
/// program's first thread tells the root task that the program is done (the root deletes
/// its threads); any other thread halts itself.
pub fn exit(code: u32) -> ! {
    let me = my_id();
    if me == ThreadId::ROOT {
        shutdown(code);
    }
    if me.0 == MAIN_THREAD.load(Ordering::Relaxed) {
        crate::root::exit(code);
    }
    halt_self()
}

#[no_mangle]
extern "C" fn __kestrel_thread_exit() -> ! {
    halt_self()
}

fn halt_self() -> ! {
    loop {
        let _ = exchange_registers(my_id(), exreg::HALT, 0, 0, ThreadId::NIL, ThreadId::NIL);
    }
}

/// Address of the entry stub for threads started with [`spawn`].
pub fn thread_entry_stub() -> u32 {
    __kestrel_thread_start as *const () as usize as u32
}

/// Virtual address of the UTCB page this runtime uses for thread number `n`.
pub const fn utcb_addr_for(n: u32) -> u32 {
    0x7f00_0000 + n * 0x1000
}

/// Stack size of threads spawned from the built-in stack pool.
pub const STACK_SIZE: usize = 8192;
const POOL: usize = (MAX_THREAD_NO - kestrel_abi::FIRST_THREAD_NO) as usize;

#[repr(C, align(16))]
struct Stacks([[u8; STACK_SIZE]; POOL]);
static mut STACKS: Stacks = Stacks([[0; STACK_SIZE]; POOL]);

/// The top of the pool stack reserved for thread number `n` (in this space's image).
pub fn pool_stack_top(n: u32) -> u32 {
    let i = (n - kestrel_abi::FIRST_THREAD_NO) as usize % POOL;
    // SAFETY: only the address is taken; each thread number owns its own slot.
    let base = unsafe { core::ptr::addr_of!(STACKS.0[i]) } as u32;
    base + STACK_SIZE as u32 - 16
}

/// Writes the two words `__kestrel_thread_start` expects for thread number `n` on its
/// pool stack; returns its initial stack pointer.
pub fn prepare_pool_stack(n: u32, entry: extern "C" fn(u32), arg: u32) -> u32 {
    let sp = pool_stack_top(n);
    // SAFETY: the pool slot belongs to thread number `n`, which has not started yet; we
    // write the two words `__kestrel_thread_start` expects at its initial stack pointer.
    unsafe {
        let p = sp as *mut u32;
        p.write_volatile(entry as *const () as usize as u32);
        p.add(1).write_volatile(arg);
    }
    sp
}

/// Creates thread `id` in the caller's space, running `entry(arg)` on a pool stack, at
/// `priority`, with `pager`. Root task only (ThreadControl is privileged); a program
/// started by the root task uses [`crate::root::spawn`].
pub fn spawn(
    id: ThreadId,
    entry: extern "C" fn(u32),
    arg: u32,
    priority: u32,
    pager: ThreadId,
) -> Result<(), KError> {
    thread_control(id, my_id(), priority, pager, utcb_addr_for(id.number()))?;
    let sp = pool_stack_top(id.number());
    // SAFETY: the pool slot belongs to thread `id` which has not started yet; we write
    // the two words `__kestrel_thread_start` expects at its initial stack pointer.
    unsafe {
        let p = sp as *mut u32;
        p.write_volatile(entry as *const () as usize as u32);
        p.add(1).write_volatile(arg);
    }
    exchange_registers(
        id,
        exreg::START | exreg::SET_IP | exreg::SET_SP,
        sp,
        thread_entry_stub(),
        ThreadId::NIL,
        ThreadId::NIL,
    )?;
    Ok(())
}

/// Creates thread `id` as the first thread of a new address space. It starts at `ip`
/// with stack pointer `sp`; every page it touches is resolved by `pager`.
pub fn spawn_space(
    id: ThreadId,
    ip: u32,
    sp: u32,
    priority: u32,
    pager: ThreadId,
) -> Result<(), KError> {
    create_started(id, id, priority, pager, ThreadId::NIL, ip, sp)
}

/// Creates thread `id` in `space` (`id` itself: a new space) with its UTCB in the runtime's
/// layout, scheduled by `scheduler` (nil: the caller; a new space inherits the ceiling of
/// the scheduler's space), and starts it at `ip` with stack pointer `sp`. Root task only
/// (ThreadControl is privileged): [`spawn_space`] and the root task's `CreateThread`
/// request use it.
pub fn create_started(
    id: ThreadId,
    space: ThreadId,
    priority: u32,
    pager: ThreadId,
    scheduler: ThreadId,
    ip: u32,
    sp: u32,
) -> Result<(), KError> {
    let utcb = utcb_addr_for(id.number());
    thread_control_all(id, space, priority, pager, utcb, 0, scheduler, 0)?;
    exchange_registers(
        id,
        exreg::START | exreg::SET_IP | exreg::SET_SP,
        sp,
        ip,
        ThreadId::NIL,
        ThreadId::NIL,
    )?;
    Ok(())
}

#[cfg(not(feature = "linux"))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    crate::println!("task {:?} panicked: {}", my_id(), info);
    exit(1)
}

/// In a Linux program (feature `linux`) a panic ends the process the Linux way,
/// `exit_group(1)`, so its personality server reports it: `exit` would tell the root task
/// that the server itself ended.
#[cfg(feature = "linux")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    crate::println!("thread {:?} panicked: {}", my_id(), info);
    loop {
        // SAFETY: Linux's `exit_group` (ppc32 number 234, r3 = the code) does not return;
        // it touches no memory.
        unsafe {
            core::arch::asm!("sc", in("r0") 234u32, in("r3") 1u32, options(nostack));
        }
    }
}
