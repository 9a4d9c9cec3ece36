"""Unit tests for bench/table1.py: the console parsers (marks, trace-mark snapshots, the power-off
table), the per-phase arithmetic, the accounting check (passing, failing, missing GUEST_RUN), the
determinism check and the report, on canned console output."""
import copy
import json
import tempfile
import unittest
from pathlib import Path

import table1
from ipc import BenchError

BANNER = """\
Run /init as init process\r
kestrel-guest: Linux 6.1.192 ppc on amcc,bamboo\r
timing: /init started at time base {init}; uptime 0.29 s\r
kestrel-guest: running /scripts/{script}\r
"""
CLOSE = """\
KESTREL-SCRIPT-DONE\r
kestrel-guest: script {script} exited with status 0; powering off\r
reboot: Restarting system\r
"""
BOOT = "timing: uptime 0.32 s, time base {tb}\r\n"
PHASES = ("shell", "fork", "gzip")
# Phase outputs (checksums), the same in every mode.
OUTPUT = {"shell": "shell: sum 122593", "fork": "fork: 1860", "gzip": "gzip: d2148f2c  -"}


def row(name, count, avg):
    return f"vmm:   {name:<18} {count:>8}  min     1 max   900 avg {avg:>5}\n"


def table(rows, vm=None, header=True):
    """A VMM trace table: rows is [(name, count, avg)] (the format before the exact total
    column; the tests choose whole averages so that count x avg is exact)."""
    head = f"vmm: vm{vm} trace points (cost in timebase ticks)\n" if vm is not None else \
        "vmm: trace points (cost in timebase ticks)\n"
    return (head if header else "") + "".join(row(*r) for r in rows)


def job_log(marks, snaps=None, vm=None):
    """A `job` run's console: marks is [(name, tb)] ending with `end`; snaps (a VM) is one table
    (rows) per mark, printed after the mark line with a heading at the mark's time base minus
    1000; a power-off table follows the script (the last snapshot's rows)."""
    out = BANNER.format(init=100, script="job")
    for i, (name, tb) in enumerate(marks):
        out += f"kestrel-trace-mark {name}\r\n"
        if snaps is not None:
            who = f"vm{vm} " if vm is not None else ""
            out += f"vmm: {who}trace mark {name} at time base {tb - 1000}\n" + table(snaps[i], vm)
        out += f"timing: mark {name} tb {tb}\r\n"
        if name in OUTPUT:
            out += OUTPUT[name] + "\r\n"
    out += CLOSE.format(script="job")
    if snaps is not None:
        out += table(snaps[-1], vm) + "vmm: vm0: guest requested a reset; stopping it\n"
    return out


def boot_log(init, tb, trace=False):
    out = BANNER.format(init=init, script="boot") + BOOT.format(tb=tb) + CLOSE.format(script="boot")
    return out + (table([("EMUL_RFI", 5, 10)]) if trace else "")


NATIVE_MARKS = [("shell", 1000), ("fork", 3000), ("gzip", 7000), ("end", 11000)]
VM_MARKS = [("shell", 5000), ("fork", 13000), ("gzip", 29000), ("end", 37000)]
PV_MARKS = [("shell", 5000), ("fork", 9000), ("gzip", 17000), ("end", 23000)]


def snaps_for(marks, guest_run=True, skew=0):
    """Cumulative tables at each mark such that GUEST_RUN + exits = the time between snapshots
    (+ skew ticks per phase, a multiple of 100): EMUL_MTSPR takes half of each phase, GUEST_RUN
    the rest, both in pieces of 100 ticks; SYSCALL_IPC adds one exit of 2 ticks per phase.
    Classes with no count yet are not printed, as the VMM does."""
    out = []
    mtspr, run = 0, 0
    for i, (_, tb) in enumerate(marks):
        if i > 0:
            span = tb - marks[i - 1][1]
            mtspr += span // 2
            run += span - span // 2 + skew
        rows = [("EMUL_MTSPR", mtspr // 100, 100)] if mtspr else []
        if guest_run and run:
            rows.append(("GUEST_RUN", run // 100, 100))
        rows.append(("SYSCALL_IPC", 3 + i, 2))
        out.append(rows)
    return out


def a_run(guest_run=True, skew=0, native_end=11000):
    native_marks = NATIVE_MARKS[:-1] + [("end", native_end)]
    run = {"native": {"boot": table1.parse_boot(boot_log(400, 800)),
                      "job": table1.parse_job(job_log(native_marks))}}
    for mode, marks, boot in (("vm", VM_MARKS, 1600), ("vm_pv", PV_MARKS, 1200)):
        console = job_log(marks, snaps_for(marks, guest_run, skew))
        run[mode] = {"boot": table1.parse_boot(boot_log(600, boot, trace=True)), "job": table1.parse_job(console),
                     "snapshots": table1.snapshots(console), "trace_job": table1.trace_table(console)}
    return run


class ParseTest(unittest.TestCase):
    def test_marks_and_output_without_timing_and_vmm_lines(self):
        console = job_log(VM_MARKS, snaps_for(VM_MARKS))
        job = table1.parse_job(console)
        self.assertEqual(job["marks"], VM_MARKS)
        self.assertEqual(job["output"], ["kestrel-trace-mark shell", OUTPUT["shell"], "kestrel-trace-mark fork",
                                         OUTPUT["fork"], "kestrel-trace-mark gzip", OUTPUT["gzip"],
                                         "kestrel-trace-mark end"])
        self.assertEqual(job["output"], table1.parse_job(job_log(NATIVE_MARKS))["output"])

    def test_bad_marks_fail(self):
        with self.assertRaisesRegex(BenchError, "ending with 'end'"):
            table1.parse_job(job_log(NATIVE_MARKS[:-1]))
        with self.assertRaisesRegex(BenchError, "ending with 'end'"):
            table1.parse_job(job_log(NATIVE_MARKS[-1:]))
        with self.assertRaisesRegex(BenchError, "twice"):
            table1.parse_job(job_log([("a", 1), ("a", 2), ("end", 3)]))
        with self.assertRaisesRegex(BenchError, "backwards from mark fork"):
            table1.parse_job(job_log([("shell", 1), ("fork", 5), ("gzip", 5), ("end", 9)]))

    def test_unfinished_failed_or_panicked_scripts_fail(self):
        with self.assertRaisesRegex(BenchError, "did not reach"):
            table1.parse_job(job_log(NATIVE_MARKS).replace("KESTREL-SCRIPT-DONE", ""))
        with self.assertRaisesRegex(BenchError, "status 0"):
            table1.parse_boot(boot_log(1, 2).replace("status 0", "status 1"))
        with self.assertRaisesRegex(BenchError, "never started"):
            table1.parse_job(boot_log(1, 2))
        with self.assertRaisesRegex(BenchError, "panic"):
            table1.parse_boot("Kernel panic - not syncing: x\n" + boot_log(1, 2))

    def test_boot(self):
        self.assertEqual(table1.parse_boot(boot_log(131376304, 182537488)),
                         {"init_tb": 131376304, "script_tb": 182537488})


class SnapshotTest(unittest.TestCase):
    def test_snapshots_and_the_power_off_table_apart(self):
        snaps = snaps_for(VM_MARKS)
        console = job_log(VM_MARKS, snaps)
        got = table1.snapshots(console)
        self.assertEqual([(s["name"], s["tb"]) for s in got], [(n, tb - 1000) for n, tb in VM_MARKS])
        self.assertEqual(got[1]["table"]["EMUL_MTSPR"]["count"], 40)
        self.assertNotIn("EMUL_MTSPR", got[0]["table"])
        self.assertEqual(table1.row_total(got[3]["table"]["GUEST_RUN"]), 16000)
        self.assertEqual(snaps[3][1], ("GUEST_RUN", 160, 100))
        # The power-off table is the one after the script, not a snapshot (no "two tables").
        self.assertEqual(table1.trace_table(console)["SYSCALL_IPC"]["count"], 6)

    def test_old_format_without_a_total_column(self):
        console = job_log(NATIVE_MARKS, [[("EMUL_RFI", i + 1, 7)] for i in range(4)])
        got = table1.snapshots(console)
        self.assertEqual(got[2]["table"]["EMUL_RFI"], {"count": 3, "min": 1, "max": 900, "avg": 7})
        self.assertEqual(table1.row_total(got[2]["table"]["EMUL_RFI"]), 21)

    def test_exact_total_format(self):
        # The VMM's format since ADR 0023: count, exact total ticks, avg (rounded down).
        def exact(rows):
            return "vmm: trace points (cost in timebase ticks)\n" + "".join(
                f"vmm:   {n:<18} {c:>8}  total {t:>12} avg {t // c:>5}\n" for n, c, t in rows)
        text = (BANNER.format(init=1, script="job")
                + "kestrel-trace-mark shell\nvmm: trace mark shell at time base 1000\n"
                + exact([("EMUL_MTSPR", 3, 100), ("GUEST_RUN", 2, 401)])
                + "timing: mark shell tb 1100\nkestrel-trace-mark end\nvmm: trace mark end at time base 31000\n"
                + exact([("EMUL_MTSPR", 7, 10101), ("GUEST_RUN", 9, 20400), ("HOST_TICK", 1, 499)])
                + "timing: mark end tb 31100\n" + CLOSE.format(script="job")
                + exact([("EMUL_MTSPR", 7, 10200), ("GUEST_RUN", 10, 20500), ("HOST_TICK", 1, 499)]))
        snaps = table1.snapshots(text)
        self.assertEqual(snaps[1]["table"]["EMUL_MTSPR"]["total"], 10101)
        self.assertEqual(table1.delta(snaps[1]["table"], snaps[0]["table"])["EMUL_MTSPR"],
                         {"count": 4, "total_ticks": 10001})
        self.assertEqual(table1.trace_table(text)["GUEST_RUN"]["total"], 20500)
        acc = table1.accounting(snaps, native_job=table1.instructions(19000))
        # GUEST_RUN 19999 + exits 10001 + 499 = 30499 of a window of 30000 ticks.
        self.assertEqual(acc["guest_run_instructions"], table1.instructions(19999))
        self.assertEqual(acc["exit_instructions"], table1.instructions(10500))
        self.assertAlmostEqual(acc["accounting_error"], 499 / 30000, places=6)
        self.assertAlmostEqual(acc["accounting_error_vs_native"], 500 / 30000, places=6)
        self.assertEqual(acc["guest_extra_instructions"], table1.instructions(999))
        self.assertEqual(table1.parse_job(text)["marks"], [("shell", 1100), ("end", 31100)])

    def test_a_vm_named_in_the_heading(self):
        console = job_log(NATIVE_MARKS, [[("EMUL_RFI", i + 1, 7)] for i in range(4)], vm=1)
        self.assertEqual(table1.snapshots(console, 0), [])
        self.assertEqual([s["name"] for s in table1.snapshots(console, 1)], ["shell", "fork", "gzip", "end"])

    def test_an_empty_table_and_a_heading_without_table(self):
        text = "vmm: trace mark shell at time base 5\nvmm: trace points (cost in timebase ticks)\nguest line\n"
        self.assertEqual(table1.snapshots(text), [{"name": "shell", "tb": 5, "table": {}}])
        self.assertEqual(table1.split_snapshots(text)[1], "guest line\n")
        with self.assertRaisesRegex(BenchError, "no trace table after its heading"):
            table1.snapshots("vmm: trace mark shell at time base 5\nguest line\n")

    def test_delta(self):
        earlier = {"A": {"count": 2, "avg": 10}, "B": {"count": 1, "avg": 3, "total": 3}}
        later = {"A": {"count": 5, "avg": 11}, "B": {"count": 4, "avg": 3, "total": 14}, "C": {"count": 1, "avg": 9}}
        self.assertEqual(table1.delta(later, earlier), {"A": {"count": 3, "total_ticks": 35},
                                                        "B": {"count": 3, "total_ticks": 11},
                                                        "C": {"count": 1, "total_ticks": 9}})
        with self.assertRaisesRegex(BenchError, "vanished"):
            table1.delta({"A": later["A"]}, earlier)
        with self.assertRaisesRegex(BenchError, "count went down"):
            table1.delta({"A": {"count": 1, "avg": 10}}, {"A": earlier["A"]})

    def test_job_only_keeps_its_meaning(self):
        only = table1.job_only({"A": {"count": 5, "avg": 4}}, {"A": {"count": 2, "avg": 3}})
        self.assertEqual(only, {"A": {"count": 3, "total_ticks": 14}})


class AccountingTest(unittest.TestCase):
    def test_exact_accounting_passes(self):
        snaps = table1.snapshots(job_log(VM_MARKS, snaps_for(VM_MARKS)))
        acc = table1.accounting(snaps, native_job=table1.instructions(10000))
        self.assertEqual(acc["vm_total_instructions"], table1.instructions(32000))
        # GUEST_RUN + exits cover the snapshot window exactly; SYSCALL_IPC adds 3 x 2 ticks.
        self.assertEqual(acc["exit_instructions"], table1.instructions(16000 + 6))
        self.assertEqual(acc["guest_run_instructions"], table1.instructions(16000))
        self.assertAlmostEqual(acc["accounting_error"], 6 / 32000, places=6)
        self.assertAlmostEqual(acc["accounting_error_vs_native"], abs(10000 + 16006 - 32000) / 32000, places=6)
        self.assertEqual(acc["guest_extra_instructions"], table1.instructions(16000 - 10000))

    def test_missing_guest_run_is_reported_not_failed(self):
        s = table1.summarize([a_run(guest_run=False)], "q", "c")
        self.assertIsNone(s["accounting_error"])
        self.assertIsNone(s["accounting"]["vm"]["accounting_error"])
        self.assertIn("missing", table1.report(s))

    def test_check_passes_within_five_percent(self):
        # vm: the native job's 15994 ticks + exits 16006 = the window of 32000; vm_pv's window is
        # 18000 with 9006 of exits, far from the native job.
        s = table1.summarize([a_run(native_end=1000 + 15994)], "q", "c")
        self.assertLess(s["accounting"]["vm"]["accounting_error_vs_native"], 0.001)
        self.assertLess(s["accounting_error"], 0.001)
        pv = s["accounting"]["vm_pv"]
        self.assertGreater(pv["accounting_error_vs_native"], 0.05)
        self.assertEqual(table1.check_accounting(s), [
            f"vm_pv accounting_error_vs_native {100 * pv['accounting_error_vs_native']:.2f}% > 5%"])

    def test_check_fails_on_guest_run_off_by_more_than_five_percent(self):
        # 3 phases x 600 ticks of GUEST_RUN too many in a window of 32000: 5.6%.
        s = table1.summarize([a_run(skew=600)], "q", "c")
        self.assertAlmostEqual(s["accounting"]["vm"]["accounting_error"], (1800 + 6) / 32000, places=5)
        failed = table1.check_accounting(s)
        self.assertTrue(any(f.startswith("vm accounting_error 5.64%") for f in failed), failed)
        s = table1.summarize([a_run(skew=500)], "q", "c")
        self.assertFalse(any(f.startswith("vm accounting_error ") for f in table1.check_accounting(s)))


class SummaryTest(unittest.TestCase):
    def test_figures(self):
        s = table1.summarize([a_run()], "QEMU emulator version 7.2.22", "abc")
        self.assertEqual(s["job_instructions_native"], table1.instructions(10000))
        self.assertEqual(s["job_instructions_vm"], table1.instructions(32000))
        self.assertEqual(s["job_instructions_vm_pv"], table1.instructions(18000))
        self.assertEqual((s["job_ratio"], s["job_ratio_pv"]), (3.2, 1.8))
        self.assertEqual((s["boot_ratio"], s["boot_ratio_pv"]), (2.0, 1.5))
        self.assertEqual([p["name"] for p in s["phases"]], list(PHASES))
        fork = s["phases"][1]
        self.assertEqual((fork["native"], fork["vm"], fork["vm_pv"]), (10000, 40000, 20000))
        self.assertEqual((fork["ratio"], fork["ratio_pv"]), (4.0, 2.0))
        top = fork["top_exits"]["vm"]
        self.assertEqual([t["name"] for t in top], ["EMUL_MTSPR", "SYSCALL_IPC"])
        self.assertEqual((top[0]["count"], top[0]["total_instructions"]), (80, table1.instructions(8000)))
        self.assertEqual(top[0]["avg_instructions"], 250.0)
        self.assertAlmostEqual(sum(t["share"] for t in top), 1.0, places=3)
        self.assertEqual(fork["exit_instructions"]["vm"], table1.instructions(8002))
        self.assertEqual(s["modes"]["vm"]["exits_job"]["EMUL_MTSPR"], 160)
        self.assertEqual(s["modes"]["vm"]["exits_job"]["SYSCALL_IPC"], 3)
        self.assertEqual(s["modes"]["vm"]["exits_whole_run"]["SYSCALL_IPC"], 6)
        self.assertEqual(s["modes"]["vm"]["top_exit_classes_job"][0]["name"], "EMUL_MTSPR")
        self.assertEqual((s["qemu"], s["commit"]), ("QEMU emulator version 7.2.22", "abc"))
        json.dumps(s)

    def test_job_output_must_match(self):
        run = a_run()
        run["vm_pv"]["job"]["output"][1] = "shell: sum 0"
        with self.assertRaisesRegex(BenchError, "output differs natively and in vm_pv"):
            table1.summarize([run], "q", "c")

    def test_a_snapshot_per_mark(self):
        run = a_run()
        run["vm"]["snapshots"] = []
        with self.assertRaisesRegex(BenchError, "trace_marks=on"):
            table1.summarize([run], "q", "c")

    def test_report(self):
        text = table1.report(table1.summarize([a_run()], "q", "c"))
        rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
        self.assertIn("| 3.20x | <= 3x: no | 45,000 | 1.80x | <= 1.5x: no |", rows["**job** (first mark to `end`)"])
        self.assertIn("| 4.00x | <= 4x: yes | 20,000 | 2.00x | <= 2x: yes |", rows["phase `fork`"])
        self.assertIn("42.00x", rows["paper (Stoess et al., seconds)"])
        self.assertIn("0.02%", rows["VM, full virtualization"])
        # The paravirtual table comes last (the same phase names in both).
        self.assertIn("EMUL_MTSPR 40 x 250 = 10,000 (100%); SYSCALL_IPC 1 x 5 = 5 (0%)", rows["fork"])
        self.assertIn("# Table 1 analogue", text)

    @unittest.skipUnless(table1.DEBIAN_PYTHON.exists(), "no Debian python3 for matplotlib")
    def test_plot(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "table1.png"
            why = table1.plot(table1.summarize([a_run()], "q", "c"), out)
            if why and "matplotlib not available" in why:
                self.skipTest(why)
            self.assertIsNone(why)
            self.assertEqual(out.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


class DeterminismTest(unittest.TestCase):
    def test_identical_runs_pass(self):
        table1.check_deterministic([a_run(), a_run()])

    def test_a_differing_mark_is_named(self):
        other = a_run(native_end=11001)
        with self.assertRaisesRegex(BenchError, r"native\.job\.mark\.end: run 1 11000, run 2 11001"):
            table1.check_deterministic([a_run(), other])

    def test_a_differing_snapshot_count_is_named(self):
        other = copy.deepcopy(a_run())
        other["vm_pv"]["snapshots"][2]["table"]["SYSCALL_IPC"]["count"] = 99
        with self.assertRaisesRegex(BenchError, r"vm_pv\.snapshot\.gzip\.SYSCALL_IPC\.count: run 1 5, run 2 99"):
            table1.check_deterministic([a_run(), other])


if __name__ == "__main__":
    unittest.main()
