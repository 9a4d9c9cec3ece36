#!/usr/bin/env bash
# Boots a guest in a VM: the Kestrel kernel, the VMM (kestrel-vmm) as root task and the
# guest image, packed into one boot-module archive for QEMU's -initrd.
#
#   scripts/vm-run.sh GUEST_ELF [qemu-run.sh options...]
#
# GUEST_ELF is a path, or a file name in target/powerpc-440-none/release/. Builds nothing
# (see scripts/build-target.sh). The archive is written next to the ELF files as
# vm-<guest>.bootmod.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(($# >= 1)) || die "usage: vm-run.sh GUEST_ELF [qemu-run.sh options...]"
guest=$1
shift
if [[ ! -e $guest && $guest != */* ]]; then
    guest=$KESTREL_OUT/$guest
fi
[[ -f $guest ]] || die "no guest image at $guest"
vmm=$KESTREL_OUT/kestrel-vmm
[[ -f $vmm ]] || die "no VMM at $vmm (build it: scripts/build-target.sh -p kestrel-vmm)"
archive=$KESTREL_OUT/vm-$(basename "$guest").bootmod
python3 "$KESTREL_ROOT/scripts/mkbootmod.py" "$archive" "vmm=$vmm" "guest=$guest"
exec "$KESTREL_ROOT/scripts/qemu-run.sh" "$archive" "$@"
