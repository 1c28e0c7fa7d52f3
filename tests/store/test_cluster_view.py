"""ReadOnlyCluster: every broker of a cluster read from the bucket alone, over one
backend and one fetcher. Two brokers write one topic (queue 0 of ``orders`` on
each: two queues) and one topic is on one broker only; broker-b's writer stays
open (live) while the cluster is read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.store.conftest import small_config
from tieredstore.objectstore import ObjectInfo, ObjectStore, ReadOnlyObjectStore
from tieredstore.store import AsyncMessageStore, BucketWatch, ReadOnlyCluster
from tieredstore.testing import ForwardingObjectStore

A, B = "broker-a", "broker-b"
QUEUES = [(A, "orders", 0), (A, "orders", 1), (B, "only-b", 0), (B, "orders", 0)]


class Listings(ForwardingObjectStore):
    """Says which prefixes were listed (the writers' listings are apart)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.listed: list[str] = []

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        self.listed.append(prefix)
        async for page in super().list_pages(prefix):
            yield page


async def test_a_cluster_reads_every_broker_over_one_backend(store: ObjectStore,
                                                             tmp_path: Path) -> None:
    config = small_config(gc_interval=0)
    a = await AsyncMessageStore.open(config.replace(broker=A), store=store)
    b = await AsyncMessageStore.open(config.replace(broker=B), store=store)
    try:
        for i in range(3):
            await a.append("orders", 0, b"a0-%d" % i, keys=["ka", "both"])
            await b.append("orders", 0, b"b0-%d" % i, keys=["kb", "both"])
        await a.append("orders", 1, b"a1", keys=["ka"])
        await b.append("only-b", 0, b"only", keys=["kb"])
        await a.flush()
        await b.flush()
        await a.close()  # broker-a's writer closed, broker-b's live
        reading = Listings(store)
        async with ReadOnlyCluster.open(config, store=reading) as cluster:
            # One paged LIST of the cluster's metadata root, kept after.
            assert await cluster.brokers() == [A, B]
            assert reading.listed == ["tieredstore/meta-root/default-cluster/"]
            assert await cluster.brokers() == [A, B] and len(reading.listed) == 1
            assert await cluster.queues() == QUEUES
            assert await cluster.holding("orders", 0) == [A, B]
            assert await cluster.holding("only-b") == [B]
            # One backend (read-only) and one fetcher for every broker's read-only store.
            shared = cluster.broker(A).store
            assert shared is cluster.broker(B).store and not shared.supports_writes
            assert isinstance(shared, ReadOnlyObjectStore) and shared.inner is reading
            assert cluster.broker(A).fetcher is cluster.broker(B).fetcher is cluster.fetcher
            got = [m.body for m in await cluster.broker(B).get("orders", 0, 0, 10)]
            assert got == [b"b0-0", b"b0-1", b"b0-2"]
            both = await cluster.query_by_key("orders", "both")
            assert sorted((broker, m.body) for broker, m in both) == sorted(
                [(A, b"a0-%d" % i) for i in range(3)] + [(B, b"b0-%d" % i) for i in range(3)])
            assert [(broker, m.body) for broker, m in await cluster.query_by_key(
                "only-b", "kb")] == [(B, b"only")]
            assert await cluster.unknown("only-b", 0) is None
            assert await cluster.unknown("nope") == "unknown topic 'nope'; topics: only-b, orders"
            # The bucket exporter's pass: every broker's queues, each broker's writer.
            watch = BucketWatch(cluster, min_interval=0)
            figures = await watch.refresh()
            assert sorted((f.broker, f.topic, f.queue_id, f.max_offset) for f in figures) == [
                (A, "orders", 0, 3), (A, "orders", 1, 1), (B, "only-b", 0, 1),
                (B, "orders", 0, 3)]
            assert [(w[0], w[2]) for w in watch.metrics.writers] == [(A, "closed"), (B, "live")]
        assert await store.list_all("") != []  # the backend given is not closed
        # A selection reads its brokers only, and names where the rest is.
        async with ReadOnlyCluster.open(config, store=Listings(store), brokers=[A]) as narrowed:
            assert await narrowed.queues() == QUEUES[:2]
            assert await narrowed.unknown("only-b") == (
                "unknown topic 'only-b'; topics: orders; broker broker-b has it "
                "(brokers read: broker-a)")
            assert await narrowed.holding("orders", 0) == [A]
        async with ReadOnlyCluster.open(config, store=store, brokers=["broker-c"]) as missing:
            assert await missing.unknown() == \
                "unknown broker 'broker-c'; brokers: broker-a, broker-b"
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("brokers", [["a/b"], [""]])
async def test_a_selection_of_brokers_is_checked(brokers: list[str]) -> None:
    with pytest.raises(ValueError, match="invalid broker"):
        await ReadOnlyCluster.open(small_config(), brokers=brokers)
