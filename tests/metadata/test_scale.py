"""Seed 001's point, measured: 100,000 sealed segments in one queue.

Rolling one more writes a bounded head (and now and then one page), not the
list; opening the queue and finding a record reads the head and one page.
"""

from __future__ import annotations

import time

import pytest

from tests.metadata.helpers import record
from tieredstore.metadata import (
    COMMIT_LOG,
    DEFAULT_PAGE_SIZE,
    QueueMetadata,
    QueuePath,
)
from tieredstore.objectstore import MemoryObjectStore

QUEUE = QueuePath("root", "big", 0)
N = 100_000
KiB = 1024


def bytes_up(store: MemoryObjectStore) -> int:
    return sum(store.metrics.bytes_up.values())


@pytest.mark.slow
async def test_100k_segments_roll_in_kib_and_open_reads_one_page() -> None:
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w")
    started = time.perf_counter()
    assert await md.append_many(record(i) for i in range(N)) == N
    loaded = time.perf_counter() - started
    pages = await store.list_all(QUEUE.pages_prefix(COMMIT_LOG))
    assert len(pages) == (N - 1) // DEFAULT_PAGE_SIZE
    print(f"\nloaded {N} records in {loaded:.1f}s: {len(pages)} pages")

    # Roll with the tail one short of full (the largest head), then the roll
    # that cuts a page: each writes a few KiB, whatever the history.
    tail = len(md.head.files[0].tail)
    for i in range(N, N + DEFAULT_PAGE_SIZE - tail - 1):
        await md.append(record(i))
    rolls = []
    for i in range(N + DEFAULT_PAGE_SIZE - tail - 1, N + DEFAULT_PAGE_SIZE - tail + 1):
        store.metrics.reset()
        await md.append(record(i))
        rolls.append((bytes_up(store), store.metrics.snapshot()["requests"]))
    print(f"roll, full tail: {rolls[0]}; roll cutting a page: {rolls[1]}")
    assert all(up <= 8 * KiB for up, _ in rolls), rolls
    assert rolls[1][1]["put"] == 2 and rolls[0][1]["put"] == 1
    last = N + DEFAULT_PAGE_SIZE - tail

    # A fresh process opens the queue and finds one record each way.
    for lookup in ("base", "message", "time"):
        store.metrics.reset()
        opened = await QueueMetadata.open(store, QUEUE, writer_id="w2")
        target = record(N // 3)
        if lookup == "base":
            found = await opened.find_by_base_offset(COMMIT_LOG, target.base_offset + 5)
        elif lookup == "message":
            found = await opened.find_by_message_offset(COMMIT_LOG, target.last_message_offset)
        else:
            found = await opened.find_by_time(COMMIT_LOG, target.end_timestamp_ms)
        assert found == target
        requests = store.metrics.snapshot()["requests"]
        print(f"open + find by {lookup}: {requests}, {sum(store.metrics.bytes_down.values())} "
              "bytes down")
        assert requests["get"] <= 2, requests  # the head, one page
        assert requests["list"] <= 2, requests  # the heads, the page keys
    assert opened.last_record(COMMIT_LOG) == record(last)
    assert await opened.find_by_base_offset(COMMIT_LOG, record(last).base_offset) == record(last)

    store.metrics.reset()
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert reader.last_record(COMMIT_LOG) == record(last)
    assert store.metrics.snapshot()["requests"] == {"list": 1, "get": 1}
