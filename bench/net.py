#!/usr/bin/env python3
"""Fig. 7 on one node: TCP latency and throughput between two Linux VMs, against native Linux.

Boots the unmodified Linux guest (guests/linux) with its `net-bench` script under
`-icount shift=0,sleep=off`, where guest time (the 400 MHz time base, which NetPIPE and iperf
read through gettimeofday) counts instructions and every figure is repeatable:

- native (the reference): one Linux on bamboo (as guests/linux/run-native.sh boots it, with the
  VM's RAM), NPtcp's transmitter and receiver and an iperf client and server as two processes
  each over TCP loopback (`net.path=lo`);
- the VM paths: two VMs in one QEMU under Kestrel's VMM (`vmm.vms=2`, as scripts/vm-linux.sh
  boots them), VM 0 the client at 10.1.0.1, VM 1 the server at 10.1.0.2, over
  - `virtio`: the paravirtual virtio-mmio NIC (`net.path=virtio`, the interface bound to
    virtio_net),
  - `torus`: bgnet over the torus (`net.path=bgnet net.transport=torus`),
  - `collective`: bgnet over the collective (`net.path=bgnet net.transport=collective`).

A path whose device or driver the guest does not have (yet), or whose run breaks, is reported
as null with the reason the guest or the run gave: never a number that was not measured.

NetPIPE (NPtcp, ping-pong, message sizes 1 byte to --upper in NetPIPE's steps, no
perturbation, --nrepeat round trips per trial, the best of 3 trials) gives a curve of one-way
time and throughput per size; iperf (one TCP stream for --iperf-time guest seconds) a streaming
figure. Latency = NPtcp's one-way time of a 1-byte message; throughput = the highest NPtcp
throughput over all sizes. Ratios are VM figure / native figure. The VMM's trace table of each
VM (printed when it powers off) gives the top exit classes of each VM path, by total cost
(count x average ticks), as bench/table1.py reads them.

Writes bench/results/net.json, net.md (tables) and net.png (throughput and latency against
message size) and prints the tables. Thresholds (pv throughput >= 50% of native, torus
throughput >= 25%, pv latency <= 4x) are reported as met or not, never a failure: a run that
breaks makes its path null, and the script fails only when the native reference breaks.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ipc import BenchError, qemu_version
from framework import bench, constants, linux, qemu
from framework import console as con
from table1 import INSTRUCTIONS_PER_TICK, git_commit, job_only, md_table, private_target, pyplot, script_output

ROOT = Path(__file__).resolve().parent.parent
LINUX_OUT = ROOT / "guests" / "linux" / "out"
SCRIPT = "net-bench"
# The two-VM run that only boots and powers off: its trace tables, subtracted from a path's,
# leave the exits of the benchmark itself (as bench/table1.py's job-only figures).
BASELINE = "boot"
# The paths measured, in report order: name -> guest command line words. "native" is the
# reference, the others run in two VMs.
PATHS = {
    "native": ("net.path=lo",),
    "virtio": ("net.path=virtio",),
    "torus": ("net.path=bgnet", "net.transport=torus", "kestrel_bgnet.transport=torus"),
    "collective": ("net.path=bgnet", "net.transport=collective",
                   "kestrel_bgnet.transport=collective"),
}
VM_PATHS = tuple(p for p in PATHS if p != "native")
# (JSON key, path, figure, comparison, bound): the thresholds of the issue.
THRESHOLDS = (
    ("pv_throughput", "virtio", "throughput", ">=", 0.5),
    ("torus_throughput", "torus", "throughput", ">=", 0.25),
    ("pv_latency", "virtio", "latency", "<=", 4.0),
)
TOP = 5
GUEST_MB = constants.VMM_DEFAULT_MEM_MB

HEADER_RE = re.compile(r"^net: path (?P<path>\S+) role (?P<role>\S+) index (?P<index>\d+) "
                       r"iface (?P<iface>\S+) driver (?P<driver>\S+) address (?P<address>\S+) "
                       r"peer (?P<peer>\S+)$")
NP_RE = re.compile(r"^net: np (?P<bytes>\d+) (?P<mbps>\d+(?:\.\d+)?) (?P<seconds>\d+(?:\.\d+)?)$")
IPERF_RE = re.compile(r"^net: iperf (?P<csv>.*)$")
UNAVAILABLE_RE = re.compile(r"^net: unavailable (?P<path>[^:]+): (?P<reason>.*)$")
FAILED_RE = re.compile(r"^net: failed (?P<what>\w+): ?(?P<reason>.*)$")
STATUS_RE = re.compile(r"^net: server (?P<test>\w+) status (?P<status>\d+)$")
TIMING_RE = re.compile(r"^timing: net (?P<test>\w+) start (?P<start>\d+) end (?P<end>\d+)$")


class Unavailable(Exception):
    """A path that could not be measured; the message is the reason, reported as is."""


# ---------------------------------------------------------------------------------------------
# Parsing one guest's net-bench output


def parse_header(lines: list[str]) -> dict:
    """The `net: path ...` line: path, role, index, iface, driver, address, peer."""
    found = [m.groupdict() for m in map(HEADER_RE.match, lines) if m]
    if len(found) != 1:
        raise BenchError(f"want one 'net: path' line, got {len(found)}")
    header = found[0]
    header["index"] = int(header["index"])
    return header


def parse_np(lines: list[str]) -> list[dict]:
    """NPtcp's points in the order printed: bytes, one-way seconds, throughput in 10^6 bit/s
    (recomputed from bytes and time; NPtcp's own "Mbps" column is 2^20 bit/s)."""
    points = []
    for line in lines:
        if not line.startswith("net: np "):
            continue
        m = NP_RE.match(line)
        if m is None:
            raise BenchError(f"malformed NPtcp line: {line!r}")
        size, seconds = int(m["bytes"]), float(m["seconds"])
        if size <= 0 or seconds <= 0:
            raise BenchError(f"NPtcp line with a zero size or time: {line!r}")
        if points and size <= points[-1]["bytes"]:
            raise BenchError(f"NPtcp sizes not increasing at {line!r}")
        points.append({"bytes": size, "seconds": seconds,
                       "mbit_s": round(size * 8 / seconds / 1e6, 4),
                       "latency_us": round(seconds * 1e6, 4)})
    return points


def parse_iperf_csv(csv: str) -> dict:
    """One iperf `-y C` report: time,src,sport,dst,dport,id,interval,bytes,bits_per_second."""
    fields = csv.split(",")
    if len(fields) != 9:
        raise BenchError(f"iperf CSV line with {len(fields)} fields, want 9: {csv!r}")
    try:
        start, end = (float(x) for x in fields[6].split("-"))
        size, bps = int(fields[7]), int(fields[8])
    except ValueError as err:
        raise BenchError(f"malformed iperf CSV line {csv!r}: {err}") from err
    if size <= 0 or bps <= 0:
        raise BenchError(f"iperf moved nothing: {csv!r}")
    return {"bytes": size, "interval_s": [start, end], "mbit_s": round(bps / 1e6, 4)}


def parse_iperf(lines: list[str]) -> dict | None:
    """The client's iperf report (the last one when there are several), or None."""
    reports = [parse_iperf_csv(m["csv"]) for m in map(IPERF_RE.match, lines) if m]
    return reports[-1] if reports else None


def unavailable(lines: list[str]) -> str | None:
    """The reason from a `net: unavailable` line, or None."""
    m = next(filter(None, map(UNAVAILABLE_RE.match, lines)), None)
    return m["reason"] if m else None


def parse_client(lines: list[str]) -> dict:
    """The figures of the client's script output: header, NPtcp curve, iperf. Raises
    Unavailable with the guest's reason when it said the path is unavailable or a test failed."""
    reason = unavailable(lines)
    if reason is not None:
        raise Unavailable(reason)
    header = parse_header(lines)
    failed = [f"{m['what']}: {m['reason']}" for m in map(FAILED_RE.match, lines) if m]
    np = parse_np(lines)
    iperf = parse_iperf(lines)
    if failed and not np and iperf is None:
        raise Unavailable("; ".join(failed))
    timing = {m["test"]: int(m["end"]) - int(m["start"]) for m in map(TIMING_RE.match, lines) if m}
    return {"header": header, "np": np, "iperf": iperf, "failed": failed,
            "test_instructions": {t: round(ticks * INSTRUCTIONS_PER_TICK) for t, ticks in timing.items()}}


def figures(client: dict) -> dict:
    """The headline figures of one path: latency (1-byte one-way time), peak throughput, iperf."""
    np = client["np"]
    smallest = np[0] if np else None
    peak = max(np, key=lambda p: p["mbit_s"]) if np else None
    return {
        "latency_us": smallest["latency_us"] if smallest else None,
        "latency_bytes": smallest["bytes"] if smallest else None,
        "throughput_mbit_s": peak["mbit_s"] if peak else None,
        "throughput_bytes": peak["bytes"] if peak else None,
        "iperf_mbit_s": client["iperf"]["mbit_s"] if client["iperf"] else None,
    }


def top_exits(trace: dict[str, dict[str, int]], top: int = TOP) -> list[dict]:
    """The `top` trace points of a trace table by total cost (count x average ticks), as
    table1 ranks them."""
    return top_by_total({n: {"count": r["count"], "total_ticks": r["count"] * r["avg"]}
                         for n, r in trace.items()}, top)


def top_by_total(rows: dict[str, dict[str, int]], top: int = TOP) -> list[dict]:
    """The `top` rows ({count, total_ticks} per trace point) by total ticks; share = of the sum
    over all rows with a positive total."""
    grand = sum(r["total_ticks"] for r in rows.values() if r["total_ticks"] > 0)
    names = sorted(rows, key=lambda n: (-rows[n]["total_ticks"], n))[:top]
    return [{"name": n, "count": rows[n]["count"],
             "avg_ticks": round(rows[n]["total_ticks"] / rows[n]["count"], 1) if rows[n]["count"] > 0 else None,
             "total_instructions": round(rows[n]["total_ticks"] * INSTRUCTIONS_PER_TICK),
             "share": round(rows[n]["total_ticks"] / grand, 6) if grand else 0.0} for n in names]


def exit_classes(traces: dict[int, dict], roles: dict[int, str], baseline: dict[int, dict] | None) -> dict:
    """Per VM: its role, exits and top classes over the whole run and, with the baseline (boot
    only) run's tables, over the benchmark alone (this run minus the baseline)."""
    out = {}
    for vm in sorted(roles):
        trace = traces.get(vm, {})
        entry = {"role": roles[vm], "exits": sum(r["count"] for r in trace.values()),
                 "top": top_exits(trace)}
        if baseline is not None and vm in baseline:
            only = job_only(trace, baseline[vm])
            entry["exits_benchmark"] = sum(r["count"] for r in only.values())
            entry["top_benchmark"] = top_by_total(only)
        out[f"vm{vm}"] = entry
    return out


def parse_baseline_run(console: str) -> dict[int, dict]:
    """The boot-only two-VM run: each VM's trace table (both must have run the boot script)."""
    panic = con.panic_line(console)
    if panic:
        raise BenchError(f"panic: {panic}")
    try:
        tables = con.parse_trace_tables(console)
    except con.ConsoleError as err:
        raise BenchError(str(err)) from err
    for vm in (0, 1):
        script_output(console, BASELINE, vm)
        if not tables.get(vm):
            raise BenchError(f"no trace table for vm{vm}")
    return {vm: tables[vm] for vm in (0, 1)}


def parse_vm_run(console: str) -> dict:
    """A two-VM run: the client's figures, each VM's role and its top exit classes. Raises
    Unavailable when the guests say the path cannot be measured, BenchError when the output
    is broken."""
    panic = con.panic_line(console)
    if panic:
        raise BenchError(f"panic: {panic}")
    outputs, roles = {}, {}
    for vm in (0, 1):
        lines = script_output(console, SCRIPT, vm)
        outputs[vm] = lines
        reason = unavailable(lines)
        if reason is not None:
            raise Unavailable(f"vm{vm}: {reason}")
        roles[vm] = parse_header(lines)["role"]
    clients = [vm for vm, role in roles.items() if role == "client"]
    if len(clients) != 1 or sorted(roles.values()) != ["client", "server"]:
        raise BenchError(f"want one client and one server VM, got roles {roles}")
    client = parse_client(outputs[clients[0]])
    server_status = {m["test"]: int(m["status"]) for vm in roles if roles[vm] == "server"
                     for m in map(STATUS_RE.match, outputs[vm]) if m}
    try:
        tables = con.parse_trace_tables(console)
    except con.ConsoleError as err:
        raise BenchError(str(err)) from err
    client["server_status"] = server_status
    client["roles"] = roles
    client["traces"] = {vm: tables.get(vm, {}) for vm in (0, 1)}
    return client


def parse_native_run(console: str) -> dict:
    panic = con.panic_line(console)
    if panic:
        raise BenchError(f"panic: {panic}")
    lines = script_output(console, SCRIPT)
    client = parse_client(lines)
    if not client["np"]:
        raise BenchError("the native reference has no NPtcp figures: "
                         + ("; ".join(client["failed"]) or "no 'net: np' lines"))
    client["server_status"] = {m["test"]: int(m["status"]) for m in map(STATUS_RE.match, lines) if m}
    return client


# ---------------------------------------------------------------------------------------------
# Summary and report


def ratio(vm: float | None, native: float | None) -> float | None:
    if vm is None or native is None or native == 0:
        return None
    return round(vm / native, 4)


def summarize(results: dict[str, dict], params: dict, qemu: str, commit: str,
              baseline: dict[int, dict] | None = None, baseline_reason: str = "was not run") -> dict:
    """The JSON document. `results` maps each path to {"ok": parsed run} or {"reason": text};
    `baseline` holds the boot-only run's trace tables per VM (None: not run or broken)."""
    native = figures(results["native"]["ok"])
    paths = {}
    for name in PATHS:
        res = results.get(name, {"reason": "not run"})
        if "ok" not in res:
            paths[name] = {"measured": False, "reason": res["reason"]}
            continue
        run = res["ok"]
        entry = {"measured": True, **figures(run), "np": run["np"], "iperf": run["iperf"],
                 "failed": run["failed"], "test_instructions": run["test_instructions"],
                 "server_status": run["server_status"], "interface": run["header"]}
        if name != "native":
            entry["exit_classes"] = exit_classes(run["traces"], run["roles"], baseline)
            entry["throughput_ratio"] = ratio(entry["throughput_mbit_s"], native["throughput_mbit_s"])
            entry["latency_ratio"] = ratio(entry["latency_us"], native["latency_us"])
            entry["iperf_ratio"] = ratio(entry["iperf_mbit_s"], native["iperf_mbit_s"])
        paths[name] = entry

    def path_ratio(path: str, figure: str) -> float | None:
        entry = paths[path]
        return entry.get(f"{figure}_ratio") if entry["measured"] else None

    thresholds = {}
    for key, path, figure, op, bound in THRESHOLDS:
        value = path_ratio(path, figure)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        thresholds[key] = {"path": path, "figure": figure, "ratio": value, "target": f"{op} {bound:g}",
                           "met": met, **({} if value is not None else {"reason": paths[path].get(
                               "reason", f"no {figure} figure")})}
    return {
        "pv_throughput_ratio": path_ratio("virtio", "throughput"),
        "torus_throughput_ratio": path_ratio("torus", "throughput"),
        "collective_throughput_ratio": path_ratio("collective", "throughput"),
        "pv_latency_ratio": path_ratio("virtio", "latency"),
        "torus_latency_ratio": path_ratio("torus", "latency"),
        "collective_latency_ratio": path_ratio("collective", "latency"),
        "pv_iperf_ratio": path_ratio("virtio", "iperf"),
        "torus_iperf_ratio": path_ratio("torus", "iperf"),
        "collective_iperf_ratio": path_ratio("collective", "iperf"),
        "thresholds": thresholds,
        "paths": paths,
        "exit_baseline": ({"script": BASELINE, "measured": True} if baseline is not None
                          else {"script": BASELINE, "measured": False, "reason": baseline_reason}),
        "parameters": params,
        "method": METHOD,
        "qemu": qemu,
        "commit": commit,
    }


METHOD = (
    "Linux 6.1 guest (guests/linux), script net-bench, qemu-system-ppc -M bamboo -icount "
    "shift=0,sleep=off (guest time = time base, 1 tick = 2.5 instructions). Native: one Linux, "
    "NPtcp and iperf client and server over TCP loopback. VM paths: two Linux VMs under Kestrel "
    "(vmm.vms=2), client VM 0 (10.1.0.1), server VM 1 (10.1.0.2), over the virtio-mmio NIC, bgnet "
    "on the torus, bgnet on the collective. NPtcp 3.7.2: ping-pong, -p 0, sizes 1 byte to the "
    "upper bound in NetPIPE's steps, fixed round trips per trial, best of 3 trials; latency = "
    "one-way time of 1 byte; throughput = the highest over all sizes (10^6 bit/s). iperf 2.1.8: "
    "one TCP stream, client's report. Ratios: VM / native. Exit classes: the VMM's trace table "
    "per VM, top by count x average cost, for the whole run (boot, benchmark, power-off) and for "
    "the benchmark alone (minus a two-VM run of the boot script)"
)


def fmt(value: float | None, digits: int = 2, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def report(s: dict) -> str:
    """The markdown report (bench/results/net.md); also printed."""
    p = s["parameters"]
    lines = ["# Fig. 7 analogue: TCP between two Linux VMs on one node, against native Linux", "",
             f"Commit {s['commit']}, {s['qemu']}. Guest time under `-icount shift=0` "
             f"(1 time base tick = 2.5 instructions). NPtcp sizes 1..{p['upper']} bytes, "
             f"{p['nrepeat']} round trips per trial; iperf {p['iperf_time']} s.", "",
             "## Headline figures", ""]
    rows = []
    for name, e in s["paths"].items():
        if not e["measured"]:
            rows.append((name, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", f"not measured: {e['reason']}"))
            continue
        nat = name == "native"
        rows.append((name, fmt(e["latency_us"]), "1.00x" if nat else fmt(e["latency_ratio"], 2, "x"),
                     fmt(e["throughput_mbit_s"], 1), "1.00x" if nat else fmt(e["throughput_ratio"], 3, "x"),
                     fmt(e["iperf_mbit_s"], 1), "1.00x" if nat else fmt(e["iperf_ratio"], 3, "x"),
                     "; ".join(e["failed"]) or "measured"))
    lines += md_table(("path", "latency (us, 1 B one-way)", "vs native", "peak NPtcp (Mbit/s)", "vs native",
                       "iperf (Mbit/s)", "vs native", "note"), rows, "lrrrrrrl")
    lines += ["", "## Thresholds (reported, never a failure)", ""]
    rows = [(k, t["path"], t["figure"], fmt(t["ratio"], 3), t["target"],
             {True: "yes", False: "no", None: "n/a"}[t["met"]] + (f" ({t['reason']})" if "reason" in t else ""))
            for k, t in s["thresholds"].items()]
    lines += md_table(("threshold", "path", "figure", "VM / native", "target", "met?"), rows, "lllrll")
    measured = [n for n, e in s["paths"].items() if e["measured"]]
    sizes = sorted({pt["bytes"] for n in measured for pt in s["paths"][n]["np"]})
    if sizes:
        lines += ["", "## NPtcp per message size: one-way time (us) / throughput (Mbit/s)", ""]
        by = {n: {pt["bytes"]: pt for pt in s["paths"][n]["np"]} for n in measured}
        rows = [(size, *(f"{by[n][size]['latency_us']:.2f} / {by[n][size]['mbit_s']:.2f}" if size in by[n] else "-"
                         for n in measured)) for size in sizes]
        lines += md_table(("bytes", *measured), rows, "r" * (1 + len(measured)))
    vm_measured = [n for n in measured if n != "native"]
    for key, title in (("top_benchmark", "the benchmark alone: this run minus the boot-only run"),
                       ("top", "whole run: boot, benchmark, power-off")):
        rows = []
        for n in vm_measured:
            for vm, info in s["paths"][n]["exit_classes"].items():
                for t in info.get(key, []):
                    avg = "n/a" if t["avg_ticks"] is None else f"{t['avg_ticks']:g}"
                    rows.append((n, f"{vm} ({info['role']})", t["name"], f"{t['count']:,}", avg,
                                 f"{t['total_instructions']:,}", f"{100 * t['share']:.1f}%"))
        if rows:
            lines += ["", f"## Top {TOP} exit classes per VM ({title}), by total cost", ""]
            lines += md_table(("path", "VM", "trace point", "exits", "avg (ticks)", "total (instructions)",
                               "share"), rows, "lllrrrr")
    if vm_measured and s.get("exit_baseline", {}).get("reason"):
        lines += ["", f"No benchmark-only exit classes (boot-only run: {s['exit_baseline']['reason']})."]
    lines += ["", f"Method: {s['method']}.", ""]
    return "\n".join(lines)


def plot(s: dict, out: Path) -> str | None:
    """net.png: throughput and one-way time against message size, one line per measured path.
    Returns why no plot was drawn, or None."""
    plt, why = pyplot(s, out, __file__)
    if plt is None:
        return why
    fig, (thr, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, e in s["paths"].items():
        if not e["measured"] or not e["np"]:
            continue
        x = [p["bytes"] for p in e["np"]]
        thr.plot(x, [p["mbit_s"] for p in e["np"]], marker=".", label=name)
        lat.plot(x, [p["latency_us"] for p in e["np"]], marker=".", label=name)
    for ax, title, ylabel in ((thr, "throughput", "Mbit/s"), (lat, "one-way time", "us")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"NPtcp {title} (guest time, -icount)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    missing = [n for n, e in s["paths"].items() if not e["measured"]]
    if missing:
        fig.text(0.01, 0.01, "not measured: " + ", ".join(missing), fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return None


# ---------------------------------------------------------------------------------------------
# Running


def cmdline(path: str, params: dict) -> str:
    """The guest command line of a path (BASELINE: the boot-only run)."""
    if path == BASELINE:
        return qemu.join_cmdline(linux.LINUX_CMDLINE, params["append"],
                                         f"kestrel.script={BASELINE}")
    words = [*PATHS[path], f"net.upper={params['upper']}", f"net.nrepeat={params['nrepeat']}",
             f"net.iperf_time={params['iperf_time']}"]
    return qemu.join_cmdline(linux.LINUX_CMDLINE, params["append"], *words,
                                     f"kestrel.script={SCRIPT}")


def node(path: str, params: dict, log: Path, private: Path) -> qemu.Node:
    vmlinux, initrd = LINUX_OUT / "vmlinux", LINUX_OUT / "initramfs.cpio.gz"
    if path == "native":
        return qemu.Node(kernel=vmlinux, initrd=initrd, append=cmdline(path, params),
                                 mem_mb=GUEST_MB, icount=True)
    out = private / "powerpc-440-none" / "release"
    image = qemu.vmm_image(vmlinux, initrd=initrd, cmdline=cmdline(path, params),
                                   vmm=out / "kestrel-vmm", root=out / "kestrel-root",
                                   fabric=out / "kestrel-fabric")
    return qemu.kestrel_node(image, log.with_suffix(".bootmod"), kernel=out / "kestrel-kernel",
                                     append=qemu.vmm_cmdline(2, None),
                                     mem_mb=constants.KESTREL_RAM_MB, icount=True)


def run_path(path: str, index: int, params: dict, timeout: int, private: Path) -> dict:
    """One run of a path (or of BASELINE, two VMs that only boot): {"ok": parsed} or
    {"reason": why not}; a broken native run raises."""
    log = qemu.logs_dir() / f"net-{path}-run{index}.log"
    print(f"net.py: {path} run {index} (log: {log})", file=sys.stderr, flush=True)
    try:
        status, console = qemu.run_captured(node(path, params, log, private), timeout=timeout,
                                                     log=log)
        if status != 0:
            what = "timed out" if status == 124 else f"exited with status {status}"
            tail = " | ".join(l for l in console.splitlines()[-4:] if l.strip())
            raise BenchError(f"QEMU {what} (log: {log}): {tail}")
        parse = {"native": parse_native_run, BASELINE: parse_baseline_run}.get(path, parse_vm_run)
        return {"ok": parse(console)}
    except Unavailable as err:
        return {"reason": str(err)}
    except (BenchError, qemu.LaunchError) as err:
        if path == "native":
            raise BenchError(f"native run {index}: {err}") from err
        return {"reason": f"run failed: {err}"}


def check_deterministic(runs: list[dict[str, dict]]) -> None:
    """Fails unless every run of every path gave the same result (the point of -icount)."""
    try:
        bench.check_deterministic(runs)
    except BenchError as err:
        raise BenchError(f"{err} (logs: {qemu.logs_dir()}/net-PATH-run*.log)") from err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the kernel and VMM ELF files already built")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"which paths ({','.join(PATHS)})")
    parser.add_argument("--runs", type=int, default=1, help="runs per path, which must agree (1)")
    parser.add_argument("--jobs", type=int, default=2, help="QEMU runs at once (2)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per QEMU run (600)")
    parser.add_argument("--upper", type=int, default=65536, help="NPtcp's largest message in bytes (65536)")
    parser.add_argument("--nrepeat", type=int, default=20, help="NPtcp round trips per trial (20)")
    parser.add_argument("--iperf-time", type=int, default=1, help="iperf guest seconds (1)")
    parser.add_argument("--append", default="", help="extra guest kernel arguments, every path")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "net.json",
                        help="the JSON results; net.md and net.png go next to it")
    parser.add_argument("--plot-only", type=Path, metavar="JSON",
                        help="only draw the plot of a results file (next to --output)")
    args = parser.parse_args(argv)
    if args.plot_only:
        why = plot(json.loads(args.plot_only.read_text()), args.output.with_suffix(".png"))
        if why:
            print(f"net.py: no plot: {why}", file=sys.stderr)
        return 1 if why else 0
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or "native" not in paths:
        parser.error(f"--paths: want native plus any of {', '.join(VM_PATHS)}; got {args.paths}")
    params = {"upper": args.upper, "nrepeat": args.nrepeat, "iperf_time": args.iperf_time,
              "append": args.append, "runs": args.runs,
              "guest_command_line": {p: cmdline(p, {"upper": args.upper, "nrepeat": args.nrepeat,
                                                    "iperf_time": args.iperf_time, "append": args.append})
                                     for p in paths}}
    try:
        if not args.no_build and any(p != "native" for p in paths):
            subprocess.run([str(ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel", "-p", "kestrel-root",
                            "-p", "kestrel-vmm"], check=True)
        subprocess.run([str(ROOT / "guests" / "linux" / "build.sh")], check=True)
        private = (private_target(qemu.target_dir(), "bench-net") if any(p != "native" for p in paths)
                   else qemu.target_dir())
        runs = []
        for index in range(1, args.runs + 1):
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                # The baseline only when a VM path runs; started last (the paths matter more).
                to_run = paths + ([BASELINE] if any(p != "native" for p in paths) else [])
                futures = {p: pool.submit(run_path, p, index, params, args.timeout, private) for p in to_run}
                runs.append({p: f.result() for p, f in futures.items()})
        check_deterministic(runs)
        results = {p: runs[0].get(p, {"reason": "not run (--paths)"}) for p in PATHS}
        base = runs[0].get(BASELINE, {"reason": "was not run (no VM path)"})
        summary = summarize(results, params, qemu_version(), git_commit(), base.get("ok"),
                            base.get("reason", ""))
    except (subprocess.CalledProcessError, BenchError) as err:
        print(f"net.py: FAILED: {err}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    text = report(summary)
    args.output.with_suffix(".md").write_text(text)
    why = plot(summary, args.output.with_suffix(".png"))
    print(text)
    if why:
        print(f"net.py: no plot: {why}", file=sys.stderr)
    print(f"(written to {args.output}, {args.output.with_suffix('.md')}"
          + ("" if why else f", {args.output.with_suffix('.png')}") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
