"""The broker's log series: the newest claim fences older stores; lost replies
are recognised; nothing a fenced store writes lands in the series."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import pytest

from tieredstore.errors import RequestTimeout
from tieredstore.log import LogFenced, LogPath, LogSeries
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.testing.forwarding import ForwardingObjectStore

PATH = LogPath("c", "b", prefix="p")


class LosesReplies(ForwardingObjectStore):
    """Puts whose request takes effect but whose reply is lost (a timeout)."""

    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.lose = 0

    async def put(self, key: str, data: bytes, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> None:
        await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if self.lose:
            self.lose -= 1
            raise RequestTimeout(f"reply to put {key} lost")


def test_keys_sort_in_sequence_order_and_parse_back() -> None:
    keys = [PATH.key(n) for n in (0, 9, 10, 123456)]
    assert keys == sorted(keys)
    assert [PATH.parse(k) for k in keys] == [0, 9, 10, 123456]
    assert PATH.parse(PATH.directory + "log-12") is None
    assert PATH.parse("elsewhere/log-" + "0" * 20) is None


async def test_a_new_claim_fences_the_old_writer() -> None:
    store = MemoryObjectStore()
    old = LogSeries(store, PATH, "writer-a")
    assert await old.claim() == []
    await old.append(b"one")
    await old.append(b"two")
    new = LogSeries(store, PATH, "writer-b")
    before = await new.claim()
    assert [(e.seq, e.size) for e in before] == [(0, 0), (1, 3), (2, 3)]
    with pytest.raises(LogFenced):
        await old.append(b"three")
    with pytest.raises(LogFenced):  # for good
        await old.append(b"four")
    assert (await new.append(b"mine")).seq == 4
    entries = await new.entries()
    assert [(e.seq, e.fence) for e in entries] == [(0, True), (1, False), (2, False),
                                                   (3, True), (4, False)]
    assert await store.get(PATH.key(4)) == b"mine"


async def test_two_claims_at_once_the_later_one_wins() -> None:
    store = MemoryObjectStore()
    a, b = LogSeries(store, PATH, "a"), LogSeries(store, PATH, "b")
    await a.claim()
    await b.claim()  # fences a at id 1
    await a.claim()  # a opens again: newest open wins, fences b at id 2
    with pytest.raises(LogFenced):
        await b.append(b"x")
    assert (await a.append(b"y")).seq == 3


async def test_a_lost_reply_is_the_writers_own_entry() -> None:
    inner = MemoryObjectStore()
    store = LosesReplies(inner)
    series = LogSeries(store, PATH, "w")
    store.lose = 1
    with pytest.raises(RequestTimeout):
        await series.claim()
    await series.claim()  # the retry finds its own fence at 0 taken: lists, fences at 1
    store.lose = 1
    with pytest.raises(RequestTimeout):
        await series.append(b"data")
    entry = await series.append(b"data")  # the retry finds its own entry: it landed
    assert entry.seq == series.next_seq - 1
    assert await inner.get(entry.key) == b"data"
    assert (await series.append(b"more")).seq == entry.seq + 1


async def test_a_writer_that_looks_before_writing_knows_its_own_lost_reply() -> None:
    inner = MemoryObjectStore()
    store = LosesReplies(inner)
    series = LogSeries(store, PATH, "w", recheck_after=0.0)  # looks before every create
    await series.claim()
    store.lose = 1
    with pytest.raises(RequestTimeout):
        await series.append(b"data")
    entry = await series.append(b"data")  # the listing shows its own entry: not another's
    assert await inner.get(entry.key) == b"data"
    assert (await series.append(b"more")).seq == entry.seq + 1


async def test_a_writer_that_looks_before_writing_finds_a_newer_store() -> None:
    store = MemoryObjectStore()
    old = LogSeries(store, PATH, "old", recheck_after=0.0)
    await old.claim()
    new = LogSeries(store, PATH, "new")
    await new.claim()
    await new.append(b"x")
    await store.delete_many([PATH.key(1)])  # new's fence, at old's next id, deleted
    with pytest.raises(LogFenced, match=r"holds .*log-0*2, past this store's next entry"):
        await old.append(b"y")
    with pytest.raises(LogFenced):
        await old.append(b"y")
    assert [e.seq for e in await new.entries()] == [0, 2]


async def test_other_bytes_at_the_id_are_a_fence_not_a_lost_reply() -> None:
    store = MemoryObjectStore()
    series = LogSeries(store, PATH, "w")
    await series.claim()
    await store.put(PATH.key(1), b"data", metadata={"writer": "w"})  # no CRC: not ours
    with pytest.raises(LogFenced):
        await series.append(b"data")


async def test_append_needs_a_claim_and_bytes() -> None:
    series = LogSeries(MemoryObjectStore(), PATH, "w")
    with pytest.raises(RuntimeError, match="before claim"):
        await series.append(b"x")
    await series.claim()
    with pytest.raises(ValueError, match="only fences are empty"):
        await series.append(b"")


class RacingWriter(ForwardingObjectStore):
    """Before each create of a fence, the old store lands its next entry first: a
    store that writes faster than a newer one can fence it."""

    def __init__(self, inner: MemoryObjectStore, old: LogSeries, races: int) -> None:
        super().__init__(inner)
        self.old = old
        self.races = races
        self.landed: list[str] = []

    async def put(self, key: str, data: bytes, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> None:
        if not data and self.races:
            self.races -= 1
            with contextlib.suppress(LogFenced):
                self.landed.append((await self.old.append(b"entry")).key)
        await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


async def test_a_store_that_keeps_writing_cannot_keep_a_new_one_from_fencing_it() -> None:
    inner = MemoryObjectStore()
    old = LogSeries(inner, PATH, "old")
    await old.claim()
    racing = RacingWriter(inner, old, races=30)
    new = LogSeries(racing, PATH, "new")
    found = await new.claim()
    # Every entry the old store landed below the new fence is among those returned.
    assert set(racing.landed) <= {e.key for e in found}
    assert racing.landed, "the old store never raced"
    with pytest.raises(LogFenced):
        await old.append(b"after the fence")
    fence = new.next_seq
    assert fence is not None
    listed = {e.seq for e in await new.entries()}
    assert listed == set(range(fence)), "an id below the fence is free"


async def test_a_store_learns_with_one_head_that_a_newer_one_claimed_the_log() -> None:
    store = MemoryObjectStore()
    old = LogSeries(store, PATH, "old")
    await old.claim()
    await old.append(b"entry")
    assert not await old.replaced()
    await LogSeries(store, PATH, "new").claim()
    assert await old.replaced()
