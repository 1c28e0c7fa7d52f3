"""Reading one queue's metadata: what the head says, and lookups through pages.

:class:`MetadataReader` stands on one head version (held by its
:class:`~tieredstore.metadata.headwriter.HeadWriter` base). Lookups answer from the
head's tail when they can; otherwise the file type's page keys are listed
once (and kept up to date by this process's own writes), the page is chosen
from its key and read, one GET, into a small LRU. :func:`queue_heads` is the
series of a queue's head versions that every open loads from.
"""

from __future__ import annotations

import bisect
import types
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from operator import attrgetter

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.filetype import FileType
from tieredstore.metadata.errors import (
    CorruptMetadata,
    MetadataError,
    MetadataFenced,
    PageMissing,
)
from tieredstore.metadata.format import (
    decode_head,
    decode_page,
    encode_head,
    record_end,
    stamp_head,
)
from tieredstore.metadata.headwriter import HeadWriter
from tieredstore.metadata.keys import PageRef, QueuePath, check_file_type
from tieredstore.metadata.pages import PageSet, PageView, page_span
from tieredstore.metadata.state import (
    First,
    copy_record,
    find_state,
    first_of,
    has_live,
    is_live,
    next_of,
)
from tieredstore.metadata.versions import VersionedHeads
from tieredstore.objectstore.base import ObjectStore

DEFAULT_CACHE_PAGES = 16


def queue_heads(store: ObjectStore, queue: QueuePath) -> VersionedHeads[pb.QueueHead]:
    """The versions of one queue's head (see :mod:`~tieredstore.metadata.versions`
    for the compare-and-swap)."""
    return VersionedHeads(
        store, queue, decode=decode_head,
        fenced=lambda message: MetadataFenced(message, queue=queue.name),
        error=lambda message: MetadataError(message, queue=queue.name),
        corrupt=CorruptMetadata,
    )


class MetadataReader(HeadWriter[pb.QueueHead, pb.SegmentRecord, PageRef]):
    """Lookups over one queue's metadata at one head version.

    Reads see the head this instance stands on; pages are immutable, so a
    page once read stays right for as long as it is live.
    """

    def __init__(
        self,
        store: ObjectStore,
        queue: QueuePath,
        head: pb.QueueHead,
        version: int,
        *,
        writer_id: str = "",
        read_only: bool = False,
        cache_pages: int = DEFAULT_CACHE_PAGES,
    ) -> None:
        super().__init__(
            queue_heads(store, queue), head, version, writer_id=writer_id,
            stamp=stamp_head, session_of=lambda head: head.session_id, encode=encode_head,
            corrupt=lambda message: CorruptMetadata(message, queue=queue.name),
            missing=lambda message: PageMissing(message, queue=queue.name),
            span=page_span, cache_pages=cache_pages,
        )
        self._queue = queue
        self._read_only = read_only

    # --- what the head says -------------------------------------------------------

    @property
    def queue(self) -> QueuePath:
        return self._queue

    @property
    def head(self) -> pb.QueueHead:
        """A copy of the head this instance stands on, for inspection: each file
        type's tail, pages written, ``paged_through`` and ``first`` pointer.
        Changing the copy changes nothing; it does not follow later writes."""
        head = pb.QueueHead()
        head.CopyFrom(self._head)
        return head

    @property
    def page_size(self) -> int:
        return self._head.page_size

    @property
    def writer_id(self) -> str:
        """Who wrote the current head."""
        return self._head.writer_id

    @property
    def properties(self) -> Mapping[str, str]:
        return types.MappingProxyType(dict(self._head.properties))

    @property
    def file_types(self) -> list[FileType]:
        """The file types that ever had a record."""
        return [check_file_type(s.file_type) for s in self._head.files if s.HasField("last")]

    def first(self, file_type: FileType) -> First:
        """The first live record's base and message offset (see :class:`First`)."""
        return first_of(find_state(self._head, check_file_type(file_type)))

    def last_record(self, file_type: FileType) -> pb.SegmentRecord | None:
        """The last live record, from the head alone."""
        state = self._live_state(file_type)
        return None if state is None else copy_record(state.last)

    def next_base_offset(self, file_type: FileType) -> int:
        """Where the next record may begin: the end of the last one appended,
        live or trimmed (before the first, the first pointer: 0, or where a
        rebuild found the file going on)."""
        return next_of(find_state(self._head, check_file_type(file_type))).base_offset

    def next_message_offset(self, file_type: FileType) -> int:
        """The queue offset after the last record appended (before the first,
        the first pointer's, as :meth:`next_base_offset`)."""
        return next_of(find_state(self._head, check_file_type(file_type))).message_offset

    # --- reading ------------------------------------------------------------------

    async def find_by_base_offset(
        self, file_type: FileType, position: int
    ) -> pb.SegmentRecord | None:
        """The live record whose segment holds byte ``position`` of the flat file."""
        return await self._find(file_type, position, by_message=False)

    async def find_by_message_offset(
        self, file_type: FileType, offset: int
    ) -> pb.SegmentRecord | None:
        """The live record holding queue offset ``offset`` (None in a gap)."""
        return await self._find(file_type, offset, by_message=True)

    async def _find(
        self, file_type: FileType, at: int, *, by_message: bool
    ) -> pb.SegmentRecord | None:
        """The live record holding ``at``: a queue offset ``by_message``, else a
        byte position. From the head's tail when ``at`` is in it, else from the
        one page that can hold it."""
        state = self._live_state(file_type)
        if state is None:
            return None
        key = attrgetter("first_message_offset" if by_message else "base_offset")
        tail = state.tail
        if at < (state.first_message_offset if by_message else state.first_base_offset):
            return None
        if tail and at >= key(tail[0]):
            candidates: Sequence[pb.SegmentRecord] = tail
        elif state.paged_through <= (state.first_base_offset if by_message else at):
            return None
        else:
            view = await self._view(state)
            i = view.locate_message(at) if by_message else view.locate_base(at)
            if i is None:
                return None
            candidates = await self._page(state.file_type, view.refs[i])
        i = bisect.bisect_right(candidates, at, key=key)  # the last record starting at or before
        record = candidates[i - 1] if i else None
        end = record_end if not by_message else lambda r: r.last_message_offset + 1
        if record is None or at >= end(record) or not is_live(state, record):
            return None
        return copy_record(record)

    async def find_by_time(
        self, file_type: FileType, timestamp_ms: int
    ) -> pb.SegmentRecord | None:
        """The first live record whose end timestamp is at or after ``timestamp_ms``.

        Exact even when store timestamps are not monotonic across segments.
        """
        state = self._live_state(file_type)
        if state is None:
            return None
        paged = (state.paged_through > state.first_base_offset
                 and timestamp_ms <= state.paged_max_end_timestamp_ms)
        async for record in self._scan(
            state, (lambda view: view.start_for_time(timestamp_ms)) if paged else None,
            lambda r: r.end_timestamp_ms >= timestamp_ms,
            skip=lambda ref: ref.max_end_timestamp_ms < timestamp_ms,
        ):
            return record
        return None

    async def records(
        self, file_type: FileType, *, from_base_offset: int = 0
    ) -> AsyncIterator[pb.SegmentRecord]:
        """Live records in order, from the one holding ``from_base_offset`` on
        (or the next). Pages are read one at a time, as the iteration gets there."""
        state = self._live_state(file_type)
        if state is None:
            return
        start = max(from_base_offset, state.first_base_offset)
        paged = state.paged_through > start
        async for record in self._scan(
            state, (lambda view: view.start_for_base(start)) if paged else None,
            lambda r: record_end(r) > start,
        ):
            yield record

    def _live_state(self, file_type: FileType) -> pb.FileState | None:
        """The file type's state in the head, if any record of it is live."""
        state = find_state(self._head, check_file_type(file_type))
        return state if state is not None and has_live(state) else None

    async def _scan(
        self,
        state: pb.FileState,
        pages_from: Callable[[PageView], int] | None,
        keep: Callable[[pb.SegmentRecord], bool],
        *,
        skip: Callable[[PageRef], bool] = lambda ref: False,
    ) -> AsyncIterator[pb.SegmentRecord]:
        """The live records ``keep`` takes, in order (copies): those of the pages
        the head references from page ``pages_from(view)`` on (None: none; a page
        ``skip`` rules out by its key is not read), then the tail's."""
        if pages_from is not None:
            view = await self._view(state)
            for ref in view.refs[pages_from(view):]:
                if not skip(ref):
                    for record in await self._page(state.file_type, ref):
                        if keep(record) and is_live(state, record):
                            yield copy_record(record)
        for record in list(state.tail):
            if keep(record) and is_live(state, record):
                yield copy_record(record)

    async def _first_ending_after(self, file_type: FileType, position: int) -> First | None:
        """The first live record that ends after ``position``, as a pointer."""
        state = find_state(self._head, file_type)
        assert state is not None
        if state.paged_through > max(position, state.first_base_offset):
            view = await self._view(state)
            start = view.start_for_base(position)
            for i in range(start, len(view)):
                ref = view.refs[i]
                if i > start:  # its first record starts after position: the key says enough
                    return First(ref.first_base_offset, ref.first_message_offset)
                for record in await self._page(file_type, ref):
                    if record_end(record) > position and is_live(state, record):
                        return First(record.base_offset, record.first_message_offset)
        for record in state.tail:
            if record_end(record) > position and is_live(state, record):
                return First(record.base_offset, record.first_message_offset)
        return None

    async def _view(self, state: pb.FileState) -> PageView:
        pageset = await self._pageset(check_file_type(state.file_type))
        return pageset.view(state.first_base_offset, state.paged_through, state.last_page_hash)

    async def _pageset(self, file_type: FileType) -> PageSet[PageRef]:
        """Every page key of the file type: listed once, then kept up to date."""
        return await self._listed_pages(file_type, self._queue.pages_prefix(file_type),
                                        lambda key: self._queue.parse_page_key(file_type, key))

    async def _page(self, file_type: int, ref: PageRef) -> tuple[pb.SegmentRecord, ...]:
        return await self._page_records(
            ref.key, lambda data: decode_page(data, check_file_type(file_type), ref))

