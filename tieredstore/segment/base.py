"""FileSegment: a logical, append-only file segment in tiered storage."""

from __future__ import annotations

import abc

from tieredstore.segment.path import SegmentPath


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

    async def read_view0(self, position: int, length: int) -> bytes | memoryview:
        """As :meth:`read0`, for a caller done with the bytes before it keeps
        anything of them (a decoder that copies what it returns): may be a view
        of what the segment's reader holds, alive while the view is."""
        return await self.read0(position, length)

    async def read_span0(self, position: int, length: int) -> bytes:
        """As :meth:`read0`, for a reader that checks the bytes itself and wants a
        few records out of large units (see ``SegmentReader.read_span``): segments
        that can, read just these bytes."""
        return await self.read0(position, length)

    @abc.abstractmethod
    async def seal(self, *, merge: bool | None = None) -> None:
        """Take no more commits and (unless ``merge`` is False) compact the
        segment. Idempotent; a later call finishes a seal begun without merge."""

    @abc.abstractmethod
    async def destroy(self) -> None:
        """Delete every object of the segment."""
