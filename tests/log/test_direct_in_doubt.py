"""Issue 32 review: a commit of ``direct_commit_size`` or more whose answer was
lost past the chokepoint's retries (the pool's own retry, ``retry_direct``)
goes to its segment again, never into a log object, with log pieces before it
or not, whether or not the lost create landed; and a log object in doubt is
settled before the next commit of its segment goes to the segment. Every
message reads back once, after retries, a close, a roll and a reopen."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import pytest

from tests.log.test_log_mode import KiB, LoseLogReplies, log_config, read_all
from tieredstore.errors import RequestTimeout
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.segment.pool import CommitRetriesExhausted
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import ForwardingObjectStore

CONFIG = log_config(chunk_size=8 * KiB, direct_commit_size=2 * KiB,
                    commit_log_max_size=16 * KiB, retry_max_attempts=1)


class LoseChunkAnswers(ForwardingObjectStore):
    """The next ``left`` creates of commit-log chunks fail without an answer,
    after taking effect if ``land``."""

    def __init__(self, inner: ObjectStore, land: bool) -> None:
        super().__init__(inner)
        self.left = 0
        self.land = land

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        if self.left and "/commitlog/" in key and "/chunk-" in key and len(data):
            self.left -= 1
            if self.land:
                await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
            raise RequestTimeout(f"answer to PUT {key} lost")
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


async def flush_until_it_lands(store: AsyncMessageStore) -> None:
    for _ in range(6):
        with contextlib.suppress(CommitRetriesExhausted):
            await store.flush()
            return
    raise AssertionError("the flush never landed")


async def roll_and_reopen(store: AsyncMessageStore, inner: ObjectStore,
                          sent: list[bytes]) -> None:
    """Past the segment's size (it rolls, seals, merges), then a reopen: every
    message once."""
    for i in range(30):
        await store.append("t", 0, bytes([i]) * 1000)
        sent.append(bytes([i]) * 1000)
        if i % 3 == 2:
            await store.flush()
    assert await read_all(store, 0) == sent
    await store.close()
    store = await AsyncMessageStore.open(CONFIG, store=inner)
    assert await read_all(store, 0) == sent
    await store.close()


@pytest.mark.parametrize("pieces_before", [False, True], ids=["plain", "over-the-log"])
@pytest.mark.parametrize("land", [False, True], ids=["not-landed", "landed"])
@pytest.mark.parametrize("closed", [False, True], ids=["retried", "closed-in-doubt"])
async def test_a_direct_chunk_in_doubt_is_sent_to_its_segment_again(
        pieces_before: bool, land: bool, closed: bool) -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    backend = LoseChunkAnswers(inner, land)
    store = await AsyncMessageStore.open(CONFIG, store=backend)
    sent: list[bytes] = []
    if pieces_before:  # a small flush: a log piece before the chunk
        sent.append(b"p" * 100)
        await store.append("t", 0, sent[-1])
        await store.flush()
    acked = len(sent)
    for i in range(3):  # 3 KiB: a partial chunk of at least direct_commit_size
        sent.append(bytes([65 + i]) * 1000)
        await store.append("t", 0, sent[-1])
    backend.left = 3
    with pytest.raises(CommitRetriesExhausted):
        await store.flush()
    sent.append(b"s" * 300)  # a small commit behind it: the log, once the chunk stands
    await store.append("t", 0, sent[-1])
    if closed:
        with contextlib.suppress(CommitRetriesExhausted):
            await store.close()
        store = await AsyncMessageStore.open(CONFIG, store=inner)
        got = await read_all(store, 0)  # what was not acknowledged may be there, once
        assert len(got) >= acked and got == sent[:len(got)]
        sent = got
    else:
        await flush_until_it_lands(store)
        backend.left = 0
    assert await read_all(store, 0) == sent
    await roll_and_reopen(store, inner, sent)


async def test_a_log_object_in_doubt_is_settled_before_a_direct_chunk_after_it() -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    backend = LoseLogReplies(inner, n=0)
    store = await AsyncMessageStore.open(CONFIG, store=backend)
    sent = [b"p" * 100]
    await store.append("t", 0, sent[0])
    backend.left = 2
    with pytest.raises(CommitRetriesExhausted):
        await store.flush()  # the log piece in doubt
    for i in range(3):  # then 3 KiB behind it: the retry of the piece goes first
        sent.append(bytes([65 + i]) * 1000)
        await store.append("t", 0, sent[-1])
    await flush_until_it_lands(store)
    assert await read_all(store, 0) == sent
    await roll_and_reopen(store, inner, sent)
