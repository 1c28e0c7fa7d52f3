"""The one registry's names and what the newer series count: Prometheus naming
(prefix, base units, ``_total`` on counters), no secret in any label, fetch bytes
per topic, offload counters (a ledger host serves them), ``verify --metrics-port``,
and the timestamps a queue summary reads from consume-queue units."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.ledger.helpers import make_ledger, payloads
from tests.servers import free_port
from tests.store.conftest import small_config
from tieredstore.ledger import (
    LedgerHost,
    LocalLedgerStore,
    OffloadExists,
    OffloadOptions,
    Position,
    SegmentLedgerOffloader,
)
from tieredstore.metrics import RefreshMetrics, TieredStoreCollector
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import (
    AsyncMessageStore,
    ReadOnlyCluster,
    scrape_bucket,
    summarize,
    verify_store,
)

SECRET = "wJalrXUtnFEMI-not-a-real-secret"
UNITS = ("_bytes", "_seconds", "_dollars")  # a name that measures says its unit last


def families(collector: TieredStoreCollector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples if s.name == name}


async def test_every_name_follows_prometheus_conventions_and_no_label_holds_a_secret(
        tmp_path: Path) -> None:
    config = small_config(gc_interval=0, s3_secret_access_key=SECRET, s3_access_key_id="AKIA1")
    async with await AsyncMessageStore.open(config, store=MemoryObjectStore()) as store:
        await store.append("orders", 1, b"x" * 300)
        await store.flush()
        assert [m.body for m in await store.get("orders", 1, 0, 10)] == [b"x" * 300]
        collector = store.metrics_collector()
        offloader = SegmentLedgerOffloader(MemoryObjectStore())
        full = TieredStoreCollector(
            store=collector.store, fetcher=collector.fetcher, pool=collector.pool,
            queues=collector.queues, prices=collector.prices, offload=offloader.metrics,
            refresh=RefreshMetrics())
        text = families(full)
        await offloader.close()
    assert SECRET not in text and "AKIA1" not in text
    seen = list(text_string_to_metric_families(text))
    names = {f.name for f in seen}
    for wanted in ("tieredstore_queue_stored_bytes", "tieredstore_queue_copy_lag_bytes",
                   "tieredstore_queue_copy_lag_segments", "tieredstore_fetcher_served_bytes",
                   "tieredstore_offload_ledgers", "tieredstore_offload_bytes",
                   "tieredstore_offload_failures", "tieredstore_store_request_cost_dollars",
                   "tieredstore_bucket_refresh_requests"):
        assert wanted in names, f"{wanted} missing from {sorted(names)}"
    for family in seen:
        assert family.name.startswith("tieredstore_"), family.name
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith(("_total", "_created")), sample.name
            else:
                assert not sample.name.endswith("_total"), sample.name
        for bad in ("_ms", "_millis", "_kib", "_mib", "milliseconds"):
            assert bad not in family.name, f"{family.name}: not in base units"
        if any(word in family.name for word in ("bytes", "seconds", "dollars")):
            assert family.name.endswith(UNITS) or family.type == "histogram", family.name
        for sample in family.samples:
            assert set(sample.labels) <= {"topic", "queue", "op", "error", "priority",
                                          "prefix", "tier", "result", "source", "class",
                                          "le"}, (sample.name, sample.labels)


async def test_fetch_bytes_are_counted_per_topic_and_source() -> None:
    config = small_config(gc_interval=0)
    async with await AsyncMessageStore.open(config, store=MemoryObjectStore()) as store:
        for i in range(20):
            await store.append("a", 0, bytes([i]) * 500)
            await store.append("b", 0, bytes([i]) * 100)
        await store.flush()
        await store.wait_idle()
        assert len(await store.get("a", 0, 0, 20)) == 20
        assert len(await store.get("b", 0, 0, 20)) == 20
        text = families(store.metrics_collector())
        snap = store.snapshot()["fetcher"]
    fetched = values(text, "tieredstore_fetcher_served_bytes_total")
    by_topic = {t: sum(v for k, v in fetched.items() if ("topic", t) in k) for t in "ab"}
    assert by_topic["a"] >= 20 * 500 and by_topic["b"] >= 20 * 100
    assert by_topic["a"] > by_topic["b"]
    assert {dict(k)["source"] for k in fetched} <= {"memory", "disk", "store"}
    assert sum(fetched.values()) == sum(snap[f"bytes_from_{s}"] for s in ("memory", "disk",
                                                                         "store"))


async def test_offload_counters_count_completed_ledgers_and_failures(tmp_path: Path) -> None:
    ledgers = LocalLedgerStore(tmp_path / "ledgers", fsync=False)
    entries = payloads([1000, 0, 5000, 70_000] * 5, seed=3)
    source = await make_ledger(ledgers, entries)
    bucket = MemoryObjectStore()
    offloader = SegmentLedgerOffloader(bucket, options=OffloadOptions())
    try:
        await offloader.offload(source, uuid.uuid4(), {})
        await offloader.offload(source, uuid.UUID(int=1), {})
        with pytest.raises(OffloadExists):  # the same attempt again: refused, a failure
            await offloader.offload(source, uuid.UUID(int=1), {})
        text = families(TieredStoreCollector(offload=offloader.metrics))
    finally:
        await offloader.close()
        await bucket.close()
    assert values(text, "tieredstore_offload_ledgers_total")[()] == 2
    assert values(text, "tieredstore_offload_entries_total")[()] == 2 * len(entries)
    assert values(text, "tieredstore_offload_bytes_total")[()] == 2 * sum(map(len, entries))
    assert values(text, "tieredstore_offload_failures_total")[()] == 1


async def test_verify_serves_its_requests_on_the_metrics_port_while_it_runs() -> None:
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0)
    async with await AsyncMessageStore.open(config, store=bucket) as store:
        for i in range(30):
            await store.append("t", i % 2, b"m" * 200)
        await store.flush()
    port = free_port()
    seen: list[str] = []

    def scrape(n: int) -> None:  # called on the loop while verify reads
        if not seen:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                seen.append(r.read().decode())

    report = await verify_store(bucket, config.replace(metrics_port=port), on_bytes=scrape)
    assert report.error_count == 0 and report.messages == 30
    assert seen, "verify read no bytes"
    requests = values(seen[0], "tieredstore_store_requests_total")
    assert requests[(("op", "list"),)] > 0
    assert "tieredstore_store_request_cost_dollars_total" in seen[0]
    with pytest.raises(urllib.error.URLError):  # served while it runs only
        await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{port}/metrics",
                                timeout=5)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


async def test_a_ledger_host_serves_its_offload_counters_on_the_metrics_port(
        tmp_path: Path) -> None:
    """A LedgerHost, as a message store, serves its collector at ``metrics_port`` from
    create to close: the bucket's requests and the offloader's counters, registered by
    no one."""
    port = free_port()
    config = small_config(gc_interval=0, metrics_port=port, ledger_max_entries=4)
    bucket = MemoryObjectStore()
    host = LedgerHost.create(config, bucket, str(tmp_path / "ledgers"))
    try:
        assert host.metrics_port == port
        ml = await host.open("t/n/persistent/m")
        await ml.add_entries([b"e" * 100] * 10)  # ledgers 0 and 1 closed at 4 entries
        await ml.offload_prefix(Position(2, 0))
        await ml.close()
        text = await asyncio.to_thread(scrape, port)
    finally:
        await host.close()
    assert values(text, "tieredstore_offload_ledgers_total")[()] == 2
    assert values(text, "tieredstore_offload_entries_total")[()] == 8
    assert values(text, "tieredstore_offload_bytes_total")[()] == 800
    assert values(text, "tieredstore_offload_failures_total")[()] == 0
    assert values(text, "tieredstore_store_requests_total")[(("op", "put"),)] > 0
    assert "tieredstore_store_request_cost_dollars_total" in text
    with pytest.raises(urllib.error.URLError):  # served until close only
        await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{port}/metrics",
                                timeout=5)
    quiet = LedgerHost.create(config.replace(metrics_port=0), bucket,
                              str(tmp_path / "ledgers"))
    assert quiet.metrics_port is None  # no endpoint unless asked for
    await quiet.close()


async def test_a_summary_reads_the_message_timestamps_from_consume_queue_units() -> None:
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0)
    async with await AsyncMessageStore.open(config, store=bucket) as store:
        for i in range(40):
            await store.append("t", 0, b"m" * 700, timestamp=1_700_000_000_000 + 7 * i)
        await store.flush()
        messages = await store.get("t", 0, 0, 40)
    got = await summarize(bucket, config, "t", 0)
    assert (got.oldest_ms, got.newest_ms) == (messages[0].store_timestamp,
                                              messages[-1].store_timestamp)
    assert (got.oldest_ms, got.newest_ms) == (1_700_000_000_000, 1_700_000_000_000 + 7 * 39)


async def test_the_exporter_gives_message_times_in_seconds_exactly() -> None:
    """ms / 1000, not ms * 0.001: 1700000000018 ms is 1700000000.018 s, never
    1700000000.0180001 (what the scale by 0.001 gave)."""
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0)
    async with await AsyncMessageStore.open(config, store=bucket) as store:
        for ms in (1_700_000_000_008, 1_700_000_000_018):
            await store.append("t", 0, b"m", timestamp=ms)
        await store.flush()
    reader = await ReadOnlyCluster.open(config, store=bucket)
    try:
        got = {m.name: [s.value for s in m.samples] for m in await scrape_bucket(reader)}
    finally:
        await reader.close()
    assert got["tieredstore_queue_oldest_message_timestamp_seconds"] == [1700000000.008]
    assert got["tieredstore_queue_newest_message_timestamp_seconds"] == [1700000000.018]
