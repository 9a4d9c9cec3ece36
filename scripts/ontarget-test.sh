#!/usr/bin/env bash
# Runs the on-target test suite (the ktest root task) under QEMU and judges its console output.
#
#   scripts/ontarget-test.sh [--timeout SECS] [--no-build]
#
# Builds the target ELF files (scripts/build-target.sh) unless --no-build, boots ktest with
# scripts/qemu-run.sh (default timeout 120 s) and fails, exit 1, when QEMU timed out or failed,
# the kernel printed a `KERNEL PANIC` line, the closing `ktest: N passed, M failed` line is
# missing, or M > 0. Its last line is the suite's closing line. The console log is
# target/logs/ktest.log.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

timeout_secs=120
build=true
while (($# > 0)); do
    case $1 in
        --timeout)
            (($# >= 2)) || die "--timeout needs a value"
            timeout_secs=$2
            shift 2
            ;;
        --no-build)
            build=false
            shift
            ;;
        -h | --help)
            sed -n '2,11s/^# \{0,1\}//p' "$0"
            exit 0
            ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

scripts=$KESTREL_ROOT/scripts
log=$KESTREL_TARGET_DIR/logs/ktest.log

if $build; then
    "$scripts/build-target.sh"
fi

fail() {
    echo "ontarget-test: FAILED: $*" >&2
    echo "ontarget-test: console log: $log" >&2
    exit 1
}

# No stdin: nothing may wait for a keyboard in a test run.
set +e
"$scripts/qemu-run.sh" ktest --timeout "$timeout_secs" --log "$log" </dev/null
status=$?
set -e

if ((status == 124)); then
    fail "ktest did not finish within ${timeout_secs}s"
fi
[[ -f $log ]] || fail "QEMU did not start (status $status)"

# The UART may emit CR LF; judge lines without the CR.
console=$(tr -d '\r' <"$log")

if panic=$(grep -m1 '^KERNEL PANIC' <<<"$console"); then
    fail "kernel panic: $panic"
fi
if ((status != 0)); then
    fail "QEMU exited with status $status"
fi

closing=$(grep -E '^ktest: [0-9]+ passed, [0-9]+ failed$' <<<"$console" | tail -n1) || true
[[ -n $closing ]] || fail "no closing 'ktest: N passed, M failed' line: the suite did not finish"

failed=${closing##*passed, }
failed=${failed%% failed}
if ((10#$failed > 0)); then
    grep '^ktest: FAIL ' <<<"$console" >&2 || true
    echo "$closing"
    fail "$failed on-target test(s) failed"
fi

if shutdown=$(grep -m1 '^kestrel: shutdown' <<<"$console"); then
    echo "ontarget-test: $shutdown" >&2
fi
echo "$closing"
