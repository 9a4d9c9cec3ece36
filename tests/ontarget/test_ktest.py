"""The on-target suite: the kernel boots ktest (ukernel/tasks/ktest) as its root task, which runs
every entry of its `suite::TESTS` and prints `ktest: PASS name` or `ktest: FAIL name: reason`,
then `ktest: N passed, M failed`; the kernel then prints `kestrel: shutdown (code C)` and stops
QEMU. One boot serves every test here: each ktest test is a pytest test of its own (named
from the Rust source), judged by its line. The console log is
target/logs/tests/ktest/console.log."""
from __future__ import annotations

import re

import pytest

from framework import console, qemu, rust
from framework.machine import Machine

TIMEOUT = 120


def suite_names() -> list[str]:
    """The test names in ktest's `suite::TESTS` table, in order."""
    text = (rust.package_dir("ktest") / "src" / "suite" / "mod.rs").read_text()
    table = re.search(r"pub static TESTS: &\[Test\] = &\[(.*?)\n\];", text, re.S)
    assert table, "no `pub static TESTS: &[Test] = &[...]` in ktest's suite/mod.rs"
    body = "\n".join(line for line in table.group(1).splitlines() if not line.strip().startswith("//"))
    return re.findall(r'\(\s*"([A-Za-z0-9_]+)"\s*,', body)


NAMES = suite_names()


@pytest.fixture(scope="module")
def ktest_run():
    """(QEMU's status, the console text) of one boot of ktest."""
    out = qemu.out_dir()
    logs = qemu.logs_dir() / "tests" / "ktest"
    ktest = out / "ktest"
    if not ktest.is_file():
        pytest.fail(f"no {ktest}: build the target ELF files first (scripts/build-target.sh)")
    image = qemu.BootImage(root=qemu.Module("ktest", ktest))
    node = qemu.kestrel_node(image, logs / "console.bootmod")
    return Machine(node, logs / "console.log").run(TIMEOUT)


@pytest.mark.timeout(TIMEOUT + 30)
def test_suite_finishes(ktest_run):
    status, text = ktest_run
    assert status != 124, f"ktest did not finish within {TIMEOUT}s"
    panic = console.panic_line(text)
    assert panic is None, f"kernel panic: {panic}"
    assert status == 0, f"QEMU exited with status {status}"
    closing = console.closing(text, "ktest")
    assert closing is not None, "no closing 'ktest: N passed, M failed' line: the suite did not finish"
    ran = re.findall(r"^ktest: (?:PASS|FAIL) ([A-Za-z0-9_]+)", "\n".join(console.lines(text)), re.M)
    assert ran == NAMES, "the tests ktest ran are not those of its suite::TESTS (parsed here)"
    assert closing == (len(NAMES) - closing[1], closing[1])


@pytest.mark.parametrize("name", NAMES)
def test_ktest(ktest_run, name):
    lines = console.lines(ktest_run[1])
    if f"ktest: PASS {name}" in lines:
        return
    fail = next((line for line in lines if line.startswith(f"ktest: FAIL {name}:")), None)
    assert fail is None, fail
    pytest.fail(f"ktest printed no line for {name} (the suite stopped before it)")
