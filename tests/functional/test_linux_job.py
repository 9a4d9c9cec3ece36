"""Jobs of Linux-personality ranks (docs/adr/0034-linux-personality.md, `linux.job=`): the
static C program native/linux/tests/ranktest.c, built with Debian's powerpc-linux-gnu-gcc
(-static -mcpu=440fp), runs as 4 ranks at once under kestrel-linux. Each rank reads KESTREL_RANK / KESTREL_SIZE from its environment, sums its share
of a series on the FPU and sleeps a little (so the ranks interleave). Passes when:

- every rank prints the lines `qemu-ppc-static -cpu 440epb` prints for it (same
  environment), prefixed `ranktest.R: `, every rank exits with code 0, the job's end line
  follows and kestrel-linux exits with code 0 (the machine stops by itself);
- with `crash=2`, rank 2's store outside its memory ends the job: one line names the job,
  rank 2 and the segmentation fault, the other ranks are stopped, the job ends with code 139
  and the machine stops.
- Kestrel calls from a Linux program: native/linux/tests/fabrictest.c, linked with
  libkestrel_kcall.a (native/linux/kcall, built by scripts/build-kcall.sh for
  powerpc-unknown-linux-gnu), runs as 2 ranks beside the fabric service; each rank looks the
  service up through the root task and attaches an endpoint over its own memory, and prints
  its endpoint and torus coordinates (distinct endpoints and coordinates); then both detach,
  the service and kestrel-linux end, and the machine stops with code 0.
Logs: target/logs/tests/linux-job/."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from framework import console, qemu
from framework.machine import Machine

TIMEOUT = 300
SRC = Path(__file__).resolve().parents[2] / "native" / "linux" / "tests" / "ranktest.c"
PREFIX = "[kestrel-linux] "
RANKS = 4


@pytest.fixture(scope="module")
def ranktest(elf) -> Path:
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-linux"):
        elf(name)
    gcc = shutil.which("powerpc-linux-gnu-gcc")
    if gcc is None:
        pytest.fail("no powerpc-linux-gnu-gcc: run scripts/setup.sh")
    logs = qemu.logs_dir() / "tests" / "linux-job"
    logs.mkdir(parents=True, exist_ok=True)
    exe = logs / "ranktest"
    subprocess.run([gcc, "-static", "-mcpu=440fp", "-O2", "-o", str(exe), str(SRC), "-lm"],
                   check=True)
    return exe


def boot(exe: Path, tag: str, args: list[str], ranks: int = RANKS,
         fabric: bool = False) -> tuple[int, list[str]]:
    logs = exe.parent
    # By default no fabric service: it would outlive a job that never attaches an endpoint
    # (it exits after its last endpoint detaches).
    image, append = qemu.linux_job_image(exe, ranks, args=args, fabric=fabric)
    node = qemu.kestrel_node(image, logs / f"{tag}.bootmod", append=append)
    status, text = Machine(node, logs / f"{tag}.log").run(TIMEOUT)
    return status, console.lines(text)


def expected(exe: Path, rank: int) -> list[str]:
    user = shutil.which("qemu-ppc-static")
    if user is None:
        pytest.fail("no qemu-ppc-static: run scripts/setup.sh")
    env = dict(os.environ, KESTREL_RANK=str(rank), KESTREL_SIZE=str(RANKS))
    return subprocess.run([user, "-cpu", "440epb", str(exe)], check=True, capture_output=True,
                          text=True, timeout=120, env=env).stdout.splitlines()


def rank_lines(lines: list[str], rank: int) -> list[str]:
    tag = f"{PREFIX}ranktest.{rank}: "
    return [line[len(tag):] for line in lines if line.startswith(tag)]


@pytest.mark.timeout(TIMEOUT + 180)
def test_four_ranks(ranktest):
    status, lines = boot(ranktest, "job", [])
    assert status == 0, f"QEMU exited with {status}"
    assert f"{PREFIX}kestrel-linux: job ranktest: starting {RANKS} ranks" in lines
    for r in range(RANKS):
        assert rank_lines(lines, r) == expected(ranktest, r), f"rank {r}"
        assert f"{PREFIX}kestrel-linux: ranktest.{r} exited with code 0" in lines
    end = f"{PREFIX}kestrel-linux: job ranktest: all {RANKS} ranks exited with code 0"
    assert end in lines
    # The ranks ran at once: every rank started before the first one finished.
    first_done = min(i for i, l in enumerate(lines) if ": partial " in l)
    assert all(any(l == f"{PREFIX}ranktest.{r}: rank {r} of {RANKS} starting"
                   for l in lines[:first_done]) for r in range(RANKS)), "ranks ran one by one"
    assert "root: kestrel-linux exited (code 0)" in lines


@pytest.mark.timeout(TIMEOUT + 180)
def test_crashing_rank_ends_the_job(ranktest):
    status, lines = boot(ranktest, "crash", ["crash=2"])
    assert status == 0, f"QEMU exited with {status}"
    assert f"{PREFIX}ranktest.2: rank 2 crashing on purpose" in lines
    why = [l for l in lines if l.startswith(f"{PREFIX}kestrel-linux: job ranktest: rank 2 of {RANKS}")]
    assert len(why) == 1, f"want one line naming rank 2, got {why}"
    assert "segmentation fault: write at 0x20000000" in why[0] and why[0].endswith("stopping the job")
    assert not any(l.startswith(f"{PREFIX}ranktest.2: rank 2 of {RANKS}: partial") for l in lines)
    assert f"{PREFIX}kestrel-linux: job ranktest ended (code 139)" in lines
    assert "root: kestrel-linux exited (code 139)" in lines


@pytest.mark.timeout(TIMEOUT + 600)
def test_kestrel_calls_from_linux_ranks(ranktest, elf):
    elf("kestrel-fabric")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([str(root / "scripts" / "build-kcall.sh")], check=True)
    lib = qemu.target_dir() / "powerpc-unknown-linux-gnu" / "release"
    exe = ranktest.parent / "fabrictest"
    subprocess.run([str(root / "scripts" / "kestrel-cc"), "-O2", "-o", str(exe),
                    str(SRC.parent / "fabrictest.c"), f"-L{lib}", "-lkestrel_kcall"], check=True)
    status, lines = boot(exe, "fabric", [], ranks=2, fabric=True)
    assert status == 0, f"QEMU exited with {status}"
    seen = []
    for r in range(2):
        got = [l for l in lines if l.startswith(f"{PREFIX}fabrictest.{r}: rank {r} of 2: thread ")]
        assert len(got) == 1, f"rank {r}: {got}"
        seen.append(got[0].split(", endpoint ")[1])
    assert len(set(seen)) == 2, f"endpoints and coordinates not distinct: {seen}"
    assert "[kestrel-fabric] the last endpoint detached; exiting" in lines
    assert f"{PREFIX}kestrel-linux: job fabrictest: all 2 ranks exited with code 0" in lines
    assert "root: every program has ended; stopping the machine" in lines
