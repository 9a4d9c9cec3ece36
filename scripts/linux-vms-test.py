#!/usr/bin/env python3
"""Two Linux VMs at once, driven through the console like a user would.

Boots two VMs (`scripts/vm-linux.sh --vms 2`, interactive), waits until both show the
busybox shell prompt, runs a command in VM 0 and pings VM 1 over the virtio NIC and over
bgnet (the addresses /init gives them), moves the keyboard to VM 1 (Ctrl-] 1) and
runs one there, then powers VM 1 off and checks VM 0 still answers before powering it off
too. Passes when every step's output appears in the right VM's prefixed lines and QEMU
exits by itself with status 0. Builds nothing (run scripts/build-target.sh and
guests/linux/build.sh first; `just test` does).

    scripts/linux-vms-test.py [--timeout SECS]
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOCUS = b"\x1d"  # Ctrl-]: kestrel-vmm's console focus escape


class Console:
    """The QEMU process's console output, collected by a reader thread."""

    def __init__(self, proc):
        self.proc = proc
        self.text = ""
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            chunk = self.proc.stdout.read1(4096)
            if not chunk:
                return
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
            with self.lock:
                self.text += chunk.decode("utf-8", "replace")

    def wait_for(self, pattern, deadline, start=0):
        """Index just past the first match of `pattern` at or after `start`."""
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            with self.lock:
                m = rx.search(self.text, start)
            if m:
                return m.end()
            if self.proc.poll() is not None:
                time.sleep(0.5)
                with self.lock:
                    m = rx.search(self.text, start)
                if m:
                    return m.end()
                raise Failure(f"QEMU exited ({self.proc.returncode}) before {pattern!r} appeared")
            time.sleep(0.2)
        raise Failure(f"timed out waiting for {pattern!r}")

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()


class Failure(Exception):
    pass


def run(timeout):
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        [os.path.join(ROOT, "scripts/vm-linux.sh"), "--vms", "2", "--timeout", str(timeout)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    con = Console(proc)
    try:
        prompt = r"\[vm{}\] [^\n]*kestrel:/# "
        pos0 = con.wait_for(prompt.format(0), deadline)
        pos1 = con.wait_for(prompt.format(1), deadline)
        pos = max(pos0, pos1)
        steps = [
            (b"echo vm-a-$((6*7))\n", r"\[vm0\] vm-a-42\r?\n"),
            # /init gave each VM's NICs addresses (virtio 10.1.0.k+1, bgnet 10.2.0.k+1): a user
            # can reach the other VM by hand over either.
            (b"ping -c 2 10.1.0.2\n", r"\[vm0\] 2 packets transmitted, 2 packets received"),
            (b"ping -c 2 10.2.0.2\n", r"\[vm0\] 2 packets transmitted, 2 packets received"),
            (FOCUS + b"1", r"console input now goes to vm1"),
            (b"echo vm-b-$((7*7))\n", r"\[vm1\] vm-b-49\r?\n"),
            (b"reboot -f\n", r"vmm: vm1: guest requested a reset"),
            (FOCUS + b"0", r"console input now goes to vm0"),
            (b"echo vm-a-still-$((2*3))\n", r"\[vm0\] vm-a-still-6\r?\n"),
            (b"reboot -f\n", r"vmm: every VM has stopped"),
        ]
        for data, expect in steps:
            # A short pause lets the guest's line editor settle after the previous output.
            time.sleep(0.5)
            con.send(data)
            pos = con.wait_for(expect, deadline, pos)
        rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
        if rc != 0:
            raise Failure(f"QEMU exited with status {rc}")
    except (Failure, subprocess.TimeoutExpired) as e:
        proc.kill()
        proc.wait()
        print(f"\nlinux-vms: FAIL: {e}")
        return 1
    print("\nlinux-vms: PASS: two Linux VMs reached the shell, VM 0 pinged VM 1 over virtio "
          "and bgnet, the VMs took console input in turn, and VM 0 kept running after VM 1 "
          "powered off")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=int, default=300, help="wall-clock limit in seconds")
    sys.exit(run(ap.parse_args().timeout))


if __name__ == "__main__":
    main()
