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
# the Linux guest's command line (LINUX_CMDLINE in tests/framework/constants.py) and
# kestrel.script=NAME. The console is teed to the log (default:
# target/logs/linux-native-{shell,NAME}.log).
#
# Exit status: with --script, 0 only when QEMU exited 0 and the log shows the script's
# "exited with status 0" line (else 1); otherwise QEMU's status (124 when the timeout ran out).
# A thin wrapper around `scripts/kestrel_qemu.py native`.
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


if [[ -z $log ]]; then
    repo=$(cd "$LINUX_GUEST_DIR/../.." && pwd)
    log=${CARGO_TARGET_DIR:-$repo/target}/logs/linux-native-${script:-shell}.log
fi

# The command line itself comes from scripts/kestrel_qemu.py (the one QEMU launcher).
args=(native --kernel "$kernel" --initrd "$initrd" --linux-append "${script:+kestrel.script=$script}"
    --linux-append "$append" --mem "$mem" --log "$log"
    --timeout "${timeout_secs:-0}")
if $icount; then
    args+=(--icount)
fi
launcher=$LINUX_GUEST_DIR/../../scripts/kestrel_qemu.py
if [[ -z $script ]]; then
    say "interactive shell: 'exit' powers the guest off; Ctrl-A x quits QEMU; log $log"
    exec python3 "$launcher" "${args[@]}" --interactive -- "${extra[@]}"
fi
# A script run reads no keyboard, and passes only when the guest says the script exited 0.
exec python3 "$launcher" "${args[@]}" \
    --expect "kestrel-guest: script $script exited with status 0; powering off" -- "${extra[@]}" </dev/null
