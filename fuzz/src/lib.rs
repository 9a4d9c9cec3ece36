//! Kestrel's fuzz targets, as plain functions over a byte string: one per parser of
//! guest- or user-controlled data. Each `run` decodes its input into operations on the
//! code under test and panics when a property breaks (not only on a crash): a round trip
//! that does not hold, a model that disagrees, an invariant a state machine lost, a
//! malformed input that was accepted.
//!
//! Three users run the same functions:
//! - the libFuzzer binaries in `fuzz_targets/` (`--features libfuzzer`, built with
//!   coverage flags by `scripts/fuzz.sh`; `just fuzz [TARGET] [SECONDS]`);
//! - `tests/replay.rs`, an ordinary `cargo test` that runs every target over its committed
//!   seeds (`seeds/<target>/`) and regressions (`regressions/<target>/`), so a crash found
//!   once stays a test;
//! - `tests/seeds.rs`, the ignored test that writes the seeds from the existing property
//!   tests' generators and vectors ([`seeds`]).
//!
//! See docs/adr/0017-fuzzing.md for the engine and why.

pub mod archive;
pub mod bic;
pub mod codec;
pub mod collective;
pub mod decode;
pub mod elf;
pub mod fabric;
pub mod fdt;
pub mod guestcpu;
pub mod input;
pub mod seeds;
pub mod service;
pub mod torus;
pub mod uart;
pub mod uic;
pub mod virtio_net;
pub mod vmm;
pub mod vtlb;

/// One fuzz target: its name (the binary's and the corpus folders') and its check.
pub struct Target {
    pub name: &'static str,
    /// What the input means and what is checked, one line.
    pub about: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order `just fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "decode",
        about: "instruction words: decode/encode round trip, load/store semantics",
        run: decode::run,
    },
    Target {
        name: "vtlb",
        about: "guest tlbwe/tlbre/tlbsx, fills, PID/mode switches, revocations vs a model",
        run: vtlb::run,
    },
    Target {
        name: "guestcpu",
        about: "privileged instructions, SPRs, MSR, interrupts, timers, TLB ops, split plans vs invariants and a reference TLB",
        run: guestcpu::run,
    },
    Target {
        name: "uart",
        about: "16550 register traffic and host events: register invariants",
        run: uart::run,
    },
    Target {
        name: "uic",
        about: "UIC DCR traffic and input lines vs a per-line reference model",
        run: uic::run,
    },
    Target {
        name: "bic",
        about: "BG/P BIC MMIO traffic and device lines vs a per-line reference model",
        run: bic::run,
    },
    Target {
        name: "collective",
        about: "collective VC loads/stores, DCRs, a filling backend: flags, lines, packets",
        run: collective::run,
    },
    Target {
        name: "torus",
        about: "torus DMA page and DCR traffic: no bus address outside the VM's window",
        run: torus::run,
    },
    Target {
        name: "virtio_net",
        about: "virtio-net rings, kicks, frames: writes only into posted buffers and used rings",
        run: virtio_net::run,
    },
    Target {
        name: "vmm",
        about: "virtualization faults on the bamboo board, memory segments and buses",
        run: vmm::run,
    },
    Target {
        name: "elf",
        about: "ELF images: load plans obey their documented invariants",
        run: elf::run,
    },
    Target {
        name: "archive",
        about: "boot-module archives: bounds, lookups and re-packing",
        run: archive::run,
    },
    Target {
        name: "fdt",
        about: "flattened device trees: the kernel's board-info reader",
        run: fdt::run,
    },
    Target {
        name: "codec",
        about: "fault messages and replies, root-task requests, IPC words: round trips",
        run: codec::run,
    },
    Target {
        name: "fabric",
        about: "fabric engine: DMA/DCR traffic, descriptors, collective, frames vs a guarded memory",
        run: fabric::run,
    },
    Target {
        name: "service",
        about: "fabric service: client requests and replies, torus and collective reassembly, echo answers",
        run: service::run,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
