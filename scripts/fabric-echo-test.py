#!/usr/bin/env python3
"""The fabric as a native service (docs/adr/0020-fabric-service.md), checked on the target.

Native part: the root task starts kestrel-fabric (the service), two copies of
kestrel-fabric-ranks (as kestrel-rank0 and kestrel-rank1) and kestrel-echo. Passes when

- each rank received the other's message (RANKS_BYTES bytes of a xorshift32 stream seeded
  with the sender's rank + 1) intact over the torus DMA, and the allreduce over the
  collective ALU gave [3, 5, crc0 + crc1] (recomputed here) to both;
- rank 0, as a bgnet client, learnt kestrel-echo's MAC with an ARP request broadcast over
  the collective (the reply came over the torus), had a UDP datagram echoed byte for byte
  over the torus, and ended the echo with its quit datagram;
- rank 0, playing a client that takes its memory back, attached a second endpoint (in the
  slot the echo had used), unmapped its window and sent it a message: the service survived
  the write into the vanished window, detached that endpoint and kept serving rank 0;
- the service saw every endpoint detach and exited, the root task saw every program end,
  and QEMU exited by itself with status 0.

VM part (on by default; --no-vm skips it): a Linux VM (the project's guest, bgnet
modules loaded) beside kestrel-fabric and kestrel-echo; its script `fabric-echo` pings the
echo, has UDP datagrams echoed (bytes compared in the guest) and sends the quit datagram.
The VMM attaches the VM to the service (`vmm.fabric=service`). Passes when the guest
printed FABRIC-ECHO-OK, the echo counted the guest's requests, and every program ended.

Builds nothing (scripts/build-target.sh and guests/linux/build.sh first; `just test` does).

    scripts/fabric-echo-test.py [--timeout SECS] [--no-vm]
"""

import argparse
import os
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "target", "powerpc-440-none", "release")
LOGS = os.path.join(ROOT, "target", "logs")
ECHO_IP = "10.1.0.100"
RANKS_BYTES = 1200
QUIT = b"KESTREL-ECHO-QUIT"


class Failure(Exception):
    pass


def xorshift_bytes(seed, n):
    """kestrel-fabric-ranks' message: the low byte of each xorshift32 step from `seed`."""
    x, out = seed, bytearray()
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(x & 0xFF)
    return bytes(out)


def expected_rank_lines(size=2, nbytes=RANKS_BYTES):
    """The result line of every rank (without the console prefix)."""
    crcs = [zlib.crc32(xorshift_bytes(((r + size - 1) % size) + 1, nbytes)) for r in range(size)]
    k = size
    sums = (k * (k + 1) // 2, k * (k + 1) * (2 * k + 1) // 6, sum(crcs))
    return [f"ranks {r}/{size}: received {nbytes} bytes from rank {(r + size - 1) % size}, ok; "
            f"allreduce sum [{sums[0]}, {sums[1]}, {sums[2]:#x}], ok" for r in range(size)]


def lines_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").replace("\r", "") for line in f]


def need(elfs):
    for e in elfs:
        if not os.path.isfile(os.path.join(OUT, e)):
            raise Failure(f"no {os.path.join(OUT, e)} (build it: scripts/build-target.sh)")


def check_lines(lines, want, log):
    for w in want:
        if w not in lines:
            raise Failure(f"missing {w!r} (log: {log})")


def native(timeout):
    need(["kestrel-kernel", "kestrel-root", "kestrel-fabric", "kestrel-fabric-ranks", "kestrel-echo"])
    os.makedirs(LOGS, exist_ok=True)
    log = os.path.join(LOGS, "fabric-echo-native.log")
    ranks = os.path.join(OUT, "kestrel-fabric-ranks")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "kestrel_qemu.py"), "kestrel",
           "--root", f"kestrel-root={os.path.join(OUT, 'kestrel-root')}",
           "--program", f"kestrel-fabric={os.path.join(OUT, 'kestrel-fabric')}",
           "--program", f"kestrel-rank0={ranks}",
           "--program", f"kestrel-rank1={ranks}",
           "--program", f"kestrel-echo={os.path.join(OUT, 'kestrel-echo')}",
           "--append", f"ranks.echo={ECHO_IP} ranks.bytes={RANKS_BYTES} ranks.revoke=1",
           "--timeout", str(timeout), "--log", log]
    print(f"fabric-echo: native: service, two ranks and the echo (log: {log})", flush=True)
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    lines = lines_of(log)
    if r.returncode != 0:
        raise Failure(f"the native run exited with status {r.returncode} (log: {log})")
    want = [f"[kestrel-rank{i}] {line}" for i, line in enumerate(expected_rank_lines())]
    want += [
        f"[kestrel-echo] {ECHO_IP} at 06:00:00:02:00:00 (endpoint 2, torus (2,0,0), node address 2), "
        "UDP echo on port 7",
        f"[kestrel-rank0] echo: {ECHO_IP} is at 06:00:00:02:00:00",
        f"[kestrel-rank0] echo: UDP datagram of {RANKS_BYTES} bytes echoed, ok",
        f"[kestrel-rank0] echo: quit datagram of {len(QUIT)} bytes echoed, ok",
        "[kestrel-echo] quit: answered 1 ARP requests, 0 pings, 2 UDP datagrams",
        "[kestrel-fabric] endpoint 2: its client (66.1) unmapped its window or shared page; detaching",
        "[kestrel-rank0] revoke: sent to the unmapped endpoint 2 (Ok(true)); the service detached it; "
        "endpoint 0 still served, ok",
        "[kestrel-fabric] the last endpoint detached; exiting",
        "root: kestrel-fabric exited (code 0)",
        "root: every program has ended; stopping the machine",
    ]
    check_lines(lines, want, log)
    for line in lines:
        if "WRONG" in line or "panicked" in line:
            raise Failure(f"{line!r} (log: {log})")
    print("fabric-echo: native: PASS: message exchange and allreduce between two ranks over the service, "
          "ARP (collective) + UDP echo (torus) with kestrel-echo, a client's unmapped window survived, "
          "clean exit", flush=True)


def vm(timeout):
    need(["kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-echo"])
    os.makedirs(LOGS, exist_ok=True)
    log = os.path.join(LOGS, "fabric-echo-vm.log")
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", "fabric-echo"))
    priv = os.path.join(env["CARGO_TARGET_DIR"], "powerpc-440-none", "release")
    os.makedirs(priv, exist_ok=True)
    for e in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-echo"):
        subprocess.run(["cp", "-p", os.path.join(OUT, e), os.path.join(priv, e)], check=True)
    cmd = [os.path.join(ROOT, "scripts", "vm-linux.sh"), "--script", "fabric-echo",
           "--timeout", str(timeout), "--native", "kestrel-fabric", "--native", "kestrel-echo",
           "--kernel-args", "vmm.fabric=service", "--log", log]
    print(f"fabric-echo: VM: Linux with bgnet beside kestrel-fabric and kestrel-echo (log: {log})", flush=True)
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    lines = lines_of(log)
    if r.returncode != 0:
        raise Failure(f"the VM run exited with status {r.returncode} (log: {log})")
    check_lines(lines, ["FABRIC-ECHO-OK",
                        "root: kestrel-echo exited (code 0)",
                        "root: every program has ended; stopping the machine"], log)
    quit_line = [line for line in lines if line.startswith("[kestrel-echo] quit: answered ")]
    if not quit_line or " 0 UDP datagrams" in quit_line[0]:
        raise Failure(f"kestrel-echo did not count the guest's datagrams (log: {log})")
    print(f"fabric-echo: VM: PASS: the guest reached the native echo over bgnet ({quit_line[0]})", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeout", type=int, default=300, help="wall-clock limit per QEMU run (s)")
    p.add_argument("--no-vm", action="store_true", help="only the native part")
    args = p.parse_args()
    try:
        native(args.timeout)
        if not args.no_vm:
            vm(args.timeout)
    except Failure as e:
        print(f"fabric-echo: FAILED: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
