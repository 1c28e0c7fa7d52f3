"""The durable tail: a queue's commit-log records past its consume queue's end.

One walk, for the three readers of it (docs/reading.md, "The durable tail"):
the writer's re-dispatch at an open (:class:`~tieredstore.store.write.queue.OwnedQueue`),
``verify``'s check of the records not yet dispatched, and the read-only
views (:class:`~tieredstore.store.read.queue_view.QueueView`, Spark's task for an
active slice), which read the tail's messages through the units derived
here. Where the walk starts is :func:`tail_start`; each record is checked
(CRC, topic, queue, the next offset) and its unit derived from it
(:func:`~tieredstore.store.read.scan.record_unit`). The walk ends at the end it
is given, or with a :class:`~tieredstore.store.read.checks.ScanStop`: ``dead``
for a record cut short at the very end (a crash's dead space), else the
``problem`` at that byte; each caller says what a stop means to it.
Errors of the reads propagate.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tieredstore.errors import TieredStoreError, is_damage
from tieredstore.store.base.errors import QueueCorrupt
from tieredstore.store.formats.keyentries import KeyEntry, indexed_keys
from tieredstore.store.formats.record import CqUnit, Message, RecordOpener
from tieredstore.store.read.bykey import KeyQuery
from tieredstore.store.read.checks import ScanStop, scan_records
from tieredstore.store.read.flatreader import FlatReader
from tieredstore.store.read.scan import record_unit

log = logging.getLogger(__name__)

BLOCK_BYTES = 4 * 1024 * 1024  # commit-log bytes a walk reads at once


@dataclass(frozen=True, slots=True)
class TailStart:
    """Where a walk of the tail starts: offset ``offset`` (the consume queue's
    end) at commit-log byte ``position``; ``behind``: ``position`` is not where
    the last unit's record ends (no unit is left to say), and whole records
    of offsets below ``offset`` are passed over first (each CRC-checked)."""

    offset: int
    position: int
    behind: bool = False


def tail_start(offset: int, units_end: int | None, *, first: int, clean_from: int
               ) -> TailStart:
    """The tail of a consume queue ending at ``offset`` whose last unit's record
    ends at commit-log byte ``units_end`` (None: no unit is left, the walk starts
    at the commit log's first live byte ``first``), at or after ``clean_from``
    (where clean records resume after dead space)."""
    if units_end is None:
        return TailStart(offset, max(first, clean_from), behind=True)
    return TailStart(offset, max(units_end, clean_from))


@dataclass(frozen=True, slots=True)
class TailRecord:
    """One record of the tail: its offset, the unit derived from it, its message."""

    offset: int
    unit: CqUnit
    message: Message

    @property
    def end(self) -> int:
        """The commit-log byte after the record."""
        return self.unit.end


async def tail_records(cl: FlatReader[Any], start: TailStart, end: int, *,
                       codec: RecordOpener | None) -> AsyncIterator[TailRecord | ScanStop]:
    """The records of commit log ``cl`` from ``start`` up to byte ``end``, one
    after another, each holding the next offset; a :class:`ScanStop` last if
    the walk stopped before ``end`` (a record that holds another offset, or
    that fails its check, is a ``problem``)."""

    blocks = _Blocks(cl, end)
    offset = start.offset
    async for found in scan_records(blocks.read, blocks.segment_end, start.position, end,
                                    skip_below=offset if start.behind else 0):
        if isinstance(found, ScanStop):
            yield found
            return
        try:
            unit, message = record_unit(found.data, found.position, offset, topic=cl.topic,
                                        queue_id=cl.queue_id, codec=codec)
        except QueueCorrupt as exc:
            yield ScanStop(found.position, False, _without_queue(exc))
            return
        yield TailRecord(offset, unit, message)
        offset += 1


class _Blocks:
    """Reads of a walk forward through commit log ``cl`` up to byte ``end``,
    served from blocks of up to :data:`BLOCK_BYTES` read at once (within one
    segment): a record costs no read of its own."""

    def __init__(self, cl: FlatReader[Any], end: int) -> None:
        self.cl = cl
        self.end = end
        self._at = 0
        self._data = memoryview(b"")
        self._segment = (0, 0)  # [base, end) of the segment the last look-up found

    async def segment_end(self, position: int) -> int:
        """Where the segment holding ``position`` ends."""
        base, end = self._segment
        if not base <= position < end:
            segment, end = await self.cl.segment_at(position)
            self._segment = (segment.path.base_offset, end)
        return end

    async def read(self, position: int, length: int) -> bytes | memoryview:
        at = position - self._at
        if at < 0 or at + length > len(self._data):
            segment_end = await self.segment_end(position)
            stop = max(position + length, min(segment_end, self.end, position + BLOCK_BYTES))
            self._data = memoryview(await self.cl.read(position, stop - position))
            self._at, at = position, 0
        return self._data[at:at + length]


def _without_queue(exc: QueueCorrupt) -> str:
    """``exc``'s message without the queue's name it starts with."""
    text = str(exc)
    where = f"{exc.topic}/{exc.queue_id}: "
    return text[len(where):] if text.startswith(where) else text


@dataclass(slots=True)
class DurableTail:
    """The tail as a read-only view holds it: the units derived for offsets
    ``[first, end_offset)``, and each keyed message's offset, unit and the keys
    it is indexed by (:func:`~tieredstore.store.formats.keyentries.indexed_keys`)."""

    first: int
    units: list[CqUnit] = field(default_factory=list)
    keyed: list[tuple[int, CqUnit, Sequence[str]]] = field(default_factory=list)
    # Where its walk began (None: no walk), and the commit-log byte after its last
    # record: a walk from the same start goes on from there (``durable_tail``).
    start: TailStart | None = None
    end_position: int = 0

    @property
    def end_offset(self) -> int:
        return self.first + len(self.units)

    def units_between(self, start: int, end: int) -> list[CqUnit]:
        """The units of offsets ``[start, end)`` the tail holds."""
        start = max(start, self.first)
        return self.units[start - self.first:max(start, end) - self.first]

    def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        """Entries for the tail's messages indexed by ``q``'s key, stamped in its range."""
        return [KeyEntry(q.hash, offset, unit.store_timestamp, unit.position, unit.size)
                for offset, unit, keys in self.keyed
                if q.key in keys and q.in_range(unit.store_timestamp)]


async def durable_tail(cl: FlatReader[Any], start: TailStart, end: int, *,
                       codec: RecordOpener | None, after: DurableTail | None = None,
                       until: int | None = None) -> DurableTail:
    """The tail of ``cl`` from ``start`` up to byte ``end`` as a view reads it:
    a stop (dead space, a record that fails its check) or damage met on the way
    ends it where it is, as the next open's re-dispatch ends there; an error
    that is no damage (an outage) is raised. ``after``: a tail walked before
    (of this queue); if it began at ``start`` too, its records are taken as
    they are (durable commit-log bytes do not change) and the walk goes on
    after them: a reader that looks again walks only what is new. ``until``:
    the walk ends once it holds the offsets below it (a read of a range)."""
    tail = DurableTail(start.offset, start=start, end_position=start.position)
    walk = start
    if after is not None and after.start == start and after.end_position <= end and (
            after.units or not start.behind):
        tail.units, tail.keyed = list(after.units), list(after.keyed)
        tail.end_position = after.end_position
        walk = TailStart(after.end_offset, after.end_position)
    position = tail.end_position
    try:
        async for found in tail_records(cl, walk, end, codec=codec):
            if isinstance(found, ScanStop):
                if not found.dead:
                    log.warning("%s/%d: the commit log's tail ends at byte %d: %s", cl.topic,
                                cl.queue_id, found.position, found.problem)
                break
            tail.units.append(found.unit)
            keys = indexed_keys(found.message.keys, found.message.properties)
            if keys:
                tail.keyed.append((found.offset, found.unit, keys))
            position = tail.end_position = found.end
            if until is not None and tail.end_offset >= until:
                break
    except TieredStoreError as exc:
        if not is_damage(exc):
            raise
        log.warning("%s/%d: the commit log's tail ends at byte %d, unreadable: %s", cl.topic,
                    cl.queue_id, position, exc)
    return tail
