#!/usr/bin/env bash
# Builds libkestrel_mpi_c.a, Kestrel's MPI library for C programs (native/mpi-c with its
# feature `target`: the MPI_* functions of mpi.h over the MPI core and the node's fabric
# service, the core, the fabric client and kestrel-kcall's Kestrel calls, in one archive), for
# Debian's powerpc-unknown-linux-gnu target, the programs kestrel-linux runs
# (docs/adr/0034-linux-personality.md). Like build-kcall.sh, core and alloc are built from
# Debian's /usr/lib/rustlib/src (-Zbuild-std, unlocked by RUSTC_BOOTSTRAP=1), for the 440
# ($KESTREL_LINUX_RUSTFLAGS: target-cpu 440 without isel). The library lands in
#   target/powerpc-unknown-linux-gnu/release/libkestrel_mpi_c.a
# where scripts/kestrel-mpicc finds it:  scripts/kestrel-mpicc -o prog prog.c
# No compiler-builtins-mem: the archive is linked with glibc, whose memcpy/memset must be
# the program's (compiler_builtins' would win the static link and copy a word per five
# instructions, NetPIPE's own copies included).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$KESTREL_ROOT"
command -v powerpc-linux-gnu-gcc >/dev/null ||
    die "powerpc-linux-gnu-gcc (it compiles the long double kernels) is missing: run scripts/setup.sh"
CARGO_TARGET_POWERPC_UNKNOWN_LINUX_GNU_RUSTFLAGS=$KESTREL_LINUX_RUSTFLAGS \
RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" rustc --release \
    -Zbuild-std=core,compiler_builtins,alloc \
    --target powerpc-unknown-linux-gnu \
    -p kestrel-mpi-c --features target --crate-type staticlib "$@"
