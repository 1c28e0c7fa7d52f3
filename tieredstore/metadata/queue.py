"""One queue's metadata in the object store: a mutable head, immutable pages.

Seed 001's split, on S3 instead of ZooKeeper. Per file type (commit log,
consume queue, index) the sealed-segment records of a queue are kept as

- pages: runs of ``page_size`` consecutive records, each page an object
  written once (``If-None-Match: *``) and never changed;
- a tail in the head: the records not yet paged, at most ``page_size``.

The head (one per queue, shared by the file types) also holds each file
type's ``first`` pointer, the message store's properties and the writer's id.
Each change writes the next head version (see :mod:`heads` for the CAS).

- Rolling a segment (``append``) writes one head of bounded size, and every
  ``page_size``-th time a page: O(1) bytes, whatever the queue's history.
- Trimming moves ``first`` in the head, then deletes the pages wholly behind
  it. Deleting a page wholly behind ``first`` is safe even for a writer that
  is fenced without knowing it: ``first`` only moves forward.
- Opening reads the head (a LIST and a GET); pages are listed the first time
  a lookup needs them and read one at a time into a small LRU.

Which pages a head references: each page key carries a hash of the page's
bytes and the hash of the page before it, and the head the hash of the
newest page; the referenced pages are that chain (see :mod:`pages`). A page
whose head never landed (a crash, a lost race) is off the chain and ignored,
whatever records it holds, so it can neither shadow nor collide with a real
one. A page is cut from the tail at the same records by every writer
(``page_size`` is fixed per queue), so two writers at one head write the same
bytes under the same key, and a create that finds identical bytes in place
has succeeded. A crash between cutting a full tail and writing its head
leaves exactly that page at the key the next open computes: it is adopted
(a head that references it is written).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tieredstore.errors import ConfigError, PreconditionFailed
from tieredstore.metadata import metadata_pb2 as pb
from tieredstore.metadata.codec import FORMAT_VERSION, build_page, encode_head
from tieredstore.metadata.errors import (
    CorruptMetadata,
    MetadataError,
    MetadataFenced,
    MetadataNotFound,
    MetadataReadOnly,
    MetadataTooLarge,
    PageMissing,
)
from tieredstore.metadata.heads import HeadLog
from tieredstore.metadata.keys import PageRef, QueuePath, check_file_type
from tieredstore.metadata.reader import DEFAULT_CACHE_PAGES, QueueReader
from tieredstore.metadata.state import (
    First,
    apply_append,
    find_state,
    first_after_all,
    first_of,
    has_live,
    page_out_tail,
)
from tieredstore.objectstore.base import ObjectStore

log = logging.getLogger(__name__)

# Records per page of a new queue: the one default (the configuration's
# metadata_page_size takes it). Small enough that a full tail keeps a head, written
# at every roll, a few KiB; an existing queue keeps the page size it was made with.
DEFAULT_PAGE_SIZE = 64
MAX_PAGE_SIZE = 100_000
CLAIM_ATTEMPTS = 16
MAX_PROPERTIES_BYTES = 64 * 1024
_PAGE_WRITE_CONCURRENCY = 16


PropertyUpdate = Callable[[Mapping[str, str]], Mapping[str, str | None]]


def _updates(head: pb.QueueHead, given: Mapping[str, str | None] | PropertyUpdate
             ) -> Mapping[str, str | None]:
    """The property changes ``given`` stands for, against ``head``'s properties."""
    return given(dict(head.properties)) if callable(given) else given


@dataclass(frozen=True, slots=True)
class _NewPage:
    """A page that the next head will reference. ``data`` None: already written."""

    file_type: pb.FileType
    ref: PageRef
    records: list[pb.SegmentRecord]
    data: bytes | None


class QueueMetadata(QueueReader):
    """The metadata of one queue. Open with :meth:`open` or :meth:`open_read_only`.

    Methods are safe to call concurrently from one event loop: writes are
    serialized, reads see the last committed head.
    """

    def __init__(
        self,
        store: ObjectStore,
        queue: QueuePath,
        head: pb.QueueHead,
        version: int,
        *,
        writer_id: str,
        read_only: bool,
        cache_pages: int,
    ) -> None:
        super().__init__(store, queue, head, version, cache_pages=cache_pages)
        self._writer_id = writer_id
        self._session_id = uuid.uuid4().hex
        self._read_only = read_only
        self._write_lock = asyncio.Lock()
        self.created = False

    # --- opening ----------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: ObjectStore,
        queue: QueuePath,
        *,
        writer_id: str,
        page_size: int = DEFAULT_PAGE_SIZE,
        cache_pages: int = DEFAULT_CACHE_PAGES,
        claim: bool = False,
        start_over_damaged: bool = False,
    ) -> QueueMetadata:
        """Open a queue for writing, creating it (lazily, on the first write) if new.

        ``page_size`` applies to a new queue only; an existing one keeps its
        own. A page left by a crash between cutting a full tail and writing
        its head is adopted here (damaged bytes at its key are deleted). With
        ``claim`` a head is written at once, which fences every earlier
        writer; otherwise the first write does that. With
        ``start_over_damaged``, a queue whose heads are all damaged opens as
        a new one whose first head follows the damaged ones (the caller
        rebuilds its records). :attr:`created` tells whether no valid head
        was found.
        """
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ConfigError("metadata_page_size",
                              f"must be in [1, {MAX_PAGE_SIZE}], got {page_size}")
        for _ in range(CLAIM_ATTEMPTS):
            heads = HeadLog(store, queue)
            version = 0
            try:
                loaded = await heads.load()
            except CorruptMetadata:
                if not start_over_damaged:
                    raise
                loaded, version = None, (await heads.versions())[-1]
                log.warning("%s: no valid head up to version %d: starting over",
                            queue.name, version)
            if loaded is None:
                head = pb.QueueHead(format_version=FORMAT_VERSION, page_size=page_size)
            else:
                version, head = loaded
            self = cls(store, queue, head, version, writer_id=writer_id, read_only=False,
                       cache_pages=cache_pages)
            self.created = loaded is None
            try:
                await self._recover_unreferenced_page()
                if claim:
                    await self.claim()
            except MetadataFenced:
                # The writer we replace wrote a head since we loaded ours: the
                # newest opener does not give up to it. Load again and retry.
                continue
            return self
        raise MetadataFenced(f"could not claim the queue in {CLAIM_ATTEMPTS} attempts: "
                             "its head keeps changing", queue=queue.name)

    @classmethod
    async def open_read_only(
        cls, store: ObjectStore, queue: QueuePath, *, cache_pages: int = DEFAULT_CACHE_PAGES
    ) -> QueueMetadata:
        """A snapshot at the newest head that never writes; :meth:`refresh` moves it on."""
        loaded = await HeadLog(store, queue).load()
        if loaded is None:
            raise MetadataNotFound("no head", queue=queue.name)
        version, head = loaded
        return cls(store, queue, head, version, writer_id="", read_only=True,
                   cache_pages=cache_pages)

    async def refresh(self) -> None:
        """Read-only: move to the newest head."""
        if not self._read_only:
            raise MetadataError("refresh() is for read-only opens; a writer's head is the "
                                "newest until it is fenced", queue=self._queue.name)
        loaded = await self._heads.load()
        if loaded is None:
            raise MetadataNotFound("no head", queue=self._queue.name)
        version, head = loaded
        if version != self._version:
            self._head, self._version = head, version
            self._forget_pagesets()  # its new pages are not in the listings

    # --- state ----------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def fenced(self) -> bool:
        return self._heads.fenced is not None

    # --- writing ------------------------------------------------------------------

    async def append(
        self, record: pb.SegmentRecord, *,
        properties: Mapping[str, str | None] | PropertyUpdate | None = None,
    ) -> None:
        """Add the record of a newly sealed segment after the last one of its type.

        One head write, and every ``page_size``-th time one page before it. A
        record equal to the last one is a retried append and writes nothing.
        ``properties`` are set (None removes) in the same head write, so the
        record and what the host notes about it land together or not at all.
        """
        await self.append_many([record], properties=properties)

    async def append_many(
        self,
        records: Iterable[pb.SegmentRecord],
        *,
        properties: Mapping[str, str | None] | PropertyUpdate | None = None,
    ) -> int:
        """Append records in order with one head write (and the pages they fill).

        For bulk loads. Pages are cut where single appends would cut them.
        Nothing is written unless every record is in order. Returns how many
        records were new. After a failure the outcome is unknown (this
        instance's next write finds out first): resume after the
        :meth:`next_base_offset` of a reopened instance. A retried batch whose
        head landed is refused as out of order, bar a first record equal to
        the last one.
        """
        batch = list(records)
        async with self._write_lock:
            await self._begin_write()
            head = self._next_head()
            if properties:
                self._apply_properties(head, _updates(head, properties))
            pages: list[_NewPage] = []
            applied = 0
            for record in batch:
                outcome = apply_append(head, record)
                applied += outcome.applied
                if outcome.page is not None:
                    file_type = check_file_type(record.file_type)
                    state = find_state(head, file_type)
                    assert state is not None
                    ref, data = build_page(
                        self._queue, file_type, outcome.page, state.last_page_hash
                    )
                    state.last_page_hash = ref.page_hash
                    pages.append(_NewPage(file_type, ref, outcome.page, data))
            if applied:
                await self._commit(head, pages)
            return applied

    async def set_properties(
        self, values: Mapping[str, str | None] | PropertyUpdate | None = None, /,
        **kv: str | None
    ) -> None:
        """Set (or, given None, remove) properties, with one head write.

        ``values`` may be a function of the current properties that returns the
        changes: it runs under the write lock, so read-modify-write updates of
        one property from concurrent tasks never lose each other's changes.
        """
        async with self._write_lock:
            await self._begin_write()
            head = self._next_head()
            updates = {**_updates(head, values or {}), **kv}
            self._apply_properties(head, updates)
            if dict(head.properties) == dict(self._head.properties):
                return
            await self._commit(head)

    def _apply_properties(self, head: pb.QueueHead, updates: Mapping[str, str | None]) -> None:
        """Set (None removes) properties on a head being built; check types and size."""
        for key, value in updates.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, str)):
                raise TypeError(f"property {key!r}: keys and values are str (None removes)")
            if value is None:
                if key in head.properties:
                    del head.properties[key]
            else:
                head.properties[key] = value
        size = sum(len(k.encode()) + len(v.encode()) for k, v in head.properties.items())
        if size > MAX_PROPERTIES_BYTES:
            raise MetadataTooLarge(
                f"properties would take {size} bytes, more than {MAX_PROPERTIES_BYTES}",
                queue=self._queue.name,
            )

    async def claim(self) -> None:
        """Write a head now (same content, this writer's id), fencing earlier writers."""
        async with self._write_lock:
            await self._begin_write()
            await self._commit(self._next_head())

    async def trim(self, file_type: pb.FileType, before_base_offset: int) -> First:
        """Drop the records that end at or before ``before_base_offset``.

        Moves ``first`` to the first record that ends after it (whole segments
        only: a record that straddles it stays), writes the head, then deletes
        the pages now wholly behind ``first``, and any an interrupted trim left.
        Returns the new first pointer.
        """
        file_type = check_file_type(file_type)
        async with self._write_lock:
            await self._begin_write()
            state = find_state(self._head, file_type)
            if (
                state is None
                or not has_live(state)
                or before_base_offset <= state.first_base_offset
            ):
                return first_of(state)
            found = await self._first_ending_after(file_type, self._head, before_base_offset)
            first = found if found is not None else first_after_all(state)
            if first != first_of(state):
                head = self._next_head()
                new_state = find_state(head, file_type)
                assert new_state is not None
                new_state.first_base_offset = first.base_offset
                new_state.first_message_offset = first.message_offset
                await self._commit(head)
            await self._delete_dead_pages(file_type)
            return first

    async def vacuum(self, *, unreferenced: bool = False) -> int:
        """Delete every page wholly behind ``first`` (an interrupted trim's).

        With ``unreferenced``, also the pages no head references (left by a
        write whose head never landed; readers ignore them). That is only safe
        while no other writer of this queue runs: this claims the queue first,
        but a writer that opened after the claim could have a page in flight.
        Lists each file type's pages. Returns how many were deleted.
        """
        async with self._write_lock:
            await self._begin_write()
            if unreferenced:
                await self._commit(self._next_head())
            deleted = 0
            for state in list(self._head.files):
                file_type = check_file_type(state.file_type)
                deleted += await self._delete_dead_pages(file_type)
                if unreferenced:
                    pageset = await self._pageset(file_type)
                    keep = {r.key for r in (await self._view(state)).refs}
                    stray = [r.key for r in pageset.refs if r.key not in keep]
                    if stray:
                        await self._store.delete_many(stray)
                        pageset.discard(stray)
                        deleted += len(stray)
            return deleted

    async def _begin_write(self) -> None:
        self._check_writable()
        if self._heads.unsettled:
            await self._settle()

    async def _settle(self) -> None:
        """A head create failed without an answer (an error, a cancellation): it
        may have landed. Our session id in the newest head says it did."""
        adopted = await self._heads.settle(self._version, self._session_id,
                                           lambda head: head.session_id)
        if adopted is not None:
            self._version, self._head = adopted
            self._forget_pagesets()  # its pages: list again when needed

    def _check_writable(self) -> None:
        if self._read_only:
            raise MetadataReadOnly("opened read-only", queue=self._queue.name)
        self._heads.check_not_fenced()

    def _next_head(self) -> pb.QueueHead:
        head = pb.QueueHead()
        head.CopyFrom(self._head)
        return head

    async def _commit(self, head: pb.QueueHead, pages: Sequence[_NewPage] = ()) -> None:
        """Write ``pages``, then ``head`` as the next version; then stand on it."""
        await self._write_pages([p for p in pages if p.data is not None])
        version = self._version + 1
        head.format_version = FORMAT_VERSION
        head.version = version
        head.writer_id = self._writer_id
        head.session_id = self._session_id
        head.written_at_ms = time.time_ns() // 1_000_000

        def landed() -> None:
            self._head, self._version = head, version
            self._pages_committed([(p.file_type, p.ref, p.records) for p in pages])

        await self._heads.publish(version, encode_head(head), landed)

    async def _write_pages(self, pages: Sequence[_NewPage]) -> None:
        limit = asyncio.Semaphore(_PAGE_WRITE_CONCURRENCY)

        async def one(page: _NewPage) -> None:
            async with limit:
                await self._write_page(page)

        tasks = [asyncio.ensure_future(one(page)) for page in pages]
        try:
            await asyncio.gather(*tasks)  # raises the first failure as it is
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _write_page(self, page: _NewPage) -> None:
        """Create the page. Its key names a digest of its bytes, so a page found
        at the key must hold exactly these bytes: if it does, it was written
        before (a retried request, or a writer at the same head); if it is
        damaged, writing the right bytes in its place repairs it."""
        assert page.data is not None
        for attempt in range(2):
            try:
                await self._store.put(page.ref.key, page.data, if_none_match=True)
                return
            except PreconditionFailed:
                pass
            try:
                if await self._read_page(page.file_type, page.ref) == page.records:
                    return
            except CorruptMetadata:  # damaged, or gone meanwhile
                pass
            if attempt == 0:
                log.warning("%s: replacing damaged page %s", self._queue.name, page.ref.key)
                await self._store.delete(page.ref.key)
                self._cache.discard([page.ref.key])
        raise CorruptMetadata(f"page {page.ref.key} could not be written", queue=self._queue.name)

    async def _recover_unreferenced_page(self) -> None:
        """Adopt the page a crash may have left between cutting a full tail and
        writing its head. It can only be at the key that tail's page would
        have; damaged bytes there are deleted."""
        head: pb.QueueHead | None = None
        adopted: list[_NewPage] = []
        for state in self._head.files:
            if len(state.tail) < self._head.page_size:
                continue
            file_type = check_file_type(state.file_type)
            tail = list(state.tail)
            ref, _ = build_page(self._queue, file_type, tail, state.last_page_hash)
            try:
                found: list[pb.SegmentRecord] | None = await self._read_page(file_type, ref)
            except PageMissing:
                continue
            except CorruptMetadata:
                found = None
            if found != tail:
                log.warning("%s: deleting damaged unreferenced page %s", self._queue.name, ref.key)
                await self._store.delete(ref.key)
                continue
            head = head or self._next_head()
            new_state = find_state(head, file_type)
            assert new_state is not None
            page_out_tail(new_state)
            new_state.pages_written += 1
            new_state.last_page_hash = ref.page_hash
            adopted.append(_NewPage(file_type, ref, tail, None))
        if head is not None:
            log.info("%s: adopting %d page(s) a crash left", self._queue.name, len(adopted))
            await self._commit(head, adopted)

    async def _delete_dead_pages(self, file_type: pb.FileType) -> int:
        state = find_state(self._head, file_type)
        if state is None or not state.paged_through:
            return 0
        pageset = await self._pageset(file_type)
        keys = [r.key for r in pageset.dead(state.first_base_offset)]
        if keys:
            await self._store.delete_many(keys)
            pageset.discard(keys)
            self._cache.discard(keys)
        return len(keys)
