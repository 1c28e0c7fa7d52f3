"""Log objects: round trips, golden layout, and damage named, never misread."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.checksum import crc32c
from tieredstore.filetype import FileType
from tieredstore.log import LogCorrupt, Piece, encode_log_object, read_index
from tieredstore.log.format import FOOTER_SIZE, HEADER_SIZE, TAIL_READ, decode_footer
from tieredstore.objectstore import ByteRange, ForwardingObjectStore, MemoryObjectStore, ObjectData

pieces_st = st.lists(
    st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**32 - 1),
              st.sampled_from(list(FileType)), st.integers(0, 2**40),
              st.integers(0, 2**40), st.binary(max_size=300)),
    max_size=12)


def build(items: list[tuple[str, int, FileType, int, int, bytes]]
          ) -> tuple[bytes, list[Piece], list[bytes]]:
    given_pieces = [(Piece(t, q, f, b, p, len(d)), d) for t, q, f, b, p, d in items]
    data, stored = encode_log_object(given_pieces)
    return data, stored, [d for *_, d in items]


@settings(max_examples=60, deadline=None)
@given(pieces_st)
async def test_every_piece_reads_back_through_the_index(
        items: list[tuple[str, int, FileType, int, int, bytes]]) -> None:
    data, stored, datas = build(items)
    store = MemoryObjectStore()
    await store.put("k", data)
    assert await read_index(store, "k", len(data)) == stored
    for piece, expected in zip(stored, datas, strict=True):
        got = data[piece.object_offset : piece.object_offset + piece.length]
        assert got == expected and crc32c(got) == piece.crc32c


def test_the_layout_is_the_documented_one() -> None:
    data, stored, _ = build([("t", 7, FileType.CONSUME_QUEUE, 64, 96, b"abc")])
    assert data[:HEADER_SIZE] == b"TSLG" + struct.pack(">HH", 1, 0)
    assert data[HEADER_SIZE : HEADER_SIZE + 3] == b"abc"
    index = struct.pack(">H", 1) + b"t" + struct.pack(">IBQQIQI", 7, 2, 64, 96, 3,
                                                      HEADER_SIZE, crc32c(b"abc"))
    assert data[HEADER_SIZE + 3 : -FOOTER_SIZE] == index
    head = b"TSLF" + struct.pack(">HHQIII", 1, 0, HEADER_SIZE + 3, len(index), 1,
                                 crc32c(index))
    assert data[-FOOTER_SIZE:] == head + struct.pack(">I", crc32c(head))
    assert stored[0].object_offset == HEADER_SIZE


async def test_every_flipped_byte_of_index_or_footer_is_named() -> None:
    data, _, _ = build([("topic", 1, FileType.COMMIT_LOG, 0, 0, b"x" * 50),
                        ("other", 2, FileType.CONSUME_QUEUE, 32, 64, b"y" * 32)])
    store = MemoryObjectStore()
    first_index_byte = HEADER_SIZE + 82
    for at in range(first_index_byte, len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 0x40
        await store.put("k", bytes(damaged))
        with pytest.raises(LogCorrupt, match="log object k"):
            await read_index(store, "k", len(data))


async def test_a_truncated_object_is_named() -> None:
    data, _, _ = build([("t", 0, FileType.COMMIT_LOG, 0, 0, b"abc")])
    store = MemoryObjectStore()
    await store.put("k", data[:-5])
    with pytest.raises(LogCorrupt):
        await read_index(store, "k", len(data) - 5)
    with pytest.raises(LogCorrupt, match="too short"):
        decode_footer(b"", key="k", size=3)


class CountingGets(ForwardingObjectStore):
    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.ranges: list[ByteRange | None] = []
        self.flip_next = 0

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.ranges.append(byte_range)
        found = await super().get_object(key, byte_range)
        if self.flip_next:
            self.flip_next -= 1
            body = bytearray(found.data)
            body[-1] ^= 1
            return ObjectData(bytes(body), found.info)
        return found


async def test_a_short_index_costs_one_get_a_long_one_two() -> None:
    store = CountingGets(MemoryObjectStore())
    small, stored, _ = build([("t", q, FileType.COMMIT_LOG, 0, 0, b"a") for q in range(10)])
    await store.put("small", small)
    assert await read_index(store, "small", len(small)) == stored
    assert len(store.ranges) == 1
    many = [(f"topic-{q:04d}", q, FileType.COMMIT_LOG, 0, 0, b"b" * 100) for q in range(3000)]
    big, stored, _ = build(many)
    assert len(big) - HEADER_SIZE - 300_000 > TAIL_READ  # the index alone is longer
    await store.put("big", big)
    store.ranges.clear()
    assert await read_index(store, "big", len(big)) == stored
    assert len(store.ranges) == 2


async def test_damage_on_the_way_is_read_again_damage_that_repeats_raises() -> None:
    store = CountingGets(MemoryObjectStore())
    data, stored, _ = build([("t", 0, FileType.COMMIT_LOG, 0, 0, b"abc")])
    await store.put("k", data)
    store.flip_next = 2
    assert await read_index(store, "k", len(data)) == stored
    store.flip_next = 3
    with pytest.raises(LogCorrupt, match="footer"):
        await read_index(store, "k", len(data))


def test_a_piece_given_the_wrong_number_of_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="given 2 bytes"):
        encode_log_object([(Piece("t", 0, FileType.COMMIT_LOG, 0, 0, 3), b"ab")])
