"""Fetcher snapshot and the Prometheus collector on a registry passed in."""

from __future__ import annotations

import random

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tieredstore.fetcher import Fetcher
from tieredstore.metrics import TieredStoreCollector, register_metrics
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath

KiB = 1024
PATH = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)


async def busy_fetcher() -> tuple[MemoryObjectStore, Fetcher, bytes]:
    """A fetcher that served a sequential scan and a random read."""
    store = MemoryObjectStore()
    data = random.Random(0).randbytes(8 * 64 * KiB)
    writer = await ChunkedSegment.open(store, PATH, options=SegmentOptions(chunk_size=64 * KiB))
    await writer.commit0(0, data)
    fetcher = Fetcher(store)
    segment = await ChunkedSegment.open(store, PATH, options=SegmentOptions(chunk_size=64 * KiB),
                                        reader=fetcher)
    for position in range(0, 2 * 64 * KiB, 16 * KiB):  # units 0 and 1; 2, 3, 4 read ahead
        await segment.read0(position, 16 * KiB)
        await fetcher.wait_idle()
    await segment.read0(7 * 64 * KiB + 5, 10)  # a jump to unit 7: one GET, no read-ahead
    await fetcher.wait_idle()
    return store, fetcher, data


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"no sample {name}{labels} in\n{generate_latest(registry).decode()}"
    return value


async def test_snapshot_counts_tiers_bytes_and_read_ahead() -> None:
    store, fetcher, _ = await busy_fetcher()
    async with fetcher:
        snap = fetcher.snapshot()
        assert snap["reads"] == 9
        assert snap["memory_misses"] == 2 and snap["memory_hits"] == 7
        assert snap["store_gets"] == store.metrics.requests["get"] == 6  # units 0-4 and 7
        assert snap["readahead_hits"] == 1 and snap["prefetch_units"] == 4
        assert snap["bytes_from_memory"] == 7 * 16 * KiB
        assert snap["bytes_from_store"] == 16 * KiB + 10
        assert snap["bytes_from_cache"] == snap["bytes_from_memory"]
        assert sum(snap["read_seconds"]["counts"]) == 9


async def test_prometheus_collector_exports_fetcher_and_store_metrics() -> None:
    store, fetcher, _ = await busy_fetcher()
    async with fetcher:
        registry = CollectorRegistry()
        register_metrics(registry, store=store.metrics, fetcher=fetcher,
                         const_labels={"broker": "b0"})
        assert sample(registry, "tieredstore_fetcher_lookups_total", broker="b0",
                      tier="memory", result="hit") == 7
        assert sample(registry, "tieredstore_fetcher_readahead_hits_total", broker="b0") == 1
        assert sample(registry, "tieredstore_fetcher_served_bytes_total", broker="b0",
                      topic="t", source="store") == fetcher.metrics.bytes_from_store
        assert sample(registry, "tieredstore_fetcher_memory_bytes", broker="b0") \
            == fetcher.memory.nbytes
        assert sample(registry, "tieredstore_fetcher_read_duration_seconds_count",
                      broker="b0") == 9
        assert sample(registry, "tieredstore_store_requests_total", broker="b0",
                      op="get") == 6
        assert sample(registry, "tieredstore_store_received_bytes_total", broker="b0",
                      op="get") == store.metrics.bytes_down["get"]
        assert sample(registry, "tieredstore_store_request_duration_seconds_count",
                      broker="b0", op="get") == 6
        assert "tieredstore_store_request_duration_seconds_bucket" in \
            generate_latest(registry).decode()


def test_nothing_is_registered_globally_and_duplicates_are_refused() -> None:
    names = set(prometheus_client.REGISTRY._names_to_collectors)  # type: ignore[attr-defined]
    assert not {n for n in names if n.startswith("tieredstore")}
    registry = CollectorRegistry()
    store = MemoryObjectStore()
    register_metrics(registry, store=store.metrics)
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(TieredStoreCollector(store=store.metrics))


async def test_pool_metrics_are_exported() -> None:
    from tieredstore.segment.pool import PoolOptions, UploadBufferPool

    store = MemoryObjectStore()
    pool = UploadBufferPool(PoolOptions(budget_bytes=1 << 20, chunk_size=1024))
    segment = await ChunkedSegment.open(
        store, SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0),
        options=SegmentOptions(chunk_size=1024))
    await pool.append(segment, b"x" * 3000)
    await pool.flush()
    registry = CollectorRegistry()
    register_metrics(registry, pool=pool.metrics)
    assert registry.get_sample_value("tieredstore_pool_appended_bytes_total") == 3000
    assert registry.get_sample_value("tieredstore_pool_committed_bytes_total") == 3000
    assert registry.get_sample_value("tieredstore_pool_budget_bytes") == 1 << 20
    assert registry.get_sample_value("tieredstore_pool_commit_duration_seconds_count") == 3
    await pool.close()
