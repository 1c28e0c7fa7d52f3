"""FlatReader: one queue's flat file of one type, read by flat position.

The one reader of a flat file, for the writer's :class:`FlatFile` (which adds
appending, rolling and sealing) and the read-only :class:`FlatView`. Its rules:
a position before ``next_base`` is in the segment its record names (none:
:class:`OffsetOutOfRange`), which must hold the bytes the record says; from
``next_base`` on (the tail: the active segment, and for a view one sealed but
not yet recorded) in the tail segment whose bytes hold it, or the last. A read
lies within one segment of those that can be read, else :class:`QueueCorrupt`.
"""

from __future__ import annotations

import abc
from typing import Generic, Protocol, TypeVar

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError, is_damage
from tieredstore.metadata import First
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import FileType, SegmentLayout, SegmentPath
from tieredstore.segment.reader import ReadMode
from tieredstore.store.base.errors import OffsetOutOfRange, QueueCorrupt
from tieredstore.store.formats.keys import segment_path


class SegmentRecords(Protocol):
    """Where a flat file's sealed segments are recorded: the queue metadata
    (:class:`QueueMetadata` is one), or the segments a read plan took from it."""

    def next_base_offset(self, file_type: FileType) -> int:
        """Where the first segment not recorded begins."""

    def first(self, file_type: FileType) -> First:
        """The first live record (its base offset)."""

    async def find_by_base_offset(self, file_type: FileType, position: int
                                  ) -> pb.SegmentRecord | None:
        """The record of the segment holding ``position``, if one does."""


class Segment(Protocol):
    """A segment as the reader holds it: where it is and its units."""

    @property
    def path(self) -> SegmentPath: ...
    @property
    def layout(self) -> SegmentLayout: ...


S = TypeVar("S", bound=Segment)


def first_live(records: SegmentRecords, file_type: FileType) -> int:
    """A flat file's first live position: its first live record's base (the
    segments before it were trimmed), at most where the next record begins."""
    return min(records.first(file_type).base_offset, records.next_base_offset(file_type))


class FlatReader(abc.ABC, Generic[S]):
    """Positions of one flat file to its segments, and reads of them."""

    store: ObjectStore
    config: TieredStoreConfig
    records: SegmentRecords
    topic: str
    queue_id: int
    file_type: FileType

    @property
    @abc.abstractmethod
    def next_base(self) -> int:
        """Where the tail (the segments past the records) begins."""

    @abc.abstractmethod
    async def _tail(self, reach: int) -> list[tuple[S, int]]:
        """The segments from :attr:`next_base` on and their ends, in order, at least
        one; listed (again) to hold bytes up to ``reach`` if they may."""

    @abc.abstractmethod
    async def _recorded(self, record: pb.SegmentRecord) -> S:
        """The segment of ``record`` (checked with :meth:`_size_problem`)."""

    @abc.abstractmethod
    async def _read(self, segment: S, local: int, length: int, mode: ReadMode
                    ) -> bytes | memoryview:
        """Bytes ``[local, local + length)`` of ``segment`` (see :meth:`read`)."""

    def problem(self, segment: S) -> str | None:
        """Why ``segment`` cannot be read, if it cannot."""
        return None

    def failure(self, segment: S) -> TieredStoreError | None:
        """The error that made ``segment`` unreadable (see :meth:`problem`), if one did."""
        return None

    def is_open(self, segment: S) -> bool:
        """Whether ``segment`` was open (being written) when listed: a scan with no
        end stops after it."""
        return False

    def path_of(self, base: int) -> SegmentPath:
        return segment_path(self.config, self.topic, self.queue_id, self.file_type, base)

    @property
    def first(self) -> int:
        """The first live position (see :func:`first_live`)."""
        return first_live(self.records, self.file_type)

    def _corrupt(self, message: str) -> QueueCorrupt:
        return QueueCorrupt(message, topic=self.topic, queue_id=self.queue_id)

    @staticmethod
    def _size_problem(segment: S, record: pb.SegmentRecord) -> str | None:
        """What is wrong if ``segment`` does not hold the bytes its record says."""
        size = segment.layout.size
        if size == record.size:
            return None
        return f"segment {segment.path} holds {size} bytes, its record says {record.size}"

    async def segment_at(self, position: int, length: int = 1) -> tuple[S, int]:
        """The segment holding ``position`` and where it ends (flat positions); a
        tail listed before the ``length`` bytes from it were stored is listed
        again (a view's, once)."""
        if position >= self.next_base:
            tail = await self._tail(position + length)
            for segment, end in tail:
                if position < end:
                    return segment, end
            return tail[-1]
        record = await self.records.find_by_base_offset(self.file_type, position)
        if record is None:
            raise OffsetOutOfRange(f"{self.file_type.label} position {position} is not "
                                   f"stored (first live position {self.first})",
                                   topic=self.topic, queue_id=self.queue_id)
        return await self._recorded(record), record.base_offset + record.size

    async def recorded_extent(self, position: int) -> tuple[int, int] | None:
        """``[base, end)`` of the recorded segment holding ``position``, from its
        record alone (the segment is not opened); None past the records, or
        where no live record holds it."""
        if position >= self.next_base:
            return None
        record = await self.records.find_by_base_offset(self.file_type, position)
        return None if record is None else (record.base_offset,
                                            record.base_offset + record.size)

    async def unrecorded(self) -> list[tuple[int, int]]:
        """``[start, end)`` of the tail's segments that hold bytes, in order, as of
        the call (a key lookup reads them whole). The writer's does not wait:
        nothing appended between its caller's look at what is pending and this
        is missed."""
        return [(segment.path.base_offset, end) for segment, end in await self._tail(0)
                if self.problem(segment) is None and end > segment.path.base_offset]

    def view_end(self, segment: S, end: int, position: int) -> int:
        """Where a ``VIEW`` :meth:`read` from ``position`` in ``segment`` (which
        ends at ``end``) stops being one view (a read across it is joined: a
        copy): the end of the unit holding it, at most the segment's end; for
        bytes past the stored units (the pool's), or a segment that cannot be
        read, the segment's end."""
        base = segment.path.base_offset
        layout = segment.layout
        if self.problem(segment) is not None or position - base >= layout.size:
            return end
        return min(end, base + layout.unit_end(position - base))

    async def read(self, position: int, length: int, *, mode: ReadMode = ReadMode.COPY
                   ) -> bytes | memoryview:
        """Bytes ``[position, position + length)``, which must lie in one segment,
        as ``mode`` says (:class:`~tieredstore.segment.reader.ReadMode`)."""
        segment, end = await self.segment_at(position, length)
        problem = self.problem(segment)
        if problem is not None:
            failure = self.failure(segment)
            if failure is not None and not is_damage(failure):  # an outage stays one
                raise failure.with_traceback(None)
            raise self._corrupt(problem)
        if position + length > end:
            raise self._corrupt(f"{self.file_type.label} read [{position}, "
                                f"{position + length}) crosses the segment end {end}")
        return await self._read(segment, position - segment.path.base_offset, length, mode)
