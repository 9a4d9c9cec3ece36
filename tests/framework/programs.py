"""What Kestrel's native programs print, recomputed here so that a test can check every line:
kestrel-checksum's CRC-32 rounds and kestrel-fabric-ranks' messages and allreduce."""
from __future__ import annotations

import struct
import zlib

from .constants import CHECKSUM_SEED, CHECKSUM_WORDS


def xorshift32(x: int) -> int:
    """One step of the xorshift32 generator both programs use (x << 13, >> 17, << 5)."""
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def expected_checksums(rounds: int) -> tuple[list[int], int]:
    """kestrel-checksum's per-round CRC-32s and its final fold (each round refills its buffer
    with the generator's next words; the fold rotates left by one and xors each CRC)."""
    x, total, crcs = CHECKSUM_SEED, 0, []
    for _ in range(rounds):
        words = []
        for _ in range(CHECKSUM_WORDS):
            x = xorshift32(x)
            words.append(x)
        crc = zlib.crc32(struct.pack(f">{CHECKSUM_WORDS}I", *words))
        crcs.append(crc)
        total = (((total << 1) | (total >> 31)) & 0xFFFFFFFF) ^ crc
    return crcs, total


def xorshift_bytes(seed: int, n: int) -> bytes:
    """kestrel-fabric-ranks' message: the low byte of each xorshift32 step from `seed`."""
    x, out = seed, bytearray()
    for _ in range(n):
        x = xorshift32(x)
        out.append(x & 0xFF)
    return bytes(out)


def expected_rank_lines(size: int, nbytes: int) -> list[str]:
    """The result line of every rank (without the console prefix): rank r receives rank r-1's
    message (seeded with the sender's rank + 1), and the allreduce sums (r+1), (r+1)^2 and the
    CRCs of the messages."""
    crcs = [zlib.crc32(xorshift_bytes(((r + size - 1) % size) + 1, nbytes)) for r in range(size)]
    k = size
    sums = (k * (k + 1) // 2, k * (k + 1) * (2 * k + 1) // 6, sum(crcs))
    return [f"ranks {r}/{size}: received {nbytes} bytes from rank {(r + size - 1) % size}, ok; "
            f"allreduce sum [{sums[0]}, {sums[1]}, {sums[2]:#x}], ok" for r in range(size)]
