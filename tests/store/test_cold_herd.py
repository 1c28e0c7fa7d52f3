"""A cold herd costs what one reader costs: 50 concurrent ``get`` s of one range
of a sealed segment, in a freshly opened store or read-only store, share
every listing, table (footer), head and page read with each other, as their
data GETs already were (issue 39, defect 7)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tests.store.conftest import small_config
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore, ReadOnlyMessageStore
from tieredstore.testing import ForwardingObjectStore

T = TypeVar("T")
HERD = 50
COUNT = 2000


class CountedRequests(ForwardingObjectStore):
    """Counts requests by operation once ``counting``; each takes a little while,
    as over a network (a herd's requests are then in flight together)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.counting = False
        self.requests: Counter[str] = Counter()

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if self.counting:
            self.requests[op] += 1
            await asyncio.sleep(0.002)
        return await call()


def body(i: int) -> bytes:
    return b"m%05d" % i * 20


async def stored(mode: str) -> tuple[MemoryObjectStore, dict[str, Any]]:
    """A queue of several sealed segments, written and closed, and opened and
    closed again (a restart: its open segments then end in fence entries,
    which a read-only view HEADs)."""
    backend = MemoryObjectStore()
    config = {"write_mode": mode, "gc_interval": 0}
    store = await AsyncMessageStore.open(small_config(**config), store=backend)
    await store.append_batch("t", 0, [body(i) for i in range(COUNT)])
    await store.flush()
    await store.close()
    reopened = await AsyncMessageStore.open(small_config(**config), store=backend)
    await reopened.wait_idle()  # its claims, in the background: the fence entries
    await reopened.close()
    return backend, config


async def opened(backend: ObjectStore, config: dict[str, Any], *, read_only: bool
                 ) -> AsyncMessageStore | ReadOnlyMessageStore:
    if read_only:
        return await AsyncMessageStore.open_read_only(small_config(**config), store=backend)
    return await AsyncMessageStore.open(small_config(**config), store=backend)


async def herd_cost(backend: MemoryObjectStore, config: dict[str, Any], readers: int, *,
                    read_only: bool) -> Counter[str]:
    """The requests ``readers`` concurrent gets of offsets 10-14 cost in a store
    just opened on ``backend``, every one checked."""
    counted = CountedRequests(backend)
    store = await opened(counted, config, read_only=read_only)
    try:
        if isinstance(store, AsyncMessageStore):
            await store.wait_idle()  # its claims of the queues listed, in the background
        counted.counting = True
        got = await asyncio.gather(*(store.get("t", 0, 10, 5) for _ in range(readers)))
        counted.counting = False
    finally:
        await store.close()
    for messages in got:
        assert [(m.offset, m.body) for m in messages] == [(i, body(i)) for i in range(10, 15)]
    return counted.requests


@pytest.mark.parametrize("read_only", [False, True], ids=["store", "read-only"])
@pytest.mark.parametrize("mode", ["log", "direct"])
async def test_a_cold_herd_of_gets_costs_what_one_get_costs(mode: str, read_only: bool
                                                            ) -> None:
    backend, config = await stored(mode)
    one = await herd_cost(backend, config, 1, read_only=read_only)
    herd = await herd_cost(backend, config, HERD, read_only=read_only)
    assert set(one) == ({"list", "get", "head"} if read_only else {"list", "get"}), one
    for op in ("list", "get", "head"):
        assert herd[op] <= one[op], (
            f"{HERD} concurrent gets cost {dict(herd)}, one get {dict(one)}: the herd's "
            f"{op} requests were not shared")
