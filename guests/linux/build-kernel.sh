#!/usr/bin/env bash
# Builds the guest kernel: an unmodified Linux 6.1 vmlinux for QEMU's bamboo (PPC440EP).
#
#   guests/linux/build-kernel.sh
#
# Source: Debian's linux-source-6.1 (/usr/src/linux-source-6.1.tar.xz), unpacked once per
# package version into the cache. Config: 44x/bamboo_defconfig plus guests/linux/kestrel.config
# (merge_config.sh -m, then olddefconfig; every fragment line is checked to have stuck). Build:
# `make vmlinux` with ARCH=powerpc CROSS_COMPILE=powerpc-linux-gnu- in an O= folder.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/linux/<key>/, where <key> hashes the source package
# version, the cross compiler's version, kestrel.config, this script and lib.sh. A finished key
# folder is reused as is; the three newest are kept. Results are copied to guests/linux/out/:
# vmlinux, System.map and vmlinux.config.
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_tool "${CROSS_COMPILE}gcc" "${CROSS_COMPILE}ld" make gcc flex bison bc tar xz dpkg-query
tarball=/usr/src/linux-source-6.1.tar.xz
version=$(dpkg-query -W -f '${Version}' linux-source-6.1 2>/dev/null) ||
    die "linux-source-6.1 is not installed: run scripts/setup.sh"
[[ -f $tarball ]] || die "$tarball missing although linux-source-6.1 is installed; reinstall it"
fragment=$LINUX_GUEST_DIR/kestrel.config
gcc_version=$(cross_gcc_version)

key=$(cache_key "linux-source-6.1 $version" "gcc-powerpc-linux-gnu $gcc_version" \
    "$fragment" "${BASH_SOURCE[0]}" "$LINUX_GUEST_DIR/lib.sh")
cache=$KESTREL_CACHE/linux
dir=$cache/$key
build=$dir/build

publish() {
    mkdir -p "$LINUX_GUEST_OUT"
    local f
    for f in vmlinux System.map vmlinux.config; do
        # Copy only on change, so the files' times say when the kernel last changed.
        cmp -s "$dir/$f" "$LINUX_GUEST_OUT/$f" || cp "$dir/$f" "$LINUX_GUEST_OUT/$f"
    done
    say "vmlinux: $LINUX_GUEST_OUT/vmlinux ($(stat -c %s "$LINUX_GUEST_OUT/vmlinux") bytes, Linux $(cat "$dir/kernelrelease"), key $key)"
}

if [[ -f $dir/.done ]]; then
    say "cached: $dir"
    touch "$dir" # most recently used, for prune_cache
    publish
    exit 0
fi

# Unpack the source once per package version (about 140 MB of xz, 1.4 GB unpacked).
src_parent=$cache/src-$version
src=$src_parent/linux-source-6.1
if [[ ! -f $src_parent/.unpacked ]]; then
    say "unpacking $tarball (linux-source-6.1 $version) into $src_parent (about 30 s)"
    rm -rf "$src_parent"
    mkdir -p "$src_parent"
    tar -xJf "$tarball" -C "$src_parent"
    [[ -f $src/Makefile ]] || die "$tarball did not unpack to linux-source-6.1/"
    touch "$src_parent/.unpacked"
fi

say "building Linux from linux-source-6.1 $version into $dir (key $key)"
rm -rf "$dir"
mkdir -p "$build"

# Fixed build identity (no date, user or host): `uname -v` is the same on every machine.
kmake=(make -C "$src" O="$build" ARCH=powerpc CROSS_COMPILE="$CROSS_COMPILE"
    KBUILD_BUILD_USER=kestrel KBUILD_BUILD_HOST=kestrel
    KBUILD_BUILD_TIMESTAMP="Debian linux-source-6.1 $version")

say "config: 44x/bamboo_defconfig + kestrel.config"
"${kmake[@]}" -s 44x/bamboo_defconfig
"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$fragment" >"$dir/merge.log" ||
    die "merge_config.sh failed; see $dir/merge.log"
"${kmake[@]}" -s olddefconfig

# Every fragment line must hold after olddefconfig: `CONFIG_X=V` literally, and for
# `# CONFIG_X is not set` no `CONFIG_X=` line (an option whose dependencies are off vanishes).
bad=()
while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
        grep -qxF "$line" "$build/.config" ||
            bad+=("$line (got: $(grep -E "^(# )?${BASH_REMATCH[1]}[= ]" "$build/.config" || echo absent))")
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
        if grep -qE "^${BASH_REMATCH[1]}=" "$build/.config"; then
            bad+=("$line (got: $(grep -E "^${BASH_REMATCH[1]}=" "$build/.config"))")
        fi
    fi
done <"$fragment"
if ((${#bad[@]} > 0)); then
    say "error: these kestrel.config options did not stick after olddefconfig (a missing dependency?):"
    printf '  %s\n' "${bad[@]}" >&2
    die "fix kestrel.config; the merged config is $build/.config"
fi
say "config: all $(grep -cE '^(CONFIG_|# CONFIG_.* is not set)' "$fragment") fragment options hold"

jobs=$(nproc)
say "make -j$jobs vmlinux (a clean build takes about 2 minutes on 2 cores)"
run_logged "$dir/make.log" "make vmlinux" "${kmake[@]}" -j"$jobs" vmlinux

cp "$build/vmlinux" "$dir/vmlinux"
cp "$build/System.map" "$dir/System.map"
cp "$build/.config" "$dir/vmlinux.config"
"${kmake[@]}" -s kernelrelease >"$dir/kernelrelease"
printf 'linux-source-6.1 %s\ngcc-powerpc-linux-gnu %s\nkestrel.config sha256 %s\n' \
    "$version" "$gcc_version" "$(sha256sum <"$fragment" | cut -d' ' -f1)" >"$dir/inputs.txt"
touch "$dir/.done"
prune_cache "$cache" 3
publish
