"""SegmentReader cases on what a writer tells the reader: ``committed`` units
as the layout grows, ``forget`` and ``replaced`` after a merge, and a
ChunkedSegment end to end."""

from __future__ import annotations

import random

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import ChunkMissing
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment.chunked import ChunkedSegment, SegmentOptions
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.testing._check import raises
from tieredstore.testing._objectstore_base import payload
from tieredstore.testing._reader_base import (
    PATH,
    SIZES,
    SegmentReaderSuite,
    all_ranges,
    kit_path,
    write_chunks,
    write_merged,
)


class LifecycleCases(SegmentReaderSuite):
    """``committed`` and ``forget`` never break later reads."""

    async def test_committed_units_read_back_as_the_layout_grows(self) -> None:
        async with self.reading() as (store, reader):
            data = payload(sum(SIZES), seed=9)
            layout = SegmentLayout()
            position = 0
            for size in SIZES:
                body = data[position : position + size]
                key = PATH.chunk_key(position)
                crc = crc32c(body)
                await store.put(key, body, metadata={CRC_METADATA_KEY: format_crc(crc)})
                unit = ChunkRef(position, size, key, 0, crc)
                layout.append(unit)
                reader.committed(PATH, unit, body)
                position += size
                # A tailing reader reads what was just committed, and all before it.
                assert await reader.read(PATH, layout, unit.position, size) == body
                assert await reader.read(PATH, layout, 0, position) == data[:position]

    async def test_committed_bytes_of_the_wrong_length_are_not_served(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            unit = layout.units[2]
            reader.committed(PATH, unit, b"\0" * (unit.length - 1))
            reader.committed(PATH, unit, b"\0" * (unit.length + 1))
            assert await reader.read(PATH, layout, unit.position, unit.length) == data[
                unit.position : unit.end
            ]
            assert await reader.read(PATH, layout, 0, len(data)) == data

    async def test_forget_then_read_the_merged_segment(self) -> None:
        """What a seal does: chunks merged into one object, the chunks deleted,
        ``forget``; reads of the new layout return the same bytes, and nothing
        held for the old chunks is served any more."""
        async with self.reading() as (store, reader):
            chunks, data = await write_chunks(store, PATH, SIZES)
            for unit in chunks.units:
                reader.committed(PATH, unit, data[unit.position : unit.end])
            assert await reader.read(PATH, chunks, 0, len(data)) == data
            reader.forget(PATH)
            reader.forget(PATH)  # twice: no harm
            assert await reader.read(PATH, chunks, 0, len(data)) == data
            half = len(data) // 2
            merged, same = await write_merged(store, PATH, [half, len(data) - half])
            assert same == data  # the same seed: the same bytes
            await store.delete_many([u.key for u in chunks.units])
            reader.forget(PATH)
            for position, length in all_ranges(len(data))[::7]:
                got = await reader.read(PATH, merged, position, length)
                assert got == data[position : position + length], (position, length)
            with raises(ChunkMissing, "a read of the old, deleted chunks after forget"):
                await reader.read(PATH, chunks, 0, len(data))

    async def test_replaced_then_read_the_merged_segment(self) -> None:
        """A merge that tells the reader which units replaced which: reads of the
        new layout return the same bytes, held ones or fetched; a merged object
        whose bytes differ from what was held (the reader must check the CRC) is
        read as stored, never from the old chunks."""
        async with self.reading() as (store, reader):
            chunks, data = await write_chunks(store, PATH, SIZES)
            for unit in chunks.units[:3]:  # some held, some not
                reader.committed(PATH, unit, data[unit.position : unit.end])
            half = len(data) // 2
            merged, same = await write_merged(store, PATH, [half, len(data) - half])
            assert same == data
            await store.delete_many([u.key for u in chunks.units])
            reader.replaced(PATH, chunks, merged)
            for position, length in all_ranges(len(data))[::7]:
                got = await reader.read(PATH, merged, position, length)
                assert got == data[position : position + length], (position, length)
            other = kit_path(5)
            chunks, data = await write_chunks(store, other, SIZES, seed=3)
            for unit in chunks.units:
                reader.committed(other, unit, data[unit.position : unit.end])
            merged, changed = await write_merged(store, other, [len(data)], seed=4)
            reader.replaced(other, chunks, merged)  # the CRCs say: not the same bytes
            assert await reader.read(other, merged, 0, len(data)) == changed

    async def test_forget_touches_only_its_segment(self) -> None:
        async with self.reading() as (store, reader):
            one, two = kit_path(0), kit_path(1)
            layout_one, data_one = await write_chunks(store, one, SIZES, seed=1)
            layout_two, data_two = await write_chunks(store, two, SIZES, seed=2)
            assert await reader.read(one, layout_one, 0, len(data_one)) == data_one
            assert await reader.read(two, layout_two, 0, len(data_two)) == data_two
            reader.forget(kit_path(99))  # never read: no harm
            reader.forget(one)
            assert await reader.read(two, layout_two, 0, len(data_two)) == data_two
            assert await reader.read(one, layout_one, 0, len(data_one)) == data_one

    async def test_a_chunked_segment_reads_back_through_the_reader(self) -> None:
        """End to end: commits, reads while open, a seal (merge), a reopen."""
        async with self.reading() as (store, reader):
            options = SegmentOptions(chunk_size=4_096)
            segment = await ChunkedSegment.open(store, PATH, options=options, reader=reader)
            data = payload(30_000, seed=4)
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
            again = await ChunkedSegment.open(store, PATH, options=options, reader=reader)
            assert await again.read0(0, len(data)) == data
