# shellcheck shell=bash disable=SC2034  # the variables set here are for the sourcing scripts
# Shared helpers for guests/linux/*.sh; sourced, never run.
#
# Sets:
#   LINUX_GUEST_DIR  this folder (guests/linux)
#   LINUX_GUEST_OUT  where the build's results land (guests/linux/out)
#   KESTREL_CACHE    the cache root outside the repository: ${XDG_CACHE_HOME:-~/.cache}/kestrel
# Part of the kernel's and busybox's cache keys: a change here rebuilds both.

LINUX_GUEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LINUX_GUEST_OUT=$LINUX_GUEST_DIR/out
KESTREL_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kestrel
CROSS_COMPILE=powerpc-linux-gnu-
export CROSS_COMPILE

# say MESSAGE...: a progress line on stderr, prefixed with the script's name.
say() {
    printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2
}

# die MESSAGE...: print the message on stderr and exit 1.
die() {
    say "error: $*"
    exit 1
}

# need_tool NAME...: fail with the fix when a host tool is missing.
need_tool() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (or just setup)"
    done
}

# cache_key ITEM...: a short hash of the given strings and files. A file counts by its content,
# anything else by its text, each prefixed with its name so that nothing can shift between items.
cache_key() {
    local item
    for item in "$@"; do
        if [[ -f $item ]]; then
            printf 'file %s\n' "$(basename "$item")"
            cat "$item"
        else
            printf 'text %s\n' "$item"
        fi
    done | sha256sum | cut -c1-16
}

# cross_gcc_version: the cross compiler's package version (part of every cache key).
cross_gcc_version() {
    dpkg-query -W -f '${Version}' gcc-12-powerpc-linux-gnu 2>/dev/null ||
        "${CROSS_COMPILE}gcc" -dumpfullversion
}

# prune_cache DIR KEEP: remove all but the KEEP most recently used key folders in DIR (a key
# folder is named by 16 hex digits); other entries are left alone.
prune_cache() {
    local dir=$1 keep=$2 entry old
    for entry in "$dir"/*/; do
        if [[ ${entry%/} =~ /[0-9a-f]{16}$ ]]; then
            printf '%s %s\n' "$(stat -c %Y "$entry")" "${entry%/}"
        fi
    done | sort -rn | tail -n +"$((keep + 1))" | cut -d' ' -f2- |
        while read -r old; do
            say "pruning old cache entry $old"
            rm -rf "$old"
        done
}

# lock_cache DIR: hold an exclusive lock on DIR (created if needed) until the script exits, so
# that two builds never write the same cache entry; says so when it has to wait.
lock_cache() {
    mkdir -p "$1"
    exec 9>"$1/.lock"
    if ! flock -n 9; then
        say "waiting for another build holding $1/.lock"
        flock 9
    fi
}

# run_logged LOG LABEL CMD...: run CMD with its output in LOG, showing a progress line every 10 s
# (elapsed time, lines so far, the last line). On failure print the log's tail and return its status.
run_logged() {
    local log=$1 label=$2 start=$SECONDS last=$SECONDS lines=0 line status
    shift 2
    set +e
    "$@" >"$log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if ((SECONDS - last >= 10)); then
            last=$SECONDS
            lines=$(wc -l <"$log")
            line=$(tail -n 1 "$log" | cut -c1-70)
            say "$label: $((SECONDS - start)) s, $lines lines of output, at: ${line# }"
        fi
    done
    wait "$pid"
    status=$?
    set -e
    if ((status != 0)); then
        say "$label failed (status $status) after $((SECONDS - start)) s; last lines of $log:"
        tail -n 40 "$log" >&2
        return "$status"
    fi
    say "$label: done in $((SECONDS - start)) s (log: $log)"
}
