"""Reading a log entry's index: one ranged GET of its tail, a second for a long index.

A data entry's index lists its pieces and, in version 2, its commit records;
a checkpoint's lists the live ids below it and where each queue's state lies
(docs/log-objects.md, "Object layout" and "Version 2").
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.log.commit.checkpoint import CheckpointIndex, decode_checkpoint_index
from tieredstore.log.commit.records import CommitRecord, decode_records
from tieredstore.log.errors import LogCorrupt
from tieredstore.log.format import (
    CHECKPOINT,
    TAIL_READ,
    VERSION,
    LogFooter,
    Piece,
    check_index,
    decode_footer,
    decode_pieces,
)
from tieredstore.objectstore import ByteRange, ObjectStore
from tieredstore.objectstore.reads import read_again_if


@dataclass(frozen=True, slots=True)
class DataIndex:
    """A data entry's pieces and commit records (none in version 1)."""

    pieces: list[Piece]
    records: list[CommitRecord]
    version: int = VERSION


EntryIndex = DataIndex | CheckpointIndex


async def read_entry(store: ObjectStore, key: str, size: int) -> EntryIndex:
    """The index of the log entry at ``key`` (``size`` bytes, from its listing).

    An index that fails its checks is read again: only a failure that repeats
    raises :class:`LogCorrupt`.
    """
    return await read_again_if(LogCorrupt, lambda: _read_entry_once(store, key, size))


async def read_index(store: ObjectStore, key: str, size: int) -> list[Piece]:
    """The pieces of the data entry at ``key``, for a reader that does not fold
    commit records: an entry that holds any, or a checkpoint, is refused
    (:class:`LogCorrupt`), as a version 1 build refuses it."""
    found = await read_entry(store, key, size)
    if isinstance(found, CheckpointIndex) or found.version != VERSION:
        raise LogCorrupt(key, "a version 2 entry (commit records or a checkpoint): read it "
                              "through the committed state")
    return found.pieces


async def _read_entry_once(store: ObjectStore, key: str, size: int) -> EntryIndex:
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
    return decode_entry(index, footer, key=key)


def decode_entry(index: bytes | memoryview, footer: LogFooter, *, key: str) -> EntryIndex:
    """An entry's index, checked: its CRC, what it lists inside the data."""
    view = check_index(index, footer, key=key)
    if footer.kind == CHECKPOINT:
        if footer.piece_count:
            raise LogCorrupt(key, f"a checkpoint lists {footer.piece_count} pieces")
        return decode_checkpoint_index(view, footer, key=key)
    pieces, at = decode_pieces(view, footer, key=key)
    if footer.version == VERSION:
        if at != len(view):
            raise LogCorrupt(key, f"index holds {len(view) - at} bytes past its last piece")
        return DataIndex(pieces, [])
    return DataIndex(pieces, decode_records(view[at:], key=key), footer.version)
