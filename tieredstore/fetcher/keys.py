"""How the fetcher names a unit: in memory, among loads, and on disk."""

from __future__ import annotations

from tieredstore.segment.layout import ChunkRef

UnitKey = tuple[str, int, int]


def unit_key(unit: ChunkRef) -> UnitKey:
    """The cache key of a unit: which bytes of which object."""
    return (unit.key, unit.object_offset, unit.length)


def disk_key(key: UnitKey) -> str:
    """The disk tier's name for a unit."""
    return f"{key[0]}@{key[1]}+{key[2]}"
