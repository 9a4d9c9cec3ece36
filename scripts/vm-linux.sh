#!/usr/bin/env bash
# Boots the unmodified Linux guest (guests/linux) in a Kestrel VM: kernel + kestrel-root +
# kestrel-vmm + vmlinux + initramfs + guest command line in one boot-module archive (the VMM
# generates the device tree; the root task starts the VMM: root.start=kestrel-vmm).
#
#   scripts/vm-linux.sh [--vms N] [--script NAME] [--timeout SECS] [--icount] [--native NAME]...
#                       [--kernel-args ARGS]
#
# --native NAME also starts the native program NAME (an ELF in target/powerpc-440-none/release,
# e.g. kestrel-demo) beside the VMs; its console lines carry a `[NAME] ` prefix. QEMU exits when
# every program (the VMM and the native ones) has ended. --kernel-args ARGS adds ARGS to the
# Kestrel command line that the root task and its programs read (e.g. checksum.rounds=20).
# --script NAME runs /scripts/NAME in the guest and powers off (e.g. smoke); without it the
# guest starts an interactive busybox shell (keyboard input goes to the VM; Ctrl-A x quits QEMU).
# --timeout: wall-clock limit (default 600 s with --script, none for a shell). The guest command
# line is "console=ttyS0 panic=1", plus $KESTREL_GUEST_APPEND, plus kestrel.script=NAME (the
# same as guests/linux/run-native.sh uses). --vms N boots N VMs at once (kestrel-vmm's
# `vmm.vms=N`), each with its own RAM, vCPU and console; their lines are prefixed `[vmI] `
# and Ctrl-] then a VM number moves the console input. QEMU exits when every VM powered off.
#
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

script=
vms=1
timeout_secs=
extra=()
natives=()
kargs=
while (($# > 0)); do
    case $1 in
        --native) natives+=("$2"); shift 2 ;;
        --kernel-args) kargs=" $2"; shift 2 ;;
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
printf "%s" "console=ttyS0 panic=1${KESTREL_GUEST_APPEND:+ $KESTREL_GUEST_APPEND}${script:+ kestrel.script=$script}" >"$bootargs"
archive=$KESTREL_OUT/vm-linux.bootmod
start=$KESTREL_ROOT_START
modules=("kestrel-root=$KESTREL_OUT/kestrel-root" "kestrel-vmm=$KESTREL_OUT/kestrel-vmm")
for n in "${natives[@]}"; do
    [[ -f $KESTREL_OUT/$n ]] || die "no native program $KESTREL_OUT/$n (build it: scripts/build-target.sh -p $n)"
    modules+=("$n=$KESTREL_OUT/$n")
    start="$start,$n"
done
python3 "$KESTREL_ROOT/scripts/mkbootmod.py" "$archive" "${modules[@]}" \
    "guest=$out/vmlinux" "initrd=$out/initramfs.cpio.gz" "bootargs=$bootargs"
if [[ -z $script ]]; then
    extra+=(--interactive)
    hint="'exit' powers a VM off; Ctrl-A x quits QEMU"
    ((vms == 1)) || hint="$hint; Ctrl-] then a VM number (0-$((vms - 1))) moves the keyboard"
    echo "vm-linux: interactive busybox shell in $vms VM(s): $hint" >&2
fi
timeout_secs=${timeout_secs:-$([[ -n $script ]] && echo 600 || echo 0)}
exec "$KESTREL_ROOT/scripts/qemu-run.sh" "$archive" --mem 256 --timeout "$timeout_secs" "${extra[@]}" \
    -- -append "$start vmm.vms=$vms$kargs"
