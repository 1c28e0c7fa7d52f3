"""Rebuild a segment's layout from the bucket: the bucket is the truth.

Opening a segment lists its prefix, every page. What the listing holds says
what state the segment is in:

- a ``segment`` object: sealed and merged. Its unit table (one ranged GET of
  the tail) is the layout. Chunks or a ``sealed`` marker still there are
  leftovers of a cleanup that did not finish; they are deleted again.
- a ``sealed`` marker and no ``segment``: a seal was under way. The chunks
  must cover exactly the size the marker records; the merge is resumed.
- neither: the chunk series (data chunks and zero-byte fence and seal
  entries, see docs/chunks.md) must run on from ``(0, 0)`` without a missing
  entry. It ends in a ``seal`` entry (one HEAD tells) when a seal was under
  way and its marker not yet written; otherwise the segment is open.

A gap or an overlap between chunks, a chunk past a sealed size: each is a
:class:`CorruptSegment` naming what is wrong, never a silently shorter
segment. A key that is none of these (someone else's object) is set aside,
logged and reported in ``foreign``, never read and never deleted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from tieredstore.errors import CorruptSegment, InvalidRequest, ObjectNotFound
from tieredstore.objectstore.base import ByteRange, ObjectInfo, ObjectStore, UploadInfo
from tieredstore.objectstore.reads import read_again_if, read_intact
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.listing import SegmentListing, SegmentState, list_segment
from tieredstore.segment.path import EntryId, SegmentPath, parse_chunk_name
from tieredstore.segment.trailer import FOOTER_SIZE, decode_footer, decode_table

log = logging.getLogger(__name__)

TAIL_READ = 64 * 1024
LIST_ATTEMPTS = 3
ENTRY_METADATA_KEY = "entry"
WRITER_METADATA_KEY = "writer"
FENCE_ENTRY = "fence"
SEAL_ENTRY = "seal"


@dataclass(slots=True)
class Series:
    """A segment's chunk series as listed: the data chunks' layout, the id the
    next entry takes, and the last entry's key if it is zero bytes (a fence or
    a seal)."""

    layout: SegmentLayout = field(default_factory=SegmentLayout)
    next_entry: EntryId = field(default_factory=lambda: EntryId(0))
    tail_zero: str | None = None


@dataclass(slots=True)
class Recovered:
    state: SegmentState
    layout: SegmentLayout
    leftovers: list[str]
    uploads: list[UploadInfo]
    series: Series = field(default_factory=Series)
    foreign: list[str] = field(default_factory=list)  # keys tieredstore did not write


def chunk_series(path: SegmentPath, chunks: Sequence[ObjectInfo], *, holes: bool = False
                 ) -> Series:
    """The series of listed chunk entries (sorted by key): each must be the one
    that follows its predecessor, or a CorruptSegment names the hole.

    With ``holes`` a gap between two listed entries (a chunk deleted, or
    emptied, in the bucket) becomes a hole unit of the layout instead, and a
    missing zero-byte entry is stepped over: the rest of the segment reads.
    """
    series = Series()
    for obj in chunks:
        entry = parse_chunk_name(obj.key[len(path.base_dir) :])
        assert entry is not None
        expected = series.next_entry
        if entry.position > expected.position:
            if not holes:
                raise CorruptSegment(
                    f"bytes [{expected.position}, {entry.position}) are missing: no chunk "
                    f"covers them (next chunk {obj.key!r})",
                    segment=str(path), span=(expected.position, entry.position),
                )
            series.layout.append(ChunkRef(expected.position, entry.position - expected.position,
                                          obj.key, missing=True))
        elif entry.position < expected.position:
            raise CorruptSegment(
                f"chunk {obj.key!r} at {entry.position} overlaps bytes up to "
                f"{expected.position}",
                segment=str(path),
            )
        elif entry.slot != expected.slot and not (holes and entry.slot > expected.slot):
            raise CorruptSegment(
                f"chunk {obj.key!r} is not the entry after {path.entry_key(expected)!r}: "
                f"an entry at {expected.position} is missing or a chunk there is empty",
                segment=str(path),
            )
        if obj.size:
            series.layout.append(ChunkRef(entry.position, obj.size, obj.key))
        series.next_entry = entry.after(obj.size)
        series.tail_zero = None if obj.size else obj.key
    return series


async def is_seal(store: ObjectStore, key: str) -> bool | None:
    """Whether the zero-byte entry ``key`` is a seal, not a fence (one HEAD);
    None if it is gone."""
    try:
        info = await store.head(key)
    except ObjectNotFound:
        return None
    return info.metadata.get(ENTRY_METADATA_KEY) == SEAL_ENTRY


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
        tail = bytes(await store.get(path.merged_key, ByteRange(start, size - start)))
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
        table = bytes(await store.get(path.merged_key, ByteRange(table_start, footer.table_size)))
    return decode_table(table, footer, path.merged_key, segment=segment)


async def recover_segment(store: ObjectStore, path: SegmentPath,
                          listed: SegmentListing | None = None) -> Recovered:
    """List the segment's prefix and rebuild its state and layout; ``listed``:
    a listing of it made already (a reader that listed the whole flat file),
    taken for the first look instead of listing again.

    A hole that is still there after :data:`LIST_ATTEMPTS` listings is damage
    in the bucket: the segment opens with the hole in its layout (reading it
    raises, naming the range; the rest reads) and the log says so.
    """
    for attempt in range(LIST_ATTEMPTS + 1):
        holes = attempt == LIST_ATTEMPTS
        try:
            recovered = await _recover_once(store, path, holes=holes,
                                            listed=listed if attempt == 0 else None)
        except CorruptSegment:
            # A listing is no snapshot: one taken while a merge's cleanup deleted
            # chunks can show a hole the bucket never had. A real one stays.
            if holes:
                raise
            continue
        if recovered is not None:
            if recovered.layout.holes:
                log.error("%s: bytes missing from the bucket, read around: %s", path, ", ".join(
                    f"[{u.position}, {u.end})" for u in recovered.layout.holes))
            return recovered
    raise CorruptSegment(f"the segment kept changing while it was listed ({LIST_ATTEMPTS} "
                         "attempts)", segment=str(path))


async def _recover_once(store: ObjectStore, path: SegmentPath, *, holes: bool,
                        listed: SegmentListing | None = None) -> Recovered | None:
    listing = await list_segment(store, path) if listed is None else listed
    recovered = await _from_listing(store, path, listing, holes=holes)
    if recovered is not None and listing.foreign:
        log.warning("%s: ignoring object(s) tieredstore did not write: %s", path,
                    ", ".join(listing.foreign))
        recovered.foreign = listing.foreign
    return recovered


async def _from_listing(store: ObjectStore, path: SegmentPath, listing: SegmentListing, *,
                        holes: bool) -> Recovered | None:
    # Uploads exist only while a seal is under way: the marker goes last.
    uploads = (
        await store.list_multipart_uploads(path.base_dir) if listing.marker is not None else []
    )
    if listing.merged is not None:
        units = await read_merged_units(store, path, listing.merged.size)
        # Zero-byte entries stay (fences); the last may be a seal entry whose
        # cleanup a crash interrupted: a repairing open looks (one HEAD).
        last = listing.chunks[-1] if listing.chunks else None
        remains = Series(tail_zero=last.key if last is not None and not last.size else None)
        return Recovered(SegmentState.SEALED, SegmentLayout(units),
                         [o.key for o in listing.leftovers], uploads, remains)
    series = chunk_series(path, listing.chunks, holes=holes)
    layout = series.layout
    if listing.marker is None:
        # Whether the last entry is a seal (one HEAD, only when it is zero bytes);
        # None if it is gone (the segment was destroyed meanwhile: list again).
        sealed = series.tail_zero is not None and await is_seal(store, series.tail_zero)
        if sealed is None:
            return None
        if sealed:
            return Recovered(SegmentState.SEALING, layout, [], uploads, series)
        return Recovered(SegmentState.OPEN, layout, [], uploads, series)
    marker_key = listing.marker.key

    async def read_marker() -> int:
        got = await store.get_object(marker_key)
        if not read_intact(got.data, dict(got.info.metadata)):
            raise CorruptSegment(f"sealed marker {marker_key!r} fails its CRC32C",
                                 segment=str(path))
        return decode_marker(path, bytes(got.data))

    try:
        # A damaged read (a flipped bit on the way) is read again: only damage
        # that repeats makes the segment corrupt.
        sealed_size = await read_again_if(CorruptSegment, read_marker)
    except ObjectNotFound:
        return None  # a merge's cleanup deleted it since the listing: list again
    if layout.size != sealed_size:
        raise CorruptSegment(
            f"sealed at {sealed_size} bytes but the chunks cover [0, {layout.size})"
            + (f": bytes [{layout.size}, {sealed_size}) are missing"
               if layout.size < sealed_size else ""),
            segment=str(path),
        )
    return Recovered(SegmentState.SEALING, layout, [], uploads, series)
