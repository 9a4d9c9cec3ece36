"""Static Linux executables run natively on Kestrel by the Linux personality server
kestrel-linux (docs/adr/0034-linux-personality.md). The C program native/linux/tests/lwktest.c
(stdio, malloc with heap and mmap, in-memory files, time, libm on the FPU) is built here with
Debian's powerpc-linux-gnu-gcc (-static -mcpu=440fp) and run three times: under
`qemu-ppc-static -cpu 440epb` (the expected output), natively on Kestrel, and in a Linux VM
under Kestrel (the same binary added to the guest's initramfs with a guest script that runs
it in /tmp, `framework.linux.initramfs_with`). Passes when:

- Kestrel prints the same standard output, line for line, each line prefixed with the
  program's name, and the program exits with code 0;
- the Linux VM prints the same standard output too, and the program exits with status 0
  there (issue 19: the same output natively on Kestrel, in a Linux VM and under
  qemu-ppc-static);
- the file the program wrote is listed by the server afterwards (a user can read it back);
- calls the server does not know return ENOSYS with one line naming the program and the call;
- a program that writes outside its memory is stopped with one line naming it and the
  address, and the server and the machine carry on (the next program runs).
Logs: target/logs/tests/linux-personality/ (vm.log: the VM leg)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from framework import console, linux, qemu
from framework.machine import Machine

TIMEOUT = 300
SRC = Path(__file__).resolve().parents[2] / "native" / "linux" / "tests"
CFLAGS = ["-static", "-mcpu=440fp", "-O2"]
PREFIX = "[kestrel-linux] "

BAD_C = r"""
#include <stdio.h>
int main(void) {
    printf("before the bad store\n");
    fflush(stdout);
    *(volatile int *)0x20000000 = 1; /* nothing is mapped there */
    printf("after the bad store\n");
    return 0;
}
"""


def build(out: Path, name: str, source: Path) -> Path:
    gcc = shutil.which("powerpc-linux-gnu-gcc")
    if gcc is None:
        pytest.fail("no powerpc-linux-gnu-gcc: run scripts/setup.sh")
    exe = out / name
    subprocess.run([gcc, *CFLAGS, "-o", str(exe), str(source), "-lm"], check=True)
    return exe


# The guest script of the VM leg: the program in a writable folder, its standard output only
# (as compared with qemu-ppc-static), then its exit status.
VM_SCRIPT = b"""#!/bin/sh
# lwktest: native/linux/tests/lwktest.c in a Linux VM (tests/functional/test_linux_personality.py)
cd /tmp || exit 1
/bin/lwktest 2>/dev/null
echo "lwktest-vm: exit status $?"
echo KESTREL-SCRIPT-DONE
"""


@pytest.fixture(scope="module")
def runs(elf):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-linux"):
        elf(name)
    logs = qemu.logs_dir() / "tests" / "linux-personality"
    logs.mkdir(parents=True, exist_ok=True)
    lwktest = build(logs, "lwktest", SRC / "lwktest.c")
    (logs / "bad.c").write_text(BAD_C)
    bad = build(logs, "bad", logs / "bad.c")
    user = shutil.which("qemu-ppc-static")
    if user is None:
        pytest.fail("no qemu-ppc-static: run scripts/setup.sh")
    want = subprocess.run([user, "-cpu", "440epb", str(lwktest)], check=True,
                          capture_output=True, text=True, timeout=120).stdout
    image, append = qemu.linux_personality_image([("lwktest", lwktest), ("bad", bad),
                                                  ("lwktest2", lwktest)])
    node = qemu.kestrel_node(image, logs / "kestrel.bootmod", append=append)
    status, text = Machine(node, logs / "kestrel.log").run(TIMEOUT)
    return want, status, console.lines(text)


@pytest.fixture(scope="module")
def vm_lines(runs, elf, linux_guest):
    """The VM leg: lwktest's standard output in a Linux VM under Kestrel, then its status line."""
    for name in ("kestrel-vmm", "kestrel-fabric"):
        elf(name)
    logs = qemu.logs_dir() / "tests" / "linux-personality"
    initrd = linux.initramfs_with([("bin/lwktest", (logs / "lwktest").read_bytes(), 0o100755),
                                   ("scripts/lwktest", VM_SCRIPT, 0o100755)], logs / "vm-initramfs.cpio.gz")
    node = linux.vm_node(logs / "vm.bootmod", "lwktest", initrd=initrd)
    status, text = Machine(node, logs / "vm.log").run(TIMEOUT)
    assert status == 0, f"the VM run's QEMU exited with {status}"
    out = linux.script_output(text)
    assert out is not None, "the VM did not finish the lwktest script:\n" + "\n".join(console.lines(text)[-15:])
    start = out.index("kestrel-guest: running /scripts/lwktest") + 1
    return out[start:out.index(linux.SCRIPT_DONE)]


def program_lines(lines: list[str], name: str) -> list[str]:
    """What program `name` printed, without the prefixes (stderr lines start with the
    program's own "lwktest: " and are left out: only standard output is compared)."""
    tag = f"{PREFIX}{name}: "
    out = [line[len(tag):] for line in lines if line.startswith(tag)]
    return [line for line in out if not line.startswith("lwktest: ")]


@pytest.mark.timeout(TIMEOUT + 120)
def test_same_output_as_qemu_user(runs):
    want, status, lines = runs
    assert status == 0, f"QEMU exited with {status}"
    assert program_lines(lines, "lwktest") == want.splitlines()
    assert f"{PREFIX}kestrel-linux: lwktest exited with code 0" in lines


@pytest.mark.timeout(2 * TIMEOUT + 120)
def test_same_output_in_a_linux_vm(runs, vm_lines):
    want, _, lines = runs
    assert vm_lines[-1] == "lwktest-vm: exit status 0", f"in the VM: {vm_lines[-1]}"
    assert vm_lines[:-1] == want.splitlines(), "the VM's output differs from qemu-ppc-static's"
    assert vm_lines[:-1] == program_lines(lines, "lwktest"), "the VM's output differs from Kestrel's"


@pytest.mark.timeout(TIMEOUT + 120)
def test_files_are_listed(runs):
    _, _, lines = runs
    assert f"{PREFIX}kestrel-linux: file results.txt (184 bytes)" in lines
    assert f"{PREFIX}kestrel-linux: | row 10   3.162278" in lines


@pytest.mark.timeout(TIMEOUT + 120)
def test_unknown_calls_named(runs):
    _, _, lines = runs
    enosys = [l for l in lines if "lwktest: system call" in l and "ENOSYS" in l]
    assert enosys, "no ENOSYS line"
    # One line per call number, not one per call.
    assert len(enosys) == len(set(enosys))


@pytest.mark.timeout(TIMEOUT + 120)
def test_bad_store_stops_only_the_program(runs):
    _, _, lines = runs
    assert f"{PREFIX}bad: before the bad store" in lines
    assert not any("after the bad store" in l for l in lines)
    assert any(l.startswith(f"{PREFIX}kestrel-linux: bad: segmentation fault: write at 0x20000000")
               for l in lines), "no line naming the program and the address"
    # The server carries on with the next program.
    # (argv[0] is the module name, so the first line names lwktest2.)
    assert program_lines(lines, "lwktest2")[1:] == program_lines(lines, "lwktest")[1:]
    assert "root: kestrel-linux exited (code 139)" in lines
