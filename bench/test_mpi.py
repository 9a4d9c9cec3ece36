"""Unit tests for bench/mpi.py's parsers, curves, summary and report, on canned console output."""
import unittest

import mpi
from framework.bench import BenchError

HEADER = ("mpibench: ranks 2 timebase_hz 400000000 window 2097152 eager_max 4816 stage 1024000 wait event "
          "ranks_per_program 1")


def kestrel_console(pingpong=((8, 100, 6_000_000), (1 << 20, 8, 320_000_000)), allreduce=(("U64", 1, 3_800_000),),
                    done=True, prefix="[mpibench0] ", check="ok"):
    lines = ["root: started mpibench0 (thread 66.1, 2232 KiB image)", prefix + HEADER]
    lines += [f"{prefix}mpibench: pingpong bytes {b} iters {k} trials 3 best {t} {check}" for b, k, t in pingpong]
    lines += [f"{prefix}mpibench: allreduce type {ty} count {c} iters 100 trials 3 best {t} ok"
              for ty, c, t in allreduce]
    if done:
        lines.append(prefix + "mpibench: done")
    return "\r\n".join(lines) + "\r\n"


def curve(points):
    return [{"bytes": b, "one_way_ticks": t, "mbit_s": mpi.mbit_s(b, t)} for b, t in points]


class ParseTest(unittest.TestCase):
    def test_kestrel_lines_with_any_prefix(self):
        for prefix in ("", "[mpibench0] "):
            got = mpi.parse_kestrel(kestrel_console(prefix=prefix))
            self.assertEqual((got["ranks"], got["timebase_hz"], got["eager_max"], got["wait"]),
                             (2, 400_000_000, 4816, "event"))
            self.assertEqual([p["bytes"] for p in got["pingpong"]], [8, 1 << 20])
            self.assertEqual(got["allreduce"][0]["best_ticks"], 3_800_000)
            self.assertEqual(got["ranks_per_program"], 1)

    def test_a_hang_is_worth_a_retry(self):
        with self.assertRaises(mpi.Retry):
            mpi.parse_kestrel(kestrel_console(done=False))
        text = kestrel_console(done=False) + ("[mpibench1] mpibench: FAILED rank 1: rank 1 waits in MPI_Recv "
                                              "(receive from source 0, tag 7, context 0) with no progress\n")
        with self.assertRaisesRegex(mpi.Retry, "waits in MPI_Recv"):
            mpi.parse_kestrel(text)
        with self.assertRaises(mpi.Retry):
            mpi.parse_kestrel("root: started mpibench0\n")

    def test_a_wrong_result_is_an_error(self):
        with self.assertRaisesRegex(BenchError, "ping-pong of 8 bytes"):
            mpi.parse_kestrel(kestrel_console(check="WRONG"))

    def test_pingpong_curve_is_half_a_round_trip(self):
        got = mpi.pingpong_curve(mpi.parse_kestrel(kestrel_console())["pingpong"])
        self.assertEqual(got[0], {"bytes": 8, "one_way_ticks": 30_000.0, "mbit_s": round(64 * 400e6 / 30_000 / 1e6, 4)})
        self.assertEqual(got[1]["one_way_ticks"], 20_000_000.0)
        self.assertIsNone(mpi.mbit_s(0, 100))

    def test_np_curve_converts_seconds_to_ticks(self):
        got = mpi.np_curve([{"bytes": 8, "seconds": 0.00001215}])
        self.assertEqual(got[0]["one_way_ticks"], 4860.0)

    def test_allreduce_per_call(self):
        self.assertEqual(mpi.allreduce_table([{"type": "F64", "count": 1, "iters": 100, "best_ticks": 8_283_503}]),
                         [{"type": "F64", "count": 1, "ticks": 82_835.0}])

    def test_npmpi_file_listing(self):
        text = "\n".join(["[kestrel-linux] NPmpi.0: 0: kestrel",
                          "[kestrel-linux] kestrel-linux: job NPmpi: all 2 ranks exited with code 0",
                          "[kestrel-linux] kestrel-linux: file np.out (68 bytes)",
                          "[kestrel-linux] kestrel-linux: |        1 0.123456   0.00006000",
                          "[kestrel-linux] kestrel-linux: |        8 0.987654   0.00006100",
                          "root: kestrel-linux exited (code 0)"])
        got = mpi.parse_npmpi(text)
        self.assertEqual([p["bytes"] for p in got], [1, 8])
        self.assertAlmostEqual(got[1]["seconds"], 0.000061)
        with self.assertRaises(BenchError):
            mpi.parse_npmpi("[kestrel-linux] kestrel-linux: job NPmpi ended (code 1)")


class SummaryTest(unittest.TestCase):
    def legs(self):
        return {
            "kestrel2": {"ok": {"ranks": 2, "curve": curve([(8, 2000.0), (1 << 20, 100_000.0)]),
                                "allreduce": [{"type": "U64", "count": 1, "ticks": 3000.0}]},
                         "attempts": [{"jitter": 0, "result": "hang: x", "log": "a"},
                                      {"jitter": 1, "result": "ok", "log": "b"}]},
            "kestrel4": {"ok": {"ranks": 4, "curve": [], "allreduce": [{"type": "U64", "count": 1, "ticks": 4000.0}]}},
            "kestrel8": {"ok": {"ranks": 8, "ranks_per_program": 2, "curve": [],
                                "allreduce": [{"type": "U64", "count": 1, "ticks": 9000.0}]}},
            "linux_loopback": {"ok": {"curve": curve([(8, 4860.0), (1 << 20, 200_000.0)])}},
            "vm_virtio": {"ok": {"curve": curve([(8, 117_000.0)])}},
            "vm_torus": {"ok": {"curve": curve([(8, 210_000.0)])}},
            "npmpi": {"reason": "skipped: no library"},
        }

    def test_headline_and_targets(self):
        s = mpi.summarize(self.legs(), {"max": 1, "np_upper": 1, "vm_upper": 1, "nrepeat": 20}, "qemu", "abc")
        self.assertEqual((s["native_latency_8b"], s["linux_loopback_latency_8b"]), (2000.0, 4860.0))
        self.assertEqual((s["vm_best_latency_8b"], s["vm_best_path"]), (117_000.0, "vm_virtio"))
        self.assertEqual(s["native_over_loopback_latency_8b"], round(2000 / 4860, 4))
        self.assertEqual(s["vm_best_over_native_latency_8b"], 58.5)
        self.assertEqual(s["native_over_loopback_bandwidth_1mib"], 2.0)
        self.assertEqual({k: t["met"] for k, t in s["targets"].items()},
                         {"native_over_loopback_latency_8b": True, "vm_best_over_native_latency_8b": True,
                          "native_over_loopback_bandwidth_1mib": True})
        self.assertEqual(s["legs"]["npmpi"], {"measured": False, "reason": "skipped: no library"})
        self.assertEqual(len(s["legs"]["kestrel2"]["attempts"]), 2)
        self.assertEqual(sorted(s["allreduce"]), ["kestrel2", "kestrel4", "kestrel8"])
        self.assertIn("| 8 ranks (2 per program) |", mpi.markdown(s))

    def test_missed_and_missing(self):
        legs = self.legs()
        legs["kestrel2"]["ok"]["curve"] = curve([(8, 40_000.0)])
        del legs["vm_virtio"], legs["vm_torus"]
        s = mpi.summarize(legs, {"max": 1, "np_upper": 1, "vm_upper": 1, "nrepeat": 20}, "qemu", "abc")
        self.assertFalse(s["targets"]["native_over_loopback_latency_8b"]["met"])
        self.assertIsNone(s["targets"]["vm_best_over_native_latency_8b"]["met"])
        self.assertIsNone(s["native_bandwidth_1mib_mbit_s"])
        text = mpi.markdown(s)
        for want in ("`native_latency_8b`", "40,000.0", "**no**", "not measured: skipped: no library",
                     "U64 x 1 (collective ALU)", "How time is taken"):
            self.assertIn(want, text)


class NotesTest(unittest.TestCase):
    def test_event_waits_against_polling(self):
        legs = {"kestrel2": {"measured": True, "curve": curve([(8, 100.0), (1 << 20, 9000.0)])},
                "kestrel_yield": {"measured": True, "curve": curve([(8, 110.0), (1 << 20, 1000.0)])},
                "kestrel_wait10": {"measured": True, "curve": curve([(1 << 20, 2000.0)])},
                "kestrel8": {"measured": True, "ranks": 8, "ranks_per_program": 2}}
        notes = mpi.report_notes({"legs": legs})
        self.assertEqual(len(notes), 2)
        self.assertIn("4 programs of 2 rank threads", notes[0])
        self.assertIn("at 1,048,576 bytes: 9,000 against 1,000 ticks", notes[1])
        self.assertIn("(`kestrel_wait10`) it is 2,000", notes[1])
        legs["kestrel2"]["curve"] = curve([(8, 100.0), (1 << 20, 1500.0)])
        self.assertEqual(len(mpi.report_notes({"legs": legs})), 1)


class LegsTest(unittest.TestCase):
    def test_kestrel_legs(self):
        class A:
            max = 1 << 20
        self.assertEqual(mpi.kestrel_args("kestrel2", A), (2, 1, ["mpibench.max=1048576"]))
        self.assertEqual(mpi.kestrel_args("kestrel8", A), (8, 2, ["mpibench.pingpong=0"]))
        self.assertEqual(mpi.kestrel_args("kestrel4_threads", A), (4, 2, ["mpibench.pingpong=0"]))
        n, per, words = mpi.kestrel_args("kestrel_yield", A)
        self.assertEqual((n, per), (2, 1))
        self.assertIn("mpibench.wait=yield", words)


if __name__ == "__main__":
    unittest.main()
