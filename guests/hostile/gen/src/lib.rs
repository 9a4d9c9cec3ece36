//! The hostile guest's generator (issue 9): seeded pseudo-random blocks of PPC440
//! instructions, weighted by class (SPR moves on all 1024 SPR numbers, MSR writes,
//! `rfi`/`rfci`/`rfmci` to random targets with random MSRs, `tlbwe`/`tlbre`/`tlbsx` with
//! every page size code, TS bit and ERPN, `m[ft]dcr(x)`, cache operations, every load and
//! store form, `sc`, traps, branches, FP, integer and CR operations, synchronization).
//! Pure and host-tested; `guests/hostile` copies each block into its buffer and runs it.
//!
//! Every word comes from `kestrel_ppc440::encode`. The generator keeps a few invariants,
//! so that the guest survives whatever a block provokes and the run is a test of Kestrel,
//! not of the guest's luck (see docs/adr/0015-hostile-guest.md):
//!
//! - **Addresses stay in the guest's RAM.** Every load, store, cache operation and `tlbsx`
//!   takes its base from a *base register* ([`BASE_REGS`], a scratch address) and its
//!   index from an *index register* ([`INDEX_REGS`], a small offset); no generated
//!   instruction writes those registers except the update forms, which move them by at
//!   most one displacement. The VMM stops a VM that touches guest-physical memory beyond
//!   its RAM, so a wild address would end the run, not test anything.
//! - **TLB entries the guest writes map into scratch RAM or above 4 GiB.** Entries 0-3
//!   are the guest's own ([`OWN_TLB_ENTRIES`]) and are never written by a block. Some
//!   TS 1 entries cover the guest's own pages, but map them to scratch RAM and are never
//!   executable. Other
//!   entries get every size code (architected or not), TS, TID, parity and attribute bit,
//!   but their real page lies in scratch RAM (sizes up to 16 MiB), at 0 (larger sizes and
//!   undefined codes: then the effective page starts at 0 or beyond the guest's RAM, so
//!   it translates the addresses the guest uses 1:1), or above 4 GiB (ERPN ≠ 0: device
//!   space, which the VMM answers with a storage exception). An entry is invalidated
//!   before its words are rewritten, so an interrupted sequence leaves it invalid.
//! - **Control flow only goes forward.** Branch targets are later operation boundaries of
//!   the same block, or the end stub; `bclr`/`bcctr` and the `rf*i` returns are emitted
//!   right after the `lis`/`ori`/`mt*` sequence that sets their target, and that target
//!   too is a later boundary. So every block ends (at its last word, a branch to the end
//!   stub, or at the first exception).
//! - **Sensitive values are masked**: every MSR the generator writes (`mtmsr`, SRR1,
//!   CSRR1, MCSRR1) has MSR[WE] clear (a wait with nothing to wake it would hang the
//!   guest, natively too) and MSR[ME] set (a machine check with ME clear is a checkstop);
//!   TCR writes never set TCR[WRC] (a watchdog reset) nor DBCR0 writes DBCR0[RST] (a
//!   reset request, which stops the VM); IVPR is only written with its own value. IVORs
//!   take any value: the guest fills all 64 KiB behind IVPR with 16-byte vector stubs.
//! - **Never a word that makes QEMU 7.2 abort** (issue 9, finding 6): nothing with a
//!   primary opcode in [`EXCLUDED_OPCODES`]. QEMU decodes the words of its newer ISA
//!   (decodetree, `target/ppc/insn32.decode`) before it looks at the CPU model, and its
//!   vector and VSX instructions (`REQUIRE_VECTOR`/`REQUIRE_VSX`) then raise the
//!   AltiVec-unavailable (73) or VSX-unavailable (94) exception, for which the 440's
//!   exception model has no vector: `cpu_abort("Raised an exception without defined
//!   vector")`, and QEMU, with every VM in it, is gone (0x10982145 is `vrlqnm`, opcode 4;
//!   0xF106CA91 is a VSX XX3-form word, opcode 60). The generator emits only encodings of
//!   instructions the 440 has, and never the 440's own multiply-accumulate instructions
//!   either, because they share primary opcode 4 with the vector set.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

use kestrel_ppc440::decode::{encode as enc, AddrMode, Gpr, Insn, LsOp};
use kestrel_ppc440::encode as e;
use kestrel_ppc440::tlb::{word0, word1, word2};
use kestrel_ppc440::{dbcr0, dcr, msr, spr, tcr};

pub mod devices;

/// Primary opcodes the generator never emits, because QEMU 7.2 aborts on some words in
/// them (see the crate documentation): 4 (vector, and the 440's multiply-accumulate),
/// 6 (`lxvp`/`stxvp`), 56-58 and 61-62 (quad/doubleword/vector DQ- and DS-form loads and
/// stores), 60 (VSX). Opcodes 31, 59 and 63 hold VSX and decimal-FP words too; the
/// generator reaches them only through the 440 instructions of `kestrel_ppc440::encode`.
pub const EXCLUDED_OPCODES: [u32; 8] = [4, 6, 56, 57, 58, 60, 61, 62];

/// TLB entries 0 to `OWN_TLB_ENTRIES - 1` belong to the guest (code, scratch, UART).
pub const OWN_TLB_ENTRIES: u32 = 4;
/// With devices, entries `OWN_TLB_ENTRIES..OWN_TLB_ENTRIES + DEVICE_TLB_ENTRIES` are the
/// guest's own too: its device windows and plan area.
pub const DEVICE_TLB_ENTRIES: u32 = 6;

/// How many TLB entries (from 0) are the guest's own under `layout`.
pub fn own_tlb_entries(layout: &Layout) -> u32 {
    OWN_TLB_ENTRIES
        + if layout.devices.is_some() {
            DEVICE_TLB_ENTRIES
        } else {
            0
        }
}

/// Registers that hold scratch addresses: the base of every memory access.
pub const BASE_REGS: [u32; 4] = [2, 3, 4, 5];
/// Registers that hold small offsets: the index of every X-form memory access.
pub const INDEX_REGS: [u32; 2] = [6, 7];
/// The register that points into the block itself: the base of loads and cache touches
/// only (never a store), so that a block reads the page it runs from, under whatever
/// translation its MSR[DS] selects (the split-translation case of issue 9, finding 1).
pub const CODE_BASE_REG: u32 = 8;
/// r9 to r31 (and r0, r1) hold anything; generated instructions write only these.
pub const FIRST_DATA_REG: u32 = 9;
/// Base registers start at least this far inside the scratch area, which bounds the
/// drift of update forms (at most [`MAX_OPS`] displacements of [`DISP_RANGE`] or
/// [`INDEX_RANGE`] bytes, plus 128 bytes of a multiple or string access).
pub const MARGIN: u32 = 256 << 10;
/// Index registers hold offsets in `-INDEX_RANGE..INDEX_RANGE`.
pub const INDEX_RANGE: i32 = 4096;
/// D-form displacements are in `-DISP_RANGE..DISP_RANGE`.
pub const DISP_RANGE: i32 = 2048;
/// Most operations in a block (an operation is one to ten words).
pub const MAX_OPS: u32 = 10;
/// The block buffer's size in words (the longest operation is 12 words).
pub const MAX_WORDS: usize = 128;

/// The guest's layout, as the generator needs it.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Scratch RAM `[scratch_start, scratch_end)`: mapped 1:1 by the guest's own entry in
    /// TS 0, never executed, the target of every memory access.
    pub scratch_start: u32,
    pub scratch_end: u32,
    /// The guest's IVPR (its 64 KiB of vector stubs).
    pub ivpr: u32,
    /// The end stub: every block's last word branches there.
    pub end_stub: u32,
    /// The device windows and plan area of the device attacker (issue 18); `None` for the
    /// classic attack, whose blocks then never touch a device.
    pub devices: Option<devices::DeviceLayout>,
}

/// xorshift64* seeded through splitmix64: small, fast, and the same on host and target.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.u32() as u64 * n as u64) >> 32) as u32
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u32) as usize]
    }

    /// Uniform in `-range..range`.
    pub fn signed(&mut self, range: i32) -> i32 {
        self.below(2 * range as u32) as i32 - range
    }
}

/// Instruction classes, with the weights of [`WEIGHTS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Spr,
    Msr,
    Rfi,
    Tlb,
    Dcr,
    Cache,
    LoadStore,
    Sc,
    Trap,
    Branch,
    Fp,
    Alu,
    Sync,
    /// The device attacker's (`devices`): loads and stores on the device windows.
    Mmio,
    /// `m[ft]dcr(x)` on the interconnect's DCRs 0xC00..0xDFF.
    BgpDcr,
    /// Near-valid DMA and virtio doorbells.
    Doorbell,
}

/// How many classes there are.
pub const CLASSES: usize = 16;

/// Every class, in [`Class`] order, with its weight (out of the sum of all weights).
pub const WEIGHTS: [(Class, u32); CLASSES] = [
    (Class::Spr, 22),
    (Class::Msr, 8),
    (Class::Rfi, 6),
    (Class::Tlb, 10),
    (Class::Dcr, 5),
    (Class::Cache, 6),
    (Class::LoadStore, 14),
    (Class::Sc, 3),
    (Class::Trap, 3),
    (Class::Branch, 7),
    (Class::Fp, 5),
    (Class::Alu, 8),
    (Class::Sync, 3),
    // Only with devices (`Layout::devices`): see devices::DEVICE_CLASS_WEIGHTS.
    (Class::Mmio, 0),
    (Class::BgpDcr, 0),
    (Class::Doorbell, 0),
];

/// Short class names for the guest's summary lines, in [`Class`] order.
pub const CLASS_NAMES: [&str; CLASSES] = [
    "spr", "msr", "rfi", "tlb", "dcr", "cache", "ldst", "sc", "trap", "branch", "fp", "alu",
    "sync", "mmio", "bgpdcr", "doorbell",
];

/// What a block may have changed that the guest restores after it (bits of
/// [`Block::touched`]).
pub mod touched {
    /// IVPR or an IVOR.
    pub const VECTORS: u32 = 1;
    /// TCR, TSR, DEC or DECAR.
    pub const TIMERS: u32 = 2;
    /// DBCR0-2, DBSR, IAC1-4, DAC1-2, DVC1-2.
    pub const DEBUG: u32 = 4;
    /// PID or MMUCR.
    pub const MMU: u32 = 8;
    /// CCR0 or CCR1.
    pub const CACHE_CFG: u32 = 16;
    /// A DCR of the interrupt controller (UIC0).
    pub const UIC: u32 = 32;
}

/// The registers a block starts with. `#[repr(C)]`: the guest's assembly reads it at
/// fixed offsets (gpr 0, cr 128, xer 132, ctr 136, lr 140, msr 144, pc 148).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Regs {
    pub gpr: [u32; 32],
    pub cr: u32,
    pub xer: u32,
    pub ctr: u32,
    pub lr: u32,
    pub msr: u32,
    pub pc: u32,
}

/// One generated block.
#[derive(Clone, Debug)]
pub struct Block {
    pub words: [u32; MAX_WORDS],
    pub len: usize,
    /// Bits of [`touched`].
    pub touched: u32,
    /// Operations per class.
    pub ops: [u32; CLASSES],
    /// Where each operation starts (word index), for the tests.
    pub starts: [u8; MAX_OPS as usize],
    pub nops: usize,
}

impl Default for Block {
    fn default() -> Block {
        Block {
            words: [0; MAX_WORDS],
            len: 0,
            touched: 0,
            ops: [0; CLASSES],
            starts: [0; MAX_OPS as usize],
            nops: 0,
        }
    }
}

/// A word whose target is decided once all operations are placed.
#[derive(Clone, Copy)]
enum PatchKind {
    /// `b`/`bl`: any later boundary or the end stub.
    B,
    /// `bc`: a later boundary (its 16-bit displacement cannot reach the end stub).
    Bc,
    /// A `lis`/`ori` pair loading a target address: a later boundary or the end stub.
    LisOri,
}

#[derive(Clone, Copy)]
struct Patch {
    at: usize,
    kind: PatchKind,
    /// The first word index a target may have (the end of the patch's operation).
    min: usize,
}

/// A random MSR value as the generator writes it: WE clear, ME set, the rest random
/// (reserved bits too, half of the time).
pub fn msr_value(rng: &mut Rng) -> u32 {
    let v = rng.u32();
    let mut v = if rng.chance(50) {
        v & msr::IMPLEMENTED
    } else {
        v
    };
    // Problem state and the interrupt enables end a block at its first privileged
    // instruction or pending interrupt; keep them rarer than a coin flip so that blocks run
    // further.
    for (bit, percent) in [(msr::PR, 25), (msr::EE, 15), (msr::CE, 15), (msr::DE, 15)] {
        if !rng.chance(percent) {
            v &= !bit;
        } else {
            v |= bit;
        }
    }
    (v & !msr::WE) | msr::ME
}

/// The initial registers of a block that starts at `pc`.
pub fn initial_regs(rng: &mut Rng, layout: &Layout, pc: u32) -> Regs {
    let mut r = Regs::default();
    for g in r.gpr.iter_mut() {
        *g = interesting(rng, layout);
    }
    for &b in BASE_REGS.iter() {
        r.gpr[b as usize] = scratch_address(rng, layout);
    }
    for &i in INDEX_REGS.iter() {
        r.gpr[i as usize] = rng.signed(INDEX_RANGE) as u32;
    }
    r.gpr[CODE_BASE_REG as usize] = pc + rng.below(4 * MAX_WORDS as u32);
    r.cr = rng.u32();
    r.xer = rng.u32();
    r.ctr = interesting(rng, layout);
    r.lr = interesting(rng, layout);
    r.msr = msr_value(rng);
    r.pc = pc;
    r
}

/// A scratch address at least [`MARGIN`] inside the area, word aligned most of the time.
pub fn scratch_address(rng: &mut Rng, layout: &Layout) -> u32 {
    let span = layout.scratch_end - layout.scratch_start - 2 * MARGIN;
    let a = layout.scratch_start + MARGIN + rng.below(span);
    if rng.chance(80) {
        a & !3
    } else {
        a
    }
}

/// A register value: random, a boundary value, or an address the guest knows.
fn interesting(rng: &mut Rng, layout: &Layout) -> u32 {
    match rng.below(8) {
        0 => 0,
        1 => u32::MAX,
        2 => 0x8000_0000,
        3 => rng.below(64),
        4 => scratch_address(rng, layout),
        5 => layout.end_stub,
        _ => rng.u32(),
    }
}

struct Gen<'a> {
    rng: &'a mut Rng,
    layout: &'a Layout,
    block: &'a mut Block,
    patches: [Option<Patch>; 2 * MAX_OPS as usize],
    npatches: usize,
}

impl Gen<'_> {
    fn push(&mut self, w: u32) {
        debug_assert!(
            !EXCLUDED_OPCODES.contains(&(w >> 26)),
            "excluded word {w:#010x}"
        );
        if self.block.len < MAX_WORDS {
            self.block.words[self.block.len] = w;
            self.block.len += 1;
        }
    }

    /// `lis r,hi; ori r,r,lo`.
    fn load_imm(&mut self, r: u32, v: u32) {
        self.push(e::lis(r, (v >> 16) as u16));
        self.push(e::ori(r, r, v as u16));
    }

    /// A `lis`/`ori` pair whose value is a target address chosen later.
    fn load_target(&mut self, r: u32) {
        self.patch(PatchKind::LisOri);
        self.load_imm(r, 0);
    }

    /// Marks the next word as one to patch.
    fn patch(&mut self, kind: PatchKind) {
        if self.npatches < self.patches.len() {
            self.patches[self.npatches] = Some(Patch {
                at: self.block.len,
                kind,
                min: 0,
            });
            self.npatches += 1;
        }
    }

    fn data(&mut self) -> u32 {
        FIRST_DATA_REG + self.rng.below(32 - FIRST_DATA_REG)
    }

    fn any(&mut self) -> u32 {
        self.rng.below(32)
    }

    fn base(&mut self) -> u32 {
        self.rng.pick(&BASE_REGS)
    }

    fn index(&mut self) -> u32 {
        self.rng.pick(&INDEX_REGS)
    }

    fn op(&mut self, class: Class) {
        match class {
            Class::Spr => self.spr(),
            Class::Msr => self.msr(),
            Class::Rfi => self.rfi(),
            Class::Tlb => self.tlb(),
            Class::Dcr => self.dcr(),
            Class::Cache => self.cache(),
            Class::LoadStore => self.load_store(),
            Class::Sc => self.push(e::SC),
            Class::Trap => {
                let to = self.rng.below(32);
                let (a, b) = (self.any(), self.any());
                let w = if self.rng.chance(50) {
                    e::tw(to, a, b)
                } else {
                    e::twi(to, a, self.rng.u32() as i16)
                };
                self.push(w);
            }
            Class::Branch => self.branch(),
            Class::Fp => self.fp(),
            Class::Alu => self.alu(),
            Class::Mmio => self.mmio(),
            Class::BgpDcr => self.bgp_dcr(),
            Class::Doorbell => self.doorbell(),
            Class::Sync => {
                let w = match self.rng.below(4) {
                    0 => e::ISYNC,
                    1 => e::MSYNC,
                    2 => enc(&Insn::Tlbsync),
                    _ => enc(&Insn::Tlbsync) | (self.rng.u32() & 0x03ff_f800),
                };
                self.push(w);
            }
        }
    }

    fn pick_spr(&mut self) -> u32 {
        if self.rng.chance(60) {
            self.rng.pick(spr::TABLE).number
        } else {
            self.rng.below(spr::COUNT)
        }
    }

    fn spr(&mut self) {
        let n = self.pick_spr();
        if self.rng.chance(40) {
            let rt = self.data();
            self.push(e::mfspr(rt, n));
            return;
        }
        self.block.touched |= touched_by(n);
        let r = self.data();
        match n {
            spr::IVPR => self.load_imm(r, self.layout.ivpr),
            spr::TCR => {
                let v = self.rng.u32() & !tcr::WRC.mask();
                self.load_imm(r, v);
            }
            spr::DBCR0 => {
                let v = self.rng.u32() & !dbcr0::RST.mask();
                self.load_imm(r, v);
            }
            _ => {
                if self.rng.chance(30) {
                    let v = interesting(self.rng, self.layout);
                    self.load_imm(r, v);
                }
            }
        }
        self.push(e::mtspr(n, r));
    }

    fn msr(&mut self) {
        match self.rng.below(6) {
            0..=2 => {
                let r = self.data();
                let v = msr_value(self.rng);
                self.load_imm(r, v);
                self.push(e::mtmsr(r));
                if self.rng.chance(50) {
                    self.push(e::ISYNC);
                }
            }
            3 => {
                let r = self.any();
                self.push(e::wrtee(r));
            }
            4 => {
                let on = self.rng.chance(50);
                self.push(e::wrteei(on));
            }
            _ => {
                let r = self.data();
                self.push(e::mfmsr(r));
            }
        }
    }

    fn rfi(&mut self) {
        let (srr0, srr1, ret) = match self.rng.below(3) {
            0 => (spr::SRR0, spr::SRR1, e::RFI),
            1 => (spr::CSRR0, spr::CSRR1, e::RFCI),
            _ => (spr::MCSRR0, spr::MCSRR1, e::RFMCI),
        };
        let (rt, rm) = (self.data(), self.data());
        self.load_target(rt);
        self.push(e::mtspr(srr0, rt));
        let v = msr_value(self.rng);
        self.load_imm(rm, v);
        self.push(e::mtspr(srr1, rm));
        self.push(ret);
    }

    fn tlb(&mut self) {
        match self.rng.below(5) {
            0 => {
                // tlbre from any entry (own ones too), index sometimes with high bits set.
                let (ri, rt) = (self.data(), self.data());
                let idx = self.rng.below(64)
                    | if self.rng.chance(20) {
                        self.rng.u32() & !63
                    } else {
                        0
                    };
                self.load_imm(ri, idx);
                let ws = self.rng.below(3);
                self.push(e::tlbre(rt, ri, ws));
            }
            1 => {
                let (rt, ra, rb) = (self.data(), self.base(), self.index());
                let rc = self.rng.chance(50);
                self.push(e::tlbsx(rt, ra, rb, rc));
            }
            _ => self.tlbwe(),
        }
    }

    /// Invalidate entry idx, then write words 1, 2 and 0 (see the crate documentation).
    fn tlbwe(&mut self) {
        let ri = self.data();
        let rw = FIRST_DATA_REG
            + (ri - FIRST_DATA_REG + 1 + self.rng.below(31 - FIRST_DATA_REG))
                % (32 - FIRST_DATA_REG);
        let own = own_tlb_entries(self.layout);
        let mut idx = own + self.rng.below(64 - own);
        if self.rng.chance(20) {
            idx |= self.rng.u32() & !63;
        }
        let (w0, w1, w2) = tlb_entry(self.rng, self.layout);
        self.load_imm(ri, idx);
        self.push(e::li(rw, 0));
        self.push(e::tlbwe(rw, ri, 0));
        self.load_imm(rw, w1);
        self.push(e::tlbwe(rw, ri, 1));
        self.load_imm(rw, w2);
        self.push(e::tlbwe(rw, ri, 2));
        self.load_imm(rw, w0);
        self.push(e::tlbwe(rw, ri, 0));
    }

    fn dcr(&mut self) {
        let n = if self.rng.chance(40) {
            dcr::UIC0_BASE + self.rng.below(9)
        } else {
            self.rng.below(1024)
        };
        match self.rng.below(5) {
            0 | 1 => {
                let rt = self.data();
                self.push(e::mfdcr(rt, n));
            }
            2 | 3 => {
                let rs = self.any();
                if (dcr::UIC0_BASE..dcr::UIC0_BASE + 9).contains(&n) {
                    self.block.touched |= touched::UIC;
                }
                self.push(e::mtdcr(n, rs));
            }
            _ => {
                let (to, rt, ra) = (self.rng.chance(50), self.data(), self.any());
                // The DCR number is a register's value: any DCR, the UIC's too.
                self.block.touched |= touched::UIC;
                self.push(e::dcrx(to, rt, ra));
            }
        }
    }

    fn cache(&mut self) {
        let (ra, rb) = (self.base(), self.index());
        let w = match self.rng.below(8) {
            0 => e::dcbz(ra, rb),
            1 => e::dcbi(ra, rb),
            2 => e::icbi(ra, rb),
            3 => e::iccci(ra, rb),
            4 => e::dccci(ra, rb),
            5 => e::dcread(self.data(), ra, rb),
            6 => e::icread(ra, rb),
            _ => e::x_cache(self.rng.below(e::X_CACHE.len() as u32) as usize, ra, rb),
        };
        self.push(w);
    }

    fn load_store(&mut self) {
        if self.rng.chance(25) {
            return self.code_load();
        }
        match self.rng.below(10) {
            0 => {
                let (rt, ra, rb) = (self.data(), self.base(), self.index());
                let w = if self.rng.chance(50) {
                    e::lwarx(rt, ra, rb)
                } else {
                    e::stwcx(rt, ra, rb)
                };
                self.push(w);
            }
            1 => self.string(),
            _ => loop {
                let op = self.rng.pick(&LsOp::ALL);
                let addr = if op.is_indexed() {
                    AddrMode::X {
                        rb: gpr(self.index()),
                    }
                } else {
                    AddrMode::D {
                        d: self.rng.signed(DISP_RANGE) as i16,
                    }
                };
                let load = matches!(op.kind(), kestrel_ppc440::decode::AccessKind::Load);
                let rt = if load && !op.is_fp() {
                    self.data()
                } else {
                    self.any()
                };
                let ra = self.base();
                if let Some(w) = e::load_store(op, rt, ra, addr) {
                    self.push(w);
                    break;
                }
            },
        }
    }

    /// A load or cache touch based on [`CODE_BASE_REG`]: non-update loads of every width,
    /// integer and FP, `lswi`, `lwarx` (which stopped the VM when MSR[IS] != MSR[DS],
    /// finding H1 of docs/adr/0015-hostile-guest.md, fixed in the split emulation), and the
    /// cache operations that translate like a load. Never `stwcx.`: it would store into
    /// the code page.
    fn code_load(&mut self) {
        let ra = CODE_BASE_REG;
        let rb = self.index();
        match self.rng.below(8) {
            0 => {
                let i = [1usize, 2, 4][self.rng.below(3) as usize]; // dcbst, dcbf, dcbt
                self.push(e::x_cache(i, ra, rb));
            }
            1 => {
                if self.rng.chance(50) {
                    self.push(e::icbi(ra, rb));
                } else {
                    let rt = self.data();
                    self.push(e::lwarx(rt, ra, rb));
                }
            }
            2 => {
                let rt = self.data();
                let most = 4 * (32 - rt);
                let nb = 1 + self.rng.below(most.min(32));
                self.push(e::string_imm(false, rt, ra, nb & 31));
            }
            _ => loop {
                let op = self.rng.pick(&LsOp::ALL);
                let load = matches!(op.kind(), kestrel_ppc440::decode::AccessKind::Load);
                if !load || op.update() {
                    continue;
                }
                let addr = if op.is_indexed() {
                    AddrMode::X { rb: gpr(rb) }
                } else {
                    AddrMode::D {
                        d: self.rng.signed(DISP_RANGE) as i16,
                    }
                };
                let rt = if op.is_fp() { self.any() } else { self.data() };
                if let Some(w) = e::load_store(op, rt, ra, addr) {
                    self.push(w);
                    break;
                }
            },
        }
    }

    /// `lswi`/`lswx` load only data registers (no wrap past r31); `stswi`/`stswx` any.
    fn string(&mut self) {
        let (ra, rb) = (self.base(), self.index());
        match self.rng.below(4) {
            0 => {
                let rt = self.data();
                let most = 4 * (32 - rt);
                let nb = 1 + self.rng.below(most.min(32));
                self.push(e::string_imm(false, rt, ra, nb & 31));
            }
            1 => {
                let rt = self.data();
                let rx = self.data();
                let n = self.rng.below(4 * (32 - rt) + 1);
                self.push(e::li(rx, n as i16));
                self.push(e::mtspr(spr::XER, rx));
                self.push(e::string_x(false, rt, ra, rb));
            }
            2 => {
                let rs = self.any();
                let nb = self.rng.below(32);
                self.push(e::string_imm(true, rs, ra, nb));
            }
            _ => {
                let rs = self.any();
                self.push(e::string_x(true, rs, ra, rb));
            }
        }
    }

    fn branch(&mut self) {
        match self.rng.below(4) {
            0 => {
                self.patch(PatchKind::B);
                let lk = self.rng.chance(50);
                self.push(e::b(0, lk));
            }
            1 => {
                self.patch(PatchKind::Bc);
                let (bo, bi) = (self.rng.below(32), self.rng.below(32));
                let lk = self.rng.chance(50);
                self.push(e::bc(bo, bi, 0, lk));
            }
            _ => {
                let rt = self.data();
                let ctr = self.rng.chance(50);
                self.load_target(rt);
                self.push(e::mtspr(if ctr { spr::CTR } else { spr::LR }, rt));
                let (bo, bi, lk) = (self.rng.below(32), self.rng.below(32), self.rng.chance(50));
                self.push(if ctr {
                    e::bcctr(bo, bi, lk)
                } else {
                    e::bclr(bo, bi, lk)
                });
            }
        }
    }

    fn fp(&mut self) {
        let (t, a, b, c) = (self.any(), self.any(), self.any(), self.any());
        let rc = self.rng.chance(20);
        let w = match self.rng.below(8) {
            0..=2 => {
                let i = self.rng.below(e::FP_A.len() as u32) as usize;
                let single = e::FP_A[i].1 != 23 && self.rng.chance(40);
                e::fp_a(i, single, t, a, b, c, rc)
            }
            3 | 4 => e::fp_x(self.rng.below(e::FP_X.len() as u32) as usize, t, b, rc),
            5 => e::fcmp(self.rng.below(8), a, b, self.rng.chance(50)),
            6 => match self.rng.below(4) {
                0 => e::mtfsfi(self.rng.below(8), self.rng.below(16)),
                1 => e::mtfsb0(self.rng.below(32)),
                2 => e::mffs(t),
                _ => e::mtfsf(self.rng.u32() as u8, b),
            },
            _ => e::fp_x(0, t, b, rc),
        };
        self.push(w);
    }

    fn alu(&mut self) {
        let (d, s, t) = (self.data(), self.any(), self.any());
        let rc = self.rng.chance(30);
        let w = match self.rng.below(10) {
            0 | 1 => {
                let i = self.rng.below(e::D_INT.len() as u32) as usize;
                let imm = self.rng.u32() as u16;
                // Rows 0-5 are `rT,rA,imm` (arithmetic), rows 6-11 `rA,rS,imm` (logical):
                // d_int takes the fields in instruction order, RT/RS first.
                if i < 6 {
                    e::d_int(i, d, s, imm)
                } else {
                    e::d_int(i, s, d, imm)
                }
            }
            2 | 3 => {
                let i = self.rng.below(e::XO_INT.len() as u32) as usize;
                let name = e::XO_INT[i].0;
                let oe = !name.starts_with("mulhw") && self.rng.chance(30);
                e::xo_int(i, d, s, t, oe, rc)
            }
            4 | 5 => {
                let i = self.rng.below(e::X_LOGIC.len() as u32) as usize;
                e::x_logic(i, d, s, t, rc)
            }
            6 => {
                let op = self.rng.pick(&[20, 21, 23]);
                let (sh, mb, me) = (self.rng.below(32), self.rng.below(32), self.rng.below(32));
                e::rotate(op, d, s, if op == 23 { t } else { sh }, mb, me, rc)
            }
            7 => match self.rng.below(3) {
                0 => e::cmp(self.rng.below(8), s, t, self.rng.chance(50)),
                1 => e::cmpi(
                    self.rng.below(8),
                    s,
                    self.rng.u32() as u16,
                    self.rng.chance(50),
                ),
                _ => e::extsb(d, s, rc),
            },
            8 => match self.rng.below(3) {
                0 => e::mfcr(d),
                1 => e::mtcrf(self.rng.u32() as u8, s),
                _ => e::mcrxr(self.rng.below(8)),
            },
            _ => {
                if self.rng.chance(80) {
                    let i = self.rng.below(e::CR_LOGIC.len() as u32) as usize;
                    let (x, y, z) = (self.rng.below(32), self.rng.below(32), self.rng.below(32));
                    e::cr_logic(i, x, y, z)
                } else {
                    e::mcrf(self.rng.below(8), self.rng.below(8))
                }
            }
        };
        self.push(w);
    }
}

fn gpr(n: u32) -> Gpr {
    Gpr::new(n as u8).expect("register numbers are below 32")
}

/// Which [`touched`] bits an `mtspr` to SPR `n` sets.
pub fn touched_by(n: u32) -> u32 {
    match n {
        spr::IVPR | spr::IVOR0..=spr::IVOR15 => touched::VECTORS,
        spr::TCR | spr::TSR | spr::DEC | spr::DECAR => touched::TIMERS,
        spr::DBCR0 | spr::DBCR1 | spr::DBCR2 | spr::DBSR | spr::IAC1..=spr::DVC2 => touched::DEBUG,
        spr::PID | spr::MMUCR => touched::MMU,
        spr::CCR0 | spr::CCR1 => touched::CACHE_CFG,
        _ => 0,
    }
}

/// A TLB entry's three words (0, 1, 2) under the invariants of the crate documentation.
pub fn tlb_entry(rng: &mut Rng, layout: &Layout) -> (u32, u32, u32) {
    // Architected small sizes most of the time, then the large ones, then undefined codes
    // (which map 1:1 from 0 and would otherwise soon cover every address in TS 1).
    let code = match rng.below(20) {
        0..=13 => [0, 1, 2, 3, 4, 5, 7][rng.below(7) as usize],
        14..=16 => 9 + rng.below(2),
        _ => [6, 8, 11, 12, 13, 14, 15][rng.below(7) as usize],
    };
    let ts = if rng.chance(50) { word0::TS.mask() } else { 0 };
    let v = if rng.chance(90) { word0::V.mask() } else { 0 };
    let erpn = if rng.chance(15) { 1 + rng.below(15) } else { 0 };
    let (epn, rpn) = match code {
        // 1 KiB .. 16 MiB (0x6 is undefined on the 440).
        0..=5 | 7 => {
            let size = 1024u32 << (2 * code);
            let scratch = layout.scratch_end - layout.scratch_start;
            let rpn = layout.scratch_start + rng.below(scratch / size) * size;
            if rng.chance(15) {
                // TS 1 over the guest's own pages, into scratch RAM, never executable: data
                // in TS 1 then reads other bytes than fetches in TS 0 from the same page
                // (issue 9 finding 1's shape) whenever the guest's own TS 1 entry is absent.
                let epn = rng.below(layout.scratch_start / size) * size;
                let w0 = epn | v | word0::TS.mask() | word0::SIZE.put(code) | (rng.u32() & 0xf);
                let w1 = rpn | word1::ERPN.put(erpn) | (rng.u32() & 0x3f0);
                let w2 = rng.u32() & !(word2::PAR2.mask() | word2::SX.mask() | word2::UX.mask());
                return (w0, w1, w2);
            }
            let epn = if rng.chance(70) {
                layout.scratch_start + rng.below(scratch / size) * size
            } else {
                // Anywhere at or above the scratch area (never over the guest's image).
                let lo = layout.scratch_start / size;
                (lo + rng.below((u32::MAX / size) - lo)) * size
            };
            (epn, rpn)
        }
        // 256 MiB and 1 GiB: real page 0; the effective page is 0 (1:1) or beyond RAM.
        9 | 10 => {
            let size_log = if code == 9 { 28 } else { 30 };
            (rng.below(1 << (32 - size_log)) << size_log, 0)
        }
        // Undefined size codes: 1:1 from 0, whatever size the emulation makes of them.
        _ => (0, 0),
    };
    let w0 = (epn & word0::EPN.mask()) | v | ts | word0::SIZE.put(code) | (rng.u32() & 0xf);
    let w1 = (rpn & word1::RPN.mask()) | word1::ERPN.put(erpn) | (rng.u32() & 0x3f0);
    let w2 = rng.u32() & !word2::PAR2.mask();
    (w0, w1, w2)
}

/// The class weights under `layout`: [`WEIGHTS`], plus the device classes' when it has
/// devices.
pub fn weights(layout: &Layout) -> [(Class, u32); CLASSES] {
    let mut w = WEIGHTS;
    if layout.devices.is_some() {
        for (c, weight) in devices::DEVICE_CLASS_WEIGHTS {
            if let Some(e) = w.iter_mut().find(|e| e.0 == c) {
                e.1 = weight;
            }
        }
    }
    w
}

/// Generates one block at guest address `base` into `block`: 1 to [`MAX_OPS`]
/// operations, then a branch to the end stub.
pub fn generate(rng: &mut Rng, layout: &Layout, base: u32, block: &mut Block) {
    *block = Block::default();
    let nops = 1 + rng.below(MAX_OPS);
    let weights = weights(layout);
    let total: u32 = weights.iter().map(|w| w.1).sum();
    let mut g = Gen {
        rng,
        layout,
        block,
        patches: [None; 2 * MAX_OPS as usize],
        npatches: 0,
    };
    for _ in 0..nops {
        if g.block.len + 14 > MAX_WORDS {
            break;
        }
        let mut pick = g.rng.below(total);
        let mut class = Class::Sync;
        for (i, &(c, w)) in weights.iter().enumerate() {
            if pick < w {
                class = c;
                g.block.ops[i] += 1;
                break;
            }
            pick -= w;
        }
        let start = g.block.len;
        g.block.starts[g.block.nops] = start as u8;
        g.block.nops += 1;
        let first_patch = g.npatches;
        g.op(class);
        for p in g.patches[first_patch..g.npatches].iter_mut().flatten() {
            p.min = g.block.len;
        }
    }
    let last = g.block.len;
    let at_end = |i: usize| layout.end_stub.wrapping_sub(base + 4 * i as u32) as i32;
    g.push(e::b(at_end(last), false));
    // Resolve the targets: an operation boundary at or after the patch's operation end
    // (the last word counts as one), or the end stub.
    let nops = g.block.nops;
    for p in g.patches[..g.npatches].iter().flatten() {
        let later = g.block.starts[..nops]
            .iter()
            .map(|&s| s as usize)
            .filter(|&s| s >= p.min)
            .count()
            + 1;
        let pick = g.rng.below(later as u32 + 1) as usize;
        let target_index = if pick == later {
            None // the end stub
        } else {
            let mut it = g.block.starts[..nops]
                .iter()
                .map(|&s| s as usize)
                .filter(|&s| s >= p.min)
                .chain(core::iter::once(last));
            it.nth(pick)
        };
        let target = match target_index {
            Some(i) => base + 4 * i as u32,
            None => layout.end_stub,
        };
        let w = g.block.words[p.at];
        match p.kind {
            PatchKind::B => {
                let disp = target.wrapping_sub(base + 4 * p.at as u32) as i32;
                g.block.words[p.at] = e::b(disp, w & 1 != 0);
            }
            PatchKind::Bc => {
                let i = target_index.unwrap_or(last);
                let disp = (4 * (i - p.at)) as i16;
                let bo = (w >> 21) & 31;
                let bi = (w >> 16) & 31;
                g.block.words[p.at] = e::bc(bo, bi, disp, w & 1 != 0);
            }
            PatchKind::LisOri => {
                let r = (w >> 21) & 31;
                // The low two bits of an rfi/bclr/bcctr target are ignored by the processor;
                // set them sometimes, so that an emulation that does not ignore them shows.
                let target = if g.rng.chance(20) {
                    target | (1 + g.rng.below(3))
                } else {
                    target
                };
                g.block.words[p.at] = e::lis(r, (target >> 16) as u16);
                g.block.words[p.at + 1] = e::ori(r, r, target as u16);
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_devices;
