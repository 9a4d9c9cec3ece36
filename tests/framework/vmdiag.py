"""The VMM's diagnostics and the guests' time: the checks of the regression test for issue 9,
findings 3 to 5 (tests/functional/test_vm_diagnostics.py boots guests/vmdiag as two VMs under Kestrel's VMM (`vmm.vms=2`, `-icount` so exit costs
are instruction counts, not host noise) and checks its console with `check`:

- finding 3, one rate limit for per-guest diagnostics: VM 0 made 400 unknown-SPR accesses and
  took 400 program exceptions; the VMM logged at most LINES_IN_FULL of them in full, said that
  further ones are counted, and its summary lines (periodic and final) account for every one:
  the lines in full plus the summaries' counts are 400, and the last summary says `400 in all`;
- finding 4, time-base writes do not poison the trace points: VM 0 wrote its time base far
  ahead and back thousands of times and read back what it wrote; VM 0's trace table has
  EMUL_MTSPR with at least that many exits averaging at most MAX_MTSPR_AVG ticks and no exit
  class above MAX_COST ticks (the bug showed 4294967295); VM 1 read its own time base meanwhile and it never went back or
  jumped (a guest's time-base writes stay its own);
- finding 5, messages: VM 1's jump into UART0's page is reported as an instruction fetch
  from device memory naming the device, not as an unbacked address, and the kernel's line
  about the stopped vCPU names the thread `vm1.vcpu0`;
- no FAIL line, no kernel panic, and QEMU exits 0 after `vmm: every VM has stopped`.

The checks are pure functions of the console text, unit-tested in tests/unit/test_vmdiag.py
against a good log and the log the bugs produced.
"""
from __future__ import annotations

import re

from . import console as con
from .constants import VMDIAG_SPR_ROUNDS, VMDIAG_TB_ROUNDS, VMM_LOG_LINES_IN_FULL

# kestrel-vmm's LOG_LINES_IN_FULL; guests/vmdiag's SPR_ROUNDS (two accesses each) and TB_ROUNDS
# (three mtspr each).
LINES_IN_FULL = VMM_LOG_LINES_IN_FULL
SPR_ACCESSES = 2 * VMDIAG_SPR_ROUNDS
TB_WRITES = 3 * VMDIAG_TB_ROUNDS
# Far above any real exit under -icount (a few hundred ticks), far below the poisoned value.
MAX_COST = 1_000_000
# An in-kernel time-base write costs tens of ticks; one poisoned exit among TB_WRITES would
# average over 300,000.
MAX_MTSPR_AVG = 10_000
UART_FETCH = 0xEF60_0014

UNHANDLED_RE = re.compile(r"^vmm: vm0: unhandled instruction 0x[0-9a-f]+ \(M[tf]spr .*: program exception$")
SUMMARY_RE = re.compile(r"^vmm: vm0: (\d+) more unhandled instructions not logged \((\d+) in all\)$")
LAST_IN_FULL = (f"vmm: vm0: that was the first {LINES_IN_FULL} of unhandled instructions; "
                "further ones are counted, not logged")
FETCH_LINE = (f"vmm: vm1: guest fetched an instruction from device memory at guest-physical "
              f"{UART_FETCH:#010x} (page of uart0, uart1) (pc {UART_FETCH:#010x}); stopping it")
KILLED_RE = re.compile(r"^kestrel: thread \d+\.\d+ \(vm1\.vcpu0\) stopped: killed by its fault handler ")


def index_of(lines: list[str], pred) -> int | None:
    return next((i for i, line in enumerate(lines) if pred(line)), None)


def check_rate_limit(lines: list[str]) -> list[str]:
    bad = []
    vm0 = con.guest_lines("\n".join(lines), 0)
    want = f"vmdiag: vm0 took {SPR_ACCESSES} program exceptions for {SPR_ACCESSES} unknown-SPR accesses"
    if want not in vm0:
        bad.append(f"VM 0 did not say {want!r}")
    full = [line for line in lines if UNHANDLED_RE.match(line)]
    if len(full) > LINES_IN_FULL:
        bad.append(f"{len(full)} unhandled-instruction lines in full, at most {LINES_IN_FULL} allowed")
    if len(full) == 0:
        bad.append("no unhandled-instruction line at all (the first ones must be logged)")
    if len(full) == LINES_IN_FULL and LAST_IN_FULL not in lines:
        bad.append(f"no line {LAST_IN_FULL!r} after the last one in full")
    summaries = [SUMMARY_RE.match(line) for line in lines]
    summaries = [(int(m[1]), int(m[2])) for m in summaries if m]
    if not summaries:
        bad.append("no summary line 'vmm: vm0: N more unhandled instructions not logged (M in all)'")
    else:
        accounted = len(full) + sum(n for n, _ in summaries)
        if accounted != SPR_ACCESSES:
            bad.append(f"lines in full plus summaries account for {accounted} accesses, not {SPR_ACCESSES}")
        if summaries[-1][1] != SPR_ACCESSES:
            bad.append(f"the last summary says {summaries[-1][1]} in all, not {SPR_ACCESSES}")
    return bad


def check_time(console: str) -> list[str]:
    bad = []
    vm0, vm1 = con.guest_lines(console, 0), con.guest_lines(console, 1)
    if f"vmdiag: vm0 wrote its time base {TB_WRITES // 3} times and read back what it wrote" not in vm0:
        bad.append("VM 0 did not read back the time base it wrote")
    if not any(re.match(r"^vmdiag: vm1 time base never went back, largest step \d+ ticks$", l) for l in vm1):
        bad.append("VM 1 did not report a steady time base while VM 0 wrote its own")
    try:
        table = con.trace_table(console, 0)
    except con.ConsoleError as e:
        return bad + [str(e)]
    mtspr = table.get("EMUL_MTSPR")
    if mtspr is None or mtspr["count"] < TB_WRITES:
        bad.append(f"EMUL_MTSPR counted {mtspr and mtspr['count']} exits, at least {TB_WRITES} expected")
    # The table keeps exact totals, no maximum: one poisoned exit (4294967295 ticks) among
    # the EMUL_MTSPR exits lifts their average far above any real one.
    if mtspr is not None and mtspr["avg"] > MAX_MTSPR_AVG:
        bad.append(f"EMUL_MTSPR averages {mtspr['avg']} ticks (at most {MAX_MTSPR_AVG} expected)")
    for name, row in table.items():
        worst = row["max"] if row.get("max") is not None else row["avg"]
        if name not in ("GUEST_RUN", "GUEST_IDLE") and worst > MAX_COST:
            bad.append(f"trace point {name} costs {worst} ticks (at most {MAX_COST} expected)")
    # The reads must overlap the writes, or the check says nothing.
    lines = con.lines(console)
    w0 = index_of(lines, lambda l: l.startswith("[vm0] vmdiag: vm0 writing its time base"))
    w1 = index_of(lines, lambda l: l.startswith("[vm0] vmdiag: vm0 wrote its time base"))
    r0 = index_of(lines, lambda l: l.startswith("[vm1] vmdiag: vm1 reading its time base"))
    r1 = index_of(lines, lambda l: l.startswith("[vm1] vmdiag: vm1 time base never went back"))
    if None not in (w0, w1, r0, r1) and not (r0 < w1 and w0 < r1):
        bad.append("VM 1's time-base reads did not overlap VM 0's writes")
    return bad


def check_messages(lines: list[str]) -> list[str]:
    bad = []
    if FETCH_LINE not in lines:
        bad.append(f"no line {FETCH_LINE!r}")
    if any("guest touched unbacked guest-physical" in line for line in lines):
        bad.append("an instruction fetch from a device page is reported as unbacked memory")
    if not any(KILLED_RE.match(line) for line in lines):
        bad.append("no kernel line 'kestrel: thread N.V (vm1.vcpu0) stopped: killed by its fault handler ...'")
    return bad


def check(console: str, status: int = 0) -> list[str]:
    """Everything wrong with a run's console (empty: pass)."""
    lines = con.lines(console)
    bad = [line for line in lines if "vmdiag: FAIL" in line]
    panic = con.panic_line(console)
    if panic:
        bad.append(panic)
    bad += check_rate_limit(lines) + check_time(console) + check_messages(lines)
    if status == 124:
        bad.append("timeout")
    elif status != 0:
        bad.append(f"QEMU exited with status {status}")
    elif "vmm: every VM has stopped; shutting down" not in lines:
        bad.append("no line 'vmm: every VM has stopped; shutting down'")
    return bad
