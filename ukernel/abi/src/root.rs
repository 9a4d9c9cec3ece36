//! The root task's protocol: how programs ask the root task (sigma0's role, `kestrel-root`)
//! for the resources that only a privileged space can hand out (see
//! `docs/adr/0009-root-task.md`).
//!
//! A request is an IPC *call* to [`ThreadId::ROOT`] with label [`LABEL`]` + op` and at
//! most six untyped words (so it travels in registers); the reply has label [`OK`] or
//! [`ERROR`] and at most six untyped words, plus map or grant items for the requests that
//! hand out memory. The root identifies the program by the caller's thread id; every
//! thread a program has (its first thread, and every thread it had the root create) is
//! the program's.
//!
//! The operations, their request and reply words and the items beside them are stated
//! once, in the [`ipc_protocol!`](crate::ipc_protocol) table below, which generates the
//! request enum [`Request`], the replies ([`reply`]), the client calls ([`Client`], over the
//! runtime's IPC in `kestrel_user::root`) and the root task's side ([`Server`]).
//!
//! Priorities (`docs/adr/0013-priorities.md`): a program's first space has a ceiling,
//! [`VMM_CEILING`] for programs with the vCPU right and [`PROGRAM_CEILING`] for the
//! others, and its first thread runs at that ceiling with the root task as its scheduler.
//! A thread or vCPU the root creates on request gets the requesting thread as its
//! scheduler (which may then `Schedule` it) and, in a new space, the ceiling of the
//! requester's space; no priority above the ceiling is accepted.
//!
//! Requests that hand out memory need the caller's receive window (UTCB acceptor) to
//! cover `dest`. A program's first thread starts with its module name in r3..r8
//! ([`name_words`]); the runtime prefixes console lines with it.

use crate::fpage::{Fpage, Rights, PAGE_SHIFT, PAGE_SIZE};
use crate::thread::ThreadId;

/// Label of request op 0; request `op` has label `LABEL + op`.
pub const LABEL: u16 = 0x0500;
/// Reply label: done, words as the request defines.
pub const OK: u16 = 0x0000;
/// Reply label: refused, MR1 = [`RootError`] code.
pub const ERROR: u16 = 0x0501;
pub use crate::idl::{Words, MAX_WORDS};
/// Most map or grant items in one reply (two words each, MR1..MR63 minus the untyped).
pub const MAX_ITEMS: usize = 28;
/// Largest block one [`Request::Ram`] hands out.
pub const MAX_RAM: u32 = 256 << 20;
/// Most thread numbers one [`Request::Threads`] hands out.
pub const MAX_THREADS: u32 = 32;
/// Longest program (module) name, as in the boot-module archive.
pub const NAME_WORDS: usize = 6;
/// The priority a VMM gives its vCPUs, and the ceiling of every program without the vCPU
/// right: a native program's threads share the processor round robin with the vCPUs (in
/// slices of at most `MAX_DELEGATED_TIMESLICE_US`) and can never preempt them.
pub const VCPU_PRIORITY: u32 = 90;
/// Ceiling of a program without the vCPU right (its first thread runs at it).
pub const PROGRAM_CEILING: u32 = VCPU_PRIORITY;
/// Ceiling of a program with the vCPU right (a VMM; its first thread runs at it): above
/// its vCPUs, so it answers their faults at once, and below the root task.
pub const VMM_CEILING: u32 = crate::thread::ROOT_PRIORITY - 1;
/// Ceiling of a program with the HPC right (`root.hpc=NAME,...`; an MPI rank, the noise
/// benchmark): above the vCPUs, as a light-weight kernel's rank owns its core, so a busy VM
/// beside it does not take its processor; below every VMM, so VMs' faults are still
/// answered. The right lets a program starve the VMs: give it to the job's ranks only.
pub const HPC_CEILING: u32 = VCPU_PRIORITY + 5;
const _: () = assert!(HPC_CEILING < VMM_CEILING);

crate::ipc_protocol! {
    protocol {
        label: LABEL,
        ok: OK,
        error: ERROR,
        refusal: RootError,
        valid: |_: &Request| true,
    }
    ops {
        /// `size` bytes of zeroed, physically contiguous RAM aligned to `2^align_log2` (at
        /// least a page), granted to the caller's space at `dest` (page aligned, and aligned
        /// like the block up to 16 MiB so large pages stay possible). The VMM asks for
        /// 16 MiB-aligned guest RAM this way. Reply: the block's physical address.
        RAM = 1: Ram, ram { dest: u32, size: u32, align_log2: u32 } -> { phys: u32 };
        /// `count` unused thread numbers for the caller's program. Reply: numbers
        /// `first .. first + count` (version 1).
        THREADS = 2: Threads, threads { count: u32 } -> { first: u32, count: u32 };
        /// Create thread `id` (one of the program's numbers) in the space of `space` (a
        /// thread of the program), or in a new space if `space == id` (with the ceiling of the
        /// caller's space), with `pager` (a thread of the program), the caller as its
        /// scheduler, at `priority` (at most the program's and the space's ceiling), and start
        /// it at `ip` with stack pointer `sp`. Its UTCB is at
        /// `kestrel_user::rt::utcb_addr_for(number)`.
        CREATE_THREAD = 3: CreateThread, create_thread {
            id: ThreadId,
            space: ThreadId,
            pager: ThreadId,
            priority: u32,
            ip: u32,
            sp: u32,
        } -> {};
        /// Delete thread `id` of the program (a vCPU too); the number stays the program's.
        DELETE_THREAD = 4: DeleteThread, delete_thread { id: ThreadId } -> {};
        /// Map device page `phys` (uncached, guarded) at the same address in the caller's
        /// space. A device page belongs to the first program that asks.
        DEVICE = 5: Device, device { phys: u32 } -> {};
        /// Attach interrupt line `line` to `handler` (a thread of the program) with
        /// `InterruptControl` flags. A line belongs to the first program that asks.
        INTERRUPT = 6: Interrupt, interrupt { line: u32, handler: ThreadId, flags: u32 } -> {};
        /// Create vCPU `id` (one of the program's numbers) in a new VM space with the caller
        /// as its pager, VMM and scheduler, at `priority` (at most the caller's ceiling). Needs
        /// the vCPU right (`root.vcpu=`; `kestrel-vmm` by default).
        VCPU = 7: Vcpu, vcpu { id: ThreadId, priority: u32 } -> {};
        /// Map the whole boot-module archive read-only at `dest` (page aligned); the reply
        /// says where it starts, `offset` bytes after `dest`, and how long it is.
        ARCHIVE = 8: Archive, archive { dest: u32 } -> { offset: u32, size: u32 };
        /// The program is done: the root deletes its threads; when every program it started
        /// is done, it stops the machine. (No reply: the caller is gone.)
        EXIT = 9: Exit, exit { code: u32 } -> {};
        /// The first thread of the running program whose module name is `name` (six words as
        /// [`name_words`] packs it): how a program finds a service started beside it (the fabric
        /// service `kestrel-fabric`, `docs/adr/0020-fabric-service.md`). Needs no right: thread
        /// ids are no secret, and a call to a service is checked by the service.
        LOOKUP = 10: Lookup, lookup { name: [u32; NAME_WORDS] } -> { id: ThreadId };
        /// What tenant `tenant` of the program that thread `program` belongs to may do on the
        /// fabric (`crate::grants`: the node's fabric policy): its collective classes and
        /// partitions (bit masks), its program's endpoint quota, and a number naming the
        /// program (the same for all its threads while it runs). `tenant` is one of its VMs
        /// or [`crate::grants::TENANT_SELF`]. A program may ask about itself; the programs
        /// with the fabric right (`root.fabric=NAME,...`, default `kestrel-fabric`) about any.
        FABRIC_GRANT = 11: FabricGrant, fabric_grant { program: ThreadId, tenant: u32 }
            -> { classes: u32, partitions: u32, endpoints: u32, program_no: u32 };
        /// Make thread `id` of the program, the only thread of its space (created with
        /// `CREATE_THREAD` with `space == id`), a Linux personality thread: its space is
        /// marked `spacectl::LINUX` and the caller becomes its exception handler, so its
        /// Linux system calls come to the caller (docs/adr/0034-linux-personality.md). Needs
        /// the Linux right (`root.linux=NAME,...`, default `kestrel-linux`).
        LINUX = 12: Linux, linux { id: ThreadId } -> {};
        /// How many programs the root task started are still running, the caller's aside:
        /// how a service (the fabric service) learns that nobody is left to serve.
        RUNNING = 13: Running, running {} -> { others: u32 };
    }
}

/// Why the root task refused a request. The doc comments are the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum RootError {
    /// malformed request (unknown op, wrong word count, misaligned or out-of-range value)
    BadRequest = 1,
    /// the program lacks the right for this request
    NoRight = 2,
    /// not enough free RAM or thread numbers
    NoResources = 3,
    /// the device page or interrupt line belongs to another program
    Taken = 4,
    /// the thread is not one of the caller's program
    NotOwner = 5,
    /// the kernel refused the operation
    Kernel = 6,
    /// the caller is not a program the root task started
    UnknownCaller = 7,
    /// no running program has that name
    NotFound = 8,
}

impl RootError {
    pub const fn from_raw(v: u32) -> Option<RootError> {
        Some(match v {
            1 => Self::BadRequest,
            2 => Self::NoRight,
            3 => Self::NoResources,
            4 => Self::Taken,
            5 => Self::NotOwner,
            6 => Self::Kernel,
            7 => Self::UnknownCaller,
            8 => Self::NotFound,
            _ => return None,
        })
    }
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => {
                "malformed request (unknown op, wrong word count, misaligned or out-of-range value)"
            }
            Self::NoRight => "the program lacks the right for this request",
            Self::NoResources => "not enough free RAM or thread numbers",
            Self::Taken => "the device page or interrupt line belongs to another program",
            Self::NotOwner => "the thread is not one of the caller's program",
            Self::Kernel => "the kernel refused the operation",
            Self::UnknownCaller => "the caller is not a program the root task started",
            Self::NotFound => "no running program has that name",
        }
    }
}

impl crate::idl::WireError for RootError {
    const MALFORMED: RootError = RootError::BadRequest;
    fn code(self) -> u32 {
        self as u32
    }
    fn from_code(c: u32) -> Option<RootError> {
        RootError::from_raw(c)
    }
}

impl core::fmt::Display for RootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A program's module name as the six words its first thread gets in r3..r8
/// (NUL-padded, big-endian; longer names are cut at 24 bytes).
pub fn name_words(name: &str) -> [u32; NAME_WORDS] {
    let mut b = [0u8; NAME_WORDS * 4];
    let n = name.len().min(b.len());
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    core::array::from_fn(|i| {
        u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

/// The bytes of a name passed by [`name_words`], up to the first NUL; `len == 0` when
/// the thread got no name (the root task itself, started by the kernel).
pub fn name_from_words(w: &[u32; NAME_WORDS]) -> ([u8; NAME_WORDS * 4], usize) {
    let mut b = [0u8; NAME_WORDS * 4];
    for (i, x) in w.iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    // Only printable ASCII names are names: anything else is not a name at all.
    if !b[..n].iter().all(|c| c.is_ascii_graphic()) {
        return ([0; NAME_WORDS * 4], 0);
    }
    (b, n)
}

/// The comma-separated list after `key` (e.g. `root.start=`) in a kernel command line;
/// empty items are skipped. A key given twice: the last one counts.
pub fn arg_list<'a>(args: &'a str, key: &str) -> impl Iterator<Item = &'a str> + 'a {
    let list = args
        .split_ascii_whitespace()
        .filter_map(|a| a.strip_prefix(key))
        .next_back()
        .unwrap_or("");
    let key_found = !list.is_empty();
    list.split(',').filter(move |s| key_found && !s.is_empty())
}

/// One piece of a block to hand out: `2^log2` bytes from `src` (the root's address) to
/// `dst` (the requester's), both aligned to the piece's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub src: u32,
    pub dst: u32,
    pub log2: u32,
}

impl Piece {
    /// The flexpage to send (with `rights`) and its hot spot.
    pub fn fpage(&self, rights: Rights) -> Option<(Fpage, u32)> {
        Some((Fpage::new(self.src, self.log2, rights)?, self.dst))
    }
}

/// Splits `[src, src + size)` → `[dst, dst + size)` into the fewest naturally aligned
/// power-of-two pieces, largest first, none above `2^max_log2`. `src`, `dst` and `size`
/// must be page aligned; `None` if not, or if more than [`MAX_ITEMS`] pieces are needed.
pub fn pieces(src: u32, dst: u32, size: u32, max_log2: u32) -> Option<Pieces> {
    if (src | dst | size) & (PAGE_SIZE - 1) != 0 || size == 0 {
        return None;
    }
    src.checked_add(size - 1)?;
    dst.checked_add(size - 1)?;
    let mut out = Pieces::new();
    let mut off = 0u32;
    while off < size {
        let (s, d) = (src + off, dst + off);
        let align = (s | d).trailing_zeros().min(31);
        let rest = (size - off).ilog2();
        let log2 = align.min(rest).min(max_log2).max(PAGE_SHIFT);
        out.push(Piece {
            src: s,
            dst: d,
            log2,
        })?;
        off += 1 << log2;
    }
    Some(out)
}

/// A fixed-capacity list of [`Piece`]s (the ABI crate has no dependencies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pieces {
    p: [Piece; MAX_ITEMS],
    n: usize,
}

impl Pieces {
    const fn new() -> Pieces {
        Pieces {
            p: [Piece {
                src: 0,
                dst: 0,
                log2: 0,
            }; MAX_ITEMS],
            n: 0,
        }
    }
    fn push(&mut self, x: Piece) -> Option<()> {
        *self.p.get_mut(self.n)? = x;
        self.n += 1;
        Some(())
    }
    pub fn as_slice(&self) -> &[Piece] {
        &self.p[..self.n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec;

    fn any_request() -> impl Strategy<Value = Request> {
        let t = any::<u32>().prop_map(ThreadId);
        prop_oneof![
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(dest, size, align_log2)| {
                Request::Ram {
                    dest,
                    size,
                    align_log2,
                }
            }),
            any::<u32>().prop_map(|count| Request::Threads { count }),
            (
                t.clone(),
                t.clone(),
                t.clone(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>()
            )
                .prop_map(|(id, space, pager, priority, ip, sp)| {
                    Request::CreateThread {
                        id,
                        space,
                        pager,
                        priority,
                        ip,
                        sp,
                    }
                }),
            t.clone().prop_map(|id| Request::DeleteThread { id }),
            any::<u32>().prop_map(|phys| Request::Device { phys }),
            (any::<u32>(), t.clone(), any::<u32>()).prop_map(|(line, handler, flags)| {
                Request::Interrupt {
                    line,
                    handler,
                    flags,
                }
            }),
            (t.clone(), any::<u32>()).prop_map(|(id, priority)| Request::Vcpu { id, priority }),
            any::<u32>().prop_map(|dest| Request::Archive { dest }),
            any::<u32>().prop_map(|code| Request::Exit { code }),
            any::<[u32; NAME_WORDS]>().prop_map(|name| Request::Lookup { name }),
            (t.clone(), any::<u32>())
                .prop_map(|(program, tenant)| Request::FabricGrant { program, tenant }),
            t.prop_map(|id| Request::Linux { id }),
            Just(Request::Running {}),
        ]
    }

    proptest! {
        #[test]
        fn request_roundtrip(r in any_request()) {
            prop_assert!(r.round_trips(), "{:?}", r);
        }

        #[test]
        fn decode_never_panics(label in any::<u16>(), words in proptest::collection::vec(any::<u32>(), 0..8)) {
            prop_assert!(codec_holds(label, &words));
        }

        #[test]
        fn pieces_cover_exactly(src in 0u32..0x4000_0000, dst in 0u32..0x4000_0000, pages in 1u32..0x8000) {
            let (src, dst, size) = (src & !0xfff, dst & !0xfff, pages << 12);
            if let Some(ps) = pieces(src, dst, size, 24) {
                let mut off = 0;
                for p in ps.as_slice() {
                    prop_assert_eq!(p.src, src + off);
                    prop_assert_eq!(p.dst, dst + off);
                    prop_assert!(p.log2 >= 12 && p.log2 <= 24);
                    prop_assert_eq!(p.src & ((1 << p.log2) - 1), 0);
                    prop_assert_eq!(p.dst & ((1 << p.log2) - 1), 0);
                    prop_assert!(p.fpage(Rights::RW).is_some());
                    off += 1 << p.log2;
                }
                prop_assert_eq!(off, size);
            }
        }
    }

    #[test]
    fn reply_roundtrip() {
        let cases = [
            (op::RAM, Ok(Reply::Ram(reply::Ram { phys: 0x0300_0000 }))),
            (
                op::THREADS,
                Ok(Reply::Threads(reply::Threads {
                    first: 70,
                    count: 4,
                })),
            ),
            (
                op::ARCHIVE,
                Ok(Reply::Archive(reply::Archive {
                    offset: 0x300,
                    size: 12345,
                })),
            ),
            (op::VCPU, Ok(Reply::Vcpu(reply::Vcpu {}))),
            (
                op::LOOKUP,
                Ok(Reply::Lookup(reply::Lookup {
                    id: ThreadId::new(70, 1),
                })),
            ),
            (op::LOOKUP, Err(RootError::NotFound)),
            (op::DEVICE, Err(RootError::Taken)),
            (op::RAM, Err(RootError::NoResources)),
        ];
        for (op, r) in cases {
            let w = encode_reply(&r);
            assert_eq!(decode_reply(op, w.label, w.words()), r);
        }
        // The words on the wire, as before the table generated them.
        let w = encode_reply(&Ok(Reply::Archive(reply::Archive { offset: 1, size: 2 })));
        assert_eq!((w.label, w.words()), (OK, &[1, 2][..]));
        assert_eq!(encode_reply(&Err(RootError::Taken)).words(), &[4]);
        let w = Request::Interrupt {
            line: 1,
            handler: ThreadId(2),
            flags: 3,
        }
        .encode();
        assert_eq!((w.label, w.words()), (LABEL + 6, &[1, 2, 3][..]));
        // A reply too short for its op is not taken for a success.
        assert_eq!(decode_reply(op::RAM, OK, &[]), Err(RootError::BadRequest));
        assert_eq!(
            decode_reply(op::RAM, ERROR, &[99]),
            Err(RootError::BadRequest)
        );
    }

    #[test]
    fn wrong_word_count_is_refused() {
        assert_eq!(Request::decode(LABEL + op::RAM, &[1, 2]), None);
        assert_eq!(Request::decode(LABEL, &[]), None);
        assert_eq!(Request::decode(OK, &[1]), None);
    }

    #[test]
    fn names() {
        let w = name_words("kestrel-vmm");
        let (b, n) = name_from_words(&w);
        assert_eq!(&b[..n], b"kestrel-vmm");
        assert_eq!(name_from_words(&[0; 6]).1, 0);
        // Garbage in the registers is no name.
        assert_eq!(name_from_words(&[0x0102_0304, 0, 0, 0, 0, 0]).1, 0);
        let long = name_words("a-name-longer-than-twenty-four-bytes");
        assert_eq!(name_from_words(&long).1, 24);
    }

    #[test]
    fn start_lists() {
        let args = "console=ttyS0 root.start=kestrel-vmm,,kestrel-demo vmm.vms=2";
        let v: std::vec::Vec<&str> = arg_list(args, "root.start=").collect();
        assert_eq!(v, ["kestrel-vmm", "kestrel-demo"]);
        assert_eq!(arg_list("vmm.vms=2", "root.start=").count(), 0);
        assert_eq!(arg_list("root.start=", "root.start=").count(), 0);
        let last: std::vec::Vec<&str> =
            arg_list("root.start=a root.start=b", "root.start=").collect();
        assert_eq!(last, ["b"]);
    }

    #[test]
    fn guest_ram_is_four_large_pieces() {
        let p = pieces(0x8300_0000, 0x2000_0000, 64 << 20, 24).unwrap();
        assert_eq!(p.as_slice().len(), 4);
        assert!(p.as_slice().iter().all(|x| x.log2 == 24));
        assert_eq!(pieces(0x1001, 0, 4096, 24), None);
        assert_eq!(pieces(0, 0, 0, 24), None);
        // Pages that only line up page by page need too many pieces.
        assert_eq!(pieces(0x1000, 0x2000, 64 << 12, 24), None);
    }
}
