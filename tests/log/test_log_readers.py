"""Readers beside a log-mode writer: the consume queue is listed after a load of
the broker's log, and a unit it holds may point into commit-log bytes a newer
log object holds (the consume queue's segment rolled, so its bytes moved into
chunks; the commit log's stayed in the log). ``verify`` and the read-only store
must find those bytes, not report them missing.

The writer here goes on exactly while the reader lists a consume queue: the
race the live-reader test met once in 28 runs, made certain.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from tests.log.test_log_mode import body, log_config, until
from tests.store.conftest import KiB
from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.store import AsyncMessageStore, verify_store
from tieredstore.testing import ForwardingObjectStore

UNITS_PER_SEGMENT = 64
STORE_PREFIX = "tieredstore/"  # the default key prefix's listing: every key of the store


def config_() -> TieredStoreConfig:
    """Commit-log bytes stay in the log (large chunks); a consume-queue segment
    rolls every 64 units, which moves its bytes into a chunk."""
    config: TieredStoreConfig = log_config(
        chunk_size=64 * KiB, commit_log_max_size=1024 * KiB,
        consume_queue_max_size=32 * UNITS_PER_SEGMENT, log_compact_age=3600.0)
    return config


class WritesWhileListed(ForwardingObjectStore):
    """Runs ``between`` before the first ``times`` listings of a consume queue's
    keys (``whole``: of the prefix of all its segments, or of the whole store,
    which ``verify`` takes every queue's consume queue from)."""

    def __init__(self, inner: ObjectStore, between: Callable[[], Awaitable[None]], *,
                 whole: bool, times: int) -> None:
        super().__init__(inner)
        self.between = between
        self.whole = whole
        self.times = times

    async def _pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        listed = prefix.endswith("/consumequeue/") or prefix == STORE_PREFIX if self.whole \
            else "/consumequeue/" in prefix
        if listed and self.times > 0:
            self.times -= 1
            await self.between()
        async for page in self.inner.list_pages(prefix):
            yield page

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        return self._pages(prefix)


async def _consume_queue_objects(backend: ObjectStore) -> int:
    """Consume-queue objects holding bytes (chunks, merged segments)."""
    return sum(1 for o in await backend.list_all("") if "/consumequeue/" in o.key and o.size)


@dataclass
class Writer:
    """A log-mode writer that has written a consume-queue segment; ``write``
    writes one more, flushed, and waits until its roll is compacted."""

    backend: ObjectStore
    store: AsyncMessageStore
    written: int = 0

    @classmethod
    async def open(cls, backend: ObjectStore) -> Writer:
        writer = cls(backend, await AsyncMessageStore.open(config_(), store=backend))
        await writer.write()
        return writer

    async def write(self) -> None:
        before = await _consume_queue_objects(self.backend)
        for _ in range(UNITS_PER_SEGMENT + 1):
            await self.store.append("t", 0, body(0, self.written))
            self.written += 1
        await self.store.flush()

        async def compacted() -> bool:
            return await _consume_queue_objects(self.backend) > before
        await until(compacted)


async def test_verify_finds_commit_log_bytes_a_newer_log_object_holds() -> None:
    backend = MemoryObjectStore()
    writer = await Writer.open(backend)
    # Both looks verify takes (the second after errors) meet the writer.
    report = await verify_store(WritesWhileListed(backend, writer.write, whole=True, times=2),
                                config_())
    problems = [e for c in report.queues for e in c.errors]
    assert problems == []
    check = report.queues[0]
    assert check.messages + check.undispatched >= 2 * (UNITS_PER_SEGMENT + 1)
    await writer.store.close()


async def test_a_read_only_store_finds_commit_log_bytes_a_newer_log_object_holds() -> None:
    backend = MemoryObjectStore()
    writer = await Writer.open(backend)
    reader = await AsyncMessageStore.open_read_only(
        config_(), store=WritesWhileListed(backend, writer.write, whole=False, times=1))
    got = await reader.get("t", 0, 0, max_count=1000)
    while len(got) < 2 * UNITS_PER_SEGMENT:  # a read stops at a segment's end
        more = await reader.get("t", 0, len(got), max_count=1000)
        assert more, f"{len(got)} messages read back"
        got += more
    assert [m.body for m in got] == [body(0, i) for i in range(len(got))]
    await reader.close()
    await writer.store.close()


class CountsLogListings(ForwardingObjectStore):
    """Counts the listings of the broker's log."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.log_listings = 0

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        if prefix.endswith("/log/"):
            self.log_listings += 1
        return self.inner.list_pages(prefix)


async def test_first_reads_of_many_queues_share_loads_of_the_log() -> None:
    """A read-only store's first read of each queue opens its view on a load
    of the log begun after the call; views opening together share one (a load
    a queue made the first reads of N queues cost N loads of every index)."""
    backend = MemoryObjectStore()
    writer = await AsyncMessageStore.open(config_(), store=backend)
    queues = 64
    for q in range(queues):
        await writer.append("t", q, body(q, 0))
    await writer.flush()
    await writer.close()
    counted = CountsLogListings(backend)
    reader = await AsyncMessageStore.open_read_only(config_(), store=counted)
    got = await asyncio.gather(*(reader.get("t", q, 0) for q in range(queues)))
    assert [[m.body for m in g] for g in got] == [[body(q, 0)] for q in range(queues)]
    assert 1 <= counted.log_listings <= 2, counted.log_listings
    # A later read past what a view saw loads the log again: it follows a writer.
    assert await reader.get("t", 0, 1) == []
    assert counted.log_listings >= 2
    await reader.close()
