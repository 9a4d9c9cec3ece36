#!/usr/bin/env bash
# Runs the bare-metal test guest natively on -M bamboo and as a VM under Kestrel, and
# fails unless both runs finish with "selftest: N passed, 0 failed" and print the same
# "selftest:" lines.
#
#   scripts/guest-compare.sh [--no-build] [--timeout SECS]
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build=true
timeout_secs=120
while (($# > 0)); do
    case $1 in
        --no-build) build=false; shift ;;
        --timeout) timeout_secs=$2; shift 2 ;;
        *) die "unknown option $1" ;;
    esac
done
if $build; then
    "$KESTREL_ROOT/scripts/build-target.sh" -p kestrel-kernel -p kestrel-root -p kestrel-vmm -p kestrel-selftest
fi
logs=$KESTREL_TARGET_DIR/logs
mkdir -p "$logs"
guest=$KESTREL_OUT/kestrel-selftest

echo "guest-compare: native run"
python3 "$KESTREL_ROOT/scripts/kestrel_qemu.py" native --kernel "$guest" --mem 128 --quiet \
    --timeout "$timeout_secs" --log "$logs/selftest-native.log" </dev/null >/dev/null 2>&1 ||
    die "native run failed or timed out (log: $logs/selftest-native.log)"
vm_run() {
    "$KESTREL_ROOT/scripts/vm-run.sh" "$guest" --timeout "$timeout_secs" --log "$logs/selftest-vm.log" \
        </dev/null >/dev/null 2>&1 || die "VM run failed or timed out (log: $logs/selftest-vm.log)"
}
echo "guest-compare: VM run"
vm_run
# The guest's timer tests wait for interrupts within fixed windows of host time (QEMU
# runs without -icount here: the guest's debug test needs rfci, which QEMU 7.2 cannot do
# under -icount). In a VM, timer interrupts are delivered at the next kernel tick (1 ms),
# and a host that stalls QEMU can make a short window miss. Such a run is repeated once,
# and said so; any other failure, or a second timer failure, fails the comparison.
if tr -d '\r' <"$logs/selftest-vm.log" | grep -q '^selftest: FAIL' &&
    ! tr -d '\r' <"$logs/selftest-vm.log" | grep '^selftest: FAIL' | grep -qv '^selftest: FAIL timer_'; then
    echo "guest-compare: VM run had only timer-window failures; repeating it once:"
    tr -d '\r' <"$logs/selftest-vm.log" | grep '^selftest: FAIL' | sed 's/^/guest-compare:   /'
    vm_run
fi

tr -d '\r' <"$logs/selftest-native.log" | grep '^selftest:' >"$logs/selftest-native.txt" || true
tr -d '\r' <"$logs/selftest-vm.log" | grep '^selftest:' >"$logs/selftest-vm.txt" || true
status=0
for mode in native vm; do
    closing=$(grep -E '^selftest: [0-9]+ passed, [0-9]+ failed$' "$logs/selftest-$mode.txt" | tail -n 1 || true)
    if [[ -z $closing ]]; then
        echo "guest-compare: $mode run has no closing line (log: $logs/selftest-$mode.log)" >&2
        status=1
    elif [[ $closing != *" 0 failed" ]]; then
        echo "guest-compare: $mode: $closing" >&2
        grep 'FAIL' "$logs/selftest-$mode.txt" >&2 || true
        status=1
    else
        echo "guest-compare: $mode: $closing"
    fi
done
# A test that QEMU itself gets wrong is skipped natively with a reason naming QEMU; the
# VM, which follows the Book E / PPC440 manuals, may pass it. Such SKIP -> PASS pairs are
# listed but are not differences. Everything else, line for line, must match.
normalize() {
    sed -E -e 's/^selftest: SKIP ([a-z0-9_]+): .*QEMU.*$/selftest: QEMU-DEFECT \1/' \
        -e '/^selftest: [0-9]+ passed, [0-9]+ failed$/d' "$1"
}
normalize "$logs/selftest-native.txt" >"$logs/selftest-native.norm"
normalize "$logs/selftest-vm.txt" >"$logs/selftest-vm.norm"
while read -r name; do
    if grep -qx "selftest: PASS $name" "$logs/selftest-vm.norm"; then
        echo "guest-compare: $name: skipped natively (QEMU defect), passes in the VM"
        sed -i "s/^selftest: PASS $name\$/selftest: QEMU-DEFECT $name/" "$logs/selftest-vm.norm"
    fi
done < <(sed -n 's/^selftest: QEMU-DEFECT //p' "$logs/selftest-native.norm")
if ! diff -u "$logs/selftest-native.norm" "$logs/selftest-vm.norm"; then
    echo "guest-compare: native and VM results differ" >&2
    status=1
else
    echo "guest-compare: native and VM results agree ($(grep -c . "$logs/selftest-vm.norm") tests)"
fi
grep -A30 'vmm: trace points' "$logs/selftest-vm.log" | tr -d '\r' | grep '^vmm:' || true
exit $status
