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
//! - `heap` (cargo feature `heap`): a global allocator over a static arena, for `alloc`.
//!
//! A task provides `#[no_mangle] extern "C" fn task_main()`; when it returns, the root
//! task shuts the machine down and any other thread halts itself.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod console;
#[cfg(feature = "heap")]
pub mod heap;
pub mod ipc;
pub mod mem;
pub mod rt;
pub mod sys;

pub use kestrel_abi as abi;
