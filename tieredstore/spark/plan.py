"""Plan a read from metadata alone: which segments, in which slices.

The store keeps, per queue, a commit log (CL: the records) and a consume
queue (CQ: one 32-byte unit per offset, pointing into the CL). A read is
planned per CQ segment: each sealed CQ segment's metadata record gives its
offsets and store times, so the :class:`~.selection.Selection` can drop it
before a byte of it is read; the queue's active (unsealed) CQ segment is one
more slice, its end unknown until it is read. The CL segments a slice needs
come from the CL records' message offsets, and the active CL segment goes
with the slices that may reach it.

Planning only reads metadata, read-only: the heads of the queues selected
(and, when no queue is named, a listing of the heads), and the pages of
records the selection reaches. It never claims a queue or writes anything.
When a slice reaches an open segment, the broker's log (write mode log) is
loaded once, here, before any task lists a segment (docs/format.md, "Reading
the log"), and each slice carries the log pieces of its own queue: a task
reads no other queue's index.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.selection import Selection
from tieredstore.store import (
    UNIT_SIZE,
    FileType,
    LogPiece,
    NoSuchQueue,
    ObjectStore,
    QueueMetadata,
    listed_queues,
    load_log,
    open_metadata,
    queue_log_pieces,
    unknown_selected,
)

OPEN_CONCURRENCY = 16

T = TypeVar("T")
NO_END = 2**63 - 1

COMMIT_LOG, CONSUME_QUEUE = FileType.COMMIT_LOG, FileType.CONSUME_QUEUE


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Offsets ``[first_offset, last_offset]`` of one CQ segment of one queue.

    ``cq_size`` is the sealed segment's size, or None for the queue's
    active tail (then ``last_offset`` may be ``NO_END``). ``cl_segments`` are
    the ``(base, size)`` of the CL segments its units may point into, in
    order; the last may be ``(base, None)`` (the active segment, its size known
    once it is opened). Plain ints, strings and None: it is
    pickled to executors.
    """

    topic: str
    queue_id: int
    cq_base: int
    cq_size: int | None
    first_offset: int
    last_offset: int
    cl_segments: tuple[tuple[int, int | None], ...]
    # The queue's log pieces when the slice was planned; None: not loaded (a slice
    # of sealed segments only, or one planned without the log).
    log_pieces: tuple[LogPiece, ...] | None = None

    @property
    def sealed(self) -> bool:
        return self.cq_size is not None

    @property
    def reaches_open(self) -> bool:
        """Whether it reads an open (active) segment of either file."""
        return not self.sealed or any(size is None for _, size in self.cl_segments)


async def find_queues(store: ObjectStore, config: TieredStoreConfig, selection: Selection
                      ) -> list[tuple[str, int]]:
    """The queues the selection wants. Named topics and queues need no listing of
    the others: only the heads of the named topics are listed, and none when
    queue ids are named too (:func:`plan_read` reports a named queue without
    metadata). A topic or queue id named that the listing lacks is an error
    naming it (:func:`unknown_named`); the queues of ``queue_offsets`` are
    taken as given (their ranges came from the store)."""
    if selection.queue_offsets is not None:
        return sorted(q for q in selection.queue_offsets if selection.wants_queue(*q))
    if selection.topics is not None and selection.queue_ids is not None:
        return sorted((t, q) for t in selection.topics for q in selection.queue_ids
                      if q >= 0 and selection.wants_queue(t, q))
    topics = None if selection.topics is None else sorted(selection.topics)
    listed = await listed_queues(store, config, topics=topics)
    if not set(topics or ()) <= {t for t, _ in listed}:  # named by the full listing
        listed = await listed_queues(store, config)
    unknown_named(listed, selection)
    return [q for q in listed if selection.wants_queue(*q)]


def unknown_named(listed: Sequence[tuple[str, int]], selection: Selection) -> None:
    """Raise :class:`ConfigError` (option ``topic`` or ``queue_id``) when a topic
    or queue id the selection names is not among ``listed`` (the store's
    listing, :func:`~tieredstore.store.unknown_selected`): a queue id must be a
    queue of one of the topics named (of any, when none is)."""
    topics = sorted(selection.topics or ())
    for topic in topics:
        problem = unknown_selected(listed, topic)
        if problem is not None:
            raise ConfigError("topic", problem)
    for queue_id in sorted(selection.queue_ids or ()):
        problem = unknown_selected(listed, topics[0] if len(topics) == 1 else None, queue_id)
        if problem is not None:
            raise ConfigError("queue_id", problem)


async def each_queue(queues: Sequence[tuple[str, int]],
                     work: Callable[[str, int], Awaitable[T]]) -> list[T]:
    """``work(topic, queue_id)`` for each queue, at most :data:`OPEN_CONCURRENCY`
    at a time; the results in the queues' order, a queue without metadata
    (``NoSuchQueue``) left out."""
    limit = asyncio.Semaphore(OPEN_CONCURRENCY)

    async def one(topic: str, queue_id: int) -> tuple[T] | tuple[()]:
        async with limit:
            try:
                return (await work(topic, queue_id),)
            except NoSuchQueue:
                return ()

    return [r for found in await asyncio.gather(*(one(t, q) for t, q in queues)) for r in found]


async def plan_read(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                    *, messages_per_slice: int = 0) -> list[SegmentSlice]:
    """The slices of every selected queue, by queue. A queue without metadata has
    none; a topic or queue id named (not by ``queue_offsets``) that the store
    does not list is an error naming it (:func:`unknown_named`)."""
    if selection.empty:
        return []
    async def one(topic: str, queue_id: int) -> list[SegmentSlice]:
        meta = await open_metadata(store, config, topic, queue_id)
        return await plan_queue(meta, topic, queue_id, selection.for_queue(topic, queue_id),
                                messages_per_slice=messages_per_slice)

    queues = await find_queues(store, config, selection)
    planned = await each_queue(queues, one)
    if len(planned) < len(queues) and selection.queue_offsets is None:
        unknown_named(await listed_queues(store, config), selection)  # one had no metadata
    slices = [s for q in planned for s in q]
    if any(s.reaches_open for s in slices):
        log = await load_log(store, config)
        slices = [dataclasses.replace(s, log_pieces=queue_log_pieces(log, s.topic, s.queue_id))
                  if s.reaches_open else s for s in slices]
    return slices


async def plan_queue(meta: QueueMetadata, topic: str, queue_id: int, selection: Selection,
                     *, messages_per_slice: int = 0) -> list[SegmentSlice]:
    cq_active = meta.next_base_offset(CONSUME_QUEUE)
    tail_offset = cq_active // UNIT_SIZE
    last_sealed = meta.last_record(CONSUME_QUEUE)

    offsets, times = selection.offsets, selection.times_ms
    start = max(0, offsets.lo) * UNIT_SIZE
    if times.lo > 0:
        found = await meta.find_by_time(CONSUME_QUEUE, times.lo)
        start = max(start, found.base_offset if found is not None else cq_active)
    ranges: list[tuple[int, int | None, int, int]] = []  # cq base, cq size, first, last
    if start < cq_active:
        async for record in meta.records(CONSUME_QUEUE, from_base_offset=start):
            if record.first_message_offset > offsets.hi or record.begin_timestamp_ms > times.hi:
                break
            if selection.wants_segment(record.first_message_offset,
                                       record.last_message_offset,
                                       record.begin_timestamp_ms, record.end_timestamp_ms):
                ranges.append((record.base_offset, record.size,
                               max(record.first_message_offset, offsets.lo),
                               min(record.last_message_offset, offsets.hi)))
    tail_wanted = tail_offset <= offsets.hi and (
        last_sealed is None or last_sealed.end_timestamp_ms <= times.hi)
    if tail_wanted:
        ranges.append((cq_active, None, max(tail_offset, offsets.lo), offsets.hi))
    if not ranges:
        return []

    cl = await _commit_log_segments(meta, ranges[0][2], ranges[-1][3])
    slices = []
    for base, size, first, last in ranges:
        needed = tuple((b, s) for b, s, f, la in cl if f <= last and la >= first)
        step = messages_per_slice if size is not None and messages_per_slice > 0 else 0
        lo = first
        while lo <= last:
            hi = last if not step else min(last, lo + step - 1)
            slices.append(SegmentSlice(topic, queue_id, base, size, lo, hi, needed))
            if hi == NO_END:
                break
            lo = hi + 1
    return slices


async def _commit_log_segments(meta: QueueMetadata, first: int, last: int
                               ) -> list[tuple[int, int | None, int, int]]:
    """``(base, size, first offset, last offset)`` of the CL segments holding offsets
    ``[first, last]``, then the active CL segment as ``(base, None, ...)``."""
    out: list[tuple[int, int | None, int, int]] = []
    active_first = meta.next_message_offset(COMMIT_LOG)
    if first < active_first:
        found = await meta.find_by_message_offset(COMMIT_LOG, first)
        start = found.base_offset if found is not None else 0
        async for record in meta.records(COMMIT_LOG, from_base_offset=start):
            if record.first_message_offset > last:
                break
            if record.last_message_offset >= first:
                out.append((record.base_offset, record.size, record.first_message_offset,
                            record.last_message_offset))
    if last >= active_first:
        out.append((meta.next_base_offset(COMMIT_LOG), None, active_first, NO_END))
    return out
