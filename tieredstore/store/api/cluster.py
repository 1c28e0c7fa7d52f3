"""Every broker of a cluster, read-only: the cluster view of the read-only paths.

RocketMQ spreads a topic's queues over brokers: a queue is ``(broker, topic,
queue id)``, and ``(broker-a, orders, 0)`` and ``(broker-b, orders, 0)`` are
two queues of one topic. :class:`ReadOnlyCluster` reads them all: one backend
and one fetcher, and over them a :class:`ReadOnlyMessageStore` per broker (the
per-broker view), made when first asked for. Its brokers are those it was
opened with (a selection), else every broker of the cluster
(:func:`~tieredstore.store.ops.brokers.list_brokers`: one paged LIST of the
cluster's metadata root, made once and kept; ``fresh`` lists again). Like the
per-broker view, it never writes and never fences a writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import StoreClosed
from tieredstore.fetcher import Fetcher
from tieredstore.names import validate_name
from tieredstore.objectstore import ObjectStore, read_only
from tieredstore.store.api.read_only import ReadOnlyMessageStore
from tieredstore.store.base import arguments
from tieredstore.store.base.compose import open_fetcher, open_object_store
from tieredstore.store.base.opening import opening
from tieredstore.store.formats.codec import KeyProvider, RecordCodec
from tieredstore.store.formats.record import Message
from tieredstore.store.ops.brokers import list_brokers
from tieredstore.store.read.selected import unknown_in_cluster
from tieredstore.store.read.view import listed_queues
from tieredstore.tasks import gather_bounded

BROKER_CONCURRENCY = 8

ClusterQueue = tuple[str, str, int]
"""A queue of the cluster: ``(broker, topic, queue id)``."""


class ReadOnlyCluster:
    """The brokers of ``config``'s cluster, read from the bucket alone. Use :meth:`open`."""

    def __init__(self, config: TieredStoreConfig, store: ObjectStore, fetcher: Fetcher, *,
                 owns_store: bool, codec: RecordCodec | None = None,
                 brokers: Sequence[str] | None = None) -> None:
        self.config = config
        self.store = store
        self.fetcher = fetcher
        self.codec = codec
        self.selected = None if brokers is None else tuple(sorted({
            validate_name("broker", b) for b in brokers}))
        self._owns_store = owns_store
        self._stores: dict[str, ReadOnlyMessageStore] = {}
        self._configs: dict[str, TieredStoreConfig] = {}
        self._listed: list[str] | None = None
        self._closed = False

    @classmethod
    @opening
    async def open(cls, config: TieredStoreConfig | None = None, *,
                   store: ObjectStore | None = None, brokers: Sequence[str] | None = None,
                   key_provider: KeyProvider | None = None) -> ReadOnlyCluster:
        """Open ``config``'s backend (or the given ObjectStore) for reading the
        cluster ``config.cluster`` (awaited, or as ``async with``). ``brokers``:
        read these only (None: every broker of the cluster; ``config.broker``
        is not a selection). Nothing is listed until asked for; nothing is ever
        written. ``key_provider``: as :meth:`ReadOnlyMessageStore.open`'s."""
        arguments.check_key_provider(key_provider)
        config = config or load_config()
        codec = RecordCodec.from_config(config, key_provider, strict=False)
        backend = read_only(store or open_object_store(config), close_inner=store is None)
        return cls(config, backend, open_fetcher(backend, config), owns_store=store is None,
                   codec=codec, brokers=brokers)

    async def brokers(self, *, fresh: bool = False) -> list[str]:
        """The brokers this view reads, sorted: the selection it was opened with,
        else every broker of the cluster (:meth:`cluster_brokers`)."""
        if self.selected is not None:
            return list(self.selected)
        return await self.cluster_brokers(fresh=fresh)

    async def cluster_brokers(self, *, fresh: bool = False) -> list[str]:
        """Every broker of the cluster with metadata in the bucket, whatever the
        selection, sorted: listed once (one paged LIST), then kept; ``fresh``
        lists again (a broker that opened since)."""
        self._check_open()
        if self._listed is None or fresh:
            self._listed = await list_brokers(self.store, self.config)
        return list(self._listed)

    def config_of(self, broker: str) -> TieredStoreConfig:
        """The configuration of one broker of the cluster."""
        config = self._configs.get(broker)
        if config is None:
            config = self._configs[broker] = self.config.replace(broker=broker)
        return config

    def broker(self, name: str) -> ReadOnlyMessageStore:
        """The read-only store of one broker, over the cluster's backend and fetcher."""
        self._check_open()
        store = self._stores.get(name)
        if store is None:
            store = ReadOnlyMessageStore(self.config_of(name), self.store, self.fetcher,
                                         owns_store=False, owns_fetcher=False, codec=self.codec)
            self._stores[name] = store
        return store

    async def queues(self, *, every: bool = False) -> list[ClusterQueue]:
        """Every queue whose metadata the bucket holds, of the brokers this view
        reads (``every``: of every broker of the cluster), sorted: one paged LIST
        of each broker's heads."""
        brokers = await (self.cluster_brokers() if every else self.brokers())
        listed = await gather_bounded(BROKER_CONCURRENCY, lambda b: self.broker(b).queues(),
                                      brokers)
        return sorted((b, t, q) for b, queues in zip(brokers, listed, strict=True)
                      for t, q in queues)

    async def holding(self, topic: str, queue_id: int | None = None) -> list[str]:
        """The brokers this view reads whose metadata has ``topic`` (its queue
        ``queue_id``), sorted: one LIST of the topic's heads per broker."""
        arguments.check_queue(topic, 0 if queue_id is None else queue_id)
        brokers = await self.brokers()

        async def holds(broker: str) -> bool:
            found = await listed_queues(self.store, self.config_of(broker), topics=[topic])
            return any(queue_id in (None, q) for _, q in found)

        held = await gather_bounded(BROKER_CONCURRENCY, holds, brokers)
        return [b for b, h in zip(brokers, held, strict=True) if h]

    async def query_by_key(self, topic: str, key: str, begin_ms: int = 0,
                           end_ms: int = arguments.MAX_TIMESTAMP, max_count: int = 64
                           ) -> list[tuple[str, Message]]:
        """``query_by_key`` over every broker this view reads (each of the topic's
        queues on each), as ``(broker, message)``: the newest ``max_count``,
        oldest first."""
        arguments.check_query_by_key(topic, key, begin_ms, end_ms, max_count)
        brokers = await self.brokers()
        answers = await asyncio.gather(*(
            self.broker(b).query_by_key(topic, key, begin_ms, end_ms, max_count)
            for b in brokers))
        found = [(b, m) for b, got in zip(brokers, answers, strict=True) for m in got]
        found.sort(key=lambda f: (f[1].store_timestamp, f[0], f[1].queue_id, f[1].offset))
        return found[-max_count:]

    async def unknown(self, topic: str | None = None, queue_id: int | None = None) -> str | None:
        """What is unknown to this view of ``topic`` (``queue_id``), or of the
        brokers it was opened with, looked up across the whole cluster
        (:func:`~tieredstore.store.read.selected.unknown_in_cluster`); None when all
        are there. Lists the cluster's brokers and, given a topic or queue,
        every broker's heads."""
        brokers = await self.cluster_brokers()
        listed = [] if topic is None and queue_id is None else await self.queues(every=True)
        return unknown_in_cluster(listed, topic, queue_id, selected=self.selected,
                                  brokers=brokers)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the read-only cluster is closed")

    async def close(self) -> None:
        """Close every broker's store, the fetcher and, if this opened it, the
        backend. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for store in self._stores.values():
                await store.close()
            await self.fetcher.close()
        finally:
            if self._owns_store:
                await self.store.close()

    async def __aenter__(self) -> ReadOnlyCluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
