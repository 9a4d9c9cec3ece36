#!/usr/bin/env python3
"""Instruction-level profile of one iteration of a benchmark loop (the VMM or IPC round trip).

Usage:
    bench/insn_profile.py vmm [--skip N] [--listing]    # exitbench's mfdcr loop, in a VM
    bench/insn_profile.py ipc [--skip N] [--listing]    # ipcbench's inter-space call loop
    bench/insn_profile.py fabric [--skip N] [--listing] # one native call to the fabric service
    bench/insn_profile.py mpi [--size B] [--skip N] [--listing]  # one MPI message between 2 ranks
    bench/insn_profile.py npmpi [--size B] [--skip N] [--listing]  # one NPmpi round trip (C face)

Runs QEMU with `-singlestep -d exec,nochain` (one translation block per guest instruction,
each execution logged), streams the log through a FIFO, and once the trigger instruction
(exitbench's `mfdcr` of the UIC, the `sc` of ipcbench's client, or for `fabric` the `sc`
of kestrel-fabric-ranks's IPC in its `ranks.bench=` loop of DMA register reads, for `mpi` the
entry of `Mpi::isend_full` (Mpi::send) in mpibench's ping-pong of `--size` bytes (8), once per one-way message) has executed `--skip`
times, records every executed pc up to its next execution: one round trip. The pcs are mapped
to symbols of the ELF files (kernel, VMM or ipcbench, guest; `powerpc-linux-gnu-nm`) and
printed as a per-symbol breakdown in execution order (consecutive pcs in one symbol form one
run), plus the total. `--listing` also prints every pc. Counts are instructions, the unit of
`just bench exits` and `just bench ipc` (an instruction that traps counts once). Python 3
standard library only; takes a minute or two (the boot runs single-stepped too).
"""
from __future__ import annotations

import argparse
import bisect
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from framework import qemu  # noqa: E402

NM = "powerpc-linux-gnu-nm"
OBJDUMP = "powerpc-linux-gnu-objdump"
TRACE_RE = re.compile(rb"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")


class Symbols:
    """Address -> symbol over several ELF files. Files linked at overlapping addresses (two
    programs) each name the pc, joined by " | "; a pc inside none is "?"."""

    def __init__(self, elves: list[tuple[str, Path]]):
        self.tables: list[tuple[list[int], list[str]]] = []
        for tag, elf in elves:
            out = subprocess.run([NM, "-n", "-C", str(elf)], check=True, capture_output=True,
                                 text=True).stdout
            rows = []
            for line in out.splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[1] in "tTwW":
                    rows.append((int(parts[0], 16), f"{tag}:{parts[2]}"))
            rows.sort()
            self.tables.append(([a for a, _ in rows], [n for _, n in rows]))

    def name(self, pc: int) -> str:
        names = []
        for addrs, syms in self.tables:
            i = bisect.bisect_right(addrs, pc) - 1
            # Within a file's text: past its last symbol by at most 64 KiB.
            if i >= 0 and pc - addrs[i] < 0x10000:
                names.append(syms[i])
        return " | ".join(names) if names else "?"


def insn_addrs(elf: Path, mnemonic: str) -> set[int]:
    """Addresses of every `mnemonic` instruction in `elf`."""
    out = subprocess.run([OBJDUMP, "-d", "-M", "440", str(elf)], check=True, capture_output=True,
                         text=True).stdout
    found = set()
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} ){4}\s*(\S+)", line)
        if m and m.group(2) == mnemonic:
            found.add(int(m.group(1), 16))
    return found


def sc_in(elf: Path, function: str) -> set[int]:
    """Addresses of the `sc` instructions inside symbols whose name contains `function`."""
    out = subprocess.run([OBJDUMP, "-d", "-C", "-M", "440", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    found, inside = set(), False
    for line in out.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if head:
            inside = function in head.group(1)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} ){4}\s*sc\b", line)
        if inside and m:
            found.add(int(m.group(1), 16))
    return found


def symbol_entry(elf: Path, name: str) -> set[int]:
    """The addresses of the text symbols of `elf` whose demangled name contains `name`."""
    out = subprocess.run([NM, "-C", str(elf)], check=True, capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW" and name in parts[2]:
            found.add(int(parts[0], 16))
    return found


def symbol_exact(elf: Path, name: str) -> set[int]:
    """The addresses of the text symbols of `elf` named exactly `name`."""
    out = subprocess.run([NM, str(elf)], check=True, capture_output=True, text=True).stdout
    return {int(p[0], 16) for p in (line.split(" ", 2) for line in out.splitlines())
            if len(p) == 3 and p[1] in "tTwW" and p[2] == name}


def call_sites(elf: Path, targets: set[int]) -> set[int]:
    """The addresses of `elf`'s `bl` instructions to any of `targets`."""
    out = subprocess.run([OBJDUMP, "-d", str(elf)], check=True, capture_output=True,
                         text=True).stdout
    found = set()
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} ){4}\s*bl\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16) in targets:
            found.add(int(m.group(1), 16))
    return found


def capture(node: qemu.Node, trigger: set[int], skip: int, timeout: int,
            callers: set[int] | None = None) -> list[int]:
    """Runs `node` single-stepped and returns the pcs of one trigger-to-trigger period.
    With `callers`, a trigger counts only after one of those pcs (its call sites) ran since
    the last one counted (a TLB miss may come between the call and the entry): programs
    linked at the same addresses (the fabric service and a native program) may run other
    code at the trigger's address."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = Path(tmp) / "exec.log"
        os.mkfifo(fifo)
        node.extra += ["-singlestep", "-d", "exec,nochain", "-D", str(fifo)]
        cmd = ["timeout", str(timeout), *node.command()]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        seen, period, armed = 0, [], callers is None
        try:
            with open(fifo, "rb", buffering=1 << 20) as log:
                for line in log:
                    m = TRACE_RE.match(line)
                    if not m:
                        continue
                    pc = int(m.group(1), 16)
                    if callers is not None and pc in callers:
                        armed = True
                    if pc in trigger and armed:
                        armed = callers is None
                        seen += 1
                        if seen == skip + 2:
                            break
                    if seen == skip + 1:
                        period.append(pc)
        finally:
            proc.kill()
            proc.wait()
        if seen < skip + 2:
            raise SystemExit(f"insn_profile: trigger seen {seen} times, wanted {skip + 2}")
        return period


def report(period: list[int], syms: Symbols, listing: bool) -> None:
    runs: list[list] = []
    for pc in period:
        name = syms.name(pc)
        if listing:
            print(f"  {pc:08x} {name}")
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    print("in execution order (symbol, instructions):")
    for name, n in runs:
        print(f"  {n:5d}  {name}")
    totals: dict[str, int] = {}
    for name, n in runs:
        totals[name] = totals.get(name, 0) + n
    print("per symbol:")
    for name, n in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {name}")
    print(f"total: {len(period)} instructions")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("vmm", "ipc", "fabric", "mpi", "npmpi"))
    ap.add_argument("--skip", type=int, default=50, help="trigger executions to skip first")
    ap.add_argument("--listing", action="store_true", help="print every pc too")
    ap.add_argument("--size", type=int, default=8, help="mpi, npmpi: the message size")
    ap.add_argument("--max", type=int, default=0,
                    help="mpi: mpibench.max (the largest size, which sizes the ranks' windows; "
                         "default --size)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args(argv)
    out = qemu.out_dir()
    kernel = qemu.kestrel_kernel()
    log = qemu.logs_dir() / f"insn-profile-{args.what}.bootmod"
    callers: set[int] | None = None
    if args.what == "vmm":
        guest = qemu.resolve_elf("kestrel-exitbench")
        image = qemu.vmm_image(guest)
        node = qemu.kestrel_node(image, log, icount=True)
        elves = [("kernel", kernel), ("vmm", out / "kestrel-vmm"), ("guest", guest)]
        trigger = insn_addrs(guest, "mfdcr")
    elif args.what == "fabric":
        # Both programs are linked at the same addresses: a pc names a symbol of each, and
        # the report shows both (the kernel's own addresses are distinct).
        ranks = qemu.resolve_elf("kestrel-fabric-ranks")
        service = qemu.resolve_elf("kestrel-fabric")
        image = qemu.BootImage(root=qemu.Module("kestrel-root", qemu.resolve_elf("kestrel-root")),
                               programs=[qemu.Module("kestrel-fabric", service),
                                         qemu.Module("kestrel-rank0", ranks)])
        node = qemu.kestrel_node(image, log, icount=True,
                                 append=["ranks.n=1 ranks.bench=400"])
        elves = [("kernel", kernel), ("fabric", service), ("ranks", ranks)]
        trigger = sc_in(ranks, "kestrel_user::ipc::call_words")
    elif args.what == "mpi":
        # Two programs of one rank each, the same ELF: the trigger (the entry of Mpi::send)
        # runs once per one-way message, alternately in each rank.
        bench = qemu.resolve_elf("kestrel-mpibench")
        service = qemu.resolve_elf(qemu.FABRIC_SERVICE)
        image = qemu.BootImage(root=qemu.Module("kestrel-root", qemu.resolve_elf("kestrel-root")),
                               programs=[qemu.Module(qemu.FABRIC_SERVICE, service),
                                         qemu.Module("mpibench0", bench),
                                         qemu.Module("mpibench1", bench)])
        node = qemu.kestrel_node(image, log, icount=True, mem_mb=256,
                                 append=[f"mpibench.n=2 mpibench.threads=1 mpibench.min={args.size} "
                                         f"mpibench.max={args.max or args.size}",
                                         "mpibench.allreduce=0"])
        elves = [("kernel", kernel), ("fabric", service), ("mpibench", bench)]
        trigger = symbol_entry(bench, ">::isend_full")  # Mpi::send's body (inlined)
        callers = call_sites(bench, trigger)
    elif args.what == "npmpi":
        # NetPIPE's MPI module on the C face (Linux personality), one size: the trigger is
        # MPI_Send's entry from NPmpi's own call sites (one per round trip on rank 0's side).
        npmpi = qemu.ROOT / "target" / "netpipe" / "NPmpi"
        service = qemu.resolve_elf(qemu.FABRIC_SERVICE)
        image, words = qemu.linux_job_image(npmpi, 2, args=["-l", str(args.size), "-u", str(args.size),
                                                           "-p", "0", "-n", "50"])
        node = qemu.kestrel_node(image, log, icount=True, mem_mb=256, append=words)
        linux = qemu.out_dir() / "kestrel-linux"
        debug = npmpi.with_name("NPmpi.debug")  # scripts/build-npmpi.sh: with symbols
        elves = [("kernel", kernel), ("fabric", service), ("linux", linux), ("npmpi", debug)]
        trigger = {a for a in symbol_entry(debug, "MPI_Send") if a in symbol_exact(debug, "MPI_Send")}
        callers = call_sites(debug, trigger)
    else:
        task = qemu.resolve_elf("ipcbench")
        image = qemu.BootImage(root=qemu.Module("ipcbench", task))
        node = qemu.kestrel_node(image, log, icount=True)
        elves = [("kernel", kernel), ("ipcbench", task)]
        trigger = sc_in(task, "measure")
    if not trigger:
        raise SystemExit("insn_profile: no trigger instruction found")
    period = capture(node, trigger, args.skip, args.timeout, callers)
    report(period, Symbols(elves), args.listing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
