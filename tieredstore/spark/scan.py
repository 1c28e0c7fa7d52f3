"""Read one slice of a queue on an executor: units, then the records they point to.

A slice's consume-queue (CQ) units are read a block at a time; each unit's
CRC32C is checked, the selection drops unwanted offsets and times before any
commit-log (CL) byte is read, and the wanted records are read in runs of
neighbouring records (one read, parallel GETs of whole units, each unit's
CRC32C checked), then decoded, each record's own CRC32C checked and its
offset compared with the one its unit stands for.

Failures are :class:`ScanError` naming topic, queue and offset. In strict
mode (a Spark read) the first one ends the scan; otherwise (``verify``) it is
reported and the scan goes on with the next records, so that one report
names every damaged offset.

Each executor task builds its own ObjectStore and event loop
(:func:`tieredstore.sync.iterate`): nothing live is carried from the driver, and a
forked Python worker never reuses a parent's client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.fetcher import Fetcher
from tieredstore.log import LogSnapshot
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import FileType
from tieredstore.sizes import MiB
from tieredstore.spark.plan import NO_END, SegmentSlice, planned_log
from tieredstore.spark.selection import Selection
from tieredstore.store.checks import record_problem, unit_order_problem
from tieredstore.store.codec import RecordCodec
from tieredstore.store.compose import fetcher_options, open_object_store
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


class ScanError(TieredStoreError):
    """A slice's data is damaged or inconsistent; the message names where."""

    def __init__(self, topic: str, queue_id: int, offset: int, message: str,
                 last_offset: int | None = None) -> None:
        span = f"offset {offset}" if last_offset in (None, offset) \
            else f"offsets {offset}..{last_offset}"
        super().__init__(f"{topic}/{queue_id} {span}: {message}")
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


def fetcher_for(store: ObjectStore, config: TieredStoreConfig) -> Fetcher:
    """A fetcher sized for one task's sequential read: read-ahead, no disk tier."""
    window = (config.readahead_chunk_max + 4) * config.chunk_size
    memory = max(0, min(config.memory_cache_bytes, max(32 * MiB, window)))
    return Fetcher(store, dataclasses.replace(fetcher_options(config), memory_bytes=memory))


@asynccontextmanager
async def opened(config: TieredStoreConfig) -> AsyncIterator[tuple[ObjectStore, Fetcher]]:
    """This task's own store and fetcher, closed at the end."""
    store = open_object_store(config)
    fetcher = fetcher_for(store, config)
    try:
        yield store, fetcher
    finally:
        try:
            await fetcher.close()
        finally:
            await store.close()


class SliceScanner:
    """Reads one :class:`SegmentSlice`."""

    def __init__(self, store: ObjectStore, fetcher: Fetcher, config: TieredStoreConfig,
                 part: SegmentSlice, selection: Selection | None = None, *,
                 strict: bool = True) -> None:
        self.store = store
        self.fetcher = fetcher
        self.config = config
        self.part = part
        self.selection = selection or Selection()
        self.strict = strict
        self.codec = RecordCodec.from_config(config, strict=False)
        self.commit_log = self._flat(FileType.COMMIT_LOG, part.cl_segments)
        self.consume_queue = self._flat(FileType.CONSUME_QUEUE, ((part.cq_base, part.cq_size),))
        self.last_read = -1  # the last offset whose unit was read (wanted or not)

    def _flat(self, file_type: FileType, segments: tuple[tuple[int, int | None], ...]
              ) -> FlatView:
        """The store's read-only view of a flat file, over the segments planned."""
        return FlatView(self.store, self.config, PlannedSegments(segments),
                        topic=self.part.topic, queue_id=self.part.queue_id,
                        file_type=file_type, reader=self.fetcher)

    def _error(self, offset: int, message: str, last: int | None = None) -> ScanError:
        return ScanError(self.part.topic, self.part.queue_id, offset, message, last)

    async def _report(self, batch: Batch, error: ScanError) -> None:
        if self.strict:
            raise error
        batch.errors.append(error)

    async def _load_log(self) -> None:
        """A slice that reads an open segment reads its pieces in the broker's log
        too (write mode log): the log is listed before any segment."""
        if not self.part.reaches_open:
            return
        source = (self.store, log_path(self.config))
        if self.part.log_pieces is not None:  # loaded once by the planner
            log = LogSnapshot(planned_log(self.part), source=source)
        else:
            log = await LogSnapshot.load(*source)
        self.commit_log.log = self.consume_queue.log = log

    async def batches(self) -> AsyncIterator[Batch]:
        part = self.part
        try:
            await self._load_log()
            cq = await self.consume_queue.locate(part.cq_base)
        except TieredStoreError as exc:
            raise self._error(part.first_offset, f"consume queue: {exc}") from exc
        if cq.state is None:
            raise self._error(part.first_offset, f"consume-queue segment {cq.path}: "
                              f"{cq.error}")
        units_end = cq.end // UNIT_SIZE
        end = min(part.last_offset + 1 if part.last_offset != NO_END else units_end,
                  units_end)
        offset = max(part.first_offset, part.base_offset)
        while offset < end:
            stop = min(end, offset + UNITS_PER_BLOCK)
            batch = Batch()
            units = await self._units(offset, stop, batch)
            batch.units = stop - offset
            wanted = [w for w in units if self.selection.wants(w.offset, w.unit.store_timestamp)]
            await self._records(wanted, batch)
            self.last_read = stop - 1
            yield batch
            offset = stop

    async def _units(self, start: int, stop: int, batch: Batch) -> list[_Wanted]:
        if start >= stop:
            return []
        base = self.part.base_offset
        try:
            data = await self.consume_queue.read(start * UNIT_SIZE, (stop - start) * UNIT_SIZE)
        except TieredStoreError as exc:
            # Only the units of the damaged range are lost: read around it.
            span = getattr(exc, "span", None)
            bad_start, bad_stop = start, stop
            if span is not None:
                bad_start = max(start, base + span[0] // UNIT_SIZE)
                bad_stop = min(stop, base - (-span[1] // UNIT_SIZE))
            if bad_start >= bad_stop:
                bad_start, bad_stop = start, stop
            before = await self._units(start, bad_start, batch) if bad_start > start else []
            await self._report(batch, self._error(
                bad_start, f"consume queue unreadable: {exc}", bad_stop - 1))
            after = await self._units(bad_stop, stop, batch) if bad_stop < stop else []
            return before + after
        out: list[_Wanted] = []
        previous_end: int | None = None
        for i in range(stop - start):
            try:
                unit = decode_unit(data, i * UNIT_SIZE)
            except RecordError as exc:
                await self._report(batch, self._error(start + i, f"consume-queue unit: {exc}"))
                continue
            order = unit_order_problem(unit, previous_end)
            if order is not None:
                await self._report(batch, self._error(start + i, order))
                continue
            previous_end = unit.end
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
                await self._report(batch, self._error(
                    first.offset, f"its record [{first.unit.position}, {first.unit.end}) runs "
                    f"past the end of commit-log segment {located.path} at {seg_end}"))
                i += 1
                continue
            try:
                data = await self.commit_log.read(first.unit.position, size)
            except TieredStoreError:
                await self._one_by_one(run, batch)
            else:
                await self._decode(memoryview(data), run, batch)
            i = j + 1

    async def _locate(self, item: _Wanted, batch: Batch) -> SegmentView | None:
        try:
            return await self.commit_log.locate(item.unit.position, item.unit.size)
        except TieredStoreError as exc:
            await self._report(batch, self._error(item.offset, f"commit log: {exc}"))
            return None

    async def _one_by_one(self, run: list[_Wanted], batch: Batch) -> None:
        """A run failed: read its records one at a time to name the damaged ones."""
        bad: list[tuple[int, str]] = []
        for item in run:
            try:
                data = await self.commit_log.read(item.unit.position, item.unit.size)
            except TieredStoreError as exc:
                bad.append((item.offset, str(exc)))
                continue
            if bad:
                await self._flush_bad(bad, batch)
            await self._decode(memoryview(data), [item], batch)
        if bad:
            await self._flush_bad(bad, batch)

    async def _flush_bad(self, bad: list[tuple[int, str]], batch: Batch) -> None:
        error = self._error(bad[0][0], f"commit-log bytes unreadable: {bad[0][1]}", bad[-1][0])
        bad.clear()
        await self._report(batch, error)

    async def _decode(self, view: memoryview, run: list[_Wanted], batch: Batch) -> None:
        at = 0
        topic, queue_id = self.part.topic, self.part.queue_id
        for item in run:
            size = item.unit.size
            try:
                message = decode_record(view[at : at + size], topic, queue_id, self.codec)
            except RecordError as exc:
                await self._report(batch, self._error(
                    item.offset, f"record at commit-log byte {item.unit.position}: {exc}"))
            else:
                problem = record_problem(message, item.offset, item.unit)
                if problem is not None:
                    await self._report(batch, self._error(item.offset, problem))
                else:
                    batch.messages.append(message)
            at += size


async def scan_slice(config: TieredStoreConfig, part: SegmentSlice, selection: Selection,
                     ) -> AsyncIterator[Batch]:
    """Strictly read one slice with a store of its own."""
    async with opened(config) as (store, fetcher):
        async for batch in SliceScanner(store, fetcher, config, part, selection).batches():
            yield batch
