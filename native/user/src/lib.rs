//! User-side runtime for Kestrel native tasks.
//!
//! - [`sys`]: one thin wrapper per system call (the only `unsafe` here is the `sc`
//!   instruction itself and the UTCB access);
//! - [`ipc`]: typed message building and the usual IPC shapes (call, send, receive,
//!   reply-and-wait);
//! - [`rt`]: start-up code (`_start`), thread spawning, panic handler;
//! - [`console`]: `print!`/`println!` through the kernel debug console;
//! - [`mem`]: a sigma0-style physical frame allocator and a simple pager loop for
//!   root tasks;
//! - [`pager`]: pager building blocks (frame sources, sharing the own image, private
//!   pages) shared by the root task, ktest and the demo;
//! - [`loader`]: loading an ELF program into frames, to be paged into its space;
//! - [`root`]: the client side of the root task's protocol (RAM, threads, devices,
//!   interrupts, vCPUs, the boot archive, exit) for programs the root task started;
//! - `heap` (cargo feature `heap`): a global allocator over a static arena, for `alloc`.
//!
//! A task provides `#[no_mangle] extern "C" fn task_main()`; when it returns, the root
//! task shuts the machine down, a program tells the root task it is done, and any other
//! thread halts itself.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod console;
#[cfg(feature = "heap")]
pub mod heap;
pub mod ipc;
pub mod loader;
pub mod mem;
#[cfg(all(target_arch = "powerpc", not(feature = "linux")))]
pub mod memops;
pub mod pager;
pub mod root;
pub mod rt;
pub mod sys;

pub use kestrel_abi as abi;
