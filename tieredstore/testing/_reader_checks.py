"""SegmentReader cases on checking every unit: a flipped byte, a short or
missing object and a hole each raise for their unit, naming its span; a check
failure that does not repeat is read again."""

from __future__ import annotations

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import ChunkMissing, CorruptSegment, IntegrityError
from tieredstore.objectstore import ForwardingObjectStore
from tieredstore.objectstore.base import ByteRange, ObjectData, ObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.testing._check import raises
from tieredstore.testing._reader_base import (
    PATH,
    SIZES,
    SegmentReaderSuite,
    check_error,
    flip,
    kit_path,
    write_chunks,
    write_merged,
)


class _FlipOnce(ForwardingObjectStore):
    """Flips one bit in the first GET of each key in ``keys``, then reads true."""

    def __init__(self, inner: ObjectStore, keys: set[str]) -> None:
        super().__init__(inner)
        self.pending = set(keys)

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got: ObjectData = await super().get_object(key, byte_range)
        if key in self.pending and got.data:
            self.pending.discard(key)
            body = bytearray(got.data)
            body[0] ^= 0x01
            return ObjectData(bytes(body), got.info)
        return got


class CheckCases(SegmentReaderSuite):
    """Every unit is checked, and a failure names the unit."""

    async def test_a_flipped_byte_in_a_chunk_raises_integrity_error_naming_its_unit(
        self,
    ) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            bad = layout.units[2]
            await flip(store, bad.key, 3)
            for position, length in ((bad.position, bad.length), (bad.position + 3, 1),
                                     (0, len(data)), (bad.position - 1, 2)):
                with raises(IntegrityError, f"read({position}, {length})") as raised:
                    await reader.read(PATH, layout, position, length)
                check_error(raised.value, PATH, bad)
            for unit in layout.units:
                if unit != bad:
                    got = await reader.read(PATH, layout, unit.position, unit.length)
                    assert got == data[unit.position : unit.end], unit

    async def test_a_flipped_byte_in_a_merged_object_raises_for_its_unit_only(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_merged(store, PATH, SIZES)
            bad = layout.units[4]
            await flip(store, PATH.merged_key, bad.object_offset + bad.length - 1)
            with raises(IntegrityError, "read of the flipped unit") as raised:
                await reader.read(PATH, layout, bad.end - 1, 1)
            check_error(raised.value, PATH, bad)
            with raises(IntegrityError, "read of the whole segment") as raised:
                await reader.read(PATH, layout, 0, len(data))
            check_error(raised.value, PATH, bad)
            assert await reader.read(PATH, layout, 0, bad.position) == data[: bad.position]
            assert await reader.read(PATH, layout, bad.end, len(data) - bad.end) == data[
                bad.end :
            ]

    async def test_a_check_failure_that_does_not_repeat_is_read_again(self) -> None:
        async with self.store() as base:
            layout, data = await write_chunks(base, PATH, SIZES)
            flaky = _FlipOnce(base, {u.key for u in layout.units})
            async with self.reading(flaky) as (_, reader):
                assert await reader.read(PATH, layout, 0, len(data)) == data
            assert not flaky.pending, "every unit was read"

    async def test_a_short_object_raises_integrity_error(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            cut = layout.units[4]
            body = data[cut.position : cut.end - 1]
            await store.put(cut.key, body, metadata={CRC_METADATA_KEY: format_crc(crc32c(body))})
            with raises(IntegrityError, "read of a cut chunk") as raised:
                await reader.read(PATH, layout, cut.position, 1)
            check_error(raised.value, PATH, cut)
            # A merged object cut inside its last unit, and before it.
            merged_path = kit_path(1)
            merged, mdata = await write_merged(store, merged_path, SIZES)
            last = merged.units[-1]
            whole = await store.get(merged_path.merged_key)
            for end in (last.object_offset + 2, last.object_offset):
                await store.put(merged_path.merged_key, whole[:end])
                with raises(IntegrityError, f"read of a merged object cut at {end}") as raised:
                    await reader.read(merged_path, merged, last.position, last.length)
                check_error(raised.value, merged_path, last)
            assert await reader.read(merged_path, merged, 0, last.position) == mdata[
                : last.position
            ]

    async def test_a_missing_object_raises_chunk_missing(self) -> None:
        async with self.reading() as (store, reader):
            layout, data = await write_chunks(store, PATH, SIZES)
            gone = layout.units[3]
            await store.delete(gone.key)
            with raises(ChunkMissing, "read of a deleted chunk") as raised:
                await reader.read(PATH, layout, 0, len(data))
            assert isinstance(raised.value, FileNotFoundError)
            check_error(raised.value, PATH, gone)
            assert await reader.read(PATH, layout, 0, gone.position) == data[: gone.position]

    async def test_a_hole_raises_corrupt_segment_with_its_span(self) -> None:
        async with self.reading() as (store, reader):
            written, data = await write_chunks(store, PATH, SIZES)
            units = list(written.units)
            hole_unit = units[2]
            # No object holds the hole's bytes; it names the entry after it.
            await store.delete(hole_unit.key)
            hole = ChunkRef(hole_unit.position, hole_unit.length, units[3].key, missing=True)
            layout = SegmentLayout([*units[:2], hole, *units[3:]])
            for position, length in ((hole.position, 1), (0, len(data)),
                                     (hole.position - 1, hole.length + 2)):
                with raises(CorruptSegment, f"read({position}, {length})") as raised:
                    await reader.read(PATH, layout, position, length)
                check_error(raised.value, PATH, hole)
            # Everything around the hole reads.
            assert await reader.read(PATH, layout, 0, hole.position) == data[: hole.position]
            assert await reader.read(PATH, layout, hole.end, len(data) - hole.end) == data[
                hole.end :
            ]
