"""The one scan of a queue: units first, then the records they point to.

Every reader of a queue's messages uses it, so a change to how a queue is
read is made here: the store's ``get``, ``get_by_tags`` and unit look-ups
(:class:`~tieredstore.store.read.reading.QueueReading`, the writer's and the
read-only store's), Spark's read (one planned slice per task) and
:func:`tieredstore.store.verify_queue` (a whole queue). Consume-queue (CQ)
units are read a block at a time, each unit's CRC32C checked and each
checked to point at or after the end of the record before
(:func:`~tieredstore.store.read.checks.unit_order_problem`); a damaged range of
units is read around (or rebuilt from the commit log). The wanted records
are then read in runs of neighbouring records (one read up to the end of the
reader's unit, parallel GETs of whole units, each unit fetched once and its
CRC32C checked), decoded, each record's CRC32C checked and compared with its
unit (:func:`~tieredstore.store.read.checks.record_problem`). A run that cannot
be read is read one record at a time to name the damaged ones, except the
records of the range a failed read names (its error's ``span``: a unit that
failed its check, after the read again of ``fetch_unit``, or a missing
chunk): those are reported unreadable without another read, for the rest of
the scan. So a damaged unit costs one checked read per scan (a GET and at
most its reads again), and one warning of each, whatever its number of
records.

What a scan reads is a :class:`ScanSpec`, made by the named constructor of
its use, its :class:`ScanMode` one of the few ways a queue is read. Problems
are :class:`ScanError` naming topic, queue and offset(s). A strict mode (a
read) raises the first, after the messages before it (:meth:`QueueScan.read`
returns those); otherwise (a verify) each is reported in its :class:`Batch`
and the scan goes on, so that one report names every damaged offset.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import add, itemgetter, le
from typing import Any

from tieredstore.errors import TieredStoreError
from tieredstore.errors import is_damage as damaged
from tieredstore.segment.reader import ReadMode
from tieredstore.sizes import MiB
from tieredstore.store.base.errors import OffsetOutOfRange, QueueCorrupt
from tieredstore.store.formats.record import (
    UNIT_SIZE,
    CqUnit,
    Message,
    RecordError,
    RecordOpener,
    decode_plain_run,
    decode_record,
    decode_unit,
    decode_units,
    tags_hash,
)
from tieredstore.store.read.arrays import UnitBlock, decode_unit_block
from tieredstore.store.read.checks import Scanned, record_problem, scan_records, unit_order_problem
from tieredstore.store.read.columns import Columns
from tieredstore.store.read.flatreader import FlatReader

UNITS_PER_BLOCK = 4096  # 128 KiB of consume queue per read
RUN_BYTES = 8 * MiB  # commit-log bytes per read
REBUILT_UNITS_KEPT = 1 << 20  # units rebuilt from the commit log, kept per queue
_POSITION, _SIZE = itemgetter(0), itemgetter(1)  # a unit's position and size

log = logging.getLogger(__name__)



class ScanError(QueueCorrupt):
    """A queue's data is damaged or inconsistent; the message names where."""

    def __init__(self, topic: str, queue_id: int, offset: int, message: str,
                 last_offset: int | None = None, *, segment: str = "") -> None:
        span = f"offset {offset}" if last_offset is None or last_offset == offset \
            else f"offsets [{offset}, {last_offset + 1})"
        self.text = f"{span}: {message}"  # without the queue's name
        super().__init__(self.text, topic=topic, queue_id=queue_id)
        self.offset = offset
        self.last_offset = offset if last_offset is None else last_offset
        self.problem = message  # without the offsets
        self.segment = segment  # the segment whose bytes are wrong, when the scan knows it


def is_damage(failure: BaseException | None) -> bool:
    """Whether a problem a scan met is damage in the bucket: a check the scan
    made failed (None), or a read found the bytes damaged or gone
    (:func:`tieredstore.errors.is_damage`)."""
    return failure is None or damaged(failure)


def as_raised(error: ScanError) -> TieredStoreError:
    """A strict read's problem as its caller sees it: where a read failed, that
    read's own error (an ``IntegrityError`` naming the range; a transient error
    stays transient, so a queue is not taken for corrupt over an outage), else
    the ``ScanError`` itself."""
    return error.__cause__ if isinstance(error.__cause__, TieredStoreError) else error


@dataclass(slots=True)
class Batch:
    """Messages read in order, and (outside a strict mode) what could not be read.
    A ``COLUMNS`` scan puts its messages in ``columns`` instead (and leaves
    ``messages`` empty)."""

    messages: list[Message] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    columns: Columns | None = None


def record_unit(data: bytes | memoryview, position: int, offset: int, *, topic: str,
                queue_id: int, codec: RecordOpener | None) -> tuple[CqUnit, Message]:
    """The consume-queue unit of the record ``data`` at commit-log byte
    ``position``, which must hold offset ``offset`` (its CRC checked), and the
    message it holds (one decode)."""
    try:
        message = decode_record(data, topic, queue_id, codec)
    except RecordError as exc:
        raise QueueCorrupt(f"commit log byte {position}: {exc}", topic=topic,
                           queue_id=queue_id) from None
    if message.offset != offset:
        raise QueueCorrupt(f"commit log byte {position} holds offset {message.offset}, "
                           f"expected {offset}", topic=topic, queue_id=queue_id)
    return (CqUnit(position, len(data), tags_hash(message.tags), message.store_timestamp),
            message)


class ScanMode(enum.Enum):
    """What a scan reads and how it meets a problem: one member per use, so that
    no scan mixes what none wants (units in columns, a verify that raises)."""

    UNITS = "units"  # the units only, each checked; no record read
    GET = "get"  # messages; a unit that follows on from the one before left to its
    # record's check (``decode_units``' chained; no ``dead_bytes``): get's hot path
    AROUND = "around"  # GET's reads, each problem reported (get_around_damage)
    TAGS = "tags"  # messages with the spec's tags, records read alone (ReadMode.SPAN)
    CHECK = "check"  # messages, every unit checked, each problem reported (verify)
    COLUMNS = "columns"  # CHECK's checks, strict, in Columns, no Message per row (Spark)

    @property
    def strict(self) -> bool:
        """Whether the first problem is raised (after the messages before it),
        not reported in its batch."""
        return self is not ScanMode.AROUND and self is not ScanMode.CHECK

    @property
    def chained(self) -> bool:
        return self is ScanMode.GET or self is ScanMode.AROUND

    @property
    def reads(self) -> ReadMode:
        """How its records' bytes are read."""
        return ReadMode.SPAN if self is ScanMode.TAGS else ReadMode.VIEW


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """What a scan reads: offsets ``[first, end)`` of one queue (``end`` None: to
    the end of the consume queue, the open segment's units its last), as
    ``mode`` says, records opened with ``codec``. ``wants(offset,
    store_timestamp)`` drops units before their record is read; ``tags``: a
    ``TAGS`` scan's. The scan stops once it returned ``max_count`` messages,
    or before a record that would take it past ``max_bytes`` (but returns one
    at least). Made by the named constructor of its use."""

    topic: str
    queue_id: int
    mode: ScanMode
    first: int
    end: int | None
    codec: RecordOpener | None = None
    wants: Callable[[int, int], bool] | None = None
    tags: frozenset[str] | None = None
    max_count: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.tags is None) == (self.mode is ScanMode.TAGS):
            raise ValueError(f"a {self.mode.value} scan takes tags: {self.tags}")

    @classmethod
    def for_units(cls, topic: str, queue_id: int, first: int, end: int, *,
                  codec: RecordOpener | None) -> ScanSpec:
        """Unit look-ups: ``QueueReading.units`` (``offset_for_time``), a view's
        last unit, the unit before a range rebuilt."""
        return cls(topic, queue_id, ScanMode.UNITS, first, end, codec)

    @classmethod
    def for_get(cls, topic: str, queue_id: int, first: int, end: int, *,
                codec: RecordOpener | None, max_bytes: int) -> ScanSpec:
        """``QueueReading.get``."""
        return cls(topic, queue_id, ScanMode.GET, first, end, codec, max_bytes=max_bytes)

    @classmethod
    def for_around(cls, topic: str, queue_id: int, first: int, end: int, *,
                   codec: RecordOpener | None, max_bytes: int) -> ScanSpec:
        """``QueueReading.get_around_damage``."""
        return cls(topic, queue_id, ScanMode.AROUND, first, end, codec, max_bytes=max_bytes)

    @classmethod
    def for_tags(cls, topic: str, queue_id: int, first: int, end: int, *,
                 codec: RecordOpener | None, tags: frozenset[str], max_count: int,
                 max_bytes: int) -> ScanSpec:
        """``QueueReading.get_by_tags``."""
        return cls(topic, queue_id, ScanMode.TAGS, first, end, codec, tags=tags,
                   max_count=max_count, max_bytes=max_bytes)

    @classmethod
    def for_check(cls, topic: str, queue_id: int, first: int, end: int, *,
                  codec: RecordOpener | None) -> ScanSpec:
        """:func:`~tieredstore.store.ops.verify.verify_queue`."""
        return cls(topic, queue_id, ScanMode.CHECK, first, end, codec)

    @classmethod
    def for_slice(cls, topic: str, queue_id: int, first: int, end: int | None, *,
                  codec: RecordOpener | None, wants: Callable[[int, int], bool] | None
                  ) -> ScanSpec:
        """A Spark task's planned slice
        (:func:`~tieredstore.store.read.queue_view.scan_planned`)."""
        return cls(topic, queue_id, ScanMode.COLUMNS, first, end, codec, wants=wants)


class QueueScan:
    """The scan ``spec`` says, over the queue's commit log ``cl`` and consume
    queue ``cq`` (a writer's flat files or views). ``unstored(start, end)``:
    units past the consume queue's end that a writer holds in memory.
    ``rebuilt``: a damaged consume-queue range is no problem but rebuilt from
    the commit log, its units kept there (:meth:`_rebuild`).

    After (or during) the scan: ``dead_bytes`` counts commit-log bytes between
    records, ``record_end`` is where the last good unit's record ends (None
    after damage: unknown), ``last_read`` the last offset whose unit was read,
    ``next_offset`` where a scan going on from this one starts.
    """

    def __init__(self, spec: ScanSpec, *, cl: FlatReader[Any], cq: FlatReader[Any],
                 unstored: Callable[[int, int], list[CqUnit]] | None = None,
                 rebuilt: dict[int, CqUnit] | None = None) -> None:
        self.spec = spec
        self.mode = spec.mode
        self.commit_log = cl
        self.consume_queue = cq
        self.unstored = unstored
        self.rebuilt = rebuilt
        self._hashes = None if spec.tags is None else frozenset(map(tags_hash, spec.tags))
        self.last_read = spec.first - 1
        self.next_offset = spec.first
        self.record_end: int | None = None
        self.dead_bytes = 0
        self._count = 0  # messages returned
        self._total = 0  # their bytes
        self._stopped = False  # enough read
        self._stop: ScanError | None = None  # a unit problem, raised after the records before
        self._bad: list[tuple[int, TieredStoreError]] = []  # unreadable records not yet reported
        # The commit-log bytes [start, end) the last failed read named, and its error.
        self._damaged: tuple[int, int, TieredStoreError] | None = None
        self._batch = self._new_batch()  # the batch being read
        # The units of a UNITS scan, for units().
        self._found: list[CqUnit] | None = [] if spec.mode is ScanMode.UNITS else None

    def _new_batch(self) -> Batch:
        spec = self.spec
        return Batch(columns=Columns(spec.topic, spec.queue_id)
                     if spec.mode is ScanMode.COLUMNS else None)

    def _error(self, offset: int, message: str, last: int | None = None, *,
               cause: TieredStoreError | None = None, segment: Any = None) -> ScanError:
        """A problem at ``offset``; ``cause``: the read that failed, which a strict
        read raises as it is (:func:`as_raised`)."""
        error = ScanError(self.spec.topic, self.spec.queue_id, offset, message, last,
                          segment="" if segment is None else str(segment.path))
        error.__cause__ = cause
        return error

    def _report(self, batch: Batch, error: ScanError) -> None:
        if self._bad:  # the unreadable records before it first, in offset order
            self._flush_bad(batch)
        if self.mode.strict:
            raise error
        batch.errors.append(error)

    def _unit_problem(self, batch: Batch, error: ScanError) -> bool:
        """A unit that cannot be read: True if the units after it are not wanted
        (strict: the records before it are read first, then it is raised)."""
        if self.mode.strict:
            self._stop = self._stop or error
            return True
        self._report(batch, error)
        return False

    async def batches(self) -> AsyncIterator[Batch]:
        """A batch per block of units, in offset order. A consume-queue segment
        that cannot be opened raises (strict) or is reported whole."""
        async for batch in self._blocks():
            yield batch
        if self._bad:
            self._batch = self._new_batch()
            self._flush_bad(self._batch)
            yield self._batch

    @property
    def current(self) -> Batch:
        """The batch being read (a scan that raised: what it read of it)."""
        return self._batch

    async def read(self) -> list[Message]:
        """The messages of a strict scan up to its first problem, which is raised
        if no message comes before it (the next read from there names it): bytes
        that cannot be read raise the read's own error (an ``IntegrityError``
        naming the range, as ``get`` always did), other damage a ``ScanError``."""
        out: list[Message] = []
        try:
            async for batch in self.batches():
                out.extend(batch.messages)
        except ScanError as exc:
            out.extend(self._batch.messages)
            if not out:
                raise as_raised(exc) from None
            self.next_offset = exc.offset
        return out

    async def units(self) -> list[CqUnit]:
        """The units of a ``UNITS`` scan, its first problem raised as :meth:`read`
        raises it."""
        found = self._found
        assert found is not None, f"units() of a {self.mode.value} scan"
        try:
            async for _ in self.batches():
                pass
        except ScanError as exc:
            raise as_raised(exc) from None
        return found

    async def _locate_units(self, offset: int) -> tuple[Any, int]:
        try:
            return await self.consume_queue.segment_at(offset * UNIT_SIZE)
        except TieredStoreError as exc:
            raise self._error(offset, f"consume queue: {exc}") from exc

    async def _blocks(self) -> AsyncIterator[Batch]:
        offset, end = self.spec.first, self.spec.end
        cq = self.consume_queue
        while (end is None or offset < end) and not self._stopped:
            # A fresh batch first: one that fails from here holds none of the last
            # batch's messages (yielded already; ``read`` adds this one's).
            self._batch = batch = self._new_batch()
            try:
                segment, segment_end = await self._locate_units(offset)
            except ScanError as exc:  # a recorded segment that cannot be opened?
                extent = await self._recorded_units(offset) if is_damage(exc.__cause__) \
                    else None
                if extent is None:
                    raise
                stop = extent[1] if end is None else min(end, extent[1])
                async for batch in self._lost_units(offset, stop, extent[0], exc):
                    yield batch
                offset = stop
                continue
            stop = segment_end // UNIT_SIZE if end is None else min(end, segment_end // UNIT_SIZE)
            # The units listed in the open segment are the scan's last, even if a
            # writer seals it (and the read finds it merged and longer) meanwhile.
            last = cq.is_open(segment)
            problem = cq.problem(segment)
            if problem is not None:  # its units, as many as its record says, unreadable
                failure = cq.failure(segment)
                error = self._error(offset, f"consume-queue segment {segment.path}: {problem}",
                                    max(offset, stop - 1), segment=segment,
                                    cause=None if is_damage(failure) else failure)
                if stop <= offset:
                    self._report(batch, error)
                    self.record_end = None
                    yield batch
                    return
                async for batch in self._lost_units(offset, stop,
                                                    segment.path.base_offset // UNIT_SIZE, error):
                    yield batch
            elif stop > offset:
                async for batch in self._segment(offset, stop):
                    yield batch
            elif end is not None and self.unstored is not None:
                # Past the consume queue's end (no await since it was asked for it).
                units = self.unstored(offset, end)
                self._batch = self._new_batch()
                yield await self._block(range(offset, offset + len(units)), units,
                                        offset + len(units))
                return
            else:
                return
            offset = stop
            if last:
                return

    async def _recorded_units(self, offset: int) -> tuple[int, int] | None:
        """The offsets ``[first, end)`` of the recorded consume-queue segment that
        holds ``offset``, from its record alone; None if no record holds it."""
        try:
            extent = await self.consume_queue.recorded_extent(offset * UNIT_SIZE)
        except TieredStoreError:
            return None
        return None if extent is None else (extent[0] // UNIT_SIZE, extent[1] // UNIT_SIZE)

    async def _lost_units(self, offset: int, stop: int, first: int, error: ScanError
                          ) -> AsyncIterator[Batch]:
        """Offsets ``[offset, stop)`` of a consume-queue segment (its first offset
        ``first``) whose units cannot be read at all (``error``): rebuilt from the
        commit log when the error is damage (:meth:`_rebuild`, from the segment's
        first unit on, a block at a time), else ``error`` reported for them."""
        rebuilding = self.rebuilt is not None and is_damage(error.__cause__)
        while rebuilding and offset < stop and not self._stopped:
            block = min(stop, offset + UNITS_PER_BLOCK)
            self._batch = self._new_batch()
            try:
                units = (await self._rebuild(first, block, error))[offset - first:]
            except TieredStoreError as failed:
                if not is_damage(failed):  # the records may read later: no verdict
                    raise self._error(offset, f"commit log: {failed}", cause=failed) from failed
                break
            if units:
                self.record_end = units[-1].end
                yield await self._block(range(offset, offset + len(units)), units,
                                        offset + len(units))
                offset += len(units)
            if offset < block:  # a record that cannot be read ended the rebuild
                break
        if offset >= stop or self._stopped:
            return
        self._batch = batch = self._new_batch()
        if (error.offset, error.last_offset) != (offset, stop - 1):  # all of them lost
            whole = ScanError(self.spec.topic, self.spec.queue_id, offset, error.problem, stop - 1,
                              segment=error.segment)
            whole.__cause__, error = error.__cause__, whole
        self._report(batch, error)
        self.next_offset = max(self.next_offset, stop)
        self.record_end = None
        yield batch

    async def _segment(self, offset: int, end: int) -> AsyncIterator[Batch]:
        while offset < end and not self._stopped:
            stop = min(end, offset + UNITS_PER_BLOCK)
            self._batch = self._new_batch()
            offsets, units = await self._units(offset, stop, self._batch)
            yield await self._block(offsets, units, stop)
            offset = stop

    async def _block(self, offsets: Sequence[int], units: Sequence[CqUnit], stop: int) -> Batch:
        """The records of a block's units (those wanted) that end at offset ``stop``."""
        batch = self._batch
        if self._found is not None:  # units only
            self._found.extend(units)
            units = []
        elif self._hashes is not None or self.spec.wants is not None:
            hashes, wants = self._hashes, self.spec.wants
            keep = [k for k, u in enumerate(units)
                    if (u.tags_hash in hashes if hashes is not None else
                        wants is not None and wants(offsets[k], u.store_timestamp))]
            offsets = [offsets[k] for k in keep]
            units = units.take(keep) if isinstance(units, UnitBlock) else [units[k] for k in keep]
        self.last_read = stop - 1
        if await self._records(offsets, units, batch):
            self.next_offset = stop
        else:
            self._stopped = True
        if self._stop is not None:
            error, self._stop = self._stop, None
            self._report(batch, error)
        return batch

    async def _units(self, start: int, stop: int, batch: Batch
                     ) -> tuple[Sequence[int], Sequence[CqUnit]]:
        """The offsets and units of ``[start, stop)`` (in one consume-queue segment)
        that can be read; in strict mode those before the first problem only (kept
        in ``_stop``)."""
        if start >= stop:
            return [], []
        try:
            data = await self.consume_queue.read(start * UNIT_SIZE, (stop - start) * UNIT_SIZE)
        except TieredStoreError as exc:
            return await self._around(start, stop, exc, batch)
        if self.mode is ScanMode.COLUMNS:
            return self._unit_block(data, start, stop, batch)
        chained = self.mode.chained
        try:
            units = decode_units(data, chained=chained, previous_end=self.record_end)
        except RecordError:
            return self._each_unit(data, start, batch)
        if chained:  # each record, read at its unit, confirms it (get's hot path)
            self.record_end = units[-1].end
            return range(start, stop), units
        # Each unit at or after the end of the one before (with C iterators).
        starts = list(map(_POSITION, units))
        ends = list(map(add, starts, map(_SIZE, units)))
        previous = starts[0] if self.record_end is None else self.record_end
        if starts[0] < previous or not all(map(le, ends, islice(starts, 1, None))):
            return self._each_unit(data, start, batch)
        self.dead_bytes += ends[-1] - previous - sum(map(_SIZE, units))
        self.record_end = ends[-1]
        return range(start, stop), units

    def _unit_block(self, data: bytes | memoryview, start: int, stop: int, batch: Batch
                    ) -> tuple[Sequence[int], Sequence[CqUnit]]:
        """:meth:`_units` for a scan in columns: the same checks over arrays."""
        try:
            units = decode_unit_block(data)
        except RecordError:
            return self._each_unit(data, start, batch)
        starts, sizes = units.position, units.size
        ends = starts + sizes
        previous = int(starts[0]) if self.record_end is None else self.record_end
        if starts[0] < previous or not (ends[:-1] <= starts[1:]).all():
            return self._each_unit(data, start, batch)
        self.dead_bytes += int(ends[-1]) - previous - int(sizes.sum())
        self.record_end = int(ends[-1])
        return range(start, stop), units

    def _each_unit(self, data: bytes | memoryview, start: int, batch: Batch
                   ) -> tuple[list[int], list[CqUnit]]:
        """:meth:`_units` one unit at a time, each one's CRC checked, naming the bad."""
        offsets: list[int] = []
        out: list[CqUnit] = []
        for i in range(len(data) // UNIT_SIZE):
            try:
                unit = decode_unit(data, i * UNIT_SIZE)
            except RecordError as exc:
                problem = f"consume-queue unit: {exc}"
                self.record_end = None
            else:
                order = unit_order_problem(unit, self.record_end)
                if order is None:
                    if self.record_end is not None:
                        self.dead_bytes += unit.position - self.record_end
                    self.record_end = unit.end
                    offsets.append(start + i)
                    out.append(unit)
                    continue
                problem = order
            if self._unit_problem(batch, self._error(start + i, problem)):
                break
        return offsets, out

    async def _around(self, start: int, stop: int, exc: TieredStoreError, batch: Batch
                      ) -> tuple[Sequence[int], Sequence[CqUnit]]:
        """Units of ``[start, stop)`` whose read failed with ``exc``: only those of
        its damaged span are lost (or rebuilt, see :meth:`_rebuild`); the others
        are read around it."""
        span = getattr(exc, "span", None)
        bad_start, bad_stop = span_start, _ = start, stop
        if span is not None:
            base = (await self._locate_units(start))[0].path.base_offset
            span_start = (base + span[0]) // UNIT_SIZE
            bad_start = max(start, span_start)
            bad_stop = min(stop, -(-(base + span[1]) // UNIT_SIZE))
        if bad_start >= bad_stop:
            bad_start, bad_stop, span = start, stop, None
        offsets, units = await self._units(start, bad_start, batch)
        if self._stop is not None:
            return offsets, units
        rebuilt: list[CqUnit] = []
        if span is not None and self.rebuilt is not None:
            try:  # the whole span from its start: its first unit follows the one before
                rebuilt = (await self._rebuild(span_start, bad_stop, exc))[bad_start - span_start:]
            except TieredStoreError as failed:
                if not is_damage(failed):  # the records may read later: no verdict
                    raise self._error(bad_start, f"commit log: {failed}", cause=failed) from failed
                rebuilt = []
        if rebuilt:
            self.record_end = rebuilt[-1].end
        lost = bad_start + len(rebuilt)  # the units from here on are neither read nor rebuilt
        offsets, units = [*offsets, *range(bad_start, lost)], [*units, *rebuilt]
        if lost < bad_stop:
            if self._unit_problem(batch, self._error(
                    lost, f"consume-queue units unreadable: {exc}", bad_stop - 1, cause=exc)):
                return offsets, units
            self.record_end = None
        after_offsets, after = await self._units(bad_stop, stop, batch)
        return [*offsets, *after_offsets], [*units, *after]

    async def _rebuild(self, start: int, stop: int, exc: TieredStoreError) -> list[CqUnit]:
        """Units of ``[start, stop)`` rebuilt from the commit log: its records read
        one after the other from where the unit before ``start`` ends, each
        checked (CRC, topic, queue, offset). Kept, so one damaged range is
        scanned once. A record that cannot be read (damage) ends it: the units
        before it are returned, as where the next record starts is unknown."""
        kept = self.rebuilt
        assert kept is not None
        if all(o in kept for o in range(start, stop)):
            return [kept[o] for o in range(start, stop)]
        log.warning("%s/%d: consume-queue units of offsets [%d, %d) rebuilt from the commit "
                    "log: %s", self.spec.topic, self.spec.queue_id, start, stop, exc)
        if len(kept) > REBUILT_UNITS_KEPT:
            kept.clear()
        cl = self.commit_log
        if start == 0 or start in kept:
            position = 0
        else:
            spec = self.spec
            before = QueueScan(ScanSpec.for_units(spec.topic, spec.queue_id, start - 1, start,
                                                  codec=spec.codec),
                               cl=cl, cq=self.consume_queue, rebuilt=kept)
            try:
                position = (await before.units())[0].end
            except OffsetOutOfRange:  # trimmed: nothing says where the first record starts
                return []

        async def segment_end(at: int) -> int:
            return (await cl.segment_at(at))[1]

        out: list[CqUnit] = []
        for offset in range(start, stop):
            unit = kept.get(offset)
            if unit is None:
                try:
                    unit = await self._unit_of_record_at(segment_end, position, offset)
                except TieredStoreError as failed:
                    if not is_damage(failed):
                        raise
                    break
                kept[offset] = unit
            out.append(unit)
            position = unit.end
        return out

    async def _unit_of_record_at(self, segment_end: Callable[[int], Awaitable[int]],
                                 position: int, offset: int) -> CqUnit:
        """The unit of offset ``offset``'s record, which starts at ``position``."""
        topic, queue_id = self.spec.topic, self.spec.queue_id
        async for found in scan_records(self.commit_log.read, segment_end, position,
                                        position + 1):
            if isinstance(found, Scanned):
                return record_unit(found.data, position, offset, topic=topic,
                                   queue_id=queue_id, codec=self.spec.codec)[0]
            if found.problem:
                raise QueueCorrupt(found.problem, topic=topic, queue_id=queue_id)
        raise QueueCorrupt(f"no record at commit-log byte {position}", topic=topic,
                           queue_id=queue_id)

    def _over(self, size: int, out: list[Message] | Columns) -> bool:
        """Whether a record of ``size`` bytes is one too many."""
        max_bytes = self.spec.max_bytes
        return (max_bytes is not None and bool(self._count or out)
                and self._total + size > max_bytes)

    async def _records(self, offsets: Sequence[int], units: Sequence[CqUnit], batch: Batch) -> bool:
        """Read and check the records of ``units``, neighbours with one read; False
        once enough were read."""
        cl = self.commit_log
        reads = self.mode.reads
        max_bytes = self.spec.max_bytes
        budget = RUN_BYTES if max_bytes is None else max(1, min(RUN_BYTES, max_bytes - self._total))
        i, n = 0, len(units)
        while i < n:
            first = units[i]
            try:
                segment, segment_end = await cl.segment_at(first.position, first.size)
            except TieredStoreError as exc:
                self._report(batch, self._error(offsets[i], f"commit log: {exc}", cause=exc))
                i += 1
                continue
            if first.position + first.size > segment_end:
                self._report(batch, self._error(
                    offsets[i], f"its record [{first.position}, {first.end}) runs past the "
                    f"end of commit-log segment {segment.path} at {segment_end}",
                    segment=segment))
                i += 1
                continue
            # A run stops where a read would be joined (a copy): at the end of the
            # reader's unit, or of the segment. A record across two units is a run
            # of its own, joined alone.
            limit = segment_end if reads is ReadMode.SPAN else \
                cl.view_end(segment, segment_end, first.position)
            j, size = (units.run_end(i, limit, budget) if isinstance(units, UnitBlock)
                       else _run_end(units, i, limit, budget))
            data: bytes | memoryview | None = None
            if self._known_damage(first) is None:
                try:
                    data = await cl.read(first.position, size, mode=reads)
                except TieredStoreError as exc:
                    self._note_damage(segment, exc)
            if data is None:
                going = await self._one_by_one(offsets, units, start=i, stop=j + 1,
                                               segment=segment, batch=batch)
            else:
                going = self._decode(memoryview(data), offsets, units, start=i, stop=j + 1,
                                     batch=batch, segment=segment)
            if not going:
                return False
            i = j + 1
        return True

    def _note_damage(self, segment: Any, exc: TieredStoreError) -> None:
        """A read of commit-log ``segment`` failed with ``exc``: the range its error
        names (in the segment), if any, is not read again in this scan."""
        span = getattr(exc, "span", None)
        if span is not None and span[0] < span[1]:
            base = segment.path.base_offset
            self._damaged = (base + span[0], base + span[1], exc)

    def _known_damage(self, unit: CqUnit) -> TieredStoreError | None:
        """The error of a failed read whose range ``unit``'s record overlaps."""
        damaged = self._damaged
        if damaged is not None and unit.position < damaged[1] and unit.end > damaged[0]:
            return damaged[2]
        return None

    async def _one_by_one(self, offsets: Sequence[int], units: Sequence[CqUnit], *, start: int,
                          stop: int, segment: Any, batch: Batch) -> bool:
        """A run (in commit-log ``segment``) failed: read its records one
        at a time to name the damaged ones, but not those in a range a failed read
        named (:meth:`_known_damage`) (neighbours that fail for one reason, in
        this run or the next, as one problem; strict: raised before the next good
        record)."""
        bad = self._bad
        for k in range(start, stop):
            unit = units[k]
            exc = self._known_damage(unit)
            if exc is None:
                try:
                    data = await self.commit_log.read(unit.position, unit.size,
                                                      mode=self.mode.reads)
                except TieredStoreError as failed:
                    exc = failed
                    self._note_damage(segment, failed)
            if exc is not None:
                if bad and (str(bad[-1][1]) != str(exc) or bad[-1][0] + 1 != offsets[k]):
                    self._flush_bad(batch)
                bad.append((offsets[k], exc))
                continue
            if not self._decode(memoryview(data), offsets, units, start=k, stop=k + 1,
                                batch=batch, segment=segment):
                return False
        if self.mode.strict and bad:
            self._flush_bad(batch)
        return True

    def _flush_bad(self, batch: Batch) -> None:
        bad = self._bad
        error = self._error(bad[0][0], f"commit-log bytes unreadable: {bad[0][1]}", bad[-1][0],
                            cause=bad[0][1])
        bad.clear()
        self._report(batch, error)

    def _decode(self, view: memoryview, offsets: Sequence[int], units: Sequence[CqUnit], *,
                start: int, stop: int, batch: Batch, segment: Any) -> bool:
        """Decode and check the records of ``units[start:stop]``, read as one run
        into ``view`` (of commit-log ``segment``); False once enough were read."""
        if self._bad:
            self._flush_bad(batch)
        out: list[Message] | Columns = batch.messages if batch.columns is None else batch.columns
        spec = self.spec
        topic, queue_id, tags, max_count = spec.topic, spec.queue_id, spec.tags, spec.max_count
        limit = spec.max_bytes if spec.max_bytes is not None else sys.maxsize
        at = 0
        k = start
        while k < stop:
            unit = units[k]
            if self._over(unit.size, out):
                self.next_offset = offsets[k]
                return False
            if tags is None:  # the common records: without a walk in Python
                count = len(out)
                if isinstance(out, Columns):
                    k, used, self._total = out.add_plain_run(
                        view[at:], units, k, stop, first_offset=offsets[k] - k,
                        total=self._total, max_bytes=limit)
                else:
                    k, used, self._total = decode_plain_run(
                        view[at:], units, k, stop, first_offset=offsets[k] - k, topic=topic,
                        queue_id=queue_id, out=out, total=self._total, max_bytes=limit)
                at += used
                if k == stop:
                    self._count += len(out) - count
                    break
                self._count += len(out) - count
                unit = units[k]
                if self._over(unit.size, out):
                    self.next_offset = offsets[k]
                    return False
            # Not a plain record that agrees with its unit: decode it in full,
            # which names what is wrong if anything is.
            size = unit.size
            try:
                message = decode_record(view[at : at + size], topic, queue_id, spec.codec)
            except RecordError as exc:
                problem: str | None = f"record at commit-log byte {unit.position}: {exc}"
            else:
                problem = record_problem(message, offsets[k], unit)
            if problem is not None:
                self._report(batch, self._error(offsets[k], problem, segment=segment))
            elif tags is None or message.tags in tags:
                out.append(message)
                self._count += 1
                self._total += size
                if max_count is not None and self._count >= max_count:
                    self.next_offset = offsets[k] + 1
                    return False
            at += size
            k += 1
        return True


def _run_end(units: Sequence[CqUnit], i: int, limit: int, budget: int) -> tuple[int, int]:
    """The last index of the run of records from ``units[i]`` (see
    :meth:`UnitBlock.run_end <tieredstore.store.read.arrays.UnitBlock.run_end>`) and its bytes."""
    first, last, n = units[i], units[-1], len(units)
    whole = last.position + last.size - first.position
    if (i + 1 < n and last.position + last.size <= limit and whole <= budget
            and sum(map(_SIZE, units[i:])) == whole):
        return n - 1, whole  # the rest, back to back, within bounds: one run
    j, size = i, first.size
    while j + 1 < n and size < budget:
        position, length, _, _ = units[j + 1]
        if position != first.position + size or position + length > limit:
            break
        j += 1
        size += length
    return j, size
