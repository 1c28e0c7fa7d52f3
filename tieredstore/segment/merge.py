"""Execute a merge: chunks -> one ``segment`` object by multipart upload.

The planner's parts go through the one writer of large objects
(:class:`~tieredstore.objectstore.multipart.ObjectWriter`): copy parts
server-side (UploadPartCopy with CopySourceRange), upload parts built from
chunk bytes fetched through the segment's reader (so chunks this process just
wrote come from its cache) and checked against their CRC32C before they are
sent. The unit table goes at the end of the last part. Completion is
conditional (``If-None-Match: *``): a merged object found there must hold our
units, else the segment is fenced; any failure aborts the upload. The chunks
are deleted by the caller once the merge has landed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from tieredstore.errors import CorruptSegment, SegmentFenced
from tieredstore.objectstore.base import MAX_PARTS, ByteRange, ObjectStore
from tieredstore.objectstore.multipart import ObjectWriter
from tieredstore.segment.layout import ChunkRef, SegmentLayout, coalesce_units
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.planner import PartKind, PlannedPart, check_plan, plan_merge
from tieredstore.segment.reader import SegmentReader, chunk_crc
from tieredstore.segment.recovery import read_merged_units
from tieredstore.segment.trailer import encode_trailer

log = logging.getLogger(__name__)

FORMAT_METADATA = {"tieredstore-format": "segment-v1"}


@dataclass(frozen=True, slots=True)
class MergeStats:
    """What a merge cost, in requests and bytes."""

    parts: int
    copy_parts: int
    upload_parts: int
    bytes_copied: int
    bytes_reuploaded: int
    heads: int


async def learn_crcs(store: ObjectStore, path: SegmentPath, layout: SegmentLayout, *,
                     concurrency: int = 16) -> int:
    """HEAD the chunks whose CRC32C is not known yet. Returns HEADs issued."""
    missing = [i for i, u in enumerate(layout.units) if u.crc32c is None]
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        unit = layout.units[i]
        async with limit:
            info = await store.head(unit.key)
        layout.with_crc(i, chunk_crc(path, unit, info))

    await asyncio.gather(*(one(i) for i in missing))
    return len(missing)


async def merge_chunks(
    store: ObjectStore,
    path: SegmentPath,
    layout: SegmentLayout,
    reader: SegmentReader,
    *,
    unit_target: int,
    concurrency: int = 4,
    metadata: Mapping[str, str] | None = None,
) -> tuple[list[ChunkRef], MergeStats]:
    """Write ``path.merged_key`` from the chunks of ``layout``; return its units.

    ``metadata`` is added to the merged object's user metadata."""
    segment = str(path)
    if layout.holes:
        hole = layout.holes[0]
        raise CorruptSegment(f"cannot merge: bytes [{hole.position}, {hole.end}) are missing "
                             "from the bucket (the segment stays readable as chunks)",
                             segment=segment, span=(hole.position, hole.end))
    heads = await learn_crcs(store, path, layout)
    chunks = list(layout.units)
    plan = plan_merge([c.length for c in chunks], reserve_parts=1)
    units = coalesce_units([(c.length, c.crc32c or 0) for c in chunks], path.merged_key,
                           unit_target)
    trailer = encode_trailer(units)
    if not plan or plan[-1].kind is PartKind.COPY:
        plan.append(PlannedPart(len(plan) + 1, PartKind.UPLOAD, ()))
    check_plan(plan, max_parts=MAX_PARTS)

    writer = ObjectWriter(store, path.merged_key, concurrency=concurrency,
                          metadata={**(metadata or {}), **FORMAT_METADATA})

    def read_part(part: PlannedPart) -> Callable[[], Awaitable[bytes]]:
        async def read() -> bytes:
            pieces: list[bytes | memoryview] = []
            for piece in part.pieces:
                chunk = chunks[piece.chunk]
                # The reader checks the whole chunk's CRC before we use any of it.
                data = await reader.read(path, layout, chunk.position, chunk.length)
                pieces.append(data[piece.start : piece.start + piece.length])
            if part.number == len(plan):
                pieces.append(trailer)
            return b"".join(pieces)
        return read

    async def ours() -> bool:
        await check_existing_merge(store, path, units)  # or SegmentFenced
        return True

    try:
        for part in plan:
            if part.kind is PartKind.COPY:
                (piece,) = part.pieces
                chunk = chunks[piece.chunk]
                await writer.copy(chunk.key, ByteRange(chunk.object_offset + piece.start,
                                                       piece.length))
            else:
                size = part.size + (len(trailer) if part.number == len(plan) else 0)
                await writer.write_part(size, read_part(part))
        await writer.finish(is_ours=ours)
    except BaseException:
        await writer.abort()
        raise
    copy = [p for p in plan if p.kind is PartKind.COPY]
    stats = MergeStats(
        parts=len(plan),
        copy_parts=len(copy),
        upload_parts=len(plan) - len(copy),
        bytes_copied=sum(p.size for p in copy),
        bytes_reuploaded=sum(p.size for p in plan if p.kind is PartKind.UPLOAD),
        heads=heads,
    )
    log.debug("merged %s: %s", segment, stats)
    return units, stats


async def check_existing_merge(
    store: ObjectStore, path: SegmentPath, units: Sequence[ChunkRef]
) -> None:
    """The merged object already there holds exactly ``units``, or we are fenced."""
    info = await store.head(path.merged_key)
    try:
        existing = await read_merged_units(store, path, info.size)
    except CorruptSegment as exc:
        raise SegmentFenced(f"a different merged object exists: {exc}",
                            segment=str(path)) from exc
    if [(u.position, u.length, u.crc32c) for u in existing] != [
        (u.position, u.length, u.crc32c) for u in units
    ]:
        raise SegmentFenced("a different merged object exists: another writer sealed it",
                            segment=str(path))
