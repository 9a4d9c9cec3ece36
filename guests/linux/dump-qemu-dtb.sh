#!/usr/bin/env bash
# Prints, as DTS, the device tree QEMU's bamboo hands the guest kernel natively: the reference
# for the tree Kestrel's VMM generates.
#
#   guests/linux/dump-qemu-dtb.sh [--mem MB] [--append ARGS] [--dtb FILE]
#
# Starts QEMU paused (-S, scripts/kestrel_qemu.py's monitor console) with the same machine, memory, kernel, initrd and command line as
# run-native.sh, saves guest memory at 0x1800000 (where QEMU puts the FDT, r3 at entry) through
# the monitor, and decompiles it with dtc. The tree is QEMU's /usr/share/qemu/bamboo.dtb with
# /memory, /chosen (bootargs, initrd) and the clock frequencies patched. --dtb keeps the binary.
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mem=256
append=
dtb=
while (($# > 0)); do
    case $1 in
        --mem | --append | --dtb)
            (($# >= 2)) || die "$1 needs a value"
            case $1 in
                --mem) mem=$2 ;;
                --append) append=$2 ;;
                --dtb) dtb=$2 ;;
            esac
            shift 2
            ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done

need_tool "${KESTREL_QEMU:-qemu-system-ppc}" dtc
kernel=$LINUX_GUEST_OUT/vmlinux
initrd=$LINUX_GUEST_OUT/initramfs.cpio.gz
[[ -f $kernel && -f $initrd ]] || die "no $kernel or $initrd: run guests/linux/build.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The monitor parses a bare path as an expression ("/" divides), hence the quotes.
printf 'pmemsave 0x1800000 0x10000 "%s"\nquit\n' "$tmp/fdt.bin" |
    python3 "$LINUX_GUEST_DIR/../../scripts/kestrel_qemu.py" native --console monitor --quiet \
        --timeout 30 --log "$tmp/monitor.log" --mem "$mem" --kernel "$kernel" --initrd "$initrd" \
        --linux-append "$append" >/dev/null
[[ -s $tmp/fdt.bin ]] || die "QEMU saved no memory at 0x1800000"
[[ -z $dtb ]] || cp "$tmp/fdt.bin" "$dtb"
dtc -q -I dtb -O dts "$tmp/fdt.bin"
