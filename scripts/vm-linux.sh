#!/usr/bin/env bash
# Boots the unmodified Linux guest (guests/linux) in a Kestrel VM: kernel + kestrel-vmm +
# vmlinux + initramfs + guest command line in one boot-module archive (the VMM generates the
# device tree).
#
#   scripts/vm-linux.sh [--vms N] [--script NAME] [--timeout SECS] [--icount]
#
# --script NAME runs /scripts/NAME in the guest and powers off (e.g. smoke); without it the
# guest starts an interactive busybox shell. --vms N boots N VMs at once (kestrel-vmm's
# `vmm.vms=N`), each with its own RAM, vCPU and console; their lines are prefixed `[vmI] `
# and Ctrl-] then a VM number moves the console input. QEMU exits when every VM powered off.
#
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

script=
vms=1
timeout_secs=600
extra=()
while (($# > 0)); do
    case $1 in
        --script) script=$2; shift 2 ;;
        --vms) vms=$2; shift 2 ;;
        --timeout) timeout_secs=$2; shift 2 ;;
        --icount) extra+=(--icount); shift ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done
"$KESTREL_ROOT/guests/linux/build.sh"
out=$KESTREL_ROOT/guests/linux/out
# The guest's command line rides in the archive; kestrel-vmm writes it into the device tree
# it generates for each VM (vmm/devtree).
bootargs=$KESTREL_OUT/vm-linux.bootargs
printf '%s' "console=ttyS0 panic=1 nosmap${script:+ kestrel.script=$script}" >"$bootargs"
archive=$KESTREL_OUT/vm-linux.bootmod
python3 "$KESTREL_ROOT/scripts/mkbootmod.py" "$archive" "vmm=$KESTREL_OUT/kestrel-vmm" \
    "guest=$out/vmlinux" "initrd=$out/initramfs.cpio.gz" "bootargs=$bootargs"
exec "$KESTREL_ROOT/scripts/qemu-run.sh" "$archive" --mem 256 --timeout "$timeout_secs" "${extra[@]}" \
    -- -append "vmm.vms=$vms"
