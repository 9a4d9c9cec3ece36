"""The fabric as a native service (docs/adr/0020-fabric-service.md), on the target.

Native part: the root task starts kestrel-fabric (the service), two copies of
kestrel-fabric-ranks (as kestrel-rank0 and kestrel-rank1) and kestrel-echo. Passes when each
rank received the other's message intact over the torus DMA and the allreduce over the
collective gave both the sums recomputed here (framework/programs.py); rank 0, as a bgnet
client, learnt kestrel-echo's MAC by ARP over the collective, had a UDP datagram echoed byte for
byte over the torus and ended the echo with its quit datagram; rank 0, playing a client that
takes its memory back, unmapped a second endpoint's window and sent it a message: the service
survived, detached that endpoint and kept serving rank 0; the service saw every endpoint detach
and exited, the root task saw every program end, and QEMU exited by itself with status 0.

VM part: a Linux VM (bgnet modules loaded) beside kestrel-fabric and kestrel-echo, attached to
the service (`vmm.fabric=service`); its script `fabric-echo` pings the echo, has UDP datagrams
echoed (compared in the guest) and sends the quit datagram. Passes when the guest printed
FABRIC-ECHO-OK, the echo counted the guest's datagrams, and every program ended.
Logs: target/logs/tests/test_*/console.log."""
import re

import pytest

from framework import console, linux, programs, qemu
from framework.constants import ECHO_QUIT

TIMEOUT = 300
RANKS_BYTES = 1200
# The echo and rank 0 on the VMs' LAN (by default native programs and VMs are apart).
POLICY = qemu.POLICIES / "echo-lan.policy"


@pytest.mark.timeout(TIMEOUT + 30)
def test_native_ranks_and_echo(machine, elf, logs):
    ranks = elf("kestrel-fabric-ranks")
    image = qemu.BootImage(root=qemu.Module("kestrel-root", elf("kestrel-root")), programs=[
        qemu.Module("kestrel-fabric", elf("kestrel-fabric")),
        qemu.Module("kestrel-rank0", ranks),
        qemu.Module("kestrel-rank1", ranks),
        qemu.Module("kestrel-echo", elf("kestrel-echo")),
    ], modules=[qemu.policy_module(POLICY)])
    node = qemu.kestrel_node(image, logs / "console.bootmod", append=[
        f"ranks.echo={linux.ECHO_IP} ranks.bytes={RANKS_BYTES} ranks.revoke=1"])
    status, text = machine(node).run(TIMEOUT)
    lines = console.lines(text)
    assert status == 0, f"QEMU exited with status {status}"
    want = [f"[kestrel-rank{i}] {line}" for i, line in enumerate(programs.expected_rank_lines(2, RANKS_BYTES))]
    want += [
        f"[kestrel-echo] {linux.ECHO_IP} at 06:00:00:02:00:00 (endpoint 2, torus (2,0,0), node address 2), "
        "UDP echo on port 7",
        f"[kestrel-rank0] echo: {linux.ECHO_IP} is at 06:00:00:02:00:00",
        f"[kestrel-rank0] echo: UDP datagram of {RANKS_BYTES} bytes echoed, ok",
        f"[kestrel-rank0] echo: quit datagram of {len(ECHO_QUIT)} bytes echoed, ok",
        "[kestrel-echo] quit: answered 1 ARP requests, 0 pings, 2 UDP datagrams",
        "[kestrel-fabric] the last endpoint detached; exiting",
        "root: kestrel-fabric exited (code 0)",
        "root: every program has ended; stopping the machine",
    ]
    for line in want:
        assert line in lines, f"missing {line!r}"
    # The second endpoint is whichever is free then (the echo may still hold endpoint 2).
    for pattern in (r"\[kestrel-fabric\] endpoint (\d+): its client \(66\.1\) unmapped its window or shared "
                    r"page; detaching",
                    r"\[kestrel-rank0\] revoke: sent to the unmapped endpoint (\d+) \(Ok\(true\)\); the "
                    r"service detached it; endpoint 0 still served, ok"):
        assert any(re.fullmatch(pattern, line) for line in lines), f"missing a line like {pattern!r}"
    refused = [line for line in lines if "refused:" in line]
    assert not refused, f"an honest program was refused: {refused[0]}"
    wrong = [line for line in lines if "WRONG" in line or "panicked" in line]
    assert not wrong, wrong[0]


@pytest.mark.timeout(TIMEOUT + 30)
def test_vm_reaches_native_echo(machine, elf, linux_guest, logs):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-echo"):
        elf(name)
    node = linux.vm_node(logs / "console.bootmod", "fabric-echo", natives=["kestrel-fabric", "kestrel-echo"],
                         kernel_args=["vmm.fabric=service"], policy=POLICY)
    status, text = machine(node).run(TIMEOUT)
    lines = console.lines(text)
    assert status == 0, f"the VM run exited with status {status}"
    for line in ("FABRIC-ECHO-OK", "root: kestrel-echo exited (code 0)",
                 "root: every program has ended; stopping the machine"):
        assert line in lines, f"missing {line!r}"
    quit_line = [line for line in lines if line.startswith("[kestrel-echo] quit: answered ")]
    assert quit_line and " 0 UDP datagrams" not in quit_line[0], "kestrel-echo did not count the guest's datagrams"
