"""Every repository path named in README.md or docs/**/*.md exists.

A path is a backticked word (`vmm/src/bus.rs`) or a Markdown link target
([ADR 0024](docs/adr/0024-tagged-shadow-tlb.md)) that starts with one of the
repository's top-level entries. Forms that name no single file are skipped: URLs,
globs (`*`), placeholders (`<pkg>`, `NAME`, `PATH`, `...`), build outputs under
`target/`, the guest build's `guests/linux/out/`, and `~/.cache`. Brace forms
(`bench/results/table1.{json,md}`) are expanded. Link targets in `docs/` may also be
relative to the document. Plain python: run with `pytest tests/docs` or directly.
"""

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Backticked spans and Markdown link targets.
BACKTICK = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")

# Prefixes that are not a file in the tree, or not one file.
SKIP_PREFIXES = ("target/", "guests/linux/out/", "~/", "/", "http:", "https:")
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|\b(NAME|PATH|ARGS|SEED|TARGET|SECONDS|N|K|X|FILE)\b")


def crate_dirs():
    """Directories holding a Cargo.toml, for crate-relative paths (`tests/props.rs`)."""
    found = []
    for depth in ("*", "*/*", "*/*/*"):
        found += [p.parent for p in ROOT.glob(depth + "/Cargo.toml") if "target" not in p.parts]
    return found


# Paths that accepted ADRs name and that branches being merged create (ADRs 0028-0031). A
# pending path is skipped while it is absent; once it exists the test asks for it to be
# removed from this list, so the list empties itself at integration.
PENDING = {
}


# A path that starts here is usually relative to the crate the sentence is about.
CRATE_RELATIVE = ("tests/", "src/", "benches/")


def exists(path, doc, crates):
    if (ROOT / path).exists() or (doc.parent / path).exists():
        return True
    return path.startswith(CRATE_RELATIVE) and any((c / path).exists() for c in crates)


def top_level_entries():
    """The repository's top-level files and directories (what a path may start with)."""
    present = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    return present | {".ci"} | {p.split("/")[0] for p in PENDING}


def documents():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))


def expand_braces(text):
    """`a/{b,c}.md` -> [`a/b.md`, `a/c.md`]; several brace groups multiply."""
    parts = re.split(r"\{([^{}]*)\}", text)
    literals, choices = parts[0::2], [p.split(",") for p in parts[1::2]]
    out = []
    for combo in itertools.product(*choices):
        s = literals[0]
        for choice, lit in zip(combo, literals[1:]):
            s += choice + lit
        out.append(s)
    return out


def candidate(token, tops):
    """The repository-relative path a token names, or None if it names none."""
    token = token.strip().rstrip(".,;:")
    # `path:line` and `path::item` forms: keep the path.
    token = re.split(r":(?=\d|:)", token)[0]
    if " " in token or "=" in token or token.startswith(SKIP_PREFIXES):
        return None
    if "*" in token or PLACEHOLDER.search(token):
        return None
    if token.startswith("./"):
        token = token[2:]
    first = token.split("/")[0]
    if first not in tops:
        return None
    # A bare top-level word (`kestrel`, `bench`) is too often prose; need a slash or a dot.
    if "/" not in token and "." not in token:
        return None
    return token


def missing_paths():
    tops = top_level_entries()
    crates = crate_dirs()
    missing = []
    for doc in documents():
        in_code_block = False
        for lineno, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code_block = not in_code_block
                continue
            if in_code_block:
                continue
            tokens = [(m, False) for m in BACKTICK.findall(line)]
            tokens += [(m, True) for m in LINK.findall(line)]
            for token, is_link in tokens:
                for form in expand_braces(token):
                    path = candidate(form, tops)
                    if path is None:
                        if is_link and not form.startswith(SKIP_PREFIXES) and ":" not in form:
                            # A link relative to the document (docs/adr/x.md -> 0024-y.md).
                            rel = (doc.parent / form).resolve()
                            if not rel.exists() and not PLACEHOLDER.search(form):
                                missing.append(f"{doc.relative_to(ROOT)}:{lineno}: {form}")
                        continue
                    if path in PENDING and not (ROOT / path).exists():
                        continue
                    if not exists(path, doc, crates):
                        missing.append(f"{doc.relative_to(ROOT)}:{lineno}: {path}")
    return missing


def test_pending_paths_are_still_pending():
    arrived = sorted(p for p in PENDING if (ROOT / p).exists())
    assert not arrived, "these now exist; remove them from PENDING: " + ", ".join(arrived)


def test_every_path_named_in_the_docs_exists():
    missing = missing_paths()
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


if __name__ == "__main__":
    found = missing_paths()
    print("\n".join(found) or "every path named in the docs exists")
    raise SystemExit(1 if found else 0)
