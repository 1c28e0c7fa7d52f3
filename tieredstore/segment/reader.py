"""Reading units: one checked GET per unit, and the reader protocol.

:class:`DirectReader` is the plain read path (no cache): the units a read
touches are fetched in parallel, each by one ranged GET of the whole unit and
checked against its CRC32C. The fetcher (``tieredstore.fetcher``) implements
the same :class:`SegmentReader` protocol with caches and read-ahead.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from typing import Protocol

from tieredstore.checksum import crc32c, parse_crc
from tieredstore.errors import (
    ChunkMissing,
    CorruptSegment,
    IntegrityError,
    InvalidRequest,
    ObjectNotFound,
)
from tieredstore.objectstore.base import ByteRange, ObjectData, ObjectInfo, ObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY, read_again_if
from tieredstore.segment.layout import ChunkRef, SegmentLayout, Slice
from tieredstore.segment.path import SegmentPath


class SegmentReader(Protocol):
    """How a segment gets its bytes back. A reader that holds nothing (no cache)
    keeps the defaults of :meth:`committed`, :meth:`forget` and :meth:`replaced`."""

    async def read(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes | memoryview:
        """Bytes ``[position, position + length)``, every unit checked: a read-only
        view of a unit's bytes when they lie in one unit (no copy), else joined."""
        ...

    async def read_span(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes:
        """Bytes ``[position, position + length)`` and no more: from units held in
        memory, else by ranged GETs of just these bytes (:func:`fetch_span`), not
        checked, for readers that check what they read themselves (records carry
        their own CRC) and want a few records out of large units."""
        ...

    def committed(self, path: SegmentPath, unit: ChunkRef, data: bytes) -> None:
        """A unit this process just wrote, and its bytes (for tailing readers)."""
        return None

    def forget(self, path: SegmentPath) -> None:
        """The segment was destroyed (or its objects replaced): drop what is held
        for it."""
        return None

    def replaced(self, path: SegmentPath, old: SegmentLayout, new: SegmentLayout) -> None:
        """The segment's units ``old`` were merged into ``new`` (the same bytes at the
        same positions): what is held of the old may serve the new; the rest
        goes, as by :meth:`forget`."""
        return None


class ReadMode(enum.Enum):
    """How a read hands back a segment's bytes, chosen in one place
    (:func:`read_as`) for every segment, pool and view."""

    COPY = "copy"  # every unit checked; bytes of their own, that keep no unit alive
    VIEW = "view"  # every unit checked; maybe a view of a unit the reader holds (no
    # copy), for a caller done with it before it keeps anything (a decoder that copies)
    SPAN = "span"  # just these bytes, unchecked (``read_span``): for a caller that
    # checks them itself (records carry their CRC) and wants a few out of large units


async def read_as(reader: SegmentReader, path: SegmentPath, layout: SegmentLayout,
                  position: int, length: int, *, mode: ReadMode) -> bytes | memoryview:
    """Bytes ``[position, position + length)`` of the segment at ``path`` as
    ``mode`` says."""
    read = reader.read_span if mode is ReadMode.SPAN else reader.read
    data = await read(path, layout, position, length)
    return data if mode is ReadMode.VIEW else bytes(data)


async def fetch_unit(store: ObjectStore, path: SegmentPath, unit: ChunkRef
                     ) -> tuple[bytes | memoryview, int]:
    """GET one whole unit and check it. Returns its bytes and CRC32C.

    A unit without a known CRC must be a whole chunk object; its CRC comes
    from the object metadata returned with the same GET. A unit that fails
    its check is read again (bits flipped or bytes cut short on the way are
    not damage in the bucket): only a failure that repeats raises. A hole
    raises :class:`CorruptSegment` at once. Both name the unit's range.
    """
    _check_not_hole(path, unit)
    return await read_again_if(IntegrityError, lambda: _fetch_unit_once(store, path, unit))


def _check_not_hole(path: SegmentPath, unit: ChunkRef) -> None:
    """A hole (no chunk holds the unit's bytes) raises :class:`CorruptSegment`."""
    if unit.missing:
        raise CorruptSegment(f"bytes [{unit.position}, {unit.end}) are missing: no chunk "
                             f"covers them (next entry {unit.key!r})", segment=str(path),
                             span=(unit.position, unit.end))


async def _get_range(store: ObjectStore, path: SegmentPath, unit: ChunkRef, start: int,
                     length: int, *, with_crc: bool = False) -> ObjectData:
    """GET bytes ``[start, start + length)`` of ``unit`` (from its start), exactly
    that many (``with_crc``: and their CRC32C): a missing object raises
    :class:`ChunkMissing`, a short one :class:`IntegrityError`, both naming the
    range."""
    segment = str(path)
    span = (unit.position + start, unit.position + start + length)
    get = store.get_object_with_crc if with_crc else store.get_object
    try:
        got = await get(unit.key, ByteRange(unit.object_offset + start, length))
    except ObjectNotFound:
        raise ChunkMissing(
            f"object {unit.key!r} holding [{unit.position}, {unit.end}) is missing",
            segment=segment, span=span,
        ) from None
    except InvalidRequest as exc:
        raise IntegrityError(
            f"object {unit.key!r} is shorter than its unit [{unit.position}, {unit.end}): {exc}",
            segment=segment, span=span,
        ) from None
    if len(got.data) != length:
        raise IntegrityError(
            f"object {unit.key!r} returned {len(got.data)} bytes for "
            f"[{span[0]}, {span[1]}) of unit [{unit.position}, {unit.end}), {length} asked",
            segment=segment, span=span,
        )
    return got


def chunk_crc(path: SegmentPath, unit: ChunkRef, info: ObjectInfo) -> int:
    """The CRC32C of a listed chunk whose CRC is not known yet, from its object
    metadata (``info``, of its GET or HEAD): the object must be the whole unit.
    Else :class:`IntegrityError`, naming the unit's range."""
    span = (unit.position, unit.end)
    if info.size != unit.length or not unit.whole_object:
        raise IntegrityError(f"chunk {unit.key!r} is {info.size} bytes, its unit {unit.length}",
                             segment=str(path), span=span)
    text = info.metadata.get(CRC_METADATA_KEY)
    if text is None:
        raise IntegrityError(f"chunk {unit.key!r} has no crc32c metadata",
                             segment=str(path), span=span)
    try:
        return parse_crc(text)
    except ValueError:
        raise IntegrityError(f"chunk {unit.key!r} has bad crc32c metadata {text!r}",
                             segment=str(path), span=span) from None


async def _fetch_unit_once(store: ObjectStore, path: SegmentPath, unit: ChunkRef
                           ) -> tuple[bytes | memoryview, int]:
    got = await _get_range(store, path, unit, 0, unit.length, with_crc=True)
    expected = chunk_crc(path, unit, got.info) if unit.crc32c is None else unit.crc32c
    actual = crc32c(got.data) if got.crc32c is None else got.crc32c
    if actual != expected:
        raise IntegrityError(
            f"bytes [{unit.position}, {unit.end}) from {unit.key!r} have CRC32C "
            f"{actual:08x}, expected {expected:08x}",
            segment=str(path), span=(unit.position, unit.end),
        )
    return got.data, actual


async def fetch_span(store: ObjectStore, path: SegmentPath, piece: Slice) -> bytes | memoryview:
    """GET bytes ``[piece.start, piece.end)`` of one unit, unchecked (the caller
    checks them); a hole, a missing object or a short answer raises as for
    :func:`fetch_unit`."""
    _check_not_hole(path, piece.unit)
    got = await _get_range(store, path, piece.unit, piece.start, piece.end - piece.start)
    return got.data


def assemble(slices: Sequence[Slice], datas: Sequence[bytes | memoryview]
             ) -> bytes | memoryview:
    """The wanted part of each unit's bytes: a view of one unit's, or joined
    (copying once)."""
    if len(slices) == 1:
        s = slices[0]
        data = datas[0]
        return data if (s.start, s.end) == (0, len(data)) else memoryview(data)[s.start : s.end]
    return b"".join(memoryview(d)[s.start : s.end] for s, d in zip(slices, datas, strict=True))


class DirectReader(SegmentReader):
    """Reads straight from the object store: parallel GETs, no cache."""

    def __init__(self, store: ObjectStore, *, concurrency: int = 16) -> None:
        self.store = store
        self._limit = asyncio.Semaphore(concurrency)

    async def _one(self, path: SegmentPath, unit: ChunkRef) -> bytes | memoryview:
        async with self._limit:
            data, _ = await fetch_unit(self.store, path, unit)
            return data

    async def read(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes | memoryview:
        # docstring inherited
        slices = layout.slices(position, length)
        datas = await asyncio.gather(*(self._one(path, s.unit) for s in slices))
        return assemble(slices, datas)

    async def read_span(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes:
        # docstring inherited
        return b"".join(await asyncio.gather(*(self._span(path, s)
                                               for s in layout.slices(position, length))))

    async def _span(self, path: SegmentPath, piece: Slice) -> bytes | memoryview:
        async with self._limit:
            return await fetch_span(self.store, path, piece)
