"""Unit tests of framework/linux.py: the guest command line, the address plan and reading a
guest script's output."""
from framework import linux

CONSOLE = """\
[    0.000000] Linux version 6.1
kestrel-guest: Linux 6.1.0 (banner)\r
kestrel-guest: running /scripts/smoke
root: kestrel-vmm started
[kestrel-checksum] round 1/2: crc 0x1
timing: phase 1 start 2 end 3
hello
KESTREL-SCRIPT-DONE
kestrel-guest: script smoke exited with status 0; powering off
"""


def test_cmdline():
    assert linux.cmdline() == linux.LINUX_CMDLINE
    assert linux.cmdline("", "a=1", None, script="smoke") == f"{linux.LINUX_CMDLINE} a=1 kestrel.script=smoke"


def test_address_plan():
    assert [linux.virtio_addr(k) for k in (0, 1)] == ["10.1.0.1", "10.1.0.2"]
    assert [linux.bgnet_addr(k) for k in (0, 1)] == ["10.2.0.1", "10.2.0.2"]


def test_script_output():
    out = linux.script_output(CONSOLE)
    assert out[0].startswith(linux.BANNER) and out[-1] == linux.SCRIPT_DONE
    assert "root: kestrel-vmm started" not in out and not any(l.startswith("[kestrel-") for l in out)
    assert linux.without_timing(out) == [out[0], "kestrel-guest: running /scripts/smoke", "hello", linux.SCRIPT_DONE]
    assert linux.script_output(CONSOLE.replace(linux.SCRIPT_DONE, "x")) is None
    two = "\n".join(f"[vm1] {l}" for l in CONSOLE.splitlines())
    assert linux.script_output(two, 1) == out and linux.script_output(two, 0) is None
    assert linux.script_output(CONSOLE, keep_kestrel=True)[2] == "root: kestrel-vmm started"
