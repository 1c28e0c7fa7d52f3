"""docs/design.md names only what exists: every CamelCase name it writes as code
(in backticks, or in a fenced block such as the layers' table) is a class,
function or name defined under tieredstore/, or one of the other projects'
names listed here with where it comes from."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.readme import DOCS, ROOT

DESIGN = DOCS / "design.md"
PACKAGE = ROOT / "tieredstore"

FOREIGN = {
    "DataSource": "PySpark's Python data source API",
    "PySpark": "Apache Spark's Python API",
    "DeltaTable": "deltalake (delta-rs)",
    "ThreadedMotoServer": "moto",
}
"""Names of other projects that design.md writes as code, each with its project."""

_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+\b")
_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


def code_names(text: str) -> set[str]:
    """The CamelCase names in ``text``'s fenced blocks and inline code."""
    fenced = _FENCED.findall(text)
    prose = _FENCED.sub("", text)
    return {name for code in [*fenced, *_INLINE.findall(prose)] for name in _CAMEL.findall(code)}


def defined_names(package: Path = PACKAGE) -> set[str]:
    """Every class, function and module-level or class-level name defined under ``package``."""
    definition = re.compile(
        r"^\s*(?:class|def|async def)\s+([A-Za-z_]\w*)|^\s*([A-Za-z_]\w*)\s*[:=]", re.M)
    return {a or b for path in package.rglob("*.py")
            for a, b in definition.findall(path.read_text())}


def test_every_name_design_md_writes_as_code_exists() -> None:
    names = code_names(DESIGN.read_text())
    assert len(names) >= 5, names   # the layers' table and the prose name classes
    missing = sorted(names - defined_names() - set(FOREIGN))
    assert not missing, (f"docs/design.md names {missing}, defined nowhere under tieredstore/ "
                         "(a renamed or removed class?); fix the page, or list another "
                         "project's name in FOREIGN")


def test_a_name_that_does_not_exist_is_found(tmp_path: Path) -> None:
    page = ("```text\ntieredstore/segment  ChunkedSegment, SegmentMetadata\n```\n"
            "A `LogWriter` and `tasks.SingleFlight`; RocketMQ in prose is not code.\n")
    assert code_names(page) == {"ChunkedSegment", "SegmentMetadata", "LogWriter", "SingleFlight"}
    (tmp_path / "mod.py").write_text("class ChunkedSegment:\n    LogWriter: int = 1\n"
                                     "def SingleFlight(): ...\n")
    assert code_names(page) - defined_names(tmp_path) == {"SegmentMetadata"}
