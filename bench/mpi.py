#!/usr/bin/env python3
"""`just bench mpi`: MPI natively on Kestrel against TCP in native Linux and between Linux VMs
(issue 19). Every leg runs under `-icount shift=0,sleep=off`, where guest time is instructions
(bamboo's 400 MHz time base advances 0.4 ticks per guest instruction), and every figure is in
time-base ticks of guest time:

- `kestrel2`, `kestrel4`, `kestrel8`: kestrel-mpibench (native/programs/mpibench), N native
  ranks on the MPI core (kestrel-mpi) over the node's fabric service, timing itself with the
  time base (`mftb`). Ping-pong between ranks 0 and 1 of 2 ranks over message sizes 0 and 1
  byte to --max in powers of two: one-way time = the best of 3 trials of K round trips / 2K
  (K = 100 for small sizes, fewer above 80 KiB), each trial after a barrier and one untimed
  round trip. Allreduce with 2, 4 and 8 ranks, integer sum
  (U64, the collective network's ALU) and double sum (F64, software: a binomial tree and a
  broadcast), of 1 and 128 elements: per call = the best of 3 trials of 100 calls / 100. The
  root task runs at most 8 programs and one is the fabric service, so 8 ranks run as 4
  programs of 2 rank threads; `kestrel4_threads` runs 4 ranks that way too. The ranks wait for
  the fabric service's events, as MPI programs on the core do; `kestrel_yield` repeats the
  2-rank ping-pong with ranks that poll instead (`mpibench.wait=yield`) and `kestrel_wait10`
  with a 10 ms instead of a 100 ms timeout on the wait, which show what waiting costs.
- `linux_loopback`: NPtcp between two processes of one Linux natively on bamboo over TCP
  loopback (bench/net.py's native path, guest script net-bench), sizes 1 byte to --np-upper in
  NetPIPE's steps (-p 0), --nrepeat round trips per trial, best of 3 trials. NPtcp times with
  gettimeofday, which Linux derives from the time base: ticks = NPtcp's seconds x 400e6.
- `vm_virtio`, `vm_torus` (`vm_collective` with --legs): NPtcp between two Linux VMs under
  Kestrel over the paravirtual virtio NIC and over bgnet on the torus (bench/net.py's VM paths),
  sizes up to --vm-upper.
- `npmpi`: NetPIPE's MPI module NPmpi, unmodified, built against Kestrel's mpi.h and MPI
  library (scripts/build-npmpi.sh), as a job of 2 ranks on the Linux personality beside the
  fabric service, sizes up to --npmpi-upper; its np.out (NPtcp's format) as kestrel-linux lists
  it after the job. Skipped, with one line, while the C library (libkestrel_mpi_c.a) is not
  built.

Headline figures (bench/results/mpi.json): `native_latency_8b`, `linux_loopback_latency_8b`,
`vm_best_latency_8b` (one-way ticks of an 8-byte message) and their ratios, and the 1 MiB
bandwidth natively and over loopback. Targets (issue 19), reported as met or not, never a
failure: native 8-byte latency at most half of native Linux's TCP loopback and at least 5 times
below the best VM path; native 1 MiB bandwidth at least native Linux's loopback.

A Kestrel leg whose ranks hang (the MPI core has an intermittent deadlock that is being fixed;
the program's deadlock report, `mpibench.deadlock_s` of guest time, or QEMU's timeout) is run
again, up to --retries times, with `mpibench.jitter` changed so that the ranks start at
different moments; the attempts are recorded. The script fails when the 2-rank Kestrel leg or
the loopback reference cannot be measured; another leg that breaks is reported as not measured
with its reason. Writes bench/results/mpi.json, mpi.md and mpi.png.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework import bench, qemu  # noqa: E402
from framework.bench import BenchError  # noqa: E402
from framework.constants import KESTREL_RAM_MB  # noqa: E402

import net  # noqa: E402  (bench/net.py: the NPtcp legs, its guest script and parsers)

RESULTS = qemu.ROOT / "bench" / "results"
# Bamboo's time base (QEMU's 440EP: 400 MHz); kestrel-mpibench reports the kernel's figure,
# which must agree.
TIMEBASE_HZ = 400_000_000
INSTRUCTIONS_PER_TICK = 2.5
RANKS = (2, 4, 8)
# leg -> bench/net.py path of the NPtcp legs.
NP_LEGS = {"linux_loopback": "native", "vm_virtio": "virtio", "vm_torus": "torus",
           "vm_collective": "collective"}
VM_LEGS = tuple(leg for leg in NP_LEGS if leg.startswith("vm_"))
# Kestrel leg -> (ranks, ranks per program). The root task runs at most 8 programs, one of
# them the fabric service, so 8 ranks run as 4 programs of 2 rank threads each;
# kestrel4_threads measures 4 ranks that way too, to show what sharing a program changes.
# kestrel_yield and kestrel_wait10 repeat kestrel2's ping-pong with ranks that poll, and with
# ranks whose event wait times out after 10 ms instead of 100 ms.
KESTREL_RANKS = {"kestrel2": (2, 1), "kestrel4": (4, 1), "kestrel8": (8, 2), "kestrel4_threads": (4, 2),
                 "kestrel_yield": (2, 1), "kestrel_wait10": (2, 1)}
KESTREL_LEGS = tuple(KESTREL_RANKS)
LEGS = (*KESTREL_LEGS, *NP_LEGS, "npmpi")
DEFAULT_LEGS = tuple(leg for leg in LEGS if leg != "vm_collective")
# The headline sizes.
LATENCY_BYTES = 8
BANDWIDTH_BYTES = 1 << 20
# (key, what, comparison, bound) of issue 19's targets.
TARGETS = (
    ("native_over_loopback_latency_8b", "native 8 B one-way latency / Linux TCP loopback's", "<=", 0.5),
    ("vm_best_over_native_latency_8b", "best VM path's 8 B one-way latency / native", ">=", 5.0),
    ("native_over_loopback_bandwidth_1mib", "native 1 MiB bandwidth / Linux TCP loopback's", ">=", 1.0),
)
NPMPI = qemu.ROOT / "scripts" / "build-npmpi.sh"
# build-npmpi.sh's status while Kestrel's C MPI library is missing.
NPMPI_SKIP = 3

HEADER_RE = re.compile(r"mpibench: ranks (?P<ranks>\d+) timebase_hz (?P<hz>\d+) window (?P<window>\d+) "
                       r"eager_max (?P<eager>\d+) stage (?P<stage>\d+) wait (?P<wait>\w+) "
                       r"ranks_per_program (?P<per>\d+)\s*$")
PINGPONG_RE = re.compile(r"mpibench: pingpong bytes (?P<bytes>\d+) iters (?P<iters>\d+) trials (?P<trials>\d+) "
                         r"best (?P<best>\d+) (?P<check>ok|WRONG)\s*$")
ALLREDUCE_RE = re.compile(r"mpibench: allreduce type (?P<type>\w+) count (?P<count>\d+) iters (?P<iters>\d+) "
                          r"trials (?P<trials>\d+) best (?P<best>\d+) (?P<check>ok|WRONG)\s*$")
FAILED_RE = re.compile(r"mpibench: FAILED(?: rank \d+)?: (?P<why>.*?)\s*$")
DONE_RE = re.compile(r"mpibench: done\s*$")
NP_FILE_RE = re.compile(r"kestrel-linux: file np\.out \(\d+ bytes\)\s*$")
NP_FILE_LINE_RE = re.compile(r"kestrel-linux: \| (?P<line>.*?)\s*$")


class Retry(Exception):
    """A Kestrel leg that hung (deadlock report or no end): worth another attempt."""


# ---------------------------------------------------------------------------------------------
# Parsing (pure; bench/test_mpi.py)


def parse_kestrel(console: str) -> dict:
    """kestrel-mpibench's lines from a console: the header, the ping-pong and allreduce
    points. Raises Retry for a hang (a FAILED line, no `mpibench: done`) and BenchError for a
    result that fails its check or a console without the header."""
    lines = console.splitlines()
    failed = [m["why"] for m in map(FAILED_RE.search, lines) if m]
    if failed:
        raise Retry(failed[0])
    head = next(filter(None, map(HEADER_RE.search, lines)), None)
    if head is None:
        raise Retry("no 'mpibench: ranks' line: the ranks did not get through MPI_Init")
    pingpong = [{"bytes": int(m["bytes"]), "iters": int(m["iters"]), "trials": int(m["trials"]),
                 "best_ticks": int(m["best"]), "ok": m["check"] == "ok"}
                for m in map(PINGPONG_RE.search, lines) if m]
    allreduce = [{"type": m["type"], "count": int(m["count"]), "iters": int(m["iters"]),
                  "trials": int(m["trials"]), "best_ticks": int(m["best"]), "ok": m["check"] == "ok"}
                 for m in map(ALLREDUCE_RE.search, lines) if m]
    wrong = [f"ping-pong of {p['bytes']} bytes" for p in pingpong if not p["ok"]]
    wrong += [f"allreduce {a['type']} x {a['count']}" for a in allreduce if not a["ok"]]
    if wrong:
        raise BenchError("wrong results: " + ", ".join(wrong))
    if not any(DONE_RE.search(l) for l in lines):
        last = pingpong[-1]["bytes"] if pingpong else None
        raise Retry("no 'mpibench: done' line (last ping-pong size "
                    f"{last if last is not None else 'none'}, {len(allreduce)} allreduce lines)")
    return {"ranks": int(head["ranks"]), "timebase_hz": int(head["hz"]), "window": int(head["window"]),
            "eager_max": int(head["eager"]), "stage": int(head["stage"]), "wait": head["wait"],
            "ranks_per_program": int(head["per"]), "pingpong": pingpong, "allreduce": allreduce}


def mbit_s(size: int, one_way_ticks: float, hz: int = TIMEBASE_HZ) -> float | None:
    """10^6 bit/s of guest time for `size` bytes one way in `one_way_ticks`."""
    if size == 0 or one_way_ticks <= 0:
        return None
    return round(size * 8 * hz / one_way_ticks / 1e6, 4)


def pingpong_curve(points: list[dict], hz: int = TIMEBASE_HZ) -> list[dict]:
    """kestrel-mpibench's ping-pong points as a curve: bytes, one-way ticks, Mbit/s."""
    out = []
    for p in points:
        ticks = p["best_ticks"] / (2 * p["iters"])
        out.append({"bytes": p["bytes"], "one_way_ticks": round(ticks, 1), "mbit_s": mbit_s(p["bytes"], ticks, hz)})
    return out


def np_curve(points: list[dict], hz: int = TIMEBASE_HZ) -> list[dict]:
    """NetPIPE's points (net.parse_np: bytes, one-way seconds) as a curve in ticks."""
    return [{"bytes": p["bytes"], "one_way_ticks": round(p["seconds"] * hz, 1),
             "mbit_s": mbit_s(p["bytes"], p["seconds"] * hz, hz)} for p in points]


def allreduce_table(points: list[dict]) -> list[dict]:
    """kestrel-mpibench's allreduce points: type, count, ticks per call."""
    return [{"type": a["type"], "count": a["count"], "ticks": round(a["best_ticks"] / a["iters"], 1)}
            for a in points]


def parse_npmpi(console: str) -> list[dict]:
    """NPmpi's np.out as kestrel-linux lists it after the job (`kestrel-linux: file np.out
    (N bytes)`, then `kestrel-linux: | LINE` per line): net.parse_np's points."""
    lines = console.splitlines()
    start = next((i for i, l in enumerate(lines) if NP_FILE_RE.search(l)), None)
    if start is None:
        raise BenchError("no np.out listed after the NPmpi job")
    rows = []
    for line in lines[start + 1:]:
        m = NP_FILE_LINE_RE.search(line)
        if m is None:
            break
        # "%8d %lf %12.8lf": as net-bench's `read` does, one space between the fields.
        rows.append("net: np " + " ".join(m["line"].split()))
    points = net.parse_np(rows)
    if not points:
        raise BenchError("NPmpi's np.out has no points")
    return points


def at(curve: list[dict] | None, size: int) -> dict | None:
    return next((p for p in curve or [] if p["bytes"] == size), None)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 4)


def summarize(legs: dict[str, dict], params: dict, qemu_text: str, commit: str) -> dict:
    """The JSON document. `legs` maps each leg to {"ok": figures, "attempts": [...]} or
    {"reason": why not measured}."""
    def curve(leg: str) -> list[dict] | None:
        return legs.get(leg, {}).get("ok", {}).get("curve")

    def one_way(leg: str, size: int) -> float | None:
        p = at(curve(leg), size)
        return p["one_way_ticks"] if p else None

    def bandwidth(leg: str, size: int) -> float | None:
        p = at(curve(leg), size)
        return p["mbit_s"] if p else None

    native = one_way("kestrel2", LATENCY_BYTES)
    loopback = one_way("linux_loopback", LATENCY_BYTES)
    vms = {leg: one_way(leg, LATENCY_BYTES) for leg in VM_LEGS}
    vms = {leg: v for leg, v in vms.items() if v is not None}
    vm_best_leg = min(vms, key=vms.get) if vms else None
    vm_best = vms.get(vm_best_leg) if vm_best_leg else None
    nbw = bandwidth("kestrel2", BANDWIDTH_BYTES)
    lbw = bandwidth("linux_loopback", BANDWIDTH_BYTES)
    s = {
        "native_latency_8b": native,
        "linux_loopback_latency_8b": loopback,
        "vm_best_latency_8b": vm_best,
        "vm_best_path": vm_best_leg,
        "native_over_loopback_latency_8b": ratio(native, loopback),
        "vm_best_over_native_latency_8b": ratio(vm_best, native),
        "native_bandwidth_1mib_mbit_s": nbw,
        "linux_loopback_bandwidth_1mib_mbit_s": lbw,
        "native_over_loopback_bandwidth_1mib": ratio(nbw, lbw),
        "native_polling_latency_8b": one_way("kestrel_yield", LATENCY_BYTES),
        "native_polling_bandwidth_1mib_mbit_s": bandwidth("kestrel_yield", BANDWIDTH_BYTES),
        "npmpi_latency_8b": one_way("npmpi", LATENCY_BYTES),
        "npmpi_bandwidth_1mib_mbit_s": bandwidth("npmpi", BANDWIDTH_BYTES),
    }
    targets = {}
    for key, what, op, bound in TARGETS:
        value = s[key]
        met = None if value is None else (value <= bound if op == "<=" else value >= bound)
        targets[key] = {"what": what, "value": value, "target": f"{op} {bound:g}", "met": met}
    s["targets"] = targets
    s["allreduce"] = {leg: legs[leg]["ok"]["allreduce"] for leg in KESTREL_LEGS
                      if "ok" in legs.get(leg, {}) and legs[leg]["ok"].get("allreduce")}
    s["legs"] = {leg: ({"measured": True, **legs[leg]["ok"]} if "ok" in legs[leg]
                       else {"measured": False, "reason": legs[leg]["reason"]})
                 for leg in LEGS if leg in legs}
    for leg, entry in s["legs"].items():
        if "attempts" in legs[leg]:
            entry["attempts"] = legs[leg]["attempts"]
    s.update({"unit": "time-base ticks of guest time (400 MHz; 2.5 guest instructions per tick)",
              "parameters": params, "method": METHOD, "qemu": qemu_text, "commit": commit})
    return s


METHOD = (
    "qemu-system-ppc -M bamboo -icount shift=0,sleep=off: guest time is instructions, and the "
    "400 MHz time base advances 0.4 ticks per guest instruction. Kestrel: kestrel-mpibench's "
    "ranks read the time base themselves (mftb) around each trial, one-way time = best of 3 "
    "trials of K round trips / 2K (each after a barrier and one untimed round trip), allreduce = best of 3 trials of 100 calls / 100; the ranks "
    "wait for the fabric service's events (kestrel_yield: they poll, yielding the processor). "
    "Linux: NPtcp 3.7.2 (-p 0, fixed round trips per trial, best of 3 trials) over TCP "
    "loopback in one native Linux and between two Linux VMs over virtio and bgnet; NPtcp's "
    "one-way seconds (gettimeofday, which Linux derives from the time base) x 400e6 = ticks. "
    "NPmpi: the same NetPIPE source's MPI module on Kestrel's C MPI library, 2 ranks on the "
    "Linux personality. Bandwidth: bytes x 8 / one-way guest seconds, 10^6 bit/s"
)


# ---------------------------------------------------------------------------------------------
# Report


def fmt(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def markdown(s: dict) -> str:
    p = s["parameters"]
    lines = ["# MPI natively on Kestrel against TCP in Linux (issue 19)", "",
             f"Produced by `python3 bench/mpi.py` (`just bench mpi`) at commit {s['commit']} ({s['qemu']}).", "",
             "**How time is taken.** Every leg runs under `-icount shift=0,sleep=off`, so guest "
             "time is instructions and every figure is in time-base ticks of guest time (bamboo's "
             "400 MHz time base: 0.4 ticks per guest instruction, 1 us = 400 ticks). The native "
             "ranks read the time base themselves (`mftb`) around each trial; NPtcp and NPmpi time "
             "with `gettimeofday`, which Linux (and Kestrel's Linux personality) derive from the "
             "same time base, and their one-way seconds are converted as ticks = seconds x 400e6. "
             "Latency = one-way time of one message (half a round trip), best of 3 trials; "
             f"bandwidth = bytes x 8 / one-way guest time. Ping-pong up to {p['max']:,} bytes on "
             f"Kestrel, NPtcp up to {p['np_upper']:,} bytes in native Linux and {p['vm_upper']:,} "
             f"bytes between VMs, NPmpi up to {p.get('npmpi_upper', p['max']):,} bytes, {p['nrepeat']} round "
             "trips per NetPIPE trial.", "",
             "## Headline figures and targets (reported, never a failure)", ""]
    vm = s["vm_best_path"] or "no VM path"
    rows = [("`native_latency_8b` (Kestrel MPI, 2 ranks)", fmt(s["native_latency_8b"], 1)),
            ("`linux_loopback_latency_8b` (NPtcp, native Linux)", fmt(s["linux_loopback_latency_8b"], 1)),
            (f"`vm_best_latency_8b` (NPtcp, {vm})", fmt(s["vm_best_latency_8b"], 1)),
            ("native 1 MiB bandwidth (Mbit/s)", fmt(s["native_bandwidth_1mib_mbit_s"], 1)),
            ("Linux loopback 1 MiB bandwidth (Mbit/s)", fmt(s["linux_loopback_bandwidth_1mib_mbit_s"], 1)),
            ("native, polling ranks: 8 B latency / 1 MiB Mbit/s",
             f"{fmt(s['native_polling_latency_8b'], 1)} / {fmt(s['native_polling_bandwidth_1mib_mbit_s'], 1)}"),
            ("NPmpi on Kestrel: 8 B latency / 1 MiB Mbit/s",
             f"{fmt(s['npmpi_latency_8b'], 1)} / {fmt(s['npmpi_bandwidth_1mib_mbit_s'], 1)}")]
    lines += bench.md_table(("figure", "ticks (one-way) or Mbit/s"), rows, "lr")
    lines += [""]
    rows = [(f"`{k}`", t["what"], fmt(t["value"], 4), t["target"],
             {True: "yes", False: "**no**", None: "n/a"}[t["met"]]) for k, t in s["targets"].items()]
    lines += bench.md_table(("ratio", "what", "value", "target", "met?"), rows, "lllll")
    lines += ["", "## Legs", ""]
    rows = []
    for leg, e in s["legs"].items():
        tries = e.get("attempts")
        note = f"{len(tries)} attempt(s): " + "; ".join(a["result"] for a in tries) if tries else ""
        rows.append((leg, "measured" if e["measured"] else f"not measured: {e['reason']}", note))
    lines += bench.md_table(("leg", "result", "attempts"), rows, "lll")
    curves = {leg: e["curve"] for leg, e in s["legs"].items() if e["measured"] and e.get("curve")}
    if curves:
        sizes = sorted({pt["bytes"] for c in curves.values() for pt in c})
        lines += ["", "## One-way time (ticks) / bandwidth (Mbit/s) per message size", ""]
        by = {leg: {pt["bytes"]: pt for pt in c} for leg, c in curves.items()}
        rows = [(f"{size:,}", *(f"{fmt(by[leg][size]['one_way_ticks'], 1)} / {fmt(by[leg][size]['mbit_s'], 2)}"
                                if size in by[leg] else "-" for leg in curves)) for size in sizes]
        lines += bench.md_table(("bytes", *curves), rows, "r" * (1 + len(curves)))
    if s["allreduce"]:
        lines += ["", "## Allreduce, ticks per call (MPI_SUM over MPI_COMM_WORLD)", ""]
        kinds = sorted({(a["type"], a["count"]) for t in s["allreduce"].values() for a in t})
        legs = [leg for leg in s["allreduce"] if leg != "kestrel_yield"]
        rows = []
        for typ, count in kinds:
            cells = []
            for leg in legs:
                hit = next((a for a in s["allreduce"][leg] if (a["type"], a["count"]) == (typ, count)), None)
                cells.append(fmt(hit["ticks"], 1) if hit else "-")
            path = "collective ALU" if typ == "U64" else "software tree + broadcast"
            rows.append((f"{typ} x {count} ({path})", *cells))
        names = [f"{s['legs'][leg]['ranks']} ranks" + (f" ({s['legs'][leg]['ranks_per_program']} per program)"
                                                       if s['legs'][leg].get('ranks_per_program', 1) > 1 else "")
                 for leg in legs]
        lines += bench.md_table(("type x elements", *names), rows, "l" + "r" * len(legs))
    notes = report_notes(s)
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += ["", f"Method: {s['method']}.", ""]
    return "\n".join(lines)


def report_notes(s: dict) -> list[str]:
    """What the reader needs to read the tables right, from the figures themselves."""
    notes = []
    legs = s["legs"]
    k8 = legs.get("kestrel8", {})
    if k8.get("measured") and k8.get("ranks_per_program", 1) > 1:
        notes.append(f"8 ranks run as {8 // k8['ranks_per_program']} programs of {k8['ranks_per_program']} rank "
                     "threads each (the root task runs at most 8 programs, one of them the fabric service); "
                     "`kestrel4_threads` runs 4 ranks that way too, beside `kestrel4`'s one per program.")
    def curve(leg: str) -> dict[int, float]:
        return {p["bytes"]: p["one_way_ticks"] for p in legs.get(leg, {}).get("curve") or []}
    ev, po, w10 = curve("kestrel2"), curve("kestrel_yield"), curve("kestrel_wait10")
    slow = [b for b in sorted(set(ev) & set(po)) if ev[b] > 2 * po[b]]
    if slow:
        b = slow[0]
        text = ("Ranks that wait for the fabric service's events (`kestrel2`) take more than twice as long "
                "as ranks that poll (`kestrel_yield`) at " + ", ".join(f"{x:,}" for x in slow) + " bytes: "
                f"{ev[b]:,.0f} against {po[b]:,.0f} ticks at {b:,} bytes")
        big = BANDWIDTH_BYTES
        if big in ev and big in po:
            text += f", {ev[big]:,.0f} against {po[big]:,.0f} at {big:,}"
        if big in w10 and big in ev:
            text += (f". With a 10 ms instead of a 100 ms timeout on that wait (`kestrel_wait10`) it is "
                     f"{w10[big]:,.0f} at {big:,} bytes: there, waits end by the rank's timeout, not by an "
                     "event (rendezvous moves chunks of at most 512 KiB)")
        notes.append(text + ". The targets are judged on `kestrel2`, what an MPI program on the core gets.")
    return notes


def plot(s: dict, out: Path) -> str | None:
    """mpi.png: one-way time and bandwidth against message size per leg, and allreduce time
    against the number of ranks. Returns why no plot was drawn, or None."""
    plt, why = bench.pyplot(s, out, __file__)
    if plt is None:
        return why
    fig, (lat, bw, red) = plt.subplots(1, 3, figsize=(15, 4.6))
    for leg, e in s["legs"].items():
        if not e["measured"] or not e.get("curve"):
            continue
        pts = [p for p in e["curve"] if p["bytes"] > 0]
        x = [p["bytes"] for p in pts]
        lat.plot(x, [p["one_way_ticks"] for p in pts], marker=".", lw=1, label=leg)
        bw.plot(x, [p["mbit_s"] for p in pts], marker=".", lw=1, label=leg)
    for ax, title, ylabel in ((lat, "one-way time", "time-base ticks"), (bw, "bandwidth", "Mbit/s (guest time)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"ping-pong {title} (-icount)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    kinds = sorted({(a["type"], a["count"]) for t in s["allreduce"].values() for a in t})
    line_legs = [leg for leg in ("kestrel2", "kestrel4", "kestrel8") if leg in s["allreduce"]]
    for typ, count in kinds:
        def ticks(leg: str) -> float | None:
            hit = next((a for a in s["allreduce"].get(leg, []) if (a["type"], a["count"]) == (typ, count)), None)
            return hit["ticks"] if hit else None
        pts = [(s["legs"][leg]["ranks"], ticks(leg)) for leg in line_legs if ticks(leg) is not None]
        line, = red.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=f"{typ} x {count}")
        if ticks("kestrel4_threads") is not None:
            red.plot([4], [ticks("kestrel4_threads")], marker="s", mfc="none", color=line.get_color())
    red.set_xscale("log", base=2)
    red.set_xticks(list(RANKS), [str(n) for n in RANKS])
    red.set_yscale("log")
    red.set_xlabel("ranks")
    red.set_ylabel("time-base ticks per call")
    red.set_title("allreduce (SUM); squares: 2 ranks/program")
    red.grid(True, which="both", alpha=0.3)
    red.legend(fontsize=7)
    missing = [leg for leg, e in s["legs"].items() if not e["measured"]]
    if missing:
        fig.text(0.01, 0.01, "not measured: " + ", ".join(missing), fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return None


# ---------------------------------------------------------------------------------------------
# Running


def kestrel_args(leg: str, a: argparse.Namespace) -> tuple[int, int, list[str]]:
    """(ranks, ranks per program, kernel command-line words) of a Kestrel leg."""
    n, per = KESTREL_RANKS[leg]
    if leg == "kestrel_yield":
        return n, per, [f"mpibench.max={a.max}", "mpibench.allreduce=0", "mpibench.wait=yield"]
    if leg == "kestrel_wait10":
        return n, per, [f"mpibench.max={a.max}", "mpibench.allreduce=0", "mpibench.wait_ms=10"]
    words = [f"mpibench.max={a.max}"] if leg == "kestrel2" else ["mpibench.pingpong=0"]
    return n, per, words


def kestrel_node(leg: str, a: argparse.Namespace, jitter: int, log: Path) -> qemu.Node:
    n, per, words = kestrel_args(leg, a)
    out = qemu.out_dir()
    programs = [qemu.Module(qemu.FABRIC_SERVICE, out / qemu.FABRIC_SERVICE)]
    # Program mpibenchR runs ranks R .. R + per - 1.
    programs += [qemu.Module(f"mpibench{r}", out / "kestrel-mpibench") for r in range(0, n, per)]
    image = qemu.BootImage(root=qemu.Module("kestrel-root", out / "kestrel-root"), programs=programs)
    words = [f"mpibench.n={n}", f"mpibench.threads={per}", f"mpibench.deadlock_s={a.deadlock_s}",
             f"mpibench.jitter={jitter}", *words]
    return qemu.kestrel_node(image, log.with_suffix(".bootmod"), append=words, mem_mb=KESTREL_RAM_MB, icount=True)


def shown(path: Path) -> str:
    """A log's path as the results show it: relative to the checkout when inside it."""
    try:
        return str(path.relative_to(qemu.ROOT))
    except ValueError:
        return str(path)


def run_kestrel(leg: str, a: argparse.Namespace, index: int) -> dict:
    """A Kestrel leg, retried after a hang: {"ok": figures, "attempts": [...]} or {"reason"}."""
    attempts = []
    for attempt in range(a.retries + 1):
        log = qemu.logs_dir() / "bench" / "mpi" / f"{leg}-run{index}-try{attempt}.log"
        print(f"mpi: {leg} run {index} attempt {attempt} (log {log})", file=sys.stderr, flush=True)
        try:
            status, console = qemu.run_captured(kestrel_node(leg, a, attempt, log), timeout=a.timeout, log=log)
            if status == 124:
                raise Retry(f"QEMU timed out after {a.timeout} s")
            got = parse_kestrel(console)
            if status != 0:
                raise BenchError(f"QEMU exited with status {status} (log {log})")
            if got["timebase_hz"] != TIMEBASE_HZ:
                raise BenchError(f"the time base runs at {got['timebase_hz']} Hz, not {TIMEBASE_HZ}")
        except Retry as err:
            attempts.append({"jitter": attempt, "result": f"hang: {err}", "log": shown(log)})
            print(f"mpi: {leg}: attempt {attempt} hung ({err}); "
                  + ("trying again with other start times" if attempt < a.retries else "giving up"),
                  file=sys.stderr, flush=True)
            continue
        except (BenchError, qemu.LaunchError) as err:
            attempts.append({"jitter": attempt, "result": f"failed: {err}", "log": shown(log)})
            return {"reason": f"failed: {err}", "attempts": attempts}
        attempts.append({"jitter": attempt, "result": "ok", "log": shown(log)})
        figures = {"ranks": got["ranks"], "ranks_per_program": got["ranks_per_program"],
                   "eager_max": got["eager_max"], "rendezvous_stage": got["stage"],
                   "wait": got["wait"], "curve": pingpong_curve(got["pingpong"]),
                   "allreduce": allreduce_table(got["allreduce"])}
        return {"ok": figures, "attempts": attempts}
    return {"reason": f"hung in all {a.retries + 1} attempts: {attempts[-1]['result']}", "attempts": attempts}


def run_np(leg: str, a: argparse.Namespace, index: int) -> dict:
    """An NPtcp leg through bench/net.py's node and parsers: {"ok": figures} or {"reason"}."""
    path = NP_LEGS[leg]
    upper = a.np_upper if path == "native" else a.vm_upper
    params = {"upper": upper, "nrepeat": a.nrepeat, "iperf_time": 1, "append": "net.tests=np"}
    log = qemu.logs_dir() / "bench" / "mpi" / f"{leg}-run{index}.log"
    print(f"mpi: {leg} run {index} (log {log})", file=sys.stderr, flush=True)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        status, console = qemu.run_captured(net.node(path, params, log, qemu.target_dir()),
                                            timeout=a.timeout, log=log)
        if status != 0:
            what = "timed out" if status == 124 else f"exited with status {status}"
            raise BenchError(f"QEMU {what} (log {log})")
        run = net.parse_native_run(console) if path == "native" else net.parse_vm_run(console)
        if not run["np"]:
            raise BenchError("no NPtcp figures: " + ("; ".join(run["failed"]) or "no 'net: np' lines"))
    except net.Unavailable as err:
        return {"reason": str(err)}
    except (BenchError, qemu.LaunchError) as err:
        return {"reason": f"run failed: {err}"}
    return {"ok": {"path": path, "upper": upper, "curve": np_curve(run["np"])}}


def build_npmpi() -> tuple[Path | None, str]:
    """(NPmpi, "") or (None, why not): scripts/build-npmpi.sh, which exits NPMPI_SKIP while
    Kestrel's C MPI library is not built."""
    done = subprocess.run([str(NPMPI)], capture_output=True, text=True)
    said = [l for l in done.stderr.splitlines() if l.strip()]
    if done.returncode == NPMPI_SKIP:
        return None, said[-1].split(": ", 1)[-1] if said else "Kestrel's MPI library is not built"
    if done.returncode != 0:
        return None, "scripts/build-npmpi.sh failed: " + (said[-1] if said else f"status {done.returncode}")
    return Path(done.stdout.strip().splitlines()[-1]), ""


def run_npmpi(npmpi: Path | None, why: str, a: argparse.Namespace, index: int) -> dict:
    if npmpi is None:
        return {"reason": why}
    log = qemu.logs_dir() / "bench" / "mpi" / f"npmpi-run{index}.log"
    print(f"mpi: npmpi run {index} (log {log})", file=sys.stderr, flush=True)
    try:
        image, words = qemu.linux_job_image(npmpi, 2, args=["-l", "1", "-u", str(a.npmpi_upper), "-p", "0",
                                                           "-n", str(a.nrepeat)])
        node = qemu.kestrel_node(image, log.with_suffix(".bootmod"), append=words, mem_mb=KESTREL_RAM_MB,
                                 icount=True)
        status, console = qemu.run_captured(node, timeout=a.timeout, log=log)
        if status != 0:
            what = "timed out" if status == 124 else f"exited with status {status}"
            raise BenchError(f"QEMU {what} (log {log})")
        return {"ok": {"ranks": 2, "curve": np_curve(parse_npmpi(console))}}
    except (BenchError, qemu.LaunchError) as err:
        return {"reason": f"run failed: {err}"}


def run_leg(leg: str, a: argparse.Namespace, index: int, npmpi: tuple[Path | None, str]) -> dict:
    if leg in KESTREL_LEGS:
        return run_kestrel(leg, a, index)
    if leg in NP_LEGS:
        return run_np(leg, a, index)
    return run_npmpi(*npmpi, a, index)


def figures_of(run: dict[str, dict]) -> dict:
    """What must agree between runs: the measured figures (not the attempts' logs)."""
    return bench.flatten({leg: r.get("ok") for leg, r in run.items()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--legs", default=",".join(DEFAULT_LEGS), help=f"which legs (of {','.join(LEGS)})")
    ap.add_argument("--max", type=int, default=4 << 20, help="largest Kestrel and NPmpi message (4 MiB)")
    ap.add_argument("--np-upper", type=int, default=4 << 20, help="NPtcp's largest message in native Linux")
    ap.add_argument("--vm-upper", type=int, default=65536, help="NPtcp's largest message between VMs")
    ap.add_argument("--npmpi-upper", type=int, default=1 << 20, help="NPmpi's largest message (1 MiB)")
    ap.add_argument("--nrepeat", type=int, default=20, help="NPtcp/NPmpi round trips per trial")
    ap.add_argument("--deadlock-s", type=int, default=10, help="guest seconds without progress a rank calls a hang")
    ap.add_argument("--retries", type=int, default=2, help="more attempts of a Kestrel leg that hangs")
    ap.add_argument("--runs", type=int, default=1, help="runs of every leg, which must agree (1)")
    ap.add_argument("--jobs", type=int, default=2, help="QEMU runs at once (2)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per QEMU run")
    ap.add_argument("--output", type=Path, default=RESULTS / "mpi.json")
    ap.add_argument("--plot-only", type=Path, metavar="JSON", help="draw the PNG of a JSON")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args(argv)
    if a.plot_only:
        why = plot(json.loads(a.plot_only.read_text()), a.output.with_suffix(".png"))
        return 0 if why is None else 1
    legs = [leg.strip() for leg in a.legs.split(",") if leg.strip()]
    unknown = [leg for leg in legs if leg not in LEGS]
    if unknown or not {"kestrel2", "linux_loopback"} <= set(legs):
        ap.error(f"--legs: want kestrel2 and linux_loopback plus any of {', '.join(LEGS)}; got {a.legs}")
    if not a.no_build:
        subprocess.run([str(qemu.ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel", "-p", "kestrel-root",
                        "-p", "kestrel-vmm", "-p", "kestrel-fabric-service", "-p", "kestrel-linux",
                        "-p", "kestrel-mpibench"], check=True)
        subprocess.run([str(qemu.ROOT / "guests" / "linux" / "build.sh")], check=True)
    npmpi = build_npmpi() if "npmpi" in legs else (None, "not run (--legs)")
    if "npmpi" in legs and npmpi[0] is None:
        print(f"mpi: npmpi: {npmpi[1]}", flush=True)
    params = {"max": a.max, "np_upper": a.np_upper, "vm_upper": a.vm_upper, "npmpi_upper": a.npmpi_upper,
              "nrepeat": a.nrepeat,
              "deadlock_s": a.deadlock_s, "retries": a.retries, "runs": a.runs, "legs": legs}
    runs = []
    for index in range(1, a.runs + 1):
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futures = {leg: pool.submit(run_leg, leg, a, index, npmpi) for leg in legs}
            runs.append({leg: f.result() for leg, f in futures.items()})
    try:
        bench.check_deterministic(runs, figures_of)
        for leg in ("kestrel2", "linux_loopback"):
            if "ok" not in runs[0][leg]:
                raise BenchError(f"{leg} was not measured: {runs[0][leg]['reason']}")
    except BenchError as err:
        print(f"mpi: FAILED: {err}", file=sys.stderr)
        return 1
    s = summarize(runs[0], params, bench.qemu_version(), bench.git_commit())
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(s, indent=1) + "\n")
    a.output.with_suffix(".md").write_text(markdown(s))
    why = plot(s, a.output.with_suffix(".png"))
    print(markdown(s))
    if why:
        print(f"mpi: no plot: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, qemu.LaunchError) as err:
        print(f"mpi: {err}", file=sys.stderr)
        sys.exit(1)
