"""Kestrel's one QEMU launcher: builds every `qemu-system-ppc -M bamboo` command line, runs it
with a timeout and a console log. Python 3 standard library only.

Every test, benchmark and wrapper script that boots something goes through here (tests and
benchmarks import this module; `scripts/kestrel_qemu.py`, the command line for people and the
shell wrappers, runs `main`), so the machine, the consoles, -icount and the boot-module archive
are decided in one place. Three kinds of boot:

    kestrel_qemu.py native --kernel ELF [--initrd FILE] [--append TEXT] [--linux-append TEXT]
        Any kernel directly on bamboo: the Linux guest natively, or a bare-metal test guest.
    kestrel_qemu.py kestrel [--root] [NAME=]ELF [--program NAME=ELF]... [--module NAME=FILE]...
        The Kestrel kernel with a root task. With programs or modules the root task is the first
        module of a boot-module archive (framework/bootmod.py's format) that goes to -initrd;
        each --program NAME also goes into the kernel command line as `root.start=NAME,...`.
        With only a root task its ELF goes to -initrd as it is.
    kestrel_qemu.py vm --guest ELF [--initrd FILE] [--cmdline TEXT | --linux-append TEXT...]
                       [--vms N] [--vm-mem MB] [--program NAME=ELF]...
        A guest under Kestrel's VMM: the root task kestrel-root starts the program kestrel-vmm,
        the node's fabric service kestrel-fabric (its VMs attach there; not with
        `--append vmm.fabric=local`, which gives them a private engine) and any --program beside
        them; the guest, its initrd and its command line are modules
        `guest`, `initrd`, `bootargs`. A bare-metal guest without --initrd/--cmdline, else an OS
        kernel booted the ePAPR way. The guest kernel must be an
        ELF for 32-bit big-endian PowerPC, and the VM's RAM must hold the initrd and fit beside
        Kestrel; both are checked before QEMU starts, with the reason on failure.

--linux-append TEXT (repeatable; native and vm) makes the guest command line the Linux guest's
(framework/linux.py's LINUX_CMDLINE) followed by the texts; empty texts are left out.
Options common to all: --mem MB (QEMU's RAM), --icount (`-icount shift=0,sleep=off`,
instruction-driven deterministic guest time), --timeout SECS (0: none), --log FILE (the
console, also on stdout), --interactive (keyboard input to the console, Ctrl-C to the guest,
Ctrl-A x quits), --console monitor (QEMU paused with its monitor on stdin/stdout, UARTs
unconnected), --expect LINE (fail unless the log has this line), --print (print the command line
and exit), and `-- ARGS` for QEMU itself (an `-append X` there is merged into the kernel command
line). Exit status: QEMU's, 124 when the timeout ran out, 2 for a usage or input error.

Several linked nodes (the BG/P torus and collective networks) will be several `Node`s run side
by side: `Node.command()` builds one QEMU process, and a link between nodes is a pair of QEMU
socket backends in the two nodes' `extra` arguments; `run()` takes one node today.
"""
from __future__ import annotations

import argparse
import os
import shlex
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import bootmod
from .console import has_line
from .constants import (FABRIC_POLICY_MODULE, INITRD_ADDR, KESTREL_RAM_MB, MIB, VMM_DEFAULT_MEM_MB, VMM_MAX_VMS,
                        VMM_SEGMENT_ALIGN)

ROOT = Path(__file__).resolve().parent.parent.parent
QEMU = os.environ.get("KESTREL_QEMU", "qemu-system-ppc")
# Smallest RAM for an OS guest: the initrd starts at 25 MiB and the kernel needs room above it.
VM_MIN_MEM_MB = 32
# What the kernel, the root task's pages and the VMM's own frames take above the archive; measured
# with `vm` runs (see tests/unit/test_qemu.py), with room to spare.
KESTREL_OVERHEAD = 4 * MIB


class LaunchError(Exception):
    """An input the launcher cannot boot; the message says what to fix."""


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def out_dir() -> Path:
    """Where scripts/build-target.sh puts the PowerPC 440 ELF files."""
    return target_dir() / "powerpc-440-none" / "release"


def logs_dir() -> Path:
    return target_dir() / "logs"


# ---------------------------------------------------------------------------------------------
# Command lines


@dataclass
class Node:
    """One QEMU `-M bamboo` machine: what it boots and how its console is connected."""

    kernel: Path
    initrd: Path | None = None
    append: str | None = None
    mem_mb: int = 128
    icount: bool = False
    # batch: UART0 on stdout; interactive: UART0 on the terminal (input too) with QEMU's
    # Ctrl-A mux; monitor: paused (-S), UARTs unconnected, the monitor on stdin/stdout.
    console: str = "batch"
    extra: list[str] = field(default_factory=list)

    def command(self, qemu: str = QEMU) -> list[str]:
        # -display none rather than -nographic, which would also put the monitor on stdio.
        # -nic none: QEMU would add an e1000 on PCI. -no-reboot turns the reset request that
        # ends every Kestrel run and every guest's power-off into QEMU exiting with status 0.
        cmd = [qemu, "-M", "bamboo", "-m", str(self.mem_mb), "-display", "none", "-nic", "none",
               "-no-reboot"]
        # -serial twice: bamboo creates UART1 only when a second backend exists.
        if self.console == "batch":
            cmd += ["-serial", "stdio", "-serial", "null", "-monitor", "none"]
        elif self.console == "interactive":
            # Ctrl-C must reach the guest, not kill QEMU (signal=off); the mux keeps Ctrl-A x.
            cmd += ["-chardev", "stdio,id=console,mux=on,signal=off", "-serial", "chardev:console",
                    "-serial", "null", "-mon", "chardev=console"]
        elif self.console == "monitor":
            cmd += ["-serial", "null", "-serial", "null", "-S", "-monitor", "stdio"]
        else:
            raise LaunchError(f"unknown console {self.console!r} (batch, interactive, monitor)")
        if self.icount:
            cmd += ["-icount", "shift=0,sleep=off"]
        cmd += ["-kernel", str(self.kernel)]
        if self.initrd is not None:
            cmd += ["-initrd", str(self.initrd)]
        if self.append is not None:
            cmd += ["-append", self.append]
        return cmd + list(self.extra)


def split_append(extra: list[str]) -> tuple[list[str], list[str]]:
    """(the values of every `-append X` in extra QEMU arguments, the other arguments)."""
    appends, rest = [], []
    it = iter(extra)
    for arg in it:
        if arg in ("-append", "--append"):
            value = next(it, None)
            if value is None:
                raise LaunchError(f"{arg} at the end of the QEMU arguments needs a value")
            appends.append(value)
        else:
            rest.append(arg)
    return appends, rest


def join_cmdline(*parts: str | None) -> str | None:
    """The non-empty parts joined by spaces, or None when there are none (then no -append)."""
    words = [p.strip() for p in parts if p and p.strip()]
    return " ".join(words) if words else None


# ---------------------------------------------------------------------------------------------
# Kestrel boot images


@dataclass
class Module:
    """One boot module: a name (at most 23 bytes) and either a file or literal bytes."""

    name: str
    path: Path | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        try:
            return self.path.read_bytes()
        except OSError as err:
            raise LaunchError(f"module {self.name}: cannot read {self.path}: {err.strerror}") from err


def parse_named(arg: str, what: str) -> tuple[str, str]:
    """`NAME=VALUE` -> (NAME, VALUE), with a message naming `what` on a bad argument."""
    name, sep, value = arg.partition("=")
    if not sep or not name or not value:
        raise LaunchError(f"{what} wants NAME=VALUE, got {arg!r}")
    if len(name.encode()) >= bootmod.NAME_LEN:
        raise LaunchError(f"{what}: module name {name!r} is longer than {bootmod.NAME_LEN - 1} bytes")
    if "," in name or " " in name:
        raise LaunchError(f"{what}: module name {name!r} may not contain ',' or ' '")
    return name, value


def resolve_elf(arg: str) -> Path:
    """An ELF path, or a package name (no slash, no such file) in the target ELF folder."""
    path = Path(arg)
    if not path.exists() and "/" not in arg:
        path = out_dir() / arg
    if not path.is_file():
        raise LaunchError(f"no ELF file at {path} (build it: scripts/build-target.sh)")
    return path


@dataclass
class BootImage:
    """What Kestrel's -initrd carries: the root task, the programs it starts, data modules."""

    root: Module
    programs: list[Module] = field(default_factory=list)
    modules: list[Module] = field(default_factory=list)

    def is_plain(self) -> bool:
        """A root task alone goes to -initrd as its own ELF, without an archive."""
        return not self.programs and not self.modules

    def cmdline(self) -> str | None:
        """What the kernel command line must say for this image: the programs to start."""
        if not self.programs:
            return None
        return "root.start=" + ",".join(p.name for p in self.programs)

    def pack(self) -> bytes:
        mods = [self.root, *self.programs, *self.modules]
        names = [m.name for m in mods]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise LaunchError(f"module name(s) {', '.join(dup)} given twice")
        try:
            return bootmod.pack([(m.name, m.read()) for m in mods])
        except ValueError as err:
            raise LaunchError(str(err)) from err

    def initrd(self, archive: Path) -> Path:
        """The file for -initrd: the root ELF itself, or the archive written to `archive`."""
        if self.is_plain():
            assert self.root.path is not None
            return self.root.path
        data = self.pack()
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(data)
        return archive


def kestrel_kernel() -> Path:
    return Path(os.environ.get("KESTREL_KERNEL", out_dir() / "kestrel-kernel"))


def kestrel_node(image: BootImage, archive: Path, *, kernel: Path | None = None,
                 append: list[str] = (), mem_mb: int = 128, icount: bool = False,
                 console: str = "batch", extra: list[str] = ()) -> Node:
    """The Kestrel kernel with `image` (written to `archive` when it is one)."""
    kernel = kernel or kestrel_kernel()
    if not kernel.is_file():
        raise LaunchError(f"no kernel ELF at {kernel} (build it: scripts/build-target.sh)")
    more, rest = split_append(list(extra))
    cmdline = join_cmdline(image.cmdline(), *append, *more)
    return Node(kernel=kernel, initrd=image.initrd(archive), append=cmdline, mem_mb=mem_mb,
                icount=icount, console=console, extra=rest)


def linux_personality_image(programs: list[tuple[str, Path]], *,
                            server: Path | None = None) -> tuple[BootImage, list[str]]:
    """Static Linux executables run natively by the personality server kestrel-linux
    (docs/adr/0034-linux-personality.md): (the boot image, the kernel command-line words).
    The root task starts kestrel-linux, which runs `programs` (module names, files) in order."""
    server = server or out_dir() / "kestrel-linux"
    image = BootImage(root=Module("kestrel-root", out_dir() / "kestrel-root"),
                      programs=[Module("kestrel-linux", server)],
                      modules=[Module(name, path) for name, path in programs])
    return image, ["linux.run=" + ",".join(name for name, _ in programs)]


def linux_job_image(program: Path, ranks: int, *, name: str | None = None,
                    args: list[str] = (), fabric: bool = True,
                    server: Path | None = None) -> tuple[BootImage, list[str]]:
    """A job (docs/adr/0034-linux-personality.md, `linux.job=`): `ranks` ranks of the static
    Linux executable `program` (module `name`, default its file name) run at once by
    kestrel-linux, beside the node's fabric service kestrel-fabric unless `fabric` is false;
    `args` go to every rank's argv (words without spaces or commas). Returns the boot image
    and the kernel command-line words."""
    server = server or out_dir() / "kestrel-linux"
    name = name or program.name
    if not program.is_file():
        raise LaunchError(f"the program: no such file: {program}")
    check_linux_elf(program)
    for a in args:
        if not a or any(c in a for c in " ,\t"):
            raise LaunchError(f"program argument {a!r}: Kestrel passes words without spaces or commas")
    programs = []
    if fabric:
        service = out_dir() / FABRIC_SERVICE
        if not service.is_file():
            raise LaunchError(f"no {FABRIC_SERVICE} at {service} (build it: scripts/build-target.sh "
                              "-p kestrel-fabric-service)")
        programs.append(Module(FABRIC_SERVICE, service))
    programs.append(Module("kestrel-linux", server))
    image = BootImage(root=Module("kestrel-root", out_dir() / "kestrel-root"),
                      programs=programs, modules=[Module(name, program)])
    words = [f"linux.job={name}:{ranks}"]
    if args:
        words.append("linux.args=" + ",".join(args))
    return image, words


def check_linux_elf(path: Path) -> None:
    """Fails unless `path` is a static 32-bit big-endian PowerPC executable (ET_EXEC, no
    PT_INTERP), what kestrel-linux runs."""
    data = path.read_bytes()[:4096]
    if data[:4] != b"\x7fELF" or len(data) < 52 or data[4] != 1 or data[5] != 2:
        raise LaunchError(f"{path}: not a 32-bit big-endian ELF file")
    etype, machine = struct.unpack(">HH", data[16:20])
    if machine != 20:
        raise LaunchError(f"{path}: an ELF for machine {machine}, not PowerPC (20)")
    if etype != 2:
        raise LaunchError(f"{path}: not a static executable (ELF type {etype}); link it with -static")
    phoff, = struct.unpack(">I", data[28:32])
    phentsize, phnum = struct.unpack(">HH", data[42:46])
    for i in range(phnum):
        o = phoff + i * phentsize
        if o + 4 <= len(data) and struct.unpack(">I", data[o:o + 4])[0] == 3:  # PT_INTERP
            raise LaunchError(f"{path}: dynamically linked; link it with -static")


# ---------------------------------------------------------------------------------------------
# Guests under kestrel-vmm


def check_guest_elf(path: Path, what: str = "the guest kernel") -> None:
    """Fails unless `path` is an ELF for 32-bit big-endian PowerPC (what QEMU's -kernel and the
    VMM load), saying what is wrong."""
    if not path.exists():
        raise LaunchError(f"{what}: no such file: {path}")
    if not path.is_file():
        raise LaunchError(f"{what}: not a file: {path}")
    with path.open("rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise LaunchError(f"{what}: {path} is not an ELF file; boot the `vmlinux` ELF from the "
                          "kernel's build folder (a zImage, uImage or cuImage does not boot)")
    if len(head) < 20 or head[4] != 1 or head[5] != 2:
        bits = {1: "32", 2: "64"}.get(head[4] if len(head) > 4 else 0, "?")
        order = {1: "little", 2: "big"}.get(head[5] if len(head) > 5 else 0, "?")
        raise LaunchError(f"{what}: {path} is a {bits}-bit {order}-endian ELF; Kestrel boots "
                          "32-bit big-endian PowerPC kernels")
    (machine,) = struct.unpack(">H", head[18:20])
    if machine != 20:  # EM_PPC
        raise LaunchError(f"{what}: {path} is an ELF for machine {machine}, not PowerPC (20); "
                          "build the kernel with ARCH=powerpc for the 440 (e.g. 44x/bamboo_defconfig)")


def align_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def check_vm_memory(mem_mb: int, vms: int, initrd_len: int, archive_len: int) -> None:
    """Fails unless `vms` OS guests of `mem_mb` MiB each fit: each VM's RAM must hold the
    initrd at 25 MiB, and all of them must fit in Kestrel's RAM beside the kernel, the archive
    (loaded at 25 MiB too) and the VMM, each VM on a 16 MiB boundary."""
    if not 1 <= vms <= VMM_MAX_VMS:
        raise LaunchError(f"--vms {vms}: kestrel-vmm runs 1 to {VMM_MAX_VMS} VMs")
    need = max(VM_MIN_MEM_MB, -(-(INITRD_ADDR + initrd_len) // MIB) + 8)
    if mem_mb < need:
        raise LaunchError(
            f"--mem {mem_mb}: too small; the guest's initrd ({initrd_len >> 10} KiB) is loaded at "
            f"{INITRD_ADDR >> 20} MiB and the kernel needs room above it: give at least {need} MiB")
    first = align_up(INITRD_ADDR + archive_len + KESTREL_OVERHEAD, VMM_SEGMENT_ALIGN)
    room = KESTREL_RAM_MB * MIB - first
    # Every VM after the first starts on the next 16 MiB boundary.
    most = (room - (vms - 1) * VMM_SEGMENT_ALIGN) // vms // MIB
    if mem_mb > most:
        raise LaunchError(
            f"--mem {mem_mb}: too large; Kestrel has {KESTREL_RAM_MB} MiB, of which the kernel, "
            f"the boot archive ({archive_len >> 20} MiB) and the VMM leave {room >> 20} MiB, so "
            f"{vms} VM(s) get at most {most} MiB each")


# The node's fabric service: vmm_image starts it beside the VMM, and the VMM's VMs attach there
# (ADR 0032) unless the kernel command line says this.
FABRIC_SERVICE = "kestrel-fabric"
# Ready-made fabric policies (fabric/policies/*.policy).
POLICIES = ROOT / "fabric" / "policies"
PRIVATE_FABRIC = "vmm.fabric=local"


def shares_fabric(kernel_args: list[str] | tuple[str, ...] | str | None) -> bool:
    """Whether a VM run with these Kestrel command-line words wants the node's fabric service
    (everything but `vmm.fabric=local`, which gives the VMs a private engine)."""
    if kernel_args is None:
        return True
    text = kernel_args if isinstance(kernel_args, str) else " ".join(kernel_args)
    return PRIVATE_FABRIC not in text.split()


def vmm_image(guest: Path, *, initrd: Path | None = None, cmdline: str | None = None,
              dtb: Path | None = None, vmm: Path | None = None, root: Path | None = None,
              natives: list[Module] = (), fabric: Path | None = None,
              shared_fabric: bool = True, policy: Path | None = None) -> BootImage:
    """The root task (kestrel-root) starting kestrel-vmm, the node's fabric service
    kestrel-fabric (unless `shared_fabric` is false or `natives` has it already: the VMs and
    the native programs then share it) and any native programs beside them, with the guest's
    modules (names: ukernel/tasks/root and vmm/task/src/main.rs). With `shared_fabric` false
    the kernel command line should say `vmm.fabric=local` (see `shares_fabric`). `policy` is
    the node's fabric policy (module `fabric-policy`, kestrel_abi::grants; default: VMs and
    native programs on partitions of their own)."""
    root = root or out_dir() / "kestrel-root"
    vmm = vmm or out_dir() / "kestrel-vmm"
    needed = [(root, "kestrel-root", "kestrel-root"), (vmm, "kestrel-vmm", "kestrel-vmm")]
    service: list[Module] = []
    if shared_fabric and not any(n.name == FABRIC_SERVICE for n in natives):
        fabric = fabric or out_dir() / FABRIC_SERVICE
        needed.append((fabric, FABRIC_SERVICE, "kestrel-fabric-service"))
        service = [Module(FABRIC_SERVICE, fabric)]
    for path, name, pkg in needed:
        if not path.is_file():
            raise LaunchError(f"no {name} at {path} (build it: scripts/build-target.sh -p {pkg})")
    mods = [Module("guest", guest)]
    if initrd is not None:
        if not initrd.is_file():
            raise LaunchError(f"the initrd: no such file: {initrd}")
        mods.append(Module("initrd", initrd))
    if cmdline is not None:
        mods.append(Module("bootargs", data=cmdline.encode()))
    if dtb is not None:
        mods.append(Module("dtb", dtb))
    if policy is not None:
        mods.append(policy_module(policy))
    return BootImage(root=Module("kestrel-root", root),
                     programs=[Module("kestrel-vmm", vmm), *service, *natives], modules=mods)


def policy_module(path: Path) -> Module:
    """The boot module holding the node's fabric policy (a file like fabric/policies/*)."""
    if not path.is_file():
        raise LaunchError(f"the fabric policy: no such file: {path}")
    return Module(FABRIC_POLICY_MODULE, path)


def vmm_cmdline(vms: int | None, vm_mem_mb: int | None) -> list[str]:
    """kestrel-vmm's options on the kernel command line."""
    out = []
    if vms is not None:
        out.append(f"vmm.vms={vms}")
    if vm_mem_mb is not None:
        out.append(f"vmm.mem={vm_mem_mb}")
    return out


# ---------------------------------------------------------------------------------------------
# Running


def say(msg: str) -> None:
    print(f"kestrel-qemu: {msg}", file=sys.stderr, flush=True)


def run(node: Node, *, timeout: int, log: Path, stdin_null: bool = False,
        quiet: bool = False, echo: bool = True, qemu: str = QEMU) -> int:
    """Runs QEMU with its console (its stdout and stderr) in `log` and, with `echo`, on our
    stdout; `quiet` drops the progress lines on stderr.

    Returns QEMU's exit status, or 124 when it was still running after `timeout` seconds
    (0: no limit) and was stopped."""
    cmd = node.command(qemu)
    if timeout > 0:
        # --foreground keeps QEMU in the terminal's process group (an interactive QEMU would
        # stop on SIGTTIN otherwise, and Ctrl-C would not reach it); --kill-after covers a QEMU
        # that ignores SIGTERM.
        cmd = ["timeout", "--foreground", "--kill-after=5", str(timeout), *cmd]
    log.parent.mkdir(parents=True, exist_ok=True)
    if not quiet:
        say(shlex.join(node.command(qemu)))
        say(f"timeout {timeout}s (0: none), log {log}")
    start = time.monotonic()
    with log.open("wb") as sink:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL if stdin_null else None,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except FileNotFoundError as err:
            raise LaunchError(f"{err.filename} not found: run scripts/setup.sh") from err
        out = sys.stdout.buffer if echo else None
        try:
            while True:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                sink.write(chunk)
                if out is not None:
                    out.write(chunk)
                    out.flush()
            status = proc.wait()
        except KeyboardInterrupt:
            # QEMU got the same SIGINT (same process group); let it finish.
            status = proc.wait()
        finally:
            proc.stdout.close()
    if timeout > 0 and (status == 124 or (status == 137 and time.monotonic() - start >= timeout)):
        say(f"TIMEOUT: QEMU still running after {timeout}s and was stopped (log: {log})")
        return 124
    if status != 0 and not quiet:
        say(f"QEMU exited with status {status} (log: {log})")
    return status


def run_captured(node: Node, *, timeout: int, log: Path) -> tuple[int, str]:
    """Runs a batch node without a keyboard or any output of ours: (status, console text)."""
    status = run(node, timeout=timeout, log=log, stdin_null=True, quiet=True, echo=False)
    return status, log.read_text(errors="replace")


# ---------------------------------------------------------------------------------------------
# Command line interface


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kestrel_qemu.py", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--mem", type=int, metavar="MB", help="QEMU's RAM in MiB")
    common.add_argument("--icount", action="store_true", help="-icount shift=0,sleep=off")
    common.add_argument("--timeout", type=int, default=60, metavar="SECS", help="0: none (60)")
    common.add_argument("--log", type=Path, metavar="FILE", help="console log (target/logs/...)")
    common.add_argument("--interactive", action="store_true", help="keyboard input to the console")
    common.add_argument("--console", choices=("batch", "interactive", "monitor"))
    common.add_argument("--expect", action="append", default=[], metavar="LINE",
                        help="fail (status 1) unless the log has this line")
    common.add_argument("--print", action="store_true", help="print the QEMU command and exit")
    common.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    common.add_argument("--hint", metavar="TEXT", help="a line for the user once QEMU starts")
    sub = ap.add_subparsers(dest="mode", required=True)

    nat = sub.add_parser("native", parents=[common], help="a kernel directly on bamboo")
    nat.add_argument("--kernel", required=True, type=Path, metavar="ELF")
    nat.add_argument("--initrd", type=Path, metavar="FILE")
    nat.add_argument("--append", metavar="TEXT")
    nat.add_argument("--linux-append", action="append", metavar="TEXT",
                     help="the Linux guest's command line plus TEXT (repeatable)")

    kes = sub.add_parser("kestrel", parents=[common], help="the Kestrel kernel with a root task")
    kes.add_argument("root_pos", nargs="?", metavar="ROOT", help="same as --root")
    kes.add_argument("--root", metavar="[NAME=]ELF", help="the root task (a path or package name)")
    kes.add_argument("--program", action="append", default=[], metavar="NAME=ELF")
    kes.add_argument("--module", action="append", default=[], metavar="NAME=FILE")
    kes.add_argument("--module-text", action="append", default=[], metavar="NAME=TEXT")
    kes.add_argument("--kernel", type=Path, metavar="ELF", help="the Kestrel kernel")
    kes.add_argument("--append", action="append", default=[], metavar="TEXT",
                     help="kernel command line (repeatable; joined by spaces)")
    kes.add_argument("--archive", type=Path, metavar="FILE", help="where to write the archive")

    vm = sub.add_parser("vm", parents=[common], help="a guest under kestrel-vmm")
    vm.add_argument("--guest", required=True, metavar="ELF", help="a path or package name")
    vm.add_argument("--initrd", type=Path, metavar="FILE")
    vm.add_argument("--cmdline", metavar="TEXT", help="the guest's command line")
    vm.add_argument("--linux-append", action="append", metavar="TEXT",
                    help="the guest command line is the Linux guest's plus TEXT (repeatable)")
    vm.add_argument("--dtb", type=Path, metavar="FILE", help="a device tree instead of the VMM's")
    vm.add_argument("--vms", type=int, metavar="N", help=f"VMs at once (1-{VMM_MAX_VMS})")
    vm.add_argument("--vm-mem", type=int, metavar="MB", help="each OS guest's RAM in MiB (64)")
    vm.add_argument("--vmm", type=Path, metavar="ELF", help="kestrel-vmm")
    vm.add_argument("--root", type=Path, metavar="ELF", help="the root task (kestrel-root)")
    vm.add_argument("--program", action="append", default=[], metavar="NAME=ELF",
                    help="a native program the root task starts beside the VMM")
    vm.add_argument("--module", action="append", default=[], metavar="NAME=FILE",
                    help="a data module (e.g. a Linux program for kestrel-linux's linux.job=)")
    vm.add_argument("--fabric-policy", type=Path, metavar="FILE",
                    help="the node's fabric policy (fabric/policies/; default: VMs and native "
                         "programs apart)")
    vm.add_argument("--kernel", type=Path, metavar="ELF", help="the Kestrel kernel")
    vm.add_argument("--append", action="append", default=[], metavar="TEXT",
                    help="Kestrel kernel command line")
    vm.add_argument("--archive", type=Path, metavar="FILE", help="where to write the archive")
    return ap


def linux_cmdline(texts: list[str] | None) -> str | None:
    """The Linux guest's command line plus `texts`, or None without --linux-append."""
    if texts is None:
        return None
    from .linux import cmdline  # here: framework.linux imports this module
    return cmdline(*texts)


def default_log(name: str) -> Path:
    return logs_dir() / f"{name}.log"


def node_from_args(args: argparse.Namespace, extra: list[str]) -> tuple[Node, Path]:
    """The node and its log path for parsed command-line arguments."""
    console = args.console or ("interactive" if args.interactive else "batch")
    if args.mem is not None and args.mem <= 0:
        raise LaunchError(f"--mem wants megabytes, got {args.mem}")
    if args.mode == "native":
        if not args.kernel.is_file():
            raise LaunchError(f"no kernel at {args.kernel}")
        if args.initrd is not None and not args.initrd.is_file():
            raise LaunchError(f"no initrd at {args.initrd}")
        log = args.log or default_log(f"native-{args.kernel.name}")
        more, rest = split_append(extra)
        base = linux_cmdline(args.linux_append)
        node = Node(kernel=args.kernel, initrd=args.initrd, append=join_cmdline(base, args.append, *more),
                    mem_mb=args.mem or 128, icount=args.icount, console=console, extra=rest)
        return node, log
    if args.mode == "kestrel":
        root_arg = args.root or args.root_pos
        if not root_arg or (args.root and args.root_pos):
            raise LaunchError("give exactly one root task (ROOT or --root)")
        name, sep, path = root_arg.partition("=")
        root_path = resolve_elf(path if sep else root_arg)
        root = Module(name if sep else root_path.name[: bootmod.NAME_LEN - 1], root_path)
        programs = [Module(n, resolve_elf(v)) for n, v in
                    (parse_named(a, "--program") for a in args.program)]
        modules = [Module(n, Path(v)) for n, v in (parse_named(a, "--module") for a in args.module)]
        modules += [Module(n, data=v.encode()) for n, v in
                    (parse_named(a, "--module-text") for a in args.module_text)]
        image = BootImage(root=root, programs=programs, modules=modules)
        log = args.log or default_log(root_path.name)
        archive = args.archive or log.with_suffix(".bootmod")
        node = kestrel_node(image, archive, kernel=args.kernel, append=args.append,
                            mem_mb=args.mem or 128, icount=args.icount, console=console, extra=extra)
        return node, log
    # vm
    guest = resolve_elf(args.guest) if "/" not in args.guest else Path(args.guest)
    check_guest_elf(guest)
    if args.linux_append is not None:
        if args.cmdline is not None:
            raise LaunchError("give --cmdline (the whole guest command line) or --linux-append, not both")
        args.cmdline = linux_cmdline(args.linux_append)
    natives = [Module(n, resolve_elf(v)) for n, v in
               (parse_named(a, "--program") for a in args.program)]
    image = vmm_image(guest, initrd=args.initrd, cmdline=args.cmdline, dtb=args.dtb, vmm=args.vmm,
                      root=args.root, natives=natives, policy=args.fabric_policy,
                      shared_fabric=shares_fabric([*args.append, *split_append(list(extra))[0]]))
    image.modules += [Module(n, Path(v)) for n, v in
                      (parse_named(a, "--module") for a in args.module)]
    os_guest = args.initrd is not None or args.cmdline is not None or args.dtb is not None
    if args.vm_mem is not None and not os_guest:
        raise LaunchError("--vm-mem sizes an OS guest's RAM (give --initrd or --cmdline); "
                          "a bare-metal guest always gets 32 MiB")
    if os_guest:
        initrd_len = args.initrd.stat().st_size if args.initrd is not None else 0
        check_vm_memory(args.vm_mem or VMM_DEFAULT_MEM_MB, args.vms or 1, initrd_len,
                        len(image.pack()))
    elif args.vms is not None and not 1 <= args.vms <= VMM_MAX_VMS:
        raise LaunchError(f"--vms {args.vms}: kestrel-vmm runs 1 to {VMM_MAX_VMS} VMs")
    log = args.log or default_log(f"vm-{guest.name}")
    archive = args.archive or log.with_suffix(".bootmod")
    node = kestrel_node(image, archive, kernel=args.kernel,
                        append=[*vmm_cmdline(args.vms, args.vm_mem), *args.append],
                        mem_mb=args.mem or (KESTREL_RAM_MB if os_guest else 128),
                        icount=args.icount, console=console, extra=extra)
    return node, log


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` goes to QEMU as it is.
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = parser().parse_args(argv)
    try:
        if args.timeout < 0:
            raise LaunchError(f"--timeout wants whole seconds, got {args.timeout}")
        node, log = node_from_args(args, extra)
        if args.print:
            print(shlex.join(node.command()))
            return 0
        if args.hint:
            say(args.hint)
        status = run(node, timeout=args.timeout, log=log, quiet=args.quiet)
    except LaunchError as err:
        print(f"kestrel-qemu: error: {err}", file=sys.stderr)
        return 2
    if status == 0 and args.expect:
        text = log.read_text(errors="replace")
        missing = [e for e in args.expect if not has_line(text, e)]
        if missing:
            say(f"the log does not show: {'; '.join(missing)} (log: {log})")
            return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
