#!/usr/bin/env bash
# Boots the Linux guest natively (no Kestrel) on QEMU's bamboo; builds nothing.
#
#   guests/linux/run-native.sh [--script NAME] [--timeout SECS] [--icount] [--append ARGS]
#                              [--log FILE] [--mem MB] [-- EXTRA QEMU ARGS...]
#
# Without --script: an interactive busybox shell on the console (Ctrl-C goes to the guest,
# Ctrl-A x quits QEMU, `exit` powers the guest off). With --script NAME: /init runs
# /scripts/NAME from the initramfs (guests/linux/scripts/NAME) and powers off, and QEMU exits by
# itself; stdin is not read. --timeout kills QEMU after SECS of wall time (default: none for a
# shell, 300 for a script). --icount adds `-icount shift=0,sleep=off` (guest time counts
# instructions: time base ticks * 2.5 = instructions). --append adds kernel arguments after
# "console=ttyS0 panic=1". The console is teed to the log (default:
# target/logs/linux-native-{shell,NAME}.log).
#
# Exit status: with --script, 0 only when QEMU exited 0 and the log shows the script's
# "exited with status 0" line; otherwise QEMU's status (124 when the timeout ran out).
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    sed -n '2,19s/^# \{0,1\}//p' "$0"
}

script=
timeout_secs=
icount=false
append=
log=
mem=256
extra=()
while (($# > 0)); do
    case $1 in
        --script | --timeout | --append | --log | --mem)
            (($# >= 2)) || die "$1 needs a value"
            case $1 in
                --script) script=$2 ;;
                --timeout) timeout_secs=$2 ;;
                --append) append=$2 ;;
                --log) log=$2 ;;
                --mem) mem=$2 ;;
            esac
            shift 2
            ;;
        --icount)
            icount=true
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
        *)
            usage >&2
            die "unknown argument $1"
            ;;
    esac
done

if [[ -n $script ]]; then
    [[ $script =~ ^[A-Za-z0-9_.-]+$ ]] || die "--script wants a plain name, got '$script'"
    [[ -f $LINUX_GUEST_DIR/scripts/$script ]] ||
        die "no script guests/linux/scripts/$script (have: $(ls "$LINUX_GUEST_DIR/scripts" | tr '\n' ' '))"
    timeout_secs=${timeout_secs:-300}
fi
[[ -z $timeout_secs || $timeout_secs =~ ^[1-9][0-9]*$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"
[[ $mem =~ ^[1-9][0-9]*$ ]] || die "--mem wants megabytes, got '$mem'"

kernel=$LINUX_GUEST_OUT/vmlinux
initrd=$LINUX_GUEST_OUT/initramfs.cpio.gz
[[ -f $kernel && -f $initrd ]] || die "no $kernel or $initrd: run guests/linux/build.sh"
qemu_bin=${KESTREL_QEMU:-qemu-system-ppc}
need_tool "$qemu_bin"

cmdline="console=ttyS0 panic=1"
[[ -z $script ]] || cmdline+=" kestrel.script=$script"
[[ -z $append ]] || cmdline+=" $append"

if [[ -z $log ]]; then
    repo=$(cd "$LINUX_GUEST_DIR/../.." && pwd)
    log=${CARGO_TARGET_DIR:-$repo/target}/logs/linux-native-${script:-shell}.log
fi
mkdir -p "$(dirname "$log")"

# -serial twice: bamboo only creates UART1 when a second backend exists (the VMM's guest has
# the same two UARTs). -display none, not -nographic, which would also claim stdio for the
# monitor. -nic none: otherwise QEMU adds an e1000 on PCI. -no-reboot turns the guest's reset
# request (its power-off, see init) into QEMU exiting with status 0.
qemu=("$qemu_bin" -M bamboo -m "$mem" -display none -nic none -no-reboot)
if [[ -n $script ]]; then
    qemu+=(-serial stdio -serial null -monitor none)
else
    # Interactive: Ctrl-C must reach the guest's shell, not kill QEMU (signal=off); the mux
    # keeps Ctrl-A x (quit) and Ctrl-A c (monitor) as a way out.
    # shellcheck disable=SC2054  # the commas belong to QEMU's option values
    qemu+=(-chardev stdio,id=console,mux=on,signal=off -serial chardev:console -serial null
        -mon chardev=console)
fi
if $icount; then
    # shellcheck disable=SC2054
    qemu+=(-icount shift=0,sleep=off)
fi
qemu+=(-kernel "$kernel" -initrd "$initrd" -append "$cmdline" "${extra[@]}")

say "${qemu[*]}"
if [[ -z $script ]]; then
    say "interactive shell: 'exit' powers the guest off; Ctrl-A x quits QEMU; log $log"
fi

runner=()
if [[ -n $timeout_secs ]]; then
    # --foreground keeps QEMU in the terminal's process group (an interactive QEMU would
    # otherwise stop on SIGTTIN); --kill-after covers a QEMU that ignores SIGTERM.
    runner=(timeout --foreground --kill-after=5 "$timeout_secs")
fi

start_ns=$(date +%s%N)
set +e
if [[ -n $script ]]; then
    "${runner[@]}" "${qemu[@]}" </dev/null 2>&1 | tee "$log"
else
    "${runner[@]}" "${qemu[@]}" 2>&1 | tee "$log"
fi
status=${PIPESTATUS[0]}
set -e
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
wall=$(printf '%d.%03d' $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))

if ((status == 124)); then
    say "timeout: QEMU killed after ${timeout_secs} s (log: $log)"
    exit 124
fi
say "QEMU exited with status $status after $wall s (log: $log)"
if [[ -n $script ]]; then
    ((status == 0)) || exit "$status"
    # The banner's and /init's lines, stripped of the CR the serial console adds.
    if ! tr -d '\r' <"$log" | grep -qxF "kestrel-guest: script $script exited with status 0; powering off"; then
        say "error: the log does not show script $script exiting with status 0"
        exit 1
    fi
fi
exit "$status"
