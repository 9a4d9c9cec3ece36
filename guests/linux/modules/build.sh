#!/usr/bin/env bash
# Builds Kestrel's guest kernel modules (the BG/P interconnect drivers) against the guest kernel.
#
#   guests/linux/modules/build.sh
#
# Runs guests/linux/build-kernel.sh first (cached), then, in a copy of this folder under the
# cache, `make -C <the kernel's O= folder> M=<copy> ARCH=powerpc CROSS_COMPILE=powerpc-linux-gnu-
# modules`; the O= folder was prepared by the kernel build's `make modules` (modules_prepare,
# Module.symvers). Kbuild passes -Werror, and the build fails on any other "warning" line too
# (modpost's, for instance): the modules build with zero warnings.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/modules/<key>/, where <key> hashes the kernel's
# cache key (out/kernel.key) and every file of this folder (Kbuild, Makefile, build.sh, *.c,
# include/*.h). A finished key folder is reused as is; the three newest are kept.
# Results: guests/linux/out/modules/*.ko (only the modules of the current key), which
# guests/linux/build.sh packs into the initramfs under /lib/modules/kestrel/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=guests/linux/lib.sh
source "$here/../lib.sh"
# Progress lines say "build-modules:" (lib.sh's say would print "build", like ../build.sh).
say() {
    printf 'build-modules: %s\n' "$*" >&2
}

"$LINUX_GUEST_DIR/build-kernel.sh"
need_tool "${CROSS_COMPILE}gcc" make
kernel_key=$(cat "$LINUX_GUEST_OUT/kernel.key")
kbuild=$KESTREL_CACHE/linux/$kernel_key/build
[[ -f $kbuild/Module.symvers ]] ||
    die "$kbuild/Module.symvers missing: the kernel build did not prepare for modules"

# Every source file, in a fixed order (the bgnet helper's drivers count once they exist).
mapfile -t sources < <(cd "$here" && find . -maxdepth 2 -type f \
    \( -name Kbuild -o -name Makefile -o -name build.sh -o -name '*.c' -o -name '*.h' \) |
    LC_ALL=C sort)
key=$(cd "$here" && cache_key "kernel $kernel_key" "${sources[@]}")
cache=$KESTREL_CACHE/modules
dir=$cache/$key
out=$LINUX_GUEST_OUT/modules
lock_cache "$cache"

publish() {
    mkdir -p "$out"
    local f have=()
    for f in "$dir"/ko/*.ko; do
        have+=("${f##*/}")
        cmp -s "$f" "$out/${f##*/}" || cp "$f" "$out/"
    done
    for f in "$out"/*.ko; do
        [[ -e $dir/ko/${f##*/} ]] || rm -f "$f"
    done
    say "modules: ${have[*]} in $out (key $key)"
}

if [[ -f $dir/.done ]]; then
    touch "$dir"
    publish
    exit 0
fi

say "building modules against $kbuild (key $key)"
rm -rf "$dir"
mkdir -p "$dir/src" "$dir/ko"
(cd "$here" && cp --parents "${sources[@]}" "$dir/src/")
run_logged "$dir/make.log" "make modules" make -C "$kbuild" M="$dir/src" ARCH=powerpc \
    CROSS_COMPILE="$CROSS_COMPILE" -j"$(nproc)" modules
if grep -i 'warning' "$dir/make.log" >&2; then
    die "the module build printed warnings (above; log: $dir/make.log)"
fi
cp "$dir"/src/*.ko "$dir/ko/"
touch "$dir/.done"
prune_cache "$cache" 3
publish
