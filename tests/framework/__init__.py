"""Kestrel's test framework: everything the system tests, the benchmarks and the wrapper scripts
share, each defined once.

- `qemu`: the one QEMU launcher (command lines, boot-module images, running with a timeout and
  a log) and its command line (`scripts/kestrel_qemu.py` runs `qemu.main`);
- `console`: parsers of console logs and `Console`, the reader of a running QEMU's console;
- `linux`: the Linux guest's images, its command line and the VMs' address plan;
- `constants`: the numbers mirrored from the Rust source, each with its origin (checked by
  tests/unit/test_rust_constants.py);
- `rust`: finding crates and items in the Rust source;
- `bootmod`: the boot-module archive format;
- `machine`: `Machine`, one QEMU run owned by a test (the `machine` fixture);
- `programs`: the native programs' output, recomputed;
- `hostile`, `sysfuzz`, `vmdiag`: the verdicts of the hostile guest, the syscall fuzzer and the
  VMM diagnostics test (the first two also run at length by scripts/attack-guest.py and
  scripts/sysfuzz.py for `just soak`);
- `bench`: what the benchmark drivers in bench/ share (errors, determinism, provenance).

Import it as `framework` with tests/ on the path: pytest puts it there (tests/conftest.py);
scripts and benchmarks insert `ROOT/tests` into sys.path first.
"""
