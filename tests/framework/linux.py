"""The project's Linux guest (guests/linux): where its images are, its command line, the VMs'
address plan, and reading a guest script's output from a console.

The guest command line starts as `LINUX_CMDLINE` natively and in every VM; the address plan is
what guests/linux/init gives VM k's interfaces for the interactive shell (the benchmark and
copy scripts bring one interface up at a time on `SCRIPT_NET`)."""
from __future__ import annotations

import gzip
from pathlib import Path

from . import console, constants
from .constants import KESTREL_RAM_MB, VMM_DEFAULT_MEM_MB
from .qemu import (ROOT, Module, Node, check_vm_memory, join_cmdline, kestrel_node, out_dir, resolve_elf,
                   shares_fabric, vmm_cmdline, vmm_image)

LINUX_DIR = ROOT / "guests" / "linux"
LINUX_OUT = LINUX_DIR / "out"
VMLINUX = LINUX_OUT / "vmlinux"
INITRAMFS = LINUX_OUT / "initramfs.cpio.gz"

# The Linux guest's command line before anything is added (natively and in a VM).
LINUX_CMDLINE = constants.LINUX_CMDLINE

# The address plan (guests/linux/init): VM k's virtio NIC is VIRTIO_NET.(k+1), its bgnet
# interface (Ethernet over the BG/P torus and collective) BGNET_NET.(k+1), both /24.
VIRTIO_NET = "10.1.0"
BGNET_NET = "10.2.0"
# The guest scripts that bring up one path at a time (guests/linux/scripts/net-common) use
# SCRIPT_NET.(k+1) on whichever interface they test; kestrel-echo answers at ECHO_IP there.
SCRIPT_NET = "10.1.0"
ECHO_IP = f"{SCRIPT_NET}.100"

# What /init prints first (the start of a script's output) and last.
BANNER = "kestrel-guest: Linux "
SCRIPT_DONE = "KESTREL-SCRIPT-DONE"


def virtio_addr(vm: int) -> str:
    """VM `vm`'s virtio NIC address."""
    return f"{VIRTIO_NET}.{vm + 1}"


def bgnet_addr(vm: int) -> str:
    """VM `vm`'s bgnet address."""
    return f"{BGNET_NET}.{vm + 1}"


def cmdline(*more: str | None, script: str | None = None) -> str:
    """The guest command line: LINUX_CMDLINE, then `more`, then kestrel.script=SCRIPT."""
    return join_cmdline(LINUX_CMDLINE, *more, f"kestrel.script={script}" if script else None)


def script_exited_line(script: str, status: int = 0) -> str:
    """/init's line after the guest script ran."""
    return f"kestrel-guest: script {script} exited with status {status}; powering off"


def script_output(console_text: str, vm: int = 0, *, keep_kestrel: bool = False) -> list[str] | None:
    """VM `vm`'s console from the last BANNER to SCRIPT_DONE (inclusive), CRs dropped; None when
    either is missing. Kestrel's own lines (root task, VMM, kernel, native programs'
    `[NAME] ` lines) are left out unless `keep_kestrel`."""
    out: list[str] | None = None
    for line in console.guest_lines(console_text, vm):
        if line.startswith(BANNER):
            out = []
        if out is None:
            continue
        if not keep_kestrel and is_kestrel_line(line):
            continue
        out.append(line)
        if line == SCRIPT_DONE:
            return out
    return None


def is_kestrel_line(line: str) -> bool:
    """A line of Kestrel's own (root task, VMM, kernel) or of a native program (`[kestrel-NAME] `)."""
    return line.startswith(("root: ", "vmm: ", "kestrel: ", "[kestrel-"))


def without_timing(lines: list[str]) -> list[str]:
    """The lines without the guest scripts' `timing:` lines (they vary from run to run)."""
    return [l for l in lines if not l.startswith("timing:")]


def native_node(script: str | None = None, *, append: str | None = None,
                mem_mb: int = VMM_DEFAULT_MEM_MB, icount: bool = False,
                console: str = "batch") -> Node:
    """The Linux guest directly on bamboo (as guests/linux/run-native.sh boots it), by default
    with the RAM a VM gets, so that both kernels size themselves alike."""
    return Node(kernel=VMLINUX, initrd=INITRAMFS, append=cmdline(append, script=script),
                mem_mb=mem_mb, icount=icount, console=console)


def vm_node(archive: Path, script: str | None = None, *, vms: int = 1, vm_mem_mb: int | None = None,
            append: str | None = None, kernel_args: list[str] = (), natives: list[str] = (),
            icount: bool = False, console: str = "batch", policy: Path | None = None,
            programs: list[Module] = (), modules: list[Module] = (), initrd: Path | None = None) -> Node:
    """The Linux guest in `vms` Kestrel VMs (as scripts/vm-linux.sh boots it), on the node's
    fabric service (unless `kernel_args` say `vmm.fabric=local`), with the native programs
    `natives` (by package name) and `programs` (named modules) beside the VMM, the fabric
    policy `policy`, more modules `modules` (e.g. `bare<i>`: VM i runs that bare-metal guest
    instead) and `kernel_args` on the Kestrel command line; the boot archive goes to
    `archive`; `initrd` replaces the guest's initramfs (e.g. one from `initramfs_with`).
    Checks that the VMs fit (LaunchError otherwise)."""
    out = out_dir()
    initrd = initrd or INITRAMFS
    programs = [*(Module(name, resolve_elf(name)) for name in natives), *programs]
    image = vmm_image(VMLINUX, initrd=initrd, cmdline=cmdline(append, script=script),
                      natives=programs, shared_fabric=shares_fabric(kernel_args), policy=policy)
    image.modules += list(modules)
    check_vm_memory(vm_mem_mb or VMM_DEFAULT_MEM_MB, vms, initrd.stat().st_size, len(image.pack()))
    return kestrel_node(image, archive, kernel=out / "kestrel-kernel",
                        append=[*vmm_cmdline(vms, vm_mem_mb), *kernel_args],
                        mem_mb=KESTREL_RAM_MB, icount=icount, console=console)


def newc_archive(files: list[tuple[str, bytes, int]]) -> bytes:
    """A cpio archive in the kernel's initramfs format (newc, `070701`) of `files`: (path
    without the leading slash, contents, mode bits such as 0o100755), owned by root, time 0,
    then the trailer. The folders must exist already (in the archive this one follows)."""
    def entry(ino: int, name: str, mode: int, data: bytes) -> bytes:
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
        head = b"070701" + b"".join(f"{v:08X}".encode() for v in fields) + name.encode() + b"\0"
        pad = lambda n: b"\0" * (-n % 4)  # noqa: E731
        return head + pad(len(head)) + data + pad(len(data))
    out = b"".join(entry(i + 1, name, mode, data) for i, (name, data, mode) in enumerate(files))
    return out + entry(0, "TRAILER!!!", 0, b"")


def initramfs_with(files: list[tuple[str, bytes, int]], out: Path, base: Path = INITRAMFS) -> Path:
    """The guest's initramfs `base` with `files` added (see `newc_archive`), written to `out`:
    the kernel unpacks concatenated compressed archives one after the other, so the files
    arrive without rebuilding the guest (e.g. a test program and its /scripts entry)."""
    data = base.read_bytes()
    data += b"\0" * (-len(data) % 4)  # zeros between archives are skipped
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data + gzip.compress(newc_archive(files), mtime=0))
    return out
