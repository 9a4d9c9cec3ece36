#!/usr/bin/env bash
# Boots a guest in a VM: the Kestrel kernel, the root task (kestrel-root), the VMM
# (kestrel-vmm, which the root task starts: root.start=kestrel-vmm) and the guest image,
# packed into one boot-module archive for QEMU's -initrd.
#
#   scripts/vm-run.sh GUEST_ELF [qemu-run.sh options...]
#
# GUEST_ELF is a path, or a file name in target/powerpc-440-none/release/. Builds nothing
# (see scripts/build-target.sh). The archive is written next to the ELF files as
# vm-<guest>.bootmod. An `-append ARGS` among the QEMU arguments (after --) is added to the
# kernel command line after root.start=kestrel-vmm.
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
root=$KESTREL_OUT/kestrel-root
[[ -f $vmm ]] || die "no VMM at $vmm (build it: scripts/build-target.sh -p kestrel-vmm)"
[[ -f $root ]] || die "no root task at $root (build it: scripts/build-target.sh -p kestrel-root)"
archive=$KESTREL_OUT/vm-$(basename "$guest").bootmod
python3 "$KESTREL_ROOT/scripts/mkbootmod.py" "$archive" "kestrel-root=$root" "kestrel-vmm=$vmm" "guest=$guest"
# Split our arguments at `--` and fold a QEMU -append into the root task's command line.
pre=()
post=()
append=$KESTREL_ROOT_START
seen=false
while (($# > 0)); do
    if ! $seen && [[ $1 == -- ]]; then
        seen=true
    elif $seen && [[ $1 == -append ]]; then
        (($# >= 2)) || die "-append needs a value"
        append="$append $2"
        shift
    elif $seen; then
        post+=("$1")
    else
        pre+=("$1")
    fi
    shift
done
exec "$KESTREL_ROOT/scripts/qemu-run.sh" "$archive" "${pre[@]}" -- "${post[@]}" -append "$append"
