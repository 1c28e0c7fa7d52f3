"""LogPieces: the pieces a broker's log holds, by segment; loading them.

One map for the writer (:class:`~tieredstore.log.writer.LogWriter`, which
changes it as pieces land and move into chunks) and for readers that never
write (:class:`LogSnapshot`). At one position it keeps one piece, the one
``continue_with`` reads (:func:`~tieredstore.segment.layout.keep_best`).

A reader (a read-only view, a Spark task, ``verify``) lists the log and reads
every index *before* it lists the segments' chunks (docs/log-objects.md, "Reading
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
    """Every piece known, by segment and position, and the segments by queue (a
    queue's pieces are found without a pass over every queue's)."""

    def __init__(self) -> None:
        self._pieces: dict[SegmentKey, dict[int, ChunkRef]] = {}
        self._by_queue: dict[tuple[str, int], set[SegmentKey]] = {}

    def found(self, key: SegmentKey, unit: ChunkRef) -> None:
        """A piece the log holds (of two at one position, see :func:`keep_best`)."""
        keep_best(self._segment_pieces(key), unit)

    def _segment_pieces(self, key: SegmentKey) -> dict[int, ChunkRef]:
        """The pieces of segment ``key`` by position, an empty dict kept if none."""
        units = self._pieces.get(key)
        if units is None:
            units = self._pieces[key] = {}
            self._by_queue.setdefault(key[:2], set()).add(key)
        return units

    def _drop(self, key: SegmentKey) -> dict[int, ChunkRef]:
        """Forget the pieces of segment ``key``; they are returned."""
        units = self._pieces.pop(key, {})
        segments = self._by_queue.get(key[:2])
        if segments is not None:
            segments.discard(key)
            if not segments:
                del self._by_queue[key[:2]]
        return units

    def _segments(self, topic: str, queue_id: int) -> list[SegmentKey]:
        """The segments of one queue with pieces, in key order."""
        return sorted(self._by_queue.get((topic, queue_id), ()))

    def of(self, path: SegmentPath) -> list[ChunkRef]:
        """The pieces of the segment at ``path`` (a writer adopts them)."""
        return list(self._pieces.get(segment_key(path), {}).values())

    def of_queue(self, topic: str, queue_id: int) -> list[tuple[FileType, int, ChunkRef]]:
        """Every piece of one queue: file type, segment base, piece."""
        return [(key[2], key[3], unit) for key in self._segments(topic, queue_id)
                for unit in self._pieces[key].values()]

    def queues(self) -> set[tuple[str, int]]:
        """The queues with pieces not yet in chunks (some may have no metadata
        head, and a writer's open opens them too)."""
        return set(self._by_queue)

    def bases(self, topic: str, queue_id: int, file_type: FileType) -> list[int]:
        """The segments of one flat file that have pieces."""
        return [key[3] for key in self._segments(topic, queue_id) if key[2] == file_type]


class LogIndexes:
    """The indexes of log objects read before, kept for the next load. A log
    object is written once (``If-None-Match``) and never changes, so a reader
    that loads the log again and again (the bucket exporter, a pass per scrape)
    reads only the indexes of objects new since; objects no longer listed are
    forgotten."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, int], Found] = {}

    def __len__(self) -> int:
        return len(self._found)

    def get(self, entry: LogEntry) -> Found | None:
        return self._found.get((entry.key, entry.size))

    def keep(self, loaded: Iterable[Found]) -> None:
        """What a load found: the indexes kept from now on (the rest forgotten)."""
        self._found = {(entry.key, entry.size): (entry, pieces) for entry, pieces in loaded}


async def load_pieces(store: ObjectStore, entries: Iterable[LogEntry],
                      known: LogIndexes | None = None) -> list[Found]:
    """Each data entry of the log with its pieces: one ranged GET of its index
    (two for a long one), ``READ_CONCURRENCY`` at a time; fences hold none. An
    entry gone since its listing is left out (see the module doc). ``known``:
    indexes read before, not read again, and kept up to date."""
    async def one(entry: LogEntry) -> Found | None:
        found = known.get(entry) if known is not None else None
        if found is not None:
            return found
        try:
            pieces = await read_index(store, entry.key, entry.size)
        except ObjectNotFound:
            return None
        return entry, [(p.segment, p.unit(entry.key)) for p in pieces]

    loaded = [f for f in await gather_bounded(READ_CONCURRENCY, one,
                                              [e for e in entries if not e.fence])
              if f is not None]
    if known is not None:
        known.keep(loaded)
    return loaded


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
    async def load(cls, store: ObjectStore, path: LogPath, known: LogIndexes | None = None
                   ) -> LogSnapshot:
        """One paged LIST of the log, one ranged GET per log object holding bytes
        (of those ``known`` does not hold yet, with ``known``)."""
        snapshot = cls(source=(store, path))
        for _, found in await load_pieces(store, await LogSeries(store, path, "").entries(),
                                          known):
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
