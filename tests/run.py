#!/usr/bin/env python3
"""Kestrel's test runner (`just test`): builds what the tests boot, runs every tier, even after
a failure, and ends with one line per tier and one for all of them:

    build: 3 passed, 0 failed
    host: 485 passed, 0 failed, 2 skipped
    ...
    all: 772 passed, 0 failed, 2 skipped

It exits 1 when anything failed. Tiers, in order (docs/TESTING.md says what each holds):

    build       scripts/build-target.sh (every target ELF), scripts/build-mpi-c.sh (the MPI C
                library for Linux programs) and guests/linux/build.sh, one test each
    host        `cargo test`: the pure crates' unit, property and integration tests, fuzz replays
    unit        pytest tests/unit and bench/: the framework, the Rust-constant mirrors, the
                verdict logic of the system tests and the benchmark drivers' parsers
    ontarget    pytest tests/ontarget: the ktest suite, one pytest test per ktest test
    functional  pytest tests/functional: guests, VMs, Linux, the interconnect, native programs
    security    pytest tests/security: the hostile guest and the syscall fuzzer (seed 1, short)
    fuzz        scripts/fuzz.sh all 5: every libFuzzer target for 5 s, one test each
    docs        pytest tests/docs: the paths the documentation names exist

    tests/run.py [TIER...] [--no-build] [-- PYTEST ARGS]

TIER... runs only those tiers (the build tier too unless --no-build); PYTEST ARGS go to every
pytest tier (e.g. `tests/run.py functional --no-build -- -k net`). pytest tiers write JUnit XML to
target/test-results/TIER.xml, which is what they are counted from; console logs of the machines
are under target/logs/tests/. Python 3 standard library only (pytest is run as a module of the
first interpreter that has it: Debian's /usr/bin/python3, where scripts/setup.sh installs
python3-pytest, else this one).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
TIERS = ("build", "host", "unit", "ontarget", "functional", "security", "fuzz", "docs")
PYTEST_TIERS = {
    "unit": ["tests/unit", "bench"],
    "ontarget": ["tests/ontarget"],
    "functional": ["tests/functional"],
    "security": ["tests/security"],
    "docs": ["tests/docs"],
}
CARGO_RESULT_RE = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
FUZZ_ROW_RE = re.compile(r"^fuzz:\s+(\S+)\s+(FAILED\b.*|\S+ runs .*)$")


@dataclass
class Result:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, other: "Result") -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.notes += other.notes

    def line(self, name: str) -> str:
        text = f"{name}: {self.passed} passed, {self.failed} failed"
        return text + (f", {self.skipped} skipped" if self.skipped else "")


def cargo() -> str:
    return "/usr/bin/cargo" if Path("/usr/bin/cargo").exists() else "cargo"


def env() -> dict[str, str]:
    e = dict(os.environ)
    # Debian's Rust builds everything (rust-toolchain.toml); keep cargo off rustup's rustc.
    if "RUSTC" not in e and Path("/usr/bin/rustc").exists():
        e["RUSTC"] = "/usr/bin/rustc"
    return e


def say(msg: str) -> None:
    print(f"run: {msg}", flush=True)


def stream(cmd: list[str], log: Path | None = None) -> tuple[int, str]:
    """Runs `cmd` in the repository, its output on ours as it comes: (status, output)."""
    say("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        out.append(line)
    status = proc.wait()
    text = "".join(out)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(text)
    return status, text


# ---------------------------------------------------------------------------------------------
# Counting


def count_cargo(output: str, status: int) -> Result:
    """`cargo test`'s `test result:` lines added up (ignored tests as skipped); a failure without
    one (a build error) is one failed test."""
    r = Result()
    for line in output.splitlines():
        m = CARGO_RESULT_RE.match(line.strip())
        if m:
            r.passed += int(m.group(1))
            r.failed += int(m.group(2))
            r.skipped += int(m.group(3))
    if status != 0 and r.failed == 0:
        r.failed += 1
        r.notes.append(f"cargo test exited with status {status} before any test failed (a build error?)")
    return r


def count_junit(xml: Path, status: int) -> Result:
    """pytest's JUnit XML added up: passed, failed (failures and errors), skipped. pytest's
    status 5 (no tests collected) is no failure; any other non-zero status without a failure
    counted (an internal or usage error) is one."""
    r = Result()
    if xml.is_file():
        root = ET.parse(xml).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        for s in suites:
            tests, failures, errors, skipped = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
            r.passed += tests - failures - errors - skipped
            r.failed += failures + errors
            r.skipped += skipped
    if status not in (0, 5) and r.failed == 0:
        r.failed += 1
        r.notes.append(f"pytest exited with status {status} without a failed test (see its output)")
    return r


def count_fuzz(output: str, status: int) -> Result:
    """scripts/fuzz.sh's summary rows: a target that ran is passed, a FAILED one failed; a
    failure before the summary (the build) is one failed test."""
    r = Result()
    for line in output.splitlines():
        m = FUZZ_ROW_RE.match(line)
        if m:
            if m.group(2).startswith("FAILED"):
                r.failed += 1
                r.notes.append(f"fuzz target {m.group(1)}: {m.group(2)}")
            else:
                r.passed += 1
    if status != 0 and r.failed == 0:
        r.failed += 1
        r.notes.append(f"scripts/fuzz.sh exited with status {status}")
    return r


# ---------------------------------------------------------------------------------------------
# Tiers


def python_with_pytest() -> str | None:
    for python in ("/usr/bin/python3", sys.executable):
        if Path(python).exists() and subprocess.run([python, "-c", "import pytest"],
                                                     capture_output=True).returncode == 0:
            return python
    return None


def run_build() -> Result:
    r = Result()
    for cmd in (["scripts/build-target.sh"], ["scripts/build-mpi-c.sh"], ["guests/linux/build.sh"]):
        status, _ = stream(cmd)
        if status == 0:
            r.passed += 1
        else:
            r.failed += 1
            r.notes.append(f"{' '.join(cmd)} exited with status {status}")
    return r


def run_host() -> Result:
    status, out = stream([cargo(), "test"])
    return count_cargo(out, status)


def run_pytest(tier: str, extra: list[str]) -> Result:
    python = python_with_pytest()
    if python is None:
        return Result(failed=1, notes=["no Python with pytest: run scripts/setup.sh (python3-pytest)"])
    paths = [p for p in PYTEST_TIERS[tier] if (ROOT / p).exists()]
    if not paths:
        return Result(notes=[f"no {' '.join(PYTEST_TIERS[tier])} yet"])
    xml = ROOT / "target" / "test-results" / f"{tier}.xml"
    xml.parent.mkdir(parents=True, exist_ok=True)
    xml.unlink(missing_ok=True)
    status, _ = stream([python, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", f"--junitxml={xml}",
                        *paths, *extra])
    return count_junit(xml, status)


def run_fuzz() -> Result:
    status, out = stream(["scripts/fuzz.sh", "all", "5"])
    return count_fuzz(out, status)


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    build = "--no-build" not in argv
    names = [a for a in argv if a != "--no-build"]
    if any(a in ("-h", "--help") for a in names):
        print(__doc__)
        return 0
    unknown = [n for n in names if n not in TIERS]
    if unknown:
        print(f"run: unknown tier {unknown[0]!r}; tiers: {', '.join(TIERS)}", file=sys.stderr)
        return 2
    tiers = [t for t in TIERS if (t in names or not names or (t == "build" and build))]
    if not build:
        tiers = [t for t in tiers if t != "build"]
    results: dict[str, Result] = {}
    for tier in tiers:
        start = time.monotonic()
        say(f"tier {tier}")
        if tier == "build":
            r = run_build()
        elif tier == "host":
            r = run_host()
        elif tier == "fuzz":
            r = run_fuzz()
        else:
            r = run_pytest(tier, extra)
        results[tier] = r
        say(f"{r.line(tier)} ({time.monotonic() - start:.0f} s)")
    total = Result()
    print("\nrun: summary", flush=True)
    for tier, r in results.items():
        for note in r.notes:
            print(f"run: {tier}: {note}")
    for tier, r in results.items():
        print(r.line(tier))
        total.add(r)
    print(Result(total.passed, total.failed, total.skipped).line("all"), flush=True)
    return 1 if total.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
