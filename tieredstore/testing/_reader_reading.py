"""SegmentReader cases on reading what was committed: exact bytes for every
range, across chunk units and the units of a merged object, concurrently."""

from __future__ import annotations

import asyncio
import random

from tieredstore.checksum import format_crc
from tieredstore.errors import IntegrityError
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.testing._check import raises
from tieredstore.testing._reader_base import (
    PATH,
    SIZES,
    SegmentReaderSuite,
    all_ranges,
    check_error,
    kit_path,
    write_chunks,
    write_merged,
)


class ReadingCases(SegmentReaderSuite):
    """A read returns exactly the bytes committed."""

    async def test_read_returns_exactly_the_committed_bytes(self) -> None:
        async with self.reading() as (store, reader):
            sizes = [1, 4096, 3, 65_536, 17, 100_000]
            layout, data = await write_chunks(store, PATH, sizes)
            assert await reader.read(PATH, layout, 0, len(data)) == data
            # Again, whatever the reader kept from the first read.
            assert await reader.read(PATH, layout, 0, len(data)) == data
            for unit in layout.units:
                got = await reader.read(PATH, layout, unit.position, unit.length)
                assert got == data[unit.position : unit.end], unit

    async def test_every_range_across_chunk_units(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            for position, length in all_ranges(len(data)):
                got = await reader.read(PATH, layout, position, length)
                assert got == data[position : position + length], (position, length)

    async def test_every_range_across_units_of_a_merged_object(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_merged(store, PATH, SIZES)
            for position, length in all_ranges(len(data)):
                got = await reader.read(PATH, layout, position, length)
                assert got == data[position : position + length], (position, length)

    async def test_a_zero_length_read_returns_no_bytes(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            for position in (0, 3, len(data) - 1):
                got = await reader.read(PATH, layout, position, 0)
                assert got == b"", (position, got)
            assert await reader.read(PATH, layout, 0, len(data)) == data

    async def test_concurrent_reads_each_get_their_bytes(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, [1_000] * 12 + [7])
            rng = random.Random(5)
            wanted = [(p, rng.randint(1, len(data) - p))
                      for p in (rng.randrange(len(data)) for _ in range(60))]
            wanted += [(0, len(data))] * 4 + [(999, 2)] * 4  # the same range at once
            got = await asyncio.gather(*(reader.read(PATH, layout, p, n) for p, n in wanted))
            for (p, n), data_read in zip(wanted, got, strict=True):
                assert data_read == data[p : p + n], (p, n)

    async def test_units_without_a_known_crc_are_checked_against_object_metadata(
        self,
    ) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES, known_crc=False)
            assert await reader.read(PATH, layout, 0, len(data)) == data
            # A listed chunk whose metadata lacks its CRC, or holds a bad one.
            for base, metadata in ((1, {}), (2, {CRC_METADATA_KEY: "not-a-crc"}),
                                   (3, {CRC_METADATA_KEY: format_crc(1234)})):
                other = kit_path(base)
                bad, body = await write_chunks(store, other, [10, 10], known_crc=False)
                await store.put(bad.units[1].key, body[10:], metadata=metadata)
                with raises(IntegrityError, f"chunk with metadata {metadata}") as raised:
                    await reader.read(other, bad, 0, 20)
                check_error(raised.value, other, bad.units[1])
                assert await reader.read(other, bad, 0, 10) == body[:10]
