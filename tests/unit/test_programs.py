"""Host tests of framework/programs.py: the native programs' output as the tests recompute it."""

import unittest
import zlib

from framework import programs as fe


class ExpectedLines(unittest.TestCase):
    def test_xorshift_matches_the_ranks_program(self):
        # kestrel-fabric-ranks' stream: x ^= x << 13; x ^= x >> 17; x ^= x << 5 (32 bits),
        # one byte (the low one) per step. By hand: 1 -> 0x2001 -> 0x2001 -> 0x42021.
        b = fe.xorshift_bytes(1, 4)
        self.assertEqual(b[0], 0x21)
        self.assertEqual(len(b), 4)

    def test_rank_lines_as_seen_on_target(self):
        # The two lines kestrel-fabric-ranks printed for 1200-byte messages on target.
        lines = fe.expected_rank_lines(2, 1200)
        self.assertEqual(lines[0], "ranks 0/2: received 1200 bytes from rank 1, ok; "
                                   "allreduce sum [3, 5, 0x1295cbe4a], ok")
        self.assertEqual(lines[1].split(";")[1], lines[0].split(";")[1])

    def test_three_ranks_sum(self):
        lines = fe.expected_rank_lines(3, 10)
        crc = sum(zlib.crc32(fe.xorshift_bytes(s, 10)) for s in (1, 2, 3))
        self.assertIn(f"[6, 14, {crc:#x}]", lines[2])


class Checksum(unittest.TestCase):
    def test_one_round_folds_to_its_crc(self):
        crcs, total = fe.expected_checksums(1)
        self.assertEqual(total, crcs[0])

    def test_fold_rotates(self):
        crcs, total = fe.expected_checksums(2)
        self.assertEqual(total, (((crcs[0] << 1) | (crcs[0] >> 31)) & 0xFFFFFFFF) ^ crcs[1])


if __name__ == "__main__":
    unittest.main()
