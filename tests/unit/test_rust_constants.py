"""Every constant framework/constants.py mirrors from the Rust source has the Rust item's value
(found by package name and item name; see framework.constants.MIRRORS)."""
import pytest

from framework import constants, rust


@pytest.mark.parametrize("mirror", constants.MIRRORS, ids=lambda m: m.python)
def test_mirror_matches_the_rust_source(mirror):
    assert getattr(constants, mirror.python) is not None
    hits = rust.find_items(mirror.package, mirror.item, mirror.pattern, mirror.file)
    assert hits, f"no item {mirror.item} in package {mirror.package} (renamed or moved?)"
    values = {(path, rust.evaluate(text)) for path, text in hits}
    assert len({v for _, v in values}) == 1, f"{mirror.item} has different values in {mirror.package}: {values}"
    (path, value), *_ = values
    assert value == mirror.rust_value, (
        f"{mirror.python} mirrors {mirror.item} in {path.relative_to(rust.ROOT)}, which is "
        f"{value!r}, not {mirror.rust_value!r}: update tests/framework/constants.py")


def test_every_package_is_found():
    for mirror in constants.MIRRORS:
        assert rust.package_dir(mirror.package).is_dir()


def test_evaluate():
    assert rust.evaluate("0x6_0000_0000") == 0x600000000
    assert rust.evaluate("16 << 20") == 16 << 20
    assert rust.evaluate("64u32 * 1024") == 65536
    assert rust.evaluate('*b"KSTRLMOD"') == b"KSTRLMOD"
    assert rust.evaluate('*b"KESTREL-HOSTILE\\0"') == b"KESTREL-HOSTILE\0"
    assert rust.evaluate('"console=ttyS0 panic=1"') == "console=ttyS0 panic=1"
    with pytest.raises(ValueError):
        rust.evaluate("foo(1)")
