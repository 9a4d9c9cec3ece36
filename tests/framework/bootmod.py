"""The boot-module archive the Kestrel kernel takes through QEMU's -initrd (the format is
kestrel-abi's bootmod.rs): magic "KSTRLMOD", a big-endian count, then per module a 24-byte
NUL-padded name and the big-endian offset and size of its data; data follows, each module
4-byte aligned. The first module is the root task."""
from __future__ import annotations

import struct

from .constants import BOOTMOD_MAGIC as MAGIC
from .constants import BOOTMOD_NAME_LEN as NAME_LEN


def pack(modules: list[tuple[str, bytes]]) -> bytes:
    """(name, bytes) pairs -> archive bytes."""
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


def unpack(archive: bytes) -> list[tuple[str, bytes]]:
    """An archive read back: (name, bytes) pairs."""
    if archive[:8] != MAGIC:
        raise ValueError("not a boot-module archive (no KSTRLMOD magic)")
    (count,) = struct.unpack(">I", archive[8:12])
    mods = []
    for i in range(count):
        e = 12 + i * (NAME_LEN + 8)
        name = archive[e:e + NAME_LEN].rstrip(b"\0").decode()
        off, size = struct.unpack(">II", archive[e + NAME_LEN:e + NAME_LEN + 8])
        mods.append((name, archive[off:off + size]))
    return mods
