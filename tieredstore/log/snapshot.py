"""LogSnapshot: the pieces a broker's log holds, for readers that never write.

A reader (a read-only view, a Spark task, ``verify``) lists the log and reads
every index *before* it lists the segments' chunks (docs/format.md, "Reading
the log"): a log object deleted before its listing had its chunk land first,
so one of the two listings holds every byte. A log object gone between the
listing and its index read is skipped for the same reason.
"""

from __future__ import annotations

import asyncio

from tieredstore.errors import ObjectNotFound
from tieredstore.filetype import FileType
from tieredstore.log.index import read_index
from tieredstore.log.keys import LogPath
from tieredstore.log.series import LogSeries
from tieredstore.objectstore import ObjectStore
from tieredstore.segment.layout import ChunkRef
from tieredstore.segment.path import SegmentPath

READ_CONCURRENCY = 16


class LogSnapshot:
    """Every piece the log held when loaded, by segment."""

    def __init__(self, pieces: dict[tuple[str, int, FileType, int], list[ChunkRef]]
                 | None = None, *, source: tuple[ObjectStore, LogPath] | None = None) -> None:
        self._pieces = pieces or {}
        self._source = source

    @classmethod
    async def load(cls, store: ObjectStore, path: LogPath) -> LogSnapshot:
        """One paged LIST of the log, one ranged GET per log object holding bytes."""
        series = LogSeries(store, path, writer_id="")
        pieces: dict[tuple[str, int, FileType, int], list[ChunkRef]] = {}
        limit = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(key: str, size: int) -> None:
            async with limit:
                try:
                    found = await read_index(store, key, size)
                except ObjectNotFound:
                    return
            for p in found:
                pieces.setdefault(p.segment, []).append(
                    ChunkRef(p.position, p.length, key, p.object_offset, p.crc32c))

        await asyncio.gather(*(one(e.key, e.size) for e in await series.entries()
                               if not e.fence))
        return cls(pieces, source=(store, path))

    async def reload(self) -> LogSnapshot:
        """The log as it is now (a writer compacted, consolidated or deleted since)."""
        if self._source is None:
            return self
        return await LogSnapshot.load(*self._source)

    def of(self, path: SegmentPath) -> list[ChunkRef]:
        """The pieces of the segment at ``path``."""
        return list(self._pieces.get((path.topic, path.queue_id, path.file_type,
                                      path.base_offset), ()))

    def of_queue(self, topic: str, queue_id: int) -> list[tuple[FileType, int, ChunkRef]]:
        """Every piece of one queue: file type, segment base, piece."""
        return [(f, base, unit) for (t, q, f, base), units in sorted(self._pieces.items())
                if (t, q) == (topic, queue_id) for unit in units]

    def queues(self) -> set[tuple[str, int]]:
        """The queues with pieces (as ``LogWriter.queues``: some may have no
        metadata head, and a writer's open opens them too)."""
        return {(topic, queue) for topic, queue, _, _ in self._pieces}

    def bases(self, topic: str, queue_id: int, file_type: FileType) -> list[int]:
        """The segments of one flat file that have pieces."""
        return sorted(base for t, q, f, base in self._pieces
                      if (t, q, f) == (topic, queue_id, file_type))

    def __bool__(self) -> bool:
        return bool(self._pieces)
