#!/usr/bin/env bash
# Builds Kestrel's PowerPC 440 ELF files (kernel, native tasks, benchmarks) in release mode.
#
#   scripts/build-target.sh [-p PACKAGE]... [EXTRA CARGO ARGS]...
#
# Without -p it builds the kernel, the root task, the native tasks, the VMM and the guests. The ELF files land in
# target/powerpc-440-none/release/<package>. Debian's Rust 1.96 builds core, compiler_builtins
# and alloc from /usr/lib/rustlib/src itself (-Zbuild-std, unlocked by RUSTC_BOOTSTRAP=1);
# cargo only accepts a .json target with -Zjson-target-spec.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

default_packages=(kestrel-kernel kestrel-root kestrel-fabric-service kestrel-echo kestrel-fabric-ranks kestrel-mpi-rs-test kestrel-mpibench kestrel-demo kestrel-checksum kestrel-sysfuzz kestrel-linux ktest ipcbench kestrel-vmm kestrel-exitbench kestrel-fwq kestrel-selftest kestrel-isolation kestrel-vmdiag kestrel-hostile)
package_args=()
extra=()
while (($# > 0)); do
    case $1 in
        -p | --package)
            (($# >= 2)) || die "$1 needs a package name"
            package_args+=(-p "$2")
            shift 2
            ;;
        -h | --help)
            sed -n '2,9s/^# \{0,1\}//p' "$0"
            exit 0
            ;;
        *)
            extra+=("$1")
            shift
            ;;
    esac
done
if ((${#package_args[@]} == 0)); then
    for pkg in "${default_packages[@]}"; do
        package_args+=(-p "$pkg")
    done
fi

command -v powerpc-linux-gnu-ld >/dev/null ||
    die "powerpc-linux-gnu-ld (the target linker) is missing: run scripts/setup.sh"
[[ -d /usr/lib/rustlib/src/rust/library ]] ||
    die "the Rust library source (/usr/lib/rustlib/src) is missing: run scripts/setup.sh"

cd "$KESTREL_ROOT"
RUSTC_BOOTSTRAP=1 "$KESTREL_CARGO" build --release \
    -Zbuild-std=core,compiler_builtins,alloc \
    -Zbuild-std-features=compiler-builtins-mem \
    -Zjson-target-spec \
    --target ukernel/powerpc-440-none.json \
    "${package_args[@]}" "${extra[@]}"
