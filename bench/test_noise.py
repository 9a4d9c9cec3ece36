"""Unit tests for bench/noise.py's parsing and statistics."""
import unittest

import noise
from framework.bench import BenchError


def console(samples, prefix="[kestrel-fwq] "):
    lines = [f"{prefix}fwq: quanta {len(samples)} work 20000"]
    for i in range(0, len(samples), 16):
        lines.append(prefix + "fwq: t " + " ".join(str(v) for v in samples[i:i + 16]))
    lines.append(prefix + "fwq: done")
    return "\n".join(lines)


class NoiseTest(unittest.TestCase):
    def test_parse_any_prefix(self):
        t = list(range(100, 140))
        for prefix in ("", "[vm0] ", "[kestrel-fwq] "):
            self.assertEqual(noise.parse("boot\n" + console(t, prefix)), (40, 20000, t))

    def test_incomplete_is_an_error(self):
        text = console([5] * 20)
        with self.assertRaises(BenchError):
            noise.parse(text.replace("fwq: done", ""))
        with self.assertRaises(BenchError):
            noise.parse("\n".join(l for l in text.splitlines() if l != "[kestrel-fwq] fwq: t 5 5 5 5"))

    def test_stats(self):
        s = noise.stats([100] * 98 + [150, 200])
        self.assertEqual((s["min"], s["median"], s["max"], s["quanta"]), (100, 100, 200, 100))
        self.assertEqual(s["p99"], 150)
        self.assertEqual(s["max_over_min"], 2.0)


if __name__ == "__main__":
    unittest.main()
