#!/usr/bin/env bash
# Builds the guest's network benchmark tools, static, for 32-bit PowerPC:
#   iperf   (Debian source package iperf 2.1.8: TCP stream throughput)
#   NPtcp   (Debian source package netpipe 3.7.2: NetPIPE's TCP module, ping-pong latency and
#            throughput over a range of message sizes)
#
#   guests/linux/build-tools.sh
#
# Pattern of build-busybox.sh: the source comes from `apt-get source --download-only`
# (sources.sh, which NetPIPE's MPI module for Kestrel, scripts/build-npmpi.sh, shares);
# compiler CROSS_COMPILE=powerpc-linux-gnu- against the powerpc cross glibc
# (libc6-dev-powerpc-cross), linked static.
#   - iperf: Debian's patches applied by dpkg-source, `autoreconf -fi` as Debian's debhelper
#     runs it, configured as debian/rules does (--enable-fastsampling) plus
#     --host=powerpc-linux-gnu and --enable-static-bin. iperf is C++ (g++-powerpc-linux-gnu).
#   - netpipe: the upstream tarball, checked and unpacked by sources.sh (its header says why
#     without Debian's part), built with upstream's own `make tcp` rule.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/<tool>/<key>/ (tool: iperf, netpipe), where <key>
# hashes the source package version, the cross compilers' and cross glibc's versions, this
# script, lib.sh and sources.sh; fetch, unpack, configure and make logs stay in that folder.
# When the key matches nothing is downloaded or built. Results in guests/linux/out/: iperf and
# NPtcp.
# Each binary is checked to be a static PowerPC executable and, when qemu-ppc-static is
# installed, to start under `qemu-ppc-static -cpu 440epb` (the guest's CPU).
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=guests/linux/sources.sh
source "$(dirname "${BASH_SOURCE[0]}")/sources.sh"

need_tool "${CROSS_COMPILE}gcc" "${CROSS_COMPILE}g++" make apt-get dpkg-source autoreconf sha256sum \
    tar xz
dpkg-query -W libc6-dev-powerpc-cross >/dev/null 2>&1 ||
    die "libc6-dev-powerpc-cross is not installed: run scripts/setup.sh"

libc_version=$(dpkg-query -W -f '${Version}' libc6-dev-powerpc-cross)
gxx_version=$(dpkg-query -W -f '${Version}' g++-12-powerpc-linux-gnu 2>/dev/null ||
    "${CROSS_COMPILE}g++" -dumpfullversion)
jobs=$(nproc)

# check_binary FILE PATTERN ARGS...: fail unless FILE is a static PowerPC executable and, when
# qemu-ppc-static is installed, running it under `qemu-ppc-static -cpu 440epb` (the guest's
# CPU) with ARGS prints a line matching the extended regular expression PATTERN (its exit
# status is not looked at: tools print their version or usage with either). The output stays in
# FILE.check.log.
check_binary() {
    local file=$1 pattern=$2 info
    shift 2
    info=$(file -b "$file" 2>/dev/null || true)
    if [[ -n $info && $info != *"PowerPC"*"statically linked"* ]]; then
        die "$file is not a static PowerPC executable: $info"
    fi
    if command -v qemu-ppc-static >/dev/null; then
        timeout 20 qemu-ppc-static -cpu 440epb "$file" "$@" >"$file.check.log" 2>&1 || true
        grep -qE "$pattern" "$file.check.log" ||
            die "$file under qemu-ppc-static -cpu 440epb did not print /$pattern/; see $file.check.log"
        say "checked under qemu-ppc-static -cpu 440epb: $(grep -m1 -E "$pattern" "$file.check.log")"
    else
        say "qemu-ppc-static not installed (scripts/setup.sh installs it): $file not run"
    fi
}

# publish DIR FILE...: copy each FILE from the cache folder DIR into guests/linux/out/ when
# it differs.
publish() {
    local dir=$1 f
    shift
    mkdir -p "$LINUX_GUEST_OUT"
    for f in "$@"; do
        cmp -s "$dir/$f" "$LINUX_GUEST_OUT/$f" || cp "$dir/$f" "$LINUX_GUEST_OUT/$f"
    done
}

build_iperf() {
    local dsc version key cache dir src
    dsc=$(source_dsc iperf)
    version=$(dsc_version iperf "$dsc")
    key=$(cache_key "iperf source $version" "gcc-powerpc-linux-gnu $(cross_gcc_version)" \
        "g++-powerpc-linux-gnu $gxx_version" "libc6-dev-powerpc-cross $libc_version" \
        "${BASH_SOURCE[0]}" "$LINUX_GUEST_DIR/lib.sh" "$LINUX_GUEST_DIR/sources.sh")
    cache=$KESTREL_CACHE/iperf
    dir=$cache/$key
    lock_cache "$cache"
    if [[ -f $dir/.done ]]; then
        say "cached: $dir"
        touch "$dir"
    else
        say "building iperf $version into $dir (key $key)"
        rm -rf "$dir"
        mkdir -p "$dir"
        fetch iperf "$version" "$dir" || die "apt-get source iperf failed; see $dir/fetch.log"
        [[ -f $dir/$dsc ]] || die "apt-get source fetched something other than $dsc; see $dir/fetch.log"
        # apt checked the files against its signed index; dpkg-source's own signature check has
        # no keyring here and only warns, so its output goes to the log.
        dpkg-source -x "$dir/$dsc" "$dir/src" >"$dir/unpack.log" 2>&1 ||
            die "dpkg-source -x failed; see $dir/unpack.log"
        src=$dir/src
        SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Timestamp)
        export SOURCE_DATE_EPOCH
        # As Debian's build (debhelper compat 13 runs dh_autoreconf): Debian's patches edit
        # src/Makefile.am (013-delete-service drops service.c), so the generated files must be
        # regenerated.
        run_logged "$dir/autoreconf.log" "autoreconf iperf" env -C "$src" autoreconf -fi
        # debian/rules: dh_auto_configure -- --enable-fastsampling. Cross: --host; the guest
        # has no shared libraries: --enable-static-bin.
        run_logged "$dir/configure.log" "configure iperf" \
            env -C "$src" ./configure --host=powerpc-linux-gnu --enable-fastsampling \
            --enable-static-bin CC="${CROSS_COMPILE}gcc" CXX="${CROSS_COMPILE}g++" \
            CFLAGS="-O2" CXXFLAGS="-O2"
        run_logged "$dir/make.log" "make iperf" make -C "$src" -j"$jobs"
        "${CROSS_COMPILE}strip" -o "$dir/iperf" "$src/src/iperf"
        check_binary "$dir/iperf" "^iperf version 2\\.1\\.8" --version
        touch "$dir/.done"
        prune_cache "$cache" 3
    fi
    publish "$dir" iperf
    say "iperf: $LINUX_GUEST_OUT/iperf ($(stat -c %s "$LINUX_GUEST_OUT/iperf") bytes, source $version, key $key)"
}

build_netpipe() {
    local dsc version key cache dir src
    dsc=$(source_dsc netpipe)
    version=$(dsc_version netpipe "$dsc")
    key=$(cache_key "netpipe source $version" "gcc-powerpc-linux-gnu $(cross_gcc_version)" \
        "libc6-dev-powerpc-cross $libc_version" "${BASH_SOURCE[0]}" "$LINUX_GUEST_DIR/lib.sh" \
        "$LINUX_GUEST_DIR/sources.sh")
    cache=$KESTREL_CACHE/netpipe
    dir=$cache/$key
    lock_cache "$cache"
    if [[ -f $dir/.done ]]; then
        say "cached: $dir"
        touch "$dir"
    else
        say "building NetPIPE $version into $dir (key $key)"
        rm -rf "$dir"
        mkdir -p "$dir"
        netpipe_source "$dsc" "$version" "$dir"
        src=$dir/src
        # Upstream's rule: $(CC) $(CFLAGS) src/netpipe.c src/tcp.c -DTCP -o NPtcp -Isrc.
        run_logged "$dir/make.log" "make NPtcp" \
            make -C "$src" CC="${CROSS_COMPILE}gcc" CFLAGS="-O2 -static" tcp
        "${CROSS_COMPILE}strip" -o "$dir/NPtcp" "$src/NPtcp"
        # NPtcp has no --version: a lower bound above the upper one makes it stop with a message
        # right after parsing its options, before it opens any socket.
        check_binary "$dir/NPtcp" "Start MUST be LESS than end" -l 2 -u 1
        touch "$dir/.done"
        prune_cache "$cache" 3
    fi
    publish "$dir" NPtcp
    say "NPtcp: $LINUX_GUEST_OUT/NPtcp ($(stat -c %s "$LINUX_GUEST_OUT/NPtcp") bytes, source $version, key $key)"
}

build_iperf
build_netpipe
