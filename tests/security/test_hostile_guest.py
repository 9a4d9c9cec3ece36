"""The hostile guest (docs/adr/0015, docs/SECURITY.md), briefly: seed 1, 10^5 guest
instructions, beside a checksumming neighbour VM. framework/hostile.py says what passes;
`just soak` runs the same at length (scripts/attack-guest.py)."""
import pytest

from framework import hostile

SEED = 1
INSTRUCTIONS = 100_000
TIMEOUT = 600


@pytest.mark.timeout(TIMEOUT + 60)
def test_hostile_guest(elf, logs):
    elf("kestrel-hostile")
    watch, counts = hostile.attack(SEED, INSTRUCTIONS, timeout=TIMEOUT, log=logs / "console.log")
    print(counts)
    assert watch.failure is None, f"seed {SEED}: {watch.failure}; {counts}"
