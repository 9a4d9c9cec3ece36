#!/usr/bin/env bash
# Builds the guest kernel: an unmodified Linux 6.1 vmlinux for QEMU's bamboo (PPC440EP).
#
#   guests/linux/build-kernel.sh
#
# Source: Debian's linux-source-6.1 (/usr/src/linux-source-6.1.tar.xz), unpacked once per
# package version into the cache. Config: 44x/bamboo_defconfig plus guests/linux/kestrel.config
# (merge_config.sh -m, then olddefconfig; every fragment line is checked to have stuck). Build:
# `make vmlinux modules` with ARCH=powerpc CROSS_COMPILE=powerpc-linux-gnu- in an O= folder;
# `modules` also runs modules_prepare and modpost, which leave what out-of-tree modules
# (guests/linux/modules) are built against: the prepared O= folder and its Module.symvers.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/linux/<key>/, where <key> hashes the source package
# version, the cross compiler's version, kestrel.config, this script and lib.sh. A finished key
# folder is reused as is; the three newest are kept, and only the current version's source.
# Results are copied to guests/linux/out/: vmlinux, System.map, vmlinux.config, Module.symvers,
# gen_init_cpio (the kernel's host tool that build.sh packs the initramfs with), and kernel.key
# (the key; the module build's O= folder is ${XDG_CACHE_HOME:-~/.cache}/kestrel/linux/<key>/build).
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
lock_cache "$cache"

publish() {
    mkdir -p "$LINUX_GUEST_OUT"
    local f
    for f in vmlinux System.map vmlinux.config Module.symvers gen_init_cpio; do
        # Copy only on change, so the files' times say when the kernel last changed.
        cmp -s "$dir/$f" "$LINUX_GUEST_OUT/$f" || cp "$dir/$f" "$LINUX_GUEST_OUT/$f"
    done
    [[ $(cat "$LINUX_GUEST_OUT/kernel.key" 2>/dev/null) == "$key" ]] ||
        echo "$key" >"$LINUX_GUEST_OUT/kernel.key"
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

# A fixed build identity makes the same inputs give the same vmlinux on every machine: user and
# host, and for the build time the package's changelog date (the tarball's mtime without it).
# The timestamp must be a date that `date -d` parses: it also sets the mtimes of the kernel's
# built-in initramfs (usr/gen_initramfs.sh), which otherwise take the current time.
changelog=/usr/share/doc/linux-source-6.1/changelog.Debian.gz
build_epoch=$(zcat "$changelog" 2>/dev/null | dpkg-parsechangelog -l - -S Timestamp 2>/dev/null) ||
    build_epoch=$(stat -c %Y "$tarball")
kmake=(make -C "$src" O="$build" ARCH=powerpc CROSS_COMPILE="$CROSS_COMPILE"
    KBUILD_BUILD_USER=kestrel KBUILD_BUILD_HOST=kestrel
    KBUILD_BUILD_TIMESTAMP="$(LC_ALL=C date -u -d "@$build_epoch")")

say "config: 44x/bamboo_defconfig + kestrel.config"
# Kconfig's notes (e.g. that NO_HZ_IDLE overrides a choice) are expected: they go to the log.
{
    "${kmake[@]}" -s 44x/bamboo_defconfig &&
        "$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$fragment" &&
        "${kmake[@]}" -s olddefconfig
} >"$dir/config.log" 2>&1 || {
    tail -n 20 "$dir/config.log" >&2
    die "configuring the kernel failed; see $dir/config.log"
}

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
say "make -j$jobs vmlinux modules (a clean build: 3 to 15 minutes on 2 cores, depending on other load)"
run_logged "$dir/make.log" "make vmlinux modules" "${kmake[@]}" -j"$jobs" vmlinux modules
[[ -f $build/Module.symvers ]] || die "make modules left no $build/Module.symvers"

cp "$build/vmlinux" "$dir/vmlinux"
cp "$build/System.map" "$dir/System.map"
cp "$build/.config" "$dir/vmlinux.config"
cp "$build/Module.symvers" "$dir/Module.symvers"
cp "$build/usr/gen_init_cpio" "$dir/gen_init_cpio"
"${kmake[@]}" -s kernelrelease >"$dir/kernelrelease"
printf 'linux-source-6.1 %s\ngcc-powerpc-linux-gnu %s\nkestrel.config sha256 %s\n' \
    "$version" "$gcc_version" "$(sha256sum <"$fragment" | cut -d' ' -f1)" >"$dir/inputs.txt"
touch "$dir/.done"
prune_cache "$cache" 3
for old in "$cache"/src-*/; do
    [[ $old == "$src_parent/" ]] || { say "pruning old source $old"; rm -rf "$old"; }
done
publish
