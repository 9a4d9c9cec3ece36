"""Every number the Python side shares with Kestrel's Rust source, defined once here.

Each constant that mirrors a Rust item is listed in `MIRRORS` with the crate (its package name)
and the item it copies; `tests/unit/test_rust_constants.py` reads the Rust source and fails when
any of them drifts. Crates are found by package name through the workspace's `Cargo.toml`, so
moving a crate does not break the check.
"""
from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20

# The Kestrel kernel uses at most this much RAM (kestrel-kernel's MAX_RAM); QEMU gets exactly
# this for runs with an OS guest.
KESTREL_RAM_MB = 256
# Where QEMU's bamboo loads -initrd, and where kestrel-vmm puts a guest's initrd (the same).
INITRD_ADDR = 0x0190_0000
# kestrel-vmm: most VMs (MAX_VMS), an OS guest's default RAM (LINUX_RAM), the alignment of each
# VM's RAM (SEGMENT_ALIGN), and how many lines of one kind of guest diagnostic it prints in
# full before it only counts them (LOG_LINES_IN_FULL).
VMM_MAX_VMS = 4
VMM_DEFAULT_MEM_MB = 64
VMM_SEGMENT_ALIGN = 16 * MIB
VMM_LOG_LINES_IN_FULL = 8
# kestrel-vmm's console focus escape: Ctrl-] then a VM number moves the keyboard.
VMM_FOCUS_ESCAPE = 0x1D
# The Linux guest's command line before anything is added, natively and in every VM (also
# kestrel-vmm's default when a guest comes without one: DEFAULT_BOOTARGS).
LINUX_CMDLINE = "console=ttyS0 panic=1"
# The module holding the node's fabric policy (kestrel-abi's grants.rs), and the folder of
# ready-made policies.
FABRIC_POLICY_MODULE = "fabric-policy"
# The boot-module archive (kestrel-abi's bootmod.rs).
BOOTMOD_MAGIC = b"KSTRLMOD"
BOOTMOD_NAME_LEN = 24
# How much of the kernel command line the kernel keeps and hands to programs (kestrel-abi).
BOOTARGS_LEN = 256
# The hostile guest's argument block starts with this magic (kestrel-hostile's HOSTILE_ARGS).
HOSTILE_MAGIC = b"KESTREL-HOSTILE\0"
# kestrel-checksum: its xorshift32 seed and its buffer (BUF_LEN bytes of 32-bit words).
CHECKSUM_SEED = 0x1234_5678
CHECKSUM_WORDS = (64 << 10) // 4
# The datagram that ends kestrel-echo (kestrel-fabric-client's net::QUIT).
ECHO_QUIT = b"KESTREL-ECHO-QUIT"
# guests/vmdiag: unknown-SPR rounds (an mtspr and an mfspr each) and time-base write rounds
# (three mtspr each).
VMDIAG_SPR_ROUNDS = 200
VMDIAG_TB_ROUNDS = 4000
# The BG/P torus DMA as a VM sees it (kestrel-bgp's dma.rs): group g's page at
# DMA_BASE + g * DMA_GROUP_SIZE, the VM's own group, injection counter c's registers at
# DMA_INJ_CTR + 16 * c, and a counter's BASE register.
DMA_BASE = 0x6_0000_0000
DMA_GROUP_SIZE = 0x1000
DMA_VM_GROUP = 3
DMA_INJ_CTR = 0x400
DMA_CTR_BASE = 0x8


@dataclass(frozen=True)
class Mirror:
    """One Python constant's Rust original: `item` in package `package`, whose value must be
    `rust_value` (the Python constant in the Rust item's units). `pattern` finds the item when
    it is not a plain `[pub] [const] NAME: TYPE = VALUE;` (e.g. a struct field); `file` names the
    file where the package has several items of that name."""

    python: str
    package: str
    item: str
    rust_value: int | bytes | str
    pattern: str | None = None
    # The file's name, where the package has several items of that name.
    file: str | None = None


MIRRORS = [
    Mirror("KESTREL_RAM_MB", "kestrel-kernel", "MAX_RAM", KESTREL_RAM_MB * MIB),
    Mirror("INITRD_ADDR", "kestrel-vmm", "INITRD_GPA", INITRD_ADDR),
    Mirror("VMM_MAX_VMS", "kestrel-vmm", "MAX_VMS", VMM_MAX_VMS),
    Mirror("VMM_DEFAULT_MEM_MB", "kestrel-vmm", "LINUX_RAM", VMM_DEFAULT_MEM_MB * MIB),
    Mirror("VMM_SEGMENT_ALIGN", "kestrel-vmm", "SEGMENT_ALIGN", VMM_SEGMENT_ALIGN),
    Mirror("VMM_LOG_LINES_IN_FULL", "kestrel-vmm", "LOG_LINES_IN_FULL", VMM_LOG_LINES_IN_FULL),
    Mirror("VMM_FOCUS_ESCAPE", "kestrel-vmm", "ESCAPE", VMM_FOCUS_ESCAPE),
    Mirror("LINUX_CMDLINE", "kestrel-vmm", "DEFAULT_BOOTARGS", LINUX_CMDLINE),
    Mirror("BOOTMOD_MAGIC", "kestrel-abi", "MAGIC", BOOTMOD_MAGIC, file="bootmod.rs"),
    Mirror("BOOTMOD_NAME_LEN", "kestrel-abi", "NAME_LEN", BOOTMOD_NAME_LEN, file="bootmod.rs"),
    Mirror("BOOTARGS_LEN", "kestrel-abi", "BOOTARGS_LEN", BOOTARGS_LEN),
    Mirror("FABRIC_POLICY_MODULE", "kestrel-abi", "MODULE", FABRIC_POLICY_MODULE, file="grants.rs"),
    Mirror("HOSTILE_MAGIC", "kestrel-hostile", "HOSTILE_ARGS.magic", HOSTILE_MAGIC,
           pattern=r"HOSTILE_ARGS\s*:\s*Args\s*=\s*Args\s*\{\s*magic\s*:\s*(?P<value>[^,]+),"),
    Mirror("CHECKSUM_SEED", "kestrel-checksum", "SEED", CHECKSUM_SEED),
    Mirror("CHECKSUM_WORDS", "kestrel-checksum", "BUF_LEN", CHECKSUM_WORDS * 4),
    Mirror("ECHO_QUIT", "kestrel-net", "QUIT", ECHO_QUIT),
    Mirror("VMDIAG_SPR_ROUNDS", "kestrel-vmdiag", "SPR_ROUNDS", VMDIAG_SPR_ROUNDS),
    Mirror("VMDIAG_TB_ROUNDS", "kestrel-vmdiag", "TB_ROUNDS", VMDIAG_TB_ROUNDS),
    Mirror("DMA_BASE", "kestrel-bgp", "BASE", DMA_BASE, file="dma.rs"),
    Mirror("DMA_GROUP_SIZE", "kestrel-bgp", "GROUP_SIZE", DMA_GROUP_SIZE, file="dma.rs"),
    Mirror("DMA_VM_GROUP", "kestrel-bgp", "VM_GROUP", DMA_VM_GROUP, file="dma.rs"),
    Mirror("DMA_INJ_CTR", "kestrel-bgp", "INJ_CTR", DMA_INJ_CTR, file="dma.rs"),
    Mirror("DMA_CTR_BASE", "kestrel-bgp", "CTR_BASE", DMA_CTR_BASE, file="dma.rs"),
]
