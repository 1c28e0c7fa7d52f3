"""FileSegment: a logical, append-only file segment in tiered storage."""

from __future__ import annotations

import abc

from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import ReadMode


class FileSegment(abc.ABC):
    """An append-only run of bytes, written by ``commit0`` and read by ``read0``.

    ``commit_position`` is how many bytes are durable in the object store;
    ``size`` equals it (a segment holds no bytes it has not committed: the
    upload buffer pool above it does the buffering).
    """

    path: SegmentPath

    @property
    @abc.abstractmethod
    def commit_position(self) -> int:
        """Bytes durable in the object store, from position 0."""

    @property
    def size(self) -> int:
        return self.commit_position

    @property
    def commit_size(self) -> int | None:
        """The most bytes one ``commit0`` should carry, or None for no preference.

        A writer that buffers appends (the upload buffer pool) cuts its
        commits to this size, so that each commit makes whole objects; with
        None it uses its own default.
        """
        return None

    @property
    def derived(self) -> bool:
        """Whether this segment's bytes can be rebuilt from another file's (a
        consume queue's from its commit log): a writer that buffers may hold
        them back longer than others (the upload buffer pool's ``chunk_wait``)."""
        return False

    @property
    @abc.abstractmethod
    def sealed(self) -> bool:
        """Whether the segment takes no more commits."""

    @abc.abstractmethod
    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        """Make ``data`` durable at ``position``, which must be the commit position.

        Raises ``CommitPositionError`` (carrying the position to resume from)
        for any other position, ``CommitFailed`` if only a prefix landed,
        ``SegmentFenced`` if another writer owns the segment.
        """

    @abc.abstractmethod
    async def read0(self, position: int, length: int) -> bytes:
        """Bytes ``[position, position + length)``, all within the commit position."""

    async def read_as0(self, position: int, length: int, mode: ReadMode) -> bytes | memoryview:
        """As :meth:`read0`, the bytes handed back as ``mode`` says (see
        :class:`~tieredstore.segment.reader.ReadMode`); segments that cannot, copy."""
        return await self.read0(position, length)

    @abc.abstractmethod
    async def seal(self, *, merge: bool | None = None) -> None:
        """Take no more commits and (unless ``merge`` is False) compact the
        segment. Idempotent; a later call finishes a seal begun without merge."""

    @abc.abstractmethod
    async def destroy(self) -> None:
        """Delete every object of the segment."""
