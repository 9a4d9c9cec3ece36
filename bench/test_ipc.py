"""Unit tests for bench/ipc.py's parsing and checks; run `python3 -m unittest` in bench/."""

import json
import unittest

import ipc

GOOD = """\
kestrel: boot\r
ipcbench: warming up\r
BENCH ipc name=inter iterations=1000 instructions=231500 roundtrip_instructions=231.5\r
BENCH ipc name=intra iterations=1000 instructions=180000 roundtrip_instructions=180.0\r
kestrel: shutdown (code 0)\r
"""


class ParseTest(unittest.TestCase):
    def test_parses_both_variants_and_ignores_other_lines(self):
        got = ipc.parse_bench_lines(GOOD)
        self.assertEqual(
            got,
            {
                "inter": {
                    "iterations": 1000,
                    "instructions": 231500,
                    "roundtrip_instructions": 231.5,
                },
                "intra": {
                    "iterations": 1000,
                    "instructions": 180000,
                    "roundtrip_instructions": 180.0,
                },
            },
        )

    def test_integer_roundtrip_is_accepted(self):
        text = GOOD.replace("roundtrip_instructions=180.0", "roundtrip_instructions=180")
        self.assertEqual(ipc.parse_bench_lines(text)["intra"]["roundtrip_instructions"], 180.0)

    def test_missing_variant_fails(self):
        text = "\n".join(l for l in GOOD.splitlines() if "name=intra" not in l)
        with self.assertRaisesRegex(ipc.BenchError, "no BENCH line for intra"):
            ipc.parse_bench_lines(text)

    def test_malformed_line_fails(self):
        text = GOOD.replace("instructions=180000 ", "")
        with self.assertRaisesRegex(ipc.BenchError, "malformed"):
            ipc.parse_bench_lines(text)

    def test_repeated_variant_fails(self):
        line = GOOD.splitlines()[2]
        with self.assertRaisesRegex(ipc.BenchError, "twice"):
            ipc.parse_bench_lines(GOOD + line + "\n")

    def test_unknown_variant_fails(self):
        text = GOOD.replace("name=intra", "name=cross")
        with self.assertRaisesRegex(ipc.BenchError, "unknown variant"):
            ipc.parse_bench_lines(text)

    def test_zero_iterations_fails(self):
        text = GOOD.replace("iterations=1000 instructions=231500", "iterations=0 instructions=0")
        with self.assertRaisesRegex(ipc.BenchError, "zero iterations"):
            ipc.parse_bench_lines(text)

    def test_kernel_panic_fails(self):
        with self.assertRaisesRegex(ipc.BenchError, "kernel panic"):
            ipc.parse_bench_lines("BENCH ipc name=inter\nKERNEL PANIC at ipc.rs:1\n")


class DeterminismTest(unittest.TestCase):
    def test_identical_runs_pass(self):
        run = ipc.parse_bench_lines(GOOD)
        ipc.check_deterministic([run, ipc.parse_bench_lines(GOOD)])

    def test_differing_runs_fail_and_name_the_figure(self):
        a = ipc.parse_bench_lines(GOOD)
        b = ipc.parse_bench_lines(GOOD.replace("231500", "231600").replace("231.5", "231.6"))
        with self.assertRaisesRegex(ipc.BenchError, r"inter\.instructions: run 1 231500, run 2 231600"):
            ipc.check_deterministic([a, b])


class SummaryTest(unittest.TestCase):
    def test_summary_keys_and_table(self):
        run = ipc.parse_bench_lines(GOOD)
        summary = ipc.summarize([run, run], "QEMU emulator version 7.2.0")
        self.assertEqual(summary["roundtrip_instructions_inter"], 231.5)
        self.assertEqual(summary["roundtrip_instructions_intra"], 180.0)
        self.assertEqual(summary["iterations"], 1000)
        self.assertEqual(summary["target"], 250)
        self.assertEqual(len(summary["runs"]), 2)
        self.assertIn("-icount", summary["method"])
        json.dumps(summary)  # serializable as is

        table = ipc.format_table(summary).splitlines()
        self.assertEqual(table[0].split()[0], "variant")
        self.assertEqual(table[2].split(), ["inter", "231.5", "<=", "250", "yes"])
        self.assertEqual(table[3].split(), ["intra", "180.0", "<=", "250", "yes"])

    def test_target_missed_is_reported_not_raised(self):
        run = ipc.parse_bench_lines(GOOD.replace("roundtrip_instructions=231.5", "roundtrip_instructions=300.2"))
        table = ipc.format_table(ipc.summarize([run, run], "q"))
        self.assertIn("no", table.splitlines()[2].split())

    def test_differing_iterations_are_kept_per_variant(self):
        run = ipc.parse_bench_lines(GOOD.replace("iterations=1000 instructions=180000", "iterations=500 instructions=90000"))
        self.assertEqual(ipc.summarize([run, run], "q")["iterations"], {"inter": 1000, "intra": 500})


if __name__ == "__main__":
    unittest.main()
