"""How values appear in the store's error messages: cut short, typed, dated.

Used by the argument checks (:mod:`tieredstore.store.base.arguments`), so every
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


def parse_time(value: Any) -> int:
    """Microseconds since the epoch of a time as a user gives it: milliseconds since
    the epoch (an int, or a string of digits), an ISO 8601 string or a datetime
    (naive means UTC), or a date; :class:`ValueError` otherwise. The one reading
    of a given time (the command line's, Spark's options), :func:`iso` read back."""
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text) * 1000
        try:
            value = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is neither ISO 8601 nor milliseconds") from None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, int):
        return int(value) * 1000
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        delta: datetime.timedelta = value - EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, datetime.date):
        return parse_time(datetime.datetime(value.year, value.month, value.day))
    raise ValueError(f"{value!r} is not a time")


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def about(ms: float) -> str:
    """A duration in milliseconds, roughly: ``54 years``, ``3 days``, ``5 h``, ``12 s``."""
    s = ms / 1000
    for name, unit in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * unit:
            return f"{s / unit:.0f} {name}"
    return f"{s:.0f} s" if s >= 1 else f"{ms:.0f} ms"
