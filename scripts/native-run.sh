#!/usr/bin/env bash
# Boots native programs under the root task: the Kestrel kernel, kestrel-root and the named
# programs (ELF files in target/powerpc-440-none/release) in one boot-module archive; the
# root task starts them (root.start=NAME,...) and stops the machine when all have ended.
#
#   scripts/native-run.sh NAME[,NAME...] [qemu-run.sh options...]
#
# Builds nothing (scripts/build-target.sh -p kestrel-root -p NAME).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(($# >= 1)) || die "usage: native-run.sh NAME[,NAME...] [qemu-run.sh options...]"
names=$1
shift
root=$KESTREL_OUT/kestrel-root
[[ -f $root ]] || die "no root task at $root (build it: scripts/build-target.sh -p kestrel-root)"
modules=("kestrel-root=$root")
IFS=, read -ra list <<<"$names"
for n in "${list[@]}"; do
    [[ -f $KESTREL_OUT/$n ]] || die "no program $KESTREL_OUT/$n (build it: scripts/build-target.sh -p $n)"
    modules+=("$n=$KESTREL_OUT/$n")
done
archive=$KESTREL_OUT/native-${names//,/-}.bootmod
python3 "$KESTREL_ROOT/scripts/mkbootmod.py" "$archive" "${modules[@]}"
exec "$KESTREL_ROOT/scripts/qemu-run.sh" "$archive" --log "$KESTREL_TARGET_DIR/logs/native-${names//,/-}.log" \
    "$@" -- -append "root.start=$names"
