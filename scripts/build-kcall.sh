#!/usr/bin/env bash
# Builds libkestrel_kcall.a (native/linux/kcall): Kestrel calls for C programs that run on
# the Linux personality (docs/adr/0034-linux-personality.md), for Debian's
# powerpc-unknown-linux-gnu target. Like build-target.sh, core and alloc are built from
# Debian's /usr/lib/rustlib/src (-Zbuild-std, unlocked by RUSTC_BOOTSTRAP=1); the library
# lands in target/powerpc-unknown-linux-gnu/release/libkestrel_kcall.a. Link it with
#   scripts/kestrel-cc -o prog prog.c -Ltarget/powerpc-unknown-linux-gnu/release -lkestrel_kcall
# (the 440's FPU flags: the Rust code uses no floating point). Compiled for the 440
# ($KESTREL_LINUX_RUSTFLAGS, as build-mpi-c.sh, so the two share their build of core and alloc).
# libkestrel_mpi_c.a (build-mpi-c.sh) carries these calls too: an MPI program links only it.
# No compiler-builtins-mem: the archive is linked with glibc, whose memcpy/memset must be
# the program's (compiler_builtins' would win the static link and copy a word per five
# instructions, NetPIPE's own copies included).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$KESTREL_ROOT"
CARGO_TARGET_POWERPC_UNKNOWN_LINUX_GNU_RUSTFLAGS=$KESTREL_LINUX_RUSTFLAGS \
RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" rustc --release \
    -Zbuild-std=core,compiler_builtins,alloc \
    --target powerpc-unknown-linux-gnu \
    -p kestrel-kcall --crate-type staticlib "$@"
