"""ChunkedSegment: a FileSegment as immutable chunk objects, merged on seal.

Each ``commit0`` writes its bytes as chunk objects of at most ``chunk_size``
bytes (with ``SegmentOptions.join_tail``, a tail shorter than that joins the
chunk before it: an object of less than two chunks), each the next entry of
the segment's chunk series (docs/chunks.md): created with ``If-None-Match: *``
at the id after the last entry this handle knows, with its CRC32C and this
handle's random writer id in the object metadata. A retry that finds its own
entry there (same writer id, size and CRC) has succeeded (the first attempt
landed, its answer was lost); anything else there means a newer writer took
the segment over, and this handle is fenced: every later commit raises
``SegmentFenced`` (:mod:`tieredstore.segment.conditional` tells the two apart).

A writer that opens the segment with ``claim`` takes it over: it creates a
zero-byte ``fence`` entry at the id after the last entry, so the previous
writer's next create lands on a taken id.

``seal`` creates a zero-byte ``seal`` entry in the same series (so a seal and
a takeover cannot both win), writes a ``sealed`` marker recording the final
size, merges the chunks into one ``segment`` object (see
:mod:`tieredstore.segment.merge`), then deletes the chunks and, last, the
marker (see :mod:`tieredstore.segment.garbage`).

Over 400 lines because it is one state machine: claiming, committing, taking
borrowed units in (:class:`Lender`) and compacting them, sealing and merging
all move the same layout, next entry id and fence state under one lock, and
each step must see what a lost answer in another left in doubt. Entry
creation, recovery, merging and cleanup are modules of their own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from tieredstore.checksum import crc32c
from tieredstore.errors import (
    ChunkMissing,
    CommitFailed,
    CommitPositionError,
    CorruptSegment,
    ReadOutOfRange,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
    StoreClosed,
)
from tieredstore.objectstore.base import ObjectStore, UploadInfo
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import crc_metadata
from tieredstore.segment.base import FileSegment
from tieredstore.segment.conditional import create_entry
from tieredstore.segment.garbage import delete_leftovers, destroy_segment
from tieredstore.segment.layout import ChunkRef, SegmentLayout, continue_with
from tieredstore.segment.listing import SegmentState
from tieredstore.segment.merge import MergeStats, merge_chunks
from tieredstore.segment.options import SegmentOptions
from tieredstore.segment.path import EntryId, SegmentPath
from tieredstore.segment.reader import DirectReader, ReadMode, SegmentReader, read_as
from tieredstore.segment.recovery import (
    FENCE_ENTRY,
    SEAL_ENTRY,
    Recovered,
    encode_marker,
    is_seal,
    recover_segment,
)
from tieredstore.tasks import PriorityLock

# SegmentOptions and destroy_segment are imported from here too.
__all__ = ["ChunkedSegment", "SegmentOptions", "destroy_segment"]

log = logging.getLogger(__name__)

CLAIM_ATTEMPTS = 32


class Lender(Protocol):
    """What holds a segment's *borrowed* units: past the chunk end, bytes that landed
    in other objects (write mode log's pieces: the log writer). ``lent``: their bytes
    [start, end) as spans (start, end, bytes or None: read them); ``returned``: units
    a chunk took in."""

    def lent(self, segment: ChunkedSegment, start: int,
             end: int) -> list[tuple[int, int, bytes | None]]: ...

    def returned(self, segment: ChunkedSegment, units: Sequence[ChunkRef]) -> None: ...


class ChunkedSegment(FileSegment):
    """A segment stored as chunk objects until sealed, then as one object."""

    def __init__(
        self,
        store: ObjectStore,
        path: SegmentPath,
        *,
        options: SegmentOptions | None = None,
        reader: SegmentReader | None = None,
        layout: SegmentLayout | None = None,
        state: SegmentState = SegmentState.OPEN,
    ) -> None:
        self.store = store
        self.path = path
        self.options = options or SegmentOptions()
        self.reader: SegmentReader = reader or DirectReader(store)
        self._layout = layout or SegmentLayout()
        self._state = state
        self.writer_id = uuid.uuid4().hex
        self._next_entry = EntryId(self._layout.size)  # a listing's _adopt sets it
        # The series' last entry if it is zero bytes (a fence or a seal), and the
        # seal entry once known: a merge deletes the seal, never a fence.
        self._tail_zero: str | None = None
        self._seal_key: str | None = None
        self._stray_uploads: list[UploadInfo] = []
        self._seal_in_doubt = False
        self.foreign: list[str] = []  # objects in its prefix tieredstore did not write
        # Priority inheritance: a host commit waiting here lifts the requests of
        # the compaction, seal or merge that holds it (tasks.PriorityLock).
        self._lock = PriorityLock()
        self._fenced: SegmentFenced | None = None
        self._destroyed = False
        self._leftovers: list[str] = []  # chunks and marker after a merge, to delete
        self.last_merge: MergeStats | None = None
        # The layout's units from here on are borrowed (None: none are); the
        # chunk series' next entry is at this position.
        self._borrowed_from: int | None = None
        self.lender: Lender | None = None
        # A chunk over the borrowed units whose create failed without an answer:
        # it may stand, so the next chunk write sends these very bytes first.
        self._absorb_in_doubt: bytes | None = None

    # --- opening ------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: ObjectStore,
        path: SegmentPath,
        *,
        options: SegmentOptions | None = None,
        reader: SegmentReader | None = None,
        repair: bool = True,
        claim: bool = False,
        still_newest: Callable[[], Awaitable[None]] | None = None,
    ) -> ChunkedSegment:
        """Recover the segment from a listing of its prefix (empty if none).

        With ``repair`` (the writer's open) it finishes what a crash
        interrupted: aborts multipart uploads left behind, deletes chunks of a
        merged segment, resumes a started merge (if ``merge_on_seal``).
        Readers open with ``repair=False``, which changes nothing in the
        bucket: a merge under way in the writer's process must not be aborted
        by a reader that sees its upload. With ``claim`` (and ``repair``) an
        open segment is taken over from any writer that still has it open
        (see :meth:`claim`; ``still_newest`` raises once this writer is replaced).
        """
        segment = cls(store, path, options=options, reader=reader)
        segment._adopt(await recover_segment(store, path))
        if not repair:
            return segment
        if claim:
            await segment.claim(still_newest)
        for upload in segment._stray_uploads:
            await store.abort_multipart(upload.key, upload.upload_id)
        segment._stray_uploads = []
        if segment._state is SegmentState.SEALED:
            # A seal entry a crashed cleanup left.
            seal = await segment._seal_entry()
            if seal is not None:
                segment._leftovers.insert(0, seal)
            if segment._leftovers:
                await segment._delete_leftovers()
        if segment._state is SegmentState.SEALING and segment.options.merge_on_seal:
            async with segment._lock:
                await segment._merge()
        return segment

    def _adopt(self, recovered: Recovered) -> None:
        """Take the state a listing rebuilt."""
        self._layout, self._state = recovered.layout, recovered.state
        self._next_entry = recovered.series.next_entry
        self._borrowed_from = None
        self._tail_zero = recovered.series.tail_zero
        self._seal_key = None
        self._leftovers = recovered.leftovers
        self._stray_uploads = recovered.uploads
        self.foreign = recovered.foreign

    async def claim(self, still_newest: Callable[[], Awaitable[None]] | None = None) -> None:
        """Take the open segment over from whatever writer still has it open.

        Creates a ``fence`` entry at the id after the last entry listed. If
        that id was taken meanwhile (the previous writer's chunk or seal
        landed first), ``still_newest`` (if given) raises when a newer writer
        took it (a claim never fences a newer writer: docs/writers.md, "Claim"),
        else list again and fence after the new end; a seal there means the
        segment is sealed and nothing is fenced. Afterwards no earlier writer
        can add an entry: its next create lands on a taken id.
        """
        async with self._lock:
            for _ in range(CLAIM_ATTEMPTS):
                self._check_writable_handle()
                if self.sealed:
                    return
                entry = self._next_entry
                if await create_entry(self.store, self.path.entry_key(entry), b"",
                                      self.writer_id, FENCE_ENTRY):
                    self._tail_zero = self.path.entry_key(entry)
                    self._next_entry = entry.after(0)
                    return
                if still_newest is not None:
                    await still_newest()
                self._adopt(await recover_segment(self.store, self.path))
            raise CommitFailed(f"could not take the segment over in {CLAIM_ATTEMPTS} attempts: "
                               "another writer keeps adding entries", segment=str(self.path),
                               resume_position=self._layout.size)

    # --- state ------------------------------------------------------------------

    @property
    def commit_position(self) -> int:
        return self._layout.size

    @property
    def commit_size(self) -> int:
        """A commit of ``chunk_size`` bytes (with ``join_tail``, of less than two) is
        one chunk object, one PUT."""
        return self.options.chunk_size

    @property
    def derived(self) -> bool:
        # docstring inherited
        return self.options.derived

    @property
    def has_entries(self) -> bool:
        """Whether the series holds any entry: data, a fence or a seal."""
        return self._next_entry != EntryId(0)

    @property
    def sealed(self) -> bool:
        return self._state is not SegmentState.OPEN

    @property
    def merged(self) -> bool:
        return self._state is SegmentState.SEALED

    @property
    def fenced(self) -> bool:
        return self._fenced is not None

    @property
    def layout(self) -> SegmentLayout:
        return self._layout

    def _check_alive(self) -> None:
        if self._destroyed:
            raise StoreClosed(f"segment {self.path} was destroyed")

    def _check_writable_handle(self) -> None:
        self._check_alive()
        if self._fenced is not None:
            raise SegmentFenced(f"fenced earlier: {self._fenced}", segment=str(self.path))

    def _check_writable(self) -> None:
        self._check_writable_handle()
        if self.sealed:
            raise SegmentSealed("segment is sealed", segment=str(self.path))
        if self._seal_in_doubt:
            raise SegmentSealed("a seal failed without an answer; call seal() again",
                                segment=str(self.path))

    def _check_position(self, position: int, what: str) -> None:
        if position != self._layout.size:
            raise CommitPositionError(
                f"{what} at {position}, but the commit position is {self._layout.size}",
                segment=str(self.path), resume_position=self._layout.size)

    def _fence(self, why: str) -> SegmentFenced:
        self._fenced = SegmentFenced(why, segment=str(self.path))
        log.warning("%s", self._fenced)
        return self._fenced

    # --- writing ----------------------------------------------------------------

    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        # docstring inherited
        async with self._lock:
            self._check_writable()
            await self._settle()
            self._check_position(position, "commit")
            if not data:
                return
            max_size = self.options.max_size
            if max_size is not None and position + len(data) > max_size:
                raise SegmentFull(
                    f"{len(data)} bytes at {position} would pass the maximum size {max_size}",
                    segment=str(self.path),
                )
            await self._compact(memoryview(data))

    async def _write_chunks(self, position: int, view: memoryview) -> None:
        # One piece after another, never in parallel: a crash then leaves a
        # contiguous prefix of chunks, never a hole that recovery would have to
        # tell apart from lost data. Parallelism comes from many segments.
        # With join_tail a tail shorter than a chunk joins the chunk before it
        # (one object of less than two chunks): a partial chunk between two
        # others is one a merge cannot copy when under S3's part minimum.
        step = self.options.chunk_size
        starts = list(range(0, len(view), step))
        if self.options.join_tail and len(starts) > 1 and len(view) % step:
            starts.pop()
        for i, offset in enumerate(starts):
            piece = view[offset : starts[i + 1] if i + 1 < len(starts) else len(view)]
            body = piece.obj if isinstance(piece.obj, bytes) and len(piece) == len(piece.obj) \
                else bytes(piece)
            assert isinstance(body, bytes)
            unit = await self._put_chunk(position + offset, body)
            self._layout.append(unit)
            self.reader.committed(self.path, unit, body)

    async def _put_chunk(self, position: int, body: bytes) -> ChunkRef:
        """:meth:`_put_entry` of a data chunk, the bytes at ``position``; its unit. A
        failure other than being fenced is ``CommitFailed``, resuming at the
        commit position."""
        entry = self._next_entry
        try:
            crc = await self._put_entry(entry, body)
        except SegmentFenced:
            raise
        except Exception as exc:
            raise CommitFailed(f"commit did not fully land: {exc}", segment=str(self.path),
                               resume_position=self._layout.size) from exc
        self._next_entry = entry.after(len(body))
        return ChunkRef(position, len(body), self.path.entry_key(entry), 0, crc)

    async def _put_entry(self, entry: EntryId, body: bytes, kind: str | None = None) -> int:
        """Create entry ``entry`` of the series (its CRC32C returned), or learn
        that a newer writer took the segment over (fenced)."""
        key = self.path.entry_key(entry)
        if await create_entry(self.store, key, body, self.writer_id, kind):
            return crc32c(body)
        raise self._fence(f"entry {key!r} was created by another writer: a newer writer "
                          "took the segment over")

    # --- borrowed units (write mode log: docs/log-objects.md, "Log objects") ----------

    @property
    def borrowed_bytes(self) -> int:
        """Bytes held by borrowed units, past the chunk end."""
        return 0 if self._borrowed_from is None else self._layout.size - self._borrowed_from

    def borrow(self, unit: ChunkRef, data: bytes | None = None) -> None:
        """Bytes that landed outside the chunk series at ``unit.key[unit.object_offset:]``
        (CRC known) continue the segment; ``data``, when given, is cached."""
        self._check_writable()
        self._check_position(unit.position, "borrowed unit")
        if self._borrowed_from is None:
            self._borrowed_from = unit.position
        self._layout.append(unit)
        if data is not None:
            self.reader.committed(self.path, unit, data)

    def swap_borrowed(self, unit: ChunkRef, data: bytes | None = None) -> list[ChunkRef] | None:
        """Serve ``[unit.position, unit.end)`` from ``unit`` (another object
        holding the same bytes) instead of the borrowed units that hold it now,
        which are returned. None, and nothing changes, when those bytes are not
        all borrowed any more, or a chunk write is under way or in doubt (it is
        sent again as it was: its end must stay a unit boundary)."""
        start = self._borrowed_from
        if (start is None or unit.position < start or unit.end > self._layout.size
                or self._lock.locked() or self._absorb_in_doubt is not None
                or self._fenced is not None or self._destroyed):
            return None
        try:
            self._layout, old = self._layout.replace_from(unit.position, unit)
        except (ValueError, IndexError):
            return None
        if data is not None:
            self.reader.committed(self.path, unit, data)
        return old

    def adopt_borrowed(self, units: Sequence[ChunkRef]) -> list[ChunkRef]:
        """At open: the units outside the series found for this segment. Those past
        the chunk end continue the layout, borrowed; the rest (taken in already)
        are returned. An overlap among them is damage. Bytes missing before a
        unit (the last chunks, or its object, gone) become a hole, as
        ``skip_lost`` makes one: the units continue after it, and compaction
        moves the chunk series past it (:meth:`_compact`)."""
        chunk_end = self._layout.size
        holes = len(self._layout.holes)
        try:
            dead = continue_with(self._layout, units, sealed=self.sealed,
                                 hole_key=lambda at: self.path.entry_key(EntryId(at)))
        except ValueError as exc:
            raise CorruptSegment(str(exc), segment=str(self.path),
                                 span=(self._layout.size, max(u.end for u in units))) from None
        for hole in self._layout.holes[holes:]:
            log.error("%s: bytes [%d, %d) are missing from the bucket (borrowed units after "
                      "them); writing goes on after them", self.path, hole.position, hole.end)
        if self._layout.size > chunk_end and self._borrowed_from is None:
            self._borrowed_from = self._next_entry.position
        return dead

    async def compact(self) -> None:
        """Move the borrowed bytes into one chunk at the chunk end."""
        async with self._lock:
            self._check_writable_handle()
            await self._compact()

    async def _compact(self, data: memoryview | None = None) -> None:
        """Take the borrowed units into one chunk at the chunk end, and ``data`` (new
        bytes) with them: after them in that chunk, else in chunks of their own.
        Those before a hole go into a chunk first, and the chunk series moves past
        the hole (nothing is ever stored where the lost bytes were)."""
        await self._settle()
        while self._borrowed_from is not None and (
                hole := self._layout.first_hole_from(self._borrowed_from)) is not None:
            if hole.position > self._borrowed_from:
                await self._absorb(await self._read_borrowed(hole.position))
            self._next_entry = EntryId(hole.end)
            self._borrowed_from = hole.end if hole.end < self._layout.size else None
        if self._borrowed_from is not None:
            await self._absorb(await self._read_borrowed() + bytes(data or b""))
        elif data:
            await self._write_chunks(self._layout.size, data)

    async def _settle(self) -> None:
        """Send a chunk over the borrowed units whose answer was lost again, the
        same bytes at the same id (one that landed is then found as ours), before
        anything else: other bytes there would look like another writer's."""
        if self._absorb_in_doubt is not None:
            await self._absorb(self._absorb_in_doubt)

    async def _read_borrowed(self, end: int | None = None) -> bytes:
        """The borrowed units' bytes (up to ``end``), each unit checked against its CRC."""
        start, end = self._borrowed_from, self._layout.size if end is None else end
        assert start is not None
        spans = [(start, end, None)] if self.lender is None else \
            self.lender.lent(self, start, end)
        try:
            return b"".join([data if data is not None else
                             await self.reader.read(self.path, self._layout, s, e - s)
                             for s, e, data in spans])
        except CorruptSegment:
            raise
        except Exception as exc:
            raise CommitFailed(f"could not read the borrowed units [{start}, {end}): {exc}",
                               segment=str(self.path), resume_position=end) from exc

    async def _absorb(self, data: bytes) -> None:
        """Write ``data`` as one chunk at the chunk end (the borrowed units' bytes,
        then any new ones); the units it covers leave the layout."""
        start = self._borrowed_from
        assert start is not None and self._next_entry.position == start
        try:
            unit = await self._put_chunk(start, data)
        except CommitFailed:
            self._absorb_in_doubt = data
            raise
        self._absorb_in_doubt = None
        self._layout, dropped = self._layout.replace_from(start, unit)
        self._borrowed_from = None if self._layout.size == unit.end else unit.end
        self.reader.committed(self.path, unit, data)
        if dropped and self.lender is not None:
            self.lender.returned(self, dropped)

    # --- sealing ----------------------------------------------------------------

    async def skip_lost(self, position: int) -> None:
        """Move the commit position on to ``position`` over bytes the bucket lost
        (the last chunks of the series are gone, but what points into them is
        not): they become a hole, and the next chunk is created at
        ``position``, so nothing else is ever stored where they were."""
        async with self._lock:
            self._check_writable()
            start = self._layout.size
            if position <= start:
                return
            await self._compact()  # the chunk series continues after the hole
            self._layout.append(ChunkRef(start, position - start,
                                         self.path.entry_key(EntryId(position)), missing=True))
            self._next_entry = EntryId(position)
            log.error("%s: bytes [%d, %d) are missing from the bucket; writing goes on after "
                      "them", self.path, start, position)

    async def seal(self, *, merge: bool | None = None) -> None:
        """Take no more commits; then merge, unless ``merge`` (default: the
        ``merge_on_seal`` option) is False. Sealing is durable once this returns
        (the marker is written); a later ``seal()`` finishes an unmerged one."""
        do_merge = self.options.merge_on_seal if merge is None else merge
        async with self._lock:
            self._check_writable_handle()
            if self._state is SegmentState.OPEN:
                await self._compact()  # every byte is in chunks before the seal entry
                entry = self._next_entry
                # Until the seal entry is known to stand, no commit may take its id:
                # if its reply was lost, it stands, and a chunk there would be refused.
                self._seal_in_doubt = True
                await self._put_entry(entry, b"", SEAL_ENTRY)
                self._seal_in_doubt = False
                self._tail_zero = self._seal_key = self.path.entry_key(entry)
                self._next_entry = entry.after(0)
                self._state = SegmentState.SEALING
            if self._state is SegmentState.SEALING:
                await self._write_marker()  # again after a crash between entry and marker
            if self._state is SegmentState.SEALING and do_merge:
                await self._merge()
            elif self._leftovers:
                await self._delete_leftovers()

    async def _write_marker(self) -> None:
        size = self._layout.size
        marker = encode_marker(size)
        if not await create_once(self.store, self.path.sealed_key, marker,
                                 metadata=crc_metadata(marker)):
            raise self._fence(
                f"a sealed marker that does not say {size} bytes is there: another writer")

    async def _merge(self) -> None:
        # We own the segment: an upload a crashed or fenced merger left is garbage.
        for upload in await self.store.list_multipart_uploads(self.path.base_dir):
            await self.store.abort_multipart(upload.key, upload.upload_id)
        chunks = self._layout
        units, stats = await merge_chunks(
            self.store, self.path, chunks, self.reader,
            unit_target=self.options.units, concurrency=self.options.merge_concurrency,
            metadata=dict(self.options.merged_metadata),
        )
        self._layout = SegmentLayout(units)
        self._state = SegmentState.SEALED
        self.last_merge = stats
        # A tailing reader goes on reading the merged object from what was held
        # of the chunks: no GET for bytes this process just wrote or read.
        self.reader.replaced(self.path, chunks, self._layout)
        # Fences stay until the segment is destroyed: a fence deleted here would
        # free the id a replaced writer's next create targets. The seal entry
        # only ever stands where its own writer would write next: it goes.
        seal = await self._seal_entry()
        self._leftovers = [u.key for u in chunks.units] + ([seal] if seal else []) \
            + [self.path.sealed_key]
        await self._delete_leftovers()

    async def _seal_entry(self) -> str | None:
        """The seal entry's key, if the series ends in one: the last entry, if it
        is zero bytes, is a fence or a seal, which one HEAD tells apart. Cleanup
        deletes a seal entry, never a fence."""
        last = self._tail_zero
        return self._seal_key or (last if last and await is_seal(self.store, last) else None)

    async def _delete_leftovers(self) -> None:
        await delete_leftovers(self.store, self._leftovers)
        self._leftovers = []

    # --- reading and deleting ---------------------------------------------------

    async def read0(self, position: int, length: int) -> bytes:
        # docstring inherited; a copy (bytes() keeps bytes as they are), so that what
        # a caller keeps does not keep a whole unit alive
        return bytes(await self.read_as0(position, length, ReadMode.COPY))

    async def read_as0(self, position: int, length: int, mode: ReadMode) -> bytes | memoryview:
        # docstring inherited
        self._check_alive()
        size = self._layout.size
        if position < 0 or length < 0 or position + length > size:
            raise ReadOutOfRange(
                f"read [{position}, {position + length}) outside [0, {size})",
                segment=str(self.path),
            )
        if length == 0:
            return b""
        relisted = False
        while True:
            layout = self._layout
            try:
                return await read_as(self.reader, self.path, layout, position, length, mode=mode)
            except ChunkMissing:
                if self._layout is not layout:
                    continue  # our own merge replaced the chunks: read the new object
                if relisted or not self.sealed:
                    raise
                # A merge in another process (the writer's, for a reader) replaced
                # the chunks we listed: list again, once.
                relisted = True
                recovered = await recover_segment(self.store, self.path)
                if recovered.layout.size < position + length:
                    raise
                self._layout, self._state = recovered.layout, recovered.state

    async def destroy(self) -> None:
        # docstring inherited
        async with self._lock:
            await destroy_segment(self.store, self.path)
            self._destroyed = True
            self.reader.forget(self.path)
