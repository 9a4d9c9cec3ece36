"""Static Linux executables run natively on Kestrel by the Linux personality server
kestrel-linux (docs/adr/0034-linux-personality.md). The C program native/linux/tests/lwktest.c
(stdio, malloc with heap and mmap, in-memory files, time, libm on the FPU) is built here with
Debian's powerpc-linux-gnu-gcc (-static -mcpu=440fp) and run twice: under
`qemu-ppc-static -cpu 440epb` (the expected output) and natively on Kestrel. Passes when:

- Kestrel prints the same standard output, line for line, each line prefixed with the
  program's name, and the program exits with code 0;
- the file the program wrote is listed by the server afterwards (a user can read it back);
- calls the server does not know return ENOSYS with one line naming the program and the call;
- a program that writes outside its memory is stopped with one line naming it and the
  address, and the server and the machine carry on (the next program runs).
Logs: target/logs/tests/linux-personality/."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from framework import console, qemu
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
