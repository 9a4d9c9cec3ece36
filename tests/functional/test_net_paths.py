"""Linux VMs on the BG/P interconnect: ping and copy a file over every network path.

One QEMU boots three VMs (interactive consoles; `Ctrl-] N` moves the keyboard). Each has the
bgnet interface (Ethernet over the torus DMA and the collective, kestrel_bgnet.ko) and the
virtio NIC (virtio-mmio, Linux's virtio_net), both on the VMM's fabric, with the addresses of
framework/linux.py's plan. VM 0 serves files of random bytes with busybox httpd; VM 1 pings VM 0
and fetches a file with wget over each path in turn, comparing the copy's MD5 with the
original's:

- bgnet/torus       (kestrel_bgnet transport=torus: torus DMA memory-FIFO messages), 2 MiB
- bgnet/collective  (transport=collective: collective point-to-point packets), 256 KiB: a
                    trap-and-emulated guest moves a collective packet in about 130 exits, so
                    2 MiB took about ten minutes on a shared 2-core host (bgp-interconnect.md 2.8)
- virtio            (the virtio-mmio NIC: frames through the fabric's frame layer), 2 MiB

VM 2 then misuses the DMA: it programs a torus injection counter whose base lies outside its
RAM (busybox devmem on its DMA group page); the VMM must refuse it and log the error for that
VM, while VMs 0 and 1 copy over bgnet/torus at the same time. Every test below shares the one
boot (module fixture); the last powers the VMs off and wants QEMU to exit 0.
Log: target/logs/tests/net/console.log."""
from __future__ import annotations

import time

import pytest

from framework import constants, linux, qemu
from framework.console import Failure
from framework.machine import Machine
from framework.netcopy import Session

TIMEOUT = 1500
STEP = 400
VMS = 3
# 48 MiB each: three VMs fit beside Kestrel (the launcher checks what fits).
VM_MEM_MB = 48
SIZES_KIB = {"f": 2 * 1024, "c": 256}
PATHS = ("torus", "collective", "virtio")


@pytest.fixture(scope="module")
def net(linux_guest, elf):
    for name in ("kestrel-kernel", "kestrel-root", "kestrel-vmm"):
        elf(name)
    logs = qemu.logs_dir() / "tests" / "net"
    node = linux.vm_node(logs / "console.bootmod", vms=VMS, vm_mem_mb=VM_MEM_MB, console="interactive")
    m = Machine(node, logs / "console.log")
    try:
        s = Session(m, TIMEOUT, server=0, client=1, sizes_kib=SIZES_KIB)
        s.wait_for_shells(list(range(VMS)))
        s.serve()
        yield s
    finally:
        m.kill()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.timeout(TIMEOUT)
def test_copy(net, path):
    try:
        print(f"{path}: {net.transfer(path, 'c' if path == 'collective' else 'f', STEP)}")
    except AssertionError:
        net.recover()
        raise


@pytest.mark.timeout(TIMEOUT)
def test_out_of_ram_dma_is_refused(net):
    """VM 2 writes an injection counter base outside its RAM while VM 1 copies from VM 0."""
    page = constants.DMA_BASE + constants.DMA_VM_GROUP * constants.DMA_GROUP_SIZE
    ctr0_base = page + constants.DMA_INJ_CTR + constants.DMA_CTR_BASE
    # Far beyond the VM's RAM: 1 GiB, in 16-byte units.
    bad = (1 << 30) >> 4
    pos = net.con.mark()
    _, out = net.con.run(2, f"devmem {ctr0_base:#x} 32 {bad:#x}; devmem {ctr0_base:#x} 32", 30)
    read_back = [l for l in out if l.startswith("0x")]
    try:
        net.con.wait_for(r"vmm: vm2: interconnect: [^\n]*", time.monotonic() + 10, pos)
    except Failure:
        pytest.fail("the VMM logged no interconnect error for vm2's out-of-RAM counter base")
    assert not (read_back and int(read_back[-1], 16) == bad), \
        f"vm2 reads back its out-of-RAM base {read_back[-1]}: the write was not refused"
    # The other VMs are unaffected: a copy over the torus completes.
    net.transfer("torus", "f", STEP)


@pytest.mark.timeout(TIMEOUT)
def test_power_off(net):
    net.power_off(list(range(VMS - 1, -1, -1)))
    assert net.machine.wait(net.deadline) == 0, "QEMU did not exit with status 0"
