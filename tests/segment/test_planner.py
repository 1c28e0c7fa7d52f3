"""The merge planner obeys S3's multipart rules and covers every byte once, in order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.objectstore.base import MIN_PART_SIZE
from tieredstore.segment.planner import (
    MergePlanError,
    PartKind,
    PlannedPart,
    check_plan,
    plan_merge,
)

MiB = 1024 * 1024


def covered(parts: list[PlannedPart], lengths: list[int]) -> list[tuple[int, int, int]]:
    """(chunk, start, end) runs, merged where adjacent, in part order."""
    runs: list[tuple[int, int, int]] = []
    for part in parts:
        for piece in part.pieces:
            if runs and runs[-1][0] == piece.chunk and runs[-1][2] == piece.start:
                runs[-1] = (piece.chunk, runs[-1][1], piece.start + piece.length)
            else:
                runs.append((piece.chunk, piece.start, piece.start + piece.length))
    return runs


def expected_runs(lengths: list[int]) -> list[tuple[int, int, int]]:
    return [(i, 0, n) for i, n in enumerate(lengths) if n]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 20 * MiB), max_size=60))
def test_plan_covers_every_byte_once_and_obeys_s3_rules(lengths: list[int]) -> None:
    parts = plan_merge(lengths)
    check_plan(parts)
    assert covered(parts, lengths) == expected_runs(lengths)
    assert sum(p.size for p in parts) == sum(lengths)
    for part in parts:
        if part.kind is PartKind.COPY:
            assert part.size >= MIN_PART_SIZE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=80), st.integers(10, 200))
def test_small_limits_scale_the_same_way(lengths: list[int], min_part: int) -> None:
    """The planner's logic with tiny limits, where edge cases are dense."""
    parts = plan_merge(lengths, min_part=min_part, max_part=min_part * 4)
    check_plan(parts, min_part=min_part, max_part=min_part * 4)
    assert covered(parts, lengths) == expected_runs(lengths)


def test_four_mib_chunks_cannot_be_copied() -> None:
    parts = plan_merge([4 * MiB] * 256)  # a 1 GiB segment
    assert all(p.kind is PartKind.UPLOAD for p in parts)
    assert len(parts) == 128  # 8 MiB parts: two chunks each
    assert sum(p.size for p in parts) == 1024 * MiB


def test_eight_mib_chunks_are_all_copied_server_side() -> None:
    parts = plan_merge([8 * MiB] * 128)
    assert [p.kind for p in parts] == [PartKind.COPY] * 128


def test_small_chunk_before_a_big_one_is_topped_up_from_its_head() -> None:
    parts = plan_merge([1 * MiB, 16 * MiB, 100])
    assert [(p.kind, p.size) for p in parts] == [
        (PartKind.UPLOAD, 5 * MiB),
        (PartKind.COPY, 12 * MiB),
        (PartKind.UPLOAD, 100),
    ]
    assert parts[0].pieces[1].start == 0 and parts[0].pieces[1].length == 4 * MiB
    assert parts[1].pieces[0].start == 4 * MiB


def test_chunk_over_five_gib_is_split_into_copy_parts() -> None:
    big = 5 * 1024 * MiB + 7
    parts = plan_merge([big])
    assert [p.kind for p in parts] == [PartKind.COPY, PartKind.COPY]
    check_plan(parts)


def test_too_many_parts_is_refused_with_a_reason() -> None:
    with pytest.raises(MergePlanError, match="cannot be merged within 10 parts"):
        plan_merge([6] * 20, min_part=5, max_part=10, max_parts=10)


def test_too_many_chunks_to_copy_join_the_fewest_that_fit() -> None:
    """Issue 32: commits of 5 MiB are chunks of their own; 10,001 of them (a 50
    GiB segment) cannot each be a part: the planner uploads the smaller ones
    joined, and copies the rest."""
    lengths = [5 * MiB] * 5_000 + [7 * MiB] * 5_001
    parts = plan_merge(lengths)
    check_plan(parts)
    assert covered(parts, lengths) == expected_runs(lengths)
    assert [p.kind for p in parts].count(PartKind.COPY) == 5_001


def test_parts_grow_to_fit_ten_thousand() -> None:
    parts = plan_merge([1 * MiB] * 60_000)  # 60,000 MiB of tiny chunks
    check_plan(parts)
    assert len(parts) <= 10_000


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=80), st.integers(10, 100),
       st.integers(2, 20))
def test_few_parts_allowed_plans_still_cover_every_byte(lengths: list[int], min_part: int,
                                                        max_parts: int) -> None:
    """With the part count tight, joined chunks still cover every byte once, in
    order, within S3's rules, or the plan is refused."""
    try:
        parts = plan_merge(lengths, min_part=min_part, max_part=min_part * 4,
                           max_parts=max_parts)
    except MergePlanError:
        return
    check_plan(parts, min_part=min_part, max_part=min_part * 4, max_parts=max_parts)
    assert covered(parts, lengths) == expected_runs(lengths)


def test_a_joined_chunk_never_makes_an_upload_past_the_part_maximum() -> None:
    """Review of issue 32: past the part budget the copy bar rises, and a chunk
    above the bar is joined into an upload; one longer than what a part may
    hold (here 26 bytes, parts of at most 8) made an upload part past S3's
    5 GiB maximum, a plan S3 refuses, instead of a plan that copies it."""
    lengths = [1] * 14 + [2, 2, 2, 2, 1, 26, 2, 1, 6]
    parts = plan_merge(lengths, min_part=2, max_part=8, max_parts=15)
    check_plan(parts, min_part=2, max_part=8, max_parts=15)
    assert covered(parts, lengths) == expected_runs(lengths)

