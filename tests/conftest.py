"""pytest's entry to Kestrel's tests: puts tests/ on the path (the `framework` package) and
provides the fixtures (see the docstring of each) and a per-test time limit.

Tiers are folders: unit/ (host-only: the framework, the benchmark drivers' parsers, the Rust
constants), ontarget/ (the ktest suite), functional/, security/, docs/. tests/run.py runs them
all (`just test`)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from framework import qemu  # noqa: E402
from framework.machine import Machine  # noqa: E402

# Without a `timeout` mark a test may run this long (seconds); QEMU runs carry their own
# wall-clock limits, this is the backstop for the test around them.
DEFAULT_TIMEOUT = int(os.environ.get("KESTREL_TEST_TIMEOUT", "900"))


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): fail the test after this long")


class TestTimeout(Exception):
    """A test ran past its time limit."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Fails a test that runs past its `timeout` mark (or DEFAULT_TIMEOUT): SIGALRM raises in the
    test, which ends its QEMU through the fixtures' teardown."""
    mark = item.get_closest_marker("timeout")
    seconds = int(mark.args[0]) if mark else DEFAULT_TIMEOUT

    def expire(signum, frame):
        raise TestTimeout(f"{item.nodeid} ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def logs(request) -> Path:
    """target/logs/tests/<test name>/: where this test's consoles and archives go."""
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    path = qemu.logs_dir() / "tests" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def machine(logs):
    """A factory of QEMU machines for this test: `machine(node, name)` -> a Machine whose console
    goes to logs/<name>.log; every QEMU still running at the end of the test is stopped."""
    made: list[Machine] = []

    def make(node: qemu.Node, name: str = "console") -> Machine:
        m = Machine(node, logs / f"{name}.log")
        made.append(m)
        return m

    yield make
    for m in made:
        m.kill()


@pytest.fixture(scope="session")
def elf():
    """`elf(name)`: the target ELF file of package `name`; fails (never skips) when missing."""
    def find(name: str) -> Path:
        path = qemu.out_dir() / name
        if not path.is_file():
            pytest.fail(f"no {path}: build the target ELF files first (scripts/build-target.sh)")
        return path
    return find


@pytest.fixture(scope="session")
def linux_guest():
    """(vmlinux, initramfs) of the project's Linux guest; fails when not built."""
    from framework import linux
    for path in (linux.VMLINUX, linux.INITRAMFS):
        if not path.is_file():
            pytest.fail(f"no {path}: build the Linux guest first (guests/linux/build.sh)")
    return linux.VMLINUX, linux.INITRAMFS
