"""Layout seeks, unit coalescing and the merged-object trailer."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.checksum import crc32c, crc32c_combine
from tieredstore.errors import CorruptSegment
from tieredstore.segment.layout import ChunkRef, SegmentLayout, coalesce_units
from tieredstore.segment.trailer import decode_footer, decode_table, encode_trailer


def layout_of(lengths: list[int]) -> SegmentLayout:
    layout = SegmentLayout()
    pos = 0
    for i, n in enumerate(lengths):
        layout.append(ChunkRef(pos, n, f"k{i}"))
        pos += n
    return layout


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.data())
def test_slices_reassemble_any_range(lengths: list[int], data: st.DataObject) -> None:
    layout = layout_of(lengths)
    model = b"".join(bytes([i % 256]) * n for i, n in enumerate(lengths))
    start = data.draw(st.integers(0, layout.size - 1))
    length = data.draw(st.integers(0, layout.size - start))
    got = b"".join(
        bytes([int(s.unit.key[1:]) % 256]) * (s.end - s.start)
        for s in layout.slices(start, length)
    )
    assert got == model[start : start + length]


def test_seek_finds_the_unit_by_bisect() -> None:
    layout = layout_of([10, 20, 30])
    assert [layout.unit_at(p).key for p in (0, 9, 10, 29, 30, 59)] == [
        "k0", "k0", "k1", "k1", "k2", "k2"]
    with pytest.raises(IndexError):
        layout.unit_at(60)
    assert [u.key for u in layout.following(5, 5)] == ["k1", "k2"]


def test_append_refuses_a_gap() -> None:
    layout = layout_of([10])
    with pytest.raises(ValueError, match="does not continue"):
        layout.append(ChunkRef(11, 5, "x"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=20),
       st.integers(1, 100))
def test_coalesced_units_carry_the_crc_of_their_bytes(chunks: list[bytes], target: int) -> None:
    units = coalesce_units([(len(c), crc32c(c)) for c in chunks], "seg", target)
    whole = b"".join(chunks)
    assert units[0].position == 0 and units[-1].end == len(whole)
    for unit in units:
        assert unit.crc32c == crc32c(whole[unit.position : unit.end])
        assert unit.object_offset == unit.position


def test_crc_combine_matches_direct_computation() -> None:
    a, b = os.urandom(1000), os.urandom(4 * 1024 * 1024 + 3)
    assert crc32c_combine(crc32c(a), crc32c(b), len(b)) == crc32c(a + b)


def test_trailer_round_trip_and_corruption_is_named() -> None:
    units = coalesce_units([(5, 1), (7, 2), (9, 3)], "k", 6)
    trailer = encode_trailer(units)
    footer = decode_footer(trailer, segment="s")
    table = trailer[: footer.table_size]
    assert decode_table(table, footer, "k", segment="s") == units
    bad = bytearray(trailer)
    bad[3] ^= 1
    with pytest.raises(CorruptSegment, match="unit table fails its CRC32C"):
        decode_table(bytes(bad[: footer.table_size]), footer, "k", segment="s")
    bad = bytearray(trailer)
    bad[-10] ^= 1
    with pytest.raises(CorruptSegment, match="footer"):
        decode_footer(bytes(bad), segment="s")
