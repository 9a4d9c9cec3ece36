#!/usr/bin/env bash
# Boots the Kestrel kernel with one root task under QEMU's -M bamboo; builds nothing.
#
#   scripts/qemu-run.sh ROOTTASK [--timeout SECS] [--icount] [--interactive] [--log FILE]
#                       [--mem MB] [--kernel ELF] [-- EXTRA QEMU ARGS...]
#
# ROOTTASK is an ELF path, or a package name looked up in target/powerpc-440-none/release/.
# The kernel (default: that folder's kestrel-kernel, or $KESTREL_KERNEL) goes to -kernel, the
# root task to -initrd (QEMU loads it at 0x1900000). UART0 is the console on stdout, teed to the
# log (default target/logs/<roottask>.log); UART1 exists but is connected to nothing.
# --icount adds `-icount shift=0,sleep=off`: deterministic, instruction-driven guest time (benchmarks).
# --interactive: the console also takes keyboard input, Ctrl-C goes to the guest rather than
# killing QEMU, Ctrl-A x quits QEMU; --timeout 0 means no timeout.
#
# Exit status: QEMU's (0 after the kernel's own shutdown), or 124 when the wall-clock timeout
# (default 60 s) ran out.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    sed -n '2,17s/^# \{0,1\}//p' "$0"
}

timeout_secs=60
icount=false
interactive=false
log=
mem=128
kernel=${KESTREL_KERNEL:-$KESTREL_OUT/kestrel-kernel}
roottask=
extra=()
while (($# > 0)); do
    case $1 in
        --timeout | --log | --mem | --kernel)
            (($# >= 2)) || die "$1 needs a value"
            case $1 in
                --timeout) timeout_secs=$2 ;;
                --log) log=$2 ;;
                --mem) mem=$2 ;;
                --kernel) kernel=$2 ;;
            esac
            shift 2
            ;;
        --icount)
            icount=true
            shift
            ;;
        --interactive)
            interactive=true
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        --)
            shift
            extra=("$@")
            break
            ;;
        -*)
            usage >&2
            die "unknown option $1"
            ;;
        *)
            [[ -z $roottask ]] || die "only one root task, got '$roottask' and '$1'"
            roottask=$1
            shift
            ;;
    esac
done

[[ -n $roottask ]] || {
    usage >&2
    die "missing ROOTTASK"
}
[[ $timeout_secs =~ ^[0-9]+$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"
[[ $mem =~ ^[1-9][0-9]*$ ]] || die "--mem wants megabytes, got '$mem'"

# A bare name (no slash) that is not a file is a package: use its release ELF.
if [[ ! -e $roottask && $roottask != */* ]]; then
    roottask=$KESTREL_OUT/$roottask
fi
[[ -f $roottask ]] || die "no root task ELF at $roottask (build it: scripts/build-target.sh)"
[[ -f $kernel ]] || die "no kernel ELF at $kernel (build it: scripts/build-target.sh)"
command -v "$KESTREL_QEMU" >/dev/null || die "$KESTREL_QEMU not found: run scripts/setup.sh"

if [[ -z $log ]]; then
    log=$KESTREL_TARGET_DIR/logs/$(basename "$roottask").log
fi
mkdir -p "$(dirname "$log")"

# -serial is given twice because bamboo only creates UART1 (0xEF600400) when a second serial
# backend exists. -display none rather than -nographic: -nographic would also put the monitor
# on stdio, which clashes with the explicit `-serial stdio`. -no-reboot turns the kernel's
# DBCR0 system reset into a clean QEMU exit.
qemu=(
    "$KESTREL_QEMU" -M bamboo -m "$mem"
    -display none -nic none -no-reboot
)
if $interactive; then
    # Ctrl-C must reach the guest, not kill QEMU (signal=off); the mux keeps Ctrl-A x (quit).
    # shellcheck disable=SC2054  # the commas belong to QEMU's option values
    qemu+=(-chardev stdio,id=console,mux=on,signal=off -serial chardev:console -serial null
        -mon chardev=console)
else
    qemu+=(-serial stdio -serial null -monitor none)
fi
if $icount; then
    qemu+=(-icount shift=0,sleep=off)
fi
qemu+=(-kernel "$kernel" -initrd "$roottask" "${extra[@]}")

echo "qemu-run: ${qemu[*]}" >&2
echo "qemu-run: timeout ${timeout_secs}s (0: none), log $log" >&2

# --foreground: otherwise timeout moves QEMU into a process group of its own, where reading an
# interactive terminal stops it (SIGTTIN) and Ctrl-C does not reach it. --kill-after covers a
# QEMU that ignores SIGTERM.
start=$SECONDS
set +e
if ((timeout_secs == 0)); then
    "${qemu[@]}" 2>&1 | tee "$log"
else
    timeout --foreground --kill-after=5 "$timeout_secs" "${qemu[@]}" 2>&1 | tee "$log"
fi
status=${PIPESTATUS[0]}
set -e

if ((timeout_secs > 0 && (status == 124 || (status == 137 && SECONDS - start >= timeout_secs)))); then
    echo "qemu-run: TIMEOUT: QEMU still running after ${timeout_secs}s and was stopped (log: $log)" >&2
    exit 124
fi
if ((status != 0)); then
    echo "qemu-run: QEMU exited with status $status (log: $log)" >&2
fi
exit "$status"
