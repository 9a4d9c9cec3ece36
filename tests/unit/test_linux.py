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



def read_newc(data: bytes) -> list[tuple[str, bytes, int]]:
    """The entries of a newc archive (the format as the kernel's init/initramfs.c reads it)."""
    out, at = [], 0
    while True:
        assert data[at:at + 6] == b"070701", f"no newc magic at {at}"
        f = [int(data[at + 6 + 8 * i:at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        name_at = at + 110
        name = data[name_at:name_at + namesize - 1].decode()
        assert data[name_at + namesize - 1] == 0
        body = name_at + namesize + (-(name_at + namesize) % 4)
        if name == "TRAILER!!!":
            return out
        out.append((name, data[body:body + size], mode))
        at = body + size + (-(body + size) % 4)


def test_newc_archive_round_trips():
    files = [("bin/prog", b"\x7fELF12345", 0o100755), ("scripts/prog", b"#!/bin/sh\n", 0o100755)]
    data = linux.newc_archive(files)
    assert len(data) % 4 == 0
    assert read_newc(data) == files


def test_initramfs_with_appends_a_gzip_member(tmp_path):
    import gzip
    base = tmp_path / "base.cpio.gz"
    base.write_bytes(gzip.compress(linux.newc_archive([("a", b"1", 0o100644)])) + b"x")
    out = linux.initramfs_with([("b", b"22", 0o100644)], tmp_path / "out.cpio.gz", base=base)
    data, head = out.read_bytes(), base.read_bytes()
    start = len(head) + (-len(head) % 4)
    assert data[:len(head)] == head and data[len(head):start] == b"\0" * (start - len(head))
    assert read_newc(gzip.decompress(data[start:])) == [("b", b"22", 0o100644)]
