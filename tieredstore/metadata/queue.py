"""One queue's metadata in the object store: a mutable head, immutable pages.

Seed 001's split, on S3 instead of ZooKeeper. Per file type (commit log,
consume queue, index) the sealed-segment records of a queue are kept as

- pages: runs of ``page_size`` consecutive records, each page an object
  written once (``If-None-Match: *``) and never changed;
- a tail in the head: the records not yet paged, at most ``page_size``.

The head (one per queue, shared by the file types) also holds each file
type's ``first`` pointer, the message store's properties and the writer's id.
Each change writes the next head version (see :mod:`versions` for the CAS).

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

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.errors import ConfigError
from tieredstore.filetype import FileType
from tieredstore.metadata.errors import (
    CorruptMetadata,
    MetadataError,
    MetadataFenced,
    MetadataNotFound,
    MetadataReadOnly,
    PageMissing,
)
from tieredstore.metadata.format import FORMAT_VERSION, build_page, decode_page
from tieredstore.metadata.headwriter import NewPage
from tieredstore.metadata.keys import PageRef, QueuePath, check_file_type
from tieredstore.metadata.properties import PropertyUpdate, apply_properties
from tieredstore.metadata.reader import (
    DEFAULT_CACHE_PAGES,
    MetadataReader,
    queue_heads,
)
from tieredstore.metadata.state import (
    First,
    apply_append,
    apply_start,
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
UNREFERENCED_PAGE_AGE = 3600.0
"""Seconds an unreferenced page stays before :meth:`QueueMetadata.vacuum` takes
it (the default ``gc_safety_age``): longer than a writer takes from a page to
the head that references it."""


class QueueMetadata(MetadataReader):
    """The metadata of one queue. Open with :meth:`open` or :meth:`open_read_only`.

    Methods are safe to call concurrently from one event loop: writes are
    serialized, reads see the last committed head.
    """

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
        still_newest: Callable[[], Awaitable[None]] | None = None,
    ) -> QueueMetadata:
        """Open a queue for writing, creating it (lazily, on the first write) if new.

        ``page_size`` applies to a new queue only; an existing one keeps its
        own. A page left by a crash between cutting a full tail and writing
        its head is adopted here (damaged bytes at its key are deleted). With
        ``claim`` a head is written at once, which fences every earlier
        writer; otherwise the first write does that. ``still_newest``, if given,
        is awaited before every head write and when another writer's head took
        the version a claim wanted: it raises once this writer is replaced, so
        a claim never writes above a newer writer, and a replaced one writes no
        head a newer one would adopt (docs/writers.md, "The writer check"). With
        ``start_over_damaged``, a queue whose heads are all damaged opens as
        a new one whose first head follows the damaged ones (the caller
        rebuilds its records).
        """
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ConfigError("metadata_page_size",
                              f"must be in [1, {MAX_PAGE_SIZE}], got {page_size}")
        for _ in range(CLAIM_ATTEMPTS):
            heads = queue_heads(store, queue)
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
            self.before_publish = still_newest
            try:
                await self._recover_unreferenced_page()
                if claim:
                    await self.claim()
            except MetadataFenced:
                # The writer we replace wrote a head since we loaded ours: the
                # newest opener does not give up to it. Load again and retry.
                if still_newest is not None:
                    await still_newest()
                continue
            return self
        raise MetadataFenced(f"could not claim the queue in {CLAIM_ATTEMPTS} attempts: "
                             "its head keeps changing", queue=queue.name)

    @classmethod
    async def open_read_only(
        cls, store: ObjectStore, queue: QueuePath, *, cache_pages: int = DEFAULT_CACHE_PAGES
    ) -> QueueMetadata:
        """A snapshot at the newest head that never writes; :meth:`refresh` moves it on."""
        self = cls.empty(store, queue, cache_pages=cache_pages)
        await self.refresh()
        return self

    @classmethod
    def empty(cls, store: ObjectStore, queue: QueuePath, *,
              cache_pages: int = DEFAULT_CACHE_PAGES) -> QueueMetadata:
        """A read-only snapshot of a queue with no head: no record, no property
        (what a writer's open of it starts from)."""
        return cls(store, queue, pb.QueueHead(format_version=FORMAT_VERSION), 0, writer_id="",
                   read_only=True, cache_pages=cache_pages)

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
            self._forget_pages()  # its new pages are not in the listings

    # --- state ----------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self._read_only

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
        starts: Mapping[FileType, First] | None = None,
    ) -> int:
        """Append records in order with one head write (and the pages they fill).

        For bulk loads. Pages are cut where single appends would cut them.
        ``starts`` says where a file type left with no record begins (a
        rebuild's: retention deleted its earlier segments, see
        :func:`~tieredstore.metadata.state.apply_start`), in the same write.
        Nothing is written unless every record is in order, nor when no record
        is new and ``properties`` and ``starts`` change nothing. Returns how many records were
        new. After a failure the outcome is unknown (this
        instance's next write finds out first): resume after the
        :meth:`next_base_offset` of a reopened instance. A retried batch whose
        head landed is refused as out of order, bar a first record equal to
        the last one.
        """
        batch = list(records)
        async with self._write_lock:
            await self._begin_write()
            head = self.head
            if properties:
                apply_properties(head, properties, self._queue.name)
            pages: list[NewPage[PageRef, pb.SegmentRecord]] = []
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
                    pages.append(NewPage(file_type, ref, outcome.page, data))
            started = [apply_start(head, t, start) for t, start in (starts or {}).items()]
            if applied or any(started) or dict(head.properties) != dict(self._head.properties):
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

        def updates(current: Mapping[str, str]) -> Mapping[str, str | None]:
            given = values or {}
            return {**(given(current) if callable(given) else given), **kv}

        await self.append_many((), properties=updates)

    async def claim(self) -> None:
        """Write a head now (same content, this writer's id), fencing earlier writers."""
        async with self._write_lock:
            await self._begin_write()
            await self._commit(self.head)

    async def trim(self, file_type: FileType, before_base_offset: int) -> First:
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
            found = await self._first_ending_after(file_type, before_base_offset)
            first = found if found is not None else first_after_all(state)
            if first != first_of(state):
                head = self.head
                new_state = find_state(head, file_type)
                assert new_state is not None
                new_state.first_base_offset = first.base_offset
                new_state.first_message_offset = first.message_offset
                await self._commit(head)
            await self._delete_dead_pages(file_type)
            return first

    async def vacuum(self, *, unreferenced: bool = False,
                     unreferenced_age: float = UNREFERENCED_PAGE_AGE) -> int:
        """Delete every page wholly behind ``first`` (an interrupted trim's).

        With ``unreferenced``, also the pages no head of this writer references
        (left by a write whose head never landed; readers ignore them) that were
        last written ``unreferenced_age`` seconds ago or earlier. This claims the
        queue first, but a writer that takes it over after the claim writes its
        pages before the head that references them, and they are no page of
        ours: the age is what keeps them (docs/gc.md, *Deletes and their
        fences*). Lists each file type's pages. Returns how many were deleted.
        """
        async with self._write_lock:
            await self._begin_write()
            if unreferenced:
                await self._commit(self.head)
            cutoff = datetime.now(UTC) - timedelta(seconds=unreferenced_age)
            deleted = 0
            for state in list(self._head.files):
                file_type = check_file_type(state.file_type)
                deleted += await self._delete_dead_pages(file_type)
                if unreferenced:
                    pageset = await self._pageset(file_type)
                    keep = {r.key for r in (await self._view(state)).refs}
                    old = {o.key for o in await self._store.list_all(
                        self._queue.pages_prefix(file_type))
                           if o.modified is not None and o.modified <= cutoff}
                    deleted += await self._drop_pages(
                        pageset, [r.key for r in pageset.refs
                                  if r.key not in keep and r.key in old])
            return deleted

    # --- committing: pages, then the head (see :mod:`.headwriter`) ----------------

    def _check_writable(self) -> None:
        if self._read_only:
            raise MetadataReadOnly("opened read-only", queue=self._queue.name)
        super()._check_writable()

    async def _commit(self, head: pb.QueueHead,
                      pages: Sequence[NewPage[PageRef, pb.SegmentRecord]] = ()) -> None:
        """Write ``pages``, then ``head`` as the next version; then stand on it."""
        await self._commit_pages(head, pages)

    async def _recover_unreferenced_page(self) -> None:
        """Adopt the page a crash may have left between cutting a full tail and
        writing its head. It can only be at the key that tail's page would
        have; damaged bytes there are deleted."""
        head: pb.QueueHead | None = None
        adopted: list[NewPage[PageRef, pb.SegmentRecord]] = []
        for state in self._head.files:
            if len(state.tail) < self._head.page_size:
                continue
            file_type = check_file_type(state.file_type)
            tail = list(state.tail)
            ref, _ = build_page(self._queue, file_type, tail, state.last_page_hash)
            try:
                found: list[pb.SegmentRecord] | None = await self._read_page(
                    ref.key, functools.partial(decode_page, file_type=file_type, ref=ref))
            except PageMissing:
                continue
            except CorruptMetadata:
                found = None
            if found != tail:
                log.warning("%s: deleting damaged unreferenced page %s", self._queue.name, ref.key)
                await self._store.delete(ref.key)
                continue
            head = head or self.head
            new_state = find_state(head, file_type)
            assert new_state is not None
            page_out_tail(new_state)
            new_state.pages_written += 1
            new_state.last_page_hash = ref.page_hash
            adopted.append(NewPage(file_type, ref, tail, None))
        if head is not None:
            log.info("%s: adopting %d page(s) a crash left", self._queue.name, len(adopted))
            await self._commit(head, adopted)

    async def _delete_dead_pages(self, file_type: FileType) -> int:
        state = find_state(self._head, file_type)
        if state is None or not state.paged_through:
            return 0
        pageset = await self._pageset(file_type)
        dead = pageset.dead(state.first_base_offset)
        return await self._drop_pages(pageset, [r.key for r in dead])
