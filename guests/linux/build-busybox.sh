#!/usr/bin/env bash
# Builds the guest userland's one binary: busybox, static, for 32-bit PowerPC.
#
#   guests/linux/build-busybox.sh
#
# Source: Debian's busybox source package (`apt-get source`, which needs the deb-src entries
# scripts/setup.sh adds), with Debian's patches applied by dpkg-source. Config: Debian's own
# debian/config/pkg/static (the busybox-static package), unchanged. Compiler:
# CROSS_COMPILE=powerpc-linux-gnu- against the powerpc cross glibc (libc6-dev-powerpc-cross).
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/busybox/<key>/, where <key> hashes the source
# package version, the cross compiler's and cross glibc's versions, this script and lib.sh. When
# the key matches nothing is downloaded. Results in guests/linux/out/: busybox and busybox.links
# (the applets' install paths, one a line).
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_tool "${CROSS_COMPILE}gcc" make gcc apt-get dpkg-source bzip2 xz
dpkg-query -W libc6-dev-powerpc-cross >/dev/null 2>&1 ||
    die "libc6-dev-powerpc-cross is not installed: run scripts/setup.sh"

# The version apt would fetch, read from its source index (no download).
# --print-uris lines are: 'URL' FILE SIZE HASH.
dsc=$(apt-get source --print-uris -qq busybox 2>/dev/null | awk '$2 ~ /\.dsc$/ { print $2; exit }')
[[ -n $dsc ]] ||
    die "apt knows no busybox source package: run scripts/setup.sh (it adds deb-src entries)"
version=${dsc#busybox_}
version=${version%.dsc}
libc_version=$(dpkg-query -W -f '${Version}' libc6-dev-powerpc-cross)

key=$(cache_key "busybox source $version" "gcc-powerpc-linux-gnu $(cross_gcc_version)" \
    "libc6-dev-powerpc-cross $libc_version" "${BASH_SOURCE[0]}" "$LINUX_GUEST_DIR/lib.sh")
cache=$KESTREL_CACHE/busybox
dir=$cache/$key
lock_cache "$cache"

publish() {
    mkdir -p "$LINUX_GUEST_OUT"
    local f
    for f in busybox busybox.links; do
        cmp -s "$dir/$f" "$LINUX_GUEST_OUT/$f" || cp "$dir/$f" "$LINUX_GUEST_OUT/$f"
    done
    say "busybox: $LINUX_GUEST_OUT/busybox ($(stat -c %s "$LINUX_GUEST_OUT/busybox") bytes, $(wc -l <"$dir/busybox.links") applets, source $version, key $key)"
}

if [[ -f $dir/.done ]]; then
    say "cached: $dir"
    touch "$dir"
    publish
    exit 0
fi

say "building busybox $version into $dir (key $key)"
rm -rf "$dir"
mkdir -p "$dir"
apt_opts=(-q)
# As root, apt downloads as user _apt, who cannot write into a folder under /root.
[[ $(id -u) -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)
(cd "$dir" && apt-get "${apt_opts[@]}" source --download-only "busybox=${version#*:}") >"$dir/fetch.log" 2>&1 ||
    (cd "$dir" && apt-get "${apt_opts[@]}" source --download-only busybox) >>"$dir/fetch.log" 2>&1 ||
    die "apt-get source busybox failed; see $dir/fetch.log"
[[ -f $dir/$dsc ]] || die "apt-get source fetched something other than $dsc; see $dir/fetch.log"
# apt checked the files against its signed index; dpkg-source's own signature check has no
# keyring here and only warns, so its output goes to the log.
dpkg-source -x "$dir/$dsc" "$dir/src" >"$dir/unpack.log" 2>&1 ||
    die "dpkg-source -x failed; see $dir/unpack.log"

src=$dir/src
# As Debian's own build: the changelog's date stands in for the build time busybox prints.
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Timestamp)
export SOURCE_DATE_EPOCH
cp "$src/debian/config/pkg/static" "$src/.config"
# As debian/rules does: accept the default for any option the config does not mention.
{ yes "" || true; } | make -C "$src" -s oldconfig >"$dir/config.log" 2>&1 ||
    die "busybox oldconfig failed; see $dir/config.log"
jobs=$(nproc)
run_logged "$dir/make.log" "make busybox" \
    make -C "$src" -j"$jobs" CROSS_COMPILE="$CROSS_COMPILE" busybox busybox.links

file_info=$(file -b "$src/busybox" 2>/dev/null || true)
if [[ -n $file_info && $file_info != *"PowerPC"*"statically linked"* ]]; then
    die "$src/busybox is not a static PowerPC executable: $file_info"
fi
cp "$src/busybox" "$dir/busybox"
cp "$src/busybox.links" "$dir/busybox.links"
touch "$dir/.done"
prune_cache "$cache" 3
publish
