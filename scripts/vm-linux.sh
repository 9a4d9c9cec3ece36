#!/usr/bin/env bash
# Boots Linux in Kestrel VMs: kestrel-vmm runs the guest kernel (an ELF vmlinux), its initramfs
# and its command line, packed with the root task and the VMM into one boot-module archive (the
# VMM generates the device tree). By default the guest is the project's own (guests/linux,
# built here).
#
#   scripts/vm-linux.sh [N] [--vms N] [--kernel VMLINUX] [--initrd FILE] [--append ARGS]
#                       [--cmdline LINE] [--mem MB] [--native NAME]... [--kernel-args ARGS]
#                       [--script NAME] [--timeout SECS] [--icount] [--log FILE]
#                       [--ranks N PROG]
#
# The root task (kestrel-root) starts kestrel-vmm (root.start=kestrel-vmm). --native NAME also
# starts the native program NAME (an ELF in target/powerpc-440-none/release, e.g. kestrel-demo)
# beside the VMs; its console lines carry a `[NAME] ` prefix. QEMU exits when every program (the
# VMM and the native ones) has ended. --kernel-args ARGS adds ARGS to the Kestrel command line
# that the root task and its programs read (e.g. checksum.rounds=20).
# --ranks N PROG also runs a job beside the VMs: kestrel-linux starts N ranks (1 to 8) of the
# static Linux executable PROG at once (`linux.job=NAME:N`, docs/adr/0034-linux-personality.md);
# the ranks' lines carry `[kestrel-linux] NAME.R: `; a failing rank ends the job, not the VMs.
# The ranks and the fabric service run above the vCPUs (root.hpc=kestrel-linux,kestrel-fabric),
# so busy VMs do not hold the job back.
# N or --vms N boots N VMs at once (kestrel-vmm's `vmm.vms=N`, 1 to 4), each with its own RAM,
# vCPU and console; their lines are prefixed `[vmI] ` and Ctrl-] then a VM number moves the
# console input. QEMU exits when every VM powered off.
# --kernel and --initrd boot a guest of your own (a 32-bit big-endian PowerPC ELF, e.g. a
# 44x/bamboo_defconfig vmlinux; a zImage or uImage does not boot); without --initrd, your kernel
# gets none. --mem MB is each VM's RAM (default 64; `vmm.mem=MB`); it must hold the initrd
# (loaded at 25 MiB) and fit in Kestrel's 256 MiB beside the VMM: the launcher says what fits.
# The guest command line is the Linux guest's (LINUX_CMDLINE in tests/framework/constants.py),
# plus $KESTREL_GUEST_APPEND, plus --append, plus kestrel.script=NAME (as guests/linux/run-native.sh
# does); --cmdline replaces all of it.
# --script NAME runs /scripts/NAME of the project's initramfs and powers off (e.g. smoke);
# without it the guest starts an interactive shell (keyboard input goes to the VM; Ctrl-A x
# quits QEMU). --timeout: wall-clock limit (default 600 s with --script, none for a shell).
# The console log is target/logs/vm-linux-{shell,NAME}.log (or --log), the archive beside it.
# A thin wrapper around `scripts/kestrel_qemu.py vm`, which checks the inputs.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

script=
vms=1
timeout_secs=
kernel=
initrd=
append=
cmdline=
mem=
log=
extra=()
natives=()
kargs=
ranks=
rank_prog=
while (($# > 0)); do
    case $1 in
        --script | --vms | --timeout | --kernel | --initrd | --append | --cmdline | --mem | --log | --native | --kernel-args)
            (($# >= 2)) || die "$1 needs a value"
            case $1 in
                --script) script=$2 ;;
                --vms) vms=$2 ;;
                --timeout) timeout_secs=$2 ;;
                --kernel) kernel=$2 ;;
                --initrd) initrd=$2 ;;
                --append) append=$2 ;;
                --cmdline) cmdline=$2 ;;
                --mem) mem=$2 ;;
                --log) log=$2 ;;
                --native) natives+=("$2") ;;
                --kernel-args) kargs=$2 ;;
            esac
            shift 2
            ;;
        --ranks)
            (($# >= 3)) || die "--ranks needs N and PROG"
            ranks=$2
            rank_prog=$3
            shift 3
            ;;
        --icount) extra+=(--icount); shift ;;
        -h | --help) sed -n '2,34s/^# \{0,1\}//p' "$0"; exit 0 ;;
        [0-9]*) vms=$1; shift ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ -z $ranks || $ranks =~ ^[1-8]$ ]] || die "--ranks: from 1 to 8 ranks, got '$ranks'"
[[ -z $rank_prog || -f $rank_prog ]] || die "--ranks: no such file: $rank_prog"
[[ $vms =~ ^[1-9][0-9]*$ ]] || die "the number of VMs must be a whole number, got '$vms'"
[[ -z $mem || $mem =~ ^[1-9][0-9]*$ ]] || die "--mem wants megabytes, got '$mem'"
[[ -z $timeout_secs || $timeout_secs =~ ^[0-9]+$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"
# Checked here too, before the project's guest is built for a file that is missing anyway.
for f in "$kernel" "$initrd"; do
    [[ -z $f || -f $f ]] || die "no such file: $f"
done

if [[ -z $kernel ]]; then
    "$KESTREL_ROOT/guests/linux/build.sh"
fi
out=$KESTREL_ROOT/guests/linux/out
if [[ -z $kernel ]]; then
    kernel=$out/vmlinux
    initrd=${initrd:-$out/initramfs.cpio.gz}
fi
args=(vm --guest "$kernel" --vms "$vms" --mem 256
    --log "${log:-$KESTREL_TARGET_DIR/logs/vm-linux-${script:-shell}.log}")
if [[ -n $cmdline ]]; then
    args+=(--cmdline "$cmdline")
else
    # The launcher writes the Linux guest's command line and leaves out empty parts.
    args+=(--linux-append "${KESTREL_GUEST_APPEND:-}" --linux-append "$append"
        --linux-append "${script:+kestrel.script=$script}")
fi
[[ -z $initrd ]] || args+=(--initrd "$initrd")
[[ -z $mem ]] || args+=(--vm-mem "$mem")
[[ -z $kargs ]] || args+=(--append "$kargs")
if [[ -n $ranks ]]; then
    rank_name=$(basename "$rank_prog")
    args+=(--program "kestrel-linux=$KESTREL_OUT/kestrel-linux" --module "$rank_name=$rank_prog"
        --append "linux.job=$rank_name:$ranks root.hpc=kestrel-linux,kestrel-fabric")
fi
for n in "${natives[@]}"; do
    args+=(--program "$n=$KESTREL_OUT/$n")
done
if [[ -z $script ]]; then
    args+=(--interactive)
    hint="'exit' powers a VM off; Ctrl-A x quits QEMU"
    ((vms == 1)) || hint="$hint; Ctrl-] then a VM number (0-$((vms - 1))) moves the keyboard"
    args+=(--hint "interactive shell in $vms VM(s): $hint")
fi
timeout_secs=${timeout_secs:-$([[ -n $script ]] && echo 600 || echo 0)}
exec python3 "$KESTREL_ROOT/scripts/kestrel_qemu.py" "${args[@]}" --timeout "$timeout_secs" "${extra[@]}"
