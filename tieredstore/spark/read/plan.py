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
loaded once, here, before any task lists a segment (docs/log-objects.md, "Reading
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
from tieredstore.spark.read.selection import Queue, Selection
from tieredstore.store import (
    UNIT_SIZE,
    DurableTail,
    FileType,
    LogPiece,
    NoSuchQueue,
    ObjectStore,
    QueueMetadata,
    QueueView,
    clean_from,
    list_brokers,
    listed_queues,
    load_log,
    open_metadata,
    queue_log_pieces,
    unknown_in_cluster,
)

OPEN_CONCURRENCY = 16

T = TypeVar("T")
NO_END = 2**63 - 1

COMMIT_LOG, CONSUME_QUEUE = FileType.COMMIT_LOG, FileType.CONSUME_QUEUE


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Offsets ``[first_offset, last_offset]`` of one CQ segment of one queue
    ``(broker, topic, queue_id)``.

    ``cq_size`` is the sealed segment's size, or None for the queue's
    active tail (then ``last_offset`` may be ``NO_END``). ``cl_segments`` are
    the ``(base, size)`` of the CL segments its units may point into, in
    order; the last may be ``(base, None)`` (the active segment, its size known
    once it is opened). Plain ints, strings and None: it is
    pickled to executors.
    """

    broker: str
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
    # Where the queue's clean commit-log records resume after dead space (its
    # ``clean_from`` when planned): where the active slice's durable tail may go on.
    clean_from: int = 0
    # Every offset [first_offset, last_offset] was durable when planned (a
    # streaming micro-batch's range): a read that finds fewer fails.
    whole: bool = False

    @property
    def sealed(self) -> bool:
        return self.cq_size is not None

    @property
    def reaches_open(self) -> bool:
        """Whether it reads an open (active) segment of either file."""
        return not self.sealed or any(size is None for _, size in self.cl_segments)


async def find_queues(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                      *, probe: bool = False) -> list[Queue]:
    """The queues ``(broker, topic, queue id)`` the selection wants, of the brokers
    it names or else of every broker of ``config``'s cluster
    (:func:`~tieredstore.store.list_brokers`). Named topics need no listing of the
    others: only their heads are listed, on each broker; with ``probe``, named
    topics and queue ids are not listed at all: each broker's named queues are
    returned, for the caller to open (those without metadata left out, and
    :func:`check_found` after). A broker, topic or queue id named that no
    selected broker has is an error naming it (:func:`unknown_named`); the
    queues of ``queue_offsets`` are taken as given (their ranges came from the
    store)."""
    if selection.queue_offsets is not None:
        return sorted(q for q in selection.queue_offsets if selection.wants_queue(*q))
    cluster = await list_brokers(store, config)
    brokers = sorted(selection.brokers) if selection.brokers is not None else cluster
    unknown_named([], selection, cluster, only_brokers=True)
    if probe and selection.topics is not None and selection.queue_ids is not None:
        return sorted((b, t, q) for b in brokers for t in selection.topics
                      for q in selection.queue_ids if q >= 0 and selection.wants_queue(b, t, q))
    topics = None if selection.topics is None else sorted(selection.topics)
    listed = await broker_queues(store, config, brokers, topics)
    if not set(topics or ()) <= {t for _, t, _ in listed} or selection.queue_ids:
        unknown_named(await broker_queues(store, config, cluster, None), selection, cluster)
    return [q for q in listed if selection.wants_queue(*q)]


async def broker_queues(store: ObjectStore, config: TieredStoreConfig, brokers: Sequence[str],
                        topics: Sequence[str] | None) -> list[Queue]:
    """The queues (of ``topics``, else all) whose metadata each broker's heads hold."""
    listed = await asyncio.gather(*(listed_queues(store, config.replace(broker=b),
                                                  topics=topics) for b in brokers))
    return sorted((b, t, q) for b, found in zip(brokers, listed, strict=True) for t, q in found)


async def check_found(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                      found: Sequence[Queue]) -> None:
    """After a :func:`find_queues` that probed: ``found`` (the queues that had
    metadata) holds every topic and queue id named, else :func:`unknown_named`
    over the cluster's listing says which one is not."""
    if (set(selection.topics or ()) <= {t for _, t, _ in found}
            and set(selection.queue_ids or ()) <= {q for _, _, q in found}):
        return
    cluster = await list_brokers(store, config)
    unknown_named(await broker_queues(store, config, cluster, None), selection, cluster)


def unknown_named(listed: Sequence[Queue], selection: Selection, cluster: Sequence[str], *,
                  only_brokers: bool = False) -> None:
    """Raise :class:`ConfigError` (option ``broker``, ``topic`` or ``queue_id``)
    when a broker, topic or queue id the selection names is not among
    ``listed`` (the cluster's listing of its queues, ``cluster`` its brokers:
    :func:`~tieredstore.store.unknown_in_cluster`): a queue id must be a queue
    of one of the topics named (of any, when none is), on a broker selected."""
    selected = None if selection.brokers is None else sorted(selection.brokers)
    problem = unknown_in_cluster(listed, None, selected=selected, brokers=cluster)
    if problem is not None:
        raise ConfigError("broker", problem)
    if only_brokers:
        return
    topics = sorted(selection.topics or ())
    for topic in topics:
        problem = unknown_in_cluster(listed, topic, selected=selected, brokers=cluster)
        if problem is not None:
            raise ConfigError("topic", problem)
    for queue_id in sorted(selection.queue_ids or ()):
        problem = unknown_in_cluster(listed, topics[0] if len(topics) == 1 else None, queue_id,
                                     selected=selected, brokers=cluster)
        if problem is not None:
            raise ConfigError("queue_id", problem)


async def each_queue(queues: Sequence[Queue], work: Callable[[str, str, int], Awaitable[T]]
                     ) -> list[T]:
    """``work(broker, topic, queue_id)`` for each queue, at most
    :data:`OPEN_CONCURRENCY` at a time; the results in the queues' order, a
    queue without metadata (``NoSuchQueue``) left out."""
    limit = asyncio.Semaphore(OPEN_CONCURRENCY)

    async def one(broker: str, topic: str, queue_id: int) -> tuple[T] | tuple[()]:
        async with limit:
            try:
                return (await work(broker, topic, queue_id),)
            except NoSuchQueue:
                return ()

    return [r for found in await asyncio.gather(*(one(*q) for q in queues)) for r in found]


async def plan_read(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                    *, messages_per_slice: int = 0, whole: bool = False
                    ) -> list[SegmentSlice]:
    """The slices of every selected queue, by queue (of every broker selected:
    :func:`find_queues`). A queue without metadata has none; a broker, topic or
    queue id named (not by ``queue_offsets``) that the cluster does not list is an
    error naming it (:func:`unknown_named`). Each broker's log is loaded once,
    if a slice of it reaches an open segment. ``whole``: the offset ranges of
    ``queue_offsets`` are durable (as a read-only view saw them), and a slice
    read finding fewer fails (:attr:`SegmentSlice.whole`) instead of returning
    fewer rows."""
    if selection.empty:
        return []
    async def one(broker: str, topic: str, queue_id: int
                  ) -> tuple[Queue, list[SegmentSlice]]:
        meta = await open_metadata(store, config.replace(broker=broker), topic, queue_id)
        return (broker, topic, queue_id), await plan_queue(
            meta, topic, queue_id, selection.for_queue(broker, topic, queue_id),
            messages_per_slice=messages_per_slice, broker=broker, whole=whole)

    queues = await find_queues(store, config, selection, probe=True)
    planned = await each_queue(queues, one)
    if len(planned) < len(queues) and selection.queue_offsets is None:
        await check_found(store, config, selection, [q for q, _ in planned])
    slices = [s for _, q in planned for s in q]
    logs = {}
    for broker in sorted({s.broker for s in slices if s.reaches_open}):
        logs[broker] = await load_log(store, config.replace(broker=broker))
    return [dataclasses.replace(s, log_pieces=queue_log_pieces(logs[s.broker], s.topic,
                                                               s.queue_id))
            if s.reaches_open else s for s in slices]


async def queue_bounds(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                       tails: dict[Queue, DurableTail] | None = None
                       ) -> dict[Queue, tuple[int, int]]:
    """Each selected queue's ``(min offset, max offset)`` (first stored, one past
    the last durable) as a read-only view sees them
    (:class:`~tieredstore.store.QueueView`), of every broker selected
    (:func:`find_queues`); each broker's log loaded once for all its queues.
    ``tails``: each queue's durable tail as the last call walked it, gone on
    from and replaced (a reader that asks again walks only what is new)."""
    queues = await find_queues(store, config, selection)
    configs = {b: config.replace(broker=b) for b in sorted({b for b, _, _ in queues})}
    logs = {b: await load_log(store, c) for b, c in configs.items()}
    walked = {} if tails is None else tails

    async def bounds(broker: str, topic: str, queue_id: int
                     ) -> tuple[Queue, tuple[int, int]]:
        queue = (broker, topic, queue_id)
        view = await QueueView.open(store, configs[broker], topic, queue_id, log=logs[broker],
                                    tail_after=walked.get(queue))
        walked[queue] = view.durable_tail
        return queue, (view.min_offset, view.max_offset)

    return dict(await each_queue(queues, bounds))


async def plan_queue(meta: QueueMetadata, topic: str, queue_id: int, selection: Selection,
                     *, messages_per_slice: int = 0, broker: str, whole: bool = False
                     ) -> list[SegmentSlice]:
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

    # The active slice's commit log from the active consume-queue segment's first
    # offset: its durable tail is walked from where its units end (past them, from
    # the record of that offset), whatever offset the slice begins at.
    cl = await _commit_log_segments(meta, min(ranges[0][2], tail_offset), ranges[-1][3]) \
        if tail_wanted else await _commit_log_segments(meta, ranges[0][2], ranges[-1][3])
    clean = clean_from(meta.properties)
    slices = []
    for base, size, first, last in ranges:
        reach = first if size is not None else min(first, tail_offset)
        needed = tuple((b, s) for b, s, f, la in cl if f <= last and la >= reach)
        step = messages_per_slice if size is not None and messages_per_slice > 0 else 0
        lo = first
        while lo <= last:
            hi = last if not step else min(last, lo + step - 1)
            slices.append(SegmentSlice(broker, topic, queue_id, base, size, lo, hi, needed,
                                       clean_from=clean, whole=whole))
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
