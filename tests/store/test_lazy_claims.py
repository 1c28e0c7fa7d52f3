"""An open claims no queue: each is claimed at its first write (issue 41,
docs/format.md, "Opening many queues").

What the old writer can still do to a queue the new store has not claimed,
and what the claim does with it: a replaced store's claim of a queue it
never wrote is refused and writes nothing; its chunk that lands on a queue
not claimed is never acknowledged, reads through the new store's view, and
the claim adopts it; a claim whose head create loses its reply settles it
as its own. And the open's cost does not grow with the queues."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tests.store.conftest import small_config
from tieredstore.errors import SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import Chokepoint, MemoryObjectStore, ObjectStore, RetryPolicy
from tieredstore.store import AsyncMessageStore
from tieredstore.store.writers import WriterReplaced
from tieredstore.testing import (
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    ForwardingObjectStore,
)

T = TypeVar("T")
FENCED = (SegmentFenced, MetadataFenced)


class Recorded(ForwardingObjectStore):
    """Records each request as (operation, key)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.requests: list[tuple[str, str]] = []

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        self.requests.append((op, key))
        return await call()

    def writes(self) -> list[tuple[str, str]]:
        return [(op, key) for op, key in self.requests
                if op not in ("get", "get_object", "head", "list", "list_pages",
                              "list_multipart_uploads")]


async def bodies(store: AsyncMessageStore, topic: str, queue_id: int) -> list[bytes]:
    """Every message of the queue, a ``get`` at a time (a view's ``get`` may stop
    at the consume queue's end, the next one reads on)."""
    out: list[bytes] = []
    end = await store.max_offset(topic, queue_id)
    while len(out) < end:
        got = await store.get(topic, queue_id, len(out))
        assert got, (len(out), end)
        out += [m.body for m in got]
    return out


async def test_an_open_costs_the_same_for_many_queues_as_for_few() -> None:
    """No queue is listed, read or written at the open: its requests do not
    grow with the queues (the heads' listing is one page here)."""
    costs = []
    for queues in (4, 64):
        bucket = MemoryObjectStore()
        store = await AsyncMessageStore.open(small_config(gc_interval=0), store=bucket)
        for q in range(queues):
            await store.append("t", q, b"m%d" % q)
        await store.close()
        watched = Recorded(bucket)
        again = await AsyncMessageStore.open(small_config(gc_interval=0), store=watched)
        costs.append(Counter(op for op, key in watched.requests  # not the log's indexes
                             if "/log/" not in key or not op.startswith("get")))
        assert not [k for _, k in watched.requests if "/t/" in k], "a queue was touched"
        for q in range(queues):  # each reads back through the bucket, unclaimed
            assert [m.body for m in await again.get("t", q, 0)] == [b"m%d" % q]
        assert not [k for op, k in watched.writes() if "/t/" in k], "a read wrote"
        await again.close()
    assert costs[0] == costs[1], costs


@pytest.mark.parametrize("mode", ["log", "direct"])
async def test_a_replaced_store_claims_no_queue_it_did_not_write(mode: str) -> None:
    """A store that listed a queue at its open and never wrote it is replaced:
    its first write there is refused (``WriterReplaced``) and writes nothing
    under the queue; the newer store appends after what was there."""
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0, write_mode=mode)
    first = await AsyncMessageStore.open(config, store=bucket)
    await first.append("t", 0, b"one")
    await first.close()
    watched = Recorded(bucket)
    old = await AsyncMessageStore.open(config, store=watched)  # lists t/0, claims nothing
    new = await AsyncMessageStore.open(config, store=bucket)
    watched.requests.clear()
    with pytest.raises(WriterReplaced):
        await old.append("t", 0, b"late")
    assert not [k for _, k in watched.writes() if "/t/" in k], watched.writes()
    assert await new.append("t", 0, b"two") == 1
    await new.flush()
    assert await bodies(new, "t", 0) == [b"one", b"two"]
    await new.close()
    with contextlib.suppress(*FENCED):  # nothing to flush: nothing to fence
        await old.close()


@pytest.mark.parametrize("mode", ["log", "direct"])
async def test_an_old_writers_chunk_on_a_queue_not_claimed_is_adopted_not_acknowledged(
        mode: str) -> None:
    """The old writer holds t/0 (it wrote it) and the new store has not claimed
    it: the old writer's next chunk lands there (in the log mode it may not:
    its chunk goes over the log pieces before it), but its flush fails (the log
    fence, or in the direct mode the look). The new store reads the message
    through its view, and its claim adopts it: its own append goes after it."""
    bucket = MemoryObjectStore()
    # 300-byte commits go to their segment as chunks in the log mode too.
    config = small_config(gc_interval=0, write_mode=mode, direct_commit_size=256)
    old = await AsyncMessageStore.open(config, store=bucket)
    await old.append("t", 0, b"one")
    await old.flush()
    new = await AsyncMessageStore.open(config, store=bucket)
    late = b"L" * 300
    assert await old.append("t", 0, late) == 1
    with pytest.raises(FENCED):
        await old.flush()
    got = await bodies(new, "t", 0)
    assert got == [b"one", late] or (mode == "log" and got == [b"one"]), got
    assert await new.commit_offset("t", 0) == len(got)
    assert await new.append("t", 0, b"two") == len(got)  # its claim adopted the chunk
    await new.flush()
    assert await bodies(new, "t", 0) == [*got, b"two"]
    with pytest.raises(FENCED):  # nothing more of the old writer lands
        await old.append("t", 0, b"after the claim")
        await old.flush()
    await new.close()
    with pytest.raises(FENCED):
        await old.close()
    again = await AsyncMessageStore.open(config, store=bucket)
    assert await bodies(again, "t", 0) == [*got, b"two"]
    await again.close()


async def test_a_claim_whose_head_create_lost_its_reply_settles_it_as_its_own() -> None:
    """The claim's first write is the head version: its create lands and the
    reply is lost; the retry meets the key taken, finds its own session there,
    and the claim goes on (no second version, no fence of its own)."""
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0)
    first = await AsyncMessageStore.open(config, store=bucket)
    await first.append("t", 0, b"one")
    await first.close()
    faulty = FaultyObjectStore(
        bucket, FaultSchedule(seed=1, rate=1.0, kinds=frozenset({FaultKind.REPLY_LOST}),
                              ops=frozenset({"put"}), max_faults=1),
        chokepoint=Chokepoint(RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0,
                                          timeout=30.0)), enabled=False)
    store = await AsyncMessageStore.open(config, store=faulty)
    faulty.enabled = True
    assert await store.append("t", 0, b"two") == 1
    faulty.enabled = False
    assert [(f.op, "/heads/" in f.key) for f in faulty.log] == [("put", True)], faulty.log
    await store.flush()
    assert await bodies(store, "t", 0) == [b"one", b"two"]
    await store.close()
    again = await AsyncMessageStore.open(config, store=bucket)
    assert await bodies(again, "t", 0) == [b"one", b"two"]
    assert await again.append("t", 0, b"three") == 2
    await again.close()


async def test_reads_of_a_queue_not_claimed_see_the_old_writers_tail(
        ) -> None:
    """``max_offset`` of a queue not claimed lists it again: a record the old
    writer's chunk landed after the open is counted, never one it did not."""
    bucket = MemoryObjectStore()
    config: dict[str, Any] = {"gc_interval": 0, "write_mode": "direct"}
    old = await AsyncMessageStore.open(small_config(**config), store=bucket)
    await old.append("t", 0, b"one")
    await old.flush()
    new = await AsyncMessageStore.open(small_config(**config), store=bucket)
    assert await new.max_offset("t", 0) == 1
    await old.append("t", 0, b"two")
    with pytest.raises(WriterReplaced):
        await old.flush()  # landed, not acknowledged
    assert await new.max_offset("t", 0) == 2
    assert sorted(new.queues()) == [("t", 0)]
    await new.close()
    with pytest.raises(FENCED):
        await old.close()


async def test_retention_reaches_a_queue_the_open_did_not_claim() -> None:
    """A quiet queue nothing writes after a restart still expires: retention
    claims the queues not claimed yet before it runs."""
    bucket = MemoryObjectStore()
    config = small_config(gc_interval=0, commit_log_max_size=8 * 1024)
    t0 = 1_700_000_000_000
    first = await AsyncMessageStore.open(config, store=bucket)
    for i in range(200):  # rolled consume-queue (64 units) and commit-log segments
        await first.append("t", 0, b"m" * 1000, timestamp=t0 + i * 1000)
    await first.close()
    again = await AsyncMessageStore.open(config, store=bucket)
    assert await again.min_offset("t", 0) == 0
    assert await again.delete_expired(now=t0 / 1000 + 150 + 72 * 3600) > 0
    assert await again.min_offset("t", 0) > 0
    await again.close()
