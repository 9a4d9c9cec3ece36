# shellcheck shell=bash
# Debian source packages for the guest's tools and for Kestrel-native builds of the same
# sources (guests/linux/build-tools.sh: iperf and NPtcp; scripts/build-npmpi.sh: NPmpi);
# sourced after lib.sh, never run.
#
# The source comes from `apt-get source --download-only` (which needs the deb-src entries
# scripts/setup.sh adds). NetPIPE: the registry serves the .dsc and the upstream tarball but
# answers 404 for netpipe_3.7.2-8.debian.tar.xz (checked 2026-11-24), so the upstream tarball
# is used as it is, without Debian's packaging patches. apt checks each file it fetches against
# its signed index; the tarball's SHA-256 is checked here against the .dsc's Checksums-Sha256
# too, since dpkg-source (which would) cannot run without the Debian part.

apt_opts=(-q)
# As root, apt downloads as user _apt, who cannot write into a folder under /root.
[[ $(id -u) -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)

# source_dsc PACKAGE: the .dsc file name apt would fetch, read from its source index (no
# download). --print-uris lines are: 'URL' FILE SIZE HASH.
source_dsc() {
    local dsc
    dsc=$(apt-get source --print-uris -qq "$1" 2>/dev/null | awk '$2 ~ /\.dsc$/ { print $2; exit }')
    [[ -n $dsc ]] ||
        die "apt knows no $1 source package: run scripts/setup.sh (it adds deb-src entries)"
    echo "$dsc"
}

# dsc_version PACKAGE DSC: the version in a .dsc file name (PACKAGE_VERSION.dsc).
dsc_version() {
    local v=${2#"$1"_}
    echo "${v%.dsc}"
}

# fetch PACKAGE VERSION DIR: apt-get source --download-only into DIR (log DIR/fetch.log).
# Returns non-zero when apt could not fetch every file; the caller decides what it needs.
fetch() {
    local pkg=$1 version=$2 dir=$3
    (cd "$dir" && apt-get "${apt_opts[@]}" source --download-only "$pkg=${version#*:}") >"$dir/fetch.log" 2>&1 ||
        (cd "$dir" && apt-get "${apt_opts[@]}" source --download-only "$pkg") >>"$dir/fetch.log" 2>&1
}

# netpipe_source DSC VERSION DIR: NetPIPE's upstream source, fetched into DIR, checked against
# DSC's Checksums-Sha256 and unpacked into DIR/src (logs in DIR).
netpipe_source() {
    local dsc=$1 version=$2 dir=$3 orig want got
    # The Debian part (netpipe_*.debian.tar.xz) answers 404 (see the header); apt then
    # fails after fetching the .dsc and the upstream tarball, which is all that is used.
    fetch netpipe "$version" "$dir" || say "apt-get source netpipe reported an error (expected: the Debian part is missing); see $dir/fetch.log"
    [[ -f $dir/$dsc ]] || die "apt-get source did not fetch $dsc; see $dir/fetch.log"
    # The upstream tarball as the .dsc's Checksums-Sha256 names it (lines: HASH SIZE FILE).
    read -r want orig < <(awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 }
        on && $3 ~ /\.orig\.tar\./ { print $1, $3; exit }' "$dir/$dsc")
    [[ -n ${orig:-} && -f $dir/$orig ]] ||
        die "apt-get source did not fetch the upstream tarball ${orig:-named in $dsc}; see $dir/fetch.log"
    got=$(sha256sum "$dir/$orig" | cut -d' ' -f1)
    [[ $got == "$want" ]] || die "$orig: SHA-256 $got, but $dsc says $want"
    mkdir -p "$dir/src"
    tar -xf "$dir/$orig" -C "$dir/src" --strip-components=1 >"$dir/unpack.log" 2>&1 ||
        die "unpacking $orig failed; see $dir/unpack.log"
}
