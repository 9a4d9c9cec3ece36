//! The fuzzer's random source and the value generators: thread ids, flexpages, map and
//! grant items, tags, timeouts, addresses. Every value mixes "interesting" choices (the
//! fuzzer's own threads, the sibling, the root, interrupt ids, region borders, encodings at
//! the edge of validity) with plain random words, so that both the checks and the paths
//! behind them get exercised.

use crate::layout::{self, World};
use kestrel_abi::{
    root, Fpage, MapItem, MsgTag, Rights, ThreadId, Timeout, Timeouts, FIRST_THREAD_NO,
    MAX_THREAD_NO, USER_BASE, USER_END,
};

/// xorshift64* seeded through splitmix64: small, fast and reproducible from one `u64`.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn u32(&mut self) -> u32 {
        (self.u64() >> 32) as u32
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.u32() as u64 * n as u64) >> 32) as u32
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u32) as usize]
    }

    /// An index chosen with the given weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

/// Words at the edges of the address space, the ABI's encodings and the layout.
const INTERESTING: [u32; 24] = [
    0,
    1,
    2,
    7,
    0x3ff,
    0x400,
    0xfff,
    0x1000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0xffff_f000,
    USER_BASE - 0x1000,
    USER_END,
    USER_END - 0x1000,
    kestrel_abi::SIGMA0_WINDOW,
    kestrel_abi::DEVICE_WINDOW,
    0x0010_0000,
    0xef60_0000,
    layout::WINDOW,
    layout::SCRATCH,
    layout::UNMAPPED,
    (MAX_THREAD_NO << 14) | 1,
    (FIRST_THREAD_NO << 14) | 1,
];

/// A word: interesting, small, or random.
pub fn word(r: &mut Rng) -> u32 {
    match r.below(4) {
        0 => r.pick(&INTERESTING),
        1 => r.below(64),
        _ => r.u32(),
    }
}

/// A thread id: mostly threads that exist (ours, the sibling's, the root's), plus interrupt
/// ids, numbers we own but have not used, stale versions, the edges and random words.
pub fn thread_id(r: &mut Rng, w: &World) -> ThreadId {
    match r.below(20) {
        0 => ThreadId::NIL,
        1 => ThreadId::ANY,
        2 => w.me,
        3 => w.main,
        4 => w.receiver,
        5..=7 => r.pick(&w.victims),
        8 => w
            .vcpus
            .get(r.below(4) as usize)
            .copied()
            .unwrap_or(w.sibling),
        9 => w
            .created
            .get(r.below(w.created.len().max(1) as u32) as usize)
            .copied()
            .unwrap_or(ThreadId::ROOT),
        10 => w.sibling,
        11 => ThreadId::new(w.sibling.number() + 1, 1),
        12 => ThreadId::ROOT,
        13 => ThreadId::irq(r.below(kestrel_abi::FIRST_THREAD_NO + 2)),
        14 => w
            .spare
            .get(r.below(w.spare.len().max(1) as u32) as usize)
            .map(|&n| ThreadId::new(n, 1))
            .unwrap_or(ThreadId::NIL),
        15 => ThreadId::new(
            FIRST_THREAD_NO + r.below(MAX_THREAD_NO - FIRST_THREAD_NO + 2),
            1,
        ),
        16 => ThreadId::new(w.me.number(), 2 + r.below(0x3ffe)),
        17 => w.last_from,
        18 => ThreadId(word(r)),
        _ => ThreadId(r.u32()),
    }
}

/// A flexpage anywhere: inside the fuzzer's regions, its image, the kernel, the windows of
/// the root space, the complete space, or a raw random word (any size field, 0..63).
pub fn fpage(r: &mut Rng) -> Fpage {
    let rights = Rights(r.below(8) as u8);
    let sized = |r: &mut Rng, base: u32, max_log2: u32| {
        let log2 = 12 + r.below(max_log2 - 11);
        Fpage::new(base & !((1u32 << log2) - 1), log2, rights).unwrap_or(Fpage::NIL)
    };
    match r.below(10) {
        0 => {
            let off = r.below(layout::SCRATCH_SIZE) & !0xfff;
            sized(r, layout::SCRATCH + off, layout::SCRATCH_LOG2)
        }
        1 => {
            let off = r.u32() & (layout::WINDOW_SIZE - 1);
            sized(r, layout::WINDOW + off, layout::WINDOW_LOG2)
        }
        2 => {
            let (start, end) = layout::image();
            let off = r.below(end - start);
            sized(r, start + off, 16)
        }
        3 => Fpage::complete(rights),
        4 => {
            let base = r.u32();
            sized(r, base, 31)
        }
        5 => Fpage::page(r.pick(&INTERESTING), rights),
        6 => Fpage::NIL,
        _ => Fpage(r.u32()),
    }
}

/// A map or grant item (two words). The source keeps its write right only inside the
/// scratch region (see [`safe_item`]).
pub fn item(r: &mut Rng) -> [u32; 2] {
    let f = fpage(r);
    let hot = match r.below(4) {
        0 => layout::WINDOW + (r.u32() & (layout::WINDOW_SIZE - 1)),
        1 => word(r),
        _ => r.u32(),
    };
    let [mut a, b] = if r.percent(30) {
        MapItem::grant(hot, f).encode()
    } else {
        MapItem::map(hot, f).encode()
    };
    if r.percent(10) {
        // Any kind nibble, valid or not.
        a = (a & !0xf) | r.below(16);
    }
    safe_item(a, b)
}

/// A map or grant item whose source may be written only if it lies in the scratch region:
/// a writable mapping of the fuzzer's own image in a place a random thread or a vCPU could
/// write to would let the fuzzer corrupt itself, which finds nothing about the kernel.
pub fn safe_item(a: u32, b: u32) -> [u32; 2] {
    let f = Fpage(b);
    let inside = !f.is_nil()
        && f.log2size() < 32
        && f.base() >= layout::SCRATCH
        && f.last() < layout::SCRATCH + layout::SCRATCH_SIZE;
    if inside {
        [a, b]
    } else {
        [a, f.with_rights(f.rights().remove(Rights::W)).0]
    }
}

/// A message tag: any label (the root protocol's, the kernel's, random), few or many words,
/// typed words in pairs or not, and sometimes the flag bits set.
pub fn tag(r: &mut Rng) -> MsgTag {
    let label: u16 = match r.below(6) {
        0 => root::LABEL + r.below(12) as u16,
        1 => r.pick(&[
            kestrel_abi::label::INTERRUPT,
            kestrel_abi::label::PAGEFAULT | 6,
            kestrel_abi::label::EXCEPTION,
            kestrel_abi::label::KILL,
            kestrel_abi::label::VIRT_FAULT,
            kestrel_abi::label::VIRT_FAULT | 2,
            crate::proto::QUERY,
            0,
        ]),
        _ => r.u32() as u16,
    };
    let untyped = if r.percent(70) {
        r.below(7)
    } else {
        r.below(64)
    };
    let typed = match r.below(10) {
        0..=4 => 0,
        5..=7 => 2 * (1 + r.below(3)),
        _ => r.below(64),
    };
    let mut t = MsgTag::new(label, untyped, typed);
    if r.percent(5) {
        t.0 |= r.below(16) << 12;
    }
    t
}

/// One timeout: mostly zero or at most a millisecond, rarely up to 20 ms, long or infinite
/// (the watchdog ends those).
pub fn timeout(r: &mut Rng) -> Timeout {
    match r.below(100) {
        0..=59 => Timeout::ZERO,
        60..=94 => Timeout(1 + r.below(10) as u16),
        95..=97 => Timeout(1 + r.below(200) as u16),
        98 => Timeout::NEVER,
        _ => Timeout(r.u32() as u16),
    }
}

pub fn timeouts(r: &mut Rng) -> Timeouts {
    Timeouts::new(timeout(r), timeout(r))
}

/// A receive window for the caller's UTCB: nil or part of the window region (never the
/// fuzzer's own image: a reply's grant there would overwrite the fuzzer).
pub fn acceptor(r: &mut Rng) -> u32 {
    match r.below(4) {
        0 => Fpage::NIL.0,
        1 => layout::window_fpage().0,
        _ => {
            let log2 = 12 + r.below(layout::WINDOW_LOG2 - 11);
            let off = r.u32() & (layout::WINDOW_SIZE - 1) & !((1u32 << log2) - 1);
            Fpage::new(layout::WINDOW + off, log2, Rights(r.below(8) as u8))
                .unwrap_or(Fpage::NIL)
                .0
        }
    }
}

/// An instruction address for a thread of ours: one of the victim stubs, or an address
/// outside the image (the thread faults and the root stops it). Never elsewhere in the
/// image: code there run with random registers would scribble over the fuzzer.
pub fn safe_ip(r: &mut Rng) -> u32 {
    match r.below(5) {
        0 => crate::stubs::spin(),
        1 => crate::stubs::halt(),
        2 => crate::stubs::scloop(),
        _ => outside_image(r.u32()),
    }
}

/// `ip` if it is outside the fuzzer's image or one of the stubs, else the spin stub.
pub fn outside_image(ip: u32) -> u32 {
    let stubs = [
        crate::stubs::spin(),
        crate::stubs::halt(),
        crate::stubs::scloop(),
    ];
    if layout::in_image(ip) && !stubs.contains(&ip) {
        crate::stubs::spin()
    } else {
        ip
    }
}
