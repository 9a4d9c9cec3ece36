#!/usr/bin/env bash
# Kestrel's lints: rustfmt and clippy over every crate, failing on any difference or warning.
#
#   scripts/lint.sh [--report]
#
# 1. `cargo fmt --all --check` (rustfmt's defaults: 100 columns; there is no rustfmt.toml).
# 2. clippy on the host crates (the workspace's default members, tests included).
# 3. clippy on the PowerPC 440 crates, the way scripts/build-target.sh builds them (-Zbuild-std
#    with the custom target; clippy-driver compiles core/alloc too, their lints stay quiet).
# Lint levels are the workspace's ([workspace.lints] in Cargo.toml, e.g. clippy's
# undocumented_unsafe_blocks); here every warning is an error. --report runs everything without
# failing (clippy's deny-by-default correctness lints count as warnings, so that crates
# depending on one with such a finding get checked too) and prints the warnings per crate.
# Needs Debian's rustfmt-web and rust-web-clippy (scripts/setup.sh installs them).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

report=false
case ${1:-} in
    --report) report=true ;;
    "") ;;
    -h | --help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
esac
[[ -x /usr/bin/cargo-clippy && -x /usr/bin/rustfmt ]] ||
    die "clippy or rustfmt is missing: run scripts/setup.sh (packages rust-web-clippy, rustfmt-web)"
cd "$KESTREL_ROOT"
# Debian's cargo finds its `fmt` and `clippy` subcommands and their drivers in /usr/bin.
export PATH=/usr/bin:$PATH
# Every member for the target (the host crates are no_std too and are the target crates'
# dependencies anyway), so a new program is linted without being listed here. Not
# kestrel-kcall, nor kestrel-mpi-c's feature `target`: they are built for Linux programs
# (powerpc-unknown-linux-gnu) and turn on kestrel-user's `linux` feature, which would reach
# every program of a shared build; they are linted on their own target (clippy_kcall), as
# build-kcall.sh and build-mpi-c.sh build them.
target_args=(--workspace --exclude kestrel-fuzz --exclude kestrel-kcall)
clippy_target() {
    RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" clippy --release \
        -Zbuild-std=core,compiler_builtins,alloc -Zbuild-std-features=compiler-builtins-mem \
        -Zjson-target-spec --target ukernel/powerpc-440-none.json "${target_args[@]}" "$@"
}
clippy_kcall() {
    CARGO_TARGET_POWERPC_UNKNOWN_LINUX_GNU_RUSTFLAGS=$KESTREL_LINUX_RUSTFLAGS \
    RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" clippy --release \
        -Zbuild-std=core,compiler_builtins,alloc -Zbuild-std-features=compiler-builtins-mem \
        --target powerpc-unknown-linux-gnu -p kestrel-kcall -p kestrel-mpi-c \
        --features kestrel-mpi-c/target "$@"
}

if $report; then
    log=$KESTREL_TARGET_DIR/logs/lint.log
    mkdir -p "$(dirname "$log")"
    unformatted=$("$KESTREL_CARGO" fmt --all --check -- -l 2>/dev/null | grep -c . || true)
    echo "lint: rustfmt: $unformatted file(s) not formatted"
    { "$KESTREL_CARGO" clippy --all-targets --message-format short -- -W clippy::correctness 2>&1 || true
      clippy_target --keep-going --message-format short -- -W clippy::correctness 2>&1 || true
      clippy_kcall --message-format short -- -W clippy::correctness 2>&1 || true; } >"$log"
    echo "lint: clippy warnings per crate (log: $log):"
    # Short messages read `path:line:col: warning: ...`; count them per crate folder.
    grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error)' "$log" | grep -v '^/usr/' | sort -u |
        sed -E 's#(/src/|/tests/|/benches/|/build\.rs).*##' | sort | uniq -c | sort -rn |
        sed 's/^/lint:   /' || echo "lint:   none"
    exit 0
fi

echo "lint: cargo fmt --all --check"
"$KESTREL_CARGO" fmt --all --check
echo "lint: clippy, host crates"
"$KESTREL_CARGO" clippy --all-targets -- -D warnings
echo "lint: clippy, PowerPC 440 crates"
clippy_target -- -D warnings
echo "lint: clippy, kestrel-kcall and libkestrel_mpi_c.a (powerpc-unknown-linux-gnu)"
clippy_kcall -- -D warnings
echo "lint: OK"
