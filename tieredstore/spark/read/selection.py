"""Which messages a read wants: brokers, topics, queues, offsets, store times. No IO.

A :class:`Selection` is built from reader options (or a job's filters) and
answers two questions: does a queue ``(broker, topic, queue id)`` or a segment
(known from its metadata record alone) hold any wanted message, and is one
message wanted. Offsets and times are closed ranges; times are milliseconds
since the epoch, as the store keeps them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from tieredstore.errors import ConfigError
from tieredstore.store import parse_time

_MIN, _MAX = -(2**63), 2**63 - 1
T = TypeVar("T")
Queue = tuple[str, str, int]
"""A queue of a cluster: ``(broker, topic, queue id)``."""


@dataclass(frozen=True, slots=True)
class Span:
    """The closed integer range ``[lo, hi]``; ``lo > hi`` is empty."""

    lo: int = _MIN
    hi: int = _MAX

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def overlaps(self, lo: int, hi: int) -> bool:
        return not self.empty and lo <= self.hi and hi >= self.lo

    def __contains__(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def intersect(self, other: Span) -> Span:
        return Span(max(self.lo, other.lo), min(self.hi, other.hi))


@dataclass(frozen=True, slots=True)
class Selection:
    """What to read. ``brokers``/``topics``/``queue_ids`` None: every one.
    ``queue_offsets``, if not None: only the queues ``(broker, topic, queue id)``
    it names, each within its own offsets too."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    offsets: Span = Span()
    times_ms: Span = Span()
    queue_offsets: Mapping[Queue, Span] | None = None
    brokers: frozenset[str] | None = None

    @property
    def empty(self) -> bool:
        return (
            (self.brokers is not None and not self.brokers)
            or (self.topics is not None and not self.topics)
            or (self.queue_ids is not None and not self.queue_ids)
            or self.offsets.empty or self.times_ms.empty
        )

    def intersect(self, other: Selection) -> Selection:
        """What both select (reader options and a query's filters, say)."""
        mine, theirs = self.queue_offsets, other.queue_offsets
        per_queue = (mine if theirs is None else theirs if mine is None else
                     {q: span.intersect(theirs[q]) for q, span in mine.items() if q in theirs})
        return Selection(_both(self.topics, other.topics), _both(self.queue_ids, other.queue_ids),
                         self.offsets.intersect(other.offsets),
                         self.times_ms.intersect(other.times_ms), per_queue,
                         _both(self.brokers, other.brokers))

    def wants_queue(self, broker: str, topic: str, queue_id: int) -> bool:
        if self.empty or (self.topics is not None and topic not in self.topics):
            return False
        if self.brokers is not None and broker not in self.brokers:
            return False
        if self.queue_offsets is not None and (broker, topic, queue_id) not in self.queue_offsets:
            return False
        return self.queue_ids is None or queue_id in self.queue_ids

    def for_queue(self, broker: str, topic: str, queue_id: int) -> Selection:
        """This selection for one queue: its offsets narrowed to the queue's own."""
        own = (None if self.queue_offsets is None
               else self.queue_offsets.get((broker, topic, queue_id)))
        if own is None:
            return self
        return dataclasses.replace(self, offsets=self.offsets.intersect(own))

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

    @property
    def row_filter(self) -> Callable[[int, int], bool] | None:
        """:meth:`wants`, or None when it wants every message (no offset or time
        bound): a read then checks no row."""
        return None if self.offsets == Span() and self.times_ms == Span() else self.wants


def _both(one: frozenset[T] | None, other: frozenset[T] | None) -> frozenset[T] | None:
    """The items in both sets, None meaning every item."""
    if one is None:
        return other
    return one if other is None else one & other


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
    """Options ``broker``, ``topic`` and ``queue_id`` (comma-separated lists),
    ``offset_from`` (inclusive) and ``offset_to`` (exclusive), ``time_from``
    (inclusive) and ``time_to`` (exclusive): ISO 8601 (naive means UTC) or
    milliseconds; ``queue_offsets``: a JSON list of ``[broker, topic, queue_id,
    from, to]`` (from inclusive, to exclusive), only those queues, each in its
    own range."""
    brokers, topics, queue_ids = (options.get("broker"), options.get("topic"),
                                  options.get("queue_id"))
    return Selection(frozenset(names(topics)) if topics else None,
                     frozenset(ints("queue_id", queue_ids)) if queue_ids else None,
                     _from_to(options, "offset", one_int), _from_to(options, "time", _ms),
                     _queue_offsets(options.get("queue_offsets")),
                     frozenset(names(brokers)) if brokers else None)


def queue_offsets_option(ranges: Mapping[Queue, tuple[int, int]]) -> str:
    """The ``queue_offsets`` option for ``{(broker, topic, queue_id): (from, to)}``."""
    return json.dumps([[b, t, q, lo, hi] for (b, t, q), (lo, hi) in sorted(ranges.items())])


def _queue_offsets(text: str | None) -> dict[Queue, Span] | None:
    if text is None:
        return None
    try:
        items = json.loads(text)
        out: dict[Queue, list[Span]] = {}
        for broker, topic, queue_id, lo, hi in items:
            if not (isinstance(broker, str) and isinstance(topic, str)
                    and all(type(n) is int for n in (queue_id, lo, hi))):
                raise ValueError
            out.setdefault((broker, topic, queue_id), []).append(Span(lo, hi - 1))
    except (ValueError, TypeError):
        raise ConfigError("queue_offsets", "must be a JSON list of [broker, topic, queue_id, "
                          f"from, to] (from, to integers), got {text[:200]!r}") from None
    for (broker, topic, queue_id), spans in out.items():
        if len(spans) > 1:
            raise ConfigError("queue_offsets", f"names queue {broker}/{topic}/{queue_id} more "
                              "than once: give each queue one range")
    return {q: spans[0] for q, spans in out.items()}


def _from_to(options: Mapping[str, str], name: str, read: Callable[[str, str], int]) -> Span:
    """Options ``<name>_from`` (inclusive) and ``<name>_to`` (exclusive) as a closed
    span; ``read(key, text)``: the first whole unit at or after the option's value."""
    first, end = options.get(f"{name}_from"), options.get(f"{name}_to")
    return Span(read(f"{name}_from", first) if first else _MIN,
                read(f"{name}_to", end) - 1 if end else _MAX)


def _ms(key: str, text: str) -> int:
    """The first store time (a whole millisecond) at or after the time ``text``."""
    try:
        return -(-parse_time(text) // 1000)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None
