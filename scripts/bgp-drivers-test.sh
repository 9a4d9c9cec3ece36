#!/usr/bin/env bash
# Two Linux VMs check the BG/P guest drivers (guests/linux/modules) against each other: both run
# guests/linux/scripts/bgp-drivers with kestrel.bgp-peers=2, which checks that /init loaded
# kestrel_bic and kestrel_coll, sends 20 self-addressed collective packets and 8 to the other
# VM on each VC that no driver owns (kestrel_bgnet takes VC0 when it is loaded), and expects
# every one back intact through the BIC's interrupts.
#
#   scripts/bgp-drivers-test.sh [--no-build] [--timeout SECS]
#
# Passes (exit 0) when both VMs print "bgp-drivers: PASS" and QEMU exits 0; otherwise prints
# the guests' bgp-drivers lines and exits 1. The last line is a summary.
# Log: target/logs/bgp-drivers-test.log.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build=true
timeout_secs=300
while (($# > 0)); do
    case $1 in
        --no-build) build=false; shift ;;
        --timeout) (($# >= 2)) || die "--timeout needs a value"; timeout_secs=$2; shift 2 ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done
[[ $timeout_secs =~ ^[1-9][0-9]*$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"

logs=$KESTREL_TARGET_DIR/logs
mkdir -p "$logs"
if $build; then
    "$KESTREL_ROOT/scripts/build-target.sh" -p kestrel-kernel -p kestrel-root -p kestrel-vmm
    "$KESTREL_ROOT/guests/linux/build.sh" 2>"$logs/bgp-drivers-test-build.log" ||
        die "guests/linux/build.sh failed (log: $logs/bgp-drivers-test-build.log)"
fi
log=$logs/bgp-drivers-test.log

start=$SECONDS
set +e
"$KESTREL_ROOT/scripts/vm-linux.sh" 2 --script bgp-drivers --append "kestrel.bgp-peers=2" \
    --timeout "$timeout_secs" --log "$log" </dev/null >/dev/null 2>&1
status=$?
set -e
grep -aE '^\[vm[01]\] (bgp-drivers: |kestrel-guest: (loaded|insmod))' "$log" | tr -d '\r' || true
failed=()
((status == 0)) || failed+=("QEMU exited with status $status")
for vm in 0 1; do
    grep -aqF "[vm$vm] bgp-drivers: PASS" "$log" || failed+=("VM $vm did not pass")
done
if ((${#failed[@]} > 0)); then
    echo "bgp-drivers-test: FAIL after $((SECONDS - start)) s: ${failed[*]} (log: $log)"
    exit 1
fi
echo "bgp-drivers-test: OK: two VMs, BIC + collective drivers, self and peer packets on every VC no driver owns ($((SECONDS - start)) s)"
