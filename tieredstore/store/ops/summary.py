"""QueueSummary: one queue's figures as the bucket holds them, read-only.

What ``tieredstore inspect`` shows per queue and Spark's ``stats`` job per
row: offsets and messages from the consume queue (as :class:`QueueView`
answers them), live bytes, segments, chunk objects and sealed segments not
yet merged per flat file (one paged LIST each, no GET), the merges the head
records as owed, and the store timestamps of the first and last message (two
consume-queue reads, when asked).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tieredstore.config import TieredStoreConfig
from tieredstore.log import LogSnapshot
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import SegmentState
from tieredstore.segment.reader import SegmentReader
from tieredstore.store.formats.properties import merges_owed
from tieredstore.store.read.queue_view import QueueView
from tieredstore.store.read.view import FlatView, list_flat_file


@dataclass(frozen=True, slots=True)
class FlatSummary:
    """One flat file (commit log, consume queue or key index) of a queue."""

    segments: int  # live segments, the active one included
    bytes: int  # live bytes
    chunks: int  # chunk objects holding bytes, of live segments (merged ones have none)
    unmerged: int  # live sealed segments whose chunks are not merged into one object yet
    recorded: int = 0  # of the segments, those the metadata records (and the bucket holds)


NO_FILE = FlatSummary(0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class QueueSummary:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int  # one past the last durable offset
    commit_log: FlatSummary
    consume_queue: FlatSummary
    merges_pending: int  # merges the queue's head records as owed
    writer: str
    head_version: int
    oldest_ms: int | None  # store timestamps of the first and last message (None: empty
    newest_ms: int | None  # queue, or not asked)
    index: FlatSummary = NO_FILE  # the key index (none: a queue without keys)

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset

    @property
    def segments(self) -> int:
        """The queue's segments, the one count that ``inspect``, ``verify`` and
        Spark's ``stats`` and ``verify`` show: the live segments of its commit
        log, consume queue and key index (see :class:`FlatSummary`), that is
        the sealed ones from the first live one on and, past the records, the
        active one and any sealed one not recorded yet that hold bytes
        (trimmed segments whose deletion is pending are not counted)."""
        return self.commit_log.segments + self.consume_queue.segments + self.index.segments


async def summarize(store: ObjectStore, config: TieredStoreConfig, topic: str, queue_id: int,
                    reader: SegmentReader | None = None, *, log: LogSnapshot | None = None,
                    timestamps: bool = True, known: QueueSummary | None = None
                    ) -> QueueSummary:
    """``reader``: as :meth:`QueueView.open`'s; ``log``: the broker's log as loaded
    before this call (loaded here if None). Raises
    :class:`~tieredstore.store.NoSuchQueue`, and what reading the first or last
    message raises (with ``timestamps``).

    ``known``: the queue's summary from an earlier call. While its head is at
    the same version, the segments its records name are the same, so they are
    taken from ``known`` instead of listing each flat file again (a watcher's
    repeated passes; ``chunks`` and ``unmerged`` are then ``known``'s too); the
    open segments are listed as always. While the first offset is the same, so
    is the first message's timestamp."""
    view = await QueueView.open(store, config, topic, queue_id, reader, log=log)
    oldest = newest = None
    if timestamps and view.max_offset > view.min_offset:
        # from the consume-queue units, which carry them: no commit-log read; the
        # first message's once only (the message at an offset never changes)
        oldest = known.oldest_ms if known is not None and known.min_offset == view.min_offset \
            else None
        if oldest is None:
            oldest = (await view.units(view.min_offset, view.min_offset + 1))[0].store_timestamp
        newest = (await view.units(view.max_offset - 1, view.max_offset))[0].store_timestamp
    if known is not None and known.head_version != view.meta.version:
        known = None
    index = NO_FILE
    if view.index is not None:
        await view.index.open()
        index = await _flat(store, config, view.index, known.index if known else None)
    cl = await _flat(store, config, view.cl, known.commit_log if known else None)
    cq = await _flat(store, config, view.cq, known.consume_queue if known else None)
    return QueueSummary(topic, queue_id, view.min_offset, view.max_offset, cl, cq,
                        merges_owed(view.meta.properties), view.meta.writer_id,
                        view.meta.version, oldest, newest, index)


async def _flat(store: ObjectStore, config: TieredStoreConfig, flat: FlatView,
                known: FlatSummary | None = None) -> FlatSummary:
    """``flat`` opened (by ``QueueView.open``), and one LIST of its segments
    (none with ``known``: its recorded segments, chunks and unmerged are kept)."""
    tail = sum(1 for v in flat.tail if v.size)
    if known is not None:
        return FlatSummary(known.recorded + tail, flat.end - flat.first, known.chunks,
                           known.unmerged, known.recorded)
    listed = await list_flat_file(store, config, flat.topic, flat.queue_id, flat.file_type)
    recorded = [s for base, s in listed.items() if flat.first <= base < flat.next_base]
    chunks = sum(len(s.data_chunks) for base, s in listed.items() if base >= flat.first)
    unmerged = sum(1 for s in recorded if s.state is not SegmentState.SEALED) + \
        sum(1 for v in flat.tail if v.size and v.state is SegmentState.SEALING)
    return FlatSummary(segment_count(listed, (v.size for v in flat.tail), flat.first,
                                     flat.next_base), flat.end - flat.first, chunks, unmerged,
                       len(recorded))


def segment_count(bases: Iterable[int], tail_sizes: Iterable[int], first: int,
                  next_base: int) -> int:
    """One flat file's segments as :attr:`QueueSummary.segments` counts them: of the
    segments listed (``bases``), the recorded ones from ``first`` on, and of the
    tail (from ``next_base`` on) those that hold bytes."""
    return sum(1 for base in bases if first <= base < next_base) + \
        sum(1 for size in tail_sizes if size)
