"""OwnedQueue: one queue's commit log and consume queue, and how they stay in step.

A message is appended to the commit log (CL) first. Its consume-queue (CQ)
unit is *dispatched* to the CQ only once the CL bytes it points to are
committed, so the CQ never points at bytes that a crash could lose. Until
then the unit waits in memory, where ``get`` finds it too. Recovery re-
dispatches: it scans the CL from the end of the last CQ unit and appends the
units of every complete, checked record it finds. A record cut short by a
crash at the CL's end is dead space; the ``clean_from.commitlog`` head
property remembers where clean records resume, so a later scan skips it.

Over 400 lines because appending, dispatching, recovering and reading one
queue share its in-memory state (the pending units, the three flat files'
commit positions, ``clean_from``) under one lock: re-dispatch at recovery is
the dispatch of appends run over stored records, and reads must see the
pending units dispatch has not stored yet. The reading itself is
:class:`~tieredstore.store.read.reading.QueueReading`, shared with read-only views.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from operator import itemgetter

from tieredstore.errors import CorruptSegment, IntegrityError, TieredStoreError
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.metrics import QueueFigures
from tieredstore.segment import FileType
from tieredstore.store.base.arguments import now_ms
from tieredstore.store.base.context import StoreContext
from tieredstore.store.base.errors import OffsetError, passing
from tieredstore.store.base.outgoing import Outgoing, bare
from tieredstore.store.formats import properties
from tieredstore.store.formats.keyentries import KeyEntry, indexed_keys
from tieredstore.store.formats.record import (
    UNIT_SIZE,
    CqUnit,
    encode_bare_records,
    encode_record,
    tags_hash,
)
from tieredstore.store.read.bykey import KeyQuery
from tieredstore.store.read.checks import ScanStop
from tieredstore.store.read.reading import QueueReading
from tieredstore.store.read.tail import tail_records, tail_start
from tieredstore.store.write.flatfile import FlatFile, SegmentStats
from tieredstore.store.write.keyindex import KeyIndex
from tieredstore.store.write.pending import Pending, PendingUnits
from tieredstore.store.write.recovery import rebuild_queue
from tieredstore.tasks import PriorityLock

log = logging.getLogger(__name__)

CATCH_UP_STEP = 1024  # records read at a time to re-derive key index entries
CATCH_UP_BYTES = 4 * 1024 * 1024


class OwnedQueue(QueueReading):
    """The flat files of one queue and the offsets over them."""

    cl: FlatFile
    cq: FlatFile

    def __init__(self, ctx: StoreContext, topic: str, queue_id: int, meta: QueueMetadata
                 ) -> None:
        self.ctx = ctx
        self.topic = topic
        self.queue_id = queue_id
        self.meta = meta
        self.cl = FlatFile(ctx, topic, queue_id, FileType.COMMIT_LOG, meta)
        self.cq = FlatFile(ctx, topic, queue_id, FileType.CONSUME_QUEUE, meta)
        self.index = KeyIndex(ctx, topic, queue_id, meta)
        self.codec = ctx.opener  # reads records sealed with any settings
        self.next_offset = 0
        # Priority inheritance: an append or flush waiting here lifts the requests
        # of the roll by time or retention that holds it (tasks.PriorityLock).
        self.lock = PriorityLock()
        self._appends_waiting = 0  # appends waiting for the lock (see _appending)
        self._pending = PendingUnits()

    @property
    def damage(self) -> list[str]:
        """What the open segments miss from the bucket (holes read around)."""
        return [f"{flat.file_type.label} segment {flat._active.path}: bytes "
                f"[{u.position}, {u.end}) are missing from the bucket"
                for flat in self.flat_files for u in flat._active.layout.holes]

    @property
    def flat_files(self) -> list[FlatFile]:
        """The open flat files: commit log, consume queue and, if any, key index."""
        index = self.index.flat
        return [self.cl, self.cq] if index is None else [self.cl, self.cq, index]

    # --- opening and recovery -------------------------------------------------------

    @classmethod
    async def open(cls, ctx: StoreContext, topic: str, queue_id: int) -> OwnedQueue:
        """Open (or create) a queue and recover it from the bucket.

        A queue whose metadata holds no segment record, live or trimmed, no
        file start past 0 and no ``rebuilt`` property (new, its heads lost or
        all damaged, or heads older than that property) gets the records of
        the sealed segments the bucket holds for it back first, and where each
        file goes on after segments retention deleted
        (:mod:`tieredstore.store.write.recovery`), in one head write that sets
        ``rebuilt``; the log says so when it found any.
        """
        meta = await QueueMetadata.open(
            ctx.store, QueuePath(ctx.metadata_root, topic, queue_id),
            writer_id=ctx.writer_id, page_size=ctx.config.metadata_page_size, claim=True,
            start_over_damaged=True, still_newest=ctx.still_newest,
        )
        queue = cls(ctx, topic, queue_id, meta)
        try:
            if not any(meta.next_base_offset(t) for t in FileType) \
                    and not properties.rebuilt(meta.properties):
                await queue._rebuild()
            await queue._recover()
        except BaseException:
            await queue.abandon()
            raise
        return queue

    async def abandon(self) -> None:
        """A failed open lets go of its segments: bytes it buffered (units it
        re-dispatched) must not go on committing behind the next open, which
        dispatches them again."""
        for flat in reversed(self.flat_files):
            if flat.active is not None:
                try:
                    await self.ctx.pool.detach(flat.active)
                except Exception as exc:  # the open's own failure is what is raised
                    log.debug("%s/%d: letting go of %s: %s", self.topic, self.queue_id,
                              flat.active.path, exc)

    async def _rebuild(self) -> None:
        rebuilt = await rebuild_queue(self.ctx, self.topic, self.queue_id)
        records = [r for ft in (FileType.CONSUME_QUEUE, FileType.COMMIT_LOG, FileType.INDEX)
                   for r in rebuilt.records.get(ft, [])]
        found: dict[str, str | None] = properties.rebuilt_update()
        for file_type, bases in rebuilt.merging.items():
            found.update(properties.merging_set(file_type, bases))
        if rebuilt.index_from is not None:
            found.update(properties.index_from_update(rebuilt.index_from))
        quiet = not records and not rebuilt.notes and not rebuilt.starts and \
            rebuilt.index_from in (None, properties.index_from(self.meta.properties))
        # Written also when nothing was found: later opens then skip the listings.
        await self.meta.append_many(records, properties=found, starts=rebuilt.starts)
        if quiet:
            return  # nothing the metadata did not say (a new queue, a young queue's reopen)
        said = rebuilt.notes + [f"{t.label} goes on at {s.base_offset} (offset "
                                f"{s.message_offset}): retention deleted the segments before"
                                for t, s in rebuilt.starts.items()]
        log.warning("%s/%d: no segment record in its metadata but segments in the bucket: "
                    "rebuilt %d record(s) from them%s", self.topic, self.queue_id,
                    len(records), "".join(f"; {n}" for n in said))

    async def _recover(self) -> None:
        await self.cq.open()
        # Fenced in this order; the commit log open before any unit is read, as a
        # damaged consume-queue range is rebuilt from the commit log.
        await self.cl.open()
        if self.cq._active.sealed:  # sealed, not yet recorded: its units say what it holds
            await self.cq.record_if_sealed(await self._cq_stats())
        self.next_offset = self.cq.end // UNIT_SIZE
        self.cq.stats = await self._cq_stats()
        await self._catch_up_index()
        await self._redispatch()
        cl_first = self.meta.next_message_offset(self.cl.file_type)
        self.cl.stats = await self._stats_from_units(cl_first, self.next_offset)
        await self.cl.record_if_sealed(self.cl.stats)
        await self.index.flush()
        now = now_ms()
        for flat in self.flat_files:  # messages from before this open: their own time
            flat.stats.started_ms = min(now, flat.stats.begin_ts) if flat.stats.count else None

    async def _catch_up_index(self) -> None:
        """Hand the key index the records of stored units it has no entries for
        (it may trail the consume queue after a crash, see docs/records.md)."""
        start = await self.index.open()
        if start is None:
            return
        at = max(start, self.min_offset)
        while at < self.next_offset:
            try:
                messages = await self.get(at, min(CATCH_UP_STEP, self.next_offset - at),
                                          CATCH_UP_BYTES)
                units = await self.units(at, at + len(messages))
            except TieredStoreError as exc:
                if passing(exc):  # an outage: the open fails, the next one catches up
                    raise
                log.error("%s/%d: the key index misses offsets [%d, %d), whose records "
                          "cannot be read: %s", self.topic, self.queue_id, at,
                          self.next_offset, exc)
                return
            if not messages:
                return
            self.index.add([Pending(m.offset, u, indexed_keys(m.keys, m.properties))
                            for m, u in zip(messages, units, strict=True)])
            at += len(messages)

    async def _cq_stats(self) -> SegmentStats:
        """Stats of the consume queue's active segment, from its units."""
        stats = await self._stats_from_units(self.cq.active_base // UNIT_SIZE,
                                             self.cq.end // UNIT_SIZE)
        stats.unseen = self.cq.end - self.cq.active_base
        return stats

    async def _stats_from_units(self, first: int, end: int) -> SegmentStats:
        """Stats of offsets ``[first, end)``; timestamps from the live units among them
        (the CQ may already have dropped the first units of an old CL segment)."""
        if end <= first:
            return SegmentStats()
        begin = (await self.units(max(first, self.min_offset), max(first, self.min_offset) + 1))
        last = await self.units(end - 1, end)
        return SegmentStats(first, end - 1, begin[0].store_timestamp,
                            max(begin[0].store_timestamp, last[0].store_timestamp), end - first)

    async def _redispatch(self) -> None:
        """Append the CQ units of CL records committed after the last unit."""
        behind = False
        if self.next_offset > self.min_offset:
            units_end = (await self.units(self.next_offset - 1, self.next_offset))[0].end
        else:  # no unit left to say where the next record is (none yet, or expired)
            units_end, behind = self.cl.first, True
        end = self.cl.end
        if units_end > end:
            if self.cl._active.sealed or units_end < self.cl.active_base:
                raise self._corrupt(f"the consume queue points to commit-log byte "
                                    f"{units_end}, past the commit log's end {end}")
            # The last commit-log chunks are gone from the bucket: their messages
            # cannot be read, and nothing new may be written where they were.
            await self.cl.skip_lost(units_end)
            end = self.cl.end
        start = tail_start(self.next_offset, None if behind else units_end,
                           first=self.cl.first,
                           clean_from=properties.clean_from(self.meta.properties))
        position = start.position
        if position > end:
            raise self._corrupt(f"clean records resume at commit-log byte {position}, past "
                                f"the commit log's end {end}")
        try:
            async for found in tail_records(self.cl, start, end, codec=self.codec):
                if isinstance(found, ScanStop):
                    if not found.dead:
                        raise self._corrupt(found.problem)
                    break  # a record cut short by a crash at the very end: dead space
                message = found.message
                self._pending.add(found.offset, found.unit,
                                  indexed_keys(message.keys, message.properties))
                self.next_offset = found.offset + 1
                position = found.end
        except (IntegrityError, CorruptSegment) as exc:
            # Damage in the bucket: what follows was never in the consume queue
            # (never acknowledged by a flush); it becomes dead space.
            log.error("%s/%d: commit log unreadable from byte %d, %d bytes after it "
                      "become dead space: %s", self.topic, self.queue_id, position,
                      end - position, exc)
        # Not _flush_unlocked: the commit log holds nothing buffered here, and its
        # active segment may be sealed awaiting its record (stats come after).
        await self._dispatch()
        await self.cq.flush()
        if position < end:
            await self.meta.set_properties(properties.clean_from_update(end))

    # --- writing ----------------------------------------------------------------------

    async def append(self, message: Outgoing, offset: int | None = None) -> int:
        """Append one message (checked: store/base/arguments.py); its offset, which
        ``offset``, if given, must be. Placed without the lock when nothing else
        appends and it needs no roll and no wait for the pool (the common
        append), else a batch of one."""
        if not self.lock.locked() and not self._appends_waiting and \
                offset in (None, self.next_offset):
            at = self.next_offset
            ts = now_ms() if message.timestamp is None else int(message.timestamp)
            record = self._encode(at, ts, message)
            placed = self.cl.append_nowait(record, at, ts)
            if placed.position is not None:  # else a roll or a full pool: the locked way
                self._pending.add(at, CqUnit(placed.position, len(record), tags_hash(message.tags),
                                             ts), indexed_keys(message.keys, message.properties))
                self.next_offset = at + 1
                if self.ctx.pool.yield_due():
                    await asyncio.sleep(0)
                if self._dispatch_due():
                    async with self.lock:
                        await self._dispatch_appended()
                return at
        return await self.append_batch([message], offset)

    @contextlib.asynccontextmanager
    async def _appending(self) -> AsyncIterator[None]:
        """The lock, for an append: while one waits for it, no append takes the
        way without it, so offsets follow the order appends were called in."""
        self._appends_waiting += 1
        waiting = True
        try:
            async with self.lock:
                self._appends_waiting -= 1
                waiting = False
                yield
        finally:
            if waiting:
                self._appends_waiting -= 1

    def _encode(self, offset: int, ts: int, m: Outgoing) -> bytes:
        record = encode_record(offset, ts, m.body, keys=m.keys, tags=m.tags,
                               properties=m.properties)
        return record if self.ctx.codec is None else self.ctx.codec.seal(record)

    async def append_batch(self, messages: Sequence[Outgoing],
                           first_offset: int | None = None) -> int:
        """Append ``messages`` in order with one lock, one encode each and one pool
        append per run of records; the first one's offset (the rest follow).
        Messages that carry no timestamp get the store's clock; ``first_offset``,
        if given, must be the queue's next offset (else nothing is appended). If
        a roll or the pool fails midway, the messages before the failure stay
        appended."""
        async with self._appending():
            first = self.next_offset
            if first_offset is not None and first_offset != first:
                kind = "a gap" if first_offset > first else "a rewind"
                raise OffsetError(f"offset {first_offset} would be {kind}: the next offset "
                                  f"is {first}", topic=self.topic, queue_id=self.queue_id)
            now = now_ms()
            stamps = list(map(itemgetter(4), messages))
            if stamps.count(None) == len(stamps):  # none carries its own
                stamps = [now] * len(stamps)
            else:
                stamps = [now if t is None else int(t) for t in stamps]
            plain = self.ctx.codec is None and bare(messages)
            if plain:
                data, sizes = encode_bare_records(list(map(itemgetter(0), messages)), first,
                                                  stamps)
            else:
                records = [self._encode(first + k, ts, m)
                           for k, (m, ts) in enumerate(zip(messages, stamps, strict=True))]
                data, sizes = b"".join(records), list(map(len, records))
            positions: list[int] = []
            try:
                await self.cl.append(data, sizes, range(first, first + len(sizes)), stamps,
                                     positions)
            finally:
                if plain:
                    self._pending.add_bare(first, positions, sizes, stamps)
                else:
                    for k, position in enumerate(positions):
                        m = messages[k]
                        self._pending.add(first + k, CqUnit(position, sizes[k],
                                                            tags_hash(m.tags), stamps[k]),
                                          indexed_keys(m.keys, m.properties))
                self.next_offset += len(positions)
            await self._dispatch_appended()
            return first

    def _dispatch_due(self) -> bool:
        """Whether the first pending unit's record is committed (one to dispatch)."""
        first_end = self._pending.first_end()
        return first_end is not None and first_end <= self.cl.committed_end

    async def _dispatch_appended(self) -> None:
        """After an append: dispatch what the commit log's commits made durable. A
        failure is left for flush to report: the messages are appended."""
        if not self._dispatch_due():
            return  # nothing committed to dispatch (the common case)
        try:
            await self._dispatch()
        except Exception as exc:
            log.debug("%s/%d: dispatch deferred: %s", self.topic, self.queue_id, exc)

    async def _dispatch(self) -> None:
        """Move units whose CL bytes are committed into the CQ (one pool append per
        run of units)."""
        pending = self._pending
        ready = pending.ready(self.cl.committed_end)
        if not ready:
            return
        first, stamps = pending.first, pending.stamps(ready)
        if self.index.flat is None and pending.keyed_within(ready):
            await self.index.start(first)  # before any of their units can be stored
        positions: list[int] = []
        try:
            await self.cq.append(pending.encode(ready), [UNIT_SIZE] * ready,
                                        range(first, first + ready), stamps, positions)
        finally:
            n = len(positions)
            if pending.keyed_within(n):
                self.index.add(pending.messages(n))
            else:
                self.index.add_watermarks(range(first, first + n), stamps[:n])
            pending.drop(n)
        await self.index.append_pending()

    async def _flush_unlocked(self) -> None:
        await self._flush_commit_log()
        await self._dispatch()
        await self.cq.flush()
        await self.index.flush()

    async def _flush_commit_log(self) -> None:
        """Flush the commit log, dispatching as each of its commits lands: the
        consume queue's units are built while the rest of the commit log is
        still uploading, not all after it."""
        end = self.cl.end
        while (landed := self.cl.committed_end) < end:
            await self.cl.flush(until=landed + 1)
            if self.cl.committed_end == landed:
                break  # nothing moved (the bytes are not the pool's): the plain flush
            if self.cl.committed_end < end:  # the next commit is starting: it goes first
                self.ctx.pool.hand_off()
                await self._dispatch()
        await self.cl.flush()

    async def flush(self) -> None:
        """Every append before this call is durable (CL and CQ)."""
        async with self.lock:
            await self._flush_unlocked()

    async def roll_if_old(self, now: int) -> bool:
        """Roll the commit log and consume queue whose active segment's first
        message is ``rolling_interval`` old or more, though no append came to
        roll them (a queue gone quiet): its segments are then sealed, merged and
        can expire. Everything appended is flushed first, so the consume queue
        rolls with every unit of the commit log's records. Whether it rolled."""
        if not any(flat.old_enough_to_roll(now) for flat in self.flat_files):
            return False
        async with self.lock:
            await self._flush_unlocked()
            due = [flat for flat in self.flat_files if flat.old_enough_to_roll(now)]
            for flat in due:
                await flat.roll()
            return bool(due)

    @property
    def dispatching(self) -> bool:
        """Whether consume-queue units wait for their commit-log bytes (a tick
        dispatches those made durable)."""
        return bool(self._pending)

    async def tick(self) -> None:
        """Dispatch what the group commit made durable since the last append."""
        if self._pending and not self.lock.locked():
            async with self.lock:
                await self._dispatch()

    # --- offsets -------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The next offset to be appended."""
        return self.next_offset

    @property
    def commit_offset(self) -> int:
        """Offsets below this are durable in the object store."""
        return self.cq.end // UNIT_SIZE + self._pending.ready(self.cl.committed_end)

    def figures(self) -> QueueFigures:
        """This queue now, for metrics (plain values, read from any thread). Stored
        bytes: each flat file's durable bytes from its first live segment on; copy
        lag: bytes appended and not yet in the bucket (the flat files' buffered
        bytes and the consume-queue units waiting for their commit-log bytes), and
        the segments holding them."""
        flats = self.flat_files
        lag = [flat.end - flat.committed_end for flat in flats]
        waiting = self._pending.bytes_held()
        stored = sum(flat.committed_end - self.meta.first(flat.file_type).base_offset
                     for flat in flats)
        return QueueFigures(
            self.topic, self.queue_id, min_offset=self.min_offset,
            max_offset=self.max_offset, commit_offset=self.commit_offset,
            stored_bytes=stored, merges_pending=properties.merges_owed(self.meta.properties),
            copy_lag_bytes=sum(lag) + waiting,
            # the consume queue's units waiting go to its active segment
            copy_lag_segments=sum(1 for n in lag if n) + (1 if waiting and not lag[1] else 0))

    # --- reading -------------------------------------------------------------------------

    def unstored(self, start: int, end: int) -> list[CqUnit]:
        return self._pending.units(start, end)

    async def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        """The index's entries, and entries for messages not yet dispatched (taken
        first, with no await before the index takes its own: a message dispatched
        meanwhile is in one of the two)."""
        undispatched = [KeyEntry(q.hash, p.offset, p.unit.store_timestamp, p.unit.position,
                                   p.unit.size) for p in self._pending.keyed()
                        if q.key in p.keys and q.in_range(p.unit.store_timestamp)]
        return await self.index.candidates(q) + undispatched

    # --- retention -------------------------------------------------------------------------

    async def delete_expired(self, cutoff_ms: int) -> int:
        """Delete sealed segments whose newest message is older than ``cutoff_ms``:
        the consume queue first, then commit-log segments no live unit points into."""
        from tieredstore.segment import destroy_segment

        deleted = 0
        async with self.lock:
            for flat in (self.cq, self.cl, *self.flat_files[2:]):
                limit = None
                if flat is self.cl:
                    limit = (await self.units(self.min_offset, self.min_offset + 1))[0].position \
                        if self.min_offset < self.max_offset else self.cl.end
                expired = []
                async for record in self.meta.records(flat.file_type):
                    end = record.base_offset + record.size
                    if record.end_timestamp_ms >= cutoff_ms or (limit is not None and
                                                                 end > limit):
                        break
                    newest = await flat.newest_timestamp(record)  # read if unbounded
                    if newest is None or newest >= cutoff_ms:
                        break
                    expired.append(record)
                if not expired:
                    continue
                last = expired[-1]
                # Move the first pointer before deleting: a crash leaves garbage, not holes.
                await self.meta.trim(flat.file_type, last.base_offset + last.size)
                # A merge still owed for an expired segment is owed no more (one under
                # way fails on the missing chunks; what it leaves GC collects).
                await flat.forget_merges({r.base_offset for r in expired})
                for record in expired:
                    path = flat.path_of(record.base_offset)
                    self.ctx.expired(path)
                    self.ctx.fetcher.forget(path)
                    # Its fences stay: a writer this one replaced may still hold the
                    # segment open, and its next entry must find its id taken.
                    await destroy_segment(self.ctx.store, path, keep_fences=True)
                    deleted += 1
        return deleted
