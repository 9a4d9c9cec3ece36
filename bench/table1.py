#!/usr/bin/env python3
"""Table 1: VM exits of a Linux job, and the job and the boot in instructions, natively and in a VM.

Boots the unmodified Linux guest (guests/linux) under `-icount shift=0,sleep=off`, where the
400 MHz time base advances 0.4 ticks per guest instruction (1 tick = 2.5 instructions), natively
(as guests/linux/run-native.sh boots it) and in a Kestrel VM (as scripts/vm-linux.sh does; both
through scripts/kestrel_qemu.py), with two of its scripts:

- `boot` prints the time base when it starts: power-on to the script's start (the shell prompt),
  times 2.5, is the boot in instructions (natively from QEMU's reset, in the VM from QEMU's reset
  too, so the Kestrel kernel's and the VMM's start-up count as part of the VM's boot);
- `job` (a build-like shell job) prints `timing: job time base start X end Y`: (Y - X) * 2.5
  instructions. Its other output (a checksum) must be the same natively and in the VM.

The VMM prints its trace points (count and min/max/avg cost in time base ticks per exit class,
under the paper's names) when the guest powers off; the job run's table is the Table 1
analogue. The boot run's table, subtracted from it, gives the exits of the job alone (both runs
boot the same way under -icount). With several VMs, VM i's console lines carry `[vm<i>] ` and
its table follows a line naming `vm<i>`; both forms are parsed, and VM 0's figures are used.

Each mode runs --runs times (2 by default, native and VM in parallel); every figure must agree
between runs (the point of -icount), else the script fails and names the figure. Writes
bench/results/table1.json and table1.md and prints the table. Missing the target (VM within 3x
of native) is reported, never a failure. Python 3 standard library only.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ipc import BenchError, kestrel_qemu, qemu_version

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTIONS_PER_TICK = 2.5
TARGET_RATIO = 3.0
# The paper (Stoess et al., ROSS '11): the same work took 126 s in a VM and 3 s natively.
PAPER = {"vm_seconds": 126, "native_seconds": 3, "ratio": 42.0}
TOP = 5
# Exit classes grouped for the summary; a trace point not named here counts as "other".
GROUPS = (
    ("in-kernel emulation", lambda n: n.startswith("EMUL_")),
    ("TLB misses", lambda n: n in ("ITLB_MISS", "DTLB_MISS")),
    ("exceptions injected/reflected", lambda n: n.startswith("EXCEPT_")),
    ("VMM IPC (fault messages)", lambda n: n in ("SYSCALL_IPC", "PAGEFAULT_IPC")),
    ("guest idle", lambda n: n == "GUEST_IDLE"),
)
METHOD = (
    "Linux 6.1 guest (guests/linux), scripts boot and job, natively (qemu -kernel vmlinux) and in a "
    "Kestrel VM, qemu-system-ppc -M bamboo -icount shift=0,sleep=off; instructions = time base "
    "ticks * 2.5; exits and costs from the VMM's trace table of the job run (cost: kernel entry to "
    "the return to the guest or to the IPC send, in ticks; time in the VMM task is not included); "
    "total cost = count * avg (avg as printed, whole ticks); job-only exits = job run - boot run; "
    "runs per mode must agree exactly"
)

BOOT_RE = re.compile(r"^timing: uptime \S+ s, time base (\d+)$")
INIT_RE = re.compile(r"^timing: /init started at time base (\d+);")
JOB_RE = re.compile(r"^timing: job time base start (\d+) end (\d+)$")
DONE = "KESTREL-SCRIPT-DONE"

# Console parsing shared with every other QEMU run lives in scripts/kestrel_qemu.py.
split_prefix = kestrel_qemu.split_prefix
guest_lines = kestrel_qemu.guest_lines


def parse_trace_tables(console: str) -> dict[int, dict[str, dict[str, int]]]:
    """Every trace table in a VM run's console (kestrel_qemu.parse_trace_tables)."""
    try:
        return kestrel_qemu.parse_trace_tables(console)
    except kestrel_qemu.ConsoleError as err:
        raise BenchError(str(err)) from err


def trace_table(console: str, vm: int = 0) -> dict[str, dict[str, int]]:
    """VM `vm`'s trace table; fails when there is none or it is empty."""
    try:
        return kestrel_qemu.trace_table(console, vm)
    except kestrel_qemu.ConsoleError as err:
        raise BenchError(str(err)) from err


def script_output(console: str, script: str, vm: int = 0) -> list[str]:
    """The lines /scripts/SCRIPT printed, from /init's `running` line to KESTREL-SCRIPT-DONE.

    Fails on a kernel panic, when the script did not start or finish, or exited non-zero."""
    lines = guest_lines(console, vm)
    for line in lines:
        if line.startswith("KERNEL PANIC") or line.startswith("Kernel panic"):
            raise BenchError(f"panic: {line}")
    start = f"kestrel-guest: running /scripts/{script}"
    if start not in lines:
        raise BenchError(f"script {script} never started (no {start!r} line)")
    first = lines.index(start) + 1
    if DONE not in lines[first:]:
        raise BenchError(f"script {script} did not reach {DONE}")
    last = lines.index(DONE, first)
    status = f"kestrel-guest: script {script} exited with status 0; powering off"
    if status not in lines[last:]:
        raise BenchError(f"script {script} did not exit with status 0")
    return lines[first:last]


def parse_boot(console: str, vm: int = 0) -> dict[str, int]:
    """Time bases of a `boot` run: at /init's start and at the script's start."""
    lines = guest_lines(console, vm)
    init = [int(m.group(1)) for m in map(INIT_RE.match, lines) if m]
    script = [int(m.group(1)) for m in map(BOOT_RE.match, script_output(console, "boot", vm)) if m]
    if len(init) != 1 or len(script) != 1:
        raise BenchError(f"boot: want one /init and one script time base, got {init} and {script}")
    return {"init_tb": init[0], "script_tb": script[0]}


def parse_job(console: str, vm: int = 0) -> dict:
    """Time bases around the `job` script's work and its output without `timing:` lines."""
    out = script_output(console, "job", vm)
    marks = [tuple(map(int, m.groups())) for m in map(JOB_RE.match, out) if m]
    if len(marks) != 1:
        raise BenchError(f"job: want one 'timing: job time base' line, got {len(marks)}")
    start, end = marks[0]
    if end <= start:
        raise BenchError(f"job: time base went backwards ({start} -> {end})")
    return {"start_tb": start, "end_tb": end, "output": [l for l in out if not l.startswith("timing:")]}


def instructions(ticks: int | float) -> int:
    return round(ticks * INSTRUCTIONS_PER_TICK)


def job_only(job: dict[str, dict[str, int]], boot: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Exits of the job alone: the job run's counts and total ticks minus the boot run's."""
    out = {}
    for name, row in job.items():
        b = boot.get(name, {"count": 0, "avg": 0})
        count = row["count"] - b["count"]
        total = row["count"] * row["avg"] - b["count"] * b["avg"]
        out[name] = {"count": count, "total_ticks": total}
    return out


def summarize(runs: list[dict], qemu: str, commit: str) -> dict:
    """The JSON document from runs that agree (see check_deterministic). A run is
    {"native": {"boot": parse_boot, "job": parse_job}, "vm": {... same ..., "trace_boot": table,
    "trace_job": table}}."""
    run = runs[0]
    nat, vm = run["native"], run["vm"]
    if nat["job"]["output"] != vm["job"]["output"]:
        raise BenchError("the job's output differs natively and in the VM:\n  native: "
                         + "\n          ".join(nat["job"]["output"]) + "\n  VM:     "
                         + "\n          ".join(vm["job"]["output"]))
    trace = vm["trace_job"]
    totals = {n: r["count"] * r["avg"] for n, r in trace.items()}
    grand = sum(totals.values())
    only = job_only(trace, vm["trace_boot"])
    only_total = sum(r["total_ticks"] for r in only.values())
    job_native = instructions(nat["job"]["end_tb"] - nat["job"]["start_tb"])
    job_vm = instructions(vm["job"]["end_tb"] - vm["job"]["start_tb"])
    boot_native = instructions(nat["boot"]["script_tb"])
    boot_vm = instructions(vm["boot"]["script_tb"])
    top = sorted(totals, key=lambda n: (-totals[n], n))[:TOP]
    groups: dict[str, int] = {}
    for name, ticks in totals.items():
        group = next((g for g, match in GROUPS if match(name)), "other")
        groups[group] = groups.get(group, 0) + ticks
    overhead = job_vm - job_native
    return {
        "exits": {n: r["count"] for n, r in trace.items()},
        "exit_cost_ticks": {n: {k: r[k] for k in ("min", "max", "avg")} for n, r in trace.items()},
        "exit_cost_instructions": {n: r["avg"] * INSTRUCTIONS_PER_TICK for n, r in trace.items()},
        "exit_total_instructions_by_class": {n: instructions(t) for n, t in totals.items()},
        "exit_total_instructions": instructions(grand),
        "exit_groups_instructions": {g: instructions(t) for g, t in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top_exit_classes": [
            {"name": n, "count": trace[n]["count"], "avg_instructions": trace[n]["avg"] * INSTRUCTIONS_PER_TICK,
             "total_instructions": instructions(totals[n]), "share": round(totals[n] / grand, 6) if grand else 0.0}
            for n in top
        ],
        "exits_job_only": {n: r["count"] for n, r in only.items()},
        "exit_total_instructions_job_only": instructions(only_total),
        "job_instructions_native": job_native,
        "job_instructions_vm": job_vm,
        "job_ratio": round(job_vm / job_native, 2),
        "job_overhead_explained_by_exits": round(instructions(only_total) / overhead, 3) if overhead > 0 else None,
        "boot_instructions_native": boot_native,
        "boot_instructions_vm": boot_vm,
        "boot_ratio": round(boot_vm / boot_native, 2),
        "init_instructions_native": instructions(nat["boot"]["init_tb"]),
        "init_instructions_vm": instructions(vm["boot"]["init_tb"]),
        "job_output": nat["job"]["output"],
        "target_ratio": TARGET_RATIO,
        "paper": PAPER,
        "method": METHOD,
        "runs": len(runs),
        "qemu": qemu,
        "commit": commit,
    }


def figures(run: dict) -> dict[str, int]:
    """Every figure of a run that -icount should make repeatable, flattened for comparison."""
    flat = {}
    for mode in ("native", "vm"):
        for key, value in run[mode]["boot"].items():
            flat[f"{mode}.boot.{key}"] = value
        for key in ("start_tb", "end_tb"):
            flat[f"{mode}.job.{key}"] = run[mode]["job"][key]
        flat[f"{mode}.job.output"] = run[mode]["job"]["output"]
    for which in ("trace_boot", "trace_job"):
        for name, row in run["vm"][which].items():
            for key, value in row.items():
                flat[f"vm.{which}.{name}.{key}"] = value
    return flat


def check_deterministic(runs: list[dict]) -> None:
    """Fails unless every run gave the same figures, naming the ones that differ."""
    first = figures(runs[0])
    for index, run in enumerate(runs[1:], start=2):
        other = figures(run)
        diffs = [f"{k}: run 1 {first.get(k)}, run {index} {other.get(k)}"
                 for k in sorted(set(first) | set(other)) if first.get(k) != other.get(k)]
        if diffs:
            raise BenchError("runs differ under -icount (non-deterministic): " + "; ".join(diffs))


def fmt_int(n: int | float) -> str:
    return f"{n:,.0f}"


def fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def fmt_share(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def md_table(header: tuple, rows: list[tuple], align: str) -> list[str]:
    """A markdown table; align has one 'l' or 'r' per column."""
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def report(s: dict) -> str:
    """The markdown report (bench/results/table1.md); also printed."""
    grand = sum(s["exit_total_instructions_by_class"].values())
    lines = ["# Table 1 analogue: VM exits of a Linux job under Kestrel", "",
             f"Commit {s['commit']}, {s['qemu']}, {s['runs']} identical runs per mode. "
             "Instructions under `-icount shift=0` (1 time base tick = 2.5 guest instructions). "
             f"Guest command line in both modes: `{s.get('guest_command_line', 'console=ttyS0 panic=1')}`; "
             "native QEMU with `-m 64`, the VM's RAM.", "",
             "## Guest work, natively and in a VM", ""]
    work = [
        ("job (`job` script, start to end)", s["job_instructions_native"], s["job_instructions_vm"], s["job_ratio"]),
        ("boot (power-on to the `boot` script's start)", s["boot_instructions_native"], s["boot_instructions_vm"],
         s["boot_ratio"]),
    ]
    rows = [(w, fmt_int(n), fmt_int(v), fmt_ratio(r), f"<= {s['target_ratio']:g}x",
             "yes" if r <= s["target_ratio"] else "no") for w, n, v, r in work]
    init_ratio = s["init_instructions_vm"] / s["init_instructions_native"]
    rows.append(("(power-on to /init, part of the boot)", fmt_int(s["init_instructions_native"]),
                 fmt_int(s["init_instructions_vm"]), fmt_ratio(init_ratio), "", ""))
    paper = s["paper"]
    rows.append(("paper (Stoess et al., seconds)", f"{paper['native_seconds']} s", f"{paper['vm_seconds']} s",
                 fmt_ratio(paper["ratio"]), "", ""))
    lines += md_table(("work", "native (instructions)", "VM (instructions)", "VM/native", "target", "met?"),
                      rows, "lrrrll")
    lines += ["", "The job's VM overhead is "
              f"{fmt_int(s['job_instructions_vm'] - s['job_instructions_native'])} instructions; its exits "
              f"(job run minus boot run) cost {fmt_int(s['exit_total_instructions_job_only'])} of them "
              f"({fmt_share(s['job_overhead_explained_by_exits'])}) as the kernel measures them (the VMM's own "
              "time on IPC exits is not in the trace points).", "",
              "## VM exits per trace point (job run: boot, job, power-off)", ""]
    rows = []
    for name, count in s["exits"].items():
        total = s["exit_total_instructions_by_class"][name]
        c = s["exit_cost_ticks"][name]
        rows.append((name, fmt_int(count), fmt_int(s["exits_job_only"][name]), f"{c['min']}/{c['max']}/{c['avg']}",
                     f"{s['exit_cost_instructions'][name]:g}", fmt_int(total),
                     f"{100 * total / grand:.1f}%" if grand else "-"))
    rows.append(("**total**", fmt_int(sum(s["exits"].values())), fmt_int(sum(s["exits_job_only"].values())), "",
                 "", fmt_int(s["exit_total_instructions"]), "100%"))
    lines += md_table(("trace point", "exits", "of which job", "cost min/max/avg (ticks)", "avg (instructions)",
                       "total (instructions)", "share"), rows, "lrrrrrr")
    lines += ["", "\"of which job\" is the job run minus the boot run. The two runs boot with different "
              "command lines (`kestrel.script=job` and `=boot`), so their boot parts need not match exit for "
              "exit, and a rare class can come out slightly negative.", "",
              "## Top exit classes by total cost", ""]
    rows = [(i, t["name"], fmt_int(t["count"]), f"{t['avg_instructions']:g}", fmt_int(t["total_instructions"]),
             f"{100 * t['total_instructions'] / grand:.1f}%") for i, t in enumerate(s["top_exit_classes"], start=1)]
    lines += md_table(("#", "trace point", "exits", "avg (instructions)", "total (instructions)", "share"), rows,
                      "rlrrrr")
    lines += ["", "## By group", ""]
    rows = [(g, fmt_int(t), f"{100 * t / grand:.1f}%" if grand else "-")
            for g, t in s["exit_groups_instructions"].items()]
    lines += md_table(("group", "total (instructions)", "share"), rows, "lrr")
    lines += ["", f"Method: {s['method']}.", ""]
    return "\n".join(lines)


def git_commit() -> str:
    """HEAD's hash, with `-dirty` when tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def private_target(target_dir: Path, name: str = "bench-table1") -> Path:
    """A folder of our own (target_dir/name) holding copies of the kernel and the VMM, for every
    run of one invocation, so that a rebuild of the ELF files meanwhile cannot change what a
    later run boots."""
    priv = target_dir / name
    out = priv / "powerpc-440-none" / "release"
    out.mkdir(parents=True, exist_ok=True)
    for elf in ("kestrel-kernel", "kestrel-root", "kestrel-vmm"):
        dst = out / elf
        if dst.is_symlink() or dst.exists():
            dst.unlink()  # never write through a link left by someone else
        shutil.copy2(target_dir / "powerpc-440-none" / "release" / elf, dst)
    return priv


# Extra guest kernel arguments for both modes (--append); the same command line natively and
# in the VM, so that both run the same kernel the same way.
GUEST_APPEND = ""
# The native run gets the VM's RAM (kestrel-vmm's LINUX_RAM), so both kernels size themselves alike.
GUEST_MB = kestrel_qemu.VMM_DEFAULT_MEM_MB
LINUX_OUT = ROOT / "guests" / "linux" / "out"


def node(mode: str, script: str, log: Path, private: Path) -> kestrel_qemu.Node:
    """The QEMU machine for one run: the guest natively (as guests/linux/run-native.sh boots
    it) or in a VM (as scripts/vm-linux.sh does), under -icount."""
    vmlinux, initrd = LINUX_OUT / "vmlinux", LINUX_OUT / "initramfs.cpio.gz"
    base = kestrel_qemu.LINUX_CMDLINE
    if mode == "native":
        cmdline = kestrel_qemu.join_cmdline(base, f"kestrel.script={script}", GUEST_APPEND)
        return kestrel_qemu.Node(kernel=vmlinux, initrd=initrd, append=cmdline, mem_mb=GUEST_MB,
                                 icount=True)
    out = private / "powerpc-440-none" / "release"
    cmdline = kestrel_qemu.join_cmdline(base, GUEST_APPEND, f"kestrel.script={script}")
    image = kestrel_qemu.vmm_image(vmlinux, initrd=initrd, cmdline=cmdline, vmm=out / "kestrel-vmm",
                                   root=out / "kestrel-root")
    return kestrel_qemu.kestrel_node(image, log.with_suffix(".bootmod"), kernel=out / "kestrel-kernel",
                                     append=kestrel_qemu.vmm_cmdline(1, None),
                                     mem_mb=kestrel_qemu.KESTREL_RAM_MB, icount=True)


def run(mode: str, script: str, index: int, timeout: int, private: Path) -> str:
    """Boots Linux once with /scripts/SCRIPT under -icount; returns the console output.
    `private` is the folder from private_target() for the VM runs."""
    log = kestrel_qemu.logs_dir() / f"table1-{mode}-{script}-run{index}.log"
    print(f"table1.py: {mode} {script} run {index} (log: {log})", file=sys.stderr)
    try:
        status, console = kestrel_qemu.run_captured(node(mode, script, log, private), timeout=timeout, log=log)
    except kestrel_qemu.LaunchError as err:
        raise BenchError(f"{mode} {script} run {index}: {err}") from err
    if status != 0:
        what = "timed out" if status == 124 else f"exited with status {status}"
        tail = "\n".join(console.splitlines()[-15:])
        raise BenchError(f"{mode} {script} run {index}: {what} (log: {log})\n{tail}")
    return console


def measure(index: int, timeout: int, private: Path) -> dict:
    """One run of both scripts in both modes; the native and the VM QEMU run in parallel."""
    def mode_runs(mode: str) -> dict:
        boot = run(mode, "boot", index, timeout, private)
        job = run(mode, "job", index, timeout, private)
        try:
            out = {"boot": parse_boot(boot), "job": parse_job(job)}
            if mode == "vm":
                out["trace_boot"] = trace_table(boot)
                out["trace_job"] = trace_table(job)
        except BenchError as err:
            raise BenchError(f"{mode} run {index}: {err}") from err
        return out
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {m: pool.submit(mode_runs, m) for m in ("native", "vm")}
        return {m: f.result() for m, f in futures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the kernel and VMM ELF files already built")
    parser.add_argument("--runs", type=int, default=2, help="runs per mode, which must agree (2)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per QEMU run (600)")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "table1.json",
                        help="the JSON results; the markdown report goes next to it (.md)")
    parser.add_argument("--append", default="", help="extra guest kernel arguments, in both modes (e.g. nosmap)")
    args = parser.parse_args(argv)
    global GUEST_APPEND
    GUEST_APPEND = args.append
    try:
        if not args.no_build:
            subprocess.run([str(ROOT / "scripts" / "build-target.sh"), "-p", "kestrel-kernel", "-p", "kestrel-root",
                            "-p", "kestrel-vmm"], check=True)
        # Always (cached, seconds): vm-linux.sh runs it anyway, and the native runs, which
        # start alongside, need vmlinux and the initramfs before it would.
        subprocess.run([str(ROOT / "guests" / "linux" / "build.sh")], check=True)
        private = private_target(kestrel_qemu.target_dir())
        runs = [measure(i, args.timeout, private) for i in range(1, args.runs + 1)]
        check_deterministic(runs)
        summary = summarize(runs, qemu_version(), git_commit())
        summary["guest_command_line"] = ("console=ttyS0 panic=1 " + args.append).strip() + " kestrel.script=<boot|job>"
    except (subprocess.CalledProcessError, BenchError) as err:
        print(f"table1.py: FAILED: {err}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    text = report(summary)
    args.output.with_suffix(".md").write_text(text)
    print(text)
    print(f"({args.runs} runs per mode identical; written to {args.output} and {args.output.with_suffix('.md')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
