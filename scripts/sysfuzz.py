#!/usr/bin/env python3
"""The native system-call fuzzer at any length (`just soak`; `just test` runs it briefly as
tests/security/test_syscall_fuzzer.py): tests/framework/sysfuzz.py says what passes and fails.

    scripts/sysfuzz.py [--seed N|random] [--calls N] [--mode unpriv|priv|both] [--timeout S] [--stall S]
                       [--kinds ipc,exreg,...] [--trace A-B]

Builds nothing (scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-sysfuzz).
Prints the seed and the counts; exits 1 on a failure.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework import qemu, sysfuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", default="1",
                   help="the fuzzer's seed, or 'random' for a fresh one (printed; default 1)")
    p.add_argument("--calls", type=int, default=5000, help="system calls to make (default 5000)")
    p.add_argument("--mode", choices=("unpriv", "priv", "both"), default="both")
    p.add_argument("--timeout", type=int, default=600, help="wall-clock limit per run (s)")
    p.add_argument("--stall", type=int, default=60, help="longest time without console output (s)")
    p.add_argument("--report-ms", type=int, default=1000, help="the fuzzer's progress period (ms)")
    p.add_argument("--kinds", default="", help="only these kinds of call (to minimise a finding)")
    p.add_argument("--trace", default="", help="A-B: the fuzzer prints calls A to B and their results")
    args = p.parse_args(argv)
    if args.seed == "random":
        args.seed = random.randrange(1, 1 << 31)
    else:
        try:
            args.seed = int(args.seed, 0)
        except ValueError:
            p.error(f"--seed wants a number or 'random', not {args.seed!r}")
    modes = ("unpriv", "priv") if args.mode == "both" else (args.mode,)
    try:
        for mode in modes:
            sysfuzz.fuzz(args.seed, args.calls, mode, timeout=args.timeout, stall=args.stall,
                         report_ms=args.report_ms, kinds=args.kinds, trace=args.trace,
                         say=lambda m: print(m, flush=True))
    except (sysfuzz.Failure, qemu.LaunchError) as err:
        print(f"sysfuzz: FAILED: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
