"""LogWriter: the group committer of write mode ``log``.

The upload buffer pool sends each segment's commits smaller than a chunk and
than its ``direct_commit_size`` (5 MiB) here
(:class:`~tieredstore.segment.pool.sink.LogSink`). Commits that arrive
together (a group commit makes every buffer due at once; they gather for
``linger`` seconds, and behind a log object in flight) are written as one log
object, the next entry of the broker's fenced log series
(:class:`~tieredstore.log.series.LogSeries`). When it lands each segment's
layout gains its piece, and the commits return.

Faults (docs/log-objects.md, "Log objects"):

- a create whose answer is lost is retried by the series with the same bytes
  at the same id; one that still fails leaves the object *in doubt*: the
  commits in it fail (their bytes stay buffered), and the next group commit
  first sends that very object again at that id. If it landed, its pieces
  join their segments, and the commits' retries find their bytes there.
- a newer store fenced the log: every commit, now and later, raises
  ``SegmentFenced``.

The writer knows every piece of the log by segment (found at open, or landed
since) and which segment object writes each segment: a segment opened again
(a queue whose open failed midway) takes every piece, also those that landed
for the object before it, once any object in doubt is settled, and the older
object is refused from then on (``SegmentFenced``), as a claim fences a
chunk series. So no two pieces ever hold one range.

Pieces move into chunks (``ChunkedSegment.compact``) when a segment holds a
full chunk of them, when it seals, or when their log object is
``compact_age`` old (:meth:`LogWriter.maintain`); a log object all of whose
pieces moved is deleted once ``delete_age`` old (:class:`LogTracker`).

Over 400 lines because writing, landing, consolidating and adopting pieces
all change one map (which pieces of which log object each segment holds, and
which segment object may take them); the series, tracker, hold and
consolidation policy it uses are modules of their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tieredstore.errors import (
    CommitFailed,
    CommitPositionError,
    SegmentFenced,
    TieredStoreError,
)
from tieredstore.log.compaction import groups, prefetch
from tieredstore.log.consolidate import Held, SegmentKey, consolidated_pieces
from tieredstore.log.errors import LogFenced
from tieredstore.log.format import Piece, check_indexable, encode_log_object
from tieredstore.log.hold import LogHold
from tieredstore.log.options import LogOptions
from tieredstore.log.pieces import LogPieces, segment_key
from tieredstore.log.series import LogEntry, LogSeries
from tieredstore.log.tracker import LogTracker
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkedSegment, FileSegment
from tieredstore.segment.layout import ChunkRef
from tieredstore.tasks import Background, Priority

log = logging.getLogger(__name__)

DELETE_BATCH = 1000


@dataclass(slots=True)
class _Put:
    segment: ChunkedSegment
    position: int
    data: bytes
    done: asyncio.Future[None]


@dataclass(slots=True)
class _Object:
    """A log object's bytes and what it holds, kept while its outcome is unknown:
    a group commit's puts, or a consolidation's pieces and their bytes."""

    data: bytes
    pieces: list[Piece]
    puts: list[_Put] = field(default_factory=list)
    consolidated: list[bytes] | None = None


class LogWriter(LogPieces):
    """One store's group committer, compactor and deleter of its broker's log; the
    map of every live piece known (found at open, or landed since), by segment."""

    def __init__(self, store: ObjectStore, series: LogSeries, options: LogOptions) -> None:
        super().__init__()
        self.store = store
        self.series = series
        self.options = options
        self.tracker = LogTracker(series.path)
        self._batch: list[_Put] = []
        self._writer: asyncio.Task[None] | None = None
        self._in_doubt: _Object | None = None
        # One create of the series at a time: a group commit, a consolidation and a
        # queue's open settling the object in doubt must not race for one id (the
        # loser would take the winner's entry for another store's).
        self._series_lock = asyncio.Lock()
        self._fenced: LogFenced | None = None
        self._compacting: set[int] = set()  # id() of segments being compacted by size
        self.background = Background()  # group commits and compactions
        # The object writing each segment.
        self._owners: dict[SegmentKey, ChunkedSegment] = {}
        # When each segment's oldest piece still in the log landed (its rate).
        self._since: dict[SegmentKey, float] = {}
        # Pieces landed since the last consolidation, with their bytes.
        self._held: list[Held] = []
        self._held_bytes = 0
        self._held_since = 0.0
        # Pieces a consolidation left out (their segment was about to fill a
        # chunk): looked at again by the next one.
        self._carried: list[Held] = []
        # Their bytes, by segment, until they are in chunks or consolidated.
        self._memory = LogHold(options.hold_bytes)
        self.objects_written = 0
        self.consolidations = 0

    # --- the sink ---------------------------------------------------------------------

    def accepts(self, segment: FileSegment) -> bool:
        return isinstance(segment, ChunkedSegment)

    async def put(self, segment: FileSegment, position: int, data: bytes) -> None:
        assert isinstance(segment, ChunkedSegment)
        label = str(segment.path)
        if self._fenced is not None:
            raise SegmentFenced(str(self._fenced), segment=label)
        # A piece the index cannot hold fails here, its own put alone: never the
        # group commit that carries other queues' pieces.
        check_indexable(segment.path.topic, segment.path.queue_id)
        owner = self._owners.setdefault(segment_key(segment.path), segment)
        if owner is not segment:
            raise SegmentFenced("the segment was opened again: this handle writes no more",
                                segment=label)
        landed = segment.commit_position
        if landed >= position + len(data):
            return  # in a log object whose outcome was in doubt, and it landed
        if landed != position:
            raise CommitPositionError(f"log commit at {position}, but the commit position is "
                                      f"{landed}", segment=label, resume_position=landed)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._batch.append(_Put(segment, position, bytes(data), done))
        if self._writer is None:
            self._writer = self.background.spawn(self._write_batches(), "log group commit",
                                                 priority=Priority.HOST)
        await done

    async def _write_batches(self) -> None:
        try:
            await asyncio.sleep(self.options.linger)
            while self._batch or self._consolidation_due():
                if self._consolidation_due():
                    await self._consolidate()
                    continue
                take, size = 0, 0
                while take < len(self._batch) and (take == 0 or
                                                   size < self.options.object_size):
                    size += len(self._batch[take].data)
                    take += 1
                puts, self._batch = self._batch[:take], self._batch[take:]
                await self._write(puts)
        finally:
            self._writer = None

    async def _write(self, puts: list[_Put]) -> None:
        try:
            async with self._series_lock:
                await self._settle()
                puts = [p for p in puts if not _already_landed(p)]
                if not puts:
                    return
                pieces = [(Piece(*segment_key(p.segment.path), p.position, len(p.data)), p.data)
                          for p in puts]
                obj = _Object(*encode_log_object(pieces), puts)
                entry = await self._append(obj)
        except LogFenced as exc:
            for p in puts:
                _fail(p, SegmentFenced(str(exc), segment=str(p.segment.path)))
            return
        except Exception as exc:
            for p in puts:
                failed = CommitFailed(f"the log object did not land: {exc!r}",
                                      segment=str(p.segment.path), resume_position=p.position)
                failed.__cause__ = exc
                _fail(p, failed)
            return
        self._landed(obj, entry)

    async def _append(self, obj: _Object) -> LogEntry:
        """Create ``obj`` as the next entry of the series (after :meth:`_settle`).
        Fenced: for good. Any other failure: ``obj`` is in doubt (it may have
        landed), sent again before anything else."""
        try:
            return await self.series.append(obj.data)
        except LogFenced as exc:
            self._fenced = exc
            raise
        except Exception:
            self._in_doubt = obj
            raise

    async def _settle(self) -> None:
        """Send the object in doubt again, same bytes at the same id; once it
        stands, its pieces join their segments."""
        obj = self._in_doubt
        if obj is None:
            return
        entry = await self._append(obj)
        self._in_doubt = None
        log.info("log object %s, in doubt, has landed", entry.key)
        self._landed(obj, entry)

    def _landed(self, obj: _Object, entry: LogEntry) -> None:
        self.objects_written += 1
        if obj.consolidated is not None:
            self._swap_in(obj, entry)
            return
        self.tracker.landed(entry.seq, len(obj.pieces), time.time())
        for put, piece in zip(obj.puts, obj.pieces, strict=True):
            segment = put.segment
            unit = piece.unit(entry.key)
            self._segment_pieces(piece.segment)[unit.position] = unit
            self._since.setdefault(piece.segment, time.monotonic())
            try:
                segment.borrow(unit, put.data)
            except TieredStoreError as exc:
                # Its segment moved on without it (fenced, detached): never read.
                log.warning("%s: log piece [%d, %d) in %s is not used: %s", segment.path,
                            unit.position, unit.end, entry.key, exc)
                _fail(put, exc)
                continue
            self._watch(segment, [unit])
            self._hold(piece.segment, unit, put.data)
            self._memory.keep(piece.segment, unit.position, put.data)
            if not put.done.done():
                put.done.set_result(None)
            if segment.borrowed_bytes >= segment.options.chunk_size:
                self._compact_soon(segment)

    # --- consolidation --------------------------------------------------------------------

    def _hold(self, key: SegmentKey, unit: ChunkRef, data: bytes) -> None:
        if not self._held:
            self._held_since = time.monotonic()
        self._held.append((key, unit, data))
        self._held_bytes += len(data)

    def _consolidation_due(self) -> bool:
        return bool(self._held) and (
            self._held_bytes >= self.options.consolidate_bytes
            or time.monotonic() - self._held_since >= self.options.consolidate_interval)

    def _live(self, key: SegmentKey, unit: ChunkRef) -> bool:
        return self._pieces.get(key, {}).get(unit.position) == unit

    def _fills_a_chunk_soon(self, key: SegmentKey) -> bool:
        """Whether, at the rate its pieces came so far, the segment's log bytes
        make a full chunk within ``consolidate_interval``: then they move into a
        chunk by size, from the bytes kept in memory, and rewriting them first
        would upload them a third time."""
        owner, since = self._owners.get(key), self._since.get(key)
        if owner is None or since is None:
            return False
        rate = owner.borrowed_bytes / max(time.monotonic() - since, 1e-3)
        missing = owner.options.chunk_size - owner.borrowed_bytes
        return missing <= rate * self.options.consolidate_interval

    async def _consolidate(self) -> None:
        """Write the held pieces still live as one log object (see
        :mod:`tieredstore.log.consolidate`); those of segments about to fill a
        chunk wait for the next consolidation. Its outcome unknown: in doubt, as
        a group commit's; the pieces written are let go either way."""
        held, self._held, self._held_bytes = self._carried + self._held, [], 0
        live = [h for h in held if self._live(h[0], h[1])]
        soon = {key for key, _, _ in live if self._fills_a_chunk_soon(key)}
        self._carried = [h for h in live if h[0] in soon]
        pieces = consolidated_pieces([h for h in live if h[0] not in soon])
        if not pieces:
            return
        try:
            async with self._series_lock:
                await self._settle()
                obj = _Object(*encode_log_object(pieces), consolidated=[d for _, d in pieces])
                entry = await self._append(obj)
        except LogFenced:
            return
        except Exception as exc:  # the small objects keep serving those bytes
            log.warning("consolidating %d log pieces failed: %r", len(pieces), exc)
            return
        self.consolidations += 1
        self._landed(obj, entry)

    def _swap_in(self, obj: _Object, entry: LogEntry) -> None:
        """A consolidated object landed: each segment serves its bytes from it."""
        assert obj.consolidated is not None
        swapped: list[tuple[ChunkedSegment, ChunkRef]] = []
        for piece, data in zip(obj.pieces, obj.consolidated, strict=True):
            segment = self._owners.get(piece.segment)
            unit = piece.unit(entry.key)
            old = segment.swap_borrowed(unit, data) if segment is not None else None
            if segment is None or old is None:
                continue  # moved into chunks meanwhile, or a chunk write under way
            # Also lets go of the small pieces' bytes kept in memory: a quiet segment
            # is compacted in an hour, reading the consolidated object.
            self.returned(segment, old)
            self._segment_pieces(piece.segment)[unit.position] = unit
            swapped.append((segment, unit))
        self.tracker.landed(entry.seq, len(swapped), time.time())
        for segment, unit in swapped:
            self._watch(segment, [unit])

    # --- segments opened ---------------------------------------------------------------------

    async def adopt(self, segment: ChunkedSegment) -> None:
        """``segment`` was just opened for writing: it takes the pieces the log holds
        for it and writes the segment from now on. An object in doubt is settled
        first (``CommitFailed`` if it cannot be now): its pieces may be this
        segment's."""
        if self._in_doubt is not None:
            try:
                async with self._series_lock:
                    await self._settle()
            except LogFenced as exc:
                raise SegmentFenced(str(exc), segment=str(segment.path)) from None
            except Exception as exc:
                raise CommitFailed(f"a log object in doubt could not be settled: {exc!r}",
                                   segment=str(segment.path),
                                   resume_position=segment.commit_position) from exc
        key = segment_key(segment.path)
        self._owners[key] = segment
        for older in [k for k in self._segments(*key[:2]) if k[2] == key[2] and k[3] < key[3]]:
            # Segments before the open one are sealed, and a seal takes every piece
            # into chunks first: their pieces are spent.
            spent = list(self._drop(older).values())
            self.tracker.dropped(segment, spent)
            self._since.pop(older, None)
            self._memory.forget(older)
        units = list(self._pieces.get(key, {}).values())
        if not units:
            return
        dead = segment.adopt_borrowed(units)
        self.returned(segment, dead)
        live = [u for u in units if u not in dead]
        if live:
            self._watch(segment, live)

    def _watch(self, segment: ChunkedSegment, units: Sequence[ChunkRef]) -> None:
        segment.lender = self
        for unit in units:
            self.tracker.holding(segment, unit)

    def returned(self, segment: ChunkedSegment, units: Sequence[ChunkRef]) -> None:
        """``units`` of ``segment`` are in chunks now, or consolidated (its ``Lender``)."""
        self.tracker.dropped(segment, units)
        key = segment_key(segment.path)
        for unit in units:
            self._memory.forget(key, unit.position, unit.end)
        held = self._pieces.get(key)
        if held is None:
            return
        for unit in units:
            if held.get(unit.position) == unit:
                del held[unit.position]
        if not held:
            self._drop(key)
            self._since.pop(key, None)

    def lent(self, segment: ChunkedSegment, start: int,
             end: int) -> list[tuple[int, int, bytes | None]]:
        return self._memory.read(segment_key(segment.path), start, end)

    # --- compaction and deletion ----------------------------------------------------------

    def _compact_soon(self, segment: ChunkedSegment) -> None:
        if id(segment) in self._compacting:
            return
        self._compacting.add(id(segment))

        async def run() -> None:
            try:
                await segment.compact()
            finally:
                self._compacting.discard(id(segment))

        self.background.spawn(run(), f"compact {segment.path}", priority=Priority.COMPACTION)

    async def maintain(self, now: float | None = None) -> None:
        """Compact the segments holding pieces ``compact_age`` old, then delete the
        log objects left without a live piece that are ``delete_age`` old."""
        now = time.time() if now is None else now
        if self._writer is None and self._consolidation_due():
            self._writer = self.background.spawn(self._write_batches(), "log group commit",
                                                 priority=Priority.HOST)
        due = [s for s in self.tracker.due(now, self.options.compact_age)
               if not (s.sealed or s.fenced)]
        recent = {unit.key for _, unit, _ in self._held}
        for group in groups(due, self.options.compact_bytes):
            await prefetch(self.store, self.series.path, group, recent)
            for segment in group:
                try:
                    await segment.compact()
                except TieredStoreError as exc:  # the next pass tries again
                    log.warning("%s: compacting its log pieces failed: %s", segment.path, exc)
        seqs = self.tracker.deletable(now, self.options.delete_age)
        if seqs and await self.series.replaced():
            # A newer store took the log over and may read any of these: its
            # pieces are its own business now.
            self._fenced = LogFenced(f"the log at {self.series.path.directory} was taken "
                                     "over by a newer store")
            return
        for i in range(0, len(seqs), DELETE_BATCH):
            batch = seqs[i : i + DELETE_BATCH]
            await self.store.delete_many([self.series.path.key(s) for s in batch])
            self.tracker.deleted(batch)

    def snapshot(self) -> dict[str, int]:
        """Log objects written (consolidated ones among them), and those holding
        live pieces now."""
        return {"objects_written": self.objects_written,
                "consolidations": self.consolidations,
                "live_objects": self.tracker.live_objects,
                "bytes_held": self._held_bytes,
                "bytes_kept": self._memory.bytes}


def _already_landed(put: _Put) -> bool:
    """Whether ``put``'s bytes are in its segment (a retry of an object in doubt)."""
    if put.segment.commit_position < put.position + len(put.data):
        return False
    if not put.done.done():
        put.done.set_result(None)
    return True


def _fail(put: _Put, error: BaseException) -> None:
    if not put.done.done():
        put.done.set_exception(error)
