//! The hostile guest of issue 9 (supervisor-mode bare metal, PPC440), run as two VMs of
//! `kestrel-vmm` by `scripts/attack-guest.py`. One binary; the role comes from r3, which
//! the VMM sets to the VM's index:
//!
//! - VM 0, the attacker: runs seeded pseudo-random blocks of instructions
//!   (`kestrel_hostile_gen`) until it has run its instruction budget. Each block starts
//!   through `rfi` with random registers and a random MSR and ends at its last word (a
//!   branch to the end stub) or at the first interrupt it provokes. All 64 KiB behind
//!   IVPR are 16-byte vector stubs (`li r3,slot; b hostile_common`), so any IVOR value a
//!   block writes still lands on one; `hostile_common` sets a known MSR, records the slot
//!   and the save/restore registers, and returns into Rust as if `hostile_run` returned.
//!   After each block the guest restores what the block may have changed (IVPR/IVORs,
//!   timers, debug registers, PID/MMUCR, CCR0/1; the generator says which), and every
//!   [`VERIFY_EVERY`] blocks it reads back its own TLB entries: a change there, which no
//!   block can make, is a finding and printed as `hostile: FINDING ...`. In some blocks
//!   its own TS 1 entry is absent (fetches and data in TS 1 then use what the blocks
//!   wrote), and r8 points into the running block (loads from the code page, under another
//!   translation when MSR[IS] != MSR[DS]). It prints a
//!   progress line every `progress` blocks and a summary at the end, then requests a
//!   reset (the VMM stops the VM).
//! - VM 1 and up, the neighbour: fills its RAM outside its image with a pseudo-random
//!   pattern, takes a checksum and recomputes it forever, printing each round; a change
//!   prints `neighbour: FAIL ...` and resets.
//!
//! With `devices` set in the arguments, VM 0 is the device attacker of issue 18 (finding
//! 7): it also maps its own vBIC, collective VC0/VC1, torus DMA group page and virtio-mmio
//! window and its plan area (TLB entries 4-9, data only, in TS 1: blocks reach them when
//! their MSR has DS set), its blocks gain the device classes of
//! `kestrel_hostile_gen::devices`, and every [`PLAN_EVERY`] blocks it runs a generated
//! plan (a flood of collective packets, torus descriptors or virtio frames; the DMA set-up
//! every [`SETUP_EVERY`]) through the same entry as a block, so that an exception only cuts
//! the plan short. Its neighbours are then other guests (Linux VMs, native ranks), not
//! VM 1 of this program.
//!
//! The seed, the budget, the progress interval and the device flag are in
//! [`HOSTILE_ARGS`], which the driver script patches in a copy of this ELF (found by its
//! magic), so a run needs no rebuild.
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::fmt::Write;
use kestrel_guest_bare::{map_uart_at, ram, reset, Uart};
use kestrel_hostile_gen::devices::{self as dev, DeviceLayout, Plan, PlanKind, Step, PLAN_NAMES};
use kestrel_hostile_gen::{self as gen, touched, Block, Layout, Regs, Rng, CLASSES, CLASS_NAMES};
use kestrel_ppc440::tlb::{word0, word2, PageSize};
use kestrel_ppc440::{dcr, encode, ivor, msr, spr};

/// End of the guest RAM the VMM gives a bare-metal guest (it starts at 0).
const RAM_END: u32 = 32 << 20;
/// The guest's own area (this image, the stubs, the stack) and the scratch area.
const OWN_END: u32 = 16 << 20;
/// The MSR the guest's own code runs with.
const NORMAL_MSR: u32 = msr::ME;
/// Vector stubs: one per 16-byte slot behind IVPR.
const SLOTS: u32 = 0x1_0000 / 16;
/// The slot number the end stub reports.
const END_SLOT: u32 = SLOTS;
/// Own TLB entries are read back every this many blocks.
const VERIFY_EVERY: u64 = 256;
/// Own TLB entry indices.
const TLB_CODE_TS0: u32 = 0;
const TLB_CODE_TS1: u32 = 1;
const TLB_SCRATCH: u32 = 2;
const TLB_UART: u32 = 3;
/// The device windows' entries (device attacker only), in `dev::WINDOWS` order.
const TLB_DEVICES: u32 = 4;
/// Where the device attacker maps its windows (each a 4 KiB page, data only) and its plan
/// area: in translation space 1 (MSR[DS] = 1), at effective addresses inside the guest's
/// RAM. A block's TLB entry may translate the same addresses first (1:1, or into scratch):
/// the access then lands in RAM, never on unbacked guest-physical space (which stops the VM:
/// seed 1 found that with the windows at 0xD000_0000).
const DEVICES: DeviceLayout = DeviceLayout {
    bic: 0x01E0_0000,
    vc0: 0x01E1_0000,
    vc1: 0x01E2_0000,
    dma: 0x01E3_0000,
    virtio: 0x01E4_0000,
    area: RAM_END - (1 << 20),
};
/// TLB entry (TS 1, 1 MiB, 1:1) of the plan area, after the windows'.
const TLB_AREA: u32 = TLB_DEVICES + 5;
/// A plan (flood) every this many blocks, the DMA set-up every [`SETUP_EVERY`].
const PLAN_EVERY: u64 = 8;
const SETUP_EVERY: u64 = 512;

/// The run's parameters; `scripts/attack-guest.py` patches them in a copy of the ELF.
#[repr(C)]
pub struct Args {
    magic: [u8; 16],
    seed: u64,
    instructions: u64,
    progress: u64,
    /// Non-zero: the device attacker (issue 18).
    devices: u64,
}

/// Found by the driver through its magic; defaults for a run without the driver.
#[no_mangle]
#[used]
#[link_section = ".rodata.hostile_args"]
pub static HOSTILE_ARGS: Args = Args {
    magic: *b"KESTREL-HOSTILE\0",
    seed: 1,
    instructions: 100_000,
    progress: 4096,
    devices: 0,
};

/// What `hostile_run` saves and `hostile_common` records (offsets used by the assembly).
#[repr(C)]
pub struct Save {
    r1: u32,
    lr: u32,
    cr: u32,
    r2: u32,
    r13: [u32; 19],
    slot: u32,
    srr0: u32,
    srr1: u32,
    csrr0: u32,
    csrr1: u32,
    mcsrr0: u32,
    esr: u32,
    dear: u32,
}

#[no_mangle]
static mut HOSTILE_SAVE: Save = Save {
    r1: 0,
    lr: 0,
    cr: 0,
    r2: 0,
    r13: [0; 19],
    slot: 0,
    srr0: 0,
    srr1: 0,
    csrr0: 0,
    csrr1: 0,
    mcsrr0: 0,
    esr: 0,
    dear: 0,
};

/// The block buffer: executed through the guest's own entry (0..16 MiB, supervisor and
/// user execute), written through the same mapping, flushed before each run.
#[repr(C, align(32))]
struct Buffer([u32; gen::MAX_WORDS]);
static mut BLOCK: Buffer = Buffer([0; gen::MAX_WORDS]);

/// The plan being run (written between blocks, read by `plan_entry`).
static mut PLAN: Plan = Plan {
    steps: [Step::Dcr { dcr: 0, value: 0 }; dev::PLAN_STEPS],
    len: 0,
    kind: PlanKind::Setup,
    items: 0,
};
/// The stack `plan_entry` runs on (a plan is entered like a block, with its own r1).
#[repr(C, align(16))]
struct PlanStack([u8; 8192]);
static mut PLAN_STACK: PlanStack = PlanStack([0; 8192]);

// hostile_run(regs): save the Rust context, load the block's registers, enter it by rfi.
// hostile_end: the end stub. hostile_common: every stub's target (r3 = slot): set the
// guest's MSR (in problem state this mtmsr itself traps, and the program interrupt's stub
// comes back here in supervisor state), record the slot and the save/restore registers,
// restore the Rust context and return from hostile_run.
global_asm!(
    ".section .text.hostile, \"ax\"",
    ".global hostile_run",
    "hostile_run:",
    "    lis 4, {save}@ha",
    "    addi 4, 4, {save}@l",
    "    stw 1, {o_r1}(4)",
    "    mflr 0",
    "    stw 0, {o_lr}(4)",
    "    mfcr 0",
    "    stw 0, {o_cr}(4)",
    "    stw 2, {o_r2}(4)",
    "    stmw 13, {o_r13}(4)",
    "    lwz 0, 128(3)",
    "    mtcr 0",
    "    lwz 0, 132(3)",
    "    mtspr {xer}, 0",
    "    lwz 0, 136(3)",
    "    mtspr {ctr}, 0",
    "    lwz 0, 140(3)",
    "    mtspr {lr}, 0",
    "    lwz 0, 144(3)",
    "    mtspr {srr1}, 0",
    "    lwz 0, 148(3)",
    "    mtspr {srr0}, 0",
    "    lwz 0, 0(3)",
    "    lwz 1, 4(3)",
    "    lwz 2, 8(3)",
    "    lmw 4, 16(3)",
    "    lwz 3, 12(3)",
    "    rfi",
    ".global hostile_end",
    "hostile_end:",
    "    li 3, {end_slot}",
    ".global hostile_common",
    "hostile_common:",
    "    lis 4, {msr}@h",
    "    ori 4, 4, {msr}@l",
    ".global hostile_common_mtmsr",
    "hostile_common_mtmsr:",
    "    mtmsr 4",
    "    isync",
    "    lis 4, {save}@ha",
    "    addi 4, 4, {save}@l",
    "    stw 3, {o_slot}(4)",
    "    mfspr 5, {srr0}",
    "    stw 5, {o_srr0}(4)",
    "    mfspr 5, {srr1}",
    "    stw 5, {o_srr1}(4)",
    "    mfspr 5, {csrr0}",
    "    stw 5, {o_csrr0}(4)",
    "    mfspr 5, {csrr1}",
    "    stw 5, {o_csrr1}(4)",
    "    mfspr 5, {mcsrr0}",
    "    stw 5, {o_mcsrr0}(4)",
    "    mfspr 5, {esr}",
    "    stw 5, {o_esr}(4)",
    "    mfspr 5, {dear}",
    "    stw 5, {o_dear}(4)",
    "    lwz 1, {o_r1}(4)",
    "    lwz 0, {o_lr}(4)",
    "    mtlr 0",
    "    lwz 0, {o_cr}(4)",
    "    mtcr 0",
    "    lwz 2, {o_r2}(4)",
    "    lmw 13, {o_r13}(4)",
    "    blr",
    save = sym HOSTILE_SAVE,
    o_r1 = const core::mem::offset_of!(Save, r1),
    o_lr = const core::mem::offset_of!(Save, lr),
    o_cr = const core::mem::offset_of!(Save, cr),
    o_r2 = const core::mem::offset_of!(Save, r2),
    o_r13 = const core::mem::offset_of!(Save, r13),
    o_slot = const core::mem::offset_of!(Save, slot),
    o_srr0 = const core::mem::offset_of!(Save, srr0),
    o_srr1 = const core::mem::offset_of!(Save, srr1),
    o_csrr0 = const core::mem::offset_of!(Save, csrr0),
    o_csrr1 = const core::mem::offset_of!(Save, csrr1),
    o_mcsrr0 = const core::mem::offset_of!(Save, mcsrr0),
    o_esr = const core::mem::offset_of!(Save, esr),
    o_dear = const core::mem::offset_of!(Save, dear),
    xer = const spr::XER,
    ctr = const spr::CTR,
    lr = const spr::LR,
    srr0 = const spr::SRR0,
    srr1 = const spr::SRR1,
    csrr0 = const spr::CSRR0,
    csrr1 = const spr::CSRR1,
    mcsrr0 = const spr::MCSRR0,
    esr = const spr::ESR,
    dear = const spr::DEAR,
    end_slot = const END_SLOT,
    msr = const NORMAL_MSR,
);

// The assembly above reads Regs at fixed offsets.
const _: () = {
    assert!(core::mem::offset_of!(Regs, cr) == 128);
    assert!(core::mem::offset_of!(Regs, msr) == 144);
    assert!(core::mem::offset_of!(Regs, pc) == 148);
};

extern "C" {
    fn hostile_run(regs: *const Regs);
    static hostile_end: u8;
    static hostile_common: u8;
    static hostile_common_mtmsr: u8;
    static __vectors: u8;
    static __image_start: u8;
    static __image_end: u8;
}

fn addr_of_sym(s: &u8) -> u32 {
    s as *const u8 as u32
}

/// Entered from `kestrel_guest_bare`'s `_start` with r3 = the VM index from the VMM.
#[no_mangle]
extern "C" fn bare_main(vm: u32) -> ! {
    if vm == 0 {
        attacker()
    } else {
        neighbour(vm)
    }
}

// ---------------------------------------------------------------------------------------
// Privileged register access (the guest runs in supervisor state between blocks).

macro_rules! mtspr {
    ($n:expr, $v:expr) => {
        // SAFETY: the guest's own SPR writes between blocks, at supervisor state; each
        // restores a value the guest chose.
        unsafe { asm!("mtspr {n}, {v}", n = const $n, v = in(reg) $v, options(nostack)) }
    };
}

macro_rules! mtdcr {
    ($n:expr, $v:expr) => {
        // SAFETY: the guest's own DCR writes between blocks, restoring the UIC's reset state.
        unsafe { asm!("mtdcr {n}, {v}", n = const $n, v = in(reg) $v, options(nostack)) }
    };
}

macro_rules! mfspr {
    ($n:expr) => {{
        let v: u32;
        // SAFETY: reading an SPR has no side effect on these registers.
        unsafe { asm!("mfspr {v}, {n}", n = const $n, v = out(reg) v, options(nostack)) };
        v
    }};
}

/// Writes TLB entry `index` (MMUCR = 0: TID 0).
fn tlb_write(index: u32, w0: u32, w1: u32, w2: u32) {
    // SAFETY: the guest's own entries, which map what they mapped before or (at boot)
    // replace the VMM's first entry with one that maps this code 1:1 too.
    unsafe {
        asm!("mtspr {mmucr}, {z}", ".long {a}", ".long {b}", ".long {c}", "isync",
             mmucr = const spr::MMUCR, a = const encode::tlbwe(4, 3, 0),
             b = const encode::tlbwe(5, 3, 1), c = const encode::tlbwe(6, 3, 2),
             z = in(reg) 0u32, in("r3") index, in("r4") w0, in("r5") w1, in("r6") w2,
             options(nostack));
    }
}

/// Reads TLB entry `index`'s three words.
fn tlb_read(index: u32) -> (u32, u32, u32) {
    let (a, b, c): (u32, u32, u32);
    // SAFETY: tlbre only reads the entry (and sets MMUCR[STID], which nothing relies on).
    unsafe {
        asm!(".long {x}", ".long {y}", ".long {z}",
             x = const encode::tlbre(4, 3, 0), y = const encode::tlbre(5, 3, 1),
             z = const encode::tlbre(6, 3, 2),
             in("r3") index, out("r4") a, out("r5") b, out("r6") c, options(nostack));
    }
    (a, b, c)
}

/// The device attacker's window entries: (index, word 0, word 1, word 2): 4 KiB, TS 0,
/// guarded and cache-inhibited, read and write in both states, never executable.
fn device_entries() -> [(u32, u32, u32, u32); 6] {
    use kestrel_ppc440::tlb::word1;
    let rw = word2::SW.mask() | word2::SR.mask() | word2::UW.mask() | word2::UR.mask();
    let attrs = word2::I.mask() | word2::G.mask() | rw;
    let ts1 = word0::V.mask() | word0::TS.mask();
    let mut out = [(0, 0, 0, 0); 6];
    for (i, (&ea, (gpa, _))) in DEVICES.eas().iter().zip(dev::WINDOWS).enumerate() {
        let w0 = ea | ts1 | PageSize::K4.word0();
        let w1 = (gpa as u32 & word1::RPN.mask()) | word1::ERPN.put((gpa >> 32) as u32);
        out[i] = (TLB_DEVICES + i as u32, w0, w1, attrs);
    }
    out[5] = (
        TLB_AREA,
        DEVICES.area | ts1 | PageSize::M1.word0(),
        DEVICES.area,
        rw,
    );
    out
}

/// The guest's own entries: (index, word 0, word 1, word 2).
fn own_entries() -> [(u32, u32, u32, u32); 4] {
    use word2::{SR, SW, SX, UR, UW, UX};
    let m16 = word0::V.mask() | PageSize::M16.word0();
    let code = SX.mask() | SW.mask() | SR.mask() | UX.mask() | UR.mask();
    let scratch = SW.mask() | SR.mask() | UW.mask() | UR.mask();
    let uart_page = kestrel_guest_bare::UART0 as u32 & word0::EPN.mask();
    let uart = word2::I.mask() | word2::G.mask() | SW.mask() | SR.mask();
    [
        (TLB_CODE_TS0, m16, 0, code),
        (TLB_CODE_TS1, m16 | word0::TS.mask(), 0, code),
        (TLB_SCRATCH, OWN_END | m16, OWN_END, scratch),
        (
            TLB_UART,
            uart_page | word0::V.mask() | PageSize::K4.word0(),
            uart_page,
            uart,
        ),
    ]
}

fn set_ivors() {
    macro_rules! ivors {
        ($($n:literal => $spr:ident),*) => {
            $(mtspr!(spr::$spr, $n * 16u32);)*
        };
    }
    // SAFETY (inside mtspr!): IVPR points at the stubs, every IVOR at stub `n`.
    mtspr!(spr::IVPR, addr_of_sym(unsafe_ref(&raw const __vectors)));
    ivors!(0 => IVOR0, 1 => IVOR1, 2 => IVOR2, 3 => IVOR3, 4 => IVOR4, 5 => IVOR5,
           6 => IVOR6, 7 => IVOR7, 8 => IVOR8, 9 => IVOR9, 10 => IVOR10, 11 => IVOR11,
           12 => IVOR12, 13 => IVOR13, 14 => IVOR14, 15 => IVOR15);
}

/// A linker symbol as a reference (only its address is used).
fn unsafe_ref(p: *const u8) -> &'static u8 {
    // SAFETY: linker symbols are valid addresses inside the image; only the address of
    // the reference is taken, never its contents.
    unsafe { &*p }
}

/// Makes `[start, start + bytes)` coherent for instruction fetch after data writes.
fn sync_icache(start: u32, bytes: u32) {
    let mut a = start & !31;
    while a < start + bytes {
        // SAFETY: cache maintenance on the guest's own, mapped memory.
        unsafe { asm!("dcbst 0, {a}", "msync", "icbi 0, {a}", a = in(reg) a, options(nostack)) };
        a += 32;
    }
    // SAFETY: context synchronisation only.
    unsafe { asm!("msync", "isync", options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// The attacker.

/// Short names of the 16 vectors, in IVOR order, for the summary lines.
const VECTOR_SHORT: [&str; 16] = [
    "CI", "MC", "DSI", "ISI", "EXT", "ALIGN", "PROG", "FPU", "SC", "APU", "DEC", "FIT", "WDT",
    "DTLB", "ITLB", "DEBUG",
];

/// Exceptions by slot: 0-15 the standard vectors, 16 an exception of a block that wrote
/// an IVOR (any interrupt may have gone to any stub), 17 a normal end.
const COUNTS: usize = 18;

struct Stats {
    blocks: u64,
    generated: u64,
    run: u64,
    by_slot: [u64; COUNTS],
    ops: [u64; CLASSES],
    findings: u64,
    notes: u32,
    /// Device attacker: plans run by kind, their packets/descriptors/frames, and plans an
    /// exception cut short.
    plans: [u64; 4],
    items: [u64; 4],
    plans_cut: u64,
}

/// At most this many `hostile: note` lines (unexpected exits, with their block) per run.
const MAX_NOTES: u32 = 8;

/// Prints a block's words and its MSR on entry, a few words per line (for a reproducer).
fn note_block(out: &mut Uart, block: &Block, regs: &Regs) {
    let _ = writeln!(
        out,
        "hostile: note block at {:#010x} msr {:#010x}",
        regs.pc, regs.msr
    );
    for chunk in block.words[..block.len].chunks(8) {
        let _ = write!(out, "hostile: note words");
        for w in chunk {
            let _ = write!(out, " {w:08x}");
        }
        let _ = writeln!(out);
    }
}

fn attacker() -> ! {
    // Own entries first (the UART needs its entry before the first line).
    for (i, w0, w1, w2) in own_entries() {
        tlb_write(i, w0, w1, w2);
    }
    let vectors = addr_of_sym(unsafe_ref(&raw const __vectors));
    let common = addr_of_sym(unsafe_ref(&raw const hostile_common));
    for k in 0..SLOTS {
        let at = vectors + 16 * k;
        let words = [
            encode::li(3, k as i16),
            encode::b(common.wrapping_sub(at + 4) as i32, false),
            encode::ILLEGAL,
            encode::ILLEGAL,
        ];
        for (j, w) in words.iter().enumerate() {
            // SAFETY: the stub area is this image's NOLOAD `.vectors` section.
            unsafe { ((at + 4 * j as u32) as *mut u32).write_volatile(*w) };
        }
    }
    sync_icache(vectors, SLOTS * 16);
    set_ivors();
    let ccr0 = mfspr!(spr::CCR0);
    let ccr1 = mfspr!(spr::CCR1);

    // SAFETY: HOSTILE_ARGS is a plain static; volatile so the patched value is read.
    let args = unsafe { core::ptr::read_volatile(&raw const HOSTILE_ARGS) };
    let mut out = Uart;
    let (seed, budget, progress) = (args.seed, args.instructions, args.progress.max(1));
    let _ = writeln!(
        out,
        "hostile: vm0 attacker: seed {seed} budget {budget} instructions, progress every {progress} blocks"
    );
    let devices = args.devices != 0;
    if devices {
        for (i, w0, w1, w2) in device_entries() {
            tlb_write(i, w0, w1, w2);
        }
        let _ = writeln!(
            out,
            "hostile: device attacker: vBIC, collective VC0/VC1, DMA group, virtio windows mapped; a plan every {PLAN_EVERY} blocks"
        );
    }
    let layout = Layout {
        scratch_start: OWN_END,
        scratch_end: RAM_END,
        ivpr: vectors,
        end_stub: addr_of_sym(unsafe_ref(&raw const hostile_end)),
        devices: devices.then_some(DEVICES),
    };
    let common_mtmsr = addr_of_sym(unsafe_ref(&raw const hostile_common_mtmsr));
    // SAFETY: the block buffer is only touched here and by the block itself.
    let buf = unsafe { &raw mut BLOCK.0 } as *mut u32;
    let base = buf as u32;
    let mut rng = Rng::new(seed);
    let mut block = Block::default();
    let mut st = Stats {
        blocks: 0,
        generated: 0,
        run: 0,
        by_slot: [0; COUNTS],
        ops: [0; CLASSES],
        findings: 0,
        notes: 0,
        plans: [0; 4],
        items: [0; 4],
        plans_cut: 0,
    };
    while st.run < budget {
        if devices && st.blocks.is_multiple_of(PLAN_EVERY) {
            run_plan(&mut rng, &mut st, &layout, common, common_mtmsr);
        }
        gen::generate(&mut rng, &layout, base, &mut block);
        for (i, w) in block.words[..block.len].iter().enumerate() {
            // SAFETY: inside the block buffer (len <= MAX_WORDS).
            unsafe { buf.add(i).write_volatile(*w) };
        }
        sync_icache(base, 4 * block.len as u32);
        let regs = gen::initial_regs(&mut rng, &layout, base);
        // Sometimes without the guest's own TS 1 entry: fetches and data in TS 1 then go
        // through the entries the blocks wrote (or miss).
        let no_ts1 = rng.chance(15);
        if no_ts1 {
            tlb_write(TLB_CODE_TS1, 0, 0, 0);
        }
        // SAFETY: hostile_run saves the callee-saved registers and returns through
        // hostile_common with them restored; the block can only reach its own buffer, the
        // end stub and the vector stubs (the generator's invariants).
        unsafe { hostile_run(&regs) };
        // SAFETY: written by hostile_common just now; nothing else runs.
        let s = unsafe { &*core::ptr::addr_of!(HOSTILE_SAVE) };
        if no_ts1 {
            let (_, w0, w1, w2) = own_entries()[TLB_CODE_TS1 as usize];
            tlb_write(TLB_CODE_TS1, w0, w1, w2);
        }
        // The end: the end stub reached, or (in problem state, or in TS 1 without the own
        // entry) an interrupt on the way through the end stub and hostile_common.
        let end = s.slot == END_SLOT
            || [layout.end_stub, common, common + 4, common_mtmsr].contains(&(s.srr0 & !3));
        let exit_pc = match s.slot {
            _ if end => None,
            ivor::CRITICAL | ivor::WATCHDOG | ivor::DEBUG => Some(s.csrr0),
            ivor::MACHINE_CHECK => Some(s.mcsrr0),
            _ => Some(s.srr0),
        };
        let words = match exit_pc {
            Some(pc) if pc >= base && pc < base + 4 * block.len as u32 => (pc - base) / 4,
            _ => block.len as u32,
        };
        st.blocks += 1;
        st.generated += block.len as u64;
        st.run += words as u64;
        // A block that wrote an IVOR may have sent any interrupt to any stub: its slot
        // does not name the vector then.
        let slot = if end {
            17
        } else if s.slot < 16 && block.touched & touched::VECTORS == 0 {
            s.slot as usize
        } else {
            16
        };
        st.by_slot[slot] += 1;
        if (slot == ivor::ISI as usize || slot == ivor::ITLB_MISS as usize)
            && !no_ts1
            && st.notes < MAX_NOTES
        {
            // The generator keeps every fetch inside the guest's own entries 0 and 1
            // (supervisor and user execute, TS 0 and 1): an instruction storage interrupt or
            // ITLB miss means a fetch was translated by another entry.
            st.notes += 1;
            let _ = writeln!(
                out,
                "hostile: note {} at block {}: srr0 {:#010x} srr1 {:#010x} esr {:#010x}",
                VECTOR_SHORT[slot], st.blocks, s.srr0, s.srr1, s.esr
            );
            note_block(&mut out, &block, &regs);
        }
        for (o, n) in st.ops.iter_mut().zip(block.ops) {
            *o += n as u64;
        }
        restore(block.touched, ccr0, ccr1);
        if st.blocks.is_multiple_of(VERIFY_EVERY) {
            verify(&mut out, &mut st, devices);
        }
        if st.blocks.is_multiple_of(progress) {
            let _ = writeln!(
                out,
                "hostile: progress blocks {} instructions {} exceptions {} ends {}",
                st.blocks,
                st.run,
                st.blocks - st.by_slot[17],
                st.by_slot[17]
            );
        }
    }
    verify(&mut out, &mut st, devices);
    // Console lines stay below the VMM's 128-byte line buffer (longer ones are split and
    // can interleave with the neighbour's); the `done` line comes last.
    let _ = writeln!(
        out,
        "hostile: counts blocks {} instructions {} generated {} exceptions {} ends {}",
        st.blocks,
        st.run,
        st.generated,
        st.blocks - st.by_slot[17],
        st.by_slot[17]
    );
    for half in [0..8, 8..16] {
        let _ = write!(out, "hostile: vectors");
        for v in half {
            let _ = write!(out, " {}={}", VECTOR_SHORT[v], st.by_slot[v]);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "hostile: vectors other={}", st.by_slot[16]);
    if devices {
        let _ = write!(out, "hostile: plans");
        for (k, name) in PLAN_NAMES.iter().enumerate() {
            let _ = write!(out, " {name}={}", st.plans[k]);
        }
        let _ = writeln!(
            out,
            " cut={} packets={} descriptors={} frames={} allroutes={}",
            st.plans_cut, st.items[1], st.items[2], st.items[3], st.items[0]
        );
    }
    for half in [0..7, 7..13, 13..CLASSES] {
        let _ = write!(out, "hostile: ops");
        for c in half {
            let _ = write!(out, " {}={}", CLASS_NAMES[c], st.ops[c]);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "hostile: done seed {seed} findings {}", st.findings);
    reset()
}

/// Generates the next plan (the DMA set-up every [`SETUP_EVERY`] blocks, else a flood) and
/// runs it through `hostile_run`, as a block: `plan_entry` on its own stack, MSR[ME] only,
/// r2/r13 as this code has them. An exception (a model that refuses a store, an interrupt)
/// comes back through the vector stubs and only cuts the plan short.
fn run_plan(rng: &mut Rng, st: &mut Stats, layout: &Layout, common: u32, common_mtmsr: u32) {
    // SAFETY: PLAN is only touched here and, read-only, by plan_entry during hostile_run.
    let plan = unsafe { &mut *core::ptr::addr_of_mut!(PLAN) };
    if st.blocks.is_multiple_of(SETUP_EVERY) {
        dev::setup(rng, RAM_END, plan);
    } else if let Some(d) = layout.devices {
        dev::burst(rng, &d, plan);
    }
    let k = plan.kind as usize;
    st.plans[k] += 1;
    st.items[k] += plan.items as u64;
    let (r2, r13): (u32, u32);
    // SAFETY: reads two registers.
    unsafe { asm!("mr {a}, 2", "mr {b}, 13", a = out(reg) r2, b = out(reg) r13, options(nostack)) };
    let mut regs = Regs::default();
    let stack = core::ptr::addr_of_mut!(PLAN_STACK) as u32;
    regs.gpr[1] = stack + 8192 - 16;
    regs.gpr[2] = r2;
    regs.gpr[3] = plan as *const Plan as u32;
    regs.gpr[13] = r13;
    // DS: the windows and the plan area are mapped in TS 1.
    regs.msr = NORMAL_MSR | msr::DS;
    regs.pc = plan_entry as extern "C" fn(*const Plan) -> ! as usize as u32;
    // SAFETY: as for a block: hostile_run saves the context and comes back through
    // hostile_common; plan_entry ends at the end stub.
    unsafe { hostile_run(&regs) };
    // SAFETY: written by hostile_common just now.
    let s = unsafe { &*core::ptr::addr_of!(HOSTILE_SAVE) };
    let end = s.slot == END_SLOT || [common, common + 4, common_mtmsr].contains(&(s.srr0 & !3));
    if !end {
        st.plans_cut += 1;
    }
}

/// Runs the plan at `plan` (r3), then branches to the end stub. Entered by `hostile_run`.
extern "C" fn plan_entry(plan: *const Plan) -> ! {
    // SAFETY: run_plan passes PLAN, which nothing writes while this runs.
    let plan = unsafe { &*plan };
    for step in &plan.steps[..plan.len] {
        match *step {
            Step::Store { ea, value } => {
                // SAFETY: the generator keeps plan stores in the plan area of the scratch
                // RAM or in the device windows this guest maps (host-tested).
                unsafe { (ea as *mut u32).write_volatile(value) };
            }
            Step::Dcr { dcr, value } => {
                // SAFETY: a documented interconnect DCR (host-tested); the VMM emulates it.
                unsafe {
                    asm!(".long {w}", w = const encode::mtdcrx(4, 5), in("r4") dcr, in("r5") value,
                         options(nostack))
                };
            }
        }
    }
    // SAFETY: the end stub returns to hostile_run's caller through hostile_common.
    unsafe { asm!("b hostile_end", options(noreturn)) }
}

/// Puts back what a block may have changed (`touched` from the generator).
fn restore(t: u32, ccr0: u32, ccr1: u32) {
    if t & touched::VECTORS != 0 {
        set_ivors();
    }
    if t & touched::TIMERS != 0 {
        mtspr!(spr::TCR, 0u32);
        mtspr!(spr::DEC, 0u32);
        mtspr!(spr::DECAR, 0u32);
        mtspr!(spr::TSR, u32::MAX);
    }
    if t & touched::DEBUG != 0 {
        mtspr!(spr::DBCR0, 0u32);
        mtspr!(spr::DBCR1, 0u32);
        mtspr!(spr::DBCR2, 0u32);
        mtspr!(spr::DBSR, u32::MAX);
    }
    if t & touched::MMU != 0 {
        mtspr!(spr::PID, 0u32);
        mtspr!(spr::MMUCR, 0u32);
    }
    if t & touched::UIC != 0 {
        // Every source disabled and routed non-critical, every status bit cleared.
        mtdcr!(dcr::UIC0_BASE + dcr::uic::ER, 0u32);
        mtdcr!(dcr::UIC0_BASE + dcr::uic::CR, 0u32);
        mtdcr!(dcr::UIC0_BASE + dcr::uic::SR, u32::MAX);
    }
    if t & touched::CACHE_CFG != 0 {
        mtspr!(spr::CCR0, ccr0);
        mtspr!(spr::CCR1, ccr1);
    }
}

/// Reads back the guest's own TLB entries; a difference is a finding (no block writes
/// them), printed, counted and repaired.
fn verify(out: &mut Uart, st: &mut Stats, devices: bool) {
    let n = if devices { 6 } else { 0 };
    for (i, w0, w1, w2) in own_entries()
        .into_iter()
        .chain(device_entries().into_iter().take(n))
    {
        let (r0, r1, r2) = tlb_read(i);
        // TPAR/PAR bits read back as the hardware (or emulation) computes them.
        let m0 = !word0::TPAR.mask();
        let m1 = kestrel_ppc440::tlb::word1::RPN.mask() | kestrel_ppc440::tlb::word1::ERPN.mask();
        let m2 = !word2::PAR2.mask();
        if r0 & m0 != w0 & m0 || r1 & m1 != w1 & m1 || r2 & m2 != w2 & m2 {
            st.findings += 1;
            let _ = writeln!(
                out,
                "hostile: FINDING own TLB entry {i} reads {r0:#010x} {r1:#010x} {r2:#010x}, wrote {w0:#010x} {w1:#010x} {w2:#010x} (block {})",
                st.blocks
            );
            tlb_write(i, w0, w1, w2);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The neighbour.

/// The RAM the neighbour checksums: below its image, and from its end to `RAM_END`.
fn regions() -> [(u32, u32); 2] {
    let start = addr_of_sym(unsafe_ref(&raw const __image_start));
    let end = addr_of_sym(unsafe_ref(&raw const __image_end));
    [(0, start), (end, RAM_END)]
}

/// 64-bit FNV-1a over the words of `regions()`.
fn checksum() -> u64 {
    // SAFETY: `regions()` is this guest's RAM outside its image, mapped 1:1.
    unsafe { ram::checksum(&regions()) }
}

fn neighbour(vm: u32) -> ! {
    map_uart_at(1);
    let mut out = Uart;
    let kib: u32 = regions().iter().map(|(lo, hi)| (hi - lo) >> 10).sum();
    // SAFETY: as in `checksum`.
    unsafe { ram::fill(&regions(), 0x9E37_79B9 ^ vm) };
    let expect = checksum();
    let _ = writeln!(
        out,
        "neighbour: vm{vm} filled {kib} KiB, checksum {expect:#018x}; rechecking forever"
    );
    let mut round: u64 = 0;
    loop {
        round += 1;
        let sum = checksum();
        if sum != expect {
            let _ = writeln!(
                out,
                "neighbour: FAIL round {round}: checksum {sum:#018x}, expected {expect:#018x}"
            );
            reset();
        }
        let _ = writeln!(
            out,
            "neighbour: round {round} checksum {sum:#018x} unchanged"
        );
    }
}

/// The generator's dependencies (kestrel-bgp's C-header generator) link `alloc`, which
/// this guest never uses: every allocation is refused (and would end in the panic handler).
struct NoAlloc;

// SAFETY: `alloc` always returns null, which GlobalAlloc allows (allocation failure), and
// `dealloc` is never given a pointer this allocator returned (there are none).
unsafe impl core::alloc::GlobalAlloc for NoAlloc {
    unsafe fn alloc(&self, _: core::alloc::Layout) -> *mut u8 {
        core::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _: *mut u8, _: core::alloc::Layout) {}
}

#[global_allocator]
static ALLOCATOR: NoAlloc = NoAlloc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "hostile: FAIL panic");
    reset()
}
