"""Spark's pushed filters read as a :class:`~.selection.Selection`, and a selection
written back as reader options. No IO.

PySpark hands a Python DataSource reader the simple filters of a query's
``where`` (their AND): a column compared with a literal. The filters on
``topic``, ``queue_id``, ``offset`` and ``store_timestamp`` that are equalities,
``IN`` lists or range bounds say which queues, offsets and store times can hold
a kept row: :func:`selection_from_filters` reads them as a selection: exactly
for equalities and bounds (a row passes them if and only if the selection
wants it), an ``IN`` list of offsets or times as the span from its least value
to its greatest; any other filter is left out. So the selection may want more
rows than the query keeps, never fewer. :func:`selection_options` writes a
selection as the reader options that choose the same.

The reader does not prune by these selections (see
:mod:`tieredstore.spark.read.datasource` for why); it names the options in a
warning, so a query can be rewritten to read less.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from tieredstore.spark.read.selection import Selection, Span, names

SELECTION_COLUMNS = ("topic", "queue_id", "offset", "store_timestamp")

_US = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def selection_from_filters(filters: Iterable[Filter]) -> Selection:
    """The selection that the AND of ``filters`` implies on the selection columns."""
    selection = Selection()
    for f in filters:
        selection = selection.intersect(_one(f))
    return selection


def filter_columns(filters: Iterable[Filter]) -> list[str]:
    """The selection columns that ``filters`` narrow, in schema order."""
    narrowed = {column for f in filters if _one(f) != Selection()
                for column in _attribute(f)}
    return [c for c in SELECTION_COLUMNS if c in narrowed]


def selection_options(selection: Selection) -> dict[str, str]:
    """Reader options that select what ``selection`` selects (options ``broker``, ``topic``,
    ``queue_id``, ``offset_from``/``offset_to``, ``time_from``/``time_to`` in ms);
    topics that a comma-separated option cannot spell are left out (all topics)."""
    options: dict[str, str] = {}
    if selection.brokers is not None:
        options["broker"] = ",".join(sorted(selection.brokers))
    if selection.topics is not None:
        text = ",".join(sorted(selection.topics))
        if sorted(names(text)) == sorted(selection.topics) and selection.topics:
            options["topic"] = text
    if selection.queue_ids is not None:
        options["queue_id"] = ",".join(str(q) for q in sorted(selection.queue_ids))
    for name, span in (("offset", selection.offsets), ("time", selection.times_ms)):
        if span.lo != Span().lo:
            options[f"{name}_from"] = str(span.lo)
        if span.hi != Span().hi:
            options[f"{name}_to"] = str(span.hi + 1)
    return options


def _attribute(f: Filter) -> tuple[str, ...]:
    return tuple(getattr(f, "attribute", ()))


def _one(f: Filter) -> Selection:
    """The selection one filter implies; every selection for a filter it cannot read."""
    column = _attribute(f)
    if len(column) != 1 or column[0] not in SELECTION_COLUMNS:
        return Selection()
    name = column[0]
    if isinstance(f, EqualTo | EqualNullSafe):
        values: Sequence[Any] | None = [f.value]
    elif isinstance(f, In):
        values = list(f.value)
    else:
        values = None
    if values is not None:
        return _equal(name, values)
    if isinstance(f, GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
        return _bound(name, f)
    return Selection()


def _equal(name: str, values: Sequence[Any]) -> Selection:
    """``name`` is one of ``values`` (None, or a value of another type, matches no row)."""
    if name == "topic":
        return Selection(topics=frozenset(v for v in values if isinstance(v, str)))
    ints = [v for v in (_whole(name, v) for v in values) if v is not None]
    if name == "queue_id":
        return Selection(queue_ids=frozenset(ints))
    span = Span(min(ints), max(ints)) if ints else Span(1, 0)
    # A span holds the list's extremes: rows between them pass the selection (a
    # superset of an IN list, exact for one value).
    return _spanned(name, span)


def _bound(name: str, f: Filter) -> Selection:
    """A range bound on an offset or a store time (topic and queue ranges: all)."""
    if name not in ("offset", "store_timestamp"):
        return Selection()
    value: Any = f.value  # type: ignore[attr-defined]
    if name == "offset":
        if isinstance(value, bool) or not isinstance(value, int):
            return Selection()
        lo_open, hi_open = value + 1, value - 1
        lo_closed = hi_closed = value
    else:
        if not isinstance(value, dt.datetime):
            return Selection()
        us = _micros(value)
        # Store times are whole ms, compared as microseconds (ms * 1000).
        lo_closed, hi_closed = -(-us // 1000), us // 1000
        lo_open, hi_open = us // 1000 + 1, -(-us // 1000) - 1
    span = {GreaterThan: Span(lo=lo_open), GreaterThanOrEqual: Span(lo=lo_closed),
            LessThan: Span(hi=hi_open), LessThanOrEqual: Span(hi=hi_closed)}[type(f)]
    return _spanned(name, span)


def _whole(name: str, value: Any) -> int | None:
    """An offset or queue id as an int; a store time as the whole ms it equals."""
    if name == "store_timestamp":
        if not isinstance(value, dt.datetime):
            return None
        us = _micros(value)
        return us // 1000 if us % 1000 == 0 else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _spanned(name: str, span: Span) -> Selection:
    """The selection of offsets (``name`` offset) or store times in ``span``."""
    return Selection(offsets=span) if name == "offset" else Selection(times_ms=span)


def _micros(when: dt.datetime) -> int:
    """Microseconds since the epoch (a naive datetime is UTC, as Spark sends UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - _EPOCH) // _US
