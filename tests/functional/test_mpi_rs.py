"""The Rust MPI face (native/mpi-rs, crate `mpi`, issue 19) with 8 native ranks on the target:
the root task starts kestrel-fabric and eight copies of kestrel-mpi-rs-test named kestrel-mpirs0
to kestrel-mpirs7 (`mpi.ranks=8`).

- The suite (`mpi::selftest`, the same code tests/selftest.rs runs as threads on the host):
  passes when every rank prints `CHECK: ok (...)` for every check the Rust source lists, in
  its order, and `11 checks passed, 0 failed`; nothing FAILED or panicked, no honest request
  was refused, every rank and the service exited with code 0 and the machine stopped by itself.
- The error cases (`mpirs.fail=KIND`, rank 3 errs and the others wait for it): passes when the
  erring rank prints exactly the face's one line naming the rank, the call and the error class,
  no other rank prints a fatal line or goes on past the error case, every rank exits with
  code 1 (MPI_Abort: its code, 7), the service exits with code 0 and the machine stops: the
  job ended. For `deadlock` (every rank receives from the next, nobody sends) the one line is
  the core's deadlock report of whichever rank waited longest.

The ranks' ELF goes into the boot archive eight times, without its debug sections.
Logs: target/logs/tests/test_*/console.log."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from framework import console, qemu

RANKS = 8
# The suite took 47 s on an idle 2-core host; each error case 2-6 s.
SUITE_TIMEOUT = 600
CASE_TIMEOUT = 120
SELFTEST = Path(__file__).resolve().parents[2] / "native" / "mpi-rs" / "src" / "selftest.rs"
PROGRAM = "kestrel-mpi-rs-test"


def checks() -> list[str]:
    """The suite's checks in the order it runs them, read from the Rust source."""
    names = re.findall(r'\("([a-z-]+)", &\|\|', SELFTEST.read_text())
    assert len(names) >= 10, f"no list of checks found in {SELFTEST}"
    return names


def stripped(elf, logs: Path) -> Path:
    strip = shutil.which("powerpc-linux-gnu-strip")
    if strip is None:
        pytest.fail("no powerpc-linux-gnu-strip: run scripts/setup.sh")
    out = logs / PROGRAM
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([strip, "--strip-debug", "-o", str(out), str(elf(PROGRAM))], check=True)
    return out


def boot(machine, elf, logs: Path, append: list[str], timeout: int) -> list[str]:
    ranks = stripped(elf, logs)
    image = qemu.BootImage(root=qemu.Module("kestrel-root", elf("kestrel-root")), programs=[
        qemu.Module("kestrel-fabric", elf("kestrel-fabric")),
        *[qemu.Module(f"kestrel-mpirs{r}", ranks) for r in range(RANKS)],
    ])
    node = qemu.kestrel_node(image, logs / "console.bootmod",
                             append=[f"mpi.ranks={RANKS}", *append], mem_mb=qemu.KESTREL_RAM_MB)
    status, text = machine(node).run(timeout)
    assert status == 0, f"QEMU exited with status {status}"
    return console.lines(text)


def rank_lines(lines: list[str], r: int) -> list[str]:
    tag = f"[kestrel-mpirs{r}] mpirs {r}/{RANKS}: "
    return [line[len(tag):] for line in lines if line.startswith(tag)]


def assert_stopped(lines: list[str], code: dict[int, int]) -> None:
    for r in range(RANKS):
        want = f"root: kestrel-mpirs{r} exited (code {code.get(r, code.get(-1))})"
        assert want in lines, f"missing {want!r}"
    for want in ("root: kestrel-fabric exited (code 0)",
                 "root: every program has ended; stopping the machine"):
        assert want in lines, f"missing {want!r}"
    bad = [line for line in lines if "panicked" in line or "refused:" in line
           or line.startswith("KERNEL PANIC")]
    assert not bad, bad[0]


@pytest.mark.timeout(SUITE_TIMEOUT + 60)
def test_eight_ranks_pass_the_suite(machine, elf, logs):
    lines = boot(machine, elf, logs, [], SUITE_TIMEOUT)
    names = checks()
    for r in range(RANKS):
        got = rank_lines(lines, r)
        failed = [line for line in got if "FAILED" in line]
        assert not failed, f"rank {r}: {failed[0]}"
        ran = [line.split(":", 1)[0] for line in got if ": ok (" in line]
        assert ran == names, f"rank {r} ran {ran}, not {names}"
        assert got and re.fullmatch(rf"{len(names)} checks passed, 0 failed in [0-9.]+ s", got[-1]), \
            f"rank {r}: no closing line ({got[-1:]})"
    assert_stopped(lines, {-1: 0})


CASES = {
    "rank": "rank 3: MPI_Send: MPI_ERR_RANK: no such rank in the communicator",
    "truncate": "rank 3: MPI_Recv: MPI_ERR_TRUNCATE: message longer than the receive buffer",
    "op": "rank 3: MPI_Allreduce: MPI_ERR_OP: unknown operation or not defined on the datatype",
    "abort": "rank 3: MPI_Abort: called with error code 7",
    "deadlock": None,
}
DEADLOCK = re.compile(r"rank (\d): MPI_Recv: MPI_ERR_OTHER: deadlock: rank \1 waits in MPI_Recv "
                      r"\(receive from source (\d), tag 42, context 0\) with no progress for "
                      r"3000 ms: deadlock")
FATAL = re.compile(r"\[kestrel-mpirs(\d)\] (rank \d: MPI_.*)")


@pytest.mark.timeout(CASE_TIMEOUT + 60)
@pytest.mark.parametrize("kind", list(CASES))
def test_an_error_ends_the_job_with_one_line(machine, elf, logs, kind):
    lines = boot(machine, elf, logs, [f"mpirs.fail={kind}", "mpi.deadlock_ms=3000"],
                 CASE_TIMEOUT)
    fatal = [m.groups() for m in map(FATAL.fullmatch, lines) if m]
    assert len(fatal) == 1, f"not one fatal line: {fatal}"
    (who, line), = fatal
    if CASES[kind] is None:
        m = DEADLOCK.fullmatch(line)
        assert m and m.group(1) == who and int(m.group(2)) == (int(who) + 1) % RANKS, line
    else:
        assert (who, line) == ("3", CASES[kind])
    went_on = [line for line in lines if "did not end the job" in line]
    assert not went_on, went_on[0]
    assert_stopped(lines, {-1: 1, 3: 7} if kind == "abort" else {-1: 1})
