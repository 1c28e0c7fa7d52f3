"""Segments opened strictly read-only, and a queue's commit log as a flat file.

``ChunkedSegment.open`` finishes what a crash left (it aborts multipart
uploads, deletes leftover chunks, may merge): right for the writer, wrong
for a reader that runs beside it, whose open would abort the writer's merge
in flight. :class:`ReadOnlySegment` rebuilds the layout from a listing
(:func:`recover_segment`, which only lists and reads) and changes nothing.
"""

from __future__ import annotations

import bisect

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ChunkMissing, CorruptSegment
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment import FileType, SegmentLayout, SegmentPath, SegmentReader, SegmentState
from tieredstore.segment.recovery import recover_segment
from tieredstore.spark.plan import ACTIVE, segment_path


class ReadOnlySegment:
    """A segment's committed bytes as they were listed, read through ``reader``."""

    def __init__(self, store: ObjectStore, path: SegmentPath, reader: SegmentReader,
                 layout: SegmentLayout, state: SegmentState) -> None:
        self.store = store
        self.path = path
        self.reader = reader
        self.layout = layout
        self.state = state

    @classmethod
    async def open(cls, store: ObjectStore, path: SegmentPath, reader: SegmentReader
                   ) -> ReadOnlySegment:
        recovered = await recover_segment(store, path)
        return cls(store, path, reader, recovered.layout, recovered.state)

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def sealed(self) -> bool:
        return self.state is not SegmentState.OPEN

    async def read(self, position: int, length: int) -> bytes:
        """Bytes ``[position, position + length)``, every unit's CRC32C checked.

        A merge that lands meanwhile deletes the chunks listed: list again, once.
        """
        try:
            return await self.reader.read(self.path, self.layout, position, length)
        except ChunkMissing:
            recovered = await recover_segment(self.store, self.path)
            if recovered.layout.size < position + length:
                raise
            self.layout, self.state = recovered.layout, recovered.state
            return await self.reader.read(self.path, self.layout, position, length)


class FlatFileView:
    """One queue's flat file (commit log) over the segments a plan named.

    Segments are opened when first needed. The last may be the active one
    (size ``ACTIVE``); if it was sealed after the plan was made, the segments
    after it are found where flat files put them: at its end.
    """

    def __init__(self, store: ObjectStore, config: TieredStoreConfig, reader: SegmentReader,
                 *, topic: str, queue_id: int, file_type: FileType,
                 segments: tuple[tuple[int, int], ...]) -> None:
        self.store = store
        self.config = config
        self.reader = reader
        self.topic = topic
        self.queue_id = queue_id
        self.file_type = file_type
        self._bases = [b for b, _ in segments]
        self._sizes = [s for _, s in segments]
        self._open: dict[int, ReadOnlySegment] = {}

    async def segment(self, index: int) -> ReadOnlySegment:
        base = self._bases[index]
        segment = self._open.get(base)
        if segment is None:
            path = segment_path(self.config, self.topic, self.queue_id, self.file_type, base)
            segment = await ReadOnlySegment.open(self.store, path, self.reader)
            size = self._sizes[index]
            if size not in (ACTIVE, segment.size):
                raise CorruptSegment(f"holds {segment.size} bytes, its metadata record says "
                                     f"{size}", segment=str(path))
            self._open[base] = segment
        return segment

    async def locate(self, position: int) -> tuple[ReadOnlySegment, int] | None:
        """The segment holding flat position ``position`` and its base, or None."""
        i = bisect.bisect_right(self._bases, position) - 1
        while i >= 0:
            segment = await self.segment(i)
            base = self._bases[i]
            if position < base + segment.size:
                return segment, base
            if self._sizes[i] != ACTIVE or not segment.sealed or i + 1 < len(self._bases):
                return None
            # The active segment was sealed after planning: the next starts at its end.
            self._sizes[i] = segment.size
            self._bases.append(base + segment.size)
            self._sizes.append(ACTIVE)
            i += 1
        return None
