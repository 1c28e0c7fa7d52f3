"""Reading a queue: ``get`` and ``offset_for_time`` over consume-queue units.

One implementation for every reader of a queue: the store's own
(:class:`tieredstore.store.write.queue.OwnedQueue`, which also sees what is still
buffered) and the read-only views of the CLI, which see only what is durable
in the bucket. Both read through the one queue scan
(:class:`~tieredstore.store.read.scan.QueueScan`, over their flat files, each read
a :class:`~tieredstore.store.read.scan.ScanSpec` of its own); subclasses
say which offsets they hold and which units a writer still holds in memory.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Collection
from typing import Any

from tieredstore.metadata import FileType, QueueMetadata
from tieredstore.store.base.errors import OffsetOutOfRange, QueueCorrupt
from tieredstore.store.formats.keyentries import KeyEntry
from tieredstore.store.formats.record import UNIT_SIZE, CqUnit, Message, RecordOpener
from tieredstore.store.read.around import AroundDamage, read_around
from tieredstore.store.read.bykey import KeyQuery, query
from tieredstore.store.read.flatreader import FlatReader
from tieredstore.store.read.scan import QueueScan, ScanError, ScanSpec
from tieredstore.store.read.tagged import MAX_SCAN, Tagged


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

    def unstored(self, start: int, end: int) -> list[CqUnit]:
        """Units of offsets ``[start, end)`` past the consume queue's end: a
        writer's, waiting in memory for their commit-log bytes to land."""
        return []

    def _scan(self, spec: ScanSpec) -> QueueScan:
        """The scan ``spec`` says, over this queue's files, the writer's units in
        memory too; a damaged consume-queue range is rebuilt from the commit log."""
        return QueueScan(spec, cl=self.cl, cq=self.cq, unstored=self.unstored,
                         rebuilt=self._rebuilt)

    async def units(self, start: int, end: int) -> list[CqUnit]:
        """Consume-queue units of offsets ``[start, end)``, stored or not."""
        return await self._scan(ScanSpec.for_units(self.topic, self.queue_id, start, end,
                                                   codec=self.codec)).units()

    async def commit_log_segment_end(self, position: int) -> int:
        """Where the commit-log segment holding ``position`` ends."""
        return (await self.cl.segment_at(position))[1]

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
        return await self._scan(ScanSpec.for_get(
            self.topic, self.queue_id, offset, min(self.max_offset, offset + max_count),
            codec=self.codec, max_bytes=max_bytes)).read()

    async def get_around_damage(self, offset: int, max_count: int,
                                max_bytes: int = 4 * 1024 * 1024) -> AroundDamage:
        """``get``, stepping over what cannot be read and reporting each range it
        stepped over (see :mod:`tieredstore.store.read.around`)."""
        self.check_range(offset)
        if max_count <= 0:
            return AroundDamage([], [], offset)
        return await read_around(self._scan(ScanSpec.for_around(
            self.topic, self.queue_id, offset, min(self.max_offset, offset + max_count),
            codec=self.codec, max_bytes=max_bytes)))

    async def get_by_tags(self, offset: int, tags: Collection[str], max_count: int,
                          max_bytes: int = 4 * 1024 * 1024, max_scan: int = MAX_SCAN
                          ) -> Tagged:
        """Messages from ``offset`` whose tags are one of ``tags``, at most
        ``max_scan`` units looked at (see :mod:`tieredstore.store.read.tagged`)."""
        self.check_range(offset)
        scan = self._scan(ScanSpec.for_tags(
            self.topic, self.queue_id, offset, min(self.max_offset, offset + max_scan),
            codec=self.codec, tags=frozenset(tags), max_count=max_count, max_bytes=max_bytes))
        try:
            messages = await scan.read()
        except ScanError as exc:
            if exc.offset == offset:
                raise
            return Tagged([], exc.offset)  # the next call names it
        return Tagged(messages, scan.next_offset)

    async def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        """The key index's entries that may be the key's (none: no index)."""
        return []

    async def query_by_key(self, q: KeyQuery) -> list[Message]:
        """The newest ``q.max_count`` messages with the key stamped in the range,
        newest first (see :mod:`tieredstore.store.read.bykey`)."""
        entries = await self.key_entries(q)
        return await query(self, entries, q) if entries else []

    def _corrupt(self, message: str) -> QueueCorrupt:
        return QueueCorrupt(message, topic=self.topic, queue_id=self.queue_id)

    def check_range(self, offset: int) -> None:
        if not self.min_offset <= offset <= self.max_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside the queue's offsets "
                f"[{self.min_offset}, {self.max_offset})",
                topic=self.topic, queue_id=self.queue_id)

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
