"""The unmodified Linux guest natively and in two Kestrel VMs, one with the paravirtual interface
(the default; the kernel must log that the guest mapped the magic page) and one with full
virtualization (`vmm.pv=off` on the Kestrel command line; no magic page), all three running the
guest script `smoke` (uname, /proc/cpuinfo, 200 fork/execs, a gzip round trip, loopback TCP,
dmesg's warnings) at the same time.

Compared: VM 0's console from /init's `kestrel-guest: Linux` banner to KESTREL-SCRIPT-DONE,
without `timing:` lines (they vary) and without Kestrel's own lines (root task, VMM, kernel).
The kernel's boot log before /init is not compared: it differs between the boards by design
(the VM's command line adds nosmap, the VMM's device tree has no PCI host bridge). The native
run gets the VM's RAM, so /proc/cpuinfo's Memory line and the kernel's sizing agree.
Logs: target/logs/tests/linux-compare/{native,vm,vm_pvoff}.log."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from framework import console, linux, qemu
from framework.constants import VMM_DEFAULT_MEM_MB
from framework.machine import Machine

SCRIPT = "smoke"
TIMEOUT = 300
MODES = ("native", "vm", "vm_pvoff")
PV_RE = re.compile(r"^kestrel: vCPU \d+: guest mapped the paravirtual magic page")
RAM_RE = re.compile(r"^vmm: (?:vm0: )?OS guest: .*, (\d+) MiB RAM$")


@pytest.fixture(scope="module")
def runs(linux_guest, elf):
    """mode -> (QEMU's status, console text), the three runs side by side."""
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm"):
        elf(name)
    logs = qemu.logs_dir() / "tests" / "linux-compare"
    nodes = {
        "native": linux.native_node(SCRIPT),
        "vm": linux.vm_node(logs / "vm.bootmod", SCRIPT),
        "vm_pvoff": linux.vm_node(logs / "vm_pvoff.bootmod", SCRIPT, kernel_args=["vmm.pv=off"]),
    }
    with ThreadPoolExecutor(len(nodes)) as pool:
        futures = {mode: pool.submit(Machine(node, logs / f"{mode}.log").run, TIMEOUT)
                   for mode, node in nodes.items()}
        return {mode: f.result() for mode, f in futures.items()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.timeout(TIMEOUT + 60)
def test_script_finishes(runs, mode):
    status, text = runs[mode]
    assert linux.script_output(text) is not None, \
        f"the {mode} run did not reach {linux.SCRIPT_DONE}:\n" + "\n".join(console.lines(text)[-15:])
    assert linux.script_exited_line(SCRIPT) in console.guest_lines(text), \
        f"the {mode} run: script {SCRIPT} did not exit with status 0"
    assert status == 0, f"the {mode} run's QEMU exited with status {status} after the script"


@pytest.mark.timeout(TIMEOUT + 60)
def test_paravirtual_interface_only_where_enabled(runs):
    vm, pvoff = console.lines(runs["vm"][1]), console.lines(runs["vm_pvoff"][1])
    assert any(PV_RE.match(l) for l in vm), "the VM's guest did not map the paravirtual magic page"
    assert not any(PV_RE.match(l) for l in pvoff), "the vmm.pv=off VM's guest mapped the magic page"
    assert any(l.startswith("vmm: vmm.pv=off") for l in pvoff), "the VMM did not take vmm.pv=off"


@pytest.mark.timeout(TIMEOUT + 60)
def test_vm_has_the_native_runs_ram(runs):
    found = [m.group(1) for m in map(RAM_RE.match, console.lines(runs["vm"][1])) if m]
    assert found and int(found[0]) == VMM_DEFAULT_MEM_MB, \
        f"the VM has {found[0] if found else '?'} MiB of RAM, the native run {VMM_DEFAULT_MEM_MB} MiB"


@pytest.mark.parametrize("mode", ["vm", "vm_pvoff"])
@pytest.mark.timeout(TIMEOUT + 60)
def test_output_identical_to_native(runs, mode):
    native = linux.script_output(runs["native"][1])
    vm = linux.script_output(runs[mode][1])
    assert native is not None and vm is not None, "a run did not finish its script"
    native, vm = linux.without_timing(native), linux.without_timing(vm)
    diff = [f"  line {i + 1}: native {a!r}, {mode} {b!r}"
            for i, (a, b) in enumerate(zip(native + [""] * len(vm), vm + [""] * len(native))) if a != b]
    assert not diff, f"script {SCRIPT}: native and {mode} outputs differ:\n" + "\n".join(diff[:20])
