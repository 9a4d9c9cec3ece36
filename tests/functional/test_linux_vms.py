"""Two Linux VMs at once, driven through the console as a user would: both reach the busybox
shell, VM 0 runs a command and pings VM 1 over the virtio NIC and over bgnet (the address plan
of framework/linux.py, which /init applies), the keyboard moves to VM 1 (`Ctrl-] 1`), which
runs one too and powers off, and VM 0 still answers before it powers off as well. Passes when
every step's output appears in the right VM's prefixed lines and QEMU exits by itself with
status 0. Log: target/logs/tests/test_two_vms_share_the_console/console.log."""
import time

import pytest

from framework import linux
from framework.console import FOCUS

TIMEOUT = 300


@pytest.mark.timeout(TIMEOUT + 30)
def test_two_vms_share_the_console(machine, elf, linux_guest, logs):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm"):
        elf(name)
    m = machine(linux.vm_node(logs / "console.bootmod", vms=2, console="interactive"))
    deadline = time.monotonic() + TIMEOUT
    con = m.start(TIMEOUT)
    prompt = r"\[vm{}\] [^\n]*kestrel:/# "
    pos = max(con.wait_for(prompt.format(0), deadline).end(), con.wait_for(prompt.format(1), deadline).end())
    steps = [
        (b"echo vm-a-$((6*7))\n", r"\[vm0\] vm-a-42\r?\n"),
        (f"ping -c 2 {linux.virtio_addr(1)}\n".encode(), r"\[vm0\] 2 packets transmitted, 2 packets received"),
        (f"ping -c 2 {linux.bgnet_addr(1)}\n".encode(), r"\[vm0\] 2 packets transmitted, 2 packets received"),
        (FOCUS + b"1", r"console input now goes to vm1"),
        (b"echo vm-b-$((7*7))\n", r"\[vm1\] vm-b-49\r?\n"),
        (b"reboot -f\n", r"vmm: vm1: guest requested a reset"),
        (FOCUS + b"0", r"console input now goes to vm0"),
        (b"echo vm-a-still-$((2*3))\n", r"\[vm0\] vm-a-still-6\r?\n"),
        (b"reboot -f\n", r"vmm: every VM has stopped"),
    ]
    for data, expect in steps:
        # A short pause lets the guest's line editor settle after the previous output.
        time.sleep(0.5)
        con.send(data)
        pos = con.wait_for(expect, deadline, pos).end()
    assert m.wait(deadline) == 0, "QEMU did not exit with status 0"
