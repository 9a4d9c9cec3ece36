"""Host tests of scripts/fabric-echo-test.py: the expected rank lines it recomputes."""

import importlib.util
import os
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("fabric_echo_test", os.path.join(HERE, "fabric-echo-test.py"))
fe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fe)


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


if __name__ == "__main__":
    unittest.main()
