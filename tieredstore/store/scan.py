"""The one scan of a queue: units first, then the records they point to.

Every reader that goes through a queue in bulk uses it: Spark's read (one
planned slice per task) and :func:`tieredstore.store.verify_queue` (a whole
queue). Consume-queue (CQ) units are read a block at a time, each unit's
CRC32C checked and each checked to point at or after the end of the record
before (:func:`~tieredstore.store.checks.unit_order_problem`); a damaged range
of units is read around. The wanted records are then read in runs of
neighbouring records (one read, parallel GETs of whole units, each unit
fetched once and its CRC32C checked), decoded, each record's CRC32C checked
and compared with its unit (:func:`~tieredstore.store.checks.record_problem`).
A run that cannot be read is read one record at a time to name the damaged
ones.

Problems are :class:`ScanError` naming topic, queue and offset(s). ``strict``
(a read) raises the first; otherwise (a verify) each is reported in its
:class:`Batch` and the scan goes on, so that one report names every damaged
offset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.fetcher import Fetcher
from tieredstore.filetype import FileType
from tieredstore.log import LogPath, LogSnapshot
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkRef, SegmentReader, SegmentState
from tieredstore.sizes import MiB
from tieredstore.store.checks import record_problem, unit_order_problem
from tieredstore.store.codec import RecordCodec
from tieredstore.store.compose import fetcher_options, open_object_store
from tieredstore.store.flatreader import SegmentRecords
from tieredstore.store.keys import log_path
from tieredstore.store.record import (
    UNIT_SIZE,
    CqUnit,
    Message,
    RecordError,
    decode_record,
    decode_unit,
)
from tieredstore.store.view import FlatView, PlannedSegments, SegmentView

UNITS_PER_BLOCK = 4096  # 128 KiB of consume queue per read
RUN_BYTES = 8 * MiB  # commit-log bytes per read

# A log piece of a queue, as plain values (pickled to Spark executors): file type,
# segment base, position, length, log object key, offset in it, CRC32C.
LogPiece = tuple[int, int, int, int, str, int, int | None]
Segments = tuple[tuple[int, int | None], ...]  # (base, size); size None: the active one


class ScanError(TieredStoreError):
    """A queue's data is damaged or inconsistent; the message names where."""

    def __init__(self, topic: str, queue_id: int, offset: int, message: str,
                 last_offset: int | None = None) -> None:
        span = f"offset {offset}" if last_offset in (None, offset) \
            else f"offsets {offset}..{last_offset}"
        self.text = f"{span}: {message}"  # without the queue's name
        super().__init__(f"{topic}/{queue_id} {self.text}")
        self.topic = topic
        self.queue_id = queue_id
        self.offset = offset
        self.last_offset = offset if last_offset is None else last_offset


@dataclass(slots=True)
class Batch:
    """Messages read in order, and (outside strict mode) what could not be read."""

    messages: list[Message] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    units: int = 0  # units looked at, wanted or not


@dataclass(frozen=True, slots=True)
class _Wanted:
    offset: int
    unit: CqUnit


def reading_fetcher(store: ObjectStore, config: TieredStoreConfig) -> Fetcher:
    """A fetcher sized for one sequential scan: read-ahead, no disk tier."""
    window = (config.readahead_chunk_max + 4) * config.chunk_size
    memory = max(0, min(config.memory_cache_bytes, max(32 * MiB, window)))
    return Fetcher(store, dataclasses.replace(fetcher_options(config), memory_bytes=memory))


@asynccontextmanager
async def open_reading(config: TieredStoreConfig
                       ) -> AsyncIterator[tuple[ObjectStore, Fetcher]]:
    """A store and fetcher of one's own for a scan (a Spark task), closed at the end."""
    store = open_object_store(config)
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


class QueueScan:
    """Offsets ``[first, end)`` of one queue (``end`` None: to the end of the
    consume queue), over the queue's commit log ``cl`` and consume queue ``cq``.

    ``wants(offset, store_timestamp)`` drops units before their record is read.
    After (or during) the scan: ``dead_bytes`` counts commit-log bytes between
    records, ``record_end`` is where the last good unit's record ends (None
    after damage: unknown), ``last_read`` the last offset whose unit was read.
    """

    def __init__(self, topic: str, queue_id: int, *, cl: FlatView, cq: FlatView,
                 codec: RecordCodec | None, first: int, end: int | None = None,
                 wants: Callable[[int, int], bool] | None = None,
                 strict: bool = True) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log = cl
        self.consume_queue = cq
        self.codec = codec
        self.first = first
        self.end = end
        self.wants = wants
        self.strict = strict
        self.last_read = first - 1
        self.record_end: int | None = None
        self.dead_bytes = 0
        self._bad: list[tuple[int, str]] = []  # unreadable records not yet reported

    def _error(self, offset: int, message: str, last: int | None = None) -> ScanError:
        return ScanError(self.topic, self.queue_id, offset, message, last)

    def _report(self, batch: Batch, error: ScanError) -> None:
        if self._bad:  # the unreadable records before it first, in offset order
            self._flush_bad(batch)
        if self.strict:
            raise error
        batch.errors.append(error)

    async def batches(self) -> AsyncIterator[Batch]:
        """A batch per block of units, in offset order. A consume-queue segment
        that cannot be opened raises (strict) or is reported whole."""
        async for batch in self._blocks():
            yield batch
        if self._bad:
            batch = Batch()
            self._flush_bad(batch)
            yield batch

    async def _blocks(self) -> AsyncIterator[Batch]:
        offset, end = self.first, self.end
        while end is None or offset < end:
            try:
                cq = await self.consume_queue.locate(offset * UNIT_SIZE)
            except TieredStoreError as exc:
                raise self._error(offset, f"consume queue: {exc}") from exc
            stop = cq.end // UNIT_SIZE if end is None else min(end, cq.end // UNIT_SIZE)
            # The units listed in the active segment are the scan's last, even if a
            # writer seals it (and the read finds it merged and longer) meanwhile.
            active = cq.state is SegmentState.OPEN
            if cq.state is None:  # its units, as many as its record says, unreadable
                batch = Batch(units=max(0, stop - offset))
                self._report(batch, self._error(offset, f"consume-queue segment {cq.path}: "
                                                f"{cq.error}", max(offset, stop - 1)))
                self.record_end = None
                yield batch
                if stop <= offset:
                    return
            elif stop <= offset:
                return
            else:
                async for batch in self._segment(offset, stop):
                    yield batch
            offset = stop
            if active:
                return

    async def _segment(self, offset: int, end: int) -> AsyncIterator[Batch]:
        while offset < end:
            stop = min(end, offset + UNITS_PER_BLOCK)
            batch = Batch(units=stop - offset)
            units = await self._units(offset, stop, batch)
            wants = self.wants
            await self._records(units if wants is None else
                                [w for w in units if wants(w.offset, w.unit.store_timestamp)],
                                batch)
            self.last_read = stop - 1
            yield batch
            offset = stop

    async def _units(self, start: int, stop: int, batch: Batch) -> list[_Wanted]:
        if start >= stop:
            return []
        try:
            data = await self.consume_queue.read(start * UNIT_SIZE, (stop - start) * UNIT_SIZE)
        except TieredStoreError as exc:
            # Only the units of the damaged range are lost: read around it.
            span = getattr(exc, "span", None)
            bad_start, bad_stop = start, stop
            if span is not None:
                base = (await self.consume_queue.locate(start * UNIT_SIZE)).base
                bad_start = max(start, (base + span[0]) // UNIT_SIZE)
                bad_stop = min(stop, -(-(base + span[1]) // UNIT_SIZE))
            if bad_start >= bad_stop:
                bad_start, bad_stop = start, stop
            before = await self._units(start, bad_start, batch) if bad_start > start else []
            self._report(batch, self._error(bad_start, f"consume-queue units unreadable: {exc}",
                                            bad_stop - 1))
            self.record_end = None
            after = await self._units(bad_stop, stop, batch) if bad_stop < stop else []
            return before + after
        out: list[_Wanted] = []
        for i in range(stop - start):
            try:
                unit = decode_unit(data, i * UNIT_SIZE)
            except RecordError as exc:
                self._report(batch, self._error(start + i, f"consume-queue unit: {exc}"))
                self.record_end = None
                continue
            order = unit_order_problem(unit, self.record_end)
            if order is not None:
                self._report(batch, self._error(start + i, order))
                continue
            if self.record_end is not None:
                self.dead_bytes += unit.position - self.record_end
            self.record_end = unit.end
            out.append(_Wanted(start + i, unit))
        return out

    async def _records(self, wanted: list[_Wanted], batch: Batch) -> None:
        i = 0
        while i < len(wanted):
            first = wanted[i]
            located = await self._locate(first, batch)
            if located is None:
                i += 1
                continue
            seg_end = located.end
            j, size = i, first.unit.size
            while (j + 1 < len(wanted) and wanted[j + 1].unit.position == wanted[j].unit.end
                   and wanted[j + 1].unit.end <= seg_end and size < RUN_BYTES):
                j += 1
                size += wanted[j].unit.size
            run = wanted[i : j + 1]
            if first.unit.position + size > seg_end:
                self._report(batch, self._error(
                    first.offset, f"its record [{first.unit.position}, {first.unit.end}) runs "
                    f"past the end of commit-log segment {located.path} at {seg_end}"))
                i += 1
                continue
            try:
                data = await self.commit_log.read(first.unit.position, size)
            except TieredStoreError:
                await self._one_by_one(run, batch)
            else:
                self._decode(memoryview(data), run, batch)
            i = j + 1

    async def _locate(self, item: _Wanted, batch: Batch) -> SegmentView | None:
        try:
            return await self.commit_log.locate(item.unit.position, item.unit.size)
        except TieredStoreError as exc:
            self._report(batch, self._error(item.offset, f"commit log: {exc}"))
            return None

    async def _one_by_one(self, run: list[_Wanted], batch: Batch) -> None:
        """A run failed: read its records one at a time to name the damaged ones
        (neighbours that fail for one reason, in this run or the next, as one
        problem: raised at the end of the run in strict mode)."""
        bad = self._bad
        for item in run:
            try:
                data = await self.commit_log.read(item.unit.position, item.unit.size)
            except TieredStoreError as exc:
                if bad and (bad[-1][1] != str(exc) or bad[-1][0] + 1 != item.offset):
                    self._flush_bad(batch)
                bad.append((item.offset, str(exc)))
                continue
            self._decode(memoryview(data), [item], batch)
        if self.strict and bad:
            self._flush_bad(batch)

    def _flush_bad(self, batch: Batch) -> None:
        bad = self._bad
        error = self._error(bad[0][0], f"commit-log bytes unreadable: {bad[0][1]}", bad[-1][0])
        bad.clear()
        self._report(batch, error)

    def _decode(self, view: memoryview, run: list[_Wanted], batch: Batch) -> None:
        if self._bad:
            self._flush_bad(batch)
        at = 0
        topic, queue_id = self.topic, self.queue_id
        for item in run:
            size = item.unit.size
            try:
                message = decode_record(view[at : at + size], topic, queue_id, self.codec)
            except RecordError as exc:
                self._report(batch, self._error(
                    item.offset, f"record at commit-log byte {item.unit.position}: {exc}"))
            else:
                problem = record_problem(message, item.offset, item.unit)
                if problem is not None:
                    self._report(batch, self._error(item.offset, problem))
                else:
                    batch.messages.append(message)
            at += size


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
                       ) -> AsyncIterator[Batch]:
    """Strictly scan offsets ``[first, end)`` of the planned segments, on ``on``
    (a store and a reader) or on a store and fetcher of its own (a Spark task).
    A plan that reaches an open segment reads its pieces in the broker's log
    too: ``log_pieces``, taken when the plan was made (None: loaded here),
    before any segment is listed."""
    if on is None:
        async with open_reading(config) as opened:
            async for batch in scan_planned(config, topic, queue_id, cq_segments=cq_segments,
                                            cl_segments=cl_segments, first=first, end=end,
                                            log_pieces=log_pieces, wants=wants, on=opened):
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
    scan = QueueScan(topic, queue_id, cl=cl, cq=cq, first=first, end=end, wants=wants,
                     codec=RecordCodec.from_config(config, strict=False))
    async for batch in scan.batches():
        yield batch
