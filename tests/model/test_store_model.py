"""AsyncMessageStore against a dict of lists: a Hypothesis state machine.

The model is ``{(topic, queue_id): messages}``, a message's offset its index
in the list, plus what the model knows for sure about each queue: how many
messages are durable (flushed, or read back by a later writer) and the first
offset retention left. Every step goes through the store's public API on one
object store (a :class:`MemoryObjectStore` kept across reopens), with tiny
segments, chunks and caches so that rolls, merges, evictions and retention
happen within a few steps. Timestamps come from a logical clock, one second
per append, so retention and ``offset_for_time`` are exact.

A second writer opens on the same bucket while the first is still open: from
then on the first is fenced (its writes raise), and the second continues
every queue from what had landed: at least what was flushed (or what the old
writer's ``commit_offset`` called durable), at most everything appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import AsyncMessageStore, Message, OffsetOutOfRange
from tieredstore.testing import ForwardingObjectStore

T = TypeVar("T")
Key = tuple[str, int]

FENCED = (SegmentFenced, MetadataFenced)
QUEUES: list[Key] = [(topic, queue_id) for topic in ("ta", "tb") for queue_id in (0, 1)]
# Most steps go to one queue, so that it rolls, merges and expires.
queues = st.sampled_from([QUEUES[0], QUEUES[0], QUEUES[0], *QUEUES])
sizes = st.one_of(st.integers(0, 64), st.integers(0, 3000))
tag_values = st.one_of(st.none(), st.sampled_from(["a", "b", "tag-c"]))
T0 = 1_700_000_000_000  # ms; a whole number of seconds, as every clock tick is
TICK = 1000


def config() -> TieredStoreConfig:
    """Segments roll every four clock ticks (and at 8 KiB); 1 KiB chunks, so a
    record spans up to three and whole chunks land before a flush; no group
    commit by the clock (chunks land when full, or on flush), no GC loop; an
    8 KiB fetcher; retention 0 s, so ``delete_expired(now)`` cuts at ``now``."""
    return small_config(
        chunk_size=1 * KiB, commit_log_max_size=8 * KiB, consume_queue_max_size=1 * KiB,
        rolling_interval=4.0, group_commit_interval=3600.0, gc_interval=0.0,
        memory_cache_bytes=8 * KiB, file_reserved_time=0.0, retention_interval=0.0,
    )


@dataclass
class Sent:
    body: bytes
    tags: str | None
    timestamp: int


@dataclass
class QueueModel:
    messages: list[Sent] = field(default_factory=list)
    durable: int = 0  # messages [0, durable) are known to be in the bucket
    min_offset: int = 0  # retention deleted the messages before it

    def first_at_or_after(self, timestamp: int) -> int:
        return next((i for i in range(self.min_offset, len(self.messages))
                     if self.messages[i].timestamp >= timestamp), len(self.messages))


def make_body(uid: int, size: int) -> bytes:
    return random.Random(uid).randbytes(size)


def check_messages(got: list[Message], key: Key, start: int, expected: list[Sent]) -> None:
    assert [m.offset for m in got] == list(range(start, start + len(got))), key
    assert len(got) <= len(expected)
    for message, sent in zip(got, expected, strict=False):
        where = f"{key} offset {message.offset}"
        assert (message.topic, message.queue_id) == key, where
        assert message.body == sent.body, f"{where}: body differs"
        assert message.tags == sent.tags, where
        assert message.store_timestamp == sent.timestamp, where


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.bucket = MemoryObjectStore()
        self.opens = 0
        self.uid = 0
        self.clock = T0
        self.model: dict[Key, QueueModel] = {}
        self.store = self.run(self.open())
        self.old: AsyncMessageStore | None = None  # the writer the current one replaced
        self.old_queues: list[Key] = []  # the queues it held then

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    async def open(self) -> AsyncMessageStore:
        self.opens += 1
        return await AsyncMessageStore.open(config(), store=ForwardingObjectStore(self.bucket),
                                            writer_id=f"writer-{self.opens}")

    def teardown(self) -> None:
        try:
            self.run(self.close_old())
            self.run(self.store.close())
            self.run(self.bucket.close())
        finally:
            self.runner.close()

    async def close_old(self) -> None:
        """Close the replaced writer: its flush is fenced, its tasks stop."""
        if self.old is not None:
            old, self.old, self.old_queues = self.old, None, []
            with contextlib.suppress(*FENCED):
                await old.close()

    async def read_queue(self, store: AsyncMessageStore, key: Key) -> list[Message]:
        """Every message from min_offset to max_offset, in reads of at most 7."""
        out: list[Message] = []
        offset = await store.min_offset(*key)
        end = await store.max_offset(*key)
        while offset < end:
            got = await store.get(*key, offset, max_count=7)
            assert got, f"{key}: nothing read at {offset} of {end}"
            out.extend(got)
            offset += len(got)
        return out

    async def check_queue(self, store: AsyncMessageStore, key: Key) -> None:
        q = self.model[key]
        assert await store.min_offset(*key) == q.min_offset, key
        assert await store.max_offset(*key) == len(q.messages), key
        check_messages(await self.read_queue(store, key), key, q.min_offset,
                       q.messages[q.min_offset:])

    # --- rules --------------------------------------------------------------------

    async def append_one(self, key: Key, size: int, tags: str | None) -> None:
        self.uid += 1
        self.clock += TICK
        sent = Sent(make_body(self.uid, size), tags, self.clock)
        q = self.model.setdefault(key, QueueModel())
        offset = await self.store.append(*key, sent.body, tags=tags, timestamp=sent.timestamp)
        assert offset == len(q.messages), f"{key}: append got offset {offset}"
        q.messages.append(sent)

    @rule(key=queues, size=sizes, tags=tag_values)
    def append(self, key: Key, size: int, tags: str | None) -> None:
        self.run(self.append_one(key, size, tags))

    @rule(key=queues, count=st.integers(2, 12), size=sizes)
    def append_burst(self, key: Key, count: int, size: int) -> None:
        async def burst() -> None:
            for i in range(count):
                await self.append_one(key, (size * (i + 1)) % 3001, None)

        self.run(burst())

    @rule()
    def flush(self) -> None:
        async def go() -> None:
            await self.store.flush()
            for key, q in self.model.items():
                q.durable = len(q.messages)
                assert await self.store.commit_offset(*key) == len(q.messages), key

        self.run(go())

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), max_count=st.integers(1, 40),
          max_bytes=st.one_of(st.none(), st.integers(1, 8000)))
    def get(self, data: st.DataObject, max_count: int, max_bytes: int | None) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        q = self.model[key]
        offset = data.draw(st.integers(q.min_offset, len(q.messages)))
        got = self.run(self.store.get(*key, offset, max_count=max_count,
                                      max_bytes=max_bytes or 1 << 30))
        expected = q.messages[offset : offset + max_count]
        check_messages(got, key, offset, expected)
        if max_bytes is None:
            assert len(got) == len(expected), f"{key}: {len(got)} of {len(expected)} read"
        else:
            assert bool(got) == bool(expected), f"{key}: nothing read at {offset}"

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), past_end=st.booleans())
    def get_out_of_range(self, data: st.DataObject, past_end: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        q = self.model[key]
        if past_end:
            offset = data.draw(st.integers(len(q.messages) + 1, len(q.messages) + 5))
        elif q.min_offset > 0:
            offset = data.draw(st.integers(0, q.min_offset - 1))
        else:
            return
        with pytest.raises(OffsetOutOfRange):
            self.run(self.store.get(*key, offset))

    @rule(key=queues)
    def get_of_a_queue_never_written(self, key: Key) -> None:
        if key not in self.model:
            with pytest.raises(OffsetOutOfRange):
                self.run(self.store.get(*key, 0))
            with pytest.raises(OffsetOutOfRange):
                self.run(self.store.max_offset(*key))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def offset_for_time(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        ticks = (self.clock - T0) // TICK
        timestamp = T0 + data.draw(st.integers(-1, ticks + 1)) * TICK \
            + data.draw(st.sampled_from([0, 0, -1, 1]))
        got = self.run(self.store.offset_for_time(*key, max(0, timestamp)))
        assert got == self.model[key].first_at_or_after(timestamp), (key, timestamp)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def read_whole_queue(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.run(self.check_queue(self.store, key))

    @precondition(lambda self: self.clock > T0)
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        """Retention at a cutoff: every segment whose newest message is older may go.
        Which ones did is the store's business; a message at or after the cutoff
        never goes, nor does min_offset move back or anything above it change."""
        cutoff = T0 + data.draw(st.integers(0, (self.clock - T0) // TICK + 1)) * TICK

        async def go() -> None:
            # The replaced writer is closed first: retention can delete the fence
            # of the segment it still holds open (tests/model/test_found.py).
            await self.close_old()
            await self.store.delete_expired(now=cutoff / 1000)
            for key, q in self.model.items():
                new_min = await self.store.min_offset(*key)
                assert q.min_offset <= new_min <= q.first_at_or_after(cutoff), (key, cutoff)
                if new_min > q.min_offset:
                    event("expire: min_offset moved")
                q.min_offset = new_min
                await self.check_queue(self.store, key)

        self.run(go())

    @rule()
    def reopen(self) -> None:
        """Close (which flushes) and open again: everything is there."""

        async def go() -> None:
            await self.close_old()
            await self.store.close()
            self.store = await self.open()
            assert sorted(self.store.queues()) == sorted(self.model)
            for key, q in self.model.items():
                q.durable = len(q.messages)
                await self.check_queue(self.store, key)
                assert await self.store.commit_offset(*key) == len(q.messages), key

        self.run(go())

    @rule()
    def second_writer(self) -> None:
        """A second writer opens while this one is still open and takes over."""

        async def go() -> None:
            await self.close_old()
            old = self.store
            floor = {key: max(q.durable, await old.commit_offset(*key))
                     for key, q in self.model.items()}
            held = old.queues()
            new = await self.open()
            self.old, self.old_queues, self.store = old, held, new
            assert sorted(new.queues()) == sorted(self.model)
            for key, q in self.model.items():
                landed = await new.max_offset(*key)
                assert floor[key] <= landed <= len(q.messages), \
                    f"{key}: {landed} messages, {floor[key]} were durable, " \
                    f"{len(q.messages)} appended"
                if landed > q.durable:
                    event("second writer: recovered unflushed appends")
                if landed < len(q.messages):
                    event("second writer: lost unflushed appends")
                # What the old writer appended and did not flush is lost from here on.
                del q.messages[landed:]
                q.durable = landed
                await self.check_queue(new, key)
                assert await new.commit_offset(*key) == landed, key

        self.run(go())

    @precondition(lambda self: bool(self.old_queues))
    @rule(data=st.data(), size=sizes)
    def replaced_writer_is_fenced(self, data: st.DataObject, size: int) -> None:
        """The replaced writer's writes to the queues it held are refused. (A queue
        it never held it can still open and claim: see tests/model/test_found.py.)"""
        key = data.draw(st.sampled_from(self.old_queues))
        old = self.old
        assert old is not None

        async def go() -> None:
            with pytest.raises(FENCED):
                await old.append(*key, make_body(-1, size), timestamp=self.clock)
                await old.flush()

        self.run(go())

    # --- invariants -----------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        async def go() -> None:
            assert sorted(self.store.queues()) == sorted(self.model)
            for key, q in self.model.items():
                low = await self.store.min_offset(*key)
                commit = await self.store.commit_offset(*key)
                high = await self.store.max_offset(*key)
                assert (low, high) == (q.min_offset, len(q.messages)), key
                assert low <= commit <= high, (key, low, commit, high)
                assert commit >= q.durable, (key, commit, q.durable)

        self.run(go())


StoreModel.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreModel = pytest.mark.filterwarnings("error::ResourceWarning")(StoreModel.TestCase)
