"""Issue 32 review (bytes once): the new writes against lost answers. A roll's
tail, which now goes to its segment as a chunk whatever its length (flush
``last``; with a log piece before it, a chunk over the log), and a chunk
joined with the remainder behind it (``join_tail``, up to a chunk and
``direct_commit_size``), whose create's answer is lost after it landed or
not: the flush raises, the next one (or the roll repeated) settles it, and
every message reads back once, then through more rolls and a reopen."""

from __future__ import annotations

import pytest

from tests.log.test_direct_in_doubt import (
    CONFIG,
    LoseChunkAnswers,
    flush_until_it_lands,
    roll_and_reopen,
)
from tests.log.test_log_mode import data_chunks, read_all
from tieredstore.errors import CommitFailed
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.segment.pool import CommitRetriesExhausted
from tieredstore.sizes import KiB
from tieredstore.store import AsyncMessageStore


@pytest.mark.parametrize("land", [False, True], ids=["not-landed", "landed"])
@pytest.mark.parametrize("case", ["roll-tail", "seal-over-log", "joined-chunk"])
async def test_a_new_chunk_in_doubt_is_settled_and_nothing_is_lost(case: str, land: bool
                                                                   ) -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    backend = LoseChunkAnswers(inner, land)
    store = await AsyncMessageStore.open(CONFIG, store=backend)
    sent: list[bytes] = []
    # roll-tail: 15 KiB of a 16 KiB segment, the last two flushes small (a log
    # piece), a 300-byte tail, then past the segment's size: the roll's tail is
    # a chunk over the log, under direct_commit_size. seal-over-log: the tail is
    # flushed into the log too, and the seal moves the pieces into a chunk.
    # joined-chunk: a chunk and 1 KiB behind it, one flush: one chunk of 9 KiB.
    rolls = case != "joined-chunk"
    sizes = [1000] * 15 + [300, 1000, 1000, 1000] if rolls else [1000] * 9
    flushed = {3, 7, 11, 13, 14} | ({15} if case == "seal-over-log" else set())
    with pytest.raises((CommitRetriesExhausted, CommitFailed)):
        for i, size in enumerate(sizes):
            if i == len(sizes) - (4 if rolls else 1):
                backend.left = 1  # the next chunk's answer is lost
            sent.append(bytes([65 + i]) * size)
            await store.append("t", 0, sent[-1])
            if rolls and i in flushed:
                await store.flush()
        await store.flush()
    assert backend.left == 0
    await flush_until_it_lands(store)
    got = await read_all(store, 0)  # the unacknowledged may be there, once, in order
    assert got == sent[:len(got)] and len(got) >= len(sizes) - 3
    if not rolls:  # the chunk and its remainder went as one object
        assert [o.size > 8 * KiB for o in await data_chunks(inner)] == [True]
    await roll_and_reopen(store, inner, got)
