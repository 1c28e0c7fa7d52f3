"""The frame of :class:`~tieredstore.testing.SegmentReaderTests`: what a
subclass provides, and the segments the groups of cases write and damage."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import SegmentError
from tieredstore.filetype import FileType
from tieredstore.objectstore.backends.memory import MemoryObjectStore
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import SegmentReader
from tieredstore.testing._objectstore_base import StoreSuite, payload

# Unit sizes of the small segments most tests read: single bytes beside larger
# units, so that ranges start and end on, just before and just after boundaries.
SIZES = (1, 5, 16, 1, 32, 9)
# Bytes before the first unit in a merged object (its units' object_offset).
_HEADER = 7


def kit_path(base: int = 0) -> SegmentPath:
    return SegmentPath("kit", "broker", "topic", 0, FileType.COMMIT_LOG, base, prefix="kit")


PATH = kit_path()  # the segment most cases write


async def write_chunks(store: ObjectStore, path: SegmentPath, sizes: Sequence[int], *,
                       seed: int = 0, known_crc: bool = True) -> tuple[SegmentLayout, bytes]:
    """One chunk object per unit, each with its CRC in its metadata (as commit0 writes
    them); the units carry the CRC unless ``known_crc`` is False (as listed)."""
    data = payload(sum(sizes), seed)
    layout = SegmentLayout()
    position = 0
    for size in sizes:
        body = data[position : position + size]
        key = path.chunk_key(position)
        crc = crc32c(body)
        await store.put(key, body, metadata={CRC_METADATA_KEY: format_crc(crc)})
        layout.append(ChunkRef(position, size, key, 0, crc if known_crc else None))
        position += size
    return layout, data


async def write_merged(store: ObjectStore, path: SegmentPath, sizes: Sequence[int], *,
                       seed: int = 0) -> tuple[SegmentLayout, bytes]:
    """One object holding every unit after a header, as a merged segment is."""
    data = payload(sum(sizes), seed)
    key = path.merged_key
    await store.put(key, b"H" * _HEADER + data + b"trailer")
    layout = SegmentLayout()
    position = 0
    for size in sizes:
        body = data[position : position + size]
        layout.append(ChunkRef(position, size, key, _HEADER + position, crc32c(body)))
        position += size
    return layout, data


async def flip(store: ObjectStore, key: str, offset: int) -> None:
    """Flip one bit of the stored object, keeping its metadata."""
    got = await store.get_object(key)
    body = bytearray(got.data)
    body[offset] ^= 0x10
    await store.put(key, bytes(body), metadata=dict(got.info.metadata))


def all_ranges(size: int) -> list[tuple[int, int]]:
    """Every (position, length) with length >= 1 inside ``[0, size)``."""
    return [(p, n) for p in range(size) for n in range(1, size - p + 1)]


def check_error(error: SegmentError, path: SegmentPath, unit: ChunkRef) -> None:
    assert error.span == (unit.position, unit.end), (error.span, unit, error)
    assert error.segment == str(path), (error.segment, str(path))



class SegmentReaderSuite(StoreSuite):
    """What every group of SegmentReader cases stands on: the reader a
    subclass builds, over the store it writes segments to."""

    async def make_reader(self, store: ObjectStore) -> SegmentReader:
        """A new reader over ``store``. Each test calls it once per store."""
        raise NotImplementedError(f"{type(self).__name__} must define make_reader()")

    async def close_reader(self, reader: SegmentReader) -> None:
        """Release a reader; by default awaits its ``close()`` if it has one."""
        close: Any = getattr(reader, "close", None)
        if close is not None:
            await close()

    async def make_store(self) -> ObjectStore:
        """The store the segments are written to (a new ``MemoryObjectStore``)."""
        return MemoryObjectStore()

    @contextlib.asynccontextmanager
    async def reading(self, store: ObjectStore | None = None
                      ) -> AsyncIterator[tuple[ObjectStore, SegmentReader]]:
        """A store (``make_store``'s unless given) and a reader over it, closed after."""
        async with contextlib.AsyncExitStack() as stack:
            if store is None:
                store = await stack.enter_async_context(self.store())
            reader = await self.make_reader(store)
            stack.push_async_callback(self.close_reader, reader)
            yield store, reader
