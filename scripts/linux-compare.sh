#!/usr/bin/env bash
# Boots the unmodified Linux guest natively (guests/linux/run-native.sh) and in two Kestrel VMs
# (scripts/vm-linux.sh): one with the paravirtual interface (the default; the kernel must log
# that the guest mapped the magic page) and one with full virtualization (`vmm.pv=off` on the
# Kestrel command line; no magic page), all three running the same guest script (default:
# smoke), and fails unless the script's output is the same in all.
#
#   scripts/linux-compare.sh [--no-build] [--script NAME] [--timeout SECS] [--icount]
#
# Compared: VM 0's console (lines prefixed "[vm0] " when several VMs run, else every line) from
# /init's "kestrel-guest:" banner to KESTREL-SCRIPT-DONE, without CRs. The kernel's boot log
# before /init is not compared (it differs between the boards by design: the VM's command line
# adds nosmap, the VMM's device tree has no PCI host bridge); the number of differing lines is
# printed and the diff kept. Left out or normalised inside that range, each printed or counted:
#   - lines starting "timing:" (they vary from run to run);
#   - VMM and Kestrel kernel lines ("vmm:", "kestrel:") in the VM's console: not guest output,
#     but printed as a note;
#   - named /proc/cpuinfo or dmesg fields that differ between the boards, each listed with its
#     reason at normalize() below (none today: the native run gets the VM's memory size).
# Exit status 1 when either run does not reach KESTREL-SCRIPT-DONE, its script does not exit 0
# or its QEMU exits non-zero, or when the outputs differ (a unified diff is printed then). The
# last line is a summary.
# Logs: target/logs/linux-compare-{native,vm,vm-pvoff}.log, the compared text next to them (.txt).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build=true
script=smoke
timeout_secs=300
icount=()
while (($# > 0)); do
    case $1 in
        --no-build) build=false; shift ;;
        --script) (($# >= 2)) || die "--script needs a value"; script=$2; shift 2 ;;
        --timeout) (($# >= 2)) || die "--timeout needs a value"; timeout_secs=$2; shift 2 ;;
        --icount) icount=(--icount); shift ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done
[[ $timeout_secs =~ ^[1-9][0-9]*$ ]] || die "--timeout wants whole seconds, got '$timeout_secs'"

if $build; then
    "$KESTREL_ROOT/scripts/build-target.sh" -p kestrel-kernel -p kestrel-root -p kestrel-vmm
fi
# Built once here, so that vm-linux.sh's own (cached) build cannot replace the initramfs while
# the native QEMU reads it.
logs=$KESTREL_TARGET_DIR/logs
mkdir -p "$logs"
"$KESTREL_ROOT/guests/linux/build.sh" 2>"$logs/linux-compare-build.log" ||
    die "guests/linux/build.sh failed (log: $logs/linux-compare-build.log)"
native_log=$logs/linux-compare-native.log
vm_log=$logs/linux-compare-vm.log
vm_pvoff_log=$logs/linux-compare-vm-pvoff.log

# vm-linux.sh writes its boot-module archive next to its log in the target folder: a target
# folder of our own (with copies of the kernel and the VMM) keeps another vm-linux.sh running
# at the same time, or a rebuild, from swapping either under this run.
private=$KESTREL_TARGET_DIR/linux-compare
mkdir -p "$private/powerpc-440-none/release"
for elf in kestrel-kernel kestrel-root kestrel-vmm; do
    cp "$KESTREL_OUT/$elf" "$private/powerpc-440-none/release/$elf"
done

# The native run gets the VM's guest RAM (kestrel-vmm's LINUX_RAM, 64 MiB), so that
# /proc/cpuinfo's "Memory" line and the kernel's memory sizing agree without normalising; the
# VMM's "OS guest: ... N MiB RAM" line is checked against it below.
guest_mb=64

echo "linux-compare: booting Linux natively (-m $guest_mb), in a VM and in a VM with vmm.pv=off, with script $script (logs: $native_log, $vm_log, $vm_pvoff_log)"
start=$SECONDS
"$KESTREL_ROOT/guests/linux/run-native.sh" --script "$script" --timeout "$timeout_secs" "${icount[@]}" \
    --mem "$guest_mb" --log "$native_log" >/dev/null 2>"$logs/linux-compare-native.err" &
native_pid=$!
# vm_run CONSOLE_LOG NAME [vm-linux.sh ARGS]: one VM run on the guest built above (--kernel, so
# that vm-linux.sh does not rebuild it), with its own QEMU log and boot-module archive.
guest_out=$KESTREL_ROOT/guests/linux/out
vm_run() {
    local console=$1 name=$2
    shift 2
    CARGO_TARGET_DIR=$private "$KESTREL_ROOT/scripts/vm-linux.sh" --script "$script" --timeout "$timeout_secs" \
        --kernel "$guest_out/vmlinux" --initrd "$guest_out/initramfs.cpio.gz" \
        --log "$private/vm-linux-$name.log" "${icount[@]}" "$@" </dev/null >"$console" 2>&1
}
vm_run "$vm_pvoff_log" pvoff --kernel-args vmm.pv=off &
vm_pvoff_pid=$!
set +e
vm_run "$vm_log" pv
vm_status=$?
wait "$vm_pvoff_pid"
vm_pvoff_status=$?
wait "$native_pid"
native_status=$?
set -e
echo "linux-compare: all runs done after $((SECONDS - start)) s (native status $native_status, VM status $vm_status, VM vmm.pv=off status $vm_pvoff_status)"

# guest_console LOG: VM 0's console lines without CRs (a native or one-VM log: all of it).
guest_console() {
    # grep without -q reads its whole input: with -q it may exit at the first match and kill
    # the writer of the pipe with SIGPIPE, which pipefail turns into a failed test.
    if tr -d '\r' <"$1" | grep '^\[vm[0-9][0-9]*\] ' >/dev/null; then
        tr -d '\r' <"$1" | sed -n 's/^\[vm0\] //p'
    else
        tr -d '\r' <"$1"
    fi
}

# script_output LOG: from /init's banner to KESTREL-SCRIPT-DONE (inclusive); empty if either
# is missing.
script_output() {
    # awk reads to the end rather than exiting early: an early exit can kill the writer of
    # the pipe with SIGPIPE, which pipefail turns into a failed run.
    guest_console "$1" | awk '
        done { next }
        /^kestrel-guest: Linux / { on = 1; n = 0 }
        on { buf[n++] = $0 }
        on && $0 == "KESTREL-SCRIPT-DONE" { for (i = 0; i < n; i++) print buf[i]; done = 1 }'
}

# normalize: drops the timing lines. This is also the one place for rules that blank a named
# field which legitimately differs between QEMU's bamboo and the VM, one sed expression per
# field with the reason beside it. None is needed today: the VMM's generated device tree gives
# the same /proc/cpuinfo fields as QEMU's (clock, revision, bogomips, model) and the native run
# gets the VM's memory size (Memory), and dmesg has no warning lines in either. Add a rule
# only for a field seen to differ, never a blanket one.
normalize() {
    grep -v '^timing:' || true
}

status=0
for mode in native vm vm_pvoff; do
    log=${mode}_log
    out=$logs/linux-compare-${mode//_/-}.txt
    script_output "${!log}" >"$out.raw"
    if ! grep -qx 'KESTREL-SCRIPT-DONE' "$out.raw"; then
        echo "linux-compare: $mode run did not reach KESTREL-SCRIPT-DONE (log: ${!log})" >&2
        tr -d '\r' <"${!log}" | tail -n 15 | sed 's/^/    /' >&2
        status=1
    elif ! guest_console "${!log}" | grep -xF "kestrel-guest: script $script exited with status 0; powering off" >/dev/null; then
        echo "linux-compare: $mode run: script $script did not exit with status 0 (log: ${!log})" >&2
        status=1
    fi
done
# A run that finished its script but whose QEMU then failed (a power-off that hangs into the
# timeout, a crash) is a failure too.
if ((status == 0 && (native_status != 0 || vm_status != 0 || vm_pvoff_status != 0))); then
    echo "linux-compare: a QEMU run exited non-zero after the script finished (native $native_status, VM $vm_status, VM vmm.pv=off $vm_pvoff_status)" >&2
    status=1
fi
# The paravirtual interface (kestrel_abi::pv): the default VM's guest found it (the kernel logs
# the guest's magic-page hypercall once per vCPU); the vmm.pv=off VM has none.
pv_line='^kestrel: vCPU [0-9]*: guest mapped the paravirtual magic page'
if ! tr -d '\r' <"$vm_log" | grep "$pv_line" >/dev/null; then
    echo "linux-compare: the VM's guest did not map the paravirtual magic page (log: $vm_log)" >&2
    status=1
fi
if tr -d '\r' <"$vm_pvoff_log" | grep "$pv_line" >/dev/null ||
    ! tr -d '\r' <"$vm_pvoff_log" | grep '^vmm: vmm.pv=off' >/dev/null; then
    echo "linux-compare: the vmm.pv=off VM did not run without the paravirtual interface (log: $vm_pvoff_log)" >&2
    status=1
fi
if ((status != 0)); then
    echo "linux-compare: FAILED: a run did not finish its script cleanly"
    exit 1
fi
vm_mb=$(tr -d '\r' <"$vm_log" | sed -n 's/^vmm: \(vm0: \)\{0,1\}OS guest: .*, \([0-9][0-9]*\) MiB RAM$/\2/p' | head -n 1)
if [[ $vm_mb != "$guest_mb" ]]; then
    echo "linux-compare: FAILED: the VM has '${vm_mb:-?}' MiB of RAM, the native run $guest_mb MiB (update guest_mb)"
    exit 1
fi

# Kestrel's own lines inside a VM's script output are not the guest's: listed, then dropped.
for vm in vm vm-pvoff; do
    if grep -E '^(root|vmm|kestrel): ' "$logs/linux-compare-$vm.txt.raw" >"$logs/linux-compare-$vm.notes"; then
        echo "linux-compare: note: VMM/kernel lines inside the $vm run's script output (not compared):"
        sed 's/^/    /' "$logs/linux-compare-$vm.notes"
    fi
    grep -Ev '^(root|vmm|kestrel): ' "$logs/linux-compare-$vm.txt.raw" | normalize >"$logs/linux-compare-$vm.txt" || true
done
normalize <"$logs/linux-compare-native.txt.raw" >"$logs/linux-compare-native.txt"
# For information only: how the kernel's own boot logs (before /init) differ. Kestrel's and
# the scripts' own lines are left out; the rest differs by design (the VM's command line adds
# nosmap, its device tree has no PCI), so it is counted and kept, never compared.
boot_log() {
    guest_console "$1" | awk '/^kestrel-guest: Linux / { done = 1 } !done { print }' |
        grep -Ev '^(root|vmm|kestrel|kestrel-qemu|vm-linux|run-native|build|build-kernel|build-busybox): |^Kestrel microkernel|^$' || true
}
boot_log "$native_log" >"$logs/linux-compare-native.boot"
boot_log "$vm_log" >"$logs/linux-compare-vm.boot"
boot_diff=$logs/linux-compare-boot.diff
if ! diff -u --label native --label vm "$logs/linux-compare-native.boot" "$logs/linux-compare-vm.boot" >"$boot_diff"; then
    echo "linux-compare: note: the kernel boot logs before /init differ in $(grep -c '^[-+][^-+]' "$boot_diff") lines (not compared; $boot_diff)"
fi

timing=$(grep -c '^timing:' "$logs/linux-compare-native.txt.raw" || true)
lines=$(wc -l <"$logs/linux-compare-native.txt")
for vm in vm vm-pvoff; do
    if ! diff -u --label native --label "$vm" "$logs/linux-compare-native.txt" "$logs/linux-compare-$vm.txt"; then
        echo "linux-compare: FAILED: script $script: native and $vm outputs differ (diff above; logs: $native_log, $logs/linux-compare-$vm.log)"
        exit 1
    fi
done
echo "linux-compare: OK: script $script: native, VM and VM with vmm.pv=off outputs identical ($lines lines compared, $timing timing lines skipped)"
