"""`Machine`: one QEMU run that a test owns (the `machine` fixture makes them).

Either run to the end (`run`: status and console text) or started with a console to type into
(`start`: a `console.Console`); `kill` stops whatever still runs, QEMU and its `timeout`
wrapper together (they run in a session of their own)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from . import qemu
from .console import Console


class Machine:
    def __init__(self, node: qemu.Node, log: Path):
        self.node = node
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.console: Console | None = None

    def run(self, timeout: int) -> tuple[int, str]:
        """Runs QEMU without a keyboard to the end or `timeout` seconds (status 124):
        (status, console text); the console is in self.log."""
        return qemu.run_captured(self.node, timeout=timeout, log=self.log)

    def start(self, timeout: int, echo: bool = False) -> Console:
        """Starts QEMU with its console on a pipe we write to (the node's console should be
        `interactive` for the guest to read it); QEMU is stopped after `timeout` seconds."""
        cmd = ["timeout", "--kill-after=5", str(timeout), *self.node.command()]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.console = Console(self.proc, self.log, echo=echo)
        return self.console

    def wait(self, deadline: float) -> int:
        """QEMU's exit status once it exits by itself before `deadline` (time.monotonic())."""
        assert self.proc is not None
        status = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        if self.console is not None:
            self.console.join()
        return status

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
