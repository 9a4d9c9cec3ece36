#!/usr/bin/env python3
"""IPC round-trip benchmark driver: boots the ipcbench root task under QEMU and records results.

Usage: bench/ipc.py [--no-build] [--timeout SECS] [--output FILE]

Runs ipcbench twice under `-icount shift=0`, where guest time is driven by executed
instructions, so both runs must report identical figures (the script fails otherwise). The
task itself converts timebase ticks into instructions (0.4 ticks per instruction under
-icount, docs/TESTING.md) and prints one line per variant:

    BENCH ipc name=<inter|intra> iterations=<n> instructions=<total> roundtrip_instructions=<x.y>

The figures go to bench/results/ipc.json (committed, so changes show up in review) and a
table on stdout. Missing the target is reported, never a failure: benchmarks are not tests.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from framework import bench, qemu  # noqa: E402  (tests/framework: the launcher, bench helpers)
from framework.bench import BenchError, qemu_version  # noqa: E402,F401  (bench/*.py import them from here)

TARGET_INSTRUCTIONS = 250
VARIANTS = ("inter", "intra")
METHOD = (
    "ipcbench root task on the Kestrel kernel, qemu-system-ppc -M bamboo -icount shift=0,sleep=off; "
    "guest instructions derived from the timebase (0.4 ticks per instruction); "
    "two runs must agree exactly"
)

BENCH_RE = re.compile(
    r"^BENCH ipc name=(?P<name>\S+) iterations=(?P<iterations>\d+) "
    r"instructions=(?P<instructions>\d+) "
    r"roundtrip_instructions=(?P<roundtrip>\d+(?:\.\d+)?)$"
)


def parse_bench_lines(console: str) -> dict[str, dict]:
    """Extracts the `BENCH ipc` figures from one run's console output, keyed by variant.

    Other lines are ignored, carriage returns are dropped. Fails on a kernel panic, on a
    malformed or repeated BENCH line, and when a variant is missing.
    """
    lines = [raw.rstrip("\r") for raw in console.splitlines()]
    # A panic explains whatever else looks wrong, so it is reported first.
    for line in lines:
        if line.startswith("KERNEL PANIC"):
            raise BenchError(f"kernel panic: {line}")
    results: dict[str, dict] = {}
    for line in lines:
        if not line.startswith("BENCH ipc"):
            continue
        match = BENCH_RE.match(line)
        if match is None:
            raise BenchError(f"malformed BENCH line: {line!r}")
        name = match["name"]
        if name not in VARIANTS:
            raise BenchError(f"unknown variant {name!r} in {line!r}; expected one of {VARIANTS}")
        if name in results:
            raise BenchError(f"variant {name!r} reported twice")
        iterations = int(match["iterations"])
        if iterations == 0:
            raise BenchError(f"zero iterations in {line!r}")
        results[name] = {
            "iterations": iterations,
            "instructions": int(match["instructions"]),
            "roundtrip_instructions": float(match["roundtrip"]),
        }
    missing = [v for v in VARIANTS if v not in results]
    if missing:
        raise BenchError(f"no BENCH line for {', '.join(missing)}")
    return results


def check_deterministic(runs: list[dict[str, dict]]) -> None:
    """Fails unless every run reported exactly the same figures (the point of -icount)."""
    bench.check_deterministic(runs)


def summarize(runs: list[dict[str, dict]], qemu_version: str) -> dict:
    """Builds the JSON document from deterministic runs."""
    first = runs[0]
    iterations = {v: first[v]["iterations"] for v in VARIANTS}
    distinct = set(iterations.values())
    return {
        "roundtrip_instructions_inter": first["inter"]["roundtrip_instructions"],
        "roundtrip_instructions_intra": first["intra"]["roundtrip_instructions"],
        # One number when the variants agree (the normal case), else per variant.
        "iterations": distinct.pop() if len(distinct) == 1 else iterations,
        "target": TARGET_INSTRUCTIONS,
        "method": METHOD,
        "qemu": qemu_version,
        "runs": runs,
    }


def format_table(summary: dict) -> str:
    """The human-readable result table."""
    header = ("variant", "round trip (instructions)", "target", "met?")
    rows = [header]
    for variant in VARIANTS:
        value = summary[f"roundtrip_instructions_{variant}"]
        rows.append(
            (
                variant,
                f"{value:.1f}",
                f"<= {summary['target']}",
                "yes" if value <= summary["target"] else "no",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def run_once(index: int, timeout: int) -> dict[str, dict]:
    """Boots ipcbench once under -icount and parses its console log."""
    log = qemu.logs_dir() / f"ipcbench-run{index}.log"
    print(f"ipc.py: run {index}: booting ipcbench under -icount (log: {log})", file=sys.stderr)
    try:
        root = qemu.Module("ipcbench", qemu.resolve_elf("ipcbench"))
        node = qemu.kestrel_node(
            qemu.BootImage(root=root), log.with_suffix(".bootmod"), icount=True
        )
    except qemu.LaunchError as err:
        raise BenchError(f"run {index}: {err}") from err
    status, console = qemu.run_captured(node, timeout=timeout, log=log)
    if status != 0:
        tail = "\n".join(console.splitlines()[-20:])
        what = "timed out" if status == 124 else f"exited with status {status}"
        raise BenchError(f"run {index}: QEMU {what} (log: {log})\n{tail}")
    try:
        return parse_bench_lines(console)
    except BenchError as err:
        raise BenchError(f"run {index}: {err} (log: {log})") from err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the ELF files already built")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per QEMU run (120)")
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "bench" / "results" / "ipc.json",
        help="where to write the JSON results (bench/results/ipc.json)",
    )
    args = parser.parse_args(argv)

    try:
        if not args.no_build:
            subprocess.run(
                [str(ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel", "-p", "ipcbench"],
                check=True,
            )
        runs = [run_once(i, args.timeout) for i in (1, 2)]
        check_deterministic(runs)
        summary = summarize(runs, qemu_version())
    except subprocess.CalledProcessError as err:
        print(f"ipc.py: {err}", file=sys.stderr)
        return 1
    except BenchError as err:
        print(f"ipc.py: FAILED: {err}", file=sys.stderr)
        return 1

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(format_table(summary))
    print(f"(two runs identical; written to {args.output})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
