"""What the benchmark drivers (bench/*.py) share: their error, the determinism check every
-icount benchmark makes, and the provenance and output helpers (QEMU's version, the commit, a
private copy of the ELF files, markdown tables, matplotlib)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import qemu

# The interpreter Debian's python3-matplotlib is installed for (scripts/setup.sh).
DEBIAN_PYTHON = Path("/usr/bin/python3")


class BenchError(Exception):
    """A run that cannot be turned into results; the message says what went wrong."""


def flatten(value, prefix: str = "") -> dict[str, object]:
    """Nested dicts as one dict of dotted keys (`inter.instructions`); other values as they are."""
    if not isinstance(value, dict):
        return {prefix: value}
    flat: dict[str, object] = {}
    for key, inner in value.items():
        flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def check_deterministic(runs: list, figures=flatten, shown: int = 12) -> None:
    """Fails unless every run gave the same figures (the point of -icount), naming the figures
    that differ (`figures(run)` flattens a run; the first `shown` differences are listed)."""
    first = figures(runs[0])
    for index, run in enumerate(runs[1:], start=2):
        other = figures(run)
        diffs = [f"{k}: run 1 {first.get(k)}, run {index} {other.get(k)}"
                 for k in sorted(set(first) | set(other), key=str) if first.get(k) != other.get(k)]
        if diffs:
            text = "; ".join(diffs[:shown]) + (f"; ... ({len(diffs)} in all)" if len(diffs) > shown else "")
            raise BenchError("runs differ under -icount (non-deterministic): " + text)


def qemu_version() -> str:
    """First line of `qemu-system-ppc --version`."""
    out = subprocess.run([qemu.QEMU, "--version"], check=True, capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def git_commit() -> str:
    """HEAD's hash, with `-dirty` when tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(qemu.ROOT), *args], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def private_target(target_dir: Path, name: str) -> Path:
    """A folder of our own (target_dir/name) holding copies of the kernel, the root task, the
    VMM and the fabric service, for every run of one invocation, so that a rebuild of the ELF files meanwhile cannot
    change what a later run boots."""
    priv = target_dir / name
    out = priv / "powerpc-440-none" / "release"
    out.mkdir(parents=True, exist_ok=True)
    for elf in ("kestrel-kernel", "kestrel-root", "kestrel-vmm", "kestrel-fabric"):
        dst = out / elf
        if dst.is_symlink() or dst.exists():
            dst.unlink()  # never write through a link left by someone else
        shutil.copy2(target_dir / "powerpc-440-none" / "release" / elf, dst)
    return priv


def md_table(header: tuple, rows: list[tuple], align: str) -> list[str]:
    """A markdown table; align has one 'l' or 'r' per column."""
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def pyplot(s: dict, out: Path, script: str):
    """matplotlib's pyplot for drawing `s`'s plot next to `out`: (pyplot, None), or (None, why
    no plot was drawn here, None when Debian's interpreter drew it instead by running
    `script --plot-only`). Shared by every benchmark that plots (table1, net)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        # Debian's python3-matplotlib (scripts/setup.sh) belongs to Debian's interpreter; a
        # python3 earlier on PATH (pyenv, a venv) lacks it: let Debian's draw the plot.
        if Path(sys.executable).resolve() != DEBIAN_PYTHON.resolve() and DEBIAN_PYTHON.exists():
            with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
                json.dump(s, tmp)
                tmp.flush()
                done = subprocess.run([str(DEBIAN_PYTHON), script, "--plot-only", tmp.name,
                                       "--output", str(out.with_suffix(".json"))], capture_output=True, text=True)
            return None, (None if done.returncode == 0 else f"{DEBIAN_PYTHON} could not draw it: {done.stderr.strip()}")
        return None, f"matplotlib not available ({err}): run scripts/setup.sh"
    return plt, None
