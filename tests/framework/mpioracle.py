"""The differential oracle for Kestrel's MPI C library (issue 19): the C test programs in
tests/mpi build against Debian's MPICH (`mpicc`) and run with `mpiexec -n 8` on this host; their
output must equal tests/mpi/expected/NAME.out, which a Kestrel run of the same program (built
with scripts/kestrel-mpicc, run as an 8-rank job: tests/functional/test_mpi_c.py) must equal too.
The Kestrel side's console is read here as well: rank 0's lines, the job's end, the library's
own (fatal) lines.

The expected files are MPICH's output, committed, and rewritten by

    python3 tests/framework/mpioracle.py regenerate

except where MPICH 4.0.2 is known to be wrong (MPICH_DEVIATIONS): those files are the MPI
standard's answer, written by hand, and MPICH's run is expected to differ from them.

MPICH runs on this host only: hydra's fork launcher, UCX's shared memory and self transports
(no network interface), and a wall-clock limit per run after which the whole process group is
killed.
"""
from __future__ import annotations

import difflib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = ROOT / "tests" / "mpi"
EXPECTED = SOURCES / "expected"
KESTREL_INCLUDE = ROOT / "native" / "mpi-c" / "include"
RANKS = 8

# The programs whose output is compared, in a cheap-first order.
PROGRAMS = ("errors", "p2p", "nonblocking", "collectives", "unsigned_minmax", "reduce")
# Programs whose expected output is the standard's, because MPICH 4.0.2 gets them wrong.
MPICH_DEVIATIONS = {
    "unsigned_minmax": "MPICH 4.0.2 compares unsigned integers as signed in MPI_MAX and MPI_MIN "
                       "(pmodels/mpich issue 6083)",
}
# Programs that end the job (MPI_Abort; an error under MPI_ERRORS_ARE_FATAL), checked by a
# non-zero exit and their first line, which rank 0 prints before: launchers add their own text.
ABORTING = {
    "abort": "abort: rank 3 will call MPI_Abort with code 7",
    "fatal": "fatal: rank 0 sends to rank 8 under MPI_ERRORS_ARE_FATAL",
}

# Programs for Kestrel only, with the first line rank 0 prints: MPICH would never end them.
# `deadlock`: every rank receives what nobody sends; Kestrel's library ends the job with one
# line naming the rank and the call it waits in.
KESTREL_ONLY = {
    "deadlock": "deadlock: every rank receives what nobody sends",
}
# The machine's RAM for a Kestrel job of these programs (p2p.c's multi-megabyte messages on 8
# ranks do not fit in QEMU's default 128 MiB).
KESTREL_MEM_MB = 256
# What kestrel-linux puts before a rank's console line (`[kestrel-linux] NAME.R: `).
SERVER_PREFIX = "[kestrel-linux] "
KESTREL_MPICC = ROOT / "scripts" / "kestrel-mpicc"

# -Wno-stringop-overflow: gcc 12 warns that MPI_STATUSES_IGNORE (the address 1) is an array
# of size 0 when it is passed where the prototype has `MPI_Status []`.
CFLAGS = ["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-stringop-overflow"]


class OracleError(Exception):
    """The oracle could not build or run a program (the message says what to do)."""


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str


def source(name: str) -> Path:
    return SOURCES / f"{name}.c"


def expected_path(name: str) -> Path:
    return EXPECTED / f"{name}.out"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise OracleError(f"{name} not found: run scripts/setup.sh (it installs mpich, libmpich-dev)")
    return path


def build_mpich(name: str, outdir: Path) -> Path:
    """`mpicc` (MPICH's wrapper around the host gcc) builds tests/mpi/NAME.c into outdir."""
    exe = outdir / name
    cmd = [tool("mpicc"), *CFLAGS, "-o", str(exe), str(source(name))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise OracleError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return exe


def check_kestrel_header(name: str, compiler: str = "gcc") -> None:
    """Compiles tests/mpi/NAME.c against Kestrel's mpi.h (no linking: the library is the core's
    to come), so the test programs use only what Kestrel's ABI declares."""
    cmd = [tool(compiler), *CFLAGS, f"-I{KESTREL_INCLUDE}", "-fsyntax-only", str(source(name))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise OracleError(f"{' '.join(cmd)} failed:\n{r.stderr}")


def build_kestrel(name: str, outdir: Path) -> Path:
    """scripts/kestrel-mpicc (Debian's cross gcc, Kestrel's mpi.h and libkestrel_mpi_c.a) builds
    tests/mpi/NAME.c into outdir for the 440."""
    exe = outdir / name
    cmd = [str(KESTREL_MPICC), *CFLAGS, "-o", str(exe), str(source(name))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise OracleError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return exe


def rank_lines(console: list[str], name: str, rank: int = 0) -> list[str]:
    """The lines rank `rank` of Kestrel job `name` printed, in order, without kestrel-linux's
    prefix (`[kestrel-linux] NAME.RANK: `)."""
    tag = f"{SERVER_PREFIX}{name}.{rank}: "
    return [line[len(tag):] for line in console if line.startswith(tag)]


def job_code(console: list[str], name: str) -> int | None:
    """How Kestrel job `name` ended: 0 when every rank exited with 0, the job's code when a rank
    ended it, None when the console does not say (it never ended)."""
    for line in console:
        if line.startswith(f"{SERVER_PREFIX}kestrel-linux: job {name}: all ") and \
                line.endswith(" ranks exited with code 0"):
            return 0
        prefix = f"{SERVER_PREFIX}kestrel-linux: job {name} ended (code "
        if line.startswith(prefix) and line.endswith(")"):
            return int(line[len(prefix):-1])
    return None


def library_lines(console: list[str], name: str) -> list[str]:
    """The lines Kestrel's MPI library printed itself in job `name` (fatal errors, MPI_Abort),
    from any rank, without kestrel-linux's prefix: `kestrel-mpi: rank R: CALL: ...`."""
    out = []
    for line in console:
        if line.startswith(f"{SERVER_PREFIX}{name}."):
            text = line.split(": ", 1)[1] if ": " in line else ""
            if text.startswith("kestrel-mpi: "):
                out.append(text)
    return out


def mpiexec(exe: Path, ranks: int = RANKS, timeout: float = 300) -> Run:
    """Runs exe on `ranks` MPICH processes on this host; kills the launcher's whole process
    group when it runs past `timeout` seconds."""
    env = dict(os.environ)
    # Shared memory and loopback to self only: no network interface is opened.
    env.setdefault("UCX_TLS", "self,sm")
    env.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    cmd = [tool("mpiexec"), "-launcher", "fork", "-n", str(ranks), str(exe)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise OracleError(f"{exe.name}: no end after {timeout} s (killed); output so far:\n{out}\n{err}")
    return Run(proc.returncode, out, err)


def diff(name: str, actual: str) -> list[str]:
    """The unified diff between tests/mpi/expected/NAME.out and `actual` (empty when equal)."""
    want = expected_path(name).read_text() if expected_path(name).exists() else ""
    return list(difflib.unified_diff(want.splitlines(), actual.splitlines(),
                                     f"expected/{name}.out", "actual", lineterm=""))


def regenerate(outdir: Path) -> list[str]:
    """Rewrites the expected output of every program MPICH gets right; returns their names."""
    written = []
    EXPECTED.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        if name in MPICH_DEVIATIONS:
            continue
        run = mpiexec(build_mpich(name, outdir))
        if run.status != 0:
            raise OracleError(f"{name} failed under MPICH (status {run.status}):\n{run.stdout}\n{run.stderr}")
        expected_path(name).write_text(run.stdout)
        written.append(name)
    return written


def main(argv: list[str]) -> int:
    if argv != ["regenerate"]:
        print(__doc__)
        return 2
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mpioracle-") as tmp:
        for name in regenerate(Path(tmp)):
            print(f"mpioracle: wrote {expected_path(name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
