"""Tests of framework/hostile.py (the hostile-guest attack): the ELF patch and the console
watcher's verdicts."""
import struct
import unittest

from framework import hostile as ag

DONE = "[vm0] hostile: done seed 7 findings 0"


class PatchTest(unittest.TestCase):
    def test_patches_after_the_magic(self):
        elf = b"\x7fELF" + b"\0" * 12 + ag.MAGIC + b"\0" * 32 + b"tail"
        out = ag.patch_args(elf, 7, 1000, 16, devices=True)
        at = out.find(ag.MAGIC) + len(ag.MAGIC)
        self.assertEqual(struct.unpack_from(">QQQQ", out, at), (7, 1000, 16, 1))
        self.assertEqual(len(out), len(elf))
        self.assertTrue(out.endswith(b"tail"))

    def test_rejects_missing_or_repeated_magic(self):
        with self.assertRaises(ag.kq.LaunchError):
            ag.patch_args(b"no magic here", 1, 1, 1)
        with self.assertRaises(ag.kq.LaunchError):
            ag.patch_args(ag.MAGIC * 2 + b"\0" * 32, 1, 1, 1)


class WatchTest(unittest.TestCase):
    def feed(self, *lines):
        w = ag.Watch(hang=100, starve=100)
        for line in lines:
            w.line(line)
        return w

    def test_pass_needs_done_stop_and_a_later_round(self):
        w = self.feed("[vm1] neighbour: round 1 checksum 0x1 unchanged", DONE,
                      "vmm: vm0: guest requested a reset; stopping it")
        self.assertFalse(w.finished())
        w.line("[vm1] neighbour: round 2 checksum 0x1 unchanged\r")
        self.assertTrue(w.finished())
        self.assertIsNone(w.failure)

    def test_failures(self):
        for line in ("KERNEL PANIC: oops", "  ip 0x00000000 msr 0x0",
                     "kestrel: thread 70.1 (vcpu) stopped: bad",
                     "kestrel: thread 66.1 (vm0.vcpu0) halted: cannot emulate it",
                     "[vm1] neighbour: FAIL round 3: checksum 0x2, expected 0x1",
                     "vmm: vm1: guest touched unbacked guest-physical 0x2000000; stopping it",
                     "vmm: vm0: guest touched unbacked guest-physical 0x2000000; stopping it",
                     "qemu: fatal: Raised an exception without defined vector 94"):
            self.assertIsNotNone(self.feed(line).failure, line)

    def test_finding_is_recorded(self):
        w = self.feed("[vm0] hostile: FINDING own TLB entry 0 reads 0 0 0, wrote 1 2 3 (block 9)")
        self.assertEqual(len(w.findings), 1)

    def test_hang_and_starvation(self):
        w = ag.Watch(hang=0, starve=1000)
        w.last_progress -= 1
        w.tick()
        self.assertIn("hang", w.failure)
        w = ag.Watch(hang=1000, starve=0)
        w.last_round -= 1
        w.tick()
        self.assertIn("starvation", w.failure)


if __name__ == "__main__":
    unittest.main()
