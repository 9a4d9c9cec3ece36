"""Unit tests of the one QEMU launcher (tests/framework/qemu.py) and the console parsers
(framework/console.py): command lines, boot images, input checks, running with a timeout and a
log, console parsing."""
import contextlib
import io
import os
import random
import struct
import tempfile
import unittest
from pathlib import Path

from framework import console, linux
from framework import qemu as kq

BATCH = ["-serial", "stdio", "-serial", "null", "-monitor", "none"]
MACHINE = ["-M", "bamboo", "-m", "{mem}", "-display", "none", "-nic", "none", "-no-reboot"]


def machine(mem):
    return [a.format(mem=mem) for a in MACHINE]


def elf_header(cls=1, data=2, machine_no=20):
    """The first 20 bytes of an ELF header, as far as check_guest_elf reads it."""
    ident = b"\x7fELF" + bytes([cls, data, 1]) + bytes(9)
    order = ">" if data == 2 else "<"
    return ident + struct.pack(order + "HH", 2, machine_no)


def unpack(archive):
    """The boot-module format read back independently of framework/bootmod.py (kestrel-abi's
    bootmod.rs)."""
    assert archive[:8] == b"KSTRLMOD"
    (count,) = struct.unpack(">I", archive[8:12])
    mods = []
    for i in range(count):
        e = 12 + i * 32
        name = archive[e:e + 24].rstrip(b"\0").decode()
        off, size = struct.unpack(">II", archive[e + 24:e + 32])
        assert off % 4 == 0
        mods.append((name, archive[off:off + size]))
    return mods


class TempDir(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def file(self, name, data=b"x"):
        p = self.tmp / name
        p.write_bytes(data)
        return p


class CommandTest(unittest.TestCase):
    def test_native_linux_script_run(self):
        # What guests/linux/run-native.sh --script smoke --icount --mem 64 always ran.
        node = kq.Node(kernel=Path("vmlinux"), initrd=Path("initramfs.cpio.gz"),
                       append="console=ttyS0 panic=1 kestrel.script=smoke", mem_mb=64, icount=True)
        self.assertEqual(node.command("qemu"), ["qemu", *machine(64), *BATCH,
                                                "-icount", "shift=0,sleep=off", "-kernel", "vmlinux",
                                                "-initrd", "initramfs.cpio.gz", "-append",
                                                "console=ttyS0 panic=1 kestrel.script=smoke"])

    def test_bare_guest_natively(self):
        # What guest-compare.sh's native run always ran: no initrd, no command line.
        node = kq.Node(kernel=Path("g"))
        self.assertEqual(node.command("qemu"), ["qemu", *machine(128), *BATCH, "-kernel", "g"])

    def test_interactive_console_keeps_ctrl_c_for_the_guest(self):
        cmd = kq.Node(kernel=Path("k"), console="interactive", extra=["-d", "int"]).command("q")
        self.assertIn("stdio,id=console,mux=on,signal=off", cmd)
        self.assertEqual(cmd[-2:], ["-d", "int"])
        self.assertNotIn("-monitor", cmd)

    def test_monitor_console_is_paused(self):
        cmd = kq.Node(kernel=Path("k"), console="monitor").command("q")
        self.assertEqual(cmd[cmd.index("-S") - 4:cmd.index("-S") + 3],
                         ["-serial", "null", "-serial", "null", "-S", "-monitor", "stdio"])

    def test_unknown_console(self):
        with self.assertRaises(kq.LaunchError):
            kq.Node(kernel=Path("k"), console="tty").command()

    def test_split_append(self):
        self.assertEqual(kq.split_append(["-d", "int", "-append", "a=1", "-s"]),
                         (["a=1"], ["-d", "int", "-s"]))
        with self.assertRaises(kq.LaunchError):
            kq.split_append(["-append"])

    def test_join_cmdline(self):
        self.assertIsNone(kq.join_cmdline(None, "", "  "))
        self.assertEqual(kq.join_cmdline("a", None, " b ", ""), "a b")


class BootImageTest(TempDir):
    def test_plain_root_goes_to_initrd_as_is(self):
        root = self.file("ktest", b"\x7fELF...")
        image = kq.BootImage(root=kq.Module("ktest", root))
        self.assertTrue(image.is_plain())
        self.assertEqual(image.initrd(self.tmp / "unused.bootmod"), root)
        self.assertFalse((self.tmp / "unused.bootmod").exists())
        self.assertIsNone(image.cmdline())

    def test_archive_order_and_root_start(self):
        image = kq.BootImage(
            root=kq.Module("kestrel-root", self.file("r", b"ROOT")),
            programs=[kq.Module("vmm", self.file("v", b"VMM!!")), kq.Module("demo", self.file("d", b"D"))],
            modules=[kq.Module("guest", self.file("g", b"GUEST")), kq.Module("bootargs", data=b"console=ttyS0")])
        path = image.initrd(self.tmp / "out" / "a.bootmod")
        self.assertEqual(unpack(path.read_bytes()),
                         [("kestrel-root", b"ROOT"), ("vmm", b"VMM!!"), ("demo", b"D"), ("guest", b"GUEST"),
                          ("bootargs", b"console=ttyS0")])
        self.assertEqual(image.cmdline(), "root.start=vmm,demo")

    def test_archive_round_trips_random_modules(self):
        rng = random.Random(440)
        for _ in range(50):
            mods = [(f"m{i}" + "x" * rng.randrange(0, 20), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))))
                    for i in range(rng.randrange(1, 6))]
            image = kq.BootImage(root=kq.Module(mods[0][0], data=mods[0][1]),
                                 modules=[kq.Module(n, data=d) for n, d in mods[1:]])
            self.assertEqual(unpack(image.pack()), mods)

    def test_duplicate_and_long_names(self):
        image = kq.BootImage(root=kq.Module("a", data=b"1"), modules=[kq.Module("a", data=b"2")])
        with self.assertRaisesRegex(kq.LaunchError, "given twice"):
            image.pack()
        with self.assertRaisesRegex(kq.LaunchError, "longer than 23"):
            kq.parse_named("x" * 24 + "=f", "--module")
        with self.assertRaisesRegex(kq.LaunchError, "NAME=VALUE"):
            kq.parse_named("guest", "--module")
        with self.assertRaisesRegex(kq.LaunchError, "may not contain"):
            kq.parse_named("a,b=f", "--program")

    def test_missing_module_file(self):
        image = kq.BootImage(root=kq.Module("r", data=b"1"), modules=[kq.Module("guest", self.tmp / "nope")])
        with self.assertRaisesRegex(kq.LaunchError, "module guest: cannot read"):
            image.pack()

    def test_kestrel_node_merges_command_lines(self):
        kernel = self.file("kestrel-kernel")
        image = kq.BootImage(root=kq.Module("root", self.file("r")), programs=[kq.Module("vmm", self.file("v"))])
        node = kq.kestrel_node(image, self.tmp / "a.bootmod", kernel=kernel, append=["vmm.vms=2"],
                               extra=["-append", "ktest.filter=x", "-d", "int"])
        self.assertEqual(node.append, "root.start=vmm vmm.vms=2 ktest.filter=x")
        self.assertEqual(node.extra, ["-d", "int"])
        self.assertEqual(node.initrd, self.tmp / "a.bootmod")
        with self.assertRaisesRegex(kq.LaunchError, "no kernel ELF"):
            kq.kestrel_node(image, self.tmp / "a.bootmod", kernel=self.tmp / "none")


class GuestChecksTest(TempDir):
    def test_good_ppc32_elf(self):
        kq.check_guest_elf(self.file("vmlinux", elf_header() + bytes(100)))

    def test_bad_kernels_say_why(self):
        cases = [
            (None, "no such file"),
            (b"\x1f\x8b\x08\x00gzip", "not an ELF file"),
            (b"\x27\x05\x19\x56uImage" + bytes(20), "not an ELF file"),
            (elf_header(cls=2), "64-bit big-endian"),
            (elf_header(data=1), "32-bit little-endian"),
            (elf_header(machine_no=62), "machine 62, not PowerPC"),
            (b"\x7fELF", "ELF"),
        ]
        for data, want in cases:
            path = self.tmp / "k" if data is None else self.file("k", data)
            with self.subTest(want=want), self.assertRaisesRegex(kq.LaunchError, want):
                kq.check_guest_elf(path)
            if data is not None:
                path.unlink()

    def test_vm_memory_fits(self):
        initrd, archive = 3 << 20, 10 << 20
        kq.check_vm_memory(64, 1, initrd, archive)  # today's default
        kq.check_vm_memory(64, 2, initrd, archive)  # `just run 2`
        kq.check_vm_memory(128, 1, initrd, archive)

    def test_vm_memory_too_small_for_the_initrd(self):
        with self.assertRaisesRegex(kq.LaunchError, "too small.*at least 36 MiB"):
            kq.check_vm_memory(32, 1, 3 << 20, 10 << 20)
        with self.assertRaisesRegex(kq.LaunchError, "at least 33 MiB"):
            kq.check_vm_memory(16, 1, 0, 1 << 20)

    def test_vm_memory_too_large(self):
        with self.assertRaisesRegex(kq.LaunchError, "too large.*at most 208 MiB"):
            kq.check_vm_memory(512, 1, 3 << 20, 10 << 20)
        with self.assertRaisesRegex(kq.LaunchError, r"2 VM\(s\) get at most"):
            kq.check_vm_memory(128, 2, 3 << 20, 10 << 20)
        with self.assertRaisesRegex(kq.LaunchError, "1 to 4 VMs"):
            kq.check_vm_memory(64, 5, 0, 0)

    def test_vmm_image_modules(self):
        root, vmm = self.file("kestrel-root"), self.file("kestrel-vmm")
        fabric = self.file("kestrel-fabric")
        guest, rd = self.file("vmlinux"), self.file("rd")
        demo = kq.Module("kestrel-demo", self.file("demo"))
        image = kq.vmm_image(guest, initrd=rd, cmdline="console=ttyS0", vmm=vmm, root=root, natives=[demo],
                             fabric=fabric)
        self.assertEqual([m.name for m in [image.root, *image.programs, *image.modules]],
                         ["kestrel-root", "kestrel-vmm", "kestrel-fabric", "kestrel-demo", "guest", "initrd",
                          "bootargs"])
        self.assertEqual(image.modules[2].read(), b"console=ttyS0")
        self.assertEqual(image.cmdline(), "root.start=kestrel-vmm,kestrel-fabric,kestrel-demo")
        bare = kq.vmm_image(guest, vmm=vmm, root=root, fabric=fabric)
        self.assertEqual([m.name for m in bare.modules], ["guest"])
        # The service given as a native program is started once; a private fabric starts none.
        own = kq.vmm_image(guest, vmm=vmm, root=root, natives=[kq.Module("kestrel-fabric", fabric), demo])
        self.assertEqual(own.cmdline(), "root.start=kestrel-vmm,kestrel-fabric,kestrel-demo")
        private = kq.vmm_image(guest, vmm=vmm, root=root, shared_fabric=False)
        self.assertEqual(private.cmdline(), "root.start=kestrel-vmm")
        self.assertTrue(kq.shares_fabric(None))
        self.assertTrue(kq.shares_fabric(["vmm.vms=2", "vmm.fabric=service"]))
        self.assertFalse(kq.shares_fabric(["vmm.vms=2 vmm.fabric=local"]))
        self.assertFalse(kq.shares_fabric("a=1 vmm.fabric=local"))
        with self.assertRaisesRegex(kq.LaunchError, "initrd: no such file"):
            kq.vmm_image(guest, initrd=self.tmp / "none", vmm=vmm, root=root, fabric=fabric)
        with self.assertRaisesRegex(kq.LaunchError, "no kestrel-vmm"):
            kq.vmm_image(guest, vmm=self.tmp / "none", root=root, fabric=fabric)
        with self.assertRaisesRegex(kq.LaunchError, "no kestrel-root"):
            kq.vmm_image(guest, vmm=vmm, root=self.tmp / "none", fabric=fabric)
        with self.assertRaisesRegex(kq.LaunchError, "no kestrel-fabric .*-p kestrel-fabric-service"):
            kq.vmm_image(guest, vmm=vmm, root=root, fabric=self.tmp / "none")
        self.assertEqual(kq.vmm_cmdline(2, 96), ["vmm.vms=2", "vmm.mem=96"])
        self.assertEqual(kq.vmm_cmdline(None, None), [])


class CliTest(TempDir):
    def setUp(self):
        super().setUp()
        out = self.tmp / "target" / "powerpc-440-none" / "release"
        out.mkdir(parents=True)
        for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric", "ktest"):
            (out / name).write_bytes(b"\x7fELF")
        self.out = out
        self.env = dict(os.environ)
        os.environ["CARGO_TARGET_DIR"] = str(self.tmp / "target")
        os.environ.pop("KESTREL_KERNEL", None)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)
        super().tearDown()

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = kq.main(list(argv))
        return status, out.getvalue(), err.getvalue()

    def test_kestrel_package_name_and_qemu_args(self):
        status, out, _ = self.cli("kestrel", "ktest", "--print", "--", "-append", "ktest.filter=a")
        self.assertEqual(status, 0)
        self.assertIn(f"-kernel {self.out}/kestrel-kernel -initrd {self.out}/ktest -append ktest.filter=a", out)

    def test_kestrel_root_with_programs(self):
        status, out, _ = self.cli("kestrel", "--root", "ktest", "--program", f"vmm={self.out}/kestrel-vmm",
                                  "--module-text", "bootargs=x y", "--append", "a=1", "--print")
        self.assertEqual(status, 0)
        archive = self.tmp / "target" / "logs" / "ktest.bootmod"
        self.assertIn(f"-initrd {archive} -append 'root.start=vmm a=1'", out)
        self.assertEqual([n for n, _ in unpack(archive.read_bytes())], ["ktest", "vmm", "bootargs"])

    def test_vm_user_guest_errors(self):
        status, _, err = self.cli("vm", "--guest", str(self.file("zImage", b"\x1f\x8b")), "--cmdline", "x", "--print")
        self.assertEqual(status, 2)
        self.assertIn("is not an ELF file", err)
        guest = self.file("vmlinux", elf_header())
        status, _, err = self.cli("vm", "--guest", str(guest), "--cmdline", "x", "--vm-mem", "1024", "--print")
        self.assertEqual(status, 2)
        self.assertIn("too large", err)
        status, _, err = self.cli("vm", "--guest", str(guest), "--vm-mem", "64", "--print")
        self.assertEqual(status, 2)
        self.assertIn("sizes an OS guest", err)

    def test_vm_linux_command(self):
        guest, rd = self.file("vmlinux", elf_header()), self.file("rd", bytes(1000))
        status, out, _ = self.cli("vm", "--guest", str(guest), "--initrd", str(rd), "--cmdline",
                                  "console=ttyS0 panic=1", "--vms", "2", "--vm-mem", "96", "--print")
        self.assertEqual(status, 0)
        self.assertIn("-m 256 ", out)
        self.assertIn("-append 'root.start=kestrel-vmm,kestrel-fabric vmm.vms=2 vmm.mem=96'", out)
        archive = self.tmp / "target" / "logs" / "vm-vmlinux.bootmod"
        self.assertEqual([n for n, _ in unpack(archive.read_bytes())],
                         ["kestrel-root", "kestrel-vmm", "kestrel-fabric", "guest", "initrd", "bootargs"])
        # A private fabric (vmm.fabric=local, here through QEMU's -append) starts no service.
        status, out, _ = self.cli("vm", "--guest", str(guest), "--initrd", str(rd), "--cmdline", "x",
                                  "--print", "--", "-append", "vmm.fabric=local")
        self.assertEqual(status, 0)
        self.assertIn("-append 'root.start=kestrel-vmm vmm.fabric=local'", out)

    def test_linux_append_writes_the_linux_command_line(self):
        guest, rd = self.file("vmlinux", elf_header()), self.file("rd", bytes(1000))
        status, _, _ = self.cli("vm", "--guest", str(guest), "--initrd", str(rd), "--linux-append", "",
                                "--linux-append", "x=1", "--linux-append", "kestrel.script=smoke", "--print")
        self.assertEqual(status, 0)
        archive = self.tmp / "target" / "logs" / "vm-vmlinux.bootmod"
        self.assertEqual(dict(unpack(archive.read_bytes()))["bootargs"],
                         f"{linux.LINUX_CMDLINE} x=1 kestrel.script=smoke".encode())
        status, out, _ = self.cli("native", "--kernel", str(guest), "--linux-append", "a", "--print")
        self.assertIn(f"-append '{linux.LINUX_CMDLINE} a'", out)
        status, _, err = self.cli("vm", "--guest", str(guest), "--cmdline", "x", "--linux-append", "y", "--print")
        self.assertEqual(status, 2)
        self.assertIn("not both", err)

    def test_missing_root(self):
        status, _, err = self.cli("kestrel", "nosuchtask", "--print")
        self.assertEqual(status, 2)
        self.assertIn("no ELF file at", err)


class RunTest(TempDir):
    def fake_qemu(self, body):
        """A stand-in for qemu-system-ppc: a shell script that ignores its arguments."""
        path = self.tmp / "qemu"
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
        return str(path)

    def test_console_goes_to_log_and_status_through(self):
        qemu = self.fake_qemu("echo 'ktest: 3 passed, 0 failed\r'; echo oops >&2; exit 3")
        log = self.tmp / "y.log"
        with contextlib.redirect_stdout(io.StringIO()):
            status = kq.run(kq.Node(kernel=Path("k")), timeout=10, log=log, quiet=True, echo=False,
                            stdin_null=True, qemu=qemu)
        self.assertEqual(status, 3)
        text = log.read_text()
        self.assertIn("oops", text)
        self.assertEqual(console.closing(text, "ktest"), (3, 0))

    def test_timeout_is_124(self):
        qemu = self.fake_qemu("exec sleep 30")
        status = kq.run(kq.Node(kernel=Path("k")), timeout=1, log=self.tmp / "t.log", quiet=True,
                        echo=False, stdin_null=True, qemu=qemu)
        self.assertEqual(status, 124)


TRACE = """\
kestrel: boot\r
vmm: trace points (cost in timebase ticks)\r
vmm:   SYSCALL_IPC              12  min     0 max    564 avg     4\r
vmm:   ITLB_MISS            244367  min    24 max   1048 avg   711\r
vmm: every VM has stopped; shutting down\r
"""


class ConsoleTest(unittest.TestCase):
    def test_lines_markers_panic(self):
        text = "a\r\nKERNEL PANIC at x\r\nb\n"
        self.assertEqual(console.lines(text), ["a", "KERNEL PANIC at x", "b"])
        self.assertTrue(console.has_line(text, "b"))
        self.assertFalse(console.has_line(text, "KERNEL PANIC"))
        self.assertEqual(console.panic_line(text), "KERNEL PANIC at x")
        self.assertIsNone(console.panic_line("Kernel panicked? no\n"))
        self.assertEqual(console.panic_line("Kernel panic - not syncing: x\n"), "Kernel panic - not syncing: x")

    def test_closing_takes_the_last_line_of_that_suite(self):
        text = "selftest: 1 passed, 2 failed\nktest: 5 passed, 1 failed\nktest: 6 passed, 0 failed\r\n"
        self.assertEqual(console.closing(text, "ktest"), (6, 0))
        self.assertEqual(console.closing(text, "selftest"), (1, 2))
        self.assertIsNone(console.closing(text, "other"))

    def test_guest_lines_by_prefix(self):
        text = "[vm0] a\r\n[vm1] b\nvmm: c\n[vm0] d\n"
        self.assertEqual(console.guest_lines(text, 0), ["a", "d"])
        self.assertEqual(console.guest_lines(text, 1), ["b"])
        self.assertEqual(console.guest_lines("x\r\ny\n"), ["x", "y"])

    def test_trace_table(self):
        t = console.trace_table(TRACE)
        self.assertEqual(t["ITLB_MISS"], {"count": 244367, "min": 24, "max": 1048, "avg": 711})
        self.assertEqual(set(t), {"SYSCALL_IPC", "ITLB_MISS"})

    def test_trace_table_with_exact_totals(self):
        text = ("vmm: vm0 trace points (cost in timebase ticks)\r\n"
                "vmm:   EMUL_MFMSR           3000  total        86401 avg    28\r\n"
                "vmm:   SYSCALL_IPC             2  total         1001 avg   500\r\n"
                "vmm:   GUEST_RUN            3003  total      1000000 avg   333\r\n")
        t = console.trace_table(text)
        self.assertEqual(t["EMUL_MFMSR"], {"count": 3000, "total": 86401, "min": None, "max": None, "avg": 28})
        self.assertEqual(console.exit_totals(t), (3002, 87402))
        self.assertEqual(console.row_total(t["GUEST_RUN"]), 1000000)
        # The older format has no exact total: count * avg.
        self.assertEqual(console.exit_totals(console.trace_table(TRACE)), (244379, 12 * 4 + 244367 * 711))

    def test_trace_tables_of_several_vms(self):
        two = "vmm: vm1: guest requested a reset\n" + TRACE.split("\n", 1)[1] + "[vm0] vmm: trace points\n[vm0] vmm:   DTLB_MISS 3 min 1 max 2 avg 1\n"
        tables = console.parse_trace_tables(two)
        self.assertEqual(sorted(tables), [0, 1])
        self.assertEqual(tables[0]["DTLB_MISS"]["count"], 3)
        with self.assertRaisesRegex(console.ConsoleError, "no trace table for vm2"):
            console.trace_table(two, 2)
        with self.assertRaisesRegex(console.ConsoleError, "two trace tables for vm0"):
            console.parse_trace_tables(TRACE + TRACE)
        with self.assertRaisesRegex(console.ConsoleError, "outside a table"):
            console.parse_trace_tables("vmm:   ITLB_MISS 1 min 1 max 1 avg 1\n")


if __name__ == "__main__":
    unittest.main()
