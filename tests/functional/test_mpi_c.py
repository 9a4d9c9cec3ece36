"""Kestrel's MPI C library on the target (issue 19): each C test program of tests/mpi, built with
scripts/kestrel-mpicc against libkestrel_mpi_c.a (scripts/build-mpi-c.sh), runs as an 8-rank job
under kestrel-linux beside the fabric service (`linux.job=NAME:8`, what `just mpi NAME 8` boots,
in 256 MiB), and:

- the oracle's programs (framework/mpioracle.py PROGRAMS) print, on rank 0, exactly
  tests/mpi/expected/NAME.out (MPICH's output, or the standard's where MPICH is wrong), every
  rank exits with code 0 and the library prints no line of its own;
- `abort.c` (MPI_Abort on rank 3) and `fatal.c` (a send to rank 8 under MPI_ERRORS_ARE_FATAL)
  print their first line, then the job ends with a non-zero code and exactly one line of the
  library naming the rank and the call (and for fatal.c the error class), and no rank goes on;
- `deadlock.c` (Kestrel only: every rank receives what nobody sends) ends with one line naming
  the rank, MPI_Recv, and what it waits for.

Logs: target/logs/tests/test_..._NAME/ (the console, the program, its boot archive)."""
from __future__ import annotations

import subprocess

import pytest

from framework import console, mpioracle, qemu

RANKS = 8
# Wall-clock limit of one job under QEMU (they take seconds to a minute on 2 cores; the slowest
# moves 3 MiB messages around a ring of 8 ranks).
TIMEOUT = 600


@pytest.fixture(scope="module")
def library(elf):
    """Builds libkestrel_mpi_c.a (a no-op when up to date) and checks the ELF files a job boots."""
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-linux", "kestrel-fabric"):
        elf(name)
    subprocess.run([str(mpioracle.ROOT / "scripts" / "build-mpi-c.sh")], check=True)
    lib = qemu.target_dir() / "powerpc-unknown-linux-gnu" / "release" / "libkestrel_mpi_c.a"
    assert lib.is_file(), f"build-mpi-c.sh made no {lib}"
    return lib


def run_job(name: str, logs, machine) -> list[str]:
    """Builds tests/mpi/NAME.c and runs it as an 8-rank job; the console's lines."""
    exe = mpioracle.build_kestrel(name, logs)
    image, append = qemu.linux_job_image(exe, RANKS, fabric=True)
    node = qemu.kestrel_node(image, logs / f"{name}.bootmod", append=append,
                             mem_mb=mpioracle.KESTREL_MEM_MB)
    status, text = machine(node, name).run(TIMEOUT)
    lines = console.lines(text)
    assert status != 124, f"{name}: no end after {TIMEOUT} s (log in {logs})"
    assert status == 0, f"{name}: QEMU exited with {status}"
    return lines


@pytest.mark.timeout(TIMEOUT + 300)
@pytest.mark.parametrize("name", mpioracle.PROGRAMS)
def test_program_prints_the_oracles_output(name, library, logs, machine):
    lines = run_job(name, logs, machine)
    fatal = mpioracle.library_lines(lines, name)
    assert not fatal, f"{name}: the library ended the job: {fatal}"
    assert mpioracle.job_code(lines, name) == 0, f"{name}: the job did not end with code 0"
    out = mpioracle.rank_lines(lines, name)
    delta = mpioracle.diff(name, "\n".join(out) + "\n")
    assert not delta, (f"{name} on Kestrel differs from tests/mpi/expected/{name}.out:\n"
                       + "\n".join(delta))


def ends_with_one_line(name: str, lines: list[str], first: str) -> str:
    """Checks a job that must end early: rank 0's first line, a non-zero end, no rank going on,
    one line of the library; returns that line."""
    out = mpioracle.rank_lines(lines, name)
    assert out and out[0] == first, f"{name}: rank 0 printed {out[:3]}"
    code = mpioracle.job_code(lines, name)
    assert code not in (None, 0), f"{name}: the job's end: {code}"
    assert not any("was not stopped" in line for line in lines), f"{name}: a rank went on"
    said = mpioracle.library_lines(lines, name)
    assert len(said) == 1, f"{name}: want one line of the library, got {said}"
    return said[0]


@pytest.mark.timeout(TIMEOUT + 300)
def test_abort_ends_the_job(library, logs, machine):
    lines = run_job("abort", logs, machine)
    line = ends_with_one_line("abort", lines, mpioracle.ABORTING["abort"])
    assert line.startswith("kestrel-mpi: rank 3: MPI_Abort") and "error code 7" in line, line
    assert mpioracle.job_code(lines, "abort") == 7


@pytest.mark.timeout(TIMEOUT + 300)
def test_an_error_is_fatal_by_default(library, logs, machine):
    lines = run_job("fatal", logs, machine)
    line = ends_with_one_line("fatal", lines, mpioracle.ABORTING["fatal"])
    assert line.startswith("kestrel-mpi: rank 0: MPI_Send: MPI_ERR_RANK"), line


@pytest.mark.timeout(TIMEOUT + 300)
def test_a_deadlock_names_the_rank_and_the_call(library, logs, machine):
    lines = run_job("deadlock", logs, machine)
    line = ends_with_one_line("deadlock", lines, mpioracle.KESTREL_ONLY["deadlock"])
    assert line.startswith("kestrel-mpi: rank 0: MPI_Recv: MPI_ERR_OTHER: deadlock: waiting "), line
    assert "receive from any source, tag 4242" in line, line
