#!/usr/bin/env python3
"""The cost of the shared fabric (ADR 0032): a VM's fabric uses on the VMM's private in-process
engine (`vmm.fabric=local`) against the node's fabric service kestrel-fabric (the default).

Boots the kestrel-exitbench guest as a VM under Kestrel in both modes, each twice, under
`-icount shift=0,sleep=off` (guest instructions counted by the 400 MHz time base, 2.5 per tick).
In a VM the guest times, besides its exit benchmark:

- `dma_read`: a load from its torus DMA group page: one MMIO exit that the VMM answers with a
  `dma_read` of the fabric (in-process: a function call; service: IPC round trips), fastest of
  8 repeats of 200;
- `coll_packet`: one collective packet to itself on VC0, sent and received through the
  collective's registers (about 130 exits, the fabric's calls among them), per packet, fastest
  of 8 repeats of 4 packets (a repeat spans a few host ticks with the service; each costs a few
  thousand instructions, well under 1% of a repeat);
- `vmm_roundtrip` (the exit benchmark's mfdcr of UIC0, no fabric call) as the reference.

The cost of the shared fabric is the service's figure minus the local engine's. Writes
bench/results/shared-fabric.json and shared-fabric.md and prints the table. Fails when a run
breaks or the two runs of a mode differ; no thresholds.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from ipc import BenchError, qemu_version
from framework import bench, qemu

ROOT = Path(__file__).resolve().parent.parent
MODES = {"local": ["vmm.fabric=local"], "service": []}
FIGURES = ("vmm_roundtrip", "dma_read", "coll_packet")
LINE_RE = re.compile(r"^BENCH (?:exits|fabric) name=(\w+) per_(?:exit|op)=(\d+(?:\.\d+)?)\s*$")
COMMAND = "python3 bench/shared_fabric.py"


def parse(console: str) -> dict[str, float]:
    """The figures of FIGURES from a console log; every one must be present."""
    out = {}
    for line in console.splitlines():
        m = LINE_RE.match(line.strip())
        if m and m.group(1) in FIGURES:
            out[m.group(1)] = float(m.group(2))
    missing = [n for n in FIGURES if n not in out]
    if missing:
        raise BenchError(f"no BENCH line for {', '.join(missing)}")
    return out


def run(mode: str, index: int, timeout: int) -> dict[str, float]:
    log = qemu.logs_dir() / f"shared-fabric-{mode}-run{index}.log"
    print(f"shared_fabric.py: {mode} run {index} (log: {log})", file=sys.stderr)
    args = MODES[mode]
    try:
        image = qemu.vmm_image(qemu.resolve_elf("kestrel-exitbench"), shared_fabric=qemu.shares_fabric(args))
        node = qemu.kestrel_node(image, log.with_suffix(".bootmod"), append=args, icount=True)
    except qemu.LaunchError as err:
        raise BenchError(f"{mode} run {index}: {err}") from err
    status, console = qemu.run_captured(node, timeout=timeout, log=log)
    if status != 0:
        raise BenchError(f"{mode} run {index} exited with status {status} (log: {log})")
    want = ("the node's service kestrel-fabric" if mode == "service" else "vmm.fabric=local")
    if not any(l.startswith("vmm: ") and want in l for l in console.splitlines()):
        raise BenchError(f"{mode} run {index}: the VMM's fabric line does not say {want!r} (log: {log})")
    return parse(console)


def markdown(s: dict) -> str:
    rows = []
    names = {"vmm_roundtrip": "VMM round trip (mfdcr UIC0, no fabric call), per exit",
             "dma_read": "DMA register read (one `dma_read`), per exit",
             "coll_packet": "collective packet to itself (about 130 exits), per packet"}
    for n in FIGURES:
        lo, sv = s["local"][n], s["service"][n]
        rows.append((names[n], lo, sv, round(sv - lo, 2), f"{sv / lo:.2f}x"))
    lines = ["# The cost of the shared fabric", "",
             f"Produced by `{COMMAND}` (`just bench shared-fabric`) at commit {s['commit']} ({s['qemu']}); guest instructions "
             "under `-icount shift=0,sleep=off`, two identical runs per mode. `local`: the VMM's "
             "private in-process engine (`vmm.fabric=local`); `service`: the node's fabric service "
             "kestrel-fabric, shared with the native programs (the default since ADR 0032). "
             "Method: bench/shared_fabric.py's docstring.", ""]
    lines += bench.md_table(("what", "local", "service", "service - local", "service / local"),
                            rows, "lrrrr")
    lines += ["", "Not measured here: a torus packet moved by a VM. Its packets move inside the engine "
              "without an exit; a VM pays the fabric per DMA register access (the `dma_read` row) for "
              "each batch of descriptors it injects and each reception FIFO it drains. A native "
              "program's 240-byte memory-FIFO message to itself through the service is in "
              "`fabric.md` (one-off, before issues 17 and 18)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "shared-fabric.json")
    args = parser.parse_args(argv)
    try:
        if not args.no_build:
            subprocess.run([str(ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel", "-p", "kestrel-root",
                            "-p", "kestrel-vmm", "-p", "kestrel-fabric-service", "-p", "kestrel-exitbench"],
                           check=True)
        runs = {m: [run(m, i, args.timeout) for i in (1, 2)] for m in MODES}
        for m, (a, b) in runs.items():
            if a != b:
                raise BenchError(f"the two {m} runs differ: {a} vs {b}")
    except (subprocess.CalledProcessError, BenchError) as err:
        print(f"shared_fabric.py: FAILED: {err}", file=sys.stderr)
        return 1
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    summary = {
        "local": runs["local"][0],
        "service": runs["service"][0],
        "cost_of_service": {n: round(runs["service"][0][n] - runs["local"][0][n], 2) for n in FIGURES},
        "units": "guest instructions (per exit for vmm_roundtrip and dma_read, per packet for coll_packet)",
        "command": COMMAND,
        "commit": commit,
        "qemu": qemu_version(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    md = markdown(summary)
    args.output.with_suffix(".md").write_text(md)
    print(md)
    print(f"(two runs per mode identical; written to {args.output} and .md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
