#!/usr/bin/env bash
# Boots a job of a static Linux program on Kestrel: the kernel, kestrel-root, the fabric
# service kestrel-fabric, the Linux personality server kestrel-linux and N ranks of PROG run
# at once (`linux.job=NAME:N`, docs/adr/0034-linux-personality.md). Each rank finds its rank
# and the job size in KESTREL_RANK / KESTREL_SIZE; its console lines are prefixed NAME.R.
#
#   scripts/linux-job.sh [--no-fabric] [--timeout SECS] [--mem MB] PROG N [ARGS...]
#
# PROG is a static 32-bit PowerPC executable (e.g. built by scripts/kestrel-cc), or the name
# NPmpi for NetPIPE's MPI module as scripts/build-npmpi.sh builds it (target/netpipe/NPmpi);
# ARGS go to every rank's argv (words without spaces or commas). A rank that faults or exits
# non-zero ends the job with one line naming it and the cause. The machine stops by itself
# when kestrel-linux and kestrel-fabric have ended (the fabric service ends after its last
# endpoint detaches, or, when it holds none, once the root task says no other program runs;
# --no-fabric leaves it out). --mem is the machine's RAM in MiB: by default 256, the most
# Kestrel's bamboo takes (eight ranks moving multi-megabyte MPI messages do not fit in QEMU's
# default 128). Builds nothing (`just mpi` does).
# The console log is target/logs/job-NAME.log.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

fabric=1
timeout=120
mem=256
while (($# > 0)); do
    case $1 in
        --no-fabric) fabric=0; shift ;;
        --timeout) (($# >= 2)) || die "--timeout needs seconds"; timeout=$2; shift 2 ;;
        --mem) (($# >= 2)) || die "--mem needs MiB"; mem=$2; shift 2 ;;
        -h | --help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) break ;;
    esac
done
(($# >= 2)) || die "usage: linux-job.sh [--no-fabric] [--timeout SECS] [--mem MB] PROG N [ARGS...]"
prog=$1
ranks=$2
shift 2
if [[ $prog == NPmpi && ! -e $prog ]]; then
    prog=$KESTREL_TARGET_DIR/netpipe/NPmpi
    [[ -f $prog ]] || die "NPmpi is not built: scripts/build-npmpi.sh (\`just mpi NPmpi ...\` builds it)"
fi
[[ -f $prog ]] || die "$prog: no such file"
[[ $ranks =~ ^[1-8]$ ]] || die "N: from 1 to 8 ranks (kestrel-linux runs at most 8 programs at once)"
header=$(powerpc-linux-gnu-readelf -h "$prog" 2>/dev/null) || die "$prog: not an ELF file"
grep -q 'Machine:.*PowerPC$' <<<"$header" || die "$prog: not a 32-bit PowerPC ELF"
grep -q 'Type:.*EXEC' <<<"$header" || die "$prog: not a static executable; link it with -static"
! powerpc-linux-gnu-readelf -l "$prog" | grep -q INTERP || die "$prog: dynamically linked; link it with -static"
name=$(basename "$prog")
[[ $name =~ ^[A-Za-z0-9._-]{1,40}$ ]] || die "$prog: use a file name of letters, digits, . _ - (it names the module)"
append="linux.job=$name:$ranks"
if (($# > 0)); then
    for a in "$@"; do
        [[ -n $a && $a != *[[:space:],]* ]] || die "argument '$a': Kestrel passes words without spaces or commas"
    done
    append+=" linux.args=$(IFS=,; echo "$*")"
fi
args=(kestrel --root "kestrel-root=$KESTREL_OUT/kestrel-root"
    --log "$KESTREL_TARGET_DIR/logs/job-$name.log" --timeout "$timeout")
args+=(--mem "$mem")
((fabric)) && args+=(--program "kestrel-fabric=$KESTREL_OUT/kestrel-fabric")
args+=(--program "kestrel-linux=$KESTREL_OUT/kestrel-linux" --module "$name=$prog" --append "$append")
exec python3 "$KESTREL_ROOT/scripts/kestrel_qemu.py" "${args[@]}"
