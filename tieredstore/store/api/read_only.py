"""A store opened for reading only: never writes, never fences a writer.

``ReadOnlyMessageStore`` answers the writing store's read methods with its
code (:class:`~tieredstore.store.read.reads.QueueReads`,
:class:`~tieredstore.store.read.reading.QueueReading`) over a
:class:`~tieredstore.store.read.view.QueueView` of each queue: what is durable
in the bucket. Inspecting, verifying, tailing or exporting a store a
broker is writing goes through it. A read at or past the end a queue's view
saw lists the queue again, so a reader follows a live writer. It is one
broker's view (``config.broker``); :class:`~tieredstore.store.api.cluster.ReadOnlyCluster`
reads every broker of a cluster, with one of these per broker.
"""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import StoreClosed
from tieredstore.fetcher import Fetcher
from tieredstore.log import LogIndexes, LogSnapshot
from tieredstore.objectstore import ObjectStore, read_only
from tieredstore.store.base import arguments
from tieredstore.store.base.compose import open_fetcher, open_object_store
from tieredstore.store.base.opening import opening
from tieredstore.store.formats.codec import KeyProvider, RecordCodec
from tieredstore.store.formats.keys import log_path
from tieredstore.store.read.queue_view import QueueView
from tieredstore.store.read.reading import QueueReading
from tieredstore.store.read.reads import QueueReads
from tieredstore.store.read.view import listed_queues
from tieredstore.tasks import SingleFlight


class ReadOnlyMessageStore(QueueReads):
    """Queues read from the bucket alone: the read methods are
    :class:`AsyncMessageStore`'s, over what is durable in the bucket. Use :meth:`open`."""

    def __init__(self, config: TieredStoreConfig, store: ObjectStore, fetcher: Fetcher, *,
                 owns_store: bool, codec: RecordCodec | None = None,
                 owns_fetcher: bool = True) -> None:
        self.config = config
        self.codec = codec
        self.store = store
        self.fetcher = fetcher
        self._owns_store = owns_store
        self._owns_fetcher = owns_fetcher  # not when a cluster's brokers share one
        self._views: dict[tuple[str, int], QueueView] = {}
        # Views opening, by queue and the log they are opened with (None: their own).
        self._opening: SingleFlight[tuple[str, int, int | None], QueueView] = SingleFlight()
        self._loading: SingleFlight[str, LogSnapshot] = SingleFlight()  # the broker's log
        self._indexes = LogIndexes()  # log objects never change: their indexes are kept
        self._closed = False

    @classmethod
    @opening
    async def open(cls, config: TieredStoreConfig | None = None, *,
                   store: ObjectStore | None = None, key_provider: KeyProvider | None = None
                   ) -> ReadOnlyMessageStore:
        """Open ``config``'s backend (or the given ObjectStore) for reading (awaited,
        or as ``async with``: see :class:`~tieredstore.store.base.opening.Opening`).
        Nothing is listed or read until a queue is asked for; nothing is ever written.
        ``key_provider``: as :meth:`AsyncMessageStore.open`'s."""
        arguments.check_key_provider(key_provider)
        config = config or load_config()
        codec = RecordCodec.from_config(config, key_provider, strict=False)
        backend = read_only(store or open_object_store(config), close_inner=store is None)
        return cls(config, backend, open_fetcher(backend, config),
                   owns_store=store is None, codec=codec)

    async def queues(self) -> list[tuple[str, int]]:
        """Every queue whose metadata the bucket holds."""
        self._check_open()
        return await listed_queues(self.store, self.config)

    async def queue(self, topic: str, queue_id: int, *, fresh: bool = False) -> QueueView:
        """The view of one queue (:class:`NoSuchQueue` if there is none); ``fresh``
        lists it again to see what a writer added since."""
        self._check_open()
        arguments.check_queue(topic, queue_id)
        view = self._views.get((topic, queue_id))
        if view is None or fresh:
            view = await self._open_view(topic, queue_id, fresh=fresh)
        return view

    async def _open_view(self, topic: str, queue_id: int, log: LogSnapshot | None = None, *,
                         fresh: bool = True) -> QueueView:
        """A view opened for this call (``fresh``: begun after it), kept; ``log``:
        the broker's log loaded before (else here)."""

        async def open_view() -> QueueView:
            view = await QueueView.open(self.store, self.config, topic, queue_id, self.fetcher,
                                        log=await self._fresh_log() if log is None else log,
                                        codec=self.codec)
            self._views[(topic, queue_id)] = view
            return view

        key = (topic, queue_id, None if log is None else id(log))
        return await self._opening.run(key, open_view, fresh=fresh)

    async def _reading(self, topic: str, queue_id: int, *, at: int | None = None,
                       fresh: bool = False) -> QueueView:
        """The queue's view; listed again if ``fresh``, or for a read from ``at``
        at or past what it saw (has a writer added since?)."""
        view = await self.queue(topic, queue_id, fresh=fresh)
        if not fresh and at is not None and at >= view.max_offset:
            view = await self.queue(topic, queue_id, fresh=True)
        return view

    async def _readings(self, topic: str) -> list[QueueReading]:
        """Each of the topic's queues listed afresh, after one load of the
        broker's log for them all."""
        queues = [q for t, q in await self.queues() if t == topic]
        if not queues:
            return []
        log = await self._fresh_log()
        return [await self._open_view(topic, q, log) for q in queues]

    async def _fresh_log(self) -> LogSnapshot:
        """A load of the broker's log begun after this call, shared by the views
        opening meanwhile (a herd of first reads loads it once or twice, not once
        a queue)."""
        return await self._loading.run("log", self._load_log, fresh=True)

    async def _load_log(self) -> LogSnapshot:
        """The broker's log as it is now: listed, the indexes of its objects new
        since the last load read (the others are kept)."""
        return await LogSnapshot.load(self.store, log_path(self.config), self._indexes)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the read-only store is closed")

    async def close(self) -> None:
        """Release the fetcher (unless shared) and, if this opened it, the backend.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owns_fetcher:
                await self.fetcher.close()
        finally:
            if self._owns_store:
                await self.store.close()

    async def __aenter__(self) -> ReadOnlyMessageStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
