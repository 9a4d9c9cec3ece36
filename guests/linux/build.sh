#!/usr/bin/env bash
# Builds Kestrel's Linux guest: the kernel, busybox and the initramfs, into guests/linux/out/.
#
#   guests/linux/build.sh
#
# Results (guests/linux/out/, not in git):
#   vmlinux             Linux 6.1 for bamboo, the file QEMU's -kernel and Kestrel's VMM load
#   initramfs.cpio.gz   the root filesystem (newc cpio, gzip), given as the initrd
#   modules/*.ko        the BG/P interconnect drivers (modules/build.sh), in the initramfs
#                       under /lib/modules/kestrel/
#   System.map, vmlinux.config, busybox, busybox.links, kestrel-tb, initramfs.list: for reference
#
# The kernel (build-kernel.sh), busybox (build-busybox.sh) and the modules (modules/build.sh)
# come from caches under
# ${XDG_CACHE_HOME:-~/.cache}/kestrel/ when their inputs are unchanged; see README.md.
# The initramfs and kestrel-tb are rebuilt on every run (well under a second) and are
# byte-for-byte reproducible: sorted entries, fixed owners and times, `gzip -n`.
set -euo pipefail
# shellcheck source=guests/linux/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Every entry's mtime (files included). SOURCE_DATE_EPOCH overrides it, as for other tools.
epoch=${SOURCE_DATE_EPOCH:-0}

start=$SECONDS
"$LINUX_GUEST_DIR/build-kernel.sh"
"$LINUX_GUEST_DIR/build-busybox.sh"
"$LINUX_GUEST_DIR/build-tools.sh"
"$LINUX_GUEST_DIR/modules/build.sh"

need_tool "${CROSS_COMPILE}gcc" gzip

# kestrel-tb: reads the time base (tools/kestrel-tb.c). Freestanding, no build id: reproducible.
"${CROSS_COMPILE}gcc" -static -nostdlib -ffreestanding -fno-stack-protector -O2 -Wall -Wextra \
    -Wl,--build-id=none -s -o "$LINUX_GUEST_OUT/kestrel-tb.new" "$LINUX_GUEST_DIR/tools/kestrel-tb.c" -lgcc
mv "$LINUX_GUEST_OUT/kestrel-tb.new" "$LINUX_GUEST_OUT/kestrel-tb"
# kestrel-udp-echo: one UDP datagram to an echo service, checked (tools/kestrel-udp-echo.c).
"${CROSS_COMPILE}gcc" -static -O2 -Wall -Wextra -Wl,--build-id=none -s \
    -o "$LINUX_GUEST_OUT/kestrel-udp-echo.new" "$LINUX_GUEST_DIR/tools/kestrel-udp-echo.c"
mv "$LINUX_GUEST_OUT/kestrel-udp-echo.new" "$LINUX_GUEST_OUT/kestrel-udp-echo"
# kestrel-fwq: the fixed-work-quantum noise benchmark (tools/kestrel-fwq.c, bench/noise.py).
"${CROSS_COMPILE}gcc" -static -O2 -Wall -Wextra -Wl,--build-id=none -s \
    -o "$LINUX_GUEST_OUT/kestrel-fwq.new" "$LINUX_GUEST_DIR/tools/kestrel-fwq.c"
mv "$LINUX_GUEST_OUT/kestrel-fwq.new" "$LINUX_GUEST_OUT/kestrel-fwq"

# The initramfs: gen_init_cpio (the kernel's own tool) packs a list of entries, so device
# nodes need no root. It takes a file's mtime from the file, hence the staged copies.
stage=$LINUX_GUEST_OUT/initramfs.stage
rm -rf "$stage"
mkdir -p "$stage/scripts" "$stage/etc" "$stage/modules"
cp "$LINUX_GUEST_DIR/init" "$stage/init"
cp "$LINUX_GUEST_OUT/busybox" "$LINUX_GUEST_OUT/kestrel-tb" "$LINUX_GUEST_OUT/kestrel-udp-echo" "$LINUX_GUEST_OUT/kestrel-fwq" "$LINUX_GUEST_OUT/iperf" "$LINUX_GUEST_OUT/NPtcp" "$stage/"
cp "$LINUX_GUEST_DIR"/scripts/* "$stage/scripts/"
cp "$LINUX_GUEST_DIR"/rootfs/etc/* "$stage/etc/"
cp "$LINUX_GUEST_OUT"/modules/*.ko "$stage/modules/"
find "$stage" -exec touch -h -d "@$epoch" {} +

list=$LINUX_GUEST_OUT/initramfs.list
{
    for d in bin dev etc lib lib/modules lib/modules/kestrel proc root run sbin scripts sys tmp \
        usr usr/bin usr/sbin var; do
        echo "dir /$d 0755 0 0"
    done
    # The console must exist before devtmpfs is mounted: the kernel opens it for /init's stdio.
    echo "nod /dev/console 0600 0 0 c 5 1"
    echo "nod /dev/null 0666 0 0 c 1 3"
    # Sources relative to the staging folder, where gen_init_cpio runs.
    echo "file /init init 0755 0 0"
    echo "file /bin/busybox busybox 0755 0 0"
    echo "file /bin/kestrel-tb kestrel-tb 0755 0 0"
    echo "file /bin/kestrel-udp-echo kestrel-udp-echo 0755 0 0"
    echo "file /bin/kestrel-fwq kestrel-fwq 0755 0 0"
    echo "file /usr/bin/iperf iperf 0755 0 0"
    echo "file /usr/bin/NPtcp NPtcp 0755 0 0"
    for f in "$stage"/scripts/*; do
        echo "file /scripts/${f##*/} scripts/${f##*/} 0755 0 0"
    done
    for f in "$stage"/etc/*; do
        echo "file /etc/${f##*/} etc/${f##*/} 0644 0 0"
    done
    for f in "$stage"/modules/*.ko; do
        echo "file /lib/modules/kestrel/${f##*/} modules/${f##*/} 0644 0 0"
    done
    # One symlink per applet, at the path busybox itself names (linuxrc and the like skipped).
    grep -E '^/(bin|sbin|usr/bin|usr/sbin)/[^/]+$' "$LINUX_GUEST_OUT/busybox.links" |
        grep -vxF /bin/busybox | while read -r applet; do
        echo "slink $applet /bin/busybox 0777 0 0"
    done
} | LC_ALL=C sort -k2,2 -u >"$list"

(cd "$stage" && "$LINUX_GUEST_OUT/gen_init_cpio" -t "$epoch" "$list") | gzip -n -9 >"$LINUX_GUEST_OUT/initramfs.cpio.gz.new"
if cmp -s "$LINUX_GUEST_OUT/initramfs.cpio.gz.new" "$LINUX_GUEST_OUT/initramfs.cpio.gz"; then
    rm "$LINUX_GUEST_OUT/initramfs.cpio.gz.new"
else
    mv "$LINUX_GUEST_OUT/initramfs.cpio.gz.new" "$LINUX_GUEST_OUT/initramfs.cpio.gz"
fi
rm -rf "$stage"
say "initramfs: $LINUX_GUEST_OUT/initramfs.cpio.gz ($(stat -c %s "$LINUX_GUEST_OUT/initramfs.cpio.gz") bytes, $(wc -l <"$list") entries)"
say "done in $((SECONDS - start)) s: boot with guests/linux/run-native.sh"
