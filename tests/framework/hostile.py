"""The hostile-guest attack (issue 9, docs/adr/0015): kestrel-vmm runs guests/hostile twice
(vmm.vms=2). VM 0 runs seeded pseudo-random instruction blocks with its own vectors until it has
run `instructions` guest instructions; VM 1 checksums its own RAM in rounds, forever.

The seed and the budget are patched into a copy of the guest ELF (its HOSTILE_ARGS block,
found by its magic), so the same seed reproduces the same blocks. `attack` passes (the
watcher's `failure` is None) only if VM 0 printed its `hostile: done` summary with no finding
and the neighbour finished a round after that; it fails on: a kernel panic or register dump, a
kernel line stopping or halting a thread, the VMM stopping VM 1 or VM 0 before it was done (or
crashing), QEMU exiting or aborting, no progress line from VM 0 for `hang` seconds (a hang or
livelock), the neighbour's checksum changing or no neighbour round for `starve` seconds
(starvation), a `hostile: FINDING` line, or `timeout`. Run by tests/security/test_hostile.py
(seed 1, briefly) and scripts/attack-guest.py (`just soak`, at length).

With `devices=True` VM 0 is the device attacker of issue 18 (finding 7; the guest's `devices`
argument): it attacks its own vBIC, collective, torus DMA group and virtio NIC, and floods the
fabric. The VMs then use the fabric service (`vmm.fabric=service`), and native ranks
(kestrel-fabric-ranks as kestrel-rank0/1, endpoints 0 and 1, started before the VMM) exchange
messages and allreduce `ranks` rounds meanwhile; the run also fails when a rank prints WRONG or
an error, or (once the attacker is done) has not finished every round within `ranks_grace`
seconds: "the ranks' allreduce did not complete".
"""
from __future__ import annotations

import os
import re
import select
import struct
import subprocess
import time
from pathlib import Path

from . import qemu as kq
from .constants import HOSTILE_MAGIC as MAGIC
PROGRESS_RE = re.compile(r"^\[vm0\] hostile: progress blocks (\d+) instructions (\d+) ")
DONE_RE = re.compile(r"^\[vm0\] hostile: done seed (\d+) findings (\d+)$")
COUNTS_RE = re.compile(r"^\[vm0\] hostile: counts blocks (\d+) instructions (\d+) generated (\d+) "
                       r"exceptions (\d+) ends (\d+)$")
DETAIL_RE = re.compile(r"^\[vm0\] hostile: (vectors|ops|plans) (.*)$")
RANK_RE = re.compile(r"^\[kestrel-rank(\d)\] (.*)$")
ROUND_RE = re.compile(r"^\[vm1\] neighbour: round (\d+) checksum (0x[0-9a-f]+) unchanged$")


def patch_args(elf: bytes, seed: int, instructions: int, progress: int, devices: bool = False) -> bytes:
    """The guest ELF with its HOSTILE_ARGS (magic, then big-endian u64 seed, instruction
    budget, progress interval, device attacker flag) set; fails unless the magic occurs
    exactly once."""
    at = elf.find(MAGIC)
    if at < 0 or elf.find(MAGIC, at + 1) >= 0:
        raise kq.LaunchError("the guest ELF has no (or more than one) HOSTILE_ARGS block; "
                             "is it kestrel-hostile?")
    data = bytearray(elf)
    struct.pack_into(">QQQQ", data, at + len(MAGIC), seed, instructions, progress, int(devices))
    return bytes(data)


class Watch:
    """Reads the console line by line and decides pass or fail."""

    def __init__(self, hang: float, starve: float, ranks: int = 0, ranks_grace: float = 120):
        self.hang, self.starve = hang, starve
        # Native ranks' rounds expected (0: no ranks), and each rank's completed rounds.
        self.ranks, self.ranks_grace = ranks, ranks_grace
        self.rank_rounds = [0, 0]
        self.done_at: float | None = None
        now = time.monotonic()
        self.last_progress = now
        self.last_round = now
        self.rounds = 0
        self.rounds_at_done: int | None = None
        self.done: re.Match | None = None
        self.findings: list[str] = []
        self.failure: str | None = None
        self.vm0_stopped = False
        self.progress = (0, 0)
        self.counts: re.Match | None = None
        self.details: list[str] = []

    def line(self, raw: str) -> None:
        line = raw.rstrip("\r")
        now = time.monotonic()
        if m := RANK_RE.match(line):
            r, text = int(m.group(1)), m.group(2)
            if "WRONG" in text or text.startswith(f"rank {r}: ") or "panicked" in text:
                self.fail(f"native rank {r}: {text}")
            elif text.startswith(f"ranks {r}/2: ") and r < 2:
                self.rank_rounds[r] += 1
            return
        if line.startswith(("KERNEL PANIC", "  ip 0x", "  esr 0x")):
            self.fail(f"kernel panic or register dump: {line}")
        elif line.startswith(("qemu: fatal", "qemu-system-ppc: ")) and "terminating on signal" not in line:
            self.fail(f"QEMU: {line}")
        elif re.match(r"^kestrel: thread .* (stopped|halted)", line):
            self.fail(f"the kernel stopped a thread: {line}")
        elif line.startswith("[vm1] neighbour: FAIL") or line.startswith("[vm0] hostile: FAIL"):
            self.fail(line)
        elif line.startswith("[vm0] hostile: FINDING"):
            self.findings.append(line)
        elif m := PROGRESS_RE.match(line):
            self.last_progress = now
            self.progress = (int(m.group(1)), int(m.group(2)))
        elif m := ROUND_RE.match(line):
            self.last_round = now
            self.rounds = int(m.group(1))
        elif m := COUNTS_RE.match(line):
            self.counts = m
        elif m := DETAIL_RE.match(line):
            self.details.append(f"{m.group(1)} {m.group(2)}")
        elif m := DONE_RE.match(line):
            self.done = m
            self.done_at = now
            self.rounds_at_done = self.rounds
            self.last_progress = now
        elif line.startswith("vmm: vm1: ") and ("stopping it" in line or "vCPU" in line):
            self.fail(f"the neighbour VM stopped: {line}")
        elif line.startswith("vmm: vm0: ") and ("stopping it" in line or "vCPU" in line):
            if self.done is None:
                self.fail(f"the hostile VM stopped before it was done: {line}")
            self.vm0_stopped = True
        elif line.startswith("vmm: every VM has stopped") or line.startswith("vmm: IPC failed"):
            self.fail(f"VMM: {line}")

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why

    def finished(self) -> bool:
        """VM 0 done and stopped, and the neighbour made a round since."""
        return (self.done is not None and self.vm0_stopped and self.rounds_at_done is not None
                and self.rounds > self.rounds_at_done
                and all(n >= self.ranks for n in self.rank_rounds))

    def tick(self) -> None:
        now = time.monotonic()
        if self.done is None and now - self.last_progress > self.hang:
            blocks, insns = self.progress
            self.fail(f"hang: no progress line from the hostile VM for {self.hang:.0f}s "
                      f"(last: {blocks} blocks, {insns} instructions)")
        if (self.ranks and self.done_at is not None and now - self.done_at > self.ranks_grace
                and any(n < self.ranks for n in self.rank_rounds)):
            self.fail(f"the ranks' allreduce did not complete: {self.ranks_grace:.0f}s after the "
                      f"attacker was done, rank 0 finished {self.rank_rounds[0]} and rank 1 "
                      f"{self.rank_rounds[1]} of {self.ranks} rounds (exchange + allreduce)")
        if now - self.last_round > self.starve:
            self.fail(f"starvation: no neighbour round for {self.starve:.0f}s "
                      f"(last round {self.rounds})")


def attack(seed: int, instructions: int = 100_000, *, progress: int = 4096, timeout: int = 600,
           hang: int = 120, starve: int = 60, log: Path | None = None,
           say=print, devices: bool = False, ranks: int = 10, ranks_pause_ms: int = 2000,
           ranks_grace: int = 120) -> tuple[Watch, str]:
    """Runs the attack: (the watcher with its verdict in `failure`, a summary of the counts).
    `say` gets the progress lines (the seed first)."""
    guest = kq.out_dir() / "kestrel-hostile"
    if not guest.is_file():
        raise kq.LaunchError(f"no guest at {guest} (build it: scripts/build-target.sh -p "
                             "kestrel-kernel -p kestrel-root -p kestrel-vmm -p kestrel-hostile)")
    log = log or kq.default_log("attack-guest")
    log.parent.mkdir(parents=True, exist_ok=True)
    patched = log.with_suffix(".elf")
    patched.write_bytes(patch_args(guest.read_bytes(), seed, instructions, progress, devices))
    append = kq.vmm_cmdline(2, None)
    natives = []
    if devices:
        # The ranks beside the VMs on the node's fabric service (vmm_image starts it; Comm::start
        # maps ranks to endpoints; by default the VMs and native programs are on partitions of
        # their own).
        ranks_elf = kq.out_dir() / "kestrel-fabric-ranks"
        natives = [kq.Module("kestrel-rank0", ranks_elf), kq.Module("kestrel-rank1", ranks_elf)]
        append += ["ranks.n=2", "ranks.bytes=1200", f"ranks.rounds={ranks}",
                   f"ranks.pause_ms={ranks_pause_ms}"]
    image = kq.vmm_image(patched, natives=natives)
    node = kq.kestrel_node(image, log.with_suffix(".bootmod"), append=append, mem_mb=128)
    mode = " --devices" if devices else ""
    say(f"attack-guest: seed {seed}, {instructions} guest instructions{mode.replace(' --', ', ')} "
        f"(reproduce: scripts/attack-guest.py --seed {seed} --instructions "
        f"{instructions}{mode})")
    watch = Watch(hang, starve, ranks if devices else 0, ranks_grace)
    start = time.monotonic()
    proc = subprocess.Popen(node.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    status = None
    buf = b""
    with log.open("wb") as sink:
        try:
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], 1.0)
                if ready:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        status = proc.wait()
                        break
                    sink.write(chunk)
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for raw in lines:
                        watch.line(raw.decode(errors="replace"))
                watch.tick()
                if time.monotonic() - start > timeout:
                    watch.fail(f"timeout after {timeout}s")
                if watch.failure or watch.finished():
                    break
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.stdout.close()
    if status is not None and watch.failure is None and not watch.finished():
        watch.fail(f"QEMU exited with status {status} before the run was done")
    elapsed = time.monotonic() - start
    if watch.findings and watch.failure is None:
        watch.fail(f"{len(watch.findings)} finding(s): {watch.findings[0]}")
    c, d = watch.counts, watch.done
    counts = ""
    if c is not None:
        counts = (f"blocks {c.group(1)} instructions {c.group(2)} (generated {c.group(3)}) "
                  f"exceptions {c.group(4)} ends {c.group(5)}; ")
    elif watch.progress != (0, 0):
        counts = f"reached blocks {watch.progress[0]} instructions {watch.progress[1]}; "
    if d is not None:
        counts += f"findings {d.group(2)}; "
    counts += f"neighbour rounds {watch.rounds} unchanged"
    if devices:
        counts += f"; ranks' rounds (exchange + allreduce) {watch.rank_rounds[0]}/{watch.rank_rounds[1]} of {ranks}"
    counts += f"; {elapsed:.1f}s (log: {log})"
    return watch, counts
