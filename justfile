# Kestrel's entry points. Recipes stay thin: the logic lives in scripts/ and bench/.
# Fresh machine: `./kestrel run` or `./kestrel test` (they install everything, `just` included).

set shell := ["bash", "-euo", "pipefail", "-c"]

# Debian's Rust 1.96 builds everything (see rust-toolchain.toml); cargo must not pick up
# rustup's rustc from PATH.
export RUSTC := "/usr/bin/rustc"
cargo := if path_exists("/usr/bin/cargo") == "true" { "/usr/bin/cargo" } else { "cargo" }

# List the recipes
default:
    @{{ just_executable() }} --justfile {{ quote(justfile()) }} --list

# Install the Debian packages and tools Kestrel needs (fast no-op when present)
setup:
    scripts/setup.sh

# Build the host crates, the PowerPC 440 ELF files and the MPI C library for Linux programs (libkestrel_mpi_c.a, what scripts/kestrel-mpicc links)
build: setup
    {{ cargo }} build
    scripts/build-target.sh
    scripts/build-mpi-c.sh

# Boot Linux in Kestrel VMs to interactive shells: `just run` (one VM), `just run 2` (two), your own guest with `--kernel VMLINUX --initrd FILE --append ARGS --mem MB`, native programs beside the VMs with `--native NAME`, a job of N ranks of a static Linux program with `--ranks N PROG` (e.g. `just run 2 --ranks 4 prog --script smoke`); ARGS go to scripts/vm-linux.sh (e.g. --script smoke)
[positional-arguments]
run *ARGS: setup
    #!/usr/bin/env bash
    set -euo pipefail
    packages=(-p kestrel-kernel -p kestrel-root -p kestrel-vmm -p kestrel-fabric-service)
    args=("$@")
    for ((i = 0; i + 1 < ${#args[@]}; i++)); do
        [[ ${args[i]} == --native ]] && packages+=(-p "${args[i + 1]}")
        [[ ${args[i]} == --ranks ]] && packages+=(-p kestrel-linux)
    done
    scripts/build-target.sh "${packages[@]}"
    exec scripts/vm-linux.sh "$@"

# Run a job: N ranks (1..8) of the static Linux program PROG at once under the Linux personality, beside the fabric service (`just mpi prog 4 ARG...`; build an MPI program with scripts/kestrel-mpicc, which this recipe's build of libkestrel_mpi_c.a serves, any other with scripts/kestrel-cc; each rank reads KESTREL_RANK/KESTREL_SIZE; options before PROG: --no-fabric, --timeout SECS (default 120), --mem MB (default 256); docs/adr/0034-linux-personality.md). PROG `NPmpi` is NetPIPE's MPI module, built here by scripts/build-npmpi.sh (`just mpi --timeout 600 NPmpi 2 -u 1048576`)
[positional-arguments]
mpi *ARGS: setup
    #!/usr/bin/env bash
    set -euo pipefail
    scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-linux -p kestrel-fabric-service
    scripts/build-mpi-c.sh
    for a in "$@"; do
        if [[ $a == NPmpi && ! -e NPmpi ]]; then
            scripts/build-npmpi.sh >/dev/null
            break
        fi
    done
    exec scripts/linux-job.sh "$@"

# Boot the native IPC demo (kestrel-demo, started by the root task) under QEMU
demo: setup
    scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-demo
    scripts/native-run.sh kestrel-demo --timeout 60

# Every test, tier by tier, even after a failure (tests/run.py; docs/TESTING.md): build, host (cargo test), unit (the test framework and bench drivers), ontarget (ktest), functional (guests, VMs, Linux, the interconnect, native programs), security (the hostile guest and the syscall fuzzer, seed 1), fuzz (every libFuzzer target for 5 s), docs; ends with `TIER: N passed, M failed` per tier and `all: N passed, M failed`. ARGS: tiers to run, `--no-build`, `-- PYTEST ARGS` (e.g. `just test functional --no-build -- -k net`)
[positional-arguments]
test *ARGS: setup
    python3 tests/run.py "$@"

# Fuzz the parsers of guest- and user-controlled data with libFuzzer, one process: `just fuzz` runs every target for 20 s each, `just fuzz vtlb 600` one target for 10 minutes (targets: scripts/fuzz.sh --list; docs/adr/0017-fuzzing.md)
fuzz TARGET="all" SECONDS="20": setup
    scripts/fuzz.sh {{ quote(TARGET) }} {{ quote(SECONDS) }}

# Long adversarial runs (issues 9 and 18): the hostile guest beside a checksumming neighbour VM for at least 10^6 guest instructions, then the device attacker (the same guest hitting its BG/P devices and the virtio NIC, beside native ranks exchanging and allreducing on the node's one fabric) for 10^6, then the native syscall fuzzer (10^5 calls unprivileged and 10^5 privileged, beside a counting sibling, capacity probed before and after); SEED is random (and printed) unless given, `just soak SEED` reproduces a run
soak SEED="": setup
    scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-vmm -p kestrel-hostile -p kestrel-sysfuzz -p kestrel-fabric-service -p kestrel-fabric-ranks
    scripts/attack-guest.py --instructions 1000000 --timeout 3600 {{ if SEED == "" { "" } else { "--seed " + SEED } }}
    scripts/attack-guest.py --devices --ranks 20 --instructions 1000000 --timeout 5400 {{ if SEED == "" { "" } else { "--seed " + SEED } }}
    scripts/sysfuzz.py --calls 100000 --mode both --timeout 3600 --seed {{ if SEED == "" { "random" } else { SEED } }}

# Formatting (cargo fmt --check) and clippy on every crate, host and PowerPC 440; fails on any warning (`scripts/lint.sh --report` counts them instead)
lint: setup
    scripts/lint.sh

# Run a benchmark by name (available: ipc, exits, table1, net, shared-fabric, noise, mpi)
bench NAME: setup
    #!/usr/bin/env bash
    set -euo pipefail
    case {{ quote(NAME) }} in
        ipc) exec python3 bench/ipc.py ;;
        exits) exec python3 bench/exits.py ;;
        table1) exec python3 bench/table1.py ;;
        net) exec python3 bench/net.py ;;
        shared-fabric) exec python3 bench/shared_fabric.py ;;
        noise) exec python3 bench/noise.py ;;
        mpi) exec python3 bench/mpi.py ;;
        *) echo "unknown benchmark {{ quote(NAME) }}; available: ipc, exits, table1, net, shared-fabric, noise, mpi" >&2; exit 1 ;;
    esac

# Boot a bare-metal guest (ELF name, e.g. kestrel-selftest) in a VM under Kestrel's VMM
vm GUEST *ARGS: setup
    scripts/build-target.sh -p kestrel-kernel -p kestrel-root -p kestrel-vmm -p kestrel-fabric-service -p {{ GUEST }}
    scripts/vm-run.sh {{ GUEST }} {{ ARGS }}

# Build and boot any root task by package name, e.g. `just qemu ktest` (ARGS go to qemu-run.sh, i.e. scripts/kestrel_qemu.py kestrel)
[positional-arguments]
qemu ROOTTASK *ARGS: setup
    scripts/build-target.sh -p kestrel-kernel -p "$1"
    scripts/qemu-run.sh "$@"

# Build the Linux guest and boot it natively on bamboo: a busybox shell (ARGS: e.g. --script smoke)
[positional-arguments]
run-native *ARGS: setup
    guests/linux/build.sh
    guests/linux/run-native.sh "$@"

# Remove build output and logs
clean:
    {{ cargo }} clean
