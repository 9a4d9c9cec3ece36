"""Unit tests of framework/vmdiag.py's checks: a console of a good run passes, and the console the
bugs of issue 9 (findings 3 to 5) produced fails each check."""
import unittest

from framework import vmdiag as vd

# A run of guests/vmdiag after the fixes (target/logs/vm-diagnostics.log, CRs and empty lines
# dropped).
GOOD = """\
Kestrel microkernel for PowerPC 440 (ABI v1)
kestrel: 128 MiB RAM, timebase 400 MHz, kernel 0x100000..0x7b5000, pool 16684 KiB, boot module 4783 KiB
kestrel: root task entry 0x10000000, 100580 KiB free for it
root: started kestrel-vmm (thread 65.1, 2224 KiB image, may create vCPUs)
vmm: console input goes to vm0; Ctrl-] then a VM number (0-1) switches
[vm0] vmdiag: vm0 accessing unknown SPRs 1008/1009 400 times
vmm: vm0: unhandled instruction 0x7c70fba6 (Mtspr { spr: Spr(1008), rs: Gpr(3) }) at pc 0x008002ec: program exception
vmm: vm0: unhandled instruction 0x7cb1faa6 (Mfspr { rt: Gpr(5), spr: Spr(1009) }) at pc 0x008002f0: program exception
vmm: vm0: unhandled instruction 0x7c70fba6 (Mtspr { spr: Spr(1008), rs: Gpr(3) }) at pc 0x008002ec: program exception
vmm: vm0: unhandled instruction 0x7cb1faa6 (Mfspr { rt: Gpr(5), spr: Spr(1009) }) at pc 0x008002f0: program exception
vmm: vm0: unhandled instruction 0x7c70fba6 (Mtspr { spr: Spr(1008), rs: Gpr(3) }) at pc 0x008002ec: program exception
vmm: vm0: unhandled instruction 0x7cb1faa6 (Mfspr { rt: Gpr(5), spr: Spr(1009) }) at pc 0x008002f0: program exception
vmm: vm0: unhandled instruction 0x7c70fba6 (Mtspr { spr: Spr(1008), rs: Gpr(3) }) at pc 0x008002ec: program exception
vmm: vm0: unhandled instruction 0x7cb1faa6 (Mfspr { rt: Gpr(5), spr: Spr(1009) }) at pc 0x008002f0: program exception
vmm: vm0: that was the first 8 of unhandled instructions; further ones are counted, not logged
[vm0] vmdiag: vm0 took 400 program exceptions for 400 unknown-SPR accesses
[vm0] vmdiag: vm0 writing its time base 4000 times (TBU 0xffffff00 and back)
[vm1] vmdiag: vm1 reading its time base 3000000 times
[vm0] vmdiag: vm0 wrote its time base 4000 times and read back what it wrote
vmm: vm0: 392 more unhandled instructions not logged (400 in all)
vmm: vm0 trace points (cost in timebase ticks)
vmm:   SYSCALL_IPC             933  min     0 max    420 avg    81
vmm:   ITLB_MISS                 3  min   101 max    120 avg   113
vmm:   EMUL_RFI                400  min    26 max     27 avg    26
vmm:   EMUL_TLBWE                3  min   130 max    162 avg   145
vmm:   EMUL_MFSPR             1200  min    27 max     28 avg    27
vmm:   EMUL_MTSPR            25203  min    29 max    110 avg    93
vmm:   PAGEFAULT_IPC             1  min     0 max      0 avg     0
vmm: vm0: guest requested a reset; stopping it
[vm1] vmdiag: vm1 time base never went back, largest step 3933857 ticks
[vm1] vmdiag: vm1 jumping to 0xef600014 in UART0's page; the VMM should stop this VM
vmm: vm1: guest fetched an instruction from device memory at guest-physical 0xef600014 (page of uart0, uart1) (pc 0xef600014); stopping it
kestrel: thread 67.1 (vm1.vcpu0) stopped: killed by its fault handler 65.1
vmm: every VM has stopped; shutting down
root: kestrel-vmm exited (code 0)
root: every program has ended; stopping the machine
kestrel: shutdown (code 0)
"""

UNHANDLED = ("vmm: vm0: unhandled instruction 0x7c70fba6 (Mtspr {{ spr: Spr(1008), rs: Gpr(3) }}) "
             "at pc 0x008002ec: program exception")


def before_the_fixes(console: str) -> str:
    """The same run as the bugs logged it: every unhandled instruction in full and no summary,
    EMUL_MTSPR's cost poisoned by the time-base writes, the fetch reported as unbacked memory,
    and the vCPU thread without a name."""
    out = []
    for line in console.splitlines():
        if line.startswith("vmm: vm0: unhandled instruction") or line.startswith("vmm: vm0: that was"):
            continue
        if "more unhandled instructions not logged" in line:
            continue
        if line.startswith("vmm:   EMUL_MTSPR"):
            line = "vmm:   EMUL_MTSPR            25203  min     0 max 4294967295 avg 440618"
        line = line.replace("guest fetched an instruction from device memory at guest-physical 0xef600014 "
                            "(page of uart0, uart1)", "guest touched unbacked guest-physical 0xef600014")
        line = line.replace("(vm1.vcpu0)", "()")
        out.append(line)
        if line.startswith("[vm0] vmdiag: vm0 accessing unknown SPRs"):
            out += [UNHANDLED.format()] * vd.SPR_ACCESSES
    return "\n".join(out) + "\n"


class Checks(unittest.TestCase):
    def test_a_good_run_passes(self):
        self.assertEqual(vd.check(GOOD), [])

    def test_the_bugs_fail_every_check(self):
        bad = before_the_fixes(GOOD)
        self.assertTrue(any("lines in full" in b for b in vd.check_rate_limit(bad.splitlines())))
        self.assertTrue(any("no summary line" in b for b in vd.check_rate_limit(bad.splitlines())))
        self.assertTrue(any("EMUL_MTSPR costs 4294967295 ticks" in b for b in vd.check_time(bad)))
        self.assertTrue(any("EMUL_MTSPR averages 440618 ticks" in b for b in vd.check_time(bad)))
        msgs = vd.check_messages(bad.splitlines())
        self.assertEqual(len(msgs), 3, msgs)

    def test_a_poisoned_exit_fails_in_the_exact_total_format(self):
        # The table keeps count and exact total only: one 4294967295-tick exit among the
        # 25,203 lifts EMUL_MTSPR's average to about 170,000 ticks.
        good = GOOD.replace("vmm:   EMUL_MTSPR            25203  min    29 max    110 avg    93",
                            "vmm:   EMUL_MTSPR            25203  total      2343879 avg    93")
        self.assertNotEqual(good, GOOD)
        self.assertEqual(vd.check_time(good), [])
        bad = good.replace("total      2343879 avg    93", "total   4297311174 avg 170508")
        self.assertTrue(any("EMUL_MTSPR averages 170508 ticks" in b for b in vd.check_time(bad)))

    def test_a_summary_that_loses_events_fails(self):
        bad = GOOD.replace("392 more unhandled instructions not logged (400 in all)",
                           "391 more unhandled instructions not logged (399 in all)")
        self.assertEqual(len(vd.check_rate_limit(bad.splitlines())), 2)

    def test_time_that_jumps_in_another_vm_fails(self):
        bad = GOOD.replace("vm1 time base never went back", "FAIL vm1 time base went back 3 times")
        self.assertTrue(vd.check(bad))

    def test_a_timeout_fails(self):
        self.assertEqual(vd.check(GOOD, 124), ["timeout"])


if __name__ == "__main__":
    unittest.main()
