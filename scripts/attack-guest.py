#!/usr/bin/env python3
"""The hostile-guest attack at any length (`just soak`; `just test` runs it briefly as
tests/security/test_hostile.py): tests/framework/hostile.py says what passes and fails.

    scripts/attack-guest.py [--seed N] [--instructions N] [--progress BLOCKS] [--timeout SECS]
                            [--hang SECS] [--starve SECS] [--log FILE] [--devices [--ranks N]]

--devices: VM 0 is the device attacker of issue 18 (its own vBIC, collective, torus DMA group
and virtio NIC, DCRs 0xC00..0xDFF, floods), beside the neighbour VM and native ranks
(kestrel-fabric, kestrel-fabric-ranks) exchanging messages and allreducing N rounds
(`--ranks`, default 10) on the same fabric service; build -p kestrel-fabric-service
-p kestrel-fabric-ranks too.

Builds nothing (scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-vmm
-p kestrel-hostile). Prints the seed first and the counts last; exits 0 on a pass, 1 on a
failure, 2 on bad arguments. The console log is target/logs/attack-guest.log unless --log says
otherwise.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework import hostile, qemu  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--seed", type=int, help="random (and printed) unless given")
    ap.add_argument("--instructions", type=int, default=100_000, metavar="N",
                    help="guest instructions to run (100000)")
    ap.add_argument("--progress", type=int, default=4096, metavar="BLOCKS",
                    help="a progress line every BLOCKS blocks (4096)")
    ap.add_argument("--timeout", type=int, default=600, metavar="SECS", help="whole run (600)")
    ap.add_argument("--hang", type=int, default=120, metavar="SECS",
                    help="fail when the hostile VM prints no progress for this long (120)")
    ap.add_argument("--starve", type=int, default=60, metavar="SECS",
                    help="fail when the neighbour finishes no round for this long (60)")
    ap.add_argument("--log", type=Path, metavar="FILE")
    ap.add_argument("--devices", action="store_true", help="the device attacker (issue 18)")
    ap.add_argument("--ranks", type=int, default=10, metavar="N",
                    help="with --devices: the native ranks' rounds (10)")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 32)
    if not 0 <= args.seed < 1 << 64 or args.instructions <= 0 or args.progress <= 0:
        print("attack-guest: --seed wants 0..2^64-1, --instructions and --progress > 0",
              file=sys.stderr)
        return 2
    try:
        watch, counts = hostile.attack(args.seed, args.instructions, progress=args.progress,
                                       timeout=args.timeout, hang=args.hang, starve=args.starve,
                                       log=args.log, say=lambda m: print(m, flush=True),
                                       devices=args.devices, ranks=args.ranks)
    except qemu.LaunchError as err:
        print(f"attack-guest: error: {err}", file=sys.stderr)
        return 2
    if watch.failure is None:
        print(f"attack-guest: PASS seed {args.seed}: {counts}")
        for detail in watch.details:
            print(f"attack-guest:   {detail}")
        return 0
    for f in watch.findings:
        print(f"attack-guest:   {f}", file=sys.stderr)
    print(f"attack-guest: FAIL seed {args.seed}: {watch.failure}; {counts}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
