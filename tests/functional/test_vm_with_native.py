"""A Linux VM and a native program at the same time, both checked: the root task starts the VMM
(one Linux VM running its `job` script) and kestrel-checksum beside it, while the same guest
script runs natively on bamboo for the expected job output. Passes when:

- the VM's job output (from the guest's banner to KESTREL-SCRIPT-DONE, timing lines aside)
  equals the native run's, and the script exited with status 0;
- the root task refused kestrel-checksum what it has no right to (a vCPU, deleting another
  program's thread, a thread above its priority ceiling, a device page, an interrupt line),
  and the kernel refused it `Schedule(self, 255)` (its scheduler is the root task);
- kestrel-checksum printed every round's CRC-32 and the final checksum as recomputed here
  (framework/programs.py), each on a line of its own that starts with its prefix;
- some of its rounds ran while the guest's job ran, so the two really shared the machine;
- the root task saw both programs end, and QEMU exited by itself with status 0.
Logs: target/logs/tests/vm-with-native/{native,vm}.log."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from framework import console, linux, programs, qemu
from framework.machine import Machine

TIMEOUT = 600
# About 20 s with the pause: enough to overlap the guest's job even on a loaded host.
ROUNDS = 100
SLEEP_MS = 200
PREFIX = "[kestrel-checksum] "


@pytest.fixture(scope="module")
def runs(linux_guest, elf):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-checksum"):
        elf(name)
    logs = qemu.logs_dir() / "tests" / "vm-with-native"
    vm = linux.vm_node(logs / "vm.bootmod", "job", natives=["kestrel-checksum"],
                       kernel_args=[f"checksum.rounds={ROUNDS} checksum.sleep_ms={SLEEP_MS}"])
    with ThreadPoolExecutor(2) as pool:
        native = pool.submit(Machine(linux.native_node("job"), logs / "native.log").run, TIMEOUT)
        kestrel = pool.submit(Machine(vm, logs / "vm.log").run, TIMEOUT)
        return {"native": native.result(), "vm": kestrel.result()}


@pytest.mark.timeout(TIMEOUT + 60)
def test_runs_end_cleanly(runs):
    for mode in ("native", "vm"):
        assert runs[mode][0] == 0, f"the {mode} run exited with status {runs[mode][0]}"
    lines = console.lines(runs["vm"][1])
    assert linux.script_exited_line("job") in lines, "the job script did not exit with status 0 in the VM"
    for line in ("root: kestrel-checksum exited (code 0)", "root: kestrel-vmm exited (code 0)",
                 "root: every program has ended; stopping the machine"):
        assert line in lines, f"missing {line!r} in the Kestrel log"


@pytest.mark.timeout(TIMEOUT + 60)
def test_job_output_equals_native(runs):
    want = linux.script_output(runs["native"][1])
    got = linux.script_output(runs["vm"][1])
    assert want is not None, "the native run did not reach KESTREL-SCRIPT-DONE"
    assert got is not None, "the VM did not reach KESTREL-SCRIPT-DONE"
    want, got = linux.without_timing(want), linux.without_timing(got)
    for a, b in zip(got + [""] * len(want), want + [""] * len(got)):
        assert a == b, f"job output differs: VM {a!r}, native {b!r}"


@pytest.mark.timeout(TIMEOUT + 60)
def test_checksum_program_output(runs):
    lines = console.lines(runs["vm"][1])
    crcs, total = programs.expected_checksums(ROUNDS)
    # The rights checks come first: no vCPU right, not the owner of the root thread, no thread
    # above the ceiling (root task); not its own scheduler (kernel).
    want = [f"{PREFIX}rights: vcpu Err(Refused(NoRight)), delete root Err(Refused(NotOwner)), "
            f"thread above ceiling Err(Refused(NoRight)), schedule self 255 Err(NotScheduler)",
            f"{PREFIX}devices: page Err(Refused(NoRight)), interrupt Err(Refused(NoRight))"]
    want += [f"{PREFIX}round {i + 1}/{ROUNDS}: crc {c:#010x}" for i, c in enumerate(crcs)]
    want.append(f"{PREFIX}checksum {total:#010x} after {ROUNDS} rounds")
    for i, line in enumerate(lines):
        assert line.find(PREFIX.strip()) <= 0, \
            f"line {i + 1} has kestrel-checksum's output inside another line: {line!r}"
    got = [line for line in lines if line.startswith(PREFIX)]
    for a, b in zip(got + [""] * len(want), want):
        assert a == b, f"kestrel-checksum printed {a!r} where {b!r} was expected"
    assert len(got) == len(want), f"kestrel-checksum printed {len(got)} lines, {len(want)} expected"


@pytest.mark.timeout(TIMEOUT + 60)
def test_checksum_ran_during_the_job(runs):
    lines = console.lines(runs["vm"][1])
    running = "kestrel-guest: running /scripts/job"
    assert running in lines and linux.SCRIPT_DONE in lines, "the VM did not run its job"
    start, done = lines.index(running), lines.index(linux.SCRIPT_DONE)
    during = sum(1 for line in lines[start:done] if line.startswith(PREFIX + "round "))
    assert during > 0, ("no kestrel-checksum round ran while the job ran: the test did not overlap "
                        "them (raise ROUNDS or SLEEP_MS)")
