"""Linux VMs copying files over the BG/P interconnect and the virtio NIC: one client VM fetches
files of random bytes from a server VM with busybox wget/httpd over a chosen path and compares
MD5s. Used by tests/functional/test_net_paths.py and tests/security/test_device_attacker.py.

Paths: `torus` and `collective` (kestrel_bgnet's transport parameter, set in both VMs), `virtio`
(the virtio-mmio NIC). Addresses are framework/linux.py's plan (by VM number)."""
from __future__ import annotations

import time

from . import linux
from .console import Failure
from .machine import Machine

PORT = 8080


class Session:
    """The running VMs of `m` (started with an interactive console for `timeout` seconds):
    `server` serves files named by `sizes_kib` ({name: KiB}), `client` fetches them."""

    def __init__(self, m: Machine, timeout: float, *, server: int = 0, client: int = 1,
                 sizes_kib: dict[str, int] | None = None):
        self.machine = m
        self.deadline = time.monotonic() + timeout
        self.con = m.start(int(timeout))
        self.server, self.client = server, client
        self.sizes = sizes_kib or {}
        self.names: dict[int, dict[str, str]] = {}
        self.md5: dict[str, str] = {}

    def wait_for_shells(self, vms: list[int]) -> None:
        for vm in vms:
            self.con.wait_for(rf"\[vm{vm}\] [^\n]*kestrel:/# ", self.deadline)
        time.sleep(1)

    def interfaces(self, vm: int) -> dict[str, tuple[str, str]]:
        """{driver: (name, mac)} of VM `vm`'s network interfaces (lo excluded)."""
        _, out = self.con.run(
            vm, "for i in /sys/class/net/*; do n=${i##*/}; [ $n = lo ] && continue; "
            "echo NETIF $n $(basename $(readlink $i/device/driver) 2>/dev/null) $(cat $i/address); done", 30)
        return {f[2]: (f[1], f[3]) for f in (line.split() for line in out) if len(f) == 4 and f[0] == "NETIF"}

    def configure(self, vm: int) -> None:
        """Brings VM `vm`'s interfaces up with the plan's addresses (whatever /init did)."""
        names = {}
        for driver, (name, _mac) in self.interfaces(vm).items():
            if "bgnet" in driver:
                names["bgnet"], addr = name, linux.bgnet_addr(vm)
            elif "virtio" in driver:
                names["virtio"], addr = name, linux.virtio_addr(vm)
            else:
                continue
            rc, out = self.con.run(vm, f"ip addr flush dev {name}; ip addr add {addr}/24 dev {name} "
                                       f"&& ip link set {name} up", 30)
            assert rc == 0, f"vm{vm}: cannot bring up {name} ({driver}): {' | '.join(out)}"
        self.names[vm] = names

    def serve(self) -> None:
        """Configures both VMs, creates the files in the server and starts its httpd."""
        for vm in (self.server, self.client):
            self.configure(vm)
        rc, out = self.con.run(
            self.server, "mkdir -p /tmp/www && "
            + " && ".join(f"dd if=/dev/urandom of=/tmp/www/{n} bs=1024 count={k} 2>/dev/null"
                          for n, k in self.sizes.items())
            + " && md5sum " + " ".join(f"/tmp/www/{n}" for n in self.sizes)
            + f" && httpd -p {PORT} -h /tmp/www", 120)
        self.md5 = {f[1][len("/tmp/www/"):]: f[0] for f in (line.split() for line in out)
                    if len(f) == 2 and f[1].startswith("/tmp/www/")}
        assert rc == 0 and sorted(self.md5) == sorted(self.sizes), \
            f"vm{self.server} could not create and serve the files: {out}"

    def transfer(self, path: str, name: str, step: float) -> str:
        """Pings the server and copies file `name` over `path`; what was copied."""
        kind = "virtio" if path == "virtio" else "bgnet"
        for vm in (self.server, self.client):
            assert kind in self.names[vm], f"no {kind} interface in vm{vm}"
        server = linux.virtio_addr(self.server) if path == "virtio" else linux.bgnet_addr(self.server)
        if path != "virtio":
            for vm in (self.server, self.client):
                rc, out = self.con.run(vm, f"echo {path} > /sys/module/kestrel_bgnet/parameters/transport", 20)
                assert rc == 0, f"cannot set transport={path} in vm{vm}: {' | '.join(out)}"
        rc, out = self.con.run(self.client, f"ping -c 3 -W 5 {server}", 60)
        assert rc == 0, (f"ping vm{self.client} -> vm{self.server} failed "
                         f"({' | '.join(l for l in out if 'packet' in l) or rc})")
        t0 = time.monotonic()
        rc, out = self.con.run(self.client, f"rm -f /tmp/g; wget -q -O /tmp/g http://{server}:{PORT}/{name}; "
                                            "echo WGET $?; md5sum /tmp/g", step)
        wget = [l for l in out if l.startswith("WGET ")]
        assert wget and wget[0] == "WGET 0", f"copy failed (wget: {' | '.join(out)[-300:]})"
        got = [l.split()[0] for l in out if l.endswith("/tmp/g") and len(l.split()) == 2]
        assert got and got[0] == self.md5[name], \
            f"checksum differs: sent {self.md5[name]}, received {got[0] if got else 'nothing'}"
        return f"{self.sizes[name]} KiB in {time.monotonic() - t0:.1f} s, MD5 {self.md5[name]}"

    def recover(self) -> None:
        """After a failed step: interrupt what still runs in the client, so the next starts clean."""
        try:
            self.con.send(b"\x03")
            time.sleep(2)
            self.con.run(self.client, "true", 60)
        except Failure:
            pass

    def power_off(self, vms: list[int]) -> None:
        """Resets the Linux VMs `vms` (reboot -f: the VMM ends a VM that asks for a reset)."""
        for vm in vms:
            self.con.to(vm, self.deadline)
            pos = self.con.mark()
            self.con.send(b"reboot -f\n")
            self.con.wait_for(rf"vmm: vm{vm}: guest requested a reset", self.deadline, pos)
