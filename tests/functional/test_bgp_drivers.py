"""The BG/P guest drivers (guests/linux/modules) in two Linux VMs checked against each other:
both run guests/linux/scripts/bgp-drivers with kestrel.bgp-peers=2, which checks that /init
loaded kestrel_bic and kestrel_coll, sends 20 self-addressed collective packets and 8 to the
other VM on each VC that no driver owns, and expects every one back intact through the BIC's
interrupts. Passes when both VMs print `bgp-drivers: PASS` and QEMU exits 0.
Log: target/logs/tests/test_bgp_drivers/console.log."""
import pytest

from framework import console, linux

TIMEOUT = 300


@pytest.mark.timeout(TIMEOUT + 30)
def test_bgp_drivers(machine, elf, linux_guest, logs):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm"):
        elf(name)
    node = linux.vm_node(logs / "console.bootmod", "bgp-drivers", vms=2, append="kestrel.bgp-peers=2")
    status, text = machine(node).run(TIMEOUT)
    seen = [l for l in console.lines(text) if "bgp-drivers: " in l or "kestrel-guest: loaded" in l]
    for vm in (0, 1):
        assert "bgp-drivers: PASS" in console.guest_lines(text, vm), \
            f"VM {vm} did not pass:\n" + "\n".join(seen)
    assert status == 0, f"QEMU exited with status {status}"
