"""How values appear in the store's error messages: cut short, typed, dated.

Used by the argument checks (:mod:`tieredstore.store.arguments`), so every
refusal shows a value the same way.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any


def show(value: Any, limit: int = 60) -> str:
    """A value for an error message: its repr, cut short when long."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails must not hide the real error
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        size = f"{len(value)} items, " if isinstance(value, Sequence | Mapping) else ""
        text = f"{text[:limit]}... ({size}{len(text)} characters of repr)"
    return text


def type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"


def iso(ms: int) -> str:
    """``2024-05-01T12:00:00.000Z``, or the raw number when no calendar date fits."""
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def about(ms: float) -> str:
    """A duration in milliseconds, roughly: ``54 years``, ``3 days``, ``5 h``, ``12 s``."""
    s = ms / 1000
    for name, unit in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * unit:
            return f"{s / unit:.0f} {name}"
    return f"{s:.0f} s" if s >= 1 else f"{ms:.0f} ms"
