"""KeyIndex: one queue's key index, a third flat file beside the commit log and
consume queue (docs/records.md, *Key index*).

Entries are added as the queue dispatches units (their commit-log bytes are
committed), kept in order, and appended through the upload buffer pool. The
index is opened only once the queue has seen a key (the ``index.from`` head
property): a queue without keys pays nothing for it. It may trail the
consume queue after a crash; :meth:`KeyIndex.open` says from which offset the
queue must hand its records back (:meth:`add`) to close the gap.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from operator import itemgetter

from tieredstore.metadata import QueueMetadata
from tieredstore.segment import ChunkedSegment, FileType
from tieredstore.segment.path import SLOTS_NAME
from tieredstore.store.base.context import StoreContext
from tieredstore.store.formats import properties
from tieredstore.store.formats.keyentries import (
    ENTRY_SIZE,
    WATERMARK,
    WATERMARK_GAP,
    KeyEntry,
    build_slots,
    decode_entries,
    encode_entry,
    key_hash,
)
from tieredstore.store.read.bykey import KeyQuery, find_entries
from tieredstore.store.write.flatfile import FlatFile, SegmentStats
from tieredstore.store.write.pending import Pending

Entry = tuple[bytes, int, int]  # an entry's bytes, its offset and its store timestamp
TAIL_STEP = 64  # entries read back at a time on open, for the last message's


class KeyIndex:
    """The key index of one queue."""

    def __init__(self, ctx: StoreContext, topic: str, queue_id: int, meta: QueueMetadata
                 ) -> None:
        self.ctx = ctx
        self.topic = topic
        self.queue_id = queue_id
        self.meta = meta
        self.flat: FlatFile | None = None  # open once the queue has an index
        self._pending: list[Entry] = []  # entries not yet appended to the flat file
        self._last = -1  # offset of the last entry (watermarks too), appended or pending
        # After an open: offset ``_last`` has entries of these key hashes stored; its
        # other keys' are added when it is handed back (see :meth:`open`).
        self._resume: tuple[int, frozenset[int]] | None = None

    # --- opening ---------------------------------------------------------------------

    async def open(self) -> int | None:
        """Open the index if the queue has one; the offset from which its entries
        may be missing (the caller hands those records back), or None."""
        start = properties.index_from(self.meta.properties)
        if start is None:
            return None
        flat = await self._open_flat()
        await flat.record_if_sealed(await self._stats(flat.active_base, flat.end))
        flat.stats = await self._stats(flat.active_base, flat.end)
        last, stored = await self._tail(flat)
        if last < start:
            self._last = start - 1
            return start
        self._last = last
        if not stored:
            return last + 1
        # The last message's entries may straddle a roll or a chunk, and a crash
        # lose the rest: it is handed back, and only the entries of its other keys
        # are added (after the stored ones; one entry serves every key of its hash).
        self._resume = (last, stored)
        return last

    async def _tail(self, flat: FlatFile) -> tuple[int, frozenset[int]]:
        """The offset of the index's last entry, and the key hashes of the entries
        of that offset that end the index (none for a watermark's): read back in steps of
        :data:`TAIL_STEP` entries, across segments, until an entry of another
        offset (or the records' last offset, with none live to read)."""
        end = flat.end
        if end == flat.active_base and self.meta.last_record(FileType.INDEX) is None:
            return self.meta.next_message_offset(FileType.INDEX) - 1, frozenset()
        last: int | None = None
        stored: set[int] = set()
        while end > flat.first:
            segment, _ = await flat.segment_at(end - ENTRY_SIZE)
            begin = max(segment.path.base_offset, end - TAIL_STEP * ENTRY_SIZE)
            for entry in reversed(list(decode_entries(await flat.read(begin, end - begin)))):
                if last is None:
                    last = entry.offset
                    if entry.key_hash == WATERMARK:
                        return last, frozenset()
                if entry.offset != last:
                    return last, frozenset(stored)
                stored.add(entry.key_hash)
            end = begin
        if last is None:
            return self.meta.next_message_offset(FileType.INDEX) - 1, frozenset()
        return last, frozenset(stored)

    async def _open_flat(self, *, first: bool = False) -> FlatFile:
        """Open the flat file: claimed (an open of the queue), or, for the ``first``
        entries ever, as a segment this writer adds (see :meth:`FlatFile.open_first`)."""
        flat = FlatFile(self.ctx, self.topic, self.queue_id, FileType.INDEX, self.meta)
        flat.after_merge = self._write_slots
        await (flat.open_first() if first else flat.open())
        self.flat = flat
        return flat

    async def _entry_at(self, position: int) -> KeyEntry:
        assert self.flat is not None
        return next(decode_entries(await self.flat.read(position, ENTRY_SIZE)))

    async def _stats(self, start: int, end: int) -> SegmentStats:
        """Stats of the entries in ``[start, end)`` of one segment, from the first
        and last (as the consume queue's are from its first and last unit): no
        ``min_ts``, since the entries between may be stamped out of order (the
        seal reads them: ``unseen``)."""
        if end <= start:
            return SegmentStats()
        first = await self._entry_at(start)
        last = await self._entry_at(end - ENTRY_SIZE)
        return SegmentStats(first.offset, last.offset, first.store_timestamp,
                            max(first.store_timestamp, last.store_timestamp),
                            (end - start) // ENTRY_SIZE, unseen=end - start)

    # --- writing ---------------------------------------------------------------------

    def add(self, messages: Sequence[Pending]) -> None:
        """Queue the entries of dispatched messages (in offset order); a watermark
        when the last entry trails by :data:`WATERMARK_GAP` messages."""
        if not any(map(itemgetter(2), messages)):
            self.add_watermarks(list(map(itemgetter(0), messages)),
                                [unit.store_timestamp for _, unit, _ in messages])
            return
        pending = self._pending
        for offset, unit, keys in messages:
            stored: frozenset[int] = frozenset()
            if offset <= self._last:
                if self._resume is None or offset != self._resume[0]:
                    continue  # handed back twice (an open that re-derives)
                stored = self._resume[1]  # the rest of a message cut by a crash
            self._resume = None
            ts = unit.store_timestamp
            if keys:
                for hashed in dict.fromkeys(map(key_hash, keys)):
                    if hashed not in stored:
                        pending.append((encode_entry(KeyEntry(
                            hashed, offset, ts, unit.position, unit.size)), offset, ts))
                self._last = offset
            elif (self.flat is not None or pending) and offset - self._last >= WATERMARK_GAP:
                pending.append((encode_entry(KeyEntry(WATERMARK, offset, ts)), offset, ts))
                self._last = offset

    def add_watermarks(self, offsets: Sequence[int], stamps: Sequence[int]) -> None:
        """:meth:`add` for messages without keys (``offsets`` ascending, stamped
        ``stamps``): only their watermarks, found by bisection."""
        if self.flat is None and not self._pending:
            return
        k = bisect.bisect_left(offsets, self._last + WATERMARK_GAP)
        while k < len(offsets):
            offset, ts = offsets[k], stamps[k]
            self._pending.append((encode_entry(KeyEntry(WATERMARK, offset, ts)), offset, ts))
            self._last = offset
            k = bisect.bisect_left(offsets, offset + WATERMARK_GAP, k + 1)

    async def start(self, first: int) -> None:
        """Say in the head that the index covers the queue from offset ``first``
        (``index.from``), unless it already does. Called before the consume
        queue takes the unit of the first message with keys: an open that
        finds that unit stored then also finds where to re-derive entries from
        (docs/records.md, "Key index"). A head write: it fails if a newer writer
        claimed the queue since."""
        if properties.index_from(self.meta.properties) is None:
            await self.meta.set_properties(properties.index_from_update(first))

    async def append_pending(self) -> None:
        """Append the queued entries; the first ever opens the index."""
        if not self._pending:
            return
        flat = self.flat
        if flat is None:
            await self.start(self._pending[0][1])
            flat = await self._open_flat(first=True)
        pending = self._pending
        positions: list[int] = []
        try:
            await flat.append(b"".join([e[0] for e in pending]), [ENTRY_SIZE] * len(pending),
                              [e[1] for e in pending], [e[2] for e in pending], positions)
        finally:
            del self._pending[: len(positions)]

    async def flush(self) -> None:
        await self.append_pending()
        if self.flat is not None:
            await self.flat.flush()

    async def _write_slots(self, segment: ChunkedSegment) -> None:
        """The slot object of a sealed, merged segment (same bytes every time)."""
        size = segment.commit_position
        data = await segment.read0(0, size) if size else b""
        await self.ctx.store.put(segment.path.base_dir + SLOTS_NAME,
                                 build_slots(decode_entries(data), size))

    # --- lookup ------------------------------------------------------------------------

    async def candidates(self, q: KeyQuery) -> list[KeyEntry]:
        """Entries of the key's hash stamped in the range, stored or pending (see
        :func:`find_entries`). The pending ones and the flat file's unrecorded
        segment are taken with no await between them (``FlatFile.unrecorded``
        does not wait): an entry appended meanwhile is in one of the two."""
        found = [e for d, _, _ in self._pending for e in decode_entries(d)
                 if e.key_hash == q.hash and q.in_range(e.store_timestamp)]
        if self.flat is not None:
            found += await find_entries(self.meta, self.flat, q)
        return found
