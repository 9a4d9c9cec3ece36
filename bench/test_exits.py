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

    def test_targets(self):
        self.assertEqual(exits.target("mfmsr"), 80)
        self.assertEqual(exits.target("mtspr_pid"), 80)
        self.assertEqual(exits.target("tlbwe"), 150)
        self.assertIsNone(exits.target("tlbre"))
        summary = {"in_kernel": {n: 100.0 for n in exits.IN_KERNEL}, "vmm_roundtrip_instructions": 500.0,
                   "native": {n: 1.0 for n in NAMES}, "vm": {n: 100.0 for n in NAMES}}
        rows = {line.split()[0]: line.split()[-2:] for line in exits.table(summary).splitlines()[2:]}
        self.assertEqual(rows["mfmsr"], ["80", "no"])
        self.assertEqual(rows["tlbwe"], ["150", "yes"])
        self.assertEqual(rows["tlbre"], ["-", "-"])
        self.assertEqual(rows["vmm_roundtrip"], ["600", "yes"])


if __name__ == "__main__":
    unittest.main()
