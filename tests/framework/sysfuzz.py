"""The native system-call fuzzer (issue 9, docs/adr/0016-syscall-fuzzer.md), run and checked.

Boots Kestrel with the root task starting kestrel-sibling and kestrel-sysfuzz: the fuzzer makes
`calls` random system calls and root-task requests from `seed`, in mode unpriv (an ordinary
program) or priv (with the vCPU right, `root.vcpu=kestrel-sysfuzz`), while the sibling counts
rounds; it probes the kernel's capacity (threads, spaces, vCPUs, page mappings) before and
after. `fuzz` raises `Failure` on:

- a kernel panic or register dump (`KERNEL PANIC`), or the root task dying;
- a hang: no console output for `stall` seconds, or QEMU still running after `timeout`;
- QEMU exiting early (before the fuzzer's summary line and the root task's orderly stop);
- an oracle violation (a result the ABI does not allow), printed as `sysfuzz: VIOLATION`;
- the sibling starving (no progress between two progress lines, here or in the fuzzer's own
  check), or its memory changing under it (`corrupt`);
- a leak: fewer threads, spaces, vCPUs or page mappings after the fuzzing than before.

Run by tests/security/test_sysfuzz.py (seed 1, 5000 calls per mode) and scripts/sysfuzz.py
(`just soak`, and by hand to narrow a finding with --kinds and --trace).
"""
from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path

from . import qemu as kq
from .console import Failure, lines as console_lines
from .constants import BOOTARGS_LEN

FUZZER = "kestrel-sysfuzz"
SIBLING = "kestrel-sibling"

SUMMARY_RE = re.compile(r"sysfuzz: summary (?P<fields>.*)$")
PROGRESS_RE = re.compile(r"sysfuzz: progress calls=(?P<calls>\d+)/\d+ sibling=(?P<sibling>-?\d+) ")
FIELD_RE = re.compile(r"(\w+)=(\[[^\]]*\]|\S+)")


def summary(lines: list[str]) -> dict[str, str] | None:
    """The fields of the fuzzer's summary line (`key=value`, `key=[...]`), or None."""
    for line in lines:
        m = SUMMARY_RE.search(line)
        if m:
            return dict(FIELD_RE.findall(m["fields"]))
    return None


def check(lines: list[str], status: int, calls: int, mode: str, seed: int) -> dict[str, str]:
    """Raises Failure with the first reason the run failed; returns the summary fields."""
    for i, line in enumerate(lines):
        if "KERNEL PANIC" in line:
            raise Failure(f"kernel panic (line {i + 1}): {line}")
        if "the root task is gone" in line:
            raise Failure(f"the root task died (line {i + 1}): {line}")
    violations = [line for line in lines if "sysfuzz: VIOLATION" in line]
    if violations:
        raise Failure(f"{len(violations)} oracle violation line(s), first: {violations[0]}")
    errors = [line for line in lines if "sysfuzz: ERROR" in line]
    if errors:
        raise Failure(f"the fuzzer could not run: {errors[0]}")
    fields = summary(lines)
    if fields is None:
        raise Failure(f"no summary line: QEMU ended early or the fuzzer hung (status {status})")
    for line in lines:
        if "sysfuzz: LEAK" in line:
            raise Failure(f"leak: {line.strip()}")
        if "sysfuzz: STARVED" in line:
            raise Failure(f"the sibling starved: {line.strip()}")
    # The sibling's count must grow between any two progress reports.
    counts = [int(m["sibling"]) for m in map(PROGRESS_RE.search, lines) if m]
    for a, b in zip(counts, counts[1:]):
        if b <= a:
            raise Failure(f"the sibling made no progress between two reports ({a} -> {b})")
    if fields.get("seed") != str(seed):
        raise Failure(f"the fuzzer ran with seed {fields.get('seed')}, {seed} was asked for "
                      "(kernel command line cut short?)")
    if fields.get("mode") != mode:
        raise Failure(f"the fuzzer ran in mode {fields.get('mode')}, {mode} was asked for")
    if int(fields.get("calls", 0)) < calls:
        raise Failure(f"the fuzzer made {fields.get('calls')} calls, {calls} were asked for")
    if fields.get("corrupt") != "0":
        raise Failure(f"the sibling saw its memory change ({fields.get('corrupt')} corrupt rounds)")
    if int(fields.get("sibling", 0)) <= 0:
        raise Failure("the sibling counted no round while the fuzzer ran")
    if fields.get("result") != "PASS":
        raise Failure(f"the fuzzer's own verdict is {fields.get('result')}")
    for want in (f"root: {SIBLING} exited (code 0)", f"root: {FUZZER} exited (code 0)",
                 "root: every program has ended; stopping the machine"):
        if not any(want in line for line in lines):
            raise Failure(f"missing {want!r}: the run did not end in order")
    if status != 0:
        raise Failure(f"QEMU exited with status {status}")
    return fields


def run_qemu(node: kq.Node, log: Path, timeout: int, stall: int) -> tuple[int, list[str], str | None]:
    """Runs QEMU, its console in `log`; stops it after `timeout` s in all or `stall` s without
    output. Returns (status, lines, why it was stopped or None)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(node.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    start = last = time.monotonic()
    stopped = None
    with log.open("wb") as sink:
        fd = proc.stdout.fileno()
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            now = time.monotonic()
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                sink.write(chunk)
                sink.flush()
                last = now
            if now - start > timeout:
                stopped = f"still running after {timeout} s"
            elif now - last > stall:
                stopped = f"no console output for {stall} s (hang)"
            if stopped:
                proc.kill()
                break
        status = proc.wait()
        proc.stdout.close()
    return status, console_lines(log.read_text(errors="replace")), stopped


def fuzz(seed: int, calls: int, mode: str, *, timeout: int = 600, stall: int = 60,
         report_ms: int = 1000, kinds: str = "", trace: str = "", logs: Path | None = None,
         say=print) -> dict[str, str]:
    """One run in `mode` (unpriv or priv): the summary's fields, or Failure with the reason.
    The console log goes to `logs` (target/logs/ by default); `say` gets the progress lines."""
    out = kq.out_dir()
    elfs = {name: out / name for name in ("kestrel-root", SIBLING, FUZZER)}
    for name, path in elfs.items():
        if not path.is_file():
            raise Failure(f"no {path} (build it: scripts/build-target.sh -p kestrel-kernel "
                          f"-p kestrel-root -p kestrel-sysfuzz)")
    image = kq.BootImage(root=kq.Module("kestrel-root", elfs["kestrel-root"]),
                         programs=[kq.Module(SIBLING, elfs[SIBLING]), kq.Module(FUZZER, elfs[FUZZER])])
    # The kernel keeps BOOTARGS_LEN bytes of its command line: short keys, defaults left out,
    # and the fuzzer's summary echoes the seed and mode it parsed (checked below).
    append = [f"fz.seed={seed}", f"fz.calls={calls}", f"fz.mode={mode}"]
    if mode == "priv":
        append.insert(0, f"root.vcpu={FUZZER}")
    if report_ms != 1000:
        append.append(f"fz.report_ms={report_ms}")
    if kinds:
        append.append(f"fz.kinds={kinds}")
    if trace:
        append.append(f"fz.trace={trace}")
    assert len(" ".join(append)) < BOOTARGS_LEN, "the kernel command line would be cut short"
    logs = logs or kq.logs_dir()
    log = logs / f"sysfuzz-{mode}-{seed}.log"
    node = kq.kestrel_node(image, logs / f"sysfuzz-{mode}.bootmod", append=append)
    say(f"sysfuzz: seed {seed}, {calls} calls, mode {mode} (log {log})")
    started = time.monotonic()
    status, lines, stopped = run_qemu(node, log, timeout, stall)
    if stopped:
        raise Failure(f"QEMU {stopped} (log {log}; last line: {lines[-1] if lines else ''!r})")
    try:
        fields = check(lines, status, calls, mode, seed)
    except Failure as err:
        raise Failure(f"{err} (log {log})") from err
    table = [line for line in lines if "sysfuzz: table " in line]
    for line in table:
        say("  " + line[line.index("sysfuzz: table ") + len("sysfuzz: table "):])
    say(f"sysfuzz: PASS seed={seed} mode={mode} calls={fields['calls']} "
          f"sibling_rounds={fields['sibling']} rescues={fields['rescues']} "
          f"before={fields['before']} after={fields['after']} "
          f"({time.monotonic() - started:.0f} s)")
    return fields
