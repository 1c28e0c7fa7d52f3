"""The head's create-if-absent is the compare-and-swap; losers are fenced for good."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.metadata.helpers import LostAnswerStore, record
from tieredstore.metadata import COMMIT_LOG, MetadataFenced, QueueMetadata, QueuePath
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore

QUEUE = QueuePath("root", "t", 0)


async def head_versions(store: ObjectStore) -> list[int]:
    return [int(o.key.rsplit("-", 1)[1]) for o in await store.list_all(QUEUE.heads_prefix)]


async def test_fenced_writer_refuses_without_asking_the_store(fast_store: ObjectStore) -> None:
    a = await QueueMetadata.open(fast_store, QUEUE, writer_id="a")
    await a.append(record(0))
    b = await QueueMetadata.open(fast_store, QUEUE, writer_id="b")
    await b.set_properties(owner="b")
    with pytest.raises(MetadataFenced):
        await a.append(record(1))
    assert a.fenced
    before = fast_store.metrics.total_requests()
    for write in (a.append(record(1)), a.set_properties(x="y"), a.trim(COMMIT_LOG, 100),
                  a.claim()):
        with pytest.raises(MetadataFenced):
            await write
    assert fast_store.metrics.total_requests() == before


async def test_writer_two_versions_behind_is_fenced_although_its_key_was_free(
    fast_store: ObjectStore,
) -> None:
    a = await QueueMetadata.open(fast_store, QUEUE, writer_id="a", page_size=2)
    await a.append(record(0))  # head 1
    b = await QueueMetadata.open(fast_store, QUEUE, writer_id="b")
    for i in range(1, 4):
        await b.append(record(i))  # heads 2, 3, 4; 1 and 2 deleted
    assert await head_versions(fast_store) == [3, 4]
    with pytest.raises(MetadataFenced, match="newer than ours"):
        await a.append(record(1))  # head-2 was free again
    reader = await QueueMetadata.open_read_only(fast_store, QUEUE)
    assert reader.version == 4
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(i) for i in range(4)]
    await b.append(record(4))  # b is unaffected, and sweeps a's stray head away
    assert await head_versions(fast_store) == [4, 5]


async def test_claim_on_open_fences_the_previous_owner_at_once(fast_store: ObjectStore) -> None:
    a = await QueueMetadata.open(fast_store, QUEUE, writer_id="a")
    await a.append(record(0))
    b = await QueueMetadata.open(fast_store, QUEUE, writer_id="b", claim=True)
    assert b.version == 2
    with pytest.raises(MetadataFenced):
        await a.append(record(1))


async def test_racing_writers_exactly_one_wins() -> None:
    store = MemoryObjectStore()
    writers = [await QueueMetadata.open(store, QUEUE, writer_id=f"w{i}") for i in range(4)]
    outcomes = await asyncio.gather(
        *(w.append(record(i)) for i, w in enumerate(writers)), return_exceptions=True
    )
    winners = [i for i, o in enumerate(outcomes) if o is None]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, MetadataFenced) for o in outcomes if o is not None)
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(winners[0])]


async def test_retried_put_whose_first_answer_was_lost_is_not_a_lost_race() -> None:
    store = LostAnswerStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="a", page_size=2)
    await md.append(record(0))
    store.lose_next = True
    await md.append(record(1))  # lands, answer lost, retry finds its own bytes
    assert store.metrics.retries["put"] == 1
    assert not md.fenced
    for i in range(2, 4):  # the page put too
        store.lose_next = i == 2
        await md.append(record(i))
    assert [r async for r in md.records(COMMIT_LOG)] == [record(i) for i in range(4)]


async def test_an_append_equal_to_the_last_record_is_a_retry_and_writes_nothing() -> None:
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="a")
    await md.append(record(0))
    puts = store.metrics.requests["put"]
    await md.append(record(0))
    assert store.metrics.requests["put"] == puts and md.version == 1


class SuccessorBeforePageListing(MemoryObjectStore):
    """Runs ``successor`` once, just before the next listing of a page prefix."""

    successor: Any = None

    async def list_all(self, prefix: str) -> list[ObjectInfo]:
        if self.successor is not None and "/pages/" in prefix:
            successor, self.successor = self.successor, None
            await successor()
        return await super().list_all(prefix)


async def test_vacuum_leaves_a_successors_page_alone() -> None:
    """A vacuum of unreferenced pages claims the queue, lists its pages, deletes
    those its head does not reference. A writer that took the queue over in
    between wrote a page and the head that references it: the page is young,
    and stays (before, the vacuum deleted it: the successor's head named a
    page that was gone)."""
    store = SuccessorBeforePageListing()
    a = await QueueMetadata.open(store, QUEUE, writer_id="a", page_size=2)
    await a.append(record(0))

    async def successor() -> None:
        b = await QueueMetadata.open(store, QUEUE, writer_id="b")
        await b.append_many([record(1), record(2)])  # a page, then the head naming it

    store.successor = successor
    await a.vacuum(unreferenced=True)
    assert store.successor is None, "the successor did not run"
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(i) for i in range(3)]
