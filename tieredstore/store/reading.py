"""Reading a queue: ``get`` and ``offset_for_time`` over consume-queue units.

One implementation for every reader of a queue: the store's own
(:class:`tieredstore.store.queue.OwnedQueue`, which also sees what is still
buffered) and the read-only views of the CLI, which see only what is durable
in the bucket. Both read their flat files through
:class:`~tieredstore.store.flatreader.FlatReader`; subclasses say which
offsets they hold and where their units come from.
"""

from __future__ import annotations

import abc
import functools
import logging
from collections.abc import Collection
from operator import itemgetter
from typing import Any

from tieredstore.errors import CorruptSegment, IntegrityError, TieredStoreError
from tieredstore.metadata import FileType, QueueMetadata
from tieredstore.store.bykey import KeyQuery, query
from tieredstore.store.checks import ScanStop, record_problem, scan_records
from tieredstore.store.errors import OffsetOutOfRange, QueueCorrupt
from tieredstore.store.flatreader import FlatReader
from tieredstore.store.keyentries import KeyEntry
from tieredstore.store.record import (
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
from tieredstore.store.tagged import MAX_SCAN, Tagged, get_by_tags

_SIZE = itemgetter(1)  # a unit's size

log = logging.getLogger(__name__)

REBUILT_UNITS_KEPT = 1 << 20  # units rebuilt from the commit log, kept per queue


class QueueReading(abc.ABC):
    """``get`` and ``offset_for_time`` of one queue, over its flat files."""

    topic: str
    queue_id: int
    meta: QueueMetadata
    cl: FlatReader[Any]  # the commit log
    cq: FlatReader[Any]  # the consume queue
    codec: RecordOpener | None = None  # opens compressed or encrypted records

    @functools.cached_property
    def _rebuilt(self) -> dict[int, CqUnit]:
        """Consume-queue units rebuilt from the commit log, by offset."""
        return {}

    @property
    def min_offset(self) -> int:
        """The first offset still stored."""
        return self.cq.first // UNIT_SIZE

    @property
    @abc.abstractmethod
    def max_offset(self) -> int:
        """One past the last offset this reader sees."""

    @property
    def tail_offset(self) -> int:
        """The first offset of the consume queue's segment not yet recorded."""
        return self.cq.next_base // UNIT_SIZE

    @abc.abstractmethod
    async def units(self, start: int, end: int, *, chained: bool = False) -> list[CqUnit]:
        """Consume-queue units of offsets ``[start, end)`` (``chained``: for a
        caller that checks each against its record, see :func:`decode_units`)."""

    async def consume_queue_segment(self, position: int) -> tuple[int, int]:
        """Where the consume-queue segment holding ``position`` starts and ends."""
        segment, end = await self.cq.segment_at(position)
        return segment.path.base_offset, end

    async def read_consume_queue(self, position: int, length: int) -> bytes | memoryview:
        """Consume-queue bytes, within one segment, every unit checked."""
        return await self.cq.read(position, length)

    async def stored_units(self, start: int, stop: int, *, chained: bool = False
                           ) -> list[CqUnit]:
        """Units of offsets ``[start, stop)`` read from the consume queue: one
        read per segment they span, every unit's CRC checked (``chained``: each
        that follows on from the one before is left to the caller's check
        against its record, see :func:`decode_units`). Units a damaged
        or missing consume-queue range held are rebuilt from the commit log
        (:meth:`_rebuilt_units`)."""
        out: list[CqUnit] = []
        offset = start
        while offset < stop:
            base, segment_end = await self.consume_queue_segment(offset * UNIT_SIZE)
            end = min(stop, segment_end // UNIT_SIZE)
            if end <= offset:
                raise self._corrupt(f"the consume-queue segment holding offset {offset} ends "
                                    f"at byte {segment_end}, before its unit")
            try:
                data = await self.read_consume_queue(offset * UNIT_SIZE,
                                                     (end - offset) * UNIT_SIZE)
            except (IntegrityError, CorruptSegment) as exc:
                if exc.span is None:
                    raise
                out.extend(await self._around_damage(offset, end, base, exc))
                offset = end
                continue
            try:
                out.extend(decode_units(data, chained=chained,
                                        previous_end=out[-1].end if out and chained else None))
            except RecordError:
                for i in range(end - offset):  # which one: name its offset
                    try:
                        decode_unit(data, i * UNIT_SIZE)
                    except RecordError as exc:
                        raise self._corrupt(f"consume-queue unit of offset {offset + i}: "
                                            f"{exc}") from None
                raise
            offset = end
        return out

    async def _around_damage(self, start: int, stop: int, base: int,
                             exc: IntegrityError | CorruptSegment) -> list[CqUnit]:
        """Units of ``[start, stop)``, one consume-queue segment's, where the
        segment's bytes ``exc.span`` cannot be read: the units around them
        read, theirs rebuilt from the commit log."""
        assert exc.span is not None
        span_start = (base + exc.span[0]) // UNIT_SIZE
        span_stop = -(-(base + exc.span[1]) // UNIT_SIZE)
        bad_start, bad_stop = max(start, span_start), min(stop, span_stop)
        if bad_start >= bad_stop:
            raise exc
        # The whole damaged span at once: its first unit starts where the unit
        # before the span ends, so it is rebuilt from there in one pass.
        rebuilt = await self._rebuilt_units(span_start, max(bad_stop, span_start), exc)
        return [*await self.stored_units(start, bad_start),
                *rebuilt[bad_start - span_start:],
                *await self.stored_units(bad_stop, stop)]

    async def _rebuilt_units(self, start: int, stop: int, exc: TieredStoreError
                             ) -> list[CqUnit]:
        """Units of ``[start, stop)`` rebuilt from the commit log: its records read
        one after the other from where the unit before ``start`` ends, each
        checked (CRC, topic, queue, offset). Kept, so one damaged range is
        scanned once. If the records cannot be read either, ``exc`` is raised."""
        kept = self._rebuilt
        if all(o in kept for o in range(start, stop)):
            return [kept[o] for o in range(start, stop)]
        log.warning("%s/%d: consume-queue units of offsets [%d, %d) rebuilt from the commit "
                    "log: %s", self.topic, self.queue_id, start, stop, exc)
        if len(kept) > REBUILT_UNITS_KEPT:
            kept.clear()
        out: list[CqUnit] = []
        try:
            position = 0 if start == 0 or start in kept else \
                (await self.stored_units(start - 1, start))[0].end
            offset = start
            while offset < stop:
                unit = kept.get(offset)
                if unit is None:
                    unit = await self._unit_of_record_at(position, offset)
                    kept[offset] = unit
                out.append(unit)
                position = unit.end
                offset += 1
        except TieredStoreError:
            raise exc from None
        return out

    async def _unit_of_record_at(self, position: int, offset: int) -> CqUnit:
        """The unit of offset ``offset``'s record, which starts at ``position``."""
        async for found in scan_records(self.read_commit_log, self.commit_log_segment_end,
                                        position, position + 1):
            if isinstance(found, ScanStop):
                raise self._corrupt(found.problem or f"no record at commit-log byte {position}")
            return self.unit_of_record(found.data, position, offset)
        raise self._corrupt(f"no record at commit-log byte {position}")

    async def commit_log_segment_end(self, position: int) -> int:
        """Where the commit-log segment holding ``position`` ends."""
        return (await self.cl.segment_at(position))[1]

    async def commit_log_view_end(self, position: int) -> int:
        """Where the commit-log bytes read from ``position`` stop coming back as
        one view of what the reader holds (the end of the unit holding it, at
        most the segment's end): a read up to there is not copied, a read across
        it is joined."""
        return await self.cl.view_end(position)

    async def read_commit_log(self, position: int, length: int) -> bytes | memoryview:
        """Commit-log bytes, within one segment, every unit checked: maybe a view
        (its callers decode the records and keep copies)."""
        return await self.cl.read(position, length, view=True)

    async def read_commit_log_span(self, position: int, length: int) -> bytes | memoryview:
        """Commit-log bytes, within one segment, read alone (not the whole units
        around them) where the store can: the caller checks every record."""
        return await self.cl.read(position, length, span=True)

    async def get_by_tags(self, offset: int, tags: Collection[str], max_count: int,
                          max_bytes: int = 4 * 1024 * 1024, max_scan: int = MAX_SCAN
                          ) -> Tagged:
        """Messages from ``offset`` whose tags are one of ``tags``, read from the
        commit log alone (see :mod:`tieredstore.store.tagged`)."""
        return await get_by_tags(self, offset, tags, max_count=max_count, max_bytes=max_bytes,
                                 max_scan=max_scan)

    async def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        """The key index's entries that may be the key's (none: no index)."""
        return []

    async def query_by_key(self, q: KeyQuery) -> list[Message]:
        """The newest ``q.max_count`` messages with the key stamped in the range,
        newest first (see :mod:`tieredstore.store.bykey`)."""
        entries = await self.key_entries(q)
        return await query(self, entries, q) if entries else []

    def _corrupt(self, message: str) -> QueueCorrupt:
        return QueueCorrupt(message, topic=self.topic, queue_id=self.queue_id)

    def check_range(self, offset: int) -> None:
        if not self.min_offset <= offset <= self.max_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.min_offset}, {self.max_offset}]",
                topic=self.topic, queue_id=self.queue_id)

    def unit_of_record(self, data: bytes | memoryview, position: int, offset: int
                       ) -> CqUnit:
        """The consume-queue unit of the record ``data`` at commit-log byte
        ``position``, which must hold offset ``offset`` (its CRC checked)."""
        return self.unit_and_record(data, position, offset)[0]

    def unit_and_record(self, data: bytes | memoryview, position: int, offset: int
                        ) -> tuple[CqUnit, Message]:
        """:meth:`unit_of_record`, and the message the record holds (one decode)."""
        try:
            message = decode_record(data, self.topic, self.queue_id, self.codec)
        except RecordError as exc:
            raise self._corrupt(f"commit log byte {position}: {exc}") from None
        if message.offset != offset:
            raise self._corrupt(f"commit log byte {position} holds offset {message.offset}, "
                                f"expected {offset}")
        return (CqUnit(position, len(data), tags_hash(message.tags), message.store_timestamp),
                message)

    async def get(self, offset: int, max_count: int, max_bytes: int = 4 * 1024 * 1024
                  ) -> list[Message]:
        """Up to ``max_count`` messages from ``offset``, at least one if there is
        any, even past ``max_bytes``. Records next to each other in one
        commit-log segment are read with one read.

        Damage stays where it is: the messages before a record (or unit) that
        cannot be read are returned, and the next call, from that offset,
        raises the error that names it. Never wrong bytes.
        """
        self.check_range(offset)
        if max_count <= 0:
            return []
        # Every unit is checked against its record below: chained units suffice.
        units = await self._readable_units(offset, min(self.max_offset, offset + max_count),
                                           chained=True)
        messages: list[Message] = []
        total = i = 0
        count = len(units)
        while i < count and (total < max_bytes or not messages):
            first = units[i]
            # A run stops where the read would be joined (a copy of the whole
            # run): at the end of the reader's unit, or of the segment. A record
            # across two units is a run of its own, joined alone.
            run_end = await self.commit_log_view_end(first.position)
            j, run, end = i, first.size, first.position + first.size
            last = units[-1]
            span = last.end - first.position
            if (last.end <= run_end and total + span <= max_bytes
                    and sum(map(_SIZE, units[i:])) == span):
                # The rest, back to back (as a writer lays them) and within bounds:
                # one run, without the walk below.
                j, run, end = count - 1, span, last.end
            while j + 1 < count and total + run < max_bytes:
                position, size, _, _ = units[j + 1]
                if position != end or position + size > run_end:
                    break
                j += 1
                run += size
                end = position + size
            try:
                data = memoryview(await self.read_commit_log(first.position, run))
            except TieredStoreError:
                if i == j and not messages:
                    raise
                j = i  # one record at a time, up to the one that cannot be read
                try:
                    data = memoryview(await self.read_commit_log(first.position, first.size))
                except TieredStoreError:
                    if not messages:
                        raise
                    return messages
            total, complete = self._decode_run(data, units, start=i, stop=j + 1,
                                               offset=offset, messages=messages,
                                               total=total, max_bytes=max_bytes)
            if not complete:
                return messages
            i = j + 1
        return messages

    def _decode_run(self, data: memoryview, units: list[CqUnit], *, start: int, stop: int,
                    offset: int, messages: list[Message], total: int, max_bytes: int
                    ) -> tuple[int, bool]:
        """Decode the records of ``units[start:stop]``, read as one run, into
        ``messages``. Returns the bytes returned so far, and False once the caller
        must stop (``max_bytes`` reached, or a record that cannot be read after good
        ones: it is left for the next call, which raises naming it)."""
        topic, queue_id = self.topic, self.queue_id
        at = 0
        k = start
        while k < stop:
            k, used, total = decode_plain_run(
                data[at:], units, k, stop, first_offset=offset, topic=topic,
                queue_id=queue_id, out=messages, total=total, max_bytes=max_bytes)
            at += used
            if k == stop:
                break
            # Not a plain record that agrees with its unit: decode it in full,
            # which names what is wrong if anything is.
            unit = units[k]
            size = unit.size
            if messages and total + size > max_bytes:
                return total, False
            try:
                message = decode_record(data[at : at + size], topic, queue_id, self.codec)
            except RecordError as exc:
                problem: str | None = str(exc)
            else:
                problem = record_problem(message, offset + k, unit)
            if problem is not None:
                if not messages:
                    raise self._corrupt(f"message at offset {offset + k}: {problem}")
                return total, False
            messages.append(message)
            at += size
            total += size
            k += 1
        return total, True

    async def _readable_units(self, start: int, end: int, *, chained: bool = False
                              ) -> list[CqUnit]:
        """Units of ``[start, end)``; if some cannot be read, those before the first
        bad one (the error itself if that is ``start``'s)."""
        try:
            return await self.units(start, end, chained=chained)
        except TieredStoreError:
            if end - start <= 1:
                raise
        out: list[CqUnit] = []
        for at in range(start, end):
            try:
                out.extend(await self.units(at, at + 1))  # each alone: all checked
            except TieredStoreError:
                if not out:
                    raise
                break
        return out

    async def offset_for_time(self, timestamp_ms: int) -> int:
        """The first offset whose store timestamp is at or after ``timestamp_ms``
        (``max_offset`` if none): the sealed segment from the metadata's time
        index, then a binary search over its units."""
        record = await self.meta.find_by_time(FileType.CONSUME_QUEUE, timestamp_ms)
        if record is not None:
            lo, hi = record.first_message_offset, record.last_message_offset + 1
        else:
            lo, hi = self.tail_offset, self.max_offset
        lo, hi = max(lo, self.min_offset), min(hi, self.max_offset)
        while lo < hi:
            mid = (lo + hi) // 2
            if (await self.units(mid, mid + 1))[0].store_timestamp < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo
