"""The attacker turned on the devices (issue 18, finding 7), briefly, beside honest tenants of the
node's one fabric.

One QEMU: kestrel-vmm runs VM 0 as the hostile guest in device mode (module `bare0`: seeded blocks
and plans hitting its vBIC, collective, torus DMA group and virtio-mmio window with every access
width, DCRs 0xC00-0xDFF with the class routes weighted, random descriptors, floods of collective
packets, torus packets and frames; framework/hostile.py) and VMs 1 and 2 as Linux; beside them
the fabric service and two native ranks (kestrel-fabric-ranks as kestrel-rank0/1) exchanging
messages and allreducing over and over. The node's policy (fabric/policies/device-attacker.policy)
jails VM 0 in a partition of its own; the Linux VMs share a LAN partition, the ranks an MPI one.

Passes when VM 2 copied a file from VM 1 over bgnet on the torus and over the virtio NIC with
identical MD5s, both ranks finished every round with correct data, the attacker ran its whole
budget with no finding and was never stopped, and the machine ended cleanly (every VM, rank and
the service). The seed and the attacker's counts are printed. `just soak` runs the attacker at
length (scripts/attack-guest.py --devices). Log: target/logs/tests/device-attacker/console.log."""
from __future__ import annotations

import re
import time

import pytest

from framework import hostile, linux, qemu
from framework.console import Failure
from framework.machine import Machine
from framework.netcopy import Session

SEED = 1
INSTRUCTIONS = 100_000
PROGRESS = 25_000
TIMEOUT = 1200
STEP = 400
ROUNDS = 6
# The attacker is a bare-metal VM (32 MiB); the two Linux VMs get 48 MiB each.
VM_MEM_MB = 48
SIZES_KIB = {"f": 512}
POLICY = qemu.POLICIES / "device-attacker.policy"
RANK_RE = re.compile(r"\[kestrel-rank(\d)\] ranks \d/2: (.*)$")


@pytest.fixture(scope="module")
def node(linux_guest, elf):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-hostile"):
        elf(name)
    ranks = elf("kestrel-fabric-ranks")
    logs = qemu.logs_dir() / "tests" / "device-attacker"
    logs.mkdir(parents=True, exist_ok=True)
    attacker = logs / "hostile.elf"
    attacker.write_bytes(hostile.patch_args((qemu.out_dir() / "kestrel-hostile").read_bytes(),
                                            SEED, INSTRUCTIONS, PROGRESS, devices=True))
    n = linux.vm_node(
        logs / "console.bootmod", vms=3, vm_mem_mb=VM_MEM_MB, console="interactive", policy=POLICY,
        programs=[qemu.Module("kestrel-rank0", ranks), qemu.Module("kestrel-rank1", ranks)],
        modules=[qemu.Module("bare0", attacker)],
        kernel_args=["ranks.n=2", "ranks.bytes=1200", f"ranks.rounds={ROUNDS}", "ranks.pause_ms=3000"])
    m = Machine(n, logs / "console.log")
    try:
        s = Session(m, TIMEOUT, server=1, client=2, sizes_kib=SIZES_KIB)
        yield s
    finally:
        m.kill()


@pytest.mark.timeout(TIMEOUT + 60)
def test_tenants_finish_with_correct_data_beside_the_device_attacker(node):
    s = node
    s.wait_for_shells([1, 2])
    s.serve()
    copies = []
    for path in ("torus", "virtio"):
        try:
            copies.append(f"{path}: {s.transfer(path, 'f', STEP)}")
        except AssertionError as e:
            s.recover()
            pytest.fail(f"seed {SEED}: the Linux copy over {path} failed beside the attacker: {e}")
    # The attacker's whole budget, and every round of the ranks.
    try:
        done = s.con.wait_for(r"\[vm0\] hostile: done seed (\d+) findings (\d+)", s.deadline)
    except Failure as e:
        pytest.fail(f"seed {SEED}: the attacker did not finish its budget: {e}")
    assert done.group(2) == "0", f"seed {SEED}: the attacker reported findings"
    try:
        for r in (0, 1):
            s.con.wait_for(rf"root: kestrel-rank{r} exited \(code 0\)", s.deadline)
    except Failure as e:
        pytest.fail(f"seed {SEED}: the ranks' exchange or allreduce did not complete: {e}")
    s.power_off([2, 1])
    status = s.machine.wait(s.deadline)
    text = s.machine.log.read_text(errors="replace")
    lines = text.splitlines()
    rounds = {0: [], 1: []}
    for line in lines:
        m = RANK_RE.search(line)  # a guest line may come first on the console line
        if m:
            rounds[int(m.group(1))].append(m.group(2))
    for r, got in rounds.items():
        assert len(got) >= ROUNDS, f"seed {SEED}: rank {r} finished {len(got)} of {ROUNDS} rounds"
        bad = [g for g in got if "WRONG" in g]
        assert not bad, f"seed {SEED}: rank {r} got wrong data beside the attacker: {bad[0]}"
    stopped = [line for line in lines if re.search(r"vmm: vm\d: .*stopping it", line)
               and "guest requested a reset" not in line]
    assert not stopped, f"seed {SEED}: a VM was stopped: {stopped[0]}"
    findings = [line for line in lines if "hostile: FINDING" in line]
    assert not findings, f"seed {SEED}: {findings[0]}"
    counts = [line for line in lines if line.startswith("[vm0] hostile: ") and
              any(k in line for k in ("counts", "plans", "ops"))]
    refused = [line for line in lines if "refused:" in line and line.startswith("[kestrel-fabric]")]
    honest = [line for line in refused if "VM 0)" not in line]
    assert not honest, f"seed {SEED}: an honest tenant was refused: {honest[0]}"
    refusals = len(refused)
    print(f"seed {SEED}; " + "; ".join(copies))
    print("\n".join(counts))
    print(f"fabric service refusal lines: {refusals}")
    assert status == 0, f"seed {SEED}: QEMU exited with status {status}"
