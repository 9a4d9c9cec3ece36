"""Unit tests for bench/net.py's parsers, summary and report, on canned console output."""
import json
import random
import unittest

import net
from ipc import BenchError

NATIVE_NP = [(1, 0.627934, 0.00001215), (2, 1.253289, 0.00001217), (4096, 1731.301939, 0.00001805),
             (65536, 4788.125449, 0.00010442)]
IPERF = "19700101000000,127.0.0.1,58980,127.0.0.1,5001,1,0.0-1.0,683016252,5370521820"


def script(lines, name="net-bench"):
    """A guest console around the script's lines, as /init prints it."""
    return ([f"kestrel-guest: running /scripts/{name}"] + lines
            + ["net: done", "KESTREL-SCRIPT-DONE", f"kestrel-guest: script {name} exited with status 0; powering off"])


def client_lines(path="lo", role="both", index=0, np=NATIVE_NP, iperf=IPERF, peer="127.0.0.1"):
    lines = [f"net: path {path} role {role} index {index} iface eth0 driver virtio_net address "
             f"10.1.0.{index + 1} peer {peer}",
             "timing: net np start 100 end 500"]
    lines += [f"net: np {b} {m:f} {s:.8f}" for b, m, s in np]  # NPtcp: "%8d %lf %12.8lf"
    if iperf:
        lines += ["timing: net iperf start 600 end 1000", f"net: iperf {iperf}"]
    return lines


def server_lines(path="virtio"):
    return [f"net: path {path} role server index 1 iface eth0 driver virtio_net address 10.1.0.2 peer 10.1.0.1",
            "net: server np status 0", f"net: iperf-server {IPERF}", "net: server iperf status 0"]


TRACE = """vmm: trace points (cost in timebase ticks)
vmm:   SYSCALL_IPC           {ipc}  min     0 max    564 avg     4
vmm:   EMUL_MFMSR            1000  min    27 max    637 avg    40
vmm:   PAGEFAULT_IPC         {pf}  min   500 max   1760 avg  1000
"""


def two_vms(vm0, vm1, traces=True):
    """A two-VM console: each VM's lines prefixed, then each VM's trace table."""
    out = [f"[vm0] {line}\r" for line in script(vm0)] + [f"[vm1] {line}\r" for line in script(vm1)]
    text = "\n".join(out) + "\n"
    if traces:
        text += "".join(f"[vm{vm}] {line}\n" for vm, t in ((0, TRACE.format(ipc=10, pf=30)),
                                                        (1, TRACE.format(ipc=20, pf=2)))
                        for line in t.splitlines())
    return text


class ParseTest(unittest.TestCase):
    def test_np_points_convert_to_si_units(self):
        points = net.parse_np([f"net: np {b} {m:f} {s:.8f}" for b, m, s in NATIVE_NP] + ["net: done"])
        self.assertEqual([p["bytes"] for p in points], [1, 2, 4096, 65536])
        self.assertAlmostEqual(points[0]["latency_us"], 12.15)
        self.assertAlmostEqual(points[-1]["mbit_s"], 65536 * 8 / 0.00010442 / 1e6, places=3)

    def test_np_rejects_malformed_zero_and_unordered_lines(self):
        for bad in (["net: np 1 x 0.1"], ["net: np 0 1.0 0.1"], ["net: np 4 1.0 0"],
                    ["net: np 4 1.0 0.1", "net: np 4 1.0 0.1"], ["net: np 1 2"]):
            with self.subTest(bad=bad), self.assertRaises(BenchError):
                net.parse_np(bad)

    def test_iperf_csv(self):
        r = net.parse_iperf_csv(IPERF)
        self.assertEqual(r, {"bytes": 683016252, "interval_s": [0.0, 1.0], "mbit_s": 5370.5218})
        for bad in ("1,2,3", IPERF.replace("683016252", "many"), IPERF.replace("0.0-1.0", "x"),
                    IPERF.replace(",683016252,", ",0,")):
            with self.subTest(bad=bad), self.assertRaises(BenchError):
                net.parse_iperf_csv(bad)

    def test_iperf_takes_the_last_report_and_ignores_the_server_lines(self):
        other = IPERF.replace("683016252,5370521820", "1000,8000")
        self.assertEqual(net.parse_iperf([f"net: iperf {other}", f"net: iperf-server {IPERF}",
                                          f"net: iperf {IPERF}"])["bytes"], 683016252)
        self.assertIsNone(net.parse_iperf(["net: done"]))

    def test_header(self):
        h = net.parse_header(client_lines(path="virtio", role="client"))
        self.assertEqual((h["path"], h["role"], h["index"], h["driver"]), ("virtio", "client", 0, "virtio_net"))
        with self.assertRaises(BenchError):
            net.parse_header(["net: done"])
        with self.assertRaises(BenchError):
            net.parse_header(client_lines() + client_lines())

    def test_client_figures(self):
        c = net.parse_client(client_lines())
        f = net.figures(c)
        self.assertEqual(f["latency_bytes"], 1)
        self.assertAlmostEqual(f["latency_us"], 12.15)
        self.assertEqual(f["throughput_bytes"], 65536)
        self.assertAlmostEqual(f["iperf_mbit_s"], 5370.5218)
        self.assertEqual(c["test_instructions"], {"np": 1000, "iperf": 1000})

    def test_client_unavailable_and_failed(self):
        with self.assertRaisesRegex(net.Unavailable, "no virtio,mmio node"):
            net.parse_client(["net: unavailable virtio: no virtio,mmio node in the device tree; interfaces: lo"])
        lines = client_lines(np=[], iperf=None) + ["net: failed np: Client: Cannot Connect! errno=111",
                                                   "net: failed iperf: tcp connect failed"]
        with self.assertRaisesRegex(net.Unavailable, "Cannot Connect"):
            net.parse_client(lines)
        # One test failing while the other measured: the figures stay, the failure is noted.
        c = net.parse_client(client_lines(iperf=None) + ["net: failed iperf: tcp connect failed"])
        self.assertEqual(c["failed"], ["iperf: tcp connect failed"])
        self.assertIsNone(net.figures(c)["iperf_mbit_s"])

    def test_native_run(self):
        console = "\n".join(["Linux version 6.1", *script(client_lines() + ["net: server np status 0"])])
        run = net.parse_native_run(console)
        self.assertEqual(run["server_status"], {"np": 0})
        self.assertEqual(len(run["np"]), 4)
        with self.assertRaisesRegex(BenchError, "no NPtcp figures"):
            net.parse_native_run("\n".join(script(client_lines(np=[]))))
        with self.assertRaisesRegex(BenchError, "panic"):
            net.parse_native_run("Kernel panic - not syncing: VFS\n")

    def test_vm_run_roles_and_exit_classes(self):
        console = two_vms(client_lines("virtio", "client", 0, peer="10.1.0.2"), server_lines())
        run = net.parse_vm_run(console)
        self.assertEqual(run["header"]["role"], "client")
        self.assertEqual(run["server_status"], {"np": 0, "iperf": 0})
        self.assertEqual(run["roles"], {0: "client", 1: "server"})
        classes = net.exit_classes(run["traces"], run["roles"], None)
        vm0 = classes["vm0"]
        self.assertEqual(vm0["role"], "client")
        self.assertEqual(vm0["exits"], 10 + 1000 + 30)
        self.assertEqual([t["name"] for t in vm0["top"]], ["EMUL_MFMSR", "PAGEFAULT_IPC", "SYSCALL_IPC"])
        self.assertEqual(vm0["top"][0]["total_instructions"], 100000)
        self.assertNotIn("top_benchmark", vm0)
        self.assertEqual(classes["vm1"]["top"][0]["name"], "EMUL_MFMSR")

    def test_exit_classes_of_the_benchmark_alone(self):
        run = net.parse_vm_run(two_vms(client_lines("virtio", "client", 0, peer="10.1.0.2"), server_lines()))
        boot = "".join(f"[vm{vm}] {line}\n" for vm in (0, 1) for line in script(["timing: x"], "boot"))
        boot += "".join(f"[vm{vm}] {line}\n" for vm in (0, 1) for line in TRACE.format(ipc=5, pf=10).splitlines())
        baseline = net.parse_baseline_run(boot)
        vm0 = net.exit_classes(run["traces"], run["roles"], baseline)["vm0"]
        # vm0: PAGEFAULT_IPC 30 - 10 = 20 exits x 1000 ticks; EMUL_MFMSR 1000 - 1000 = 0; IPC 10 - 5.
        self.assertEqual(vm0["exits_benchmark"], 25)
        self.assertEqual([t["name"] for t in vm0["top_benchmark"]], ["PAGEFAULT_IPC", "SYSCALL_IPC", "EMUL_MFMSR"])
        self.assertEqual(vm0["top_benchmark"][0]["avg_ticks"], 1000)
        self.assertEqual(vm0["top_benchmark"][0]["total_instructions"], 50000)
        self.assertIsNone(vm0["top_benchmark"][2]["avg_ticks"])
        with self.assertRaisesRegex(BenchError, "never started"):
            net.parse_baseline_run(TRACE.format(ipc=1, pf=1))

    def test_vm_run_client_may_be_either_vm(self):
        console = two_vms(server_lines(), client_lines("virtio", "client", 0, peer="10.1.0.2"))
        self.assertEqual(net.parse_vm_run(console)["roles"], {0: "server", 1: "client"})

    def test_vm_run_unavailable_names_the_vm(self):
        gone = ["net: path virtio role server index 1 iface none driver none address none peer 10.1.0.1",
                "net: unavailable virtio: no virtio,mmio node in the device tree; interfaces: lo(no driver)"]
        with self.assertRaisesRegex(net.Unavailable, "^vm1: no virtio,mmio node"):
            net.parse_vm_run(two_vms(client_lines("virtio", "client", 0), gone))

    def test_vm_run_wants_a_client_and_a_server(self):
        with self.assertRaisesRegex(BenchError, "one client and one server"):
            net.parse_vm_run(two_vms(client_lines("virtio", "client", 0), client_lines("virtio", "client", 1)))
        with self.assertRaisesRegex(BenchError, "never started"):
            net.parse_vm_run("[vm0] Linux version 6.1\n")

    def test_garbage_lines_raise_bench_errors_only(self):
        """Property: any line mix gives a result or BenchError/Unavailable, never another exception."""
        rng = random.Random(10)
        pieces = ["net:", "np", "iperf", "path", "role", "1", "-1", "0.5", "1e9", "nan", ",", "x",
                  "unavailable", "failed", "virtio:", "timing:", "start", "end", "", " ", "9" * 30]
        for _ in range(2000):
            lines = [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
                     for _ in range(rng.randint(0, 6))]
            lines += rng.choice([[], client_lines()[: rng.randint(0, 6)]])
            rng.shuffle(lines)
            try:
                c = net.parse_client(lines)
                net.figures(c)
            except (BenchError, net.Unavailable):
                pass


def results(virtio=None, torus=None, collective=None):
    native = net.parse_client(client_lines())
    native["server_status"] = {}
    out = {"native": {"ok": native}}
    for name, np in (("virtio", virtio), ("torus", torus), ("collective", collective)):
        if np is None:
            out[name] = {"reason": f"vm0: no {name} device"}
            continue
        run = net.parse_client(client_lines(name, "client", 0, np=np, iperf=IPERF.replace("5370521820", "537052182")))
        run["server_status"] = {"np": 0}
        run["roles"] = {0: "client", 1: "server"}
        run["traces"] = {0: {"EMUL_RFI": {"count": 3, "min": 1, "max": 9, "avg": 5}}, 1: {}}
        out[name] = {"ok": run}
    return out


PARAMS = {"upper": 65536, "nrepeat": 20, "iperf_time": 1, "append": "", "runs": 1}


class SummaryTest(unittest.TestCase):
    def test_unmeasured_paths_are_null_with_their_reason(self):
        s = net.summarize(results(), PARAMS, "QEMU 7.2", "abc")
        for key in ("pv_throughput_ratio", "torus_throughput_ratio", "collective_throughput_ratio",
                    "pv_latency_ratio"):
            self.assertIsNone(s[key], key)
        self.assertEqual(s["paths"]["torus"], {"measured": False, "reason": "vm0: no torus device"})
        self.assertIsNone(s["thresholds"]["pv_latency"]["met"])
        self.assertEqual(s["thresholds"]["pv_latency"]["reason"], "vm0: no virtio device")
        json.dumps(s)
        text = net.report(s)
        self.assertIn("not measured: vm0: no virtio device", text)
        self.assertIn("| native | 12.15 |", text)

    def test_ratios_and_thresholds(self):
        # virtio: half the native throughput at every size, 2x the latency: met; torus at 20%: not met.
        half = [(b, m / 2, s * 2) for b, m, s in NATIVE_NP]
        fifth = [(b, m / 5, s * 5) for b, m, s in NATIVE_NP]
        s = net.summarize(results(virtio=half, torus=fifth, collective=fifth), PARAMS, "QEMU 7.2", "abc")
        self.assertAlmostEqual(s["pv_throughput_ratio"], 0.5, places=3)
        self.assertAlmostEqual(s["pv_latency_ratio"], 2.0, places=3)
        self.assertAlmostEqual(s["torus_throughput_ratio"], 0.2, places=3)
        self.assertAlmostEqual(s["collective_throughput_ratio"], 0.2, places=3)
        self.assertAlmostEqual(s["pv_iperf_ratio"], 0.1, places=3)
        self.assertTrue(s["thresholds"]["pv_throughput"]["met"])
        self.assertTrue(s["thresholds"]["pv_latency"]["met"])
        self.assertFalse(s["thresholds"]["torus_throughput"]["met"])
        text = net.report(s)
        self.assertIn("| torus_throughput | torus | throughput | 0.200 | >= 0.25 | no |", text)
        self.assertIn("| 65536 |", text)
        self.assertEqual(s["paths"]["virtio"]["exit_classes"]["vm0"]["top"][0]["total_instructions"], 38)
        self.assertIn("No benchmark-only exit classes (boot-only run: was not run)", text)

    def test_latency_threshold_is_an_upper_bound(self):
        slow = [(b, m / 5, s * 5) for b, m, s in NATIVE_NP]
        s = net.summarize(results(virtio=slow), PARAMS, "QEMU 7.2", "abc")
        self.assertAlmostEqual(s["pv_latency_ratio"], 5.0, places=3)
        self.assertFalse(s["thresholds"]["pv_latency"]["met"])

    def test_cmdline_per_path(self):
        line = net.cmdline("torus", PARAMS)
        self.assertTrue(line.startswith("console=ttyS0 panic=1 net.path=bgnet net.transport=torus"))
        self.assertTrue(line.endswith("kestrel.script=net-bench"))
        self.assertIn("net.nrepeat=20", net.cmdline("native", PARAMS))


if __name__ == "__main__":
    unittest.main()
