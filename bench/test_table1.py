"""Unit tests for bench/table1.py's parsers and report, on canned console output."""
import copy
import json
import unittest

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
JOB = """\
      9 56\r
job: 120 outputs, 27038 lines\r
8d4a206a00df  -\r
timing: job time base start {start} end {end}\r
"""
TRACE = """\
vmm: trace points (cost in timebase ticks)
vmm:   SYSCALL_IPC           {ipc}  min     0 max    564 avg     4
vmm:   ITLB_MISS            244367  min    24 max   1048 avg   711
vmm:   EMUL_TLBWE           {tlbwe}  min   507 max   1760 avg  1362
vmm:   EMUL_MFSPR          1810163  min    27 max    637 avg    91
vmm:   GUEST_IDLE              254  min   584 max    585 avg   584
vmm: guest requested a reset; stopping
kestrel: shutdown (code 0)
"""


def boot_log(init=131376304, tb=182537488):
    return BANNER.format(init=init, script="boot") + BOOT.format(tb=tb) + CLOSE.format(script="boot")


def job_log(init=131376304, start=179462142, end=3205298820):
    return BANNER.format(init=init, script="job") + JOB.format(start=start, end=end) + CLOSE.format(script="job")


def vm_log(guest, ipc=13307, tlbwe=626621):
    return "vmm: OS guest: entry 0x0\n" + guest + TRACE.format(ipc=ipc, tlbwe=tlbwe)


def prefixed(text, vm):
    return "".join(f"[vm{vm}] {line}\n" for line in text.splitlines())


def a_run(native_job_end=459365649, vm_job_end=3205298820):
    return {
        "native": {"boot": table1.parse_boot(boot_log(55382156, 58896534)),
                   "job": table1.parse_job(job_log(55382156, 58734145, native_job_end))},
        "vm": {"boot": table1.parse_boot(boot_log()), "job": table1.parse_job(job_log(end=vm_job_end)),
               "trace_boot": table1.trace_table(vm_log(boot_log(), ipc=12511, tlbwe=17467)),
               "trace_job": table1.trace_table(vm_log(job_log()))},
    }


class GuestLinesTest(unittest.TestCase):
    def test_one_vm_keeps_every_line_without_cr(self):
        self.assertEqual(table1.guest_lines("a\r\nb\n"), ["a", "b"])

    def test_several_vms_select_one_and_strip_the_prefix(self):
        text = prefixed("x0\ny0", 0) + prefixed("x1", 1) + "vmm: starting\n"
        self.assertEqual(table1.guest_lines(text, 1), ["x1"])
        self.assertEqual(table1.guest_lines(text, 0), ["x0", "y0"])
        self.assertEqual(table1.guest_lines(text, 2), [])


class TraceTableTest(unittest.TestCase):
    def test_one_vm(self):
        t = table1.trace_table(vm_log(boot_log()))
        self.assertEqual(list(t), ["SYSCALL_IPC", "ITLB_MISS", "EMUL_TLBWE", "EMUL_MFSPR", "GUEST_IDLE"])
        self.assertEqual(t["EMUL_TLBWE"], {"count": 626621, "min": 507, "max": 1760, "avg": 1362})

    def test_prefixed_tables_of_two_vms(self):
        text = prefixed(TRACE.format(ipc=1, tlbwe=10), 0) + prefixed(TRACE.format(ipc=2, tlbwe=20), 1)
        tables = table1.parse_trace_tables(text)
        self.assertEqual(sorted(tables), [0, 1])
        self.assertEqual(tables[1]["EMUL_TLBWE"]["count"], 20)
        self.assertEqual(table1.trace_table(text, 0)["SYSCALL_IPC"]["count"], 1)

    def test_header_naming_the_vm_and_unprefixed_rows(self):
        one = TRACE.format(ipc=1, tlbwe=10).replace("vmm: trace points", "vmm: vm1: trace points")
        two = "vmm: vm0 powered off\n" + TRACE.format(ipc=2, tlbwe=20)
        tables = table1.parse_trace_tables("[vm1] guest line\n" + one + two)
        self.assertEqual(tables[1]["SYSCALL_IPC"]["count"], 1)
        self.assertEqual(tables[0]["SYSCALL_IPC"]["count"], 2)

    def test_kestrel_vmm_format_for_several_vms(self):
        # What kestrel-vmm prints with vmm.vms=2: prefixed guest lines, a header naming the VM.
        text = (prefixed(boot_log(1, 2), 1) + TRACE.format(ipc=1, tlbwe=10).replace(
                    "vmm: trace points", "vmm: vm1 trace points") + "vmm: vm1: guest requested a reset; stopping it\n"
                + prefixed(boot_log(3, 4), 0) + TRACE.format(ipc=2, tlbwe=20).replace(
                    "vmm: trace points", "vmm: vm0 trace points") + "vmm: vm0: guest requested a reset; stopping it\n")
        self.assertEqual(table1.trace_table(text, 1)["EMUL_TLBWE"]["count"], 10)
        self.assertEqual(table1.trace_table(text, 0)["EMUL_TLBWE"]["count"], 20)
        self.assertEqual(table1.parse_boot(text, 0), {"init_tb": 3, "script_tb": 4})

    def test_rows_naming_their_vm_interleaved(self):
        text = ("vmm: trace points vm0\nvmm: trace points vm1\n"
                "vmm: vm0 EMUL_RFI 5 min 1 max 2 avg 1\nvmm: vm1 EMUL_RFI 7 min 1 max 2 avg 1\n")
        tables = table1.parse_trace_tables(text)
        self.assertEqual((tables[0]["EMUL_RFI"]["count"], tables[1]["EMUL_RFI"]["count"]), (5, 7))

    def test_missing_or_doubled_table_fails(self):
        with self.assertRaisesRegex(BenchError, "no trace table for vm0"):
            table1.trace_table(boot_log())
        with self.assertRaisesRegex(BenchError, "two trace tables"):
            table1.parse_trace_tables(TRACE.format(ipc=1, tlbwe=1) * 2)
        with self.assertRaisesRegex(BenchError, "outside a table"):
            table1.parse_trace_tables("vmm:   EMUL_RFI 5 min 1 max 2 avg 1\n")


class ScriptTest(unittest.TestCase):
    def test_boot(self):
        self.assertEqual(table1.parse_boot(boot_log()), {"init_tb": 131376304, "script_tb": 182537488})

    def test_boot_of_a_prefixed_vm(self):
        text = prefixed(boot_log(1, 2), 0) + prefixed(boot_log(3, 4), 1)
        self.assertEqual(table1.parse_boot(text, 1), {"init_tb": 3, "script_tb": 4})

    def test_job_drops_timing_lines_from_the_output(self):
        job = table1.parse_job(job_log())
        self.assertEqual((job["start_tb"], job["end_tb"]), (179462142, 3205298820))
        self.assertEqual(job["output"], ["      9 56", "job: 120 outputs, 27038 lines", "8d4a206a00df  -"])

    def test_unfinished_failed_or_panicked_scripts_fail(self):
        with self.assertRaisesRegex(BenchError, "did not reach"):
            table1.parse_job(job_log().replace("KESTREL-SCRIPT-DONE", ""))
        with self.assertRaisesRegex(BenchError, "status 0"):
            table1.parse_boot(boot_log().replace("status 0", "status 1"))
        with self.assertRaisesRegex(BenchError, "never started"):
            table1.parse_job(boot_log())
        with self.assertRaisesRegex(BenchError, "panic"):
            table1.parse_boot("Kernel panic - not syncing: x\n" + boot_log())

    def test_backwards_time_base_fails(self):
        with self.assertRaisesRegex(BenchError, "backwards"):
            table1.parse_job(job_log(start=5, end=4))


class SummaryTest(unittest.TestCase):
    def test_figures(self):
        s = table1.summarize([a_run()], "QEMU emulator version 7.2.22", "abc")
        self.assertEqual(s["job_instructions_native"], round((459365649 - 58734145) * 2.5))
        self.assertEqual(s["job_instructions_vm"], round((3205298820 - 179462142) * 2.5))
        self.assertEqual(s["job_ratio"], 7.55)
        self.assertEqual(s["boot_instructions_native"], round(58896534 * 2.5))
        self.assertEqual(s["boot_instructions_vm"], 456343720)
        self.assertEqual(s["boot_ratio"], 3.1)
        self.assertEqual(s["exits"]["EMUL_TLBWE"], 626621)
        self.assertEqual(s["exit_cost_instructions"]["EMUL_TLBWE"], 3405.0)
        self.assertEqual(s["exits_job_only"]["EMUL_TLBWE"], 626621 - 17467)
        self.assertEqual(s["exits_job_only"]["SYSCALL_IPC"], 13307 - 12511)
        total = 13307 * 4 + 244367 * 711 + 626621 * 1362 + 1810163 * 91 + 254 * 584
        self.assertEqual(s["exit_total_instructions"], round(total * 2.5))
        self.assertEqual([t["name"] for t in s["top_exit_classes"]],
                         ["EMUL_TLBWE", "ITLB_MISS", "EMUL_MFSPR", "GUEST_IDLE", "SYSCALL_IPC"])
        self.assertAlmostEqual(sum(t["share"] for t in s["top_exit_classes"]), 1.0, places=4)
        self.assertEqual((s["qemu"], s["commit"], s["target_ratio"]), ("QEMU emulator version 7.2.22", "abc", 3.0))
        json.dumps(s)

    def test_job_output_must_match(self):
        run = a_run()
        run["vm"]["job"]["output"][-1] = "0000  -"
        with self.assertRaisesRegex(BenchError, "output differs"):
            table1.summarize([run], "q", "c")

    def test_report(self):
        text = table1.report(table1.summarize([a_run()], "q", "c"))
        rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
        self.assertIn("7.55x", rows["job (`job` script, start to end)"])
        self.assertIn("| no", rows["job (`job` script, start to end)"])
        self.assertIn("42.00x", rows["paper (Stoess et al., seconds)"])
        self.assertIn("626,621 | 609,154 | 507/1760/1362 | 3405", rows["EMUL_TLBWE"])
        self.assertIn("# Table 1 analogue", text)


class DeterminismTest(unittest.TestCase):
    def test_identical_runs_pass(self):
        table1.check_deterministic([a_run(), a_run()])

    def test_a_differing_figure_is_named(self):
        other = a_run(vm_job_end=3205298821)
        with self.assertRaisesRegex(BenchError, r"vm\.job\.end_tb: run 1 3205298820, run 2 3205298821"):
            table1.check_deterministic([a_run(), other])

    def test_a_differing_trace_count_is_named(self):
        other = copy.deepcopy(a_run())
        other["vm"]["trace_job"]["GUEST_IDLE"]["count"] = 255
        with self.assertRaisesRegex(BenchError, r"vm\.trace_job\.GUEST_IDLE\.count: run 1 254, run 2 255"):
            table1.check_deterministic([a_run(), other])


if __name__ == "__main__":
    unittest.main()
