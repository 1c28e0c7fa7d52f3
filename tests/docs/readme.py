"""The fenced code blocks of the README and of docs/*.md, as a reader copies them.

A block is the text between a line that opens a fence (three backticks and
the block's language) and the next line of three backticks, both at the start
of a line. A block that must not run is marked on the last non-blank line
before its fence, with the reason::

    <!-- not run: starts a Spark session; tests/spark cover the reader -->

A marker that is not followed by a block is an error (it marks nothing).

A block in ``text`` is a layout (keys, bytes, a table), not code: it is listed
with the others and never run (:data:`NOT_CODE`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NOT_CODE = frozenset({"text"})
"""Languages of blocks that are not code: layouts of keys and bytes."""

_FENCE = re.compile(r"^```\s*([A-Za-z0-9_+-]*)\s*$")
_MARKER = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")
_HEADING = re.compile(r"^#+\s+(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: its language (``""`` when none), text, the line of its
    opening fence (from 1), the heading it stands under, and the reason it is
    not run (None: it is run)."""

    language: str
    text: str
    line: int
    heading: str
    not_run: str | None
    source: str = "README.md"

    @property
    def name(self) -> str:
        return f"{self.source}:{self.line} ({self.language or 'no language'})"

    @property
    def is_code(self) -> bool:
        return self.language not in NOT_CODE


def blocks(path: Path = README) -> list[Block]:
    """Every fenced block of ``path``, in order; ValueError for a fence left open,
    a marker without a reason, or one that no block follows."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    heading = ""
    marker: tuple[int, str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            if (m := _MARKER.match(line)) is not None:
                if not m.group(1):
                    raise ValueError(f"{path.name}:{i + 1}: a not-run marker must say why")
                marker = (i + 1, m.group(1))
            elif line.strip():
                if marker is not None:
                    raise ValueError(f"{path.name}:{marker[0]}: a not-run marker that no "
                                     "block follows")
                if (h := _HEADING.match(line)) is not None:
                    heading = h.group(1)
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{path.name}:{i + 1}: a fence that is never closed")
        found.append(Block(fence.group(1).lower(), "\n".join(lines[i + 1:end]) + "\n", i + 1,
                           heading, marker[1] if marker else None, source(path)))
        marker = None
        i = end + 1
    if marker is not None:
        raise ValueError(f"{path.name}:{marker[0]}: a not-run marker that no block follows")
    return found


def source(path: Path) -> str:
    """``path`` as the checkout names it (``docs/spark.md``), or its name outside it."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def documents() -> list[Path]:
    """The README, then every docs/*.md in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def all_blocks() -> list[Block]:
    """Every fenced block of :func:`documents`, in order."""
    return [block for path in documents() for block in blocks(path)]
