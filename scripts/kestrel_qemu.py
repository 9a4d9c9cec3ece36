#!/usr/bin/env python3
"""Kestrel's QEMU launcher, the command line (`--help`): the launcher itself is
tests/framework/qemu.py, which the tests and benchmarks import; this file only runs it for
people and the shell wrappers (qemu-run.sh, vm-run.sh, native-run.sh, vm-linux.sh,
guests/linux/run-native.sh)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework.qemu import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
