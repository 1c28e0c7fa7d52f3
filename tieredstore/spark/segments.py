"""A queue's commit log as a flat file, over segments opened read-only.

Segments are opened with ``ChunkedSegment.open(..., repair=False)``, which
only lists and reads: a reader beside a live writer must not abort the
writer's merge in flight or delete what it is about to replace. If that
merge lands while we read, ``read0`` lists the segment again and follows it,
whether the segment was sealed or still being written when it was listed
(:class:`ReadOnlySegment`).
"""

from __future__ import annotations

import bisect

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ChunkMissing, CorruptSegment
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment import (
    ChunkedSegment,
    FileType,
    SegmentOptions,
    SegmentPath,
    SegmentReader,
    recover_segment,
)
from tieredstore.store.keys import segment_path


class ReadOnlySegment(ChunkedSegment):
    """A segment a reader listed, that a live writer may seal and merge meanwhile.

    ``ChunkedSegment.read0`` lists again when a chunk is missing only if the
    segment was sealed when it was listed. Listed while still being written,
    it may since have been sealed and merged, its chunks deleted: list it
    again here too and read what the new listing shows (the merged object; if
    that listing caught the chunks just before their deletion, ``read0``, now
    on a sealed segment, lists once more). A chunk still missing is damage.
    """

    async def read0(self, position: int, length: int) -> bytes:
        # docstring inherited
        try:
            return await super().read0(position, length)
        except ChunkMissing:
            if self.sealed:
                raise  # listed sealed: read0 has listed it again already
        self._adopt(await recover_segment(self.store, self.path))
        return await super().read0(position, length)


async def open_read_only(store: ObjectStore, config: TieredStoreConfig, path: SegmentPath,
                         reader: SegmentReader) -> ChunkedSegment:
    """A segment for reading only; nothing in the bucket changes."""
    return await ReadOnlySegment.open(store, path, reader=reader, repair=False,
                                      options=SegmentOptions(chunk_size=config.chunk_size))


class FlatFileView:
    """One queue's flat file (commit log) over the segments a plan named.

    Segments are opened when first needed. The last may be the active one
    (size None); if it was sealed after the plan was made, the segments
    after it are found where flat files put them: at its end.
    """

    def __init__(self, store: ObjectStore, config: TieredStoreConfig, reader: SegmentReader,
                 *, topic: str, queue_id: int, file_type: FileType,
                 segments: tuple[tuple[int, int | None], ...]) -> None:
        self.store = store
        self.config = config
        self.reader = reader
        self.topic = topic
        self.queue_id = queue_id
        self.file_type = file_type
        self._bases = [b for b, _ in segments]
        self._sizes = [s for _, s in segments]
        self._open: dict[int, ChunkedSegment] = {}

    async def segment(self, index: int) -> ChunkedSegment:
        base = self._bases[index]
        segment = self._open.get(base)
        if segment is None:
            path = segment_path(self.config, self.topic, self.queue_id, self.file_type, base)
            segment = await open_read_only(self.store, self.config, path, self.reader)
            size = self._sizes[index]
            if size is not None and size != segment.commit_position:
                raise CorruptSegment(f"holds {segment.commit_position} bytes, its metadata "
                                     f"record says {size}", segment=str(path))
            self._open[base] = segment
        return segment

    async def locate(self, position: int) -> tuple[ChunkedSegment, int] | None:
        """The segment holding flat position ``position`` and its base, or None."""
        i = bisect.bisect_right(self._bases, position) - 1
        while i >= 0:
            segment = await self.segment(i)
            base = self._bases[i]
            if position < base + segment.commit_position:
                return segment, base
            if self._sizes[i] is not None or not segment.sealed or i + 1 < len(self._bases):
                return None
            # The active segment was sealed after planning: the next starts at its end.
            self._sizes[i] = segment.commit_position
            self._bases.append(base + segment.commit_position)
            self._sizes.append(None)
            i += 1
        return None
