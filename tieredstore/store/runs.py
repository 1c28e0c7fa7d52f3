"""Runs of commit-log records read with one ranged GET (reads by tag and by key)."""

from __future__ import annotations

from collections.abc import Sequence


def run_end(spans: Sequence[tuple[int, int]], i: int, limit: int, gap: int = 0
            ) -> tuple[int, int]:
    """From ``spans[i]`` (``(position, size)`` records in position order), the
    index of the last span of the run one read takes, and where that read ends:
    each next span starts at most ``gap`` bytes after the run's end (never
    before it) and ends by ``limit`` (the end of the commit-log segment holding
    ``spans[i]``)."""
    j = i
    end = spans[i][0] + spans[i][1]
    while j + 1 < len(spans):
        position, size = spans[j + 1]
        if not end <= position <= end + gap or position + size > limit:
            break
        j += 1
        end = position + size
    return j, end
