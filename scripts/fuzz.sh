#!/usr/bin/env bash
# Runs Kestrel's fuzz targets (fuzz/, docs/adr/0017-fuzzing.md) with libFuzzer.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]   run TARGET (default: all, one after the other)
#                                            for SECONDS each (default 20), one process
#   scripts/fuzz.sh --list                   list the targets
#   scripts/fuzz.sh --build                  only build the fuzz binaries
#
# Engine: libfuzzer-sys (libFuzzer, compiled from source with the host C++ compiler) on
# Debian's stable Rust 1.96; coverage comes from LLVM's SanitizerCoverage, enabled with the
# stable flags `-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-*` (cargo-fuzz's
# sanitizers need nightly). Builds go to target/fuzz/ with debug assertions and overflow
# checks on. Each target starts from its committed seeds (fuzz/seeds/TARGET/, read only) and
# keeps what it learns in target/fuzz/corpus/TARGET/; a crashing input lands in
# target/fuzz/artifacts/TARGET/. To keep it as a regression test, copy it into
# fuzz/regressions/TARGET/: `cargo test -p kestrel-fuzz` replays it from then on.
# Progress lines (libFuzzer's INITED/pulse/DONE) are shown; full logs are in
# target/fuzz/logs/TARGET.log. Exits non-zero if any target found a failing input.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

targets=(decode vtlb guestcpu uart uic bic collective torus virtio_net vmm elf archive fdt codec fabric service)
target=all
seconds=20
build_only=false
case ${1:-} in
    -h | --help) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
    --build) build_only=true ;;
    "") ;;
    *) target=$1 ;;
esac
if [[ -n ${2:-} ]]; then
    [[ $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || die "SECONDS must be a positive number, not '$2'"
    seconds=$2
fi
if [[ $target != all ]]; then
    [[ " ${targets[*]} " == *" $target "* ]] || die "unknown target '$target' (scripts/fuzz.sh --list)"
    targets=("$target")
fi
command -v c++ >/dev/null || die "a C++ compiler (libFuzzer's build) is missing: run scripts/setup.sh"

host=$(/usr/bin/rustc -vV 2>/dev/null | sed -n 's/^host: //p')
[[ -n $host ]] || host=x86_64-unknown-linux-gnu
out=$KESTREL_TARGET_DIR/fuzz
# --target keeps the coverage flags off build scripts and proc macros (they would not link).
echo "fuzz: building the fuzz targets (libFuzzer, SanitizerCoverage) in $out"
RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing" \
    CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
    CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
    CARGO_TARGET_DIR=$out \
    "$KESTREL_CARGO" build --release --quiet -p kestrel-fuzz --features libfuzzer --bins \
    --target "$host"
$build_only && exit 0

bin=$out/$host/release
mkdir -p "$out/logs"
failed=()
summary=()
for t in "${targets[@]}"; do
    corpus=$out/corpus/$t
    artifacts=$out/artifacts/$t/
    log=$out/logs/$t.log
    mkdir -p "$corpus" "$artifacts"
    : >"$log"
    echo "fuzz: $t for ${seconds}s (corpus $corpus, seeds fuzz/seeds/$t)"
    status=0
    # One process; -timeout catches a hang, -rss_limit_mb a runaway allocation.
    "$bin/$t" "$corpus" "$KESTREL_ROOT/fuzz/seeds/$t" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts" >"$log" 2>&1 &
    pid=$!
    # Follow the log while the fuzzer runs: progress lines, and everything about a failure.
    tail -n +1 -f --pid=$pid "$log" |
        grep --line-buffered -E '#[0-9]+[[:space:]]+(INITED|pulse|DONE)|panicked|ERROR|SUMMARY|Test unit written|deadly signal' |
        sed -u "s/^/fuzz: $t: /" || true
    wait $pid || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(find "$corpus" -type f | wc -l)
    if ((status != 0)); then
        failed+=("$t")
        summary+=("$(printf '%-8s FAILED (exit %d): %s' "$t" "$status" "$(ls -t "$artifacts" | head -1)")")
    else
        summary+=("$(printf '%-8s %12s runs %8s/s  corpus %5d' "$t" "${runs:-?}" "${rate:-?}" "$units")")
    fi
done
echo "fuzz: summary (${seconds}s per target; logs in $out/logs/)"
printf 'fuzz:   %s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
    echo "fuzz: failing inputs in $out/artifacts/{$(IFS=,; echo "${failed[*]}")}/; replay one with" \
        "'$bin/TARGET FILE', keep it with 'cp FILE fuzz/regressions/TARGET/'" >&2
    exit 1
fi
