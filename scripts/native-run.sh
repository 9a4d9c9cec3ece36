#!/usr/bin/env bash
# Boots native programs under the root task: the Kestrel kernel, kestrel-root and the named
# programs (ELF files in target/powerpc-440-none/release) in one boot-module archive; the
# root task starts them (root.start=NAME,...) and stops the machine when all have ended.
#
#   scripts/native-run.sh NAME[,NAME...] [kestrel_qemu.py kestrel options...]
#
# Builds nothing (scripts/build-target.sh -p kestrel-root -p NAME). A thin wrapper around
# `scripts/kestrel_qemu.py kestrel --root kestrel-root --program NAME=ELF...` (options such as
# --timeout, --icount, --interactive, --log, --append, -- QEMU ARGS; see its --help). The
# console log is target/logs/native-NAME[-NAME...].log, the archive beside it.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(($# >= 1)) || die "usage: native-run.sh NAME[,NAME...] [kestrel_qemu.py kestrel options...]"
names=$1
shift
args=(kestrel --root "kestrel-root=$KESTREL_OUT/kestrel-root"
    --log "$KESTREL_TARGET_DIR/logs/native-${names//,/-}.log")
IFS=, read -ra list <<<"$names"
for n in "${list[@]}"; do
    args+=(--program "$n=$KESTREL_OUT/$n")
done
exec python3 "$KESTREL_ROOT/scripts/kestrel_qemu.py" "${args[@]}" "$@"
