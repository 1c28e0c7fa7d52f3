"""Every link between the docs leads somewhere: a relative link of README.md or
docs/*.md names a file of the checkout, and every ``docs/<name>.md`` that the
code, the tests and the benchmarks cite exists (docs/format.md is an index;
each format or protocol has its own file)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.readme import ROOT, documents

_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_CITED = re.compile(r"\bdocs/([A-Za-z0-9_-]+\.md)\b")


def broken_links(path: Path) -> list[str]:
    """The relative link targets of ``path`` that name no file."""
    targets = _LINK.findall(path.read_text())
    return [t for t in targets if "://" not in t and not (path.parent / t).exists()]


def test_every_relative_link_of_the_docs_names_a_file() -> None:
    broken = {p.name: b for p in documents() if (b := broken_links(p))}
    assert not broken, broken


def test_every_docs_file_the_code_cites_exists() -> None:
    cited: dict[str, set[str]] = {}
    for tree in ("tieredstore", "tests", "bench"):
        for path in (ROOT / tree).rglob("*"):
            if path.suffix in {".py", ".toml"} and path.is_file():
                for name in _CITED.findall(path.read_text()):
                    cited.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    missing = {name: sorted(paths) for name, paths in cited.items()
               if not (ROOT / "docs" / name).exists()}
    assert not missing, missing
    assert "log-objects.md" in cited


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x\n")
    page = tmp_path / "page.md"
    page.write_text("[a](there.md) [b](gone.md#x) [c](https://example.org/y.md)\n")
    assert broken_links(page) == ["gone.md"]
