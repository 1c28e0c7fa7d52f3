"""Plan the multipart upload that merges a segment's chunks into one object.

Pure: takes chunk lengths, returns parts. S3 decides the rules: every part
but the last is at least 5 MiB and at most 5 GiB, at most 10,000 parts. A
chunk of at least 5 MiB can be copied server-side (UploadPartCopy with a
CopySourceRange); smaller neighbours are read and uploaded together until the
part is big enough. With 4 MiB chunks nothing can be copied: every byte is
read and re-uploaded. With chunks of 5 MiB or more, everything is copied but
where small chunks (a segment's tail, group commits) sit between them.

When small chunks are pending and a big chunk follows, the pending part is
topped up with the head of the big chunk and the rest is copied, if the rest
is still at least 5 MiB; otherwise the whole big chunk joins the upload.

The rule: copy every chunk of at least 5 MiB (less the head a pending upload
borrows), upload only chunks below 5 MiB and such heads. Past 10,000 parts
(a segment of more than about 48 GiB in 5 MiB chunks) the bar for a copy
rises to the lowest chunk length that fits: the smallest chunks are joined
and uploaded, the rest still copied; never past a length that, joined to an
upload under way, would make a part larger than S3's maximum (5 GiB). A chunk's size does
not matter otherwise, nor its position: a partial chunk (a flush, a roll's
tail) is a chunk like any other. The pool writes every commit of 5 MiB or
more as a chunk (``SegmentCommitter._to_log``), so a producer that flushes
every 5 MiB or more has its bytes copied and uploads them once.

S3's floor: a producer that flushes less than 5 MiB at a time (every 1 MB,
say) cannot have its bytes uploaded once. Each flush must be durable on its
own, in an object of its own (a log object, or a direct-mode chunk), and
nothing below 5 MiB can be a part of the merged object except the last: the
bytes are uploaded a second time, by compaction into a chunk (log mode) or
by this planner's uploads (direct mode). About 2x the data (measured:
``python -m bench --only flushing``, BENCHMARKS.md), whatever the planner.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.errors import TieredStoreError
from tieredstore.objectstore.base import MAX_PART_SIZE, MAX_PARTS, MIN_PART_SIZE


class MergePlanError(TieredStoreError, ValueError):
    """No plan satisfies S3's multipart limits for these chunks."""


class PartKind(enum.Enum):
    COPY = "copy"  # UploadPartCopy of one range of one chunk
    UPLOAD = "upload"  # UploadPart of bytes read from one or more chunks


@dataclass(frozen=True, slots=True)
class ChunkRange:
    """Bytes ``[start, start + length)`` of chunk number ``chunk``."""

    chunk: int
    start: int
    length: int


@dataclass(frozen=True, slots=True)
class PlannedPart:
    number: int  # 1-based part number
    kind: PartKind
    pieces: tuple[ChunkRange, ...]

    @property
    def size(self) -> int:
        return sum(p.length for p in self.pieces)


def plan_merge(
    chunk_lengths: Sequence[int],
    *,
    min_part: int = MIN_PART_SIZE,
    max_part: int = MAX_PART_SIZE,
    max_parts: int = MAX_PARTS,
    reserve_parts: int = 0,
) -> list[PlannedPart]:
    """Parts whose concatenation is the chunks in order.

    ``reserve_parts`` keeps room for parts the caller adds after the plan (a
    trailer part). Raises :class:`MergePlanError` if S3's limits cannot be met.
    """
    if not 0 < min_part <= max_part:
        raise MergePlanError(f"need 0 < min_part <= max_part, got {min_part}, {max_part}")
    total = sum(chunk_lengths)
    # Upload parts grow past the minimum when needed to stay under max_parts.
    budget = max(1, max_parts - reserve_parts)
    target = max(min_part, -(-total // budget))
    if target > max_part // 2:
        raise MergePlanError(f"{total} bytes cannot be merged within {budget} parts")

    # Too many chunks to copy one part each (5 MiB chunks of a segment past
    # about 48 GiB): the smaller ones are joined into uploads, the fewest that fit.
    # A joined chunk goes into an upload holding less than ``target`` bytes, so
    # the bar stays where such an upload still fits in ``max_part``.
    parts = _plan(chunk_lengths, min_part, min_part, max_part, target)
    bars = sorted({n + 1 for n in chunk_lengths if min_part <= n <= max_part - target})
    low, high = 0, len(bars) - 1
    while len(parts) > budget and low <= high:  # the lowest bar that fits
        middle = (low + high) // 2
        tried = _plan(chunk_lengths, min_part, bars[middle], max_part, target)
        if len(tried) <= budget:
            parts, high = tried, middle - 1
        else:
            low = middle + 1
    if len(parts) > budget:
        raise MergePlanError(
            f"merging {len(chunk_lengths)} chunks ({total} bytes) needs {len(parts)} parts, "
            f"S3 allows {max_parts}; use a larger chunk size"
        )
    return parts


def _plan(chunk_lengths: Sequence[int], min_part: int, copy_min: int, max_part: int,
          target: int) -> list[PlannedPart]:
    """The parts when chunks of at least ``copy_min`` are copied."""
    parts: list[PlannedPart] = []
    pending: list[ChunkRange] = []
    pending_size = 0

    def emit(kind: PartKind, pieces: Sequence[ChunkRange]) -> None:
        parts.append(PlannedPart(len(parts) + 1, kind, tuple(pieces)))

    def flush() -> None:
        nonlocal pending, pending_size
        if pending:
            emit(PartKind.UPLOAD, pending)
        pending, pending_size = [], 0

    for index, length in enumerate(chunk_lengths):
        if length < 0:
            raise MergePlanError(f"chunk {index} has negative length {length}")
        if length == 0:
            continue
        start = 0
        if length >= copy_min:
            if 0 < pending_size < min_part:
                need = min_part - pending_size
                if length - need < min_part:
                    pending.append(ChunkRange(index, 0, length))
                    pending_size += length
                    if pending_size >= target:
                        flush()
                    continue
                pending.append(ChunkRange(index, 0, need))
                start = need
            flush()
            remaining = length - start
            count = -(-remaining // max_part)
            for i in range(count):
                size = remaining // count + (1 if i < remaining % count else 0)
                emit(PartKind.COPY, [ChunkRange(index, start, size)])
                start += size
        else:
            pending.append(ChunkRange(index, 0, length))
            pending_size += length
            if pending_size >= target:
                flush()
    flush()
    return parts


def check_plan(parts: Sequence[PlannedPart], *, min_part: int = MIN_PART_SIZE,
               max_part: int = MAX_PART_SIZE, max_parts: int = MAX_PARTS) -> None:
    """Assert S3's rules on a plan (used by tests and before executing)."""
    if len(parts) > max_parts:
        raise MergePlanError(f"{len(parts)} parts, more than {max_parts}")
    for i, part in enumerate(parts):
        if part.number != i + 1:
            raise MergePlanError(f"part {i} is numbered {part.number}")
        if part.size > max_part:
            raise MergePlanError(f"part {part.number} has {part.size} bytes > {max_part}")
        if i < len(parts) - 1 and part.size < min_part:
            raise MergePlanError(f"part {part.number} has {part.size} bytes < {min_part}")
        if part.kind is PartKind.COPY and len(part.pieces) != 1:
            raise MergePlanError(f"copy part {part.number} has {len(part.pieces)} pieces")
