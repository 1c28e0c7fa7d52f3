"""Rebuild a queue's metadata records from its segments: the bucket alone.

Used when a queue has segments but no valid head (heads deleted, or every
one damaged). Per file type, the segments are listed and opened read-only;
the run of contiguous segments that ends at the newest one is the queue's
(older, unconnected segments are reported, not adopted: garbage for GC).
Every sealed segment of that run gets its record back:

- consume queue: offsets from positions (unit ``n`` at byte ``32 n``),
  timestamps from its first and last units;
- commit log: the first offset and time from its first record: the one at
  the segment's start, or, where it begins with dead space (a replaced
  writer's record cut short), the first one a consume-queue unit points
  into; the last offset is one before the next segment's first; the last
  time is that offset's unit in the consume queue, or the next segment's
  first time (an upper bound, so that retention keeps the segment rather
  than drops it early). The last sealed segment before an empty active one
  is scanned from its last unit.

- key index: offsets and times from its first and last entries; the first
  entry of the oldest segment gives ``index.from`` back.

Segments sealed but not merged are noted in ``merging.<type>`` so that the
open resumes their merges. What cannot be known is said: ``clean_from`` is
not rebuilt.

A directory of zero-byte entries alone (fences, a seal) is what retention
leaves of a segment it deleted (docs/chunks.md, "Chunk series"): not a
segment, even while log objects still hold pieces of it, unless it is the
file's newest (in write mode ``log`` an open segment may be a fence and
pieces alone). A file whose earlier segments retention deleted so has no
record to say where it goes on: its *start* (the first segment of its run,
and the first message offset there) sets its first pointer, in the same head
write (``QueueMetadata.append_many``, ``starts``), so that the writer opens
the active segment and ``min_offset`` is where retention left it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.log import LogSnapshot
from tieredstore.metadata import First, SegmentRecord
from tieredstore.objectstore.base import ObjectInfo, ObjectStore
from tieredstore.segment import (
    ChunkedSegment,
    FileType,
    SegmentOptions,
    group_segments,
    list_file,
)
from tieredstore.store.base.context import StoreContext
from tieredstore.store.formats.keyentries import ENTRY_SIZE, decode_entries
from tieredstore.store.formats.record import (
    HEAD_SIZE,
    UNIT_SIZE,
    RecordError,
    decode_unit,
    record_head,
    record_size,
)
from tieredstore.store.read.view import OPEN_CONCURRENCY, listed_queues, load_log, open_metadata
from tieredstore.store.write.flatfile import SegmentStats
from tieredstore.tasks import gather_bounded

log = logging.getLogger(__name__)


@dataclass
class Rebuilt:
    """What a rebuild found: records per file type, owed merges, and notes."""

    records: dict[FileType, list[SegmentRecord]] = field(default_factory=dict)
    merging: dict[FileType, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    index_from: int | None = None  # the first offset the key index covers, if any
    # Where a file with no record begins, when not at 0 (see the module's docstring).
    starts: dict[FileType, First] = field(default_factory=dict)


async def segment_bases(ctx: StoreContext, topic: str, queue_id: int,
                        file_type: FileType) -> list[int]:
    """Base offsets of the segments a file has in the bucket (one paged LIST), and
    of those whose bytes are pieces of the broker's log (loaded at the open).
    A directory of zero-byte entries alone is a segment retention deleted,
    whose pieces were spent (a seal takes them in first), unless it is the
    newest segment: an open one in write mode ``log``."""
    pieces = set(ctx.log.bases(topic, queue_id, file_type) if ctx.log else ())
    listed = await list_file(ctx.store, ctx.segment_path(topic, queue_id, file_type, 0))
    newest = max(pieces | listed.keys(), default=0)
    return sorted({base for base, seg in listed.items() if seg.holds_bytes}
                  | {base for base in pieces if base == newest or base not in listed})


async def store_keys(store: ObjectStore, config: TieredStoreConfig) -> list[ObjectInfo]:
    """Every key under ``key_prefix`` (one paged LIST): what
    :func:`queues_with_segments` finds segments in, for every broker of the
    cluster at once. List it after loading the logs it goes with."""
    return await store.list_all(f"{config.key_prefix}/" if config.key_prefix else "")


async def queues_with_segments(store: ObjectStore, config: TieredStoreConfig, *,
                               log: LogSnapshot | None = None,
                               keys: Sequence[ObjectInfo] | None = None
                               ) -> dict[tuple[str, int], int]:
    """Every queue of this cluster and broker that has segments in the bucket, with
    how many: those the broker's log holds pieces of (loaded as a reader loads
    it, first: every byte is in one of the two listings; ``log``: one the
    caller has just loaded), and those with chunks or a merged object (one
    paged LIST of the whole store prefix; ``keys``: that listing, made by the
    caller after loading ``log``, for every broker at once: :func:`store_keys`).
    What a writer's open finds, for checks and repair."""
    segments: dict[tuple[str, int], set[tuple[FileType, int]]] = {}
    if log is None:
        if keys is not None:
            raise ValueError("keys listed before the log was loaded miss bytes compacted "
                             "in between: load the log first")
        log = await load_log(store, config)
    for queue in log.queues():
        segments[queue] = {(file_type, base) for file_type, base, _ in log.of_queue(*queue)}
    if keys is None:
        keys = await store_keys(store, config)
    for path, listed in group_segments(config.key_prefix, keys).items():
        if listed.holds_bytes and (path.cluster, path.broker) == (config.cluster, config.broker):
            segments.setdefault((path.topic, path.queue_id), set()).add(
                (path.file_type, path.base_offset))
    return {queue: len(found) for queue, found in sorted(segments.items())}


async def queues_to_rebuild(store: ObjectStore, config: TieredStoreConfig, *,
                            log: LogSnapshot | None = None,
                            opened: Collection[tuple[str, int]] = (),
                            keys: Sequence[ObjectInfo] | None = None
                            ) -> list[tuple[str, int, str]]:
    """The queues with segments (:func:`queues_with_segments`, with ``log`` and
    ``keys``) whose
    metadata is lost, with why: ``"no head"``, or ``"every head damaged"`` (none
    can be read). ``opened``: queues whose metadata the caller has just opened,
    not opened again. Read-only: what a writer's open rebuilds, for ``tieredstore
    repair``; what the bucket exporter counts among the queues it cannot read."""
    with_heads = set(await listed_queues(store, config))

    async def why(queue: tuple[str, int]) -> str | None:
        if queue not in with_heads:
            return "no head"
        if queue in opened:
            return None
        try:
            await open_metadata(store, config, *queue)
        except TieredStoreError:
            return "every head damaged"
        return None

    queues = list(await queues_with_segments(store, config, log=log, keys=keys))
    return [(topic, queue_id, reason) for (topic, queue_id), reason in zip(
        queues, await gather_bounded(OPEN_CONCURRENCY, why, queues), strict=True) if reason]


async def has_segments(ctx: StoreContext, topic: str, queue_id: int) -> bool:
    for file_type in (FileType.CONSUME_QUEUE, FileType.COMMIT_LOG):
        if await segment_bases(ctx, topic, queue_id, file_type):
            return True
    return False


Run = list[ChunkedSegment]  # one file's contiguous segments, opened read-only


async def _open_run(ctx: StoreContext, topic: str, queue_id: int, file_type: FileType,
                    out: Rebuilt) -> Run:
    options = SegmentOptions(chunk_size=ctx.config.for_topic(topic).chunk_size,
                             merge_on_seal=False)
    opened = []
    for base in await segment_bases(ctx, topic, queue_id, file_type):
        path = ctx.segment_path(topic, queue_id, file_type, base)
        seg = await ChunkedSegment.open(ctx.store, path, options=options, reader=ctx.fetcher,
                                        repair=False)
        if ctx.log is not None:  # its bytes past the chunks: log pieces (read, not adopted)
            seg.adopt_borrowed(ctx.log.of(path))
        opened.append(seg)
    run: Run = []
    for seg in reversed(opened):
        if run and seg.path.base_offset + seg.commit_position != run[0].path.base_offset:
            out.notes.append(f"{seg.path} does not reach the next segment: not adopted")
            continue
        if run and not seg.sealed:
            out.notes.append(f"{seg.path} is not sealed but a later segment exists: not adopted")
            break
        run.insert(0, seg)
    return run


async def _unit(cq: Run, offset: int) -> tuple[int, int] | None:
    """(commit-log position, store time) of ``offset``'s unit, if the CQ has it."""
    for seg in cq:
        local = offset * UNIT_SIZE - seg.path.base_offset
        if 0 <= local < seg.commit_position:
            unit = decode_unit(await seg.read0(local, UNIT_SIZE))
            return unit.position, unit.store_timestamp
    return None


async def _record_at(seg: ChunkedSegment, local: int) -> tuple[int, int, int] | None:
    """(size, offset, store time) of the record at ``local``, or None if none is there."""
    if seg.commit_position - local < HEAD_SIZE:
        return None
    try:
        size = record_size(await seg.read0(local, HEAD_SIZE))
        if local + size > seg.commit_position:
            return None
        offset, store_ts = record_head(await seg.read0(local, size))
    except RecordError:
        return None
    return size, offset, store_ts


async def _cq_records(cq: Run, out: Rebuilt) -> None:
    for seg in cq:
        if not seg.sealed:
            continue
        base, size = seg.path.base_offset, seg.commit_position
        first = decode_unit(await seg.read0(0, UNIT_SIZE))
        last = decode_unit(await seg.read0(size - UNIT_SIZE, UNIT_SIZE))
        stats = SegmentStats(base // UNIT_SIZE, (base + size) // UNIT_SIZE - 1,
                             first.store_timestamp, max(first.store_timestamp,
                                                        last.store_timestamp),
                             size // UNIT_SIZE)
        _add(out, FileType.CONSUME_QUEUE, seg, stats)


async def _index_records(index: Run, out: Rebuilt) -> None:
    for seg in index:
        size = seg.commit_position - seg.commit_position % ENTRY_SIZE
        if size < ENTRY_SIZE:
            continue
        first = next(decode_entries(await seg.read0(0, ENTRY_SIZE)))
        if out.index_from is None:
            out.index_from = first.offset
        if not seg.sealed:
            continue
        last = next(decode_entries(await seg.read0(size - ENTRY_SIZE, ENTRY_SIZE)))
        _add(out, FileType.INDEX, seg, SegmentStats(
            first.offset, last.offset, first.store_timestamp,
            max(first.store_timestamp, last.store_timestamp), size // ENTRY_SIZE))


class FirstRecord(NamedTuple):
    """A commit-log segment's first record: where it is in the segment, its
    offset and its store time."""

    local: int
    offset: int
    store_ts: int


async def _first_record(seg: ChunkedSegment, cq: Run, cq_end: int) -> FirstRecord | None:
    """The first record of commit-log segment ``seg``: the one at its start, or,
    where the segment begins with dead space (a replaced writer's record whose
    first chunks landed and the rest never did; its successor went on past it,
    docs/records.md), the first one a consume-queue unit points into it (found by
    bisecting the consume queue). None if neither is there."""
    found = await _record_at(seg, 0)
    if found is not None:
        return FirstRecord(0, found[1], found[2])
    base, end = seg.path.base_offset, seg.path.base_offset + seg.commit_position
    lo, hi = min((s.path.base_offset // UNIT_SIZE for s in cq), default=cq_end), cq_end
    while lo < hi:  # the first offset whose unit points at or past the segment's base
        mid = (lo + hi) // 2
        unit = await _unit(cq, mid)
        if unit is None or unit[0] >= base:
            hi = mid
        else:
            lo = mid + 1
    unit = await _unit(cq, lo) if lo < cq_end else None
    if unit is None or not base <= unit[0] < end:
        return None
    return FirstRecord(unit[0] - base, lo, unit[1])


async def _cl_records(cl: Run, cq: Run, cq_end: int, out: Rebuilt) -> None:
    starts = [await _first_record(seg, cq, cq_end) for seg in cl]
    for i, seg in enumerate(cl):
        if not seg.sealed:
            continue
        start = starts[i]
        if start is None:
            out.notes.append(f"{seg.path}: no record found in it: not adopted")
            return
        following = starts[i + 1] if i + 1 < len(starts) else None
        if following is not None:
            last, end_ts = following.offset - 1, following.store_ts
            unit = await _unit(cq, last)
            if unit is not None:
                end_ts = unit[1]
        else:
            last, end_ts = await _scan_to_end(seg, cq, cq_end, start)
        stats = SegmentStats(start.offset, last, start.store_ts, max(start.store_ts, end_ts),
                             last - start.offset + 1)
        _add(out, FileType.COMMIT_LOG, seg, stats)


async def _scan_to_end(seg: ChunkedSegment, cq: Run, cq_end: int,
                       start: FirstRecord) -> tuple[int, int]:
    """The last record of ``seg`` (offset, time): from the last unit pointing into it
    (found by bisecting the consume queue), scanning on to the segment's end."""
    base, end = seg.path.base_offset, seg.path.base_offset + seg.commit_position
    lo, hi = start.offset, cq_end  # the last offset whose unit points into [base, end)
    found: tuple[int, int] | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        unit = await _unit(cq, mid)
        if unit is None or unit[0] >= end:
            hi = mid
        else:
            lo = mid + 1
            if unit[0] >= base:
                found = (mid, unit[0] - base)
    offset, ts, local = start.offset, start.store_ts, start.local
    if found is not None:
        offset, local = found
    while (record := await _record_at(seg, local)) is not None:
        size, offset, ts = record
        local += size
    return offset, ts


def _add(out: Rebuilt, file_type: FileType, seg: ChunkedSegment, stats: SegmentStats) -> None:
    record = stats.record(file_type, seg.path.base_offset, seg.commit_position)
    out.records.setdefault(file_type, []).append(record)
    if not seg.merged:
        out.merging.setdefault(file_type, []).append(seg.path.base_offset)


async def rebuild_queue(ctx: StoreContext, topic: str, queue_id: int) -> Rebuilt:
    """The records of a queue's sealed segments, from the bucket alone."""
    out = Rebuilt()
    cq = await _open_run(ctx, topic, queue_id, FileType.CONSUME_QUEUE, out)
    cl = await _open_run(ctx, topic, queue_id, FileType.COMMIT_LOG, out)
    await _cq_records(cq, out)
    cq_end = max((s.path.base_offset + s.commit_position for s in cq), default=0)
    await _cl_records(cl, cq, cq_end // UNIT_SIZE, out)
    index = await _open_run(ctx, topic, queue_id, FileType.INDEX, out)
    await _index_records(index, out)
    for file_type, run in ((FileType.CONSUME_QUEUE, cq), (FileType.COMMIT_LOG, cl),
                           (FileType.INDEX, index)):
        await _start(file_type, run, cq, cq_end // UNIT_SIZE, out)
    return out


async def _start(file_type: FileType, run: Run, cq: Run, next_offset: int,
                 out: Rebuilt) -> None:
    """Where a file with no record goes on, if not at 0: the first segment of its
    run (every segment before it was deleted by retention), and its first
    message offset: a consume queue's from its base, a commit log's from its
    first record (:func:`_first_record`), a key index's from its first entry;
    an empty segment's is ``next_offset`` (the consume queue's end)."""
    if out.records.get(file_type) or not run:
        return
    seg = run[0]
    base = seg.path.base_offset
    if base == 0:
        return
    first = next_offset
    if file_type is FileType.CONSUME_QUEUE:
        first = base // UNIT_SIZE
    elif file_type is FileType.COMMIT_LOG:
        found = await _first_record(seg, cq, next_offset)
        first = found.offset if found is not None else first
    elif seg.commit_position >= ENTRY_SIZE:
        first = next(decode_entries(await seg.read0(0, ENTRY_SIZE))).offset
    out.starts[file_type] = First(base, first)
