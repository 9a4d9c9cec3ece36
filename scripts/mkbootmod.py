#!/usr/bin/env python3
"""Packs boot modules into the archive the kernel takes through QEMU's -initrd.

    scripts/mkbootmod.py OUT NAME=FILE [NAME=FILE ...]

The first module is the root task. The format is kestrel-abi's bootmod.rs; the packing is
tests/framework/bootmod.py's `pack()`, which the QEMU launcher uses too.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from framework.bootmod import pack  # noqa: E402


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    mods = []
    for arg in argv[2:]:
        name, sep, path = arg.partition("=")
        if not sep:
            sys.exit(f"mkbootmod: expected NAME=FILE, got {arg!r}")
        with open(path, "rb") as f:
            mods.append((name, f.read()))
    with open(argv[1], "wb") as f:
        f.write(pack(mods))


if __name__ == "__main__":
    main(sys.argv)
