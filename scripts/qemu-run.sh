#!/usr/bin/env bash
# Boots the Kestrel kernel with a root task under QEMU's -M bamboo; builds nothing.
#
#   scripts/qemu-run.sh ROOTTASK [--program NAME=ELF]... [--module NAME=FILE]... [--append TEXT]
#                       [--timeout SECS] [--icount] [--interactive] [--log FILE] [--mem MB]
#                       [--kernel ELF] [-- EXTRA QEMU ARGS...]
#
# A thin wrapper around `scripts/kestrel_qemu.py kestrel` (see its --help). ROOTTASK is an ELF
# path, or a package name looked up in target/powerpc-440-none/release/. The kernel (default:
# that folder's kestrel-kernel, or $KESTREL_KERNEL) goes to -kernel, the root task to -initrd
# (QEMU loads it at 0x1900000); with --program or --module the root task is the first module of
# a boot-module archive (written next to the log), and each program is named in the kernel
# command line's `root.start=`. UART0 is the console on stdout, teed to the log (default
# target/logs/<roottask>.log). --icount: deterministic, instruction-driven guest time.
# --interactive: keyboard input to the console, Ctrl-C to the guest, Ctrl-A x quits QEMU;
# --timeout 0 means no timeout. An `-append X` after `--` joins the kernel command line.
#
# Exit status: QEMU's (0 after the kernel's own shutdown), or 124 when the wall-clock timeout
# (default 60 s) ran out.
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/kestrel_qemu.py" kestrel "$@"
