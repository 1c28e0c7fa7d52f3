"""FlatFile: one queue's file of one type (commit log or consume queue) as segments.

Read as every flat file is (:class:`~tieredstore.store.read.flatreader.FlatReader`:
sealed segments through the queue metadata, the tail is the active segment,
held open and written through the upload buffer pool). Rolling flushes the
active segment, seals it without merging (durable at once), records it in the
metadata, and leaves the merge to a background task; a ``merging.<type>`` head
property lists merges not yet finished, so that the next open resumes them.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tieredstore.errors import SegmentFenced, TieredStoreError
from tieredstore.metadata import QueueMetadata, SegmentRecord, pb_type
from tieredstore.segment import ChunkedSegment, FileType
from tieredstore.segment.pool import FILE_FULL, AppendResult
from tieredstore.segment.reader import ReadMode
from tieredstore.store.base.arguments import now_ms
from tieredstore.store.base.context import StoreContext
from tieredstore.store.formats import properties
from tieredstore.store.formats.keyentries import ENTRY_SIZE, decode_entries
from tieredstore.store.formats.record import decode_units
from tieredstore.store.read.flatreader import FlatReader
from tieredstore.tasks import Priority

log = logging.getLogger(__name__)

# The store timestamps of whole entries' bytes (each checked), for the files of
# fixed-size entries (consume queue, key index): exact record bounds.
ENTRY_STAMPS: dict[FileType, Callable[[bytes | memoryview], list[int]]] = {
    FileType.CONSUME_QUEUE: lambda data: [u.store_timestamp for u in decode_units(data)],
    FileType.INDEX: lambda data: [e.store_timestamp for e in decode_entries(
        data[: len(data) - len(data) % ENTRY_SIZE])],
}

@dataclass
class SegmentStats:
    """Messages in the active segment, for its record when it is sealed (the
    offsets mean nothing while ``count`` is 0).

    ``begin_ts`` is the first message's timestamp (rolling by time counts from
    it), ``end_ts`` the largest seen, ``min_ts`` the smallest. Store timestamps
    may come in any order (within ``timestamp_before_max``), so only
    ``min_ts`` and ``end_ts`` bound them, and only when these stats saw every
    message: ``min_ts`` is None for stats taken over from a segment's first and
    last message (a reopen). ``unseen`` is then how many bytes at the
    segment's start they took over unseen (0: all of it), and ``seen_min`` the
    smallest timestamp of the messages added since: the seal reads the unseen
    bytes' timestamps (:meth:`FlatFile.record_sealed`)."""

    first_offset: int = 0
    last_offset: int = 0
    begin_ts: int = 0
    end_ts: int = 0
    count: int = 0
    min_ts: int | None = None
    unseen: int = 0
    seen_min: int | None = None
    # The store's clock (ms) when the first message was added, for rolling by time
    # on a timer: the store's clock, not the messages' timestamps.
    started_ms: int | None = None

    def add_run(self, first: int, last: int, first_ts: int, max_ts: int, count: int, *,
                min_ts: int) -> None:
        """``count`` messages, offsets ``first..last``, the first stamped
        ``first_ts``, the latest ``max_ts``, the earliest ``min_ts``."""
        if self.count == 0:
            self.first_offset = first
            self.begin_ts = first_ts
            self.min_ts = min_ts
            self.started_ms = now_ms()
        elif self.min_ts is not None:
            self.min_ts = min(self.min_ts, min_ts)
        self.seen_min = min_ts if self.seen_min is None else min(self.seen_min, min_ts)
        self.last_offset = last
        self.end_ts = max(self.end_ts, max_ts)
        self.count += count

    def record(self, file_type: FileType, base: int, size: int) -> SegmentRecord:
        return SegmentRecord(
            file_type=pb_type(file_type),
            base_offset=base,
            size=size,
            first_message_offset=self.first_offset,
            last_message_offset=self.last_offset,
            begin_timestamp_ms=max(0, self.begin_ts),
            end_timestamp_ms=max(self.begin_ts, self.end_ts, 0),
            message_count=self.count,
            sealed_at_ms=now_ms(),
            min_timestamp_ms=None if self.min_ts is None else max(0, self.min_ts),
        )


class FlatFile(FlatReader[ChunkedSegment]):
    """The segments of one queue's file of one type, written and read."""

    def __init__(
        self, ctx: StoreContext, topic: str, queue_id: int, file_type: FileType,
        meta: QueueMetadata,
    ) -> None:
        self.ctx, self.store, self.config = ctx, ctx.store, ctx.config
        self.topic = topic
        self.queue_id = queue_id
        self.file_type = file_type
        self.meta = self.records = meta
        self.max_size = ctx.max_size(file_type, topic)
        self.active: ChunkedSegment | None = None
        self.stats = SegmentStats()
        self._rolling = False  # a roll began and has not finished
        # Work a sealed segment owes after its merge, under the same owed-merge
        # property (the key index's slot object).
        self.after_merge: Callable[[ChunkedSegment], Awaitable[None]] | None = None
        self.stamps = ENTRY_STAMPS.get(file_type)

    # --- positions --------------------------------------------------------------

    @property
    def _active(self) -> ChunkedSegment:
        if self.active is None:
            raise RuntimeError("flat file is not open")
        return self.active

    @property
    def active_base(self) -> int:
        return self._active.path.base_offset

    @property
    def end(self) -> int:
        """Where the next append goes: committed and buffered bytes."""
        return self.active_base + self.ctx.pool.append_position(self._active)

    @property
    def committed_end(self) -> int:
        """Bytes durable in the object store."""
        return self.active_base + self._active.commit_position

    # --- opening -----------------------------------------------------------------

    async def open(self) -> None:
        """Open the active segment (the one after the last recorded) and take it
        over from any writer that still has it open.

        It may come back sealed: a crash (or the writer we replace) sealed it
        before its record. The caller then records it (it knows the stats):
        :meth:`record_if_sealed`.
        """
        path = self.path_of(self.meta.next_base_offset(self.file_type))
        # claim: a writer that still has it open (one we replace) is fenced.
        self.active = await ChunkedSegment.open(
            self.store, path, options=self.ctx.options_for(self.file_type, self.topic),
            reader=self.ctx.fetcher,
            claim=True,
            still_newest=self.ctx.still_newest,
        )
        await self.ctx.adopt_log(self.active)
        first = self.meta.first(self.file_type).base_offset
        owed = properties.merging(self.meta.properties, self.file_type)
        await self.forget_merges({b for b in owed if b < first})  # trimmed since
        for base in (b for b in owed if b >= first):
            sealed = await self.ctx.open_sealed(self.path_of(base))
            self.ctx.background.spawn(self._merge(sealed), f"merge {sealed.path}",
                                      priority=Priority.MERGE)

    # --- writing ------------------------------------------------------------------

    def needs_roll(self, size: int, timestamp: int) -> bool:
        """Whether ``size`` more bytes should go to a new segment."""
        used = self.ctx.pool.append_position(self._active)
        if used == 0 or self.stats.count == 0:
            # A segment holds a message before it rolls; bytes alone can be dead space
            # (a replaced writer's record cut short, docs/writers.md).
            return False
        if used + size > self.max_size:
            return True
        interval = self.ctx.config.rolling_interval
        return interval > 0 and self.stats.count > 0 and (
            timestamp - self.stats.begin_ts >= interval * 1000)

    def old_enough_to_roll(self, now: int) -> bool:
        """Whether the active segment's first message came ``rolling_interval`` or
        more before ``now`` (ms, the store's clock): the timer's test."""
        interval = self.ctx.config.rolling_interval
        started = self.stats.started_ms
        return (interval > 0 and started is not None and self.stats.count > 0
                and now - started >= interval * 1000)

    def append_nowait(self, data: bytes, offset: int, timestamp: int) -> AppendResult:
        """One record where it needs no roll and no wait for the pool: appended
        at its position in the file, else ``FILE_FULL`` (a roll first) or
        ``BUFFER_FULL``, nothing appended (:meth:`append` then).
        See ``UploadBufferPool.yield_due``."""
        if self._rolling or len(data) > self.max_size or self.needs_roll(len(data), timestamp):
            return FILE_FULL
        placed = self.ctx.pool.append_nowait(self._active, data)
        if placed.position is None:
            return placed
        self.stats.add_run(offset, offset, timestamp, timestamp, 1, min_ts=timestamp)
        return AppendResult.at(self.active_base + placed.position)

    async def append(self, data: bytes, sizes: Sequence[int], offsets: Sequence[int],
                     stamps: Sequence[int], positions: list[int]) -> None:
        """Append records or units in order, each within one segment (never split),
        with one pool append per run that fits the active segment, the pool's
        chunk size and ``rolling_interval``. ``data`` holds them back to back,
        the k-th ``sizes[k]`` bytes long, of ``offsets[k]`` and ``stamps[k]``;
        a batch within one chunk and segment goes to the pool as it is.

        Each one's position is added to ``positions`` once it is buffered: if a
        roll or an append fails midway, those before it stay appended.
        """
        limit = self._active.commit_size  # the topic's chunk size
        interval = self.ctx.config.rolling_interval * 1000
        ends = list(itertools.accumulate(sizes))  # ends[k]: bytes of entries[:k + 1]
        i, n = 0, len(sizes)
        while i < n:
            timestamp = stamps[i]
            if sizes[i] > self.max_size:
                raise self._corrupt(f"{sizes[i]}-byte entry exceeds the segment size "
                                    f"{self.max_size}")
            if self._rolling or self.needs_roll(sizes[i], timestamp):
                await self.roll()  # _rolling: a roll that failed midway (a lost reply) goes on
            room = self.max_size - (self.end - self.active_base)
            before = ends[i] - sizes[i]
            # The longest run from i within the chunk size and the segment's room.
            j = max(i + 1, bisect.bisect_right(ends, before + min(limit, room), i, n))
            begin = self.stats.begin_ts if self.stats.count else timestamp
            latest = max(stamps[i:j])
            if interval > 0 and latest - begin >= interval:
                # Not past rolling_interval from the segment's first message.
                j = next(k for k in range(i + 1, j + 1)
                         if k == j or stamps[k] - begin >= interval)
                latest = max(stamps[i:j])
            run = data if before == 0 and ends[j - 1] == len(data) else data[before:ends[j - 1]]
            position = self.active_base + await self.ctx.pool.append(self._active, run)
            self.stats.add_run(offsets[i], offsets[j - 1], timestamp, latest, j - i,
                               min_ts=min(stamps[i:j]))
            positions.extend(itertools.accumulate(sizes[i : j - 1], initial=position))
            i = j

    async def flush(self, until: int | None = None) -> None:
        """Commit every byte appended; return once those before ``until`` (by
        default all) are durable."""
        if self._rolling:
            await self.roll()  # a roll that failed midway: finish it
        relative = None if until is None else until - self.active_base
        await self.ctx.pool.flush(self._active, relative)

    async def skip_lost(self, position: int) -> None:
        """Continue at ``position``: the bytes from the end up to it are lost from
        the bucket (see :meth:`ChunkedSegment.skip_lost`)."""
        await self._active.skip_lost(position - self.active_base)

    async def roll(self) -> None:
        """Seal the active segment (durably, merge later), record it, open the next.

        Each step may be repeated: after a failure (a lost reply, an outage) the
        next append or flush calls this again and it goes on where it stopped.
        """
        segment = self._active
        self._rolling = True
        if not segment.sealed:
            await self.ctx.pool.flush(segment, last=True)  # its tail: a chunk, not the log
            leftover = await self.ctx.pool.detach(segment)
            if leftover:
                raise self._corrupt(f"{len(leftover)} bytes could not be committed before "
                                    "rolling")
            await segment.seal(merge=False)
        await self.record_sealed(segment, self.stats)
        await self._open_next(segment.path.base_offset + segment.commit_position)

    async def record_sealed(self, segment: ChunkedSegment, stats: SegmentStats) -> None:
        """Record a sealed segment in the metadata and start its merge."""
        if stats.count == 0:
            raise self._corrupt(f"sealed segment {segment.path} holds no message")
        base = segment.path.base_offset
        if stats.min_ts is None and self.stamps is not None:
            stats = await self._with_unseen(segment, stats)
        record = stats.record(self.file_type, base, segment.commit_position)
        merge = self.ctx.segment_options.merge_on_seal and not segment.merged
        # The record and the note that its merge is owed land in one head write.
        await self.meta.append(record, properties=lambda current: properties.merging_update(
            current, self.file_type, add=base if merge else None))
        self.ctx.keep_sealed(segment)
        if merge:
            self.ctx.background.spawn(self._merge(segment), f"merge {segment.path}",
                                      priority=Priority.MERGE)

    async def _with_unseen(self, segment: ChunkedSegment, stats: SegmentStats) -> SegmentStats:
        """``stats`` bounded exactly: the timestamps of the bytes they took over
        unseen (one read) folded in. If that read fails, ``stats`` as they are
        (the record then bounds nothing, and retention reads it, see
        :meth:`newest_timestamp`)."""
        length = stats.unseen or segment.commit_position
        stamps = await self._stamps(segment.read0(0, length), f"{segment.path}: the "
                                    f"timestamps of its first {length} bytes")
        if not stamps:
            return stats
        seen = [] if stats.seen_min is None else [stats.seen_min]
        return dataclasses.replace(stats, min_ts=min([*stamps, *seen]),
                                   end_ts=max([stats.end_ts, *stamps]))

    async def newest_timestamp(self, record: SegmentRecord) -> int | None:
        """The largest timestamp in ``record``'s segment: its ``end_timestamp_ms``
        if it bounds its timestamps (has ``min_timestamp_ms``), else read from its
        entries (one read of the segment); None if they cannot be read."""
        if record.HasField("min_timestamp_ms") or self.stamps is None:
            return record.end_timestamp_ms
        stamps = await self._stamps(self.read(record.base_offset, record.size),
                                    f"{self.topic}/{self.queue_id}: {self.file_type.label} "
                                    f"segment at {record.base_offset}: its timestamps")
        return None if stamps is None else max([record.end_timestamp_ms, *stamps])

    async def _stamps(self, read: Awaitable[bytes | memoryview], what: str) -> list[int] | None:
        """The timestamps of the entries ``read`` gives; None (logged) if it fails."""
        assert self.stamps is not None
        try:
            return self.stamps(await read)
        except TieredStoreError as exc:
            log.warning("%s cannot be read: %s", what, exc)
            return None

    async def open_first(self) -> None:
        """Open a file that had no segment, as one more segment of this writer's
        (no claim: a segment with entries there is a newer writer's, which
        replaced us, and :class:`SegmentFenced` says so)."""
        await self._open_next(self.meta.next_base_offset(self.file_type))

    async def record_if_sealed(self, stats: SegmentStats) -> None:
        """After :meth:`open`: an active segment that came back sealed (not yet
        recorded) is recorded with ``stats`` and the next one opened."""
        if self._active.sealed:
            await self.record_sealed(self._active, stats)
            await self._open_next(self.end)

    async def _open_next(self, base: int) -> None:
        path = self.path_of(base)
        # repair=False: a next segment with entries is a newer writer's, and ours to
        # leave alone (repairing it raced that writer's merge: a HEAD of a chunk its
        # cleanup had just deleted failed this store's append with ObjectNotFound).
        segment = await ChunkedSegment.open(
            self.ctx.store, path, options=self.ctx.options_for(self.file_type, self.topic),
            reader=self.ctx.fetcher,
            repair=False,
        )
        if segment.has_entries or segment.sealed:
            # Only a writer that took the queue over since our last head write
            # can have written here (a fence, or its data): we are replaced.
            raise SegmentFenced("the next segment already has entries: a newer writer "
                                "took the queue over", segment=str(path))
        await self.ctx.adopt_log(segment)
        self.active = segment
        self.stats = SegmentStats()
        self._rolling = False

    async def _merge(self, segment: ChunkedSegment) -> None:
        if not await self.ctx.merge(segment):
            return  # expired meanwhile: retention dropped what it owed
        if self.after_merge is not None:
            await self.after_merge(segment)
        base = segment.path.base_offset
        if base in properties.merging(self.meta.properties, self.file_type):
            # Read and changed under the metadata's write lock: concurrent merges
            # finishing at once each remove their own entry.
            await self.meta.set_properties(
                lambda current: properties.merging_update(current, self.file_type,
                                                          remove=[base]))

    async def forget_merges(self, bases: set[int]) -> None:
        """Drop owed merges of segments retention deleted (one head write, if any)."""
        if bases & set(properties.merging(self.meta.properties, self.file_type)):
            await self.meta.set_properties(lambda current: properties.merging_update(
                current, self.file_type, remove=bases))

    # --- reading (the rules are FlatReader's) ------------------------------------------

    @property
    def next_base(self) -> int:
        return self.active_base

    async def _tail(self, reach: int) -> list[tuple[ChunkedSegment, int]]:
        return [(self._active, self.end)]

    async def _recorded(self, record: SegmentRecord) -> ChunkedSegment:
        segment = await self.ctx.open_sealed(self.path_of(record.base_offset))
        problem = self._size_problem(segment, record)
        if problem is not None:
            raise self._corrupt(problem)
        return segment

    async def _read(self, segment: ChunkedSegment, local: int, length: int, mode: ReadMode
                    ) -> bytes | memoryview:
        # the pool's, for what it buffers of the active segment; the segment's else
        return await self.ctx.pool.read(segment, local, length, mode=mode)
