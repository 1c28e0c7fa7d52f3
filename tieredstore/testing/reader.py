"""SegmentReaderTests: the SegmentReader contract, as a suite a reader subclasses.

A :class:`tieredstore.segment.SegmentReader` turns a segment's layout (its
units: runs of bytes in one object, each checked by one CRC32C) back into
bytes. :class:`tieredstore.segment.DirectReader` and
:class:`tieredstore.fetcher.Fetcher` are two; a third-party reader (another
cache, another transport) runs this suite to show it keeps the contract:

* ``read`` returns exactly the bytes committed, for any range across units;
* every unit is checked: a byte changed in the bucket raises
  ``IntegrityError``, a short object ``IntegrityError``, a missing object
  ``ChunkMissing``, a hole (``ChunkRef(missing=True)``) ``CorruptSegment``,
  each with ``.span``, the unit's ``[position, end)``, and ``.segment``;
  a check failure that does not repeat (a flip on the wire) is read again;
* ``committed`` and ``forget`` never break later reads, and after ``forget``
  nothing held for the segment is served again.

A subclass defines :meth:`SegmentReaderTests.make_reader`; the store under it
is a ``MemoryObjectStore`` unless it overrides :meth:`SegmentReaderTests.make_store`::

    from tieredstore.objectstore import ObjectStore
    from tieredstore.segment import SegmentReader
    from tieredstore.testing import SegmentReaderTests
    from my_package import MyReader

    class TestMyReader(SegmentReaderTests):
        async def make_reader(self, store: ObjectStore) -> SegmentReader:
            return MyReader(store)

The tests are coroutines: run them with pytest-asyncio (auto mode, or
``pytestmark = pytest.mark.asyncio`` on the subclass). A reader with an async
``close()`` is closed after each test (see :meth:`SegmentReaderTests.close_reader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import (
    ChunkMissing,
    CorruptSegment,
    IntegrityError,
    SegmentError,
)
from tieredstore.objectstore.base import ByteRange, ObjectData, ObjectStore
from tieredstore.objectstore.memory import MemoryObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment.chunked import ChunkedSegment, SegmentOptions
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.path import FileType, SegmentPath
from tieredstore.segment.reader import SegmentReader
from tieredstore.testing._check import raises
from tieredstore.testing.forwarding import ForwardingObjectStore

__all__ = ["SegmentReaderTests"]

# Unit sizes of the small segments most tests read: single bytes beside larger
# units, so that ranges start and end on, just before and just after boundaries.
_SIZES = (1, 5, 16, 1, 32, 9)
# Bytes before the first unit in a merged object (its units' object_offset).
_HEADER = 7


def _path(base: int = 0) -> SegmentPath:
    return SegmentPath("kit", "broker", "topic", 0, FileType.COMMIT_LOG, base, prefix="kit")


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


async def _write_chunks(store: ObjectStore, path: SegmentPath, sizes: Sequence[int], *,
                        seed: int = 0, known_crc: bool = True) -> tuple[SegmentLayout, bytes]:
    """One chunk object per unit, each with its CRC in its metadata (as commit0 writes
    them); the units carry the CRC unless ``known_crc`` is False (as listed)."""
    data = _payload(sum(sizes), seed)
    layout = SegmentLayout()
    position = 0
    for size in sizes:
        body = data[position : position + size]
        key = path.chunk_key(position)
        crc = crc32c(body)
        await store.put(key, body, metadata={CRC_METADATA_KEY: format_crc(crc)})
        layout.append(ChunkRef(position, size, key, 0, crc if known_crc else None))
        position += size
    return layout, data


async def _write_merged(store: ObjectStore, path: SegmentPath, sizes: Sequence[int], *,
                        seed: int = 0) -> tuple[SegmentLayout, bytes]:
    """One object holding every unit after a header, as a merged segment is."""
    data = _payload(sum(sizes), seed)
    key = path.merged_key
    await store.put(key, b"H" * _HEADER + data + b"trailer")
    layout = SegmentLayout()
    position = 0
    for size in sizes:
        body = data[position : position + size]
        layout.append(ChunkRef(position, size, key, _HEADER + position, crc32c(body)))
        position += size
    return layout, data


async def _flip(store: ObjectStore, key: str, offset: int) -> None:
    """Flip one bit of the stored object, keeping its metadata."""
    got = await store.get_object(key)
    body = bytearray(got.data)
    body[offset] ^= 0x10
    await store.put(key, bytes(body), metadata=dict(got.info.metadata))


def _ranges(size: int) -> list[tuple[int, int]]:
    """Every (position, length) with length >= 1 inside ``[0, size)``."""
    return [(p, n) for p in range(size) for n in range(1, size - p + 1)]


def _check_error(error: SegmentError, path: SegmentPath, unit: ChunkRef) -> None:
    assert error.span == (unit.position, unit.end), (error.span, unit, error)
    assert error.segment == str(path), (error.segment, str(path))


class _FlipOnce(ForwardingObjectStore):
    """Flips one bit in the first GET of each key in ``keys``, then reads true."""

    def __init__(self, inner: ObjectStore, keys: set[str]) -> None:
        super().__init__(inner)
        self.pending = set(keys)

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got = await super().get_object(key, byte_range)
        if key in self.pending and got.data:
            self.pending.discard(key)
            body = bytearray(got.data)
            body[0] ^= 0x01
            return ObjectData(bytes(body), got.info)
        return got


class SegmentReaderTests:
    """The SegmentReader conformance suite. Subclass it and define :meth:`make_reader`."""

    # --- what a subclass provides ---------------------------------------------------

    async def make_reader(self, store: ObjectStore) -> SegmentReader:
        """A new reader over ``store``. Each test calls it once per store."""
        raise NotImplementedError(f"{type(self).__name__} must define make_reader()")

    async def close_reader(self, reader: SegmentReader) -> None:
        """Release a reader; by default awaits its ``close()`` if it has one."""
        close: Any = getattr(reader, "close", None)
        if close is not None:
            await close()

    async def make_store(self) -> ObjectStore:
        """The store the segments are written to (a new ``MemoryObjectStore``)."""
        return MemoryObjectStore()

    async def close_store(self, store: ObjectStore) -> None:
        await store.close()

    @contextlib.asynccontextmanager
    async def reading(self, store: ObjectStore | None = None
                      ) -> AsyncIterator[tuple[ObjectStore, SegmentReader]]:
        """A store (``make_store``'s unless given) and a reader over it, closed after."""
        own = store is None
        base = await self.make_store() if store is None else store
        try:
            reader = await self.make_reader(base)
            try:
                yield base, reader
            finally:
                await self.close_reader(reader)
        finally:
            if own:
                await self.close_store(base)

    # --- reading what was committed -----------------------------------------------------

    async def test_read_returns_exactly_the_committed_bytes(self) -> None:
        async with self.reading() as (store, reader):
            sizes = [1, 4096, 3, 65_536, 17, 100_000]
            path = _path()
            layout, data = await _write_chunks(store, path, sizes)
            assert await reader.read(path, layout, 0, len(data)) == data
            # Again, whatever the reader kept from the first read.
            assert await reader.read(path, layout, 0, len(data)) == data
            for unit in layout.units:
                got = await reader.read(path, layout, unit.position, unit.length)
                assert got == data[unit.position : unit.end], unit

    async def test_every_range_across_chunk_units(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            for position, length in _ranges(len(data)):
                got = await reader.read(path, layout, position, length)
                assert got == data[position : position + length], (position, length)

    async def test_every_range_across_units_of_a_merged_object(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_merged(store, path, _SIZES)
            for position, length in _ranges(len(data)):
                got = await reader.read(path, layout, position, length)
                assert got == data[position : position + length], (position, length)

    async def test_a_zero_length_read_returns_no_bytes(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            for position in (0, 3, len(data) - 1):
                got = await reader.read(path, layout, position, 0)
                assert got == b"", (position, got)
            assert await reader.read(path, layout, 0, len(data)) == data

    async def test_concurrent_reads_each_get_their_bytes(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, [1_000] * 12 + [7])
            rng = random.Random(5)
            wanted = [(p, rng.randint(1, len(data) - p))
                      for p in (rng.randrange(len(data)) for _ in range(60))]
            wanted += [(0, len(data))] * 4 + [(999, 2)] * 4  # the same range at once
            got = await asyncio.gather(*(reader.read(path, layout, p, n) for p, n in wanted))
            for (p, n), data_read in zip(wanted, got, strict=True):
                assert data_read == data[p : p + n], (p, n)

    async def test_units_without_a_known_crc_are_checked_against_object_metadata(
        self,
    ) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES, known_crc=False)
            assert await reader.read(path, layout, 0, len(data)) == data
            # A listed chunk whose metadata lacks its CRC, or holds a bad one.
            for base, metadata in ((1, {}), (2, {CRC_METADATA_KEY: "not-a-crc"}),
                                   (3, {CRC_METADATA_KEY: format_crc(1234)})):
                other = _path(base)
                bad, body = await _write_chunks(store, other, [10, 10], known_crc=False)
                await store.put(bad.units[1].key, body[10:], metadata=metadata)
                with raises(IntegrityError, f"chunk with metadata {metadata}") as raised:
                    await reader.read(other, bad, 0, 20)
                _check_error(raised.value, other, bad.units[1])
                assert await reader.read(other, bad, 0, 10) == body[:10]

    # --- every unit checked ---------------------------------------------------------------

    async def test_a_flipped_byte_in_a_chunk_raises_integrity_error_naming_its_unit(
        self,
    ) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            bad = layout.units[2]
            await _flip(store, bad.key, 3)
            for position, length in ((bad.position, bad.length), (bad.position + 3, 1),
                                     (0, len(data)), (bad.position - 1, 2)):
                with raises(IntegrityError, f"read({position}, {length})") as raised:
                    await reader.read(path, layout, position, length)
                _check_error(raised.value, path, bad)
            for unit in layout.units:
                if unit != bad:
                    got = await reader.read(path, layout, unit.position, unit.length)
                    assert got == data[unit.position : unit.end], unit

    async def test_a_flipped_byte_in_a_merged_object_raises_for_its_unit_only(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_merged(store, path, _SIZES)
            bad = layout.units[4]
            await _flip(store, path.merged_key, bad.object_offset + bad.length - 1)
            with raises(IntegrityError, "read of the flipped unit") as raised:
                await reader.read(path, layout, bad.end - 1, 1)
            _check_error(raised.value, path, bad)
            with raises(IntegrityError, "read of the whole segment") as raised:
                await reader.read(path, layout, 0, len(data))
            _check_error(raised.value, path, bad)
            assert await reader.read(path, layout, 0, bad.position) == data[: bad.position]
            assert await reader.read(path, layout, bad.end, len(data) - bad.end) == data[
                bad.end :
            ]

    async def test_a_check_failure_that_does_not_repeat_is_read_again(self) -> None:
        async with self.make_store_ctx() as base:
            path = _path()
            layout, data = await _write_chunks(base, path, _SIZES)
            flaky = _FlipOnce(base, {u.key for u in layout.units})
            async with self.reading(flaky) as (_, reader):
                assert await reader.read(path, layout, 0, len(data)) == data
            assert not flaky.pending, "every unit was read"

    async def test_a_short_object_raises_integrity_error(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            cut = layout.units[4]
            body = data[cut.position : cut.end - 1]
            await store.put(cut.key, body, metadata={CRC_METADATA_KEY: format_crc(crc32c(body))})
            with raises(IntegrityError, "read of a cut chunk") as raised:
                await reader.read(path, layout, cut.position, 1)
            _check_error(raised.value, path, cut)
            # A merged object cut inside its last unit, and before it.
            merged_path = _path(1)
            merged, mdata = await _write_merged(store, merged_path, _SIZES)
            last = merged.units[-1]
            whole = await store.get(merged_path.merged_key)
            for end in (last.object_offset + 2, last.object_offset):
                await store.put(merged_path.merged_key, whole[:end])
                with raises(IntegrityError, f"read of a merged object cut at {end}") as raised:
                    await reader.read(merged_path, merged, last.position, last.length)
                _check_error(raised.value, merged_path, last)
            assert await reader.read(merged_path, merged, 0, last.position) == mdata[
                : last.position
            ]

    async def test_a_missing_object_raises_chunk_missing(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            gone = layout.units[3]
            await store.delete(gone.key)
            with raises(ChunkMissing, "read of a deleted chunk") as raised:
                await reader.read(path, layout, 0, len(data))
            assert isinstance(raised.value, FileNotFoundError)
            _check_error(raised.value, path, gone)
            assert await reader.read(path, layout, 0, gone.position) == data[: gone.position]

    async def test_a_hole_raises_corrupt_segment_with_its_span(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            written, data = await _write_chunks(store, path, _SIZES)
            units = list(written.units)
            hole_unit = units[2]
            # No object holds the hole's bytes; it names the entry after it.
            await store.delete(hole_unit.key)
            hole = ChunkRef(hole_unit.position, hole_unit.length, units[3].key, missing=True)
            layout = SegmentLayout([*units[:2], hole, *units[3:]])
            for position, length in ((hole.position, 1), (0, len(data)),
                                     (hole.position - 1, hole.length + 2)):
                with raises(CorruptSegment, f"read({position}, {length})") as raised:
                    await reader.read(path, layout, position, length)
                _check_error(raised.value, path, hole)
            # Everything around the hole reads.
            assert await reader.read(path, layout, 0, hole.position) == data[: hole.position]
            assert await reader.read(path, layout, hole.end, len(data) - hole.end) == data[
                hole.end :
            ]

    # --- committed and forget -------------------------------------------------------------

    async def test_committed_units_read_back_as_the_layout_grows(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            data = _payload(sum(_SIZES), seed=9)
            layout = SegmentLayout()
            position = 0
            for size in _SIZES:
                body = data[position : position + size]
                key = path.chunk_key(position)
                crc = crc32c(body)
                await store.put(key, body, metadata={CRC_METADATA_KEY: format_crc(crc)})
                unit = ChunkRef(position, size, key, 0, crc)
                layout.append(unit)
                reader.committed(path, unit, body)
                position += size
                # A tailing reader reads what was just committed, and all before it.
                assert await reader.read(path, layout, unit.position, size) == body
                assert await reader.read(path, layout, 0, position) == data[:position]

    async def test_committed_bytes_of_the_wrong_length_are_not_served(self) -> None:
        async with self.reading() as (store, reader):
            path = _path()
            layout, data = await _write_chunks(store, path, _SIZES)
            unit = layout.units[2]
            reader.committed(path, unit, b"\0" * (unit.length - 1))
            reader.committed(path, unit, b"\0" * (unit.length + 1))
            assert await reader.read(path, layout, unit.position, unit.length) == data[
                unit.position : unit.end
            ]
            assert await reader.read(path, layout, 0, len(data)) == data

    async def test_forget_then_read_the_merged_segment(self) -> None:
        """What a seal does: chunks merged into one object, the chunks deleted,
        ``forget``; reads of the new layout return the same bytes, and nothing
        held for the old chunks is served any more."""
        async with self.reading() as (store, reader):
            path = _path()
            chunks, data = await _write_chunks(store, path, _SIZES)
            for unit in chunks.units:
                reader.committed(path, unit, data[unit.position : unit.end])
            assert await reader.read(path, chunks, 0, len(data)) == data
            reader.forget(path)
            reader.forget(path)  # twice: no harm
            assert await reader.read(path, chunks, 0, len(data)) == data
            half = len(data) // 2
            merged, same = await _write_merged(store, path, [half, len(data) - half])
            assert same == data  # the same seed: the same bytes
            await store.delete_many([u.key for u in chunks.units])
            reader.forget(path)
            for position, length in _ranges(len(data))[::7]:
                got = await reader.read(path, merged, position, length)
                assert got == data[position : position + length], (position, length)
            with raises(ChunkMissing, "a read of the old, deleted chunks after forget"):
                await reader.read(path, chunks, 0, len(data))

    async def test_forget_touches_only_its_segment(self) -> None:
        async with self.reading() as (store, reader):
            one, two = _path(0), _path(1)
            layout_one, data_one = await _write_chunks(store, one, _SIZES, seed=1)
            layout_two, data_two = await _write_chunks(store, two, _SIZES, seed=2)
            assert await reader.read(one, layout_one, 0, len(data_one)) == data_one
            assert await reader.read(two, layout_two, 0, len(data_two)) == data_two
            reader.forget(_path(99))  # never read: no harm
            reader.forget(one)
            assert await reader.read(two, layout_two, 0, len(data_two)) == data_two
            assert await reader.read(one, layout_one, 0, len(data_one)) == data_one

    async def test_a_chunked_segment_reads_back_through_the_reader(self) -> None:
        """End to end: commits, reads while open, a seal (merge), a reopen."""
        async with self.reading() as (store, reader):
            path = _path()
            options = SegmentOptions(chunk_size=4_096)
            segment = await ChunkedSegment.open(store, path, options=options, reader=reader)
            data = _payload(30_000, seed=4)
            for start in range(0, len(data), 7_000):
                await segment.commit0(start, data[start : start + 7_000])
                end = min(start + 7_000, len(data))
                assert await segment.read0(0, end) == data[:end]
                assert await segment.read0(start, end - start) == data[start:end]
            await segment.seal()
            rng = random.Random(3)
            for _ in range(40):
                position = rng.randrange(len(data))
                length = rng.randint(1, len(data) - position)
                got = await segment.read0(position, length)
                assert got == data[position : position + length], (position, length)
            again = await ChunkedSegment.open(store, path, options=options, reader=reader)
            assert await again.read0(0, len(data)) == data

    # --- helpers ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def make_store_ctx(self) -> AsyncIterator[ObjectStore]:
        """A store from :meth:`make_store`, closed on the way out."""
        store = await self.make_store()
        try:
            yield store
        finally:
            await self.close_store(store)
