"""The broker's log series: the newest claim fences older stores; lost replies
are recognised; nothing a fenced store writes lands in the series."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import pytest

from tieredstore.errors import RequestTimeout
from tieredstore.log import LogFenced, LogPath, LogSeries
from tieredstore.objectstore import ForwardingObjectStore, MemoryObjectStore, ObjectInfo

PATH = LogPath("c", "b", prefix="p")
T = TypeVar("T")


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


class SlowList(ForwardingObjectStore):
    """The next listing waits for ``hold`` before it reads (its snapshot is taken
    late); later ones do not wait."""

    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.hold: asyncio.Event | None = None

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if op == "list" and self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()
        return await call()


async def test_a_check_beside_appends_takes_the_entries_they_created_for_its_own() -> None:
    """A writer check lists the log while the store goes on appending: the
    entries those appends created are not a newer store's."""
    store = SlowList(MemoryObjectStore())
    series = LogSeries(store, PATH, "w", recheck_after=0.0)  # every check lists
    await series.claim()
    release = store.hold = asyncio.Event()
    check = asyncio.ensure_future(series.check())
    await asyncio.sleep(0)  # the check's listing is under way, held
    first = await series.append(b"one")
    second = await series.append(b"two")
    release.set()
    await check  # its listing shows both: this store's own
    assert (await series.append(b"three")).seq == second.seq + 1 == first.seq + 2
    assert not await series.replaced()


class Hook(ForwardingObjectStore):
    """Runs ``before_put[n]`` before the n-th put, ``before_head`` before the next HEAD,
    ``after_put`` after each put lands (its reply not yet returned)."""

    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.puts = 0
        self.before_put: dict[int, Callable[[], Awaitable[None]]] = {}
        self.before_head: Callable[[], Awaitable[None]] | None = None
        self.after_put: Callable[[], Awaitable[None]] | None = None

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        self.puts += 1
        if self.puts in self.before_put:
            await self.before_put.pop(self.puts)()
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if self.after_put is not None:
            then, self.after_put = self.after_put, None
            await then()
        return info

    async def head(self, key: str) -> ObjectInfo:
        if self.before_head is not None:
            then, self.before_head = self.before_head, None
            await then()
        return await super().head(key)


async def test_a_look_that_finds_the_id_gone_meanwhile_is_fenced() -> None:
    """Between the idle store's listing and its HEAD of its next id, the newer
    store lands its first log object and deletes its fence there."""
    inner = MemoryObjectStore()
    store = Hook(inner)
    old = LogSeries(store, PATH, "old", recheck_after=0.0)
    await old.claim()
    new = LogSeries(inner, PATH, "new")
    await new.claim()  # its fence at the old store's next id

    async def new_writes_and_deletes_its_fence() -> None:
        await new.append(b"x")
        await inner.delete_many([PATH.key(1)])

    store.before_head = new_writes_and_deletes_its_fence
    with pytest.raises(LogFenced):
        await old.append(b"y")
    assert [e.seq for e in await new.entries()] == [0, 2]


async def test_the_idle_clock_counts_from_when_a_create_was_sent() -> None:
    """A create whose reply came late proves its id free only when it was sent: a
    newer store may have claimed, written and deleted its fence since."""
    inner = MemoryObjectStore()
    store = Hook(inner)
    old = LogSeries(store, PATH, "old", recheck_after=0.2)
    await old.claim()
    new = LogSeries(inner, PATH, "new")

    async def takeover_then_slow_reply() -> None:
        await new.claim()  # fence at the old store's next id
        await new.append(b"x")
        await inner.delete_many([PATH.key(2)])
        await asyncio.sleep(0.3)  # the old store's reply, late

    store.after_put = takeover_then_slow_reply
    await old.append(b"landed before the takeover")
    with pytest.raises(LogFenced):
        await old.append(b"y")  # looks first: its clock says 0.3 s since it last knew
    assert [e.seq for e in await new.entries()] == [0, 1, 3]


async def test_a_claim_fills_what_a_claim_in_progress_left_open() -> None:
    """Store d fences ahead of busy store a; store c claims before d fills the ids
    it skipped. c takes them, so a's next create there is refused."""
    inner = MemoryObjectStore()
    a = LogSeries(inner, PATH, "a")
    await a.claim()  # fence 0
    await a.append(b"a1")  # 1
    dstore = Hook(inner)
    d = LogSeries(dstore, PATH, "d")
    c = LogSeries(inner, PATH, "c")
    seen: list[list[tuple[int, int]]] = []

    async def a_takes_the_id() -> None:  # before d's first fence (at 2)
        await a.append(b"a2")

    async def c_claims_then_a_writes() -> None:  # d's fence at 4 stands, 3 unfilled
        seen.append([(e.seq, e.size) for e in await c.claim()])
        with pytest.raises(LogFenced):
            await a.append(b"a3")

    dstore.before_put = {1: a_takes_the_id, 3: c_claims_then_a_writes}
    await d.claim()
    assert seen == [[(0, 0), (1, 2), (2, 2), (4, 0)]]
    assert c.own_fills == [3]
    assert [(e.seq, e.size) for e in await c.entries()] == [(0, 0), (1, 2), (2, 2), (3, 0),
                                                            (4, 0), (5, 0)]


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
