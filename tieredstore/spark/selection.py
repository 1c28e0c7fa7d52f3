"""Which messages a read wants: topics, queues, offsets, store times. No IO.

A :class:`Selection` is built from reader options and from the filters Spark
pushes down, and answers two questions: does a queue or a segment (known from
its metadata record alone) hold any wanted message, and is one message
wanted. Offsets and times are closed ranges; times are milliseconds since the
epoch, as the store keeps them.

Pushed filters are turned into ranges that hold at least what the filter
keeps (``offset IN (3, 9)`` becomes ``[3, 9]``), and Spark evaluates every
pushed filter again after the scan, so a range that is too wide costs only
reading, never a wrong row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
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
    topic_prefix: str = ""
    queue_ids: frozenset[int] | None = None
    queue_span: Span = Span()
    offsets: Span = Span()
    times_ms: Span = Span()

    @property
    def empty(self) -> bool:
        return (
            (self.topics is not None and not self.topics)
            or (self.queue_ids is not None and not self.queue_ids)
            or self.queue_span.empty or self.offsets.empty or self.times_ms.empty
        )

    def wants_queue(self, topic: str, queue_id: int) -> bool:
        if self.empty or not topic.startswith(self.topic_prefix):
            return False
        if self.topics is not None and topic not in self.topics:
            return False
        if self.queue_ids is not None and queue_id not in self.queue_ids:
            return False
        return queue_id in self.queue_span

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
        if name in ("topics", "queue_ids"):
            return dataclasses.replace(self, **{name: given if old is None else old & given})
        if name != "topic_prefix":
            return dataclasses.replace(self, **{name: old & given})
        if given.startswith(old):
            return dataclasses.replace(self, topic_prefix=given)
        if old.startswith(given):
            return self
        return dataclasses.replace(self, topics=frozenset())  # two prefixes: nothing


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


def _ints(key: str, text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(key, f"must be integers separated by commas, got {text!r}") from None


def selection_from_options(options: Mapping[str, str]) -> Selection:
    """Options ``topic`` and ``queue_id`` (comma-separated lists), ``offset_from``
    (inclusive) and ``offset_to`` (exclusive), ``time_from`` (inclusive) and
    ``time_to`` (exclusive): ISO 8601 (naive means UTC) or milliseconds."""
    sel = Selection()
    if options.get("topic"):
        sel = sel.narrowed(topics=frozenset(
            t.strip() for t in options["topic"].split(",") if t.strip()))
    if options.get("queue_id"):
        sel = sel.narrowed(queue_ids=frozenset(_ints("queue_id", options["queue_id"])))
    for key, op in (("offset_from", ">="), ("offset_to", "<")):
        if options.get(key):
            values = _ints(key, options[key])
            if len(values) != 1:
                raise ConfigError(key, f"must be one integer, got {options[key]!r}")
            sel = sel.narrowed(offsets=int_span(op, values[0]))
    for key, op in (("time_from", ">="), ("time_to", "<")):
        if options.get(key):
            try:
                us = timestamp_micros(options[key])
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
            sel = sel.narrowed(times_ms=time_span(op, us))
    return sel


# --- from pushed filters ------------------------------------------------------------

_COMPARE = {"EqualTo": "=", "EqualNullSafe": "=", "GreaterThan": ">",
            "GreaterThanOrEqual": ">=", "LessThan": "<", "LessThanOrEqual": "<="}


def _column(f: Any) -> str | None:
    attribute = getattr(f, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0].lower()
    return None


def apply_filter(sel: Selection, f: Any) -> Selection | None:
    """``sel`` narrowed by one pushed filter, or None when it cannot use the filter.

    Filters are matched by class name (``pyspark.sql.datasource``'s classes),
    so that this module needs no pyspark.
    """
    kind = type(f).__name__
    column = _column(f)
    value = getattr(f, "value", None)
    if column is None or kind not in (*_COMPARE, "In", "StringStartsWith"):
        return None
    if kind == "In":
        values = [v for v in (value or ()) if v is not None]
        return _apply_in(sel, column, values)
    if kind == "StringStartsWith":
        return sel.narrowed(topic_prefix=value) if column == "topic" else None
    op = _COMPARE[kind]
    if value is None:
        return None
    if column == "topic" and op == "=" and isinstance(value, str):
        return sel.narrowed(topics=frozenset([value]))
    if column in ("queue_id", "offset") and isinstance(value, int) \
            and not isinstance(value, bool):
        name = "queue_span" if column == "queue_id" else "offsets"
        return sel.narrowed(**{name: int_span(op, value)})
    if column == "store_timestamp" and isinstance(value, dt.datetime):
        return sel.narrowed(times_ms=time_span(op, timestamp_micros(value)))
    return None


def _apply_in(sel: Selection, column: str, values: list[Any]) -> Selection | None:
    if column == "topic" and all(isinstance(v, str) for v in values):
        return sel.narrowed(topics=frozenset(values))
    if column in ("queue_id", "offset") and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        if column == "queue_id":
            return sel.narrowed(queue_ids=frozenset(values))
        return sel.narrowed(offsets=Span(min(values), max(values)) if values else Span(1, 0))
    if column == "store_timestamp" and all(isinstance(v, dt.datetime) for v in values):
        if not values:
            return sel.narrowed(times_ms=Span(1, 0))
        us = [timestamp_micros(v) for v in values]
        return sel.narrowed(times_ms=Span(_ceil_ms(min(us)), _floor_ms(max(us))))
    return None


def apply_filters(sel: Selection, filters: Iterable[Any]) -> tuple[Selection, list[Any]]:
    """``sel`` narrowed by every filter it can use, and the filters it used."""
    used: list[Any] = []
    for f in filters:
        narrowed = apply_filter(sel, f)
        if narrowed is not None:
            sel = narrowed
            used.append(f)
    return sel, used
