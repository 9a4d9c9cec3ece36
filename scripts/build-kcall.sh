#!/usr/bin/env bash
# Builds libkestrel_kcall.a (native/linux/kcall): Kestrel calls for C programs that run on
# the Linux personality (docs/adr/0034-linux-personality.md), for Debian's
# powerpc-unknown-linux-gnu target. Like build-target.sh, core and alloc are built from
# Debian's /usr/lib/rustlib/src (-Zbuild-std, unlocked by RUSTC_BOOTSTRAP=1); the library
# lands in target/powerpc-unknown-linux-gnu/release/libkestrel_kcall.a. Link it with
#   scripts/kestrel-cc -o prog prog.c -Ltarget/powerpc-unknown-linux-gnu/release -lkestrel_kcall
# (the 440's FPU flags: the Rust code uses no floating point).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$KESTREL_ROOT"
RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" build --release \
    -Zbuild-std=core,compiler_builtins,alloc \
    -Zbuild-std-features=compiler-builtins-mem \
    --target powerpc-unknown-linux-gnu \
    -p kestrel-kcall "$@"
