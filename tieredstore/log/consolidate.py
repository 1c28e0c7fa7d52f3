"""Consolidation: the small log objects of a span rewritten as one.

Quiet queues make many small log objects. The writer still holds the bytes of
the pieces it landed since its last consolidation; every
``consolidate_interval`` seconds (or once it holds ``consolidate_bytes``) it
writes them again as one log object, one piece per run of a segment's
contiguous live pieces, segments in key order (so the pieces of neighbouring
queues lie together: a compaction reads a group of queues with one ranged GET
per consolidated object). The consolidated object is the next entry of the
series, like any group commit; when it lands each segment serves those bytes
from it (``ChunkedSegment.swap_borrowed``) and the small objects, left
without a live piece, are deleted in time. See docs/log-objects.md, "Consolidation".
"""

from __future__ import annotations

from collections.abc import Sequence

from tieredstore.filetype import FileType
from tieredstore.log.format import Piece
from tieredstore.segment.layout import ChunkRef

SegmentKey = tuple[str, int, FileType, int]  # topic, queue, file type, base offset
Held = tuple[SegmentKey, ChunkRef, bytes]  # a landed piece and its bytes


def consolidated_pieces(held: Sequence[Held]) -> list[tuple[Piece, bytes]]:
    """One piece per run of contiguous pieces of a segment, in segment order."""
    by_segment: dict[SegmentKey, list[tuple[ChunkRef, bytes]]] = {}
    for key, unit, data in held:
        by_segment.setdefault(key, []).append((unit, data))
    out: list[tuple[Piece, bytes]] = []
    for key in sorted(by_segment):
        run: list[tuple[ChunkRef, bytes]] = []
        for unit, data in sorted(by_segment[key], key=lambda held: held[0].position):
            if run and run[-1][0].end != unit.position:
                out.append(_joined(key, run))
                run = []
            run.append((unit, data))
        if run:
            out.append(_joined(key, run))
    return out


def _joined(key: SegmentKey, run: list[tuple[ChunkRef, bytes]]) -> tuple[Piece, bytes]:
    topic, queue_id, file_type, base = key
    data = b"".join(d for _, d in run)
    return Piece(topic, queue_id, file_type, base, run[0][0].position, len(data)), data
