"""UnitStream: a flat file's segments read front to back, every unit once.

``tieredstore verify`` reads each unit (a chunk object, or a range of a merged segment
object) exactly once, in order, with one checked GET (:func:`fetch_unit`),
and serves the ascending reads of records and consume-queue units from a
small window of those bytes. Units that no read asks for (dead space after a
crash, a segment's unused tail) are fetched all the same by :meth:`finish`,
so every stored CRC is checked. A unit that fails is remembered as a bad
range (its bytes are not kept): reads touching it raise :class:`BadBytes`
with the reason.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tieredstore.errors import ChunkMissing, TieredStoreError
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkRef, DirectReader, fetch_unit
from tieredstore.store.view import SegmentView, open_segment

PREFETCH = 4


class BadBytes(Exception):
    """A read touched bytes whose unit failed its check (or is missing)."""


class ShortFile(Exception):
    """A read ran past the last stored byte."""


@dataclass
class BadRange:
    start: int
    end: int
    reason: str
    reported: bool = False


@dataclass(frozen=True, slots=True)
class _Piece:
    """One unit to fetch (or a segment known to be unreadable: ``unit`` None)."""

    view: SegmentView
    unit: ChunkRef | None
    start: int  # flat-file position
    end: int


class UnitStream:
    """Ascending reads over contiguous segments; each unit fetched once, in order."""

    def __init__(self, store: ObjectStore, segments: Sequence[SegmentView],
                 on_bytes: Callable[[int], None] = lambda n: None) -> None:
        self.store = store
        self.on_bytes = on_bytes
        self.units_checked = 0
        self.bytes_read = 0
        self.bad: list[BadRange] = []
        self._pieces: Iterator[_Piece] = self._plan(segments)
        self._ahead: deque[tuple[_Piece, asyncio.Task[bytes | memoryview]]] = deque()
        self._buf = bytearray()  # bytes [self._start, self._fetched)
        self._fetched = segments[0].base if segments else 0
        self._done = False
        self._last = 0  # the last read's position
        self._fresh: dict[int, SegmentView] = {}  # segments listed again after a merge

    @staticmethod
    def _plan(segments: Sequence[SegmentView]) -> Iterator[_Piece]:
        for view in segments:
            if view.state is None:
                yield _Piece(view, None, view.base, view.end)
                continue
            for unit in view.layout.units:
                yield _Piece(view, unit, view.base + unit.position, view.base + unit.end)

    @property
    def _start(self) -> int:
        return self._fetched - len(self._buf)

    def _fill_ahead(self) -> None:
        while not self._done and len(self._ahead) < PREFETCH:
            piece = next(self._pieces, None)
            if piece is None:
                self._done = True
                break
            self._ahead.append((piece, asyncio.get_running_loop().create_task(self._fetch(piece))))

    async def _fetch(self, piece: _Piece) -> bytes | memoryview:
        if piece.unit is None:
            raise BadBytes(piece.view.error)
        try:
            data, _ = await fetch_unit(self.store, piece.view.path, piece.unit)
        except ChunkMissing:
            # A live writer's merge replaced the chunks since the listing: the same
            # bytes, from the merged object.
            fresh = self._fresh.get(piece.view.base)
            if fresh is None:
                log = piece.view.log
                fresh = self._fresh[piece.view.base] = await open_segment(
                    self.store, piece.view.path, await log.reload() if log else None)
            local = piece.start - piece.view.base
            if fresh.state is None or fresh.size < local + (piece.end - piece.start):
                raise
            return await DirectReader(self.store).read(fresh.path, fresh.layout, local,
                                                       piece.end - piece.start)
        return data

    async def _next(self) -> bool:
        """Append the next unit's bytes (zeros and a bad range if it fails)."""
        self._fill_ahead()
        if not self._ahead:
            return False
        piece, task = self._ahead.popleft()
        self._fill_ahead()
        try:
            data = await task
        except (TieredStoreError, BadBytes) as exc:
            self.bad.append(BadRange(piece.start, piece.end, str(exc)))
            if piece.unit is not None and piece.start == self._fetched:
                self._buf += bytes(piece.end - piece.start)  # zeros, never returned
            else:  # a whole segment: the window restarts after it
                self._buf.clear()
            self._fetched = piece.end
            self.on_bytes(piece.end - piece.start)
            return True
        self.units_checked += 1
        if piece.start != self._fetched:  # a hole between segments (the caller reports it)
            self._buf.clear()
        self._buf += data
        self._fetched = piece.end
        self.bytes_read += len(data)
        self.on_bytes(len(data))
        return True

    def _drop_before(self, position: int) -> None:
        drop = min(len(self._buf), position - self._start)
        if drop > 0:
            del self._buf[:drop]

    async def read(self, position: int, length: int) -> bytes:
        """Bytes ``[position, position + length)``; positions must not go backwards."""
        data, bad = await self.read_around(position, length)
        if bad:
            raise BadBytes(bad[0].reason)
        return data

    async def read_around(self, position: int, length: int) -> tuple[bytes, list[BadRange]]:
        """Bytes ``[position, position + length)`` and the bad ranges among them
        (their bytes are zeros); positions must not go backwards."""
        if position < self._last:
            raise ValueError(f"read at {position} goes back before {self._last}")
        self._last = position
        end = position + length
        self._drop_before(position)
        while self._fetched < end:
            if not await self._next():
                raise ShortFile(f"the stored bytes end at {self._fetched}")
            self._drop_before(position)
        bad = [b for b in self.bad if b.start < end and position < b.end]
        for b in bad:
            b.reported = True
        if position < self._start:
            if bad:
                raise BadBytes(bad[0].reason)
            raise ShortFile(f"bytes [{position}, {self._start}) are not stored")
        at = position - self._start
        return bytes(self._buf[at : at + length]), bad

    async def finish(self) -> list[BadRange]:
        """Fetch (and check) every unit not yet read; the bad ranges no read reported."""
        while await self._next():
            self._buf.clear()
        return [b for b in self.bad if not b.reported and b.end > b.start]

    async def close(self) -> None:
        for _, task in self._ahead:
            task.cancel()
        await asyncio.gather(*(t for _, t in self._ahead), return_exceptions=True)
        self._ahead.clear()
