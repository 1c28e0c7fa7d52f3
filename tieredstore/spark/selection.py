"""Which messages a read wants: topics, queues, offsets, store times. No IO.

A :class:`Selection` is built from reader options (or a job's filters) and
answers two questions: does a queue or a segment (known from its metadata
record alone) hold any wanted message, and is one message wanted. Offsets and
times are closed ranges; times are milliseconds since the epoch, as the store
keeps them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tieredstore.errors import ConfigError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MIN, _MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Span:
    """The closed integer range ``[lo, hi]``; ``lo > hi`` is empty."""

    lo: int = _MIN
    hi: int = _MAX

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def __and__(self, other: Span) -> Span:
        return Span(max(self.lo, other.lo), min(self.hi, other.hi))

    def overlaps(self, lo: int, hi: int) -> bool:
        return not self.empty and lo <= self.hi and hi >= self.lo

    def __contains__(self, value: int) -> bool:
        return self.lo <= value <= self.hi


@dataclass(frozen=True, slots=True)
class Selection:
    """What to read. ``topics``/``queue_ids`` None: every one."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    offsets: Span = Span()
    times_ms: Span = Span()

    @property
    def empty(self) -> bool:
        return (
            (self.topics is not None and not self.topics)
            or (self.queue_ids is not None and not self.queue_ids)
            or self.offsets.empty or self.times_ms.empty
        )

    def wants_queue(self, topic: str, queue_id: int) -> bool:
        if self.empty or (self.topics is not None and topic not in self.topics):
            return False
        return self.queue_ids is None or queue_id in self.queue_ids

    def wants_segment(self, first: int, last: int, begin_ms: int, end_ms: int) -> bool:
        """Whether a segment of offsets ``[first, last]`` stored from ``begin_ms`` to
        ``end_ms`` may hold a wanted message.

        Times prune on the assumption the store's time lookup makes too: store
        timestamps do not decrease along a queue, so a segment's messages lie
        within its record's begin and end timestamps.
        """
        return self.offsets.overlaps(first, last) and self.times_ms.overlaps(begin_ms, end_ms)

    def wants(self, offset: int, store_ms: int) -> bool:
        return offset in self.offsets and store_ms in self.times_ms

    def narrowed(self, **changes: Any) -> Selection:
        """This selection and ``changes`` both (sets intersect, ranges too)."""
        out = self
        for name, given in changes.items():
            out = out._narrow(name, given)
        return out

    def _narrow(self, name: str, given: Any) -> Selection:
        old = getattr(self, name)
        if name in ("topics", "queue_ids") and old is None:
            return dataclasses.replace(self, **{name: given})
        return dataclasses.replace(self, **{name: old & given})


# --- values -----------------------------------------------------------------------


def timestamp_micros(value: Any) -> int:
    """Microseconds since the epoch of a datetime (naive means UTC), an ISO 8601
    string, or an int of milliseconds."""
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text) * 1000
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is neither ISO 8601 nor milliseconds") from None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, int):
        return int(value) * 1000
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta: dt.timedelta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return timestamp_micros(dt.datetime(value.year, value.month, value.day))
    raise ValueError(f"{value!r} is not a time")


def _floor_ms(us: int) -> int:
    return us // 1000


def _ceil_ms(us: int) -> int:
    return -((-us) // 1000)


def time_span(op: str, us: int) -> Span:
    """The store times (ms) ``t`` for which ``t * 1000 <op> us`` holds."""
    if op == ">":
        return Span(lo=_floor_ms(us) + 1)
    if op == ">=":
        return Span(lo=_ceil_ms(us))
    if op == "<":
        return Span(hi=_ceil_ms(us) - 1)
    if op == "<=":
        return Span(hi=_floor_ms(us))
    return Span(_ceil_ms(us), _floor_ms(us))  # "=": empty unless a whole millisecond


def int_span(op: str, value: int) -> Span:
    if op == ">":
        return Span(lo=value + 1)
    if op == ">=":
        return Span(lo=value)
    if op == "<":
        return Span(hi=value - 1)
    if op == "<=":
        return Span(hi=value)
    return Span(value, value)


# --- from options -----------------------------------------------------------------


def names(text: str) -> list[str]:
    """A comma-separated option's items, stripped, empty ones left out."""
    return [p.strip() for p in text.split(",") if p.strip()]


def ints(key: str, text: str) -> list[int]:
    """Option ``key``'s comma-separated integers."""
    try:
        return [int(p) for p in names(text)]
    except ValueError:
        raise ConfigError(key, f"must be integers separated by commas, got {text!r}") from None


def one_int(key: str, text: str) -> int:
    """Option ``key``'s one integer."""
    values = ints(key, text)
    if len(values) != 1:
        raise ConfigError(key, f"must be one integer, got {text!r}")
    return values[0]


def selection_from_options(options: Mapping[str, str]) -> Selection:
    """Options ``topic`` and ``queue_id`` (comma-separated lists), ``offset_from``
    (inclusive) and ``offset_to`` (exclusive), ``time_from`` (inclusive) and
    ``time_to`` (exclusive): ISO 8601 (naive means UTC) or milliseconds."""
    sel = Selection()
    if options.get("topic"):
        sel = sel.narrowed(topics=frozenset(names(options["topic"])))
    if options.get("queue_id"):
        sel = sel.narrowed(queue_ids=frozenset(ints("queue_id", options["queue_id"])))
    for key, op in (("offset_from", ">="), ("offset_to", "<")):
        if options.get(key):
            sel = sel.narrowed(offsets=int_span(op, one_int(key, options[key])))
    for key, op in (("time_from", ">="), ("time_to", "<")):
        if options.get(key):
            try:
                us = timestamp_micros(options[key])
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
            sel = sel.narrowed(times_ms=time_span(op, us))
    return sel
