"""How a write to one queue's metadata lands: its new pages, then its head, by
:mod:`.headwriter`'s rules (each page created once, before the head that
references it; the head published as the next version and stood on once it
has landed). :class:`QueueWriter` adds the read-only refusal, adopts the page
a crash left between cutting a full tail and writing its head, and deletes
the pages wholly behind ``first``; :class:`~tieredstore.metadata.QueueMetadata`
builds its operations on these (see :mod:`tieredstore.metadata.queue`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.filetype import FileType
from tieredstore.metadata import metadata_pb2 as pb
from tieredstore.metadata.errors import CorruptMetadata, MetadataReadOnly, PageMissing
from tieredstore.metadata.format import build_page
from tieredstore.metadata.keys import PageRef, check_file_type
from tieredstore.metadata.reader import MetadataReader
from tieredstore.metadata.state import find_state, page_out_tail
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
    commit of pages and head, on which :class:`QueueMetadata`'s writes stand.
    Each write builds its head on a copy of the committed one (:attr:`head`)."""

    def _check_writable(self) -> None:
        if self._read_only:
            raise MetadataReadOnly("opened read-only", queue=self._queue.name)
        super()._check_writable()

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
        keys = [r.key for r in pageset.dead(state.first_base_offset)]
        if keys:
            await self._delete_pages(keys)
            pageset.discard(keys)
        return len(keys)
