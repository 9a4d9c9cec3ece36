//! Where things are in the fuzzer's address space, and who is who (`World`).
//!
//! ```text
//! 0x1000_0000 image (code, data, the runtime's stacks), paged by the root task; its
//!             first MiB is PROBE_SRC, the capacity probe's mapping source
//! 0x3000_0000 SCRATCH: 256 KiB of RAM, the only source random items may map writable
//! 0x4000_0000 WINDOW: 1 GiB receive window of the fuzzer and its receiver thread
//! 0x8000_0000 PROBE_DST: 1 GiB receive window of the probe receiver
//! 0xD000_0000 UNMAPPED: never mapped (invalid buffers point here)
//! ```

use heapless::Vec;
use kestrel_abi::{Fpage, Rights, ThreadId};

pub const PROBE_SRC: u32 = kestrel_abi::USER_BASE;
pub const PROBE_SRC_LOG2: u32 = 20;
pub const SCRATCH: u32 = 0x3000_0000;
pub const SCRATCH_LOG2: u32 = 18;
pub const SCRATCH_SIZE: u32 = 1 << SCRATCH_LOG2;
pub const WINDOW: u32 = 0x4000_0000;
pub const WINDOW_LOG2: u32 = 30;
pub const WINDOW_SIZE: u32 = 1 << WINDOW_LOG2;
pub const PROBE_DST: u32 = 0x8000_0000;
pub const PROBE_DST_LOG2: u32 = 30;
pub const UNMAPPED: u32 = 0xd000_0000;

pub fn window_fpage() -> Fpage {
    Fpage::new(WINDOW, WINDOW_LOG2, Rights::RWX).unwrap_or(Fpage::NIL)
}

extern "C" {
    static __image_start: u8;
    static __image_end: u8;
}

/// The fuzzer's image `[start, end)` (user.ld's symbols).
pub fn image() -> (u32, u32) {
    // Only the addresses of the linker symbols are taken, nothing is read.
    (
        core::ptr::addr_of!(__image_start) as u32,
        core::ptr::addr_of!(__image_end) as u32,
    )
}

pub fn in_image(a: u32) -> bool {
    let (s, e) = image();
    (s..e).contains(&a)
}

/// How many victim threads the fuzzer keeps (spin, halt, scloop).
pub const NVICTIMS: usize = 3;
/// How many vCPUs the fuzzer keeps in privileged mode.
pub const NVCPUS: usize = 2;
/// Most threads the fuzzer remembers creating through random requests.
pub const MAX_CREATED: usize = 16;

/// The threads the fuzzing thread knows, and what it may do to them.
pub struct World {
    /// The fuzzing thread itself.
    pub me: ThreadId,
    /// The program's first thread: watchdog and reporter.
    pub main: ThreadId,
    /// Receives whatever the fuzzer sends it, through [`WINDOW`].
    pub receiver: ThreadId,
    /// Receives the capacity probe's mappings, through [`PROBE_DST`].
    pub probe_rx: ThreadId,
    /// The sibling program's first thread.
    pub sibling: ThreadId,
    /// Threads in the fuzzer's space that anything may be done to.
    pub victims: [ThreadId; NVICTIMS],
    /// vCPUs the fuzzer created (privileged mode).
    pub vcpus: Vec<ThreadId, NVCPUS>,
    /// Threads created by random requests that succeeded.
    pub created: Vec<ThreadId, MAX_CREATED>,
    /// The program's thread numbers not in any of the roles above.
    pub spare: Vec<u32, 128>,
    /// The partner of the last message received.
    pub last_from: ThreadId,
    /// The program has the vCPU right.
    pub privileged: bool,
}

impl World {
    /// Threads the fuzzer needs to keep working: only harmless things are done to them.
    pub fn is_infra(&self, t: ThreadId) -> bool {
        t == self.me || t == self.main || t == self.receiver || t == self.probe_rx
    }

    /// The program's priority ceiling (`docs/adr/0013-priorities.md`).
    pub fn ceiling(&self) -> u32 {
        if self.privileged {
            kestrel_abi::root::VMM_CEILING
        } else {
            kestrel_abi::root::PROGRAM_CEILING
        }
    }

    pub fn is_foreign(&self, t: ThreadId) -> bool {
        t == self.sibling || t == ThreadId::ROOT
    }
}
