"""A clean close hands its queues over (docs/writers.md): the next open finds the
handover the newest entry below its fence and opens those queues unclaimed (no
head version, no fence: no PUT); a store that opened since, or a close that
failed, leaves every queue to be claimed; a handover whose reply was lost still
stands."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tests.store.conftest import small_config
from tieredstore.errors import TieredStoreError, TransientError
from tieredstore.log.commit.handover import HandoverIndex
from tieredstore.log.index import read_entry
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import ForwardingObjectStore

T = TypeVar("T")
QUEUES = 6
COUNT = 40  # messages a queue: past a chunk, so that each commit log has chunks


class Counted(ForwardingObjectStore):
    """Counts requests by operation while ``counting``."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.counting = False
        self.requests: Counter[str] = Counter()

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if self.counting:
            self.requests[op] += 1
        return await call()


def config(**overrides: Any) -> Any:
    return small_config(gc_interval=0, claim_concurrency=0, heartbeat_interval=0, **overrides)


def body(q: int, i: int) -> bytes:
    return b"q%02d-%05d" % (q, i) * 30


async def write(backend: ObjectStore, start: int = 0, count: int = COUNT) -> AsyncMessageStore:
    store = await AsyncMessageStore.open(config(), store=backend)
    for q in range(QUEUES):
        got = await store.append_batch("t", q, [body(q, i) for i in range(start, start + count)])
        assert list(got) == list(range(start, start + count))
    await store.flush()
    return store


async def handovers(backend: ObjectStore) -> list[frozenset[tuple[str, int]]]:
    """The queues each handover in the broker's log names, oldest first."""
    found = []
    for o in sorted(await backend.list_all(""), key=lambda o: o.key):
        if "/log/log-" in o.key and o.size:
            entry = await read_entry(backend, o.key, o.size)
            if isinstance(entry, HandoverIndex):
                found.append(entry.queues)
    return found


async def first_gets(backend: MemoryObjectStore) -> Counter[str]:
    """The requests of a first get of each queue in a store opened now (each
    queue's messages checked)."""
    counted = Counted(backend)
    store = await AsyncMessageStore.open(config(), store=counted)
    try:
        counted.counting = True
        for q in range(QUEUES):
            got = await store.get("t", q, 0, max_count=COUNT)
            assert [m.body for m in got] == [body(q, i) for i in range(COUNT)]
        counted.counting = False
    finally:
        await store.close()
    return counted.requests


async def test_a_clean_close_hands_its_queues_over() -> None:
    backend = MemoryObjectStore()
    await (await write(backend)).close()
    assert await handovers(backend) == [frozenset(("t", q) for q in range(QUEUES))]
    requests = await first_gets(backend)
    assert requests["put"] == 0 and requests["delete"] == 0, requests  # nothing claimed
    # Written on by the store the queues were handed to, and read back whole.
    store = await write(backend, start=COUNT)
    await store.close()
    store = await AsyncMessageStore.open(config(), store=backend)
    for q in range(QUEUES):
        got = await store.get("t", q, 0, max_count=2 * COUNT)
        assert [m.body for m in got] == [body(q, i) for i in range(2 * COUNT)]
    await store.close()
    assert len(await handovers(backend)) == 4  # every clean close wrote one


async def test_a_store_replaced_before_its_close_hands_nothing_over() -> None:
    backend = MemoryObjectStore()
    old = await write(backend)
    new = await AsyncMessageStore.open(config(), store=backend)
    await old.close()  # its handover meets the newer store's fence: logged, not written
    assert await handovers(backend) == []
    await new.close()


async def test_an_open_since_the_handover_leaves_every_queue_to_be_claimed() -> None:
    """A store opened after the handover (and never closed: a crash) left its
    fence above it: the next open claims every queue it touches."""
    backend = MemoryObjectStore()
    await (await write(backend)).close()
    crashed = await AsyncMessageStore.open(config(), store=backend)
    requests = await first_gets(backend)
    assert requests["put"] >= 3 * QUEUES, requests  # a head version and two fences each
    with contextlib.suppress(TieredStoreError):
        await crashed.close()


HANDOVER_HEADER = b"TSLG\x00\x02\x00\x02"  # version 2, kind 2 (docs/log-objects.md)


class LosesTheHandoversReply(ForwardingObjectStore):
    """The reply to the create of a handover is lost, after it landed, every time."""

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Any = None) -> ObjectInfo:
        info = await self.inner.put(key, data, if_none_match=if_none_match, metadata=metadata)
        if bytes(data[:8]) == HANDOVER_HEADER:
            raise TransientError("reply lost", op="put", key=key)
        return info


async def test_a_handover_whose_reply_was_lost_stands() -> None:
    """The close goes on (logged), and the handover that landed is true."""
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(config(), store=LosesTheHandoversReply(backend))
    for q in range(QUEUES):
        await store.append_batch("t", q, [body(q, i) for i in range(COUNT)])
    await store.close()
    assert await handovers(backend) == [frozenset(("t", q) for q in range(QUEUES))]
    requests = await first_gets(backend)
    assert requests["put"] == 0, requests
