"""Compaction by age, in groups: one ranged GET per log object for a group of segments.

A compaction pass takes the segments whose pieces are due in key order (the
order of a consolidated object's pieces), in groups of at most
``log_compact_bytes`` of log bytes, and before writing a group's chunks reads
what the group needs from each log object with one ranged GET, each piece
checked against its CRC, into the segments' reader (docs/log-objects.md,
"Compaction"). A failed read only costs the compaction its own reads.
"""

from __future__ import annotations

import logging
from collections.abc import Set

from tieredstore.checksum import crc32c
from tieredstore.errors import TieredStoreError
from tieredstore.log.keys import LogPath
from tieredstore.log.pieces import segment_key
from tieredstore.objectstore import ByteRange, ObjectStore
from tieredstore.segment import ChunkedSegment
from tieredstore.segment.layout import ChunkRef

log = logging.getLogger(__name__)


def groups(segments: list[ChunkedSegment], limit: int) -> list[list[ChunkedSegment]]:
    """``segments`` in key order, in groups of at most ``limit`` log bytes (a
    segment alone may hold more)."""
    out: list[list[ChunkedSegment]] = []
    size = 0
    for segment in sorted(segments, key=lambda s: segment_key(s.path)):
        if not out or (size and size + segment.borrowed_bytes > limit):
            out.append([])
            size = 0
        out[-1].append(segment)
        size += segment.borrowed_bytes
    return out


async def prefetch(store: ObjectStore, path: LogPath, group: list[ChunkedSegment],
                   recent: Set[str]) -> None:
    """Read the log pieces of ``group`` with one ranged GET per log object, except
    those in ``recent`` objects (landed since the last consolidation: held in
    memory), and hand each checked piece to its segment's reader."""
    wanted: dict[str, list[tuple[ChunkedSegment, ChunkRef]]] = {}
    for segment in group:
        for unit in segment.layout.units:
            if unit.key not in recent and path.parse(unit.key) is not None:
                wanted.setdefault(unit.key, []).append((segment, unit))
    for key, units in wanted.items():
        start = min(u.object_offset for _, u in units)
        end = max(u.object_offset + u.length for _, u in units)
        try:
            data = await store.get(key, ByteRange(start, end - start))
        except TieredStoreError as exc:
            log.info("prefetch of %s for compaction failed: %s", key, exc)
            continue
        for segment, unit in units:
            at = unit.object_offset - start
            part = bytes(data[at : at + unit.length])
            if len(part) == unit.length and crc32c(part) == unit.crc32c:
                segment.reader.committed(segment.path, unit, part)
