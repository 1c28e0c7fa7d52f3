"""Reading a log object's index: one ranged GET of its tail, a second for a long index."""

from __future__ import annotations

from tieredstore.log.errors import LogCorrupt
from tieredstore.log.format import TAIL_READ, Piece, decode_footer, decode_index
from tieredstore.objectstore import ByteRange, ObjectStore
from tieredstore.objectstore.reads import read_again_if


async def read_index(store: ObjectStore, key: str, size: int) -> list[Piece]:
    """The pieces of the log object at ``key`` (``size`` bytes, from its listing).

    An index that fails its checks is read again: only a failure that repeats
    raises :class:`LogCorrupt`.
    """
    return await read_again_if(LogCorrupt, lambda: _read_index_once(store, key, size))


async def _read_index_once(store: ObjectStore, key: str, size: int) -> list[Piece]:
    start = max(0, size - TAIL_READ)
    tail = await store.get(key, ByteRange(start, size - start))
    if len(tail) != size - start:
        raise LogCorrupt(key, f"read {len(tail)} bytes of its last {size - start}")
    footer = decode_footer(tail, key=key, size=size)
    if footer.index_offset >= start:
        at = footer.index_offset - start
        index: bytes | memoryview = memoryview(tail)[at : at + footer.index_length]
    else:
        index = await store.get(key, ByteRange(footer.index_offset, footer.index_length))
    return decode_index(index, footer, key=key)
