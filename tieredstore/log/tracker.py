"""LogTracker: which log objects still hold live pieces, and which may go.

A piece is *live* while its segment's chunks end before the piece's end; a log
object is live while one of its pieces is (docs/log-objects.md, "Log objects").
The tracker counts each object's live pieces: a segment tells it (through its
``Lender``, the writer) when a chunk took pieces over. An object whose count
reaches zero is deleted once it is ``delete_age`` old, and never while it is
the newest entry of the series.
"""

from __future__ import annotations

from collections.abc import Sequence

from tieredstore.log.keys import LogPath
from tieredstore.segment import ChunkedSegment
from tieredstore.segment.layout import ChunkRef


class LogTracker:
    """Live pieces per log object (by sequence number), and who holds them."""

    def __init__(self, path: LogPath) -> None:
        self.path = path
        self._live: dict[int, int] = {}  # seq -> pieces not yet in chunks
        self._born: dict[int, float] = {}  # seq -> when it landed (or was found), epoch s
        self._holders: dict[int, set[ChunkedSegment]] = {}  # seq -> segments with its pieces
        self._dead: dict[int, float] = {}  # seq -> born, all pieces in chunks
        self.newest = -1  # the newest entry of the series: never deleted

    @property
    def live_objects(self) -> int:
        return len(self._live)

    def landed(self, seq: int, count: int, born: float) -> None:
        """Log object ``seq`` holds ``count`` live pieces (written now, or found at open)."""
        self.newest = max(self.newest, seq)
        if count:
            self._live[seq] = count
            self._born[seq] = born
            self._holders[seq] = set()
        else:
            self._dead[seq] = born

    def holding(self, segment: ChunkedSegment, unit: ChunkRef) -> None:
        """``segment``'s layout holds ``unit``, a live piece."""
        seq = self.path.parse(unit.key)
        if seq is not None and seq in self._holders:
            self._holders[seq].add(segment)

    def dropped(self, segment: ChunkedSegment, units: Sequence[ChunkRef]) -> None:
        """``units`` of ``segment`` are in chunks now (or were at open)."""
        for unit in units:
            seq = self.path.parse(unit.key)
            count = None if seq is None else self._live.get(seq)
            if seq is None or count is None:
                continue
            if count > 1:
                self._live[seq] = count - 1
                continue
            del self._live[seq]
            self._holders.pop(seq, None)
            self._dead[seq] = self._born.pop(seq)

    def due(self, now: float, age: float) -> list[ChunkedSegment]:
        """Segments holding pieces of log objects ``age`` seconds old or older,
        oldest object first."""
        out: dict[int, ChunkedSegment] = {}
        for seq in sorted(self._live):
            if self._born[seq] + age > now:
                break
            for segment in self._holders.get(seq, ()):
                out.setdefault(id(segment), segment)
        return list(out.values())

    def deletable(self, now: float, age: float) -> list[int]:
        """Log objects with no live piece, ``age`` seconds old, not the newest."""
        return sorted(seq for seq, born in self._dead.items()
                      if born + age <= now and seq < self.newest)

    def deleted(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            self._dead.pop(seq, None)
