#!/usr/bin/env bash
# Installs what Kestrel needs on a Debian 12 host; safe to run again (then it only checks).
#
#   scripts/setup.sh
#
# Debian packages: Rust 1.96 with the library source (the kernel builds core/alloc itself),
# QEMU's PowerPC system emulator, the powerpc cross binutils/gcc (the linker), dtc and python3.
# Then `just`, which Debian 12 does not package: `cargo install --locked just` puts it in
# ~/.cargo/bin (add that to PATH). Uses sudo only when not already root. When everything is
# present it prints one line and takes well under a second.
set -euo pipefail

packages=(
    rustc-web cargo-web rust-web-src
    qemu-system-ppc
    binutils-powerpc-linux-gnu gcc-powerpc-linux-gnu
    device-tree-compiler
    python3
)

installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
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

missing=()
for pkg in "${packages[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done

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
