#!/usr/bin/env bash
# Builds NetPIPE 3.7.2's MPI module, NPmpi, unmodified, for Kestrel: the same Debian source
# package (netpipe) as the guest's NPtcp (guests/linux/sources.sh fetches and checks it), built
# with upstream's own `make mpi` rule and scripts/kestrel-mpicc as its mpicc, so it compiles
# against Kestrel's mpi.h and links Kestrel's MPI library (libkestrel_mpi_c.a) statically.
#
#   scripts/build-npmpi.sh
#
# Prints the path of the result on stdout: target/netpipe/NPmpi. Run it as a job of two
# ranks on the Linux personality, beside the fabric service:
#   just mpi NPmpi 2 [NETPIPE OPTIONS]      e.g. just mpi NPmpi 2 -u 1048576 -n 20 -p 0
# (`just mpi` builds it; scripts/linux-job.sh takes the name NPmpi for this file). Its output is
# NPtcp's: the per-size lines on the console and the curve in np.out (bytes, Mbps, one-way
# seconds), which kestrel-linux lists after the job.
#
# Exit status 3, with one line on stderr, while Kestrel's MPI library is not built (its MPI_*
# functions wait for the MPI core, native/mpi-c/README.md): kestrel-mpicc cannot link NPmpi
# without it. Callers (`just mpi NPmpi`, `just bench mpi`, the functional test) skip on 3.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/kestrel/npmpi/<key>/, where <key> hashes the source
# package version, the cross gcc's and cross glibc's versions, this script, the guest's
# lib.sh and sources.sh, kestrel-mpicc, kestrel-cc, mpi.h and the library itself (a rebuilt
# library rebuilds NPmpi); fetch, unpack and make logs stay in that folder.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=guests/linux/lib.sh
source "$KESTREL_ROOT/guests/linux/lib.sh"
# shellcheck source=guests/linux/sources.sh
source "$KESTREL_ROOT/guests/linux/sources.sh"

case ${1:-} in
    -h | --help) sed -n '2,23s/^# \{0,1\}//p' "$0"; exit 0 ;;
    "") ;;
    *) die "no arguments (see --help)" ;;
esac

mpicc=$KESTREL_ROOT/scripts/kestrel-mpicc
header=$KESTREL_ROOT/native/mpi-c/include/mpi.h
# The library where kestrel-mpicc links it from (its --show names it last).
lib=$("$mpicc" --show probe.o | awk '{ print $NF }')
[[ $lib == *.a ]] || die "cannot tell which library kestrel-mpicc links (its --show printed: $lib)"
if [[ ! -f $lib ]]; then
    say "skipped: Kestrel's MPI library is not built yet ($lib is missing; native/mpi-c/README.md), and NPmpi cannot link without it"
    exit 3
fi
need_tool "${CROSS_COMPILE}gcc" make apt-get sha256sum tar
dpkg-query -W libc6-dev-powerpc-cross >/dev/null 2>&1 ||
    die "libc6-dev-powerpc-cross is not installed: run scripts/setup.sh"

dsc=$(source_dsc netpipe)
version=$(dsc_version netpipe "$dsc")
key=$(cache_key "netpipe source $version" "gcc-powerpc-linux-gnu $(cross_gcc_version)" \
    "libc6-dev-powerpc-cross $(dpkg-query -W -f '${Version}' libc6-dev-powerpc-cross)" \
    "${BASH_SOURCE[0]}" "$LINUX_GUEST_DIR/lib.sh" "$LINUX_GUEST_DIR/sources.sh" "$mpicc" \
    "$KESTREL_ROOT/scripts/kestrel-cc" "$header" "$lib")
cache=$KESTREL_CACHE/npmpi
dir=$cache/$key
lock_cache "$cache"
if [[ -f $dir/.done ]]; then
    say "cached: $dir"
    touch "$dir"
else
    say "building NPmpi (NetPIPE $version) into $dir (key $key)"
    rm -rf "$dir"
    mkdir -p "$dir"
    netpipe_source "$dsc" "$version" "$dir"
    # Upstream's rule: $(MPICC) $(CFLAGS) -DMPI src/netpipe.c src/mpi.c -o NPmpi -Isrc.
    run_logged "$dir/make.log" "make NPmpi" make -C "$dir/src" MPICC="$mpicc" CFLAGS="-O2" mpi
    "${CROSS_COMPILE}strip" -o "$dir/NPmpi" "$dir/src/NPmpi"
    info=$(file -b "$dir/NPmpi" 2>/dev/null || true)
    [[ -z $info || $info == *"PowerPC"*"statically linked"* ]] ||
        die "$dir/NPmpi is not a static PowerPC executable: $info"
    touch "$dir/.done"
    prune_cache "$cache" 3
fi
out=$KESTREL_TARGET_DIR/netpipe
mkdir -p "$out"
cmp -s "$dir/NPmpi" "$out/NPmpi" || cp "$dir/NPmpi" "$out/NPmpi"
# With its symbols, for bench/insn_profile.py npmpi (the stripped copy is what boots).
cmp -s "$dir/src/NPmpi" "$out/NPmpi.debug" || cp "$dir/src/NPmpi" "$out/NPmpi.debug"
say "NPmpi: $out/NPmpi ($(stat -c %s "$out/NPmpi") bytes, NetPIPE $version, key $key)"
echo "$out/NPmpi"
