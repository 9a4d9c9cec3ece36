#!/usr/bin/env bash
# Boots a guest in a VM: the Kestrel kernel, the root task (kestrel-root), the VMM (kestrel-vmm,
# which the root task starts: root.start=kestrel-vmm) and the guest image, packed into one
# boot-module archive for QEMU's -initrd.
#
#   scripts/vm-run.sh GUEST_ELF [kestrel_qemu.py vm options...]
#
# GUEST_ELF is a path, or a file name in target/powerpc-440-none/release/. Builds nothing
# (see scripts/build-target.sh). A thin wrapper around `scripts/kestrel_qemu.py vm` (options:
# --timeout, --icount, --interactive, --log, --mem, --kernel, --append, --vms, --program NAME=ELF,
# -- QEMU ARGS, where an -append joins the kernel command line; see its --help). The console
# log is target/logs/vm-<guest>.log, the archive beside it (.bootmod).
set -euo pipefail
(($# >= 1)) || {
    echo "usage: vm-run.sh GUEST_ELF [kestrel_qemu.py vm options...]" >&2
    exit 2
}
guest=$1
shift
exec python3 "$(dirname "${BASH_SOURCE[0]}")/kestrel_qemu.py" vm --guest "$guest" "$@"
