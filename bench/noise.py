#!/usr/bin/env python3
"""`just bench noise`: operating-system noise by fixed work quanta (FWQ), as light-weight kernels
are measured (issue 19). The same quantum of work, N times, each timed with the time base, in
four places, all under `-icount shift=0,sleep=off` (guest time is instructions, so a quantum's
extra ticks are instructions the system ran instead of the program):

- `kestrel_alone`: the native program kestrel-fwq (native/programs/fwq) alone on Kestrel;
- `kestrel_beside_vms`: kestrel-fwq with the HPC right (`root.hpc=`, above the vCPUs' priority)
  beside two Linux VMs spinning (`kestrel.script=busy`); it sleeps `--delay-ms` first so both
  VMs are spinning before it measures (checked on the console);
- `linux_vm`: the Linux guest's kestrel-fwq (guests/linux/tools/kestrel-fwq.c) in a VM;
- `linux_native`: the same binary in Linux natively on bamboo.

Each quantum's cost in ticks: min, median, 99th percentile, max and max/min, in
bench/results/noise.json (with `kestrel_alone_max_over_min` and
`kestrel_beside_vms_max_over_min`), noise.md, and noise.png (the quanta over time). One run per
place (deterministic under -icount). Targets (issue 19, not tested): max/min at most 1.01 alone
and at most 1.05 beside busy VMs.
"""
from __future__ import annotations

import argparse
import json
import re
import select
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework import bench, linux, qemu  # noqa: E402
from framework.constants import KESTREL_RAM_MB  # noqa: E402

RESULTS = qemu.ROOT / "bench" / "results"
PLACES = ("kestrel_alone", "kestrel_beside_vms", "linux_vm", "linux_native")
SAMPLES_RE = re.compile(r"fwq: t((?: \d+)+)\s*$")
HEADER_RE = re.compile(r"fwq: quanta (\d+) work (\d+)")


def node(place: str, a: argparse.Namespace, log: Path) -> qemu.Node:
    fwq = [f"fwq.quanta={a.quanta}", f"fwq.work={a.work}"]
    out = qemu.out_dir()
    vmlinux, initrd = linux.VMLINUX, linux.INITRAMFS
    if place == "kestrel_alone":
        image = qemu.BootImage(root=qemu.Module("kestrel-root", out / "kestrel-root"),
                               programs=[qemu.Module("kestrel-fwq", out / "kestrel-fwq")])
        return qemu.kestrel_node(image, log.with_suffix(".bootmod"), append=fwq, icount=True)
    if place == "kestrel_beside_vms":
        image = qemu.vmm_image(vmlinux, initrd=initrd, cmdline=linux.cmdline(script="busy"),
                               natives=[qemu.Module("kestrel-fwq", out / "kestrel-fwq")])
        return qemu.kestrel_node(image, log.with_suffix(".bootmod"),
                                 append=[*qemu.vmm_cmdline(2, None), "root.hpc=kestrel-fwq",
                                         f"fwq.delay_ms={a.delay_ms}", *fwq],
                                 mem_mb=KESTREL_RAM_MB, icount=True)
    guest = linux.cmdline(*fwq, script="fwq")
    if place == "linux_vm":
        image = qemu.vmm_image(vmlinux, initrd=initrd, cmdline=guest)
        return qemu.kestrel_node(image, log.with_suffix(".bootmod"), append=qemu.vmm_cmdline(1, None),
                                 mem_mb=KESTREL_RAM_MB, icount=True)
    return qemu.Node(kernel=vmlinux, initrd=initrd, append=guest, mem_mb=128, icount=True)


def run_until_done(n: qemu.Node, log: Path, timeout: int) -> str:
    """Runs `n` until a `fwq: done` line (then stops it: busy VMs never end) or `timeout`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(n.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    text = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if not ready:
                continue
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            text += chunk
            if b"fwq: done" in text:
                break
    finally:
        proc.kill()
        proc.wait()
        log.write_bytes(text)
    return text.decode(errors="replace")


def parse(console: str) -> tuple[int, int, list[int]]:
    """(quanta, work, the quanta's ticks) from a console; BenchError when incomplete."""
    head = HEADER_RE.search(console)
    samples = []
    for line in console.splitlines():
        m = SAMPLES_RE.search(line)
        if m:
            samples += [int(v) for v in m.group(1).split()]
    if head is None or "fwq: done" not in console or len(samples) != int(head.group(1)):
        raise bench.BenchError(f"incomplete FWQ output ({len(samples)} samples)")
    return int(head.group(1)), int(head.group(2)), samples


def stats(t: list[int]) -> dict:
    s = sorted(t)
    pick = lambda q: s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"min": s[0], "median": pick(0.5), "p99": pick(0.99), "max": s[-1],
            "max_over_min": round(s[-1] / s[0], 4), "quanta": len(s)}


def markdown(s: dict) -> str:
    rows = [(p, f"{e['min']:,}", f"{e['median']:,}", f"{e['p99']:,}", f"{e['max']:,}",
             f"{e['max_over_min']:.4f}") for p, e in s["places"].items()]
    lines = ["# OS noise: fixed work quanta", "",
             f"Produced by `python3 bench/noise.py` (`just bench noise`) at commit {s['commit']} "
             f"({s['qemu']}); `-icount shift=0,sleep=off`, {s['quanta']} quanta of {s['work']} "
             "rounds each, time-base ticks per quantum (0.4 a guest instruction).", ""]
    lines += bench.md_table(("place", "min", "median", "p99", "max", "max/min"), rows, "lrrrrr")
    lines += ["", f"- `kestrel_alone_max_over_min`: {s['kestrel_alone_max_over_min']} (target at most 1.01)",
              f"- `kestrel_beside_vms_max_over_min`: {s['kestrel_beside_vms_max_over_min']} "
              "(target at most 1.05)", "",
              f"Method: {s['method']}", ""]
    return "\n".join(lines)


def plot(s: dict, out: Path) -> str | None:
    plt, why = bench.pyplot(s, out, __file__)
    if plt is None:
        return why
    fig, ax = plt.subplots(figsize=(10, 4.2))
    for place, t in s["samples"].items():
        ax.plot(range(len(t)), t, lw=0.8, label=place)
    ax.set_yscale("log")
    ax.set_xlabel("quantum")
    ax.set_ylabel("time-base ticks")
    ax.set_title("Fixed work quanta (-icount): noise is what rises above the floor")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quanta", type=int, default=1000)
    ap.add_argument("--work", type=int, default=20000, help="rounds per quantum")
    ap.add_argument("--delay-ms", type=int, default=4000,
                    help="guest time kestrel-fwq waits beside the VMs before it measures")
    ap.add_argument("--timeout", type=int, default=1200, help="per place, seconds")
    ap.add_argument("--places", nargs="*", default=list(PLACES), choices=PLACES)
    ap.add_argument("--output", type=Path, default=RESULTS / "noise.json")
    ap.add_argument("--plot-only", type=Path, metavar="JSON", help="draw the PNG of a JSON")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args(argv)
    if a.plot_only:
        why = plot(json.loads(a.plot_only.read_text()), a.output.with_suffix(".png"))
        return 0 if why is None else 1
    if not a.no_build:
        subprocess.run([str(qemu.ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel",
                        "-p", "kestrel-root", "-p", "kestrel-vmm", "-p", "kestrel-fabric-service",
                        "-p", "kestrel-fwq"], check=True)
        subprocess.run([str(qemu.ROOT / "guests" / "linux" / "build.sh")], check=True)
    logs = qemu.logs_dir() / "bench" / "noise"
    s = {"commit": bench.git_commit(), "qemu": bench.qemu_version(), "quanta": a.quanta,
         "work": a.work, "delay_ms": a.delay_ms, "places": {}, "samples": {},
         "method": "bench/noise.py's docstring; one run per place"}
    for place in a.places:
        log = logs / f"{place}.log"
        print(f"noise: {place} (log {log})", flush=True)
        console = run_until_done(node(place, a, log), log, a.timeout)
        _, _, t = parse(console)
        if place == "kestrel_beside_vms":
            at = console.find("fwq: quanta")
            busy = console[:at].count("busy: spinning")
            if busy < 2:
                raise bench.BenchError(f"only {busy} of 2 VMs were spinning when kestrel-fwq measured: "
                                       "give a larger --delay-ms")
        s["places"][place] = stats(t)
        s["samples"][place] = t
        print(f"noise: {place}: {s['places'][place]}", flush=True)
    for place in ("kestrel_alone", "kestrel_beside_vms"):
        s[f"{place}_max_over_min"] = s["places"].get(place, {}).get("max_over_min")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(s, indent=1) + "\n")
    a.output.with_suffix(".md").write_text(markdown(s))
    why = plot(s, a.output.with_suffix(".png"))
    print(markdown(s))
    if why:
        print(f"noise: no plot: {why}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (bench.BenchError, qemu.LaunchError) as err:
        print(f"noise: {err}", file=sys.stderr)
        sys.exit(1)
