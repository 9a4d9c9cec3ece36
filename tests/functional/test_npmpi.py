"""NetPIPE's MPI module, unmodified, between two native ranks beside a Linux VM (issue 19).

NPmpi (NetPIPE 3.7.2, the Debian source package the guest's NPtcp comes from) is built by
scripts/build-npmpi.sh with scripts/kestrel-mpicc against Kestrel's mpi.h and C MPI library,
and runs as a job of 2 ranks on the Linux personality (`linux.job=NPmpi:2`) beside the node's
fabric service and one Linux VM, all in one machine. The VM runs a guest script (added to its
initramfs) that waits VM_IDLE_S seconds and powers off: the job's ranks run below the vCPUs'
priority, so a VM that kept its processor busy would hold the job back until it stopped.
Passes when both ranks exit with code 0, rank 0 printed NetPIPE's per-size lines in NPtcp's
format for every size from 1 byte to the upper bound, the np.out it wrote (listed by
kestrel-linux after the job) has NPtcp's columns (bytes, Mbps, one-way seconds) for the same
sizes, the VM was up before the job ended and powered off after it with its script's status
0, and the machine stopped by itself.

Skipped, with the reason, while Kestrel's C MPI library (libkestrel_mpi_c.a) is not built:
kestrel-mpicc cannot link NPmpi without it (build-npmpi.sh exits 3).
Logs: target/logs/tests/test_npmpi_beside_a_linux_vm/console.log."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from framework import console, linux, qemu

import mpi  # bench/mpi.py: reading np.out from kestrel-linux's listing

TIMEOUT = 900
UPPER = 65536
# How long the VM stays up (guest seconds; without -icount about wall seconds): well beyond
# the job (about 30 s on its own).
VM_IDLE_S = 240
VM_SCRIPT = f"""#!/bin/sh
# npmpi-idle: an idle Linux VM beside the NPmpi job (tests/functional/test_npmpi.py)
echo "npmpi-idle: up"
sleep {VM_IDLE_S}
echo "npmpi-idle: done"
echo KESTREL-SCRIPT-DONE
""".encode()
# NetPIPE's line per size (netpipe.c: "%3d: %7d bytes %6d times --> " then
# "%8.2f Mbps in %10.2f usec"), NPtcp's and NPmpi's alike.
SIZE_LINE_RE = re.compile(r"^\s*\d+:\s+(\d+) bytes\s+\d+ times -->\s+[\d.]+ Mbps in\s+[\d.]+ usec$")
PREFIX = "[kestrel-linux] "


@pytest.fixture(scope="module")
def npmpi() -> Path:
    built = subprocess.run([str(qemu.ROOT / "scripts" / "build-npmpi.sh")], capture_output=True, text=True)
    said = [l for l in built.stderr.splitlines() if l.strip()]
    if built.returncode == mpi.NPMPI_SKIP:
        pytest.skip(said[-1] if said else "Kestrel's MPI library is not built")
    assert built.returncode == 0, "scripts/build-npmpi.sh failed:\n" + "\n".join(said[-10:])
    return Path(built.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(TIMEOUT + 60)
def test_npmpi_beside_a_linux_vm(npmpi, machine, elf, linux_guest, logs):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-linux"):
        elf(name)
    job, words = qemu.linux_job_image(npmpi, 2, args=["-l", "1", "-u", str(UPPER), "-p", "0", "-n", "10"],
                                      fabric=False)
    initrd = linux.initramfs_with([("scripts/npmpi-idle", VM_SCRIPT, 0o100755)], logs / "initramfs.cpio.gz")
    node = linux.vm_node(logs / "console.bootmod", "npmpi-idle", programs=job.programs, modules=job.modules,
                         kernel_args=words, initrd=initrd)
    status, text = machine(node).run(TIMEOUT)
    lines = console.lines(text)
    assert status == 0, f"QEMU exited with status {status}"
    for r in range(2):
        assert f"{PREFIX}kestrel-linux: NPmpi.{r} exited with code 0" in lines, f"rank {r} did not exit 0"
    assert f"{PREFIX}kestrel-linux: job NPmpi: all 2 ranks exited with code 0" in lines
    sizes = [int(m.group(1)) for l in lines if l.startswith(f"{PREFIX}NPmpi.0: ")
             for m in [SIZE_LINE_RE.match(l[len(f"{PREFIX}NPmpi.0: "):])] if m]
    assert sizes and sizes[0] == 1 and sizes[-1] == UPPER, f"rank 0's per-size lines: {sizes}"
    points = mpi.parse_npmpi(text)
    assert [p["bytes"] for p in points] == sizes, "np.out's sizes are not the ones rank 0 printed"
    end = lines.index(f"{PREFIX}kestrel-linux: job NPmpi: all 2 ranks exited with code 0")
    up = [i for i, l in enumerate(lines) if l == "npmpi-idle: up"]
    off = [i for i, l in enumerate(lines) if l == linux.script_exited_line("npmpi-idle")]
    assert up and up[0] < end, "the VM was not up before the job ended"
    assert off and off[0] > end, "the VM's script did not exit 0 after the job (or the VM stopped first)"
    assert "root: every program has ended; stopping the machine" in lines
