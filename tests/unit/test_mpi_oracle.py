"""The MPI C tests (tests/mpi/*.c) under Debian's MPICH with 8 ranks: each passes its own checks
and prints exactly tests/mpi/expected/NAME.out, the output a Kestrel run must print too (see
framework/mpioracle.py). Also: every program compiles against Kestrel's own mpi.h, with the host
gcc and the PowerPC cross gcc, so the tests use only the ABI Kestrel declares."""
import pytest

from framework import mpioracle


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return tmp_path_factory.mktemp("mpi")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", mpioracle.PROGRAMS)
def test_program_under_mpich(name, outdir):
    run = mpioracle.mpiexec(mpioracle.build_mpich(name, outdir))
    delta = mpioracle.diff(name, run.stdout)
    if name in mpioracle.MPICH_DEVIATIONS:
        # MPICH is known to be wrong here: the run must fail its checks, and differ from the
        # standard's answer; if it ever passes, MPICH was fixed and the note can go.
        assert run.status != 0 and delta, (
            f"{name} now passes under MPICH: {mpioracle.MPICH_DEVIATIONS[name]} is fixed; "
            "drop it from MPICH_DEVIATIONS")
        return
    assert run.status == 0, f"{name} failed under MPICH (status {run.status}):\n{run.stdout}\n{run.stderr}"
    assert not delta, (f"{name}'s output differs from tests/mpi/expected/{name}.out (if the test "
                       "changed on purpose: python3 tests/framework/mpioracle.py regenerate):\n"
                       + "\n".join(delta))


@pytest.mark.timeout(200)
def test_abort_ends_every_rank(outdir):
    run = mpioracle.mpiexec(mpioracle.build_mpich(mpioracle.ABORT, outdir), timeout=120)
    assert run.status != 0
    assert mpioracle.ABORT_LINE in run.stdout.splitlines()
    assert "was not stopped" not in run.stdout


@pytest.mark.parametrize("compiler", ["gcc", "powerpc-linux-gnu-gcc"])
@pytest.mark.parametrize("name", [*mpioracle.PROGRAMS, mpioracle.ABORT])
def test_program_uses_only_kestrels_abi(name, compiler):
    mpioracle.check_kestrel_header(name, compiler)


def test_expected_outputs_end_with_a_clean_verdict():
    for name in mpioracle.PROGRAMS:
        lines = mpioracle.expected_path(name).read_text().splitlines()
        verdicts = [line for line in lines if line.startswith(f"{name}: ")]
        assert len(verdicts) == 1 and verdicts[0].endswith(" passed, 0 failed"), name
        assert not any("FAIL" in line for line in lines), name
