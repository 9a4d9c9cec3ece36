"""The native system-call fuzzer (docs/adr/0016), briefly: seed 1, 5,000 calls as an ordinary
program and again with every right the root task grants, beside a counting sibling.
framework/sysfuzz.py says what passes; `just soak` runs the same at length (scripts/sysfuzz.py)."""
import pytest

from framework import sysfuzz

SEED = 1
CALLS = 5000
TIMEOUT = 600


@pytest.mark.parametrize("mode", ["unpriv", "priv"])
@pytest.mark.timeout(TIMEOUT + 60)
def test_sysfuzz(elf, logs, mode):
    for name in ("kestrel-root", "kestrel-sysfuzz", "kestrel-sibling"):
        elf(name)
    fields = sysfuzz.fuzz(SEED, CALLS, mode, timeout=TIMEOUT, logs=logs)
    print(fields)
