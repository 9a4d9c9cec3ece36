//! `libkestrel_kcall.a`: Kestrel calls from inside a Linux-personality program
//! (docs/adr/0034-linux-personality.md), for C. Built for `powerpc-unknown-linux-gnu`
//! (`scripts/build-kcall.sh`) and linked into a static glibc program by `scripts/kestrel-cc
//! ... -lkestrel_kcall`. kestrel-user's `linux` feature makes every Kestrel call but `Ipc`
//! go as r0 = `SYSCALL_BASE` + number, so kestrel-user's IPC, its root-task client and the
//! fabric client ([`kestrel_fabric_client::Service`]) work unchanged here.
//!
//! Errors are negative numbers: -1 the root task does not know the name, -2 an IPC failed,
//! -(100 + n) the fabric service refused with `FabricErr` n, -3 a bad argument.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use kestrel_fabric::{EpId, FabricApi};
use kestrel_fabric_client::service::{Error, Service, Window};
use kestrel_user::{root, sys};

/// Rust's allocations (the fabric client's crates link `alloc`) come from the C library's
/// heap, which the personality server backs like any Linux program's.
struct CHeap;

extern "C" {
    fn posix_memalign(out: *mut *mut u8, align: usize, size: usize) -> i32;
    fn free(p: *mut u8);
}

// SAFETY: posix_memalign returns memory of at least `size` bytes aligned to `align` (at
// least a pointer's size, as it requires) or fails (null is then returned); free takes what
// it returned.
unsafe impl GlobalAlloc for CHeap {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let mut p = core::ptr::null_mut();
        let align = l.align().max(core::mem::size_of::<usize>());
        // SAFETY: `p` is a valid out-pointer; `align` is a power of two, a multiple of the
        // pointer size.
        if unsafe { posix_memalign(&mut p, align, l.size()) } != 0 {
            return core::ptr::null_mut();
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
        // SAFETY: `p` came from `alloc`, i.e. posix_memalign.
        unsafe { free(p) }
    }
}

#[global_allocator]
static HEAP: CHeap = CHeap;

fn code(e: Error) -> i32 {
    match e {
        Error::NoService => -1,
        Error::Ipc(_) => -2,
        Error::Refused(r) => -(100 + r.code() as i32),
    }
}

/// This thread's Kestrel thread id (raw).
#[no_mangle]
pub extern "C" fn kestrel_my_id() -> u32 {
    sys::my_id().0
}

/// The thread serving `name` (a NUL-terminated program name the root task started), as a
/// raw thread id in `*tid`; 0, or -1 if the root task does not know it, -3 for a bad name.
///
/// # Safety
/// `name` is a NUL-terminated string and `tid` a writable `u32`.
#[no_mangle]
pub unsafe extern "C" fn kestrel_lookup(name: *const u8, tid: *mut u32) -> i32 {
    if name.is_null() || tid.is_null() {
        return -3;
    }
    // SAFETY: the caller gives a NUL-terminated string.
    let name = unsafe { core::ffi::CStr::from_ptr(name.cast()) };
    let Ok(name) = name.to_str() else { return -3 };
    match root::lookup(name) {
        Ok(t) => {
            // SAFETY: the caller gives a writable u32.
            unsafe { tid.write(t.0) };
            0
        }
        Err(_) => -1,
    }
}

/// Attaches a fabric endpoint whose DMA window is `[window, window + len)` of this
/// program's memory and whose shared page is `shared` (page-aligned, outside the window).
/// On success 0, the endpoint in `*ep` and its torus coordinates in `*x`, `*y`, `*z`.
///
/// # Safety
/// `window` and `shared` are this program's memory of that size, kept for the endpoint's
/// life; `ep`, `x`, `y`, `z` are writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_fabric_attach(
    window: *mut u8,
    len: u32,
    shared: *mut u8,
    ep: *mut u32,
    x: *mut u32,
    y: *mut u32,
    z: *mut u32,
) -> i32 {
    if [ep, x, y, z].iter().any(|p| p.is_null()) {
        return -3;
    }
    let mut s = match Service::connect() {
        Ok(s) => s,
        Err(e) => return code(e),
    };
    let (e, _) = match s.attach(Window::new(window as u32, len, shared as u32)) {
        Ok(r) => r,
        Err(e) => return code(e),
    };
    let c = s.coords(e);
    // SAFETY: the caller gives writable u32s.
    unsafe {
        ep.write(u32::from(e.0));
        x.write(u32::from(c.x));
        y.write(u32::from(c.y));
        z.write(u32::from(c.z));
    }
    0
}

/// Detaches endpoint `ep` (its memory stays this program's); 0 or -1 without the service.
#[no_mangle]
pub extern "C" fn kestrel_fabric_detach(ep: u32) -> i32 {
    match Service::connect() {
        Ok(mut s) => {
            s.detach(EpId(ep as u8));
            0
        }
        Err(e) => code(e),
    }
}
