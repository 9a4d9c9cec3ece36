#!/usr/bin/env python3
"""A Linux VM and a native program at the same time, both checked.

Boots Kestrel with the root task starting the VMM (one Linux VM running its `job` script) and
the native program kestrel-checksum beside it (`scripts/vm-linux.sh --native
kestrel-checksum`), and at the same time the same guest script natively on QEMU's bamboo
(for the expected job output). Passes when:

- the VM's job output (from the guest's banner to KESTREL-SCRIPT-DONE, timing lines aside)
  equals the native run's, and the script exited with status 0;
- the root task refused kestrel-checksum what it has no right to (a vCPU, deleting another
  program's thread, a thread above its priority ceiling, a device page, an interrupt line),
  and the kernel refused it
  `Schedule(self, 255)` (its scheduler is the root task; issue 9, finding 2);
- kestrel-checksum printed every round's CRC-32 and the final checksum as recomputed here
  (native/programs/checksum says how), each on a line of its own that starts with its
  `[kestrel-checksum] ` prefix (no line of one program broken into another's);
- some of its rounds ran while the guest's job ran (between "running /scripts/job" and
  KESTREL-SCRIPT-DONE), so the two really shared the machine;
- the root task saw both programs end, and QEMU exited by itself with status 0.

Builds nothing (scripts/build-target.sh and guests/linux/build.sh first; `just test` does).

    scripts/vm-with-native.py [--timeout SECS] [--rounds N] [--sleep-ms MS]
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "[kestrel-checksum] "
SEED = 0x12345678
WORDS = 16384  # 64 KiB buffer


class Failure(Exception):
    pass


def expected_checksums(rounds):
    """Per-round CRC-32s and the final fold, as kestrel-checksum computes them."""
    x, total, crcs = SEED, 0, []
    for _ in range(rounds):
        words = []
        for _ in range(WORDS):
            x ^= (x << 13) & 0xFFFFFFFF
            x ^= x >> 17
            x ^= (x << 5) & 0xFFFFFFFF
            words.append(x)
        crc = zlib.crc32(struct.pack(f">{WORDS}I", *words))
        crcs.append(crc)
        total = (((total << 1) | (total >> 31)) & 0xFFFFFFFF) ^ crc
    return crcs, total


def lines_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").replace("\r", "") for line in f]


def job_output(lines):
    """The guest's lines from its banner to KESTREL-SCRIPT-DONE, without timing lines and
    without Kestrel's own lines (root task, VMM, kernel, the native program)."""
    out, on = [], False
    for line in lines:
        if line.startswith("kestrel-guest: Linux "):
            on, out = True, []
        if not on:
            continue
        if line.startswith(PREFIX) or re.match(r"^(root|vmm|kestrel): ", line):
            continue
        if not line.startswith("timing:"):
            out.append(line)
        if line == "KESTREL-SCRIPT-DONE":
            return out
    return None


def check_checksum(lines, rounds):
    crcs, total = expected_checksums(rounds)
    # The rights checks come first: no vCPU right, not the owner of the root thread, no thread
    # above the ceiling (root task); not its own scheduler (kernel).
    want = [f"{PREFIX}rights: vcpu Err(Refused(NoRight)), delete root Err(Refused(NotOwner)), "
            f"thread above ceiling Err(Refused(NoRight)), schedule self 255 Err(NotScheduler)",
            f"{PREFIX}devices: page Err(Refused(NoRight)), interrupt Err(Refused(NoRight))"]
    want += [f"{PREFIX}round {i + 1}/{rounds}: crc {c:#010x}" for i, c in enumerate(crcs)]
    want.append(f"{PREFIX}checksum {total:#010x} after {rounds} rounds")
    for i, line in enumerate(lines):
        at = line.find(PREFIX.strip())
        if at > 0:
            raise Failure(f"line {i + 1} has kestrel-checksum's output inside another line: {line!r}")
    got = [line for line in lines if line.startswith(PREFIX)]
    if got != want:
        for a, b in zip(got + [""] * len(want), want):
            if a != b:
                raise Failure(f"kestrel-checksum printed {a!r} where {b!r} was expected")
        raise Failure(f"kestrel-checksum printed {len(got)} lines, {len(want)} expected")
    return total


def run(args):
    logs = os.path.join(ROOT, "target", "logs")
    os.makedirs(logs, exist_ok=True)
    native_log = os.path.join(logs, "vm-with-native-native.log")
    vm_log = os.path.join(logs, "vm-with-native-vm.log")
    # A target folder of our own: vm-linux.sh writes its archive there, so another
    # vm-linux.sh running at the same time cannot swap it under this run.
    out = os.path.join(ROOT, "target", "powerpc-440-none", "release")
    private = os.path.join(ROOT, "target", "vm-with-native")
    priv_out = os.path.join(private, "powerpc-440-none", "release")
    os.makedirs(priv_out, exist_ok=True)
    for elf in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-checksum"):
        src = os.path.join(out, elf)
        if not os.path.isfile(src):
            raise Failure(f"no {src} (build it: scripts/build-target.sh)")
        shutil.copy2(src, os.path.join(priv_out, elf))
    print(f"vm-with-native: Linux job natively and in a VM beside kestrel-checksum "
          f"(logs: {native_log}, {vm_log})", flush=True)
    native = subprocess.Popen(
        [os.path.join(ROOT, "guests/linux/run-native.sh"), "--script", "job", "--timeout", str(args.timeout),
         "--mem", "64", "--log", native_log],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, CARGO_TARGET_DIR=private)
    kargs = f"checksum.rounds={args.rounds} checksum.sleep_ms={args.sleep_ms}"
    with open(vm_log, "w") as f:
        vm = subprocess.run(
            [os.path.join(ROOT, "scripts/vm-linux.sh"), "--script", "job", "--timeout", str(args.timeout),
             "--native", "kestrel-checksum", "--kernel-args", kargs],
            stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env)
    native_status = native.wait()
    if native_status != 0:
        raise Failure(f"the native run exited with status {native_status} (log: {native_log})")
    if vm.returncode != 0:
        raise Failure(f"the Kestrel run exited with status {vm.returncode} (log: {vm_log})")

    vm_lines, native_lines = lines_of(vm_log), lines_of(native_log)
    total = check_checksum(vm_lines, args.rounds)
    want, got = job_output(native_lines), job_output(vm_lines)
    if want is None:
        raise Failure(f"the native run did not reach KESTREL-SCRIPT-DONE (log: {native_log})")
    if got is None:
        raise Failure(f"the VM did not reach KESTREL-SCRIPT-DONE (log: {vm_log})")
    if got != want:
        for a, b in zip(got + [""] * len(want), want + [""] * len(got)):
            if a != b:
                raise Failure(f"job output differs: VM {a!r}, native {b!r} (logs: {vm_log}, {native_log})")
    if "kestrel-guest: script job exited with status 0; powering off" not in vm_lines:
        raise Failure("the job script did not exit with status 0 in the VM")
    running = "kestrel-guest: running /scripts/job"
    if running not in vm_lines:
        raise Failure("the VM never said it runs /scripts/job")
    start, done = vm_lines.index(running), vm_lines.index("KESTREL-SCRIPT-DONE")
    during = sum(1 for line in vm_lines[start:done] if line.startswith(PREFIX + "round "))
    if during == 0:
        raise Failure("no kestrel-checksum round ran while the job ran: the test did not overlap them "
                      "(raise --rounds or --sleep-ms)")
    for line in ("root: kestrel-checksum exited (code 0)", "root: kestrel-vmm exited (code 0)",
                 "root: every program has ended; stopping the machine"):
        if line not in vm_lines:
            raise Failure(f"missing {line!r} in the Kestrel log")
    print(f"vm-with-native: PASS: job output identical to native ({len(want)} lines), kestrel-checksum "
          f"{total:#010x} after {args.rounds} rounds as expected ({during} rounds during the job), "
          f"no broken lines")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeout", type=int, default=600, help="wall-clock limit per QEMU run (s)")
    # About 20 s with the default pause: enough to overlap the guest's job even on a loaded
    # host, where the boot may take several times longer than on an idle one.
    p.add_argument("--rounds", type=int, default=100, help="kestrel-checksum rounds")
    p.add_argument("--sleep-ms", type=int, default=200, help="kestrel-checksum's pause after each round")
    args = p.parse_args()
    try:
        run(args)
    except Failure as e:
        print(f"vm-with-native: FAILED: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
