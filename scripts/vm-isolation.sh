#!/usr/bin/env bash
# The two-VM isolation test: kestrel-vmm runs guests/isolation twice (vmm.vms=2). VM 0 (the
# writer) overwrites all of its RAM several times and then stores beyond it, so the VMM
# kills it; VM 1 (the checker) checksums its own RAM over and over, while the writer runs
# and after it was killed, and must always find the same checksum.
#
#   scripts/vm-isolation.sh [--timeout SECS]
#
# Builds nothing (scripts/build-target.sh -p kestrel-kernel -p kestrel-vmm -p
# kestrel-isolation). Passes, exit 0, only if: the checker prints `isolation: checksum unchanged
# over N rounds` and no FAIL line appears; the VMM logs `vmm: vm0: guest touched unbacked
# guest-physical ...; stopping it`; the checker had filled its RAM and finished a round before
# that line and finished rounds and its closing line after it; no kernel panic; QEMU exits
# with status 0 after `vmm: every VM has stopped`. Prints one line, `vm-isolation: PASS ...`
# or `vm-isolation: FAIL ...`. Timeout 30 s by default (a passing run takes a few seconds).
# Console log: target/logs/vm-isolation.log.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

timeout_secs=30
while (($# > 0)); do
    case $1 in
        --timeout)
            (($# >= 2)) || die "--timeout needs a value"
            timeout_secs=$2
            shift 2
            ;;
        -h | --help)
            sed -n '2,16s/^# \{0,1\}//p' "$0"
            exit 0
            ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ $timeout_secs =~ ^[1-9][0-9]*$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"

guest=$KESTREL_OUT/kestrel-isolation
vmm=$KESTREL_OUT/kestrel-vmm
build_hint="build them: scripts/build-target.sh -p kestrel-kernel -p kestrel-vmm -p kestrel-isolation"
[[ -f $guest ]] || die "no guest image at $guest ($build_hint)"
[[ -f $vmm ]] || die "no VMM at $vmm ($build_hint)"
log=$KESTREL_TARGET_DIR/logs/vm-isolation.log
mkdir -p "$(dirname "$log")"

# No stdin: nothing may wait for a keyboard in a test run. The console goes to the log only.
start=$EPOCHREALTIME
set +e
"$KESTREL_ROOT/scripts/vm-run.sh" "$guest" --vms 2 --timeout "$timeout_secs" --log "$log" \
    </dev/null >/dev/null 2>&1
status=$?
set -e
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

# Line numbers of the events that matter; 0 when absent. The UART may emit CR LF.
tr -d '\r' <"$log" >"$log.txt" 2>/dev/null || : >"$log.txt"
first() { grep -n -m1 -E "$1" "$log.txt" | cut -d: -f1 || true; }
count_between() { awk -v lo="$2" -v hi="$3" -v re="$1" 'NR > lo && NR < hi && $0 ~ re { n++ } END { print n + 0 }' "$log.txt"; }
done_line=$(first '^\[vm1\] isolation: checksum unchanged over [0-9]+ rounds$')
kill_line=$(first '^vmm: vm0: guest touched unbacked guest-physical .*; stopping it$')
fill_line=$(first '^\[vm1\] isolation: filled ')
round_re='^\[vm1\] isolation: round [0-9]+ checksum 0x[0-9a-f]+ unchanged$'

reasons=()
if fails=$(grep -m3 -E 'isolation: FAIL|^KERNEL PANIC' "$log.txt"); then
    reasons+=("$(tr '\n' ';' <<<"$fails" | sed 's/;$//')")
fi
[[ -n $done_line ]] || reasons+=("no checker line 'isolation: checksum unchanged over N rounds'")
[[ -n $kill_line ]] || reasons+=("no VMM line 'vmm: vm0: guest touched unbacked guest-physical ...; stopping it'")
before=0 after=0
if [[ -n $kill_line ]]; then
    before=$(count_between "$round_re" 0 "$kill_line")
    after=$(count_between "$round_re" "$kill_line" 1000000000)
    if [[ -z $fill_line || $fill_line -gt $kill_line || $before -eq 0 ]]; then
        reasons+=("the checker had not filled its RAM and finished a round before the writer was killed (no overlap)")
    fi
    if [[ -n $done_line && ($done_line -lt $kill_line || $after -eq 0) ]]; then
        reasons+=("the checker did not keep running after the writer was killed")
    fi
fi
if ((status == 124)); then
    if grep -q '^vmm: vm1: guest requested a reset; stopping it$' "$log.txt" && [[ -n $kill_line ]]; then
        reasons+=("both VMs were done (vm0 killed, vm1 reset) but QEMU did not exit within ${timeout_secs}s: no 'vmm: every VM has stopped' line")
    else
        reasons+=("timeout after ${timeout_secs}s")
    fi
elif ((status != 0)); then
    reasons+=("QEMU exited with status $status")
elif ! grep -q '^vmm: every VM has stopped; shutting down$' "$log.txt"; then
    reasons+=("QEMU exited without the VMM's 'every VM has stopped' line")
fi

if ((${#reasons[@]} == 0)); then
    rounds=$(sed -n "${done_line}s/.* over \([0-9]*\) rounds\$/\1/p" "$log.txt")
    passes=$(grep -c '^\[vm0\] isolation: writer pass ' "$log.txt" || true)
    echo "vm-isolation: PASS checker's checksum unchanged over $rounds rounds ($before reported before, $after after the writer was killed), writer made $passes passes over its RAM and was killed by the VMM, QEMU exited 0 in ${elapsed}s (log: $log)"
    exit 0
fi
grep -E '^(\[vm[0-9]\] isolation:|vmm: vm[0-9]: |vmm: every|kestrel: thread .* stopped)' "$log.txt" | sed 's/^/vm-isolation:   /' >&2 || true
msg=$(printf '%s; ' "${reasons[@]}")
echo "vm-isolation: FAIL ${msg%; } (${elapsed}s, log: $log)"
exit 1
