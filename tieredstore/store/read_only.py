"""A store opened for reading only: never writes, never fences a writer.

``ReadOnlyMessageStore`` answers ``get``, the offsets and ``offset_for_time``
with the writer's own code (:class:`~tieredstore.store.reading.QueueReading`)
over a :class:`~tieredstore.store.view.QueueView` of each queue: what is
durable in the bucket. Inspecting, verifying, tailing or exporting a store a
broker is writing goes through it. A read at or past the end a queue's view
saw lists the queue again, so a reader follows a live writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import StoreClosed
from tieredstore.fetcher import Fetcher
from tieredstore.log import LogSnapshot
from tieredstore.objectstore import ObjectStore
from tieredstore.sizes import MiB
from tieredstore.store import arguments
from tieredstore.store.arguments import MAX_TIMESTAMP
from tieredstore.store.bykey import KeyQuery, newest
from tieredstore.store.codec import KeyProvider, RecordCodec
from tieredstore.store.compose import open_fetcher, open_object_store
from tieredstore.store.keys import log_path
from tieredstore.store.queue_view import QueueView
from tieredstore.store.record import Message
from tieredstore.store.tagged import MAX_SCAN, Tagged
from tieredstore.store.view import listed_queues


class ReadOnlyMessageStore:
    """Queues read from the bucket alone. Use :meth:`open`."""

    def __init__(self, config: TieredStoreConfig, store: ObjectStore, fetcher: Fetcher, *,
                 owns_store: bool, codec: RecordCodec | None = None) -> None:
        self.config = config
        self.codec = codec
        self.store = store
        self.fetcher = fetcher
        self._owns_store = owns_store
        self._views: dict[tuple[str, int], QueueView] = {}
        self._closed = False

    @classmethod
    async def open(cls, config: TieredStoreConfig | None = None, *,
                   store: ObjectStore | None = None, key_provider: KeyProvider | None = None
                   ) -> ReadOnlyMessageStore:
        """Open ``config``'s backend (or the given ObjectStore) for reading. Nothing
        is listed or read until a queue is asked for; nothing is ever written.
        ``key_provider``: as :meth:`AsyncMessageStore.open`'s."""
        arguments.check_key_provider(key_provider)
        config = config or load_config()
        codec = RecordCodec.from_config(config, key_provider, strict=False)
        backend = store or open_object_store(config)
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
            view = await self._open_view(topic, queue_id)
        return view

    async def _open_view(self, topic: str, queue_id: int, log: LogSnapshot | None = None
                         ) -> QueueView:
        """A fresh view, kept; ``log``: the broker's log loaded before (else here)."""
        view = await QueueView.open(self.store, self.config, topic, queue_id, self.fetcher,
                                    log=log, codec=self.codec)
        self._views[(topic, queue_id)] = view
        return view

    async def get_by_tags(self, topic: str, queue_id: int, offset: int,
                          tags: str | Collection[str], *, max_count: int = 32,
                          max_bytes: int = 4 * MiB, max_scan: int = MAX_SCAN) -> Tagged:
        """As :meth:`AsyncMessageStore.get_by_tags`, over what is durable in the bucket."""
        wanted = arguments.tag_filter(topic, queue_id, offset, tags, max_count=max_count,
                                      max_bytes=max_bytes, max_scan=max_scan)
        view = await self._reading_at(topic, queue_id, offset)
        return await view.get_by_tags(offset, wanted, max_count, max_bytes, max_scan)

    async def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                  max_bytes: int = 4 * MiB) -> list[Message]:
        """As :meth:`AsyncMessageStore.get`, over what is durable in the bucket."""
        arguments.check_get(topic, queue_id, offset, max_count, max_bytes)
        view = await self._reading_at(topic, queue_id, offset)
        return await view.get(offset, max_count, max_bytes)

    async def _reading_at(self, topic: str, queue_id: int, offset: int) -> QueueView:
        """The queue's view for a read from ``offset``: listed again if the read
        starts at or past what it saw (has a writer added since?)."""
        view = await self.queue(topic, queue_id)
        if offset >= view.max_offset:
            view = await self.queue(topic, queue_id, fresh=True)
        return view

    async def query_by_key(self, topic: str, key: str, begin_ms: int = 0,
                           end_ms: int = MAX_TIMESTAMP, max_count: int = 64) -> list[Message]:
        """As :meth:`AsyncMessageStore.query_by_key`, over what is durable in the
        bucket (each of the topic's queues listed afresh, after one load of the
        broker's log for them all)."""
        arguments.check_query_by_key(topic, key, begin_ms, end_ms, max_count)
        wanted = KeyQuery(key, begin_ms, end_ms, max_count)
        queues = [q for t, q in await self.queues() if t == topic]
        log = await LogSnapshot.load(self.store, log_path(self.config)) if queues else None
        views = [await self._open_view(topic, q, log) for q in queues]
        return newest(await asyncio.gather(*(v.query_by_key(wanted) for v in views)),
                      max_count)

    async def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        arguments.check_offset_for_time(topic, queue_id, timestamp_ms)
        return await (await self.queue(topic, queue_id)).offset_for_time(timestamp_ms)

    async def min_offset(self, topic: str, queue_id: int) -> int:
        return (await self.queue(topic, queue_id)).min_offset

    async def max_offset(self, topic: str, queue_id: int) -> int:
        """One past the last offset durable in the bucket (listed afresh)."""
        return (await self.queue(topic, queue_id, fresh=True)).max_offset

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the read-only store is closed")

    async def close(self) -> None:
        """Release the fetcher and, if this opened it, the backend. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.fetcher.close()
        finally:
            if self._owns_store:
                await self.store.close()

    async def __aenter__(self) -> ReadOnlyMessageStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
