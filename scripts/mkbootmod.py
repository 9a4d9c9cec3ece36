#!/usr/bin/env python3
"""Packs boot modules into the archive the kernel takes through QEMU's -initrd.

    scripts/mkbootmod.py OUT NAME=FILE [NAME=FILE ...]

The first module is the root task. The format is defined in ukernel/abi/src/bootmod.rs:
magic "KSTRLMOD", a big-endian count, then per module a 24-byte NUL-padded name and the
big-endian offset and size of its data; data follows, each module 4-byte aligned.
"""
import struct
import sys

MAGIC = b"KSTRLMOD"
NAME_LEN = 24


def pack(modules):
    """modules: list of (name, bytes) -> archive bytes."""
    if not modules:
        raise ValueError("at least one module (the root task) is needed")
    header_len = 12 + len(modules) * (NAME_LEN + 8)
    table = b""
    data = b""
    off = header_len
    for name, blob in modules:
        raw = name.encode()
        if not raw or len(raw) >= NAME_LEN:
            raise ValueError(f"module name {name!r} must be 1..{NAME_LEN - 1} bytes")
        pad = (-off) % 4
        data += b"\0" * pad
        off += pad
        table += raw.ljust(NAME_LEN, b"\0") + struct.pack(">II", off, len(blob))
        data += blob
        off += len(blob)
    return MAGIC + struct.pack(">I", len(modules)) + table + data


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
