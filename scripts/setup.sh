#!/usr/bin/env bash
# Installs what Kestrel needs on a Debian 12 host; safe to run again (then it only checks).
#
#   scripts/setup.sh
#
# Debian packages: Rust 1.96 with the library source (the kernel builds core/alloc itself),
# rustfmt and clippy, QEMU's PowerPC system emulator, the powerpc cross binutils/gcc (the linker),
# dtc, python3 and pytest (the system tests), g++ for `just fuzz` (libFuzzer);
# for the Linux guest (guests/linux) the kernel source, its build tools and the powerpc cross
# glibc, plus deb-src entries for `apt-get source` (busybox, iperf, netpipe) when apt has none;
# qemu-user-static and python3-matplotlib for the guest network tools and `just bench net`;
# MPICH (the host oracle for the MPI C tests) and libclang (bindgen, for native/mpi-c).
# Then `just`, which Debian 12 does not package: `cargo install --locked just` puts it in
# ~/.cargo/bin (add that to PATH). Uses sudo only when not already root. When everything is
# present it prints one line and takes well under a second.
set -euo pipefail

packages=(
    rustc-web cargo-web rust-web-src
    # `just lint`: rustfmt and clippy matching rustc-web.
    rustfmt-web rust-web-clippy
    qemu-system-ppc
    binutils-powerpc-linux-gnu gcc-powerpc-linux-gnu
    device-tree-compiler
    # The system tests and the test runner (tests/, `just test`) are pytest tests.
    python3 python3-pytest
    # `just fuzz` (scripts/fuzz.sh): libfuzzer-sys compiles libFuzzer's C++ sources.
    g++
    # The Linux guest (guests/linux/build.sh): kernel source, its host tools, the static cross
    # glibc for busybox, dpkg-source and bzip2 for `apt-get source busybox`, gzip for the
    # initramfs.
    linux-source-6.1 make gcc libc6-dev flex bison bc xz-utils
    libc6-dev-powerpc-cross dpkg-dev bzip2 gzip
    # Guest network tools (guests/linux/build-tools.sh: iperf, NetPIPE from Debian source
    # packages): iperf is C++, hence the cross g++, and its Debian patches change
    # Makefile.am, hence autoreconf as Debian's build runs it; both are checked on the host with
    # qemu-ppc-static. `just bench net` draws its plot with matplotlib.
    g++-powerpc-linux-gnu autoconf automake qemu-user-static python3-matplotlib
    # MPI's C ABI (native/mpi-c, tests/mpi): the static cross glibc links `kestrel-mpicc`
    # programs; Debian's MPICH (mpicc, mpiexec) runs the same C tests on the host as the oracle;
    # bindgen reads native/mpi-c/include/mpi.h into Rust through libclang.
    libmpich-dev mpich libclang-dev clang
)

installed() {
    # Not `dpkg -s | grep -q`: under pipefail that fails at random when grep exits before dpkg
    # has written everything (SIGPIPE), as it did for libc6-dev. One short word per architecture.
    local status
    status=$(dpkg-query -W -f '${db:Status-Status} ' "$1" 2>/dev/null) || return 1
    [[ " $status" == *" installed "* ]]
}

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        echo "setup: need root (or sudo) to run: $*" >&2
        exit 1
    fi
}

# guests/linux fetches busybox with `apt-get source`, which needs deb-src entries. When none are
# configured, add them to a file of our own, copied from the system's binary entries (same
# mirrors and suites), and make apt fetch the source indexes.
have_deb_src() {
    grep -qsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}
need_update=false
if ! have_deb_src; then
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        echo "setup: adding deb-src entries (/etc/apt/sources.list.d/kestrel-deb-src.sources)"
        sed 's/^Types:.*$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
            as_root tee /etc/apt/sources.list.d/kestrel-deb-src.sources >/dev/null
    elif grep -qsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list; then
        echo "setup: adding deb-src entries (/etc/apt/sources.list.d/kestrel-deb-src.list)"
        sed -nE 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' /etc/apt/sources.list |
            as_root tee /etc/apt/sources.list.d/kestrel-deb-src.list >/dev/null
    else
        echo "setup: no apt sources found to derive deb-src entries from" >&2
        exit 1
    fi
    need_update=true
fi
# Entries present but their indexes never fetched (e.g. added by hand).
if ! compgen -G '/var/lib/apt/lists/*_Sources*' >/dev/null; then
    need_update=true
fi

missing=()
for pkg in "${packages[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done

if $need_update && ((${#missing[@]} == 0)); then
    as_root apt-get update -q
fi

if ((${#missing[@]} > 0)); then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
just_note=
if command -v just >/dev/null; then
    just_path=$(command -v just)
elif [[ -x $cargo_bin/just ]]; then
    just_path=$cargo_bin/just
    just_note=" (not on PATH: add $cargo_bin to PATH)"
else
    # Prefer Debian's cargo, which was just checked for; RUSTC keeps it off rustup's rustc.
    if [[ -x /usr/bin/cargo ]]; then
        cargo=(env RUSTC=/usr/bin/rustc /usr/bin/cargo)
    elif command -v cargo >/dev/null; then
        cargo=(cargo)
    else
        echo "setup: no cargo found to install just with" >&2
        exit 1
    fi
    echo "setup: installing just into $cargo_bin (cargo install --locked just: 1-3 minutes)"
    # Run outside the repository so its rust-toolchain.toml plays no part.
    (cd / && "${cargo[@]}" install --locked --quiet just)
    just_path=$cargo_bin/just
    [[ ":$PATH:" == *":$cargo_bin:"* ]] || just_note=" (add $cargo_bin to PATH)"
fi

if ((${#missing[@]} > 0)); then
    echo "setup: done: installed ${missing[*]}; $("$just_path" --version) at $just_path$just_note"
else
    echo "setup: all ${#packages[@]} packages present; $("$just_path" --version) at $just_path$just_note"
fi
