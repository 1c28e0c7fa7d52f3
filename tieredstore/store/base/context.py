"""What every queue of a store shares: backend, config, caches, pool, background work."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.fetcher import Fetcher
from tieredstore.log import LogFenced, LogWriter, WriterGate
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.segment.pool import UploadBufferPool
from tieredstore.store.base.errors import WriterReplaced
from tieredstore.store.formats import keys
from tieredstore.store.formats.codec import RecordCodec
from tieredstore.store.formats.keyentries import ENTRY_SIZE
from tieredstore.store.formats.record import UNIT_SIZE
from tieredstore.tasks import Background, SingleFlight

log = logging.getLogger(__name__)


@dataclass
class StoreContext:
    """Shared parts, built once by the MessageStore."""

    config: TieredStoreConfig
    store: ObjectStore
    fetcher: Fetcher
    pool: UploadBufferPool
    writer_id: str
    segment_options: SegmentOptions
    _sealed: OrderedDict[SegmentPath, ChunkedSegment] = field(default_factory=OrderedDict)
    # Opens of sealed segments under way: a herd of readers lists and reads each once.
    _opening: SingleFlight[SegmentPath, ChunkedSegment] = field(default_factory=SingleFlight)
    # Segments retention deleted (the newest max_open_sealed): a merge owed to
    # one of them has nothing left to merge.
    _expired: OrderedDict[SegmentPath, None] = field(default_factory=OrderedDict)
    # Merges and the store's periodic passes (see tieredstore.tasks).
    background: Background = field(default_factory=Background)
    _merge_limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(2))
    max_open_sealed: int = 256
    # The broker's log, claimed at open in either write mode (only the log mode
    # writes log objects; the direct mode compacts what a log-mode store left).
    log: LogWriter | None = None
    # The writer check (docs/writers.md): commits, claims and their retries pass it.
    gate: WriterGate | None = None
    codec: RecordCodec | None = None  # compresses and encrypts records, if configured
    # Opens records whatever the store seals with: compressed ones always, encrypted
    # ones with the store's keys (a broker that turned compression off reads its past).
    opener: RecordCodec | None = None

    def __repr__(self) -> str:
        """Where and who, never the configuration's secrets (its own repr redacts them)."""
        return (f"StoreContext(store={self.store!r}, metadata_root={self.metadata_root!r}, "
                f"writer_id={self.writer_id!r}, config={self.config!r})")

    @property
    def metadata_root(self) -> str:
        return keys.metadata_root(self.config)

    def segment_path(self, topic: str, queue_id: int, file_type: FileType, base: int
                     ) -> SegmentPath:
        return keys.segment_path(self.config, topic, queue_id, file_type, base)

    def options_for(self, file_type: FileType, topic: str) -> SegmentOptions:
        """How a segment of ``file_type`` of ``topic`` writes: in the topic's chunk
        size (``[topics."NAME"] chunk_size``, else ``chunk_size``); the consume queue
        and the key index are derived (re-dispatch rebuilds them from the commit
        log after a crash)."""
        options = self.segment_options
        chunk_size = self.config.for_topic(topic).chunk_size
        if chunk_size != options.chunk_size:
            options = dataclasses.replace(options, chunk_size=chunk_size)
        if file_type is FileType.COMMIT_LOG:
            return options
        return dataclasses.replace(options, derived=True)

    def max_size(self, file_type: FileType, topic: str) -> int:
        """The most bytes a segment of ``file_type`` of ``topic`` holds: the topic's
        ``commit_log_max_size`` (``[topics."NAME"]``, else the key); the consume
        queue's and the key index's whole units or entries."""
        if file_type is FileType.COMMIT_LOG:
            return self.config.for_topic(topic).commit_log_max_size
        size, entry = ((self.config.consume_queue_max_size, UNIT_SIZE)
                       if file_type is FileType.CONSUME_QUEUE
                       else (self.config.index_max_size, ENTRY_SIZE))
        return max(entry, size - size % entry)

    def in_log(self, topic: str, queue_id: int) -> bool:
        """Whether the log holds pieces of the queue not yet in chunks."""
        return self.log is not None and (topic, queue_id) in self.log.queues()

    @property
    def still_newest(self) -> Callable[[], Awaitable[None]] | None:
        """A fresh writer check (before a head write, and when a claim meets
        another writer's entry): :class:`WriterReplaced` once replaced."""
        gate = self.gate
        if gate is None:
            return None

        async def check() -> None:
            try:
                await gate.check_now()
            except LogFenced as exc:
                raise WriterReplaced(str(exc)) from None
        return check

    async def adopt_log(self, segment: ChunkedSegment) -> None:
        """An active segment, just opened for writing, takes the log's pieces of it."""
        if self.log is not None:
            await self.log.adopt(segment)

    async def open_sealed(self, path: SegmentPath) -> ChunkedSegment:
        """A sealed segment for reading, opened once and kept in a bounded LRU.

        Opened without repairs: a merge left unfinished is the background
        merger's work (see :meth:`FlatFile.open`), not a reader's. Readers that
        come while it opens wait for that open (one listing, one GET of a
        merged object's table, :class:`~tieredstore.tasks.SingleFlight`).
        """
        segment = self._sealed.get(path)
        if segment is not None:
            self._sealed.move_to_end(path)
            return segment
        return await self._opening.run(path, lambda: self._open_sealed(path))

    async def _open_sealed(self, path: SegmentPath) -> ChunkedSegment:
        options = SegmentOptions(chunk_size=self.config.for_topic(path.topic).chunk_size,
                                 merge_on_seal=False)
        segment = await ChunkedSegment.open(self.store, path, options=options,
                                            reader=self.fetcher, repair=False)
        self.keep_sealed(segment)
        return segment

    def keep_sealed(self, segment: ChunkedSegment) -> None:
        """Serve reads of a just-sealed segment from this very object, so that
        when its background merge swaps chunks for the merged object, reads
        in flight follow (see ``ChunkedSegment.read0``)."""
        self._sealed[segment.path] = segment
        while len(self._sealed) > self.max_open_sealed:
            self._sealed.popitem(last=False)

    def expired(self, path: SegmentPath) -> None:
        """Retention deletes the sealed segment at ``path``: no more reads of it
        through this context, and a merge of it under way stops quietly."""
        self._sealed.pop(path, None)
        self._expired[path] = None
        while len(self._expired) > self.max_open_sealed:
            self._expired.popitem(last=False)

    async def merge(self, segment: ChunkedSegment) -> bool:
        """Finish a seal begun without merge, a couple at a time. False: retention
        deleted the segment before or while it merged (its merge is owed no more;
        what a merge under way leaves, GC collects)."""
        async with self._merge_limit:
            if segment.path in self._expired:
                return False
            try:
                # merge=True: a segment from open_sealed() has merge_on_seal=False.
                await segment.seal(merge=True)
            except TieredStoreError as exc:
                if segment.path not in self._expired:
                    raise
                log.info("merge of %s stopped: retention deleted the segment (%s)",
                         segment.path, exc)
                return False
            return segment.path not in self._expired  # deleted meanwhile: owes nothing
