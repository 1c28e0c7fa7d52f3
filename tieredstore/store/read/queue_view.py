"""QueueView: one queue, read-only, over what is durable in the bucket.

The store's own reading code (:class:`QueueReading`) over two or three
:class:`FlatView` s (see :mod:`tieredstore.store.read.view`): what ``tieredstore
verify``, ``consume``, ``query`` and Spark's reads see, and what a
:class:`ReadOnlyMessageStore` answers with. A planned read of one
(:func:`scan_planned`: a Spark task's) takes its segments and log pieces
from the plan, as plain values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError, is_damage
from tieredstore.fetcher import Fetcher
from tieredstore.log import LogPath, LogSnapshot
from tieredstore.metadata import QueueMetadata
from tieredstore.objectstore import ObjectStore, read_only
from tieredstore.segment import ChunkRef, DirectReader, FileType
from tieredstore.segment.reader import SegmentReader
from tieredstore.sizes import MiB
from tieredstore.store.base.compose import fetcher_options, open_object_store
from tieredstore.store.base.errors import OffsetOutOfRange
from tieredstore.store.formats import properties
from tieredstore.store.formats.codec import RecordCodec
from tieredstore.store.formats.keyentries import KeyEntry
from tieredstore.store.formats.keys import log_path
from tieredstore.store.formats.record import UNIT_SIZE, CqUnit
from tieredstore.store.read.bykey import KeyQuery, find_entries
from tieredstore.store.read.flatreader import SegmentRecords
from tieredstore.store.read.reading import QueueReading
from tieredstore.store.read.scan import Batch, QueueScan, ScanError, ScanSpec
from tieredstore.store.read.tail import DurableTail, durable_tail, tail_start
from tieredstore.store.read.view import FlatView, PlannedSegments, SegmentView, open_metadata


class QueueView(QueueReading):
    """One queue, read-only: offsets, ``get`` and ``offset_for_time`` as the store
    answers them (the same code), over what is durable in the bucket."""

    cl: FlatView
    cq: FlatView

    def __init__(self, topic: str, queue_id: int, meta: QueueMetadata, cl: FlatView,
                 cq: FlatView, *, index: FlatView | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.meta = meta
        self.cl = cl
        self.cq = cq
        self.index = index  # the key index, if the queue has one (listed when first read)
        # The commit log's records past the consume queue's end (docs/reading.md,
        # "The durable tail"): none until :meth:`open` reads them.
        self.durable_tail = DurableTail(0)

    @classmethod
    async def open(cls, store: ObjectStore, config: TieredStoreConfig, topic: str,
                   queue_id: int, reader: SegmentReader | None = None, *,
                   log: LogSnapshot | None = None, codec: RecordCodec | None = None,
                   tail_after: DurableTail | None = None) -> QueueView:
        """``reader``: what reads segments (one GET per read, if None); ``log``: the
        broker's log as loaded before this call (loaded here if None); ``codec``:
        what opens compressed or encrypted records (from ``config``, with its key if
        it has one, if None); ``tail_after``: the :attr:`durable_tail` of a view of
        this queue opened before, whose walk this one goes on from if it can
        (:func:`~tieredstore.store.read.tail.durable_tail`)."""
        reader = reader or DirectReader(store)
        if log is None:
            log = await LogSnapshot.load(store, log_path(config))
        meta = await open_metadata(store, config, topic, queue_id, log=log)
        cl, cq, index = (FlatView(store, config, meta, topic=topic, queue_id=queue_id,
                                  file_type=t, reader=reader, log=log)
                         for t in (FileType.COMMIT_LOG, FileType.CONSUME_QUEUE, FileType.INDEX))
        # The consume queue first: every unit it holds then points into commit-log
        # bytes stored before the commit log is listed (a live writer goes on).
        await cq.open()
        await cl.open()
        has_index = properties.index_from(meta.properties) is not None
        view = cls(topic, queue_id, meta, cl, cq, index=index if has_index else None)
        view.codec = codec or RecordCodec.from_config(config, strict=False)
        view.durable_tail = await view_tail(cl, cq, codec=view.codec,
                                            clean_from=view.clean_from, after=tail_after)
        return view

    @property
    def max_offset(self) -> int:
        """One past the last durable offset: of the consume queue's units, or of
        the commit log's records past them (:attr:`durable_tail`)."""
        return max(self.cq.end // UNIT_SIZE, self.durable_tail.end_offset)

    def unstored(self, start: int, end: int) -> list[CqUnit]:
        """The units derived from the commit log's durable tail."""
        return self.durable_tail.units_between(start, end)

    @property
    def clean_from(self) -> int:
        return properties.clean_from(self.meta.properties)

    async def units(self, start: int, end: int) -> list[CqUnit]:
        """Consume-queue units of offsets ``[start, end)`` (clipped to max_offset)."""
        return await super().units(start, min(end, self.max_offset))

    async def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        """The key index's entries, and entries for the durable tail's keyed
        messages (a queue with no key index: none)."""
        if self.index is None:
            return []
        return await find_entries(self.meta, self.index, q) + self.durable_tail.key_entries(q)


async def view_tail(cl: FlatView, cq: FlatView, *, codec: RecordCodec | None,
                    clean_from: int, after: DurableTail | None = None,
                    until: int | None = None) -> DurableTail:
    """The durable tail past consume queue ``cq`` as listed, up to the end of
    commit log ``cl`` as listed (docs/reading.md, "The durable tail"); none if
    the last unit cannot be read (damage: reads name it). ``after``: a tail
    walked before, gone on from if it began where this one begins; ``until``:
    no further than the offsets below it."""
    offset = cq.end // UNIT_SIZE
    units_end: int | None = None
    if offset > cq.first // UNIT_SIZE:
        last = QueueScan(ScanSpec.for_units(cq.topic, cq.queue_id, offset - 1, offset,
                                            codec=codec), cl=cl, cq=cq)
        try:
            units_end = (await last.units())[0].end
        except TieredStoreError as exc:
            if not is_damage(exc):
                raise
            return DurableTail(offset)
    start = tail_start(offset, units_end, first=cl.first, clean_from=clean_from)
    return await durable_tail(cl, start, cl.end, codec=codec, after=after, until=until)


# A log piece of a queue, as plain values (pickled to Spark executors): file type,
# segment base, position, length, log object key, offset in it, CRC32C.
LogPiece = tuple[int, int, int, int, str, int, int | None]
Segments = tuple[tuple[int, int | None], ...]  # (base, size); size None: the active one


def reading_fetcher(store: ObjectStore, config: TieredStoreConfig) -> Fetcher:
    """A fetcher sized for one sequential scan: read-ahead, no disk tier."""
    window = (config.readahead_chunk_max + 4) * config.chunk_size
    memory = max(0, min(config.memory_cache_bytes, max(32 * MiB, window)))
    return Fetcher(store, dataclasses.replace(fetcher_options(config), memory_bytes=memory))


@asynccontextmanager
async def open_reading(config: TieredStoreConfig
                       ) -> AsyncIterator[tuple[ObjectStore, Fetcher]]:
    """A store (read-only) and fetcher of one's own for a scan (a Spark task),
    closed at the end."""
    store = read_only(open_object_store(config))
    fetcher = reading_fetcher(store, config)
    try:
        yield store, fetcher
    finally:
        try:
            await fetcher.close()
        finally:
            await store.close()


def queue_log_pieces(log: LogSnapshot, topic: str, queue_id: int) -> tuple[LogPiece, ...]:
    """The pieces ``log`` holds of one queue, as plain values."""
    return tuple((int(file_type), base, u.position, u.length, u.key, u.object_offset, u.crc32c)
                 for file_type, base, u in log.of_queue(topic, queue_id))


def planned_log(topic: str, queue_id: int, pieces: tuple[LogPiece, ...],
                source: tuple[ObjectStore, LogPath] | None = None) -> LogSnapshot:
    """The broker's log as it was when ``pieces`` (one queue's) were taken from it
    (``source``: where it reloads from)."""
    by_segment: dict[tuple[str, int, FileType, int], list[ChunkRef]] = {}
    for file_type, base, position, length, key, offset, crc in pieces:
        by_segment.setdefault((topic, queue_id, FileType(file_type), base), []).append(
            ChunkRef(position, length, key, offset, crc))
    return LogSnapshot(by_segment, source=source)


def queue_files(store: ObjectStore, config: TieredStoreConfig, topic: str, queue_id: int, *,
                records: tuple[SegmentRecords, SegmentRecords], reader: SegmentReader,
                log: LogSnapshot | None,
                listed: tuple[list[SegmentView], list[SegmentView]] = ([], [])
                ) -> tuple[FlatView, FlatView]:
    """The queue's commit log and consume queue, read-only, over ``records``
    (the commit log's and the consume queue's) and the segments ``listed``
    already (theirs too), which are not listed again."""
    cl, cq = (FlatView(store, config, r, topic=topic, queue_id=queue_id, file_type=t,
                       reader=reader, log=log, listed=views)
              for r, t, views in zip(records, (FileType.COMMIT_LOG, FileType.CONSUME_QUEUE),
                                     listed, strict=True))
    return cl, cq


async def scan_planned(config: TieredStoreConfig, topic: str, queue_id: int, *,
                       cq_segments: Segments, cl_segments: Segments, first: int,
                       end: int | None, log_pieces: tuple[LogPiece, ...] | None,
                       wants: Callable[[int, int], bool] | None = None,
                       on: tuple[ObjectStore, SegmentReader] | None = None,
                       clean_from: int = 0, whole: bool = False) -> AsyncIterator[Batch]:
    """Strictly scan offsets ``[first, end)`` of the planned segments, on ``on``
    (a store and a reader) or on a store and fetcher of its own (a Spark task).
    A plan that reaches an open segment reads its pieces in the broker's log
    too: ``log_pieces``, taken when the plan was made (None: loaded here),
    before any segment is listed. A plan that reaches the active consume-queue
    segment goes on past its units with the commit log's durable tail
    (:func:`view_tail`, from ``clean_from``, the queue's ``clean_from`` when
    planned), up to ``end`` (None: the tail's end). ``whole``: every offset of
    ``[first, end)`` was durable when planned (a streaming micro-batch's
    range): a scan that ends short of ``end`` raises
    :class:`~tieredstore.store.base.errors.OffsetOutOfRange` naming the offsets not
    found, rather than return fewer rows than its range. Its batches hold
    :class:`~tieredstore.store.read.columns.Columns` (``ScanSpec.for_slice``)."""
    if on is None:
        async with open_reading(config) as opened:
            async for batch in scan_planned(config, topic, queue_id, cq_segments=cq_segments,
                                            cl_segments=cl_segments, first=first, end=end,
                                            log_pieces=log_pieces, wants=wants, on=opened,
                                            clean_from=clean_from, whole=whole):
                yield batch
        return
    store, reader = on
    log: LogSnapshot | None = None
    if any(size is None for _, size in (*cq_segments, *cl_segments)):
        source = (store, log_path(config))
        try:
            log = (await LogSnapshot.load(*source) if log_pieces is None else
                   planned_log(topic, queue_id, log_pieces, source))
        except TieredStoreError as exc:
            raise ScanError(topic, queue_id, first, f"consume queue: {exc}") from exc
    cl, cq = queue_files(store, config, topic, queue_id, log=log, reader=reader,
                         records=(PlannedSegments(cl_segments), PlannedSegments(cq_segments)))
    codec = RecordCodec.from_config(config, strict=False)

    def sliced(first: int, end: int | None) -> ScanSpec:
        return ScanSpec.for_slice(topic, queue_id, first, end, codec=codec, wants=wants)

    scan = QueueScan(sliced(first, end), cl=cl, cq=cq)
    async for batch in scan.batches():
        yield batch
    at = max(first, scan.next_offset)
    # The active slice goes on with the commit log's durable tail: from where its
    # last unit's record ends, or (no unit in its active segment yet) from the
    # first planned commit-log segment, passing over the records before. A read
    # that need not be whole leaves that walk to the next plan. The consume
    # queue may have been listed again meanwhile (a read past its end, a
    # merge): its units up to the tail first.
    if any(size is None for _, size in cq_segments) and (end is None or at < end) \
            and (whole or cq.end > cq.first):
        await cl.open()  # not listed yet if the slice held no unit to read
        tail = await view_tail(cl, cq, codec=codec, clean_from=clean_from, until=end)
        stop = tail.end_offset if end is None else min(end, tail.end_offset)
        for rest in (QueueScan(sliced(at, max(at, min(tail.first, stop))), cl=cl, cq=cq),
                     QueueScan(sliced(max(at, tail.first), stop), cl=cl, cq=cq,
                               unstored=tail.units_between)):
            async for batch in rest.batches():
                yield batch
            at = max(at, rest.next_offset)
    if whole and end is not None and at < end:
        raise OffsetOutOfRange(
            f"offsets [{at}, {end}) were durable when this read was planned but are not "
            f"found in the segments planned (the consume queue and the commit log's "
            f"durable tail end at {at}: the segments changed since, and a read planned "
            "again reads them)",
            topic=topic, queue_id=queue_id)
