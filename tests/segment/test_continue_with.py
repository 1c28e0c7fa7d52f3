"""continue_with: a segment's chunks continued by the log pieces that hold its
newest bytes, whatever versions of them the log holds."""

from __future__ import annotations

import pytest

from tieredstore.segment.layout import ChunkRef, SegmentLayout, continue_with


def log(seq: int, position: int, end: int) -> ChunkRef:
    return ChunkRef(position, end - position, f"log/log-{seq:020d}", 8, 0)


def chunks(end: int) -> SegmentLayout:
    return SegmentLayout([ChunkRef(0, end, "seg/chunk-0")])


def test_pieces_past_the_chunks_continue_them_and_those_within_are_returned() -> None:
    layout = chunks(100)
    within = continue_with(layout, [log(3, 100, 150), log(1, 40, 100), log(5, 150, 160)])
    assert [(u.position, u.end) for u in layout.units] == [(0, 100), (100, 150), (150, 160)]
    assert within == [log(1, 40, 100)]


def test_a_consolidated_piece_is_taken_over_the_small_ones_it_holds() -> None:
    layout = chunks(100)
    small = [log(1, 100, 120), log(2, 120, 150)]
    consolidated = log(3, 100, 150)
    same_extent_small, same_extent = log(4, 150, 170), log(5, 150, 170)
    within = continue_with(layout, [*small, consolidated, same_extent_small, same_extent])
    assert [u.key for u in layout.units[1:]] == [consolidated.key, same_extent.key]
    assert sorted(within, key=lambda u: u.key) == [*small, same_extent_small]


def test_a_consolidated_piece_whose_start_moved_into_a_chunk_is_not_needed() -> None:
    layout = chunks(120)  # [100, 120) was compacted after [100, 150) was consolidated
    straddling = log(3, 100, 150)
    within = continue_with(layout, [straddling, log(2, 120, 150), log(6, 150, 160)])
    assert layout.size == 160 and straddling in within


def test_a_gap_names_the_piece_past_it() -> None:
    with pytest.raises(ValueError, match=r"\[130, 150\)"):
        continue_with(chunks(100), [log(1, 100, 120), log(2, 130, 150)])
