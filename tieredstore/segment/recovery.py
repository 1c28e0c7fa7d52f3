"""Rebuild a segment's layout from the bucket: the bucket is the truth.

Opening a segment lists its prefix, every page. What the listing holds says
what state the segment is in:

- a ``segment`` object: sealed and merged. Its unit table (one ranged GET of
  the tail) is the layout. Chunks or a ``sealed`` marker still there are
  leftovers of a cleanup that did not finish; they are deleted again.
- a ``sealed`` marker and no ``segment``: a seal was under way. The chunks
  must cover exactly the size the marker records; the merge is resumed.
- neither: an open segment. The chunks must be contiguous from position 0.

A gap or an overlap between chunks, a chunk past a sealed size, a key that is
none of these: each is a :class:`CorruptSegment` naming what is wrong, never
a silently shorter segment.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from tieredstore.errors import CorruptSegment, InvalidRequest
from tieredstore.objectstore.base import ByteRange, ObjectInfo, ObjectStore, UploadInfo
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.path import MERGED_NAME, SEALED_NAME, SegmentPath, parse_chunk_name
from tieredstore.segment.trailer import FOOTER_SIZE, decode_footer, decode_table

TAIL_READ = 64 * 1024


class SegmentState(enum.Enum):
    OPEN = "open"
    SEALING = "sealing"  # sealed marker written, merge not finished
    SEALED = "sealed"


@dataclass(slots=True)
class Listing:
    """A segment prefix's objects, sorted into what they are."""

    chunks: list[ObjectInfo] = field(default_factory=list)
    merged: ObjectInfo | None = None
    marker: ObjectInfo | None = None


@dataclass(slots=True)
class Recovered:
    state: SegmentState
    layout: SegmentLayout
    sealed_size: int | None
    leftovers: list[str]
    uploads: list[UploadInfo]


def classify(path: SegmentPath, objects: Sequence[ObjectInfo]) -> Listing:
    """Sort a listing of ``path.base_dir``; a foreign key is an error naming it."""
    listing = Listing()
    for obj in objects:
        name = obj.key[len(path.base_dir) :]
        if name == MERGED_NAME:
            listing.merged = obj
        elif name == SEALED_NAME:
            listing.marker = obj
        elif parse_chunk_name(name) is not None:
            listing.chunks.append(obj)
        else:
            raise CorruptSegment(
                f"foreign object {obj.key!r} in the segment's prefix; "
                "move it away, tieredstore does not delete what it did not write",
                segment=str(path),
            )
    listing.chunks.sort(key=lambda o: o.key)
    return listing


def chunk_layout(path: SegmentPath, chunks: Sequence[ObjectInfo]) -> SegmentLayout:
    """Chunks as a layout: contiguous from 0, or a CorruptSegment naming the hole."""
    layout = SegmentLayout()
    expected = 0
    for obj in chunks:
        position = parse_chunk_name(obj.key[len(path.base_dir) :])
        assert position is not None
        if position > expected:
            raise CorruptSegment(
                f"bytes [{expected}, {position}) are missing: no chunk covers them "
                f"(next chunk {obj.key!r})",
                segment=str(path),
            )
        if position < expected:
            raise CorruptSegment(
                f"chunk {obj.key!r} at {position} overlaps bytes up to {expected}",
                segment=str(path),
            )
        if obj.size == 0:
            raise CorruptSegment(f"chunk {obj.key!r} is empty", segment=str(path))
        layout.append(ChunkRef(position, obj.size, obj.key))
        expected = position + obj.size
    return layout


def encode_marker(size: int) -> bytes:
    return json.dumps({"size": size, "format": "sealed-v1"}).encode()


def decode_marker(path: SegmentPath, data: bytes) -> int:
    try:
        size = json.loads(data)["size"]
    except (ValueError, KeyError, TypeError):
        raise CorruptSegment(f"sealed marker {path.sealed_key!r} is unreadable",
                             segment=str(path)) from None
    if not isinstance(size, int) or size < 0:
        raise CorruptSegment(f"sealed marker records size {size!r}", segment=str(path))
    return size


async def read_merged_units(store: ObjectStore, path: SegmentPath, size: int) -> list[ChunkRef]:
    """The unit table of a merged object of ``size`` bytes: usually one GET."""
    segment = str(path)
    if size < FOOTER_SIZE:
        raise CorruptSegment(f"merged object is {size} bytes, too short", segment=segment)
    start = max(0, size - TAIL_READ)
    try:
        tail = await store.get(path.merged_key, ByteRange(start, size - start))
    except InvalidRequest:
        raise CorruptSegment("merged object is shorter than listed", segment=segment) from None
    footer = decode_footer(tail, segment=segment)
    if footer.data_size + footer.trailer_size != size:
        raise CorruptSegment(
            f"merged object is {size} bytes, its footer says "
            f"{footer.data_size} data + {footer.trailer_size} trailer",
            segment=segment,
        )
    table_start = footer.data_size
    if table_start >= start:
        table = tail[table_start - start : len(tail) - FOOTER_SIZE]
    else:
        table = await store.get(path.merged_key, ByteRange(table_start, footer.table_size))
    return decode_table(table, footer, path.merged_key, segment=segment)


async def recover_segment(store: ObjectStore, path: SegmentPath) -> Recovered:
    """List the segment's prefix and rebuild its state and layout."""
    listing = classify(path, await store.list_all(path.base_dir))
    chunk_keys = [c.key for c in listing.chunks]
    marker_keys = [listing.marker.key] if listing.marker else []
    # Uploads exist only while a seal is under way: the marker goes last.
    uploads = (
        await store.list_multipart_uploads(path.base_dir) if listing.marker is not None else []
    )
    if listing.merged is not None:
        units = await read_merged_units(store, path, listing.merged.size)
        return Recovered(SegmentState.SEALED, SegmentLayout(units), units[-1].end if units else 0,
                         chunk_keys + marker_keys, uploads)
    layout = chunk_layout(path, listing.chunks)
    if listing.marker is None:
        return Recovered(SegmentState.OPEN, layout, None, [], uploads)
    sealed_size = decode_marker(path, await store.get(listing.marker.key))
    if layout.size != sealed_size:
        raise CorruptSegment(
            f"sealed at {sealed_size} bytes but the chunks cover [0, {layout.size})"
            + (f": bytes [{layout.size}, {sealed_size}) are missing"
               if layout.size < sealed_size else ""),
            segment=str(path),
        )
    return Recovered(SegmentState.SEALING, layout, sealed_size, [], uploads)
