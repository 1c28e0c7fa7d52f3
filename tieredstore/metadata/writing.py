"""How a write to one queue's metadata lands: its new pages, then its head.

:class:`QueueWriter` holds a writer's side of :class:`MetadataReader`: the
read-only flag, and the commit over :mod:`.headwriter`'s rules (lock, settle,
stamp and publish, pages written once). Pages a head will reference are created
first (``If-None-Match: *``; a page's key names a digest of its bytes, so
identical bytes found in place mean it was written before), then the head
as the next version (see :mod:`versions` for the CAS); only once the head has
landed does the writer stand on it. It also adopts the page a crash left
between cutting a full tail and writing its head, and deletes the pages
wholly behind ``first``. :class:`~tieredstore.metadata.QueueMetadata` builds
its operations on these; see :mod:`tieredstore.metadata.queue` for the design.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.filetype import FileType
from tieredstore.metadata import metadata_pb2 as pb
from tieredstore.metadata.errors import CorruptMetadata, MetadataReadOnly, PageMissing
from tieredstore.metadata.format import build_page
from tieredstore.metadata.keys import PageRef, QueuePath, check_file_type
from tieredstore.metadata.reader import MetadataReader
from tieredstore.metadata.state import find_state, page_out_tail
from tieredstore.objectstore.base import ObjectStore
from tieredstore.tasks import gather_bounded

log = logging.getLogger(__name__)

_PAGE_WRITE_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class NewPage:
    """A page that the next head will reference. ``data`` None: already written."""

    file_type: FileType
    ref: PageRef
    records: list[pb.SegmentRecord]
    data: bytes | None


class QueueWriter(MetadataReader):
    """A queue's metadata as its writer (or a read-only open) holds it: the
    commit of pages and head, on which :class:`QueueMetadata`'s writes stand."""

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
        super().__init__(store, queue, head, version, writer_id=writer_id,
                         cache_pages=cache_pages)
        self._read_only = read_only
        self.created = False  # QueueMetadata.open says whether no valid head was found

    def _check_writable(self) -> None:
        if self._read_only:
            raise MetadataReadOnly("opened read-only", queue=self._queue.name)
        super()._check_writable()

    def _next_head(self) -> pb.QueueHead:
        head = pb.QueueHead()
        head.CopyFrom(self._head)
        return head

    async def _commit(self, head: pb.QueueHead, pages: Sequence[NewPage] = ()) -> None:
        """Write ``pages``, then ``head`` as the next version; then stand on it."""
        await gather_bounded(_PAGE_WRITE_CONCURRENCY, lambda page: self._write_page(*page),
                             [(p.ref.key, p.data) for p in pages if p.data is not None])

        def landed() -> None:
            self._pages_committed([(p.file_type, p.ref, p.records) for p in pages])

        await self._publish(head, landed)

    async def _recover_unreferenced_page(self) -> None:
        """Adopt the page a crash may have left between cutting a full tail and
        writing its head. It can only be at the key that tail's page would
        have; damaged bytes there are deleted."""
        head: pb.QueueHead | None = None
        adopted: list[NewPage] = []
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
            adopted.append(NewPage(file_type, ref, tail, None))
        if head is not None:
            log.info("%s: adopting %d page(s) a crash left", self._queue.name, len(adopted))
            await self._commit(head, adopted)

    async def _delete_dead_pages(self, file_type: FileType) -> int:
        state = find_state(self._head, file_type)
        if state is None or not state.paged_through:
            return 0
        pageset = await self._pageset(file_type)
        keys = [r.key for r in pageset.dead(state.first_base_offset)]
        if keys:
            await self._delete_pages(keys)
            pageset.discard(keys)
        return len(keys)
