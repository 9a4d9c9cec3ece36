"""Finding things in Kestrel's Rust source: crates by package name (through the workspace's
Cargo.toml, so a moved crate is still found) and the value of a constant item."""
from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

from .qemu import ROOT


@functools.cache
def packages() -> dict[str, Path]:
    """Every workspace member's package name -> its folder."""
    members = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["members"]
    found = {}
    for member in members:
        for folder in sorted(ROOT.glob(member)):
            manifest = folder / "Cargo.toml"
            if manifest.is_file():
                found[tomllib.loads(manifest.read_text())["package"]["name"]] = folder
    return found


def package_dir(name: str) -> Path:
    try:
        return packages()[name]
    except KeyError:
        raise LookupError(f"no workspace member is package {name!r}") from None


ITEM = r"(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+|static\s+)?{name}\s*:\s*[^=\n]+?=\s*(?P<value>[^;]+);"


def find_items(package: str, name: str, pattern: str | None = None,
               file: str | None = None) -> list[tuple[Path, str]]:
    """Every (file, value text) of item `name` (`[pub] [const|static] NAME: TYPE = VALUE;`, or
    `pattern` with a `value` group) in the package's .rs files (named `file`, if given)."""
    rx = re.compile(pattern or ITEM.format(name=re.escape(name)))
    hits = []
    for path in sorted(package_dir(package).rglob(file or "*.rs")):
        text = path.read_text(errors="replace")
        for m in rx.finditer(text):
            # An item, not a use of the name inside an expression or a comment.
            line_start = text.rfind("\n", 0, m.start()) + 1
            if not pattern and text[line_start:m.start()].strip():
                continue
            hits.append((path, m["value"].strip()))
    return hits


def evaluate(text: str, names: dict[str, int] | None = None) -> int | bytes | str:
    """The value of a Rust constant expression of integer literals (any base, `_` separators,
    type suffixes), `<<`, `*`, `+`, `-`, `/`, parentheses and names in `names`, or of a byte
    string (`b"..."`, `*b"..."`) or a string (`"..."`)."""
    expr = text.strip()
    if expr.startswith(("*b\"", "b\"", "\"")):
        return ast.literal_eval(expr.lstrip("*"))
    expr = re.sub(r"\b(0x[0-9a-fA-F_]+|0b[01_]+|0o[0-7_]+|\d[\d_]*)(?:u8|u16|u32|u64|usize|i32|i64)?\b",
                  lambda m: m.group(1).replace("_", ""), expr)
    expr = re.sub(r"\bas\s+(u8|u16|u32|u64|usize)\b", "", expr)
    tree = ast.parse(expr, mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add,
               ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.LShift, ast.RShift, ast.USub, ast.BitOr)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ValueError(f"cannot evaluate Rust expression {text!r}")
    value = eval(compile(tree, "<rust>", "eval"), {"__builtins__": {}}, dict(names or {}))  # noqa: S307
    return int(value)
