"""Two VMs isolated from each other: kestrel-vmm runs guests/isolation twice (vmm.vms=2). VM 0
(the writer) overwrites all of its 32 MiB sixteen times and then stores beyond its RAM, so the
VMM kills it; VM 1 (the checker) checksums its own RAM for 64 rounds, while the writer runs
and after it was killed, and must always find the same checksum.

Passes only if: the checker prints `isolation: checksum unchanged over N rounds` and no FAIL
line appears; the VMM logs `vmm: vm0: guest touched unbacked guest-physical ...; stopping it`;
the checker had filled its RAM and finished a round before that line and finished rounds and
its closing line after it; no kernel panic; QEMU exits with status 0 after
`vmm: every VM has stopped`. Log: target/logs/tests/test_vm_isolation/console.log."""
from __future__ import annotations

import re

import pytest

from framework import console, qemu

TIMEOUT = 30
DONE_RE = re.compile(r"^\[vm1\] isolation: checksum unchanged over (\d+) rounds$")
KILL_RE = re.compile(r"^vmm: vm0: guest touched unbacked guest-physical .*; stopping it$")
ROUND_RE = re.compile(r"^\[vm1\] isolation: round \d+ checksum 0x[0-9a-f]+ unchanged$")


def first(lines: list[str], pred) -> int | None:
    return next((i for i, line in enumerate(lines) if pred(line)), None)


@pytest.mark.timeout(TIMEOUT + 30)
def test_vm_isolation(machine, elf, logs):
    node = qemu.kestrel_node(qemu.vmm_image(elf("kestrel-isolation")), logs / "console.bootmod",
                             append=qemu.vmm_cmdline(2, None))
    status, text = machine(node).run(TIMEOUT)
    lines = console.lines(text)
    fails = [l for l in lines if "isolation: FAIL" in l or l.startswith("KERNEL PANIC")]
    assert not fails, "; ".join(fails[:3])
    done = first(lines, DONE_RE.match)
    kill = first(lines, KILL_RE.match)
    fill = first(lines, lambda l: l.startswith("[vm1] isolation: filled "))
    assert done is not None, "no checker line 'isolation: checksum unchanged over N rounds'"
    assert kill is not None, "no VMM line 'vmm: vm0: guest touched unbacked guest-physical ...; stopping it'"
    before = sum(1 for l in lines[:kill] if ROUND_RE.match(l))
    after = sum(1 for l in lines[kill:] if ROUND_RE.match(l))
    assert fill is not None and fill < kill and before > 0, \
        "the checker had not filled its RAM and finished a round before the writer was killed (no overlap)"
    assert done > kill and after > 0, "the checker did not keep running after the writer was killed"
    if status == 124 and "vmm: vm1: guest requested a reset; stopping it" in lines:
        pytest.fail(f"both VMs were done (vm0 killed, vm1 reset) but QEMU did not exit within "
                    f"{TIMEOUT}s: no 'vmm: every VM has stopped' line")
    assert status != 124, f"timeout after {TIMEOUT}s"
    assert status == 0, f"QEMU exited with status {status}"
    assert "vmm: every VM has stopped; shutting down" in lines, \
        "QEMU exited without the VMM's 'every VM has stopped' line"
