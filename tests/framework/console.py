"""Reading Kestrel's consoles: parsers of a finished run's console text (lines, panics, closing
lines, `[vmN] ` prefixes, the VMM's trace tables) and `Console`, the reader of a running QEMU's
console that tests type into (wait for a pattern, switch the VM the keyboard goes to, run a
shell command in a VM and get its status and output)."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from .constants import VMM_FOCUS_ESCAPE


class ConsoleError(Exception):
    """A console log that does not say what it should; the message says what is missing."""


class Failure(AssertionError):
    """A system test's verdict: what went wrong, for pytest's report (an AssertionError, so it
    reads as a failed check rather than an error in the test)."""


PREFIX_RE = re.compile(r"^\[vm(\d+)\] ?(.*)$")
VM_MENTION_RE = re.compile(r"\bvm(\d+)\b")
# A trace row: `NAME count total T avg A` (exact total ticks, docs/adr/0023-exit-accounting.md),
# or the older `NAME count min X max Y avg A`.
TRACE_ROW_RE = re.compile(
    r"^vmm:\s+(?:\[?vm(?P<vm>\d+)\]?:?\s+)?(?P<name>[A-Z][A-Z0-9_]*)\s+(?P<count>\d+)\s+"
    r"(?:total\s+(?P<total>\d+)|min\s+(?P<min>\d+)\s+max\s+(?P<max>\d+))\s+avg\s+(?P<avg>\d+)\s*$"
)
# The trace point that is not an exit: the guest's own time (count = entries into the guest).
GUEST_RUN = "GUEST_RUN"
CLOSING_RE = re.compile(r"^(?P<suite>[\w.-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$")


def lines(console: str) -> list[str]:
    """The console's lines without the CR the serial console adds."""
    return [raw.rstrip("\r") for raw in console.splitlines()]


def has_line(console: str, line: str) -> bool:
    return line in lines(console)


def panic_line(console: str) -> str | None:
    """The first kernel panic line (Kestrel's `KERNEL PANIC` or Linux's `Kernel panic`)."""
    return next((l for l in lines(console) if l.startswith(("KERNEL PANIC", "Kernel panic - "))), None)


def closing(console: str, suite: str) -> tuple[int, int] | None:
    """(passed, failed) from the last `SUITE: N passed, M failed` line, or None."""
    found = None
    for line in lines(console):
        m = CLOSING_RE.match(line)
        if m and m["suite"] == suite:
            found = (int(m["passed"]), int(m["failed"]))
    return found


def split_prefix(raw: str) -> tuple[int | None, str]:
    """(VM index or None, the line without `[vm<i>] ` and the serial console's CR)."""
    line = raw.rstrip("\r")
    m = PREFIX_RE.match(line)
    return (int(m.group(1)), m.group(2)) if m else (None, line)


def guest_lines(console: str, vm: int = 0) -> list[str]:
    """VM `vm`'s console lines: the `[vm<vm>] ` lines when any line has a VM prefix (several
    VMs), else every line (one VM, or a native run)."""
    split = [split_prefix(raw) for raw in console.splitlines()]
    if any(index is not None for index, _ in split):
        return [line for index, line in split if index == vm]
    return [line for _, line in split]


def trace_row(row: re.Match) -> dict[str, int | None]:
    """One trace row: count and avg, plus the exact total ticks and min/max = None in the
    current format, or min and max (and no total) in the older one."""
    out: dict[str, int | None] = {"count": int(row["count"])}
    if row["total"] is not None:
        out.update(total=int(row["total"]), min=None, max=None)
    else:
        out.update(min=int(row["min"]), max=int(row["max"]))
    out["avg"] = int(row["avg"])
    return out


def row_total(row: dict[str, int | None]) -> int:
    """A trace row's total ticks: exact in the current format, count * avg (avg rounded down)
    in the older one."""
    total = row.get("total")
    return total if total is not None else row["count"] * row["avg"]


def exit_totals(table: dict[str, dict[str, int | None]]) -> tuple[int, int]:
    """(exits, total ticks) over a trace table's exit classes: every row but GUEST_RUN."""
    rows = [r for name, r in table.items() if name != GUEST_RUN]
    return sum(r["count"] for r in rows), sum(row_total(r) for r in rows)


def parse_trace_tables(console: str) -> dict[int, dict[str, dict[str, int | None]]]:
    """Every trace-point table kestrel-vmm printed: VM index -> trace point -> its row (see
    `trace_row`; both the current and the older row format are read).

    A table starts at a line containing `trace points`; its VM is the line's `[vm<i>] ` prefix,
    else a `vm<i>` in the line, else one in the line before, else 0 (one VM, no prefix). A row
    belongs to the VM its own prefix or `vm<i>` names, else to the last table started."""
    tables: dict[int, dict[str, dict[str, int]]] = {}
    current: int | None = None
    previous = ""
    for raw in console.splitlines():
        prefix, line = split_prefix(raw)
        if "trace points" in line:
            vm = prefix
            if vm is None:
                m = VM_MENTION_RE.search(line) or VM_MENTION_RE.search(previous)
                vm = int(m.group(1)) if m else 0
            if vm in tables:
                raise ConsoleError(f"two trace tables for vm{vm}")
            tables[vm] = {}
            current = vm
        else:
            row = TRACE_ROW_RE.match(line)
            if row:
                vm = prefix if prefix is not None else (int(row["vm"]) if row["vm"] else current)
                if vm is None or vm not in tables:
                    raise ConsoleError(f"trace row outside a table: {line!r}")
                name = row["name"]
                if name in tables[vm]:
                    raise ConsoleError(f"trace point {name} twice in vm{vm}'s table")
                tables[vm][name] = trace_row(row)
        if line.strip():
            previous = line
    return tables


def trace_table(console: str, vm: int = 0) -> dict[str, dict[str, int]]:
    """VM `vm`'s trace table; fails when there is none or it is empty."""
    tables = parse_trace_tables(console)
    if vm not in tables:
        raise ConsoleError(f"no trace table for vm{vm} (have: {sorted(tables) or 'none'})")
    if not tables[vm]:
        raise ConsoleError(f"vm{vm}'s trace table has no rows")
    return tables[vm]




# ---------------------------------------------------------------------------------------------
# A running QEMU's console

FOCUS = bytes([VMM_FOCUS_ESCAPE])


class Console:
    """A running QEMU process's console: its output (stdout and stderr) collected by a reader
    thread, teed to `log` and, with `echo`, to our stdout; input through its stdin, to the VM
    that has the keyboard (kestrel-vmm's `Ctrl-] N` moves it)."""

    def __init__(self, proc: subprocess.Popen, log: Path | None = None, echo: bool = False):
        self.proc = proc
        self.echo = echo
        self.text = ""
        self.lock = threading.Lock()
        self.focus = 0
        self.serial = 0
        self._sink = log.open("wb") if log is not None else None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                break
            if self._sink is not None:
                self._sink.write(chunk)
                self._sink.flush()
            s = chunk.decode("utf-8", "replace")
            if self.echo:
                sys.stdout.write(s)
                sys.stdout.flush()
            with self.lock:
                self.text += s
        if self._sink is not None:
            self._sink.close()

    def join(self, timeout: float = 10) -> str:
        """Waits for the output to end (QEMU exited); the whole console text."""
        self._reader.join(timeout)
        with self.lock:
            return self.text

    def mark(self) -> int:
        """Where the console text ends now (a start for `wait_for`)."""
        with self.lock:
            return len(self.text)

    def wait_for(self, pattern: str, deadline: float, start: int = 0) -> re.Match:
        """The first match of `pattern` at or after `start`; fails when QEMU exits first or
        `deadline` (time.monotonic()) passes."""
        rx = re.compile(pattern)
        while True:
            with self.lock:
                m = rx.search(self.text, start)
            if m:
                return m
            if self.proc.poll() is not None:
                self._reader.join(2)
                with self.lock:
                    m = rx.search(self.text, start)
                if m:
                    return m
                raise Failure(f"QEMU exited ({self.proc.returncode}) before {pattern!r} appeared")
            if time.monotonic() > deadline:
                raise Failure(f"timed out waiting for {pattern!r}")
            time.sleep(0.2)

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def to(self, vm: int, deadline: float) -> None:
        """Moves the keyboard to VM `vm` (no-op when it has it)."""
        if self.focus != vm:
            pos = self.mark()
            self.send(FOCUS + str(vm).encode())
            self.wait_for(rf"console input now goes to vm{vm}", deadline, pos)
            self.focus = vm
            time.sleep(0.3)

    def run(self, vm: int, cmd: str, secs: float) -> tuple[int, list[str]]:
        """Runs shell command `cmd` in VM `vm`: (its exit status, VM `vm`'s output lines)."""
        deadline = time.monotonic() + secs
        self.to(vm, deadline)
        self.serial += 1
        n = self.serial
        pos = self.mark()
        self.send(f"echo @@S{n}; {cmd}; echo @@E{n} $?\n".encode())
        end = self.wait_for(rf"\[vm{vm}\] @@E{n} (\d+)\r?\n", deadline, pos)
        start = self.wait_for(rf"\[vm{vm}\] @@S{n}\r?\n", deadline, pos)
        with self.lock:
            chunk = self.text[start.end():end.start()]
        prefix = f"[vm{vm}] "
        out = [l[len(prefix):].rstrip("\r") for l in chunk.split("\n") if l.startswith(prefix)]
        return int(end.group(1)), out
