"""The VMM's diagnostics and the guests' time (issue 9, findings 3 to 5): guests/vmdiag as two
VMs under -icount, its console judged by framework/vmdiag.py's `check` (which says what it
checks). Log: target/logs/tests/test_vm_diagnostics/console.log."""
import pytest

from framework import qemu, vmdiag

TIMEOUT = 120


@pytest.mark.timeout(TIMEOUT + 30)
def test_vm_diagnostics(machine, elf, logs):
    node = qemu.kestrel_node(qemu.vmm_image(elf("kestrel-vmdiag")), logs / "console.bootmod",
                             append=qemu.vmm_cmdline(2, None), icount=True)
    status, text = machine(node).run(TIMEOUT)
    bad = vmdiag.check(text, status)
    assert not bad, "\n".join(bad)
