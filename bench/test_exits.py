"""Unit tests for bench/exits.py's parsing and arithmetic."""
import unittest

import exits
from ipc import BenchError


def console(values):
    return "\n".join(f"BENCH exits name={n} per_exit={v}" for n, v in values.items())


NAMES = exits.IN_KERNEL + ("vmm_roundtrip",)


class ExitsTest(unittest.TestCase):
    def test_parse_all(self):
        vals = {n: float(i) + 0.5 for i, n in enumerate(NAMES)}
        self.assertEqual(exits.parse("noise\n" + console(vals) + "\nmore"), vals)

    def test_parse_missing(self):
        vals = {n: 1.0 for n in NAMES if n != "rfi"}
        with self.assertRaises(BenchError):
            exits.parse(console(vals))

    def test_costs(self):
        native = {n: 1.0 for n in NAMES}
        native["rfi"] = 6.0
        vm = {n: 101.0 for n in NAMES}
        vm["mtmsr"] = 301.0  # loop has mfmsr (100) and mtmsr (200)
        vm["rfi"] = 306.0
        c = exits.exit_costs(native, vm)
        self.assertEqual(c["mfmsr"], 101.0)
        self.assertEqual(c["mtmsr"], 201.0)
        self.assertEqual(c["rfi"], 301.0)


if __name__ == "__main__":
    unittest.main()
