"""The metrics a host serves: the store's collector on the host's registry, and the
store's own HTTP endpoint, whose per-queue gauges move as a producer runs."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import free_port
from tests.store.conftest import small_config
from tieredstore.errors import ConfigError
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import AsyncMessageStore


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return parse(reply.read().decode())


def queue(name: str, topic: str, queue_id: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (f"tieredstore_queue_{name}", (("queue", str(queue_id)), ("topic", topic)))


async def test_the_endpoint_shows_each_queue_moving_as_a_producer_runs() -> None:
    port = free_port()
    config = small_config(metrics_port=port, group_commit_interval=60.0, gc_interval=0)
    store = await AsyncMessageStore.open(config, store=MemoryObjectStore())
    assert store.metrics_port == port
    try:
        for _ in range(10):
            await store.append("t", 0, b"x" * 100)
            await store.append("t", 1, b"y" * 100)
        before = await asyncio.to_thread(scrape, port)
        assert before[queue("max_offset", "t", 0)] == 10
        assert before[queue("commit_offset", "t", 0)] == 0
        assert before[queue("copy_lag_bytes", "t", 0)] > 10 * 100
        assert before[queue("copy_lag_segments", "t", 0)] >= 1
        stored_before = before[queue("stored_bytes", "t", 0)]
        assert before[("tieredstore_queues", ())] == 2
        for _ in range(5):
            await store.append("t", 0, b"x" * 100)
        await store.flush()
        after = await asyncio.to_thread(scrape, port)
        assert after[queue("max_offset", "t", 0)] == 15
        assert after[queue("max_offset", "t", 1)] == 10
        assert after[queue("commit_offset", "t", 0)] == 15
        assert after[queue("copy_lag_bytes", "t", 0)] == 0
        assert after[queue("copy_lag_segments", "t", 0)] == 0
        assert after[queue("stored_bytes", "t", 0)] >= stored_before + 15 * 100
        puts = sum(v for (name, labels), v in after.items()
                   if name == "tieredstore_store_requests_total" and ("op", "put") in labels)
        assert puts > 0
        cost = after[("tieredstore_store_request_cost_dollars_total", (("class", "put"),))]
        assert cost >= puts * 0.005 / 1000
    finally:
        await store.close()
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(scrape, port)


async def test_a_host_registers_the_collector_on_its_own_registry() -> None:
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=MemoryObjectStore())
    try:
        await store.append("orders", 3, b"hello")
        await store.flush()
        registry = CollectorRegistry()
        registry.register(store.metrics_collector(const_labels={"broker": "b1"}))
        got = parse(generate_latest(registry).decode())
        key = ("tieredstore_queue_commit_offset",
               (("broker", "b1"), ("queue", "3"), ("topic", "orders")))
        assert got[key] == 1
        assert store.metrics_port is None  # no endpoint unless asked for
    finally:
        await store.close()


async def test_a_port_in_use_is_an_error_naming_metrics_port() -> None:
    backend = MemoryObjectStore()
    first = await AsyncMessageStore.open(small_config(metrics_port=free_port(), gc_interval=0),
                                         store=backend)
    try:
        port = first.metrics_port
        assert port is not None
        with pytest.raises(ConfigError, match=f"metrics_port.*127.0.0.1:{port}"):
            await AsyncMessageStore.open(small_config(metrics_port=port, gc_interval=0),
                                         store=MemoryObjectStore())
    finally:
        await first.close()
