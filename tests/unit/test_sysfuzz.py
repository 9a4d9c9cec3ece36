"""Unit tests of framework/sysfuzz.py's verdict: which console logs pass and why others fail."""
import unittest

from framework import sysfuzz

CAP = "threads=121 spaces=61 vcpus=0 map_pages=161637"


def good_log(mode="unpriv", seed=7, calls=5000):
    return [
        "root: started kestrel-sibling (thread 65.1, 1124 KiB image)",
        "root: started kestrel-sysfuzz (thread 66.1, 1160 KiB image)",
        f"sysfuzz: start seed={seed} calls={calls} mode={mode} sibling=65.1 numbers=121",
        f"sysfuzz: capacity before {CAP}",
        f"sysfuzz: progress calls=1000/{calls} sibling=100 violations=0 rescues=1 ms=1000",
        # Console noise from the fuzzer's own KDebug calls may precede a line.
        f"..]sysfuzz: progress calls=3000/{calls} sibling=250 violations=0 rescues=2 ms=2000",
        "sysfuzz: table Ipc 1287: ok=183 Timeout=442",
        f"sysfuzz: capacity after {CAP}",
        "[kestrel-sibling] sibling: 600 rounds, 0 corrupt",
        "root: kestrel-sibling exited (code 0)",
        f"sysfuzz: summary seed={seed} mode={mode} calls={calls} ms=2982 violations=0 rescues=3 "
        f"starved=0 sibling=590 corrupt=0 leaks=0 before=[{CAP}] after=[{CAP}] granted_pages=87 "
        "lost_pages=19 result=PASS",
        "root: kestrel-sysfuzz exited (code 0)",
        "root: every program has ended; stopping the machine",
        "kestrel: shutdown (code 0)",
    ]


class Verdict(unittest.TestCase):
    def check(self, lines, status=0, mode="unpriv", seed=7, calls=5000):
        return sysfuzz.check(lines, status, calls, mode, seed)

    def fails(self, lines, words, **kw):
        with self.assertRaises(sysfuzz.Failure) as ctx:
            self.check(lines, **kw)
        self.assertIn(words, str(ctx.exception))

    def test_good_run_passes_with_its_counts(self):
        fields = self.check(good_log())
        self.assertEqual(fields["calls"], "5000")
        self.assertEqual(fields["before"], f"[{CAP}]")
        self.assertEqual(fields["sibling"], "590")

    def test_kernel_panic(self):
        self.fails(good_log()[:5] + ["KERNEL PANIC: data storage (vector 3)"], "kernel panic")

    def test_root_task_died(self):
        log = good_log()
        log.insert(4, "kestrel: the root task is gone; stopping the machine")
        self.fails(log, "root task died")

    def test_early_end_has_no_summary(self):
        self.fails(good_log()[:6], "no summary line")

    def test_violation(self):
        log = good_log()
        log.insert(5, "sysfuzz: VIOLATION 1 at call 9: a privileged call from a program was not refused")
        self.fails(log, "oracle violation")

    def test_leak(self):
        log = good_log()
        log.insert(8, "sysfuzz: LEAK spaces: 61 before, 60 after (tolerance 0)")
        self.fails(log, "leak")

    def test_starved_by_the_fuzzers_check(self):
        log = good_log()
        log.insert(6, "sysfuzz: STARVED the sibling made no progress in 1001 ms (count 100)")
        self.fails(log, "starved")

    def test_starved_between_progress_lines(self):
        log = good_log()
        log[5] = "sysfuzz: progress calls=3000/5000 sibling=100 violations=0 rescues=2 ms=2000"
        self.fails(log, "no progress between two reports")

    def test_too_few_calls(self):
        self.fails(good_log(calls=4000), "4000 calls", calls=5000)

    def test_wrong_seed_or_mode(self):
        self.fails(good_log(seed=8), "seed 8", seed=7)
        self.fails(good_log(mode="unpriv"), "mode unpriv", mode="priv")

    def test_corrupt_sibling(self):
        log = [line.replace("corrupt=0", "corrupt=3") for line in good_log()]
        self.fails(log, "memory change")

    def test_fuzzer_verdict_and_exit_codes(self):
        log = [line.replace("result=PASS", "result=FAIL") for line in good_log()]
        self.fails(log, "verdict")
        log = [line.replace("kestrel-sysfuzz exited (code 0)", "kestrel-sysfuzz exited (code 1)")
               for line in good_log()]
        self.fails(log, "did not end in order")

    def test_qemu_status(self):
        self.fails(good_log(), "status 1", status=1)

    def test_summary_fields(self):
        fields = sysfuzz.summary(["x sysfuzz: summary a=1 before=[b=2 c=3] result=PASS"])
        self.assertEqual(fields, {"a": "1", "before": "[b=2 c=3]", "result": "PASS"})
        self.assertIsNone(sysfuzz.summary(["nothing here"]))


if __name__ == "__main__":
    unittest.main()
