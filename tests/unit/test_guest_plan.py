"""The Linux guest's own files agree with framework/linux.py: the address plan /init applies,
the subnet the guest scripts use, the echo's address, and the command line run-native.sh and
vm-linux.sh no longer write themselves."""
import re

from framework import linux

INIT = (linux.LINUX_DIR / "init").read_text()
NET_COMMON = (linux.LINUX_DIR / "scripts" / "net-common").read_text()


def test_init_gives_the_plans_addresses():
    plan = dict(re.findall(r"^\s*(virtio|bgnet)\) addr=([\d.]+)\.\$\(\(k \+ 1\)\) ;;$", INIT, re.M))
    assert plan == {"virtio": linux.VIRTIO_NET, "bgnet": linux.BGNET_NET}


def test_scripts_use_the_script_subnet():
    assert f'ip addr add "{linux.SCRIPT_NET}.$(($2 + 1))/24"' in NET_COMMON
    echo = (linux.LINUX_DIR / "scripts" / "fabric-echo").read_text()
    assert f"net_param echo_ip {linux.ECHO_IP}" in echo


def test_wrappers_leave_the_command_line_to_the_launcher():
    for path in (linux.ROOT / "scripts" / "vm-linux.sh", linux.LINUX_DIR / "run-native.sh",
                 linux.LINUX_DIR / "dump-qemu-dtb.sh"):
        code = [l for l in path.read_text().splitlines() if not l.lstrip().startswith("#")]
        assert not any(linux.LINUX_CMDLINE in l for l in code), f"{path} writes the guest command line"
        assert any("--linux-append" in l for l in code), path
