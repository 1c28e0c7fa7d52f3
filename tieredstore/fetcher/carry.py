"""Carrying held units across a merge: the merged object's units from its chunks.

A merge writes a segment's chunks again as one object, unit for unit the same
bytes at the same positions. A reader that held those chunks (a tailing
consumer reading what this process just wrote) would otherwise GET them back
from the merged object. :func:`carry_units` builds each merged unit whose
bytes the memory tier holds whole, and checks it against the merged unit's
CRC32C (combined by the merge from the chunks' CRCs) before it is kept.
"""

from __future__ import annotations

from tieredstore.checksum import crc32c
from tieredstore.fetcher.keys import UnitKey, unit_key
from tieredstore.fetcher.memory import MemoryTier
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.path import SegmentPath


def carry_units(memory: MemoryTier[UnitKey, SegmentPath], old: SegmentLayout,
                new: SegmentLayout) -> list[tuple[ChunkRef, bytes | memoryview, bool]]:
    """The units of ``new`` whose bytes ``memory`` holds whole among the units of
    ``old``: each with its bytes and whether one of its parts was committed by
    this process (it stays for tailing readers)."""
    committed_keys = memory.committed
    held: list[tuple[ChunkRef, bytes | memoryview, bool]] = []
    for unit in old.units:
        if unit.missing:
            continue
        key = unit_key(unit)
        found = memory.get(key)
        if found is not None:
            held.append((unit, found[0], key in committed_keys))
    carried: list[tuple[ChunkRef, bytes | memoryview, bool]] = []
    i = 0
    for unit in new.units:
        if unit.crc32c is None or unit.missing:
            continue
        while i < len(held) and held[i][0].end <= unit.position:
            i += 1
        parts: list[bytes | memoryview] = []
        committed = False
        at, j = unit.position, i
        while at < unit.end and j < len(held) and held[j][0].position <= at:
            part, data, mine = held[j]
            parts.append(data[at - part.position : min(unit.end, part.end) - part.position])
            committed = committed or mine
            at = min(unit.end, part.end)
            j += 1
        if at != unit.end:
            continue  # not held whole: read from the merged object when asked
        data = b"".join(parts)
        if crc32c(data) == unit.crc32c:
            carried.append((unit, data, committed))
    return carried
