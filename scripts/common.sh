# shellcheck shell=bash
# Shared settings for Kestrel's scripts; sourced, never run.
#
# Sets, without overriding what the caller already exported:
#   KESTREL_ROOT     the repository root
#   KESTREL_CARGO    the cargo to run: Debian's /usr/bin/cargo when present (see rust-toolchain.toml
#                    for why Kestrel builds with Debian's Rust), else whatever `cargo` is on PATH
#   RUSTC            /usr/bin/rustc when present; without it cargo would pick rustup's rustc from PATH
#   KESTREL_TARGET_DIR  cargo's target directory (honours CARGO_TARGET_DIR)
#   KESTREL_OUT      where the PowerPC 440 ELF files land
#   KESTREL_QEMU     the QEMU binary
#   KESTREL_LINUX_RUSTFLAGS  rustc's flags for Rust code inside Linux-personality programs
#                    (powerpc-unknown-linux-gnu: build-kcall.sh, build-mpi-c.sh): the 440 core,
#                    which has no isel

KESTREL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export KESTREL_ROOT

if [[ -z "${KESTREL_CARGO:-}" ]]; then
    if [[ -x /usr/bin/cargo ]]; then
        KESTREL_CARGO=/usr/bin/cargo
    else
        KESTREL_CARGO=cargo
    fi
fi
export KESTREL_CARGO

if [[ -z "${RUSTC:-}" && -x /usr/bin/rustc ]]; then
    export RUSTC=/usr/bin/rustc
fi

KESTREL_TARGET_DIR=${CARGO_TARGET_DIR:-$KESTREL_ROOT/target}
KESTREL_OUT=$KESTREL_TARGET_DIR/powerpc-440-none/release
KESTREL_QEMU=${KESTREL_QEMU:-qemu-system-ppc}
KESTREL_LINUX_RUSTFLAGS=${KESTREL_LINUX_RUSTFLAGS:-"-C target-cpu=440 -C target-feature=-isel"}
export KESTREL_TARGET_DIR KESTREL_OUT KESTREL_QEMU KESTREL_LINUX_RUSTFLAGS

# die MESSAGE...: print "<script>: MESSAGE" on stderr and exit 1.
die() {
    printf '%s: %s\n' "$(basename "$0")" "$*" >&2
    exit 1
}
