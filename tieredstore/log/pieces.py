"""LogPieces: the pieces a broker's log holds, by segment; loading them.

One map for the writer (:class:`~tieredstore.log.writer.LogWriter`, which
changes it as pieces land and move into chunks) and for readers that never
write (:class:`LogSnapshot`). At one position it keeps one piece, the one
``continue_with`` reads (:func:`~tieredstore.segment.layout.keep_best`).

A reader (a read-only view, a Spark task, ``verify``) lists the log and reads
every index *before* it lists the segments' chunks (docs/format.md, "Reading
the log"): a log object deleted before its listing had its chunk land first,
so one of the two listings holds every byte. A log object gone between the
listing and its index read is skipped for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from tieredstore.errors import ObjectNotFound
from tieredstore.filetype import FileType
from tieredstore.log.consolidate import SegmentKey
from tieredstore.log.index import read_index
from tieredstore.log.keys import LogPath
from tieredstore.log.series import LogEntry, LogSeries
from tieredstore.objectstore import ObjectStore
from tieredstore.segment.layout import ChunkRef, keep_best
from tieredstore.segment.path import SegmentPath
from tieredstore.tasks import gather_bounded

READ_CONCURRENCY = 16

Found = tuple[LogEntry, list[tuple[SegmentKey, ChunkRef]]]


def segment_key(path: SegmentPath) -> SegmentKey:
    return path.topic, path.queue_id, path.file_type, path.base_offset


class LogPieces:
    """Every piece known, by segment and position."""

    def __init__(self) -> None:
        self._pieces: dict[SegmentKey, dict[int, ChunkRef]] = {}

    def found(self, key: SegmentKey, unit: ChunkRef) -> None:
        """A piece the log holds (of two at one position, see :func:`keep_best`)."""
        keep_best(self._pieces.setdefault(key, {}), unit)

    def of(self, path: SegmentPath) -> list[ChunkRef]:
        """The pieces of the segment at ``path`` (a writer adopts them)."""
        return list(self._pieces.get(segment_key(path), {}).values())

    def of_queue(self, topic: str, queue_id: int) -> list[tuple[FileType, int, ChunkRef]]:
        """Every piece of one queue: file type, segment base, piece."""
        return [(f, base, unit) for (t, q, f, base), units in sorted(self._pieces.items())
                if (t, q) == (topic, queue_id) for unit in units.values()]

    def queues(self) -> set[tuple[str, int]]:
        """The queues with pieces not yet in chunks (some may have no metadata
        head, and a writer's open opens them too)."""
        return {(topic, queue) for topic, queue, _, _ in self._pieces}

    def bases(self, topic: str, queue_id: int, file_type: FileType) -> list[int]:
        """The segments of one flat file that have pieces."""
        return sorted(base for t, q, f, base in self._pieces
                      if (t, q, f) == (topic, queue_id, file_type))


async def load_pieces(store: ObjectStore, entries: Iterable[LogEntry]) -> list[Found]:
    """Each data entry of the log with its pieces: one ranged GET of its index
    (two for a long one), ``READ_CONCURRENCY`` at a time; fences hold none. An
    entry gone since its listing is left out (see the module doc)."""
    async def one(entry: LogEntry) -> Found | None:
        try:
            pieces = await read_index(store, entry.key, entry.size)
        except ObjectNotFound:
            return None
        return entry, [(p.segment, p.unit(entry.key)) for p in pieces]

    loaded = await gather_bounded(READ_CONCURRENCY, one, [e for e in entries if not e.fence])
    return [found for found in loaded if found is not None]


class LogSnapshot(LogPieces):
    """Every piece the log held when loaded, by segment."""

    def __init__(self, pieces: dict[SegmentKey, list[ChunkRef]] | None = None, *,
                 source: tuple[ObjectStore, LogPath] | None = None) -> None:
        super().__init__()
        for key, units in (pieces or {}).items():
            for unit in units:
                self.found(key, unit)
        self._source = source

    @classmethod
    async def load(cls, store: ObjectStore, path: LogPath) -> LogSnapshot:
        """One paged LIST of the log, one ranged GET per log object holding bytes."""
        snapshot = cls(source=(store, path))
        for _, found in await load_pieces(store, await LogSeries(store, path, "").entries()):
            for key, unit in found:
                snapshot.found(key, unit)
        return snapshot

    async def reload(self) -> LogSnapshot:
        """The log as it is now (a writer compacted, consolidated or deleted since)."""
        if self._source is None:
            return self
        return await LogSnapshot.load(*self._source)

    def __bool__(self) -> bool:
        return bool(self._pieces)
