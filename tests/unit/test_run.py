"""Unit tests of tests/run.py, the test runner: how each tier's results are counted, and that a
failing tier does not stop the ones after it."""
import importlib.util
import sys
from pathlib import Path


_spec = importlib.util.spec_from_file_location("run", Path(__file__).resolve().parent.parent / "run.py")
run = importlib.util.module_from_spec(_spec)
sys.modules["run"] = run
_spec.loader.exec_module(run)

CARGO = """\
     Running unittests src/lib.rs (target/debug/deps/kestrel_abi-1)
test result: ok. 54 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.2s
   Doc-tests kestrel_abi
test result: FAILED. 3 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.1s
"""


def test_cargo_results_are_added_up():
    r = run.count_cargo(CARGO, 101)
    assert (r.passed, r.failed, r.skipped) == (57, 2, 1)


def test_a_cargo_build_error_is_one_failure():
    r = run.count_cargo("error[E0425]: cannot find value `x`\n", 101)
    assert (r.passed, r.failed) == (0, 1)
    assert "build error" in r.notes[0]


def junit(tmp_path, tests, failures=0, errors=0, skipped=0, wrapped=True):
    suite = f'<testsuite name="pytest" tests="{tests}" failures="{failures}" errors="{errors}" skipped="{skipped}"/>'
    path = tmp_path / "r.xml"
    path.write_text(f"<testsuites>{suite}</testsuites>" if wrapped else suite)
    return path


def test_junit_counts(tmp_path):
    r = run.count_junit(junit(tmp_path, 10, failures=2, errors=1, skipped=1), 1)
    assert (r.passed, r.failed, r.skipped) == (6, 3, 1)
    assert run.count_junit(junit(tmp_path, 4, wrapped=False), 0).passed == 4


def test_no_tests_is_no_failure_but_a_crash_is(tmp_path):
    assert run.count_junit(tmp_path / "missing.xml", 5).failed == 0
    assert run.count_junit(tmp_path / "missing.xml", 4).failed == 1


def test_fuzz_rows():
    out = ("fuzz: summary (5s per target; logs in target/fuzz/logs/)\n"
           "fuzz:   decode        123456 runs    24000/s  corpus   812\n"
           "fuzz:   vtlb     FAILED (exit 77): crash-abc\n")
    r = run.count_fuzz(out, 1)
    assert (r.passed, r.failed) == (1, 1)
    assert run.count_fuzz("error: could not compile\n", 101).failed == 1


def test_summary_lines():
    assert run.Result(3, 1).line("host") == "host: 3 passed, 1 failed"
    assert run.Result(3, 0, 2).line("all") == "all: 3 passed, 0 failed, 2 skipped"


def test_every_tier_runs_after_a_failure(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(run, "run_build", lambda: calls.append("build") or run.Result(2, 0))
    monkeypatch.setattr(run, "run_host", lambda: calls.append("host") or run.Result(0, 1))
    monkeypatch.setattr(run, "run_fuzz", lambda: calls.append("fuzz") or run.Result(15, 0))
    monkeypatch.setattr(run, "run_pytest", lambda tier, extra: calls.append(tier) or run.Result(1, 0))
    assert run.main([]) == 1
    assert calls == list(run.TIERS)
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "all: 22 passed, 1 failed"
    assert out[-9:-1] == [f"{t}: {p} passed, {f} failed" for t, p, f in (
        ("build", 2, 0), ("host", 0, 1), ("unit", 1, 0), ("ontarget", 1, 0), ("functional", 1, 0),
        ("security", 1, 0), ("fuzz", 15, 0), ("docs", 1, 0))]


def test_tier_selection(monkeypatch):
    calls = []
    monkeypatch.setattr(run, "run_build", lambda: calls.append("build") or run.Result())
    monkeypatch.setattr(run, "run_pytest", lambda tier, extra: calls.append((tier, extra)) or run.Result(1))
    assert run.main(["functional", "--no-build", "--", "-k", "net"]) == 0
    assert calls == [("functional", ["-k", "net"])]
    assert run.main(["nosuchtier"]) == 2
