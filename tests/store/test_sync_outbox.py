"""The sync facade's appends without a hop each: the offsets append would give,
reads that see them, several threads, and failures never hidden by a flush."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from collections import defaultdict
from collections.abc import Mapping

import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.errors import SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.store import MessageStore, OffsetError, Outgoing
from tieredstore.testing import ForwardingObjectStore

FENCED = (SegmentFenced, MetadataFenced)


def test_offsets_follow_on_and_reads_see_appends_before_a_flush() -> None:
    backend = MemoryObjectStore()
    with MessageStore.open(small_config(), store=backend) as ms:
        assert [ms.append("t", 0, b"m%d" % i) for i in range(500)] == list(range(500))
        assert ms.max_offset("t", 0) == 500  # sent before the read, not yet flushed
        assert [m.body for m in ms.get("t", 0, 495, max_count=10)] == [
            b"m%d" % i for i in range(495, 500)]
        assert ms.append("t", 0, b"at", offset=500) == 500  # an explicit offset hops
        assert ms.append_batch("t", 0, [b"b1", b"b2"]) == range(501, 503)
        assert ms.append("t", 0, b"after", tags="T", properties={"p": "v"}) == 503
        ms.flush()
    with MessageStore.open(small_config(), store=backend) as again:
        got = again.get("t", 0, 498, max_count=10)
        assert [m.body for m in got] == [b"m498", b"m499", b"at", b"b1", b"b2", b"after"]
        assert (got[-1].tags, dict(got[-1].properties)) == ("T", {"p": "v"})


def test_threads_appending_get_distinct_offsets_in_order() -> None:
    with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
        got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)

        def producer(n: int) -> None:
            for i in range(300):
                body = b"%d-%d" % (n, i)
                offset = ms.append("t", n % 2, body)
                got[n].append((offset, body))

        threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ms.flush()
        for queue in (0, 1):
            mine = sorted(o for n in got if n % 2 == queue for o in got[n])
            assert [o for o, _ in mine] == list(range(600))  # no offset twice, none skipped
            stored = []
            while len(stored) < 600:
                stored += ms.get("t", queue, len(stored), max_count=256)
            assert [m.body for m in stored] == [b for _, b in mine]
            for n in (queue, queue + 2):  # each thread's own appends in its order
                offsets = [o for o, _ in got[n]]
                assert offsets == sorted(offsets)


def test_a_takeover_is_raised_by_appends_and_by_flush_never_hidden() -> None:
    backend = MemoryObjectStore()
    config = small_config()
    ms = MessageStore.open(config, store=backend)
    assert ms.append("t", 0, b"first") == 0
    ms.flush()
    newer = MessageStore.open(config, store=backend)  # fences ms on queue t/0
    try:
        with pytest.raises(FENCED):
            for i in range(2000):  # queued appends; their sending fails, fenced
                ms.append("t", 0, b"x" * 200 + b"%d" % i)
            ms.flush()
        with pytest.raises(FENCED):
            ms.flush()  # reported once to a flush at least, or by the append itself
        assert newer.append("t", 0, b"newer") == 1
        newer.flush()
        assert [m.body for m in newer.get("t", 0, 0)] == [b"first", b"newer"]
    finally:
        with pytest.raises(FENCED):
            ms.close()
        newer.close()


def test_appends_behind_the_facades_back_are_named_not_misnumbered() -> None:
    with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
        assert ms.append("t", 0, b"a") == 0
        assert ms.append("t", 0, b"b") == 1
        ms.flush()
        # The async core appends to the same queue while the facade has offsets out.
        ms._loop.run(ms.core.append("t", 0, b"behind"))
        assert ms.append("t", 0, b"c") == 2  # what the facade believes
        with pytest.raises(OffsetError) as caught:
            ms.flush()
        assert "behind the facade's back" in "".join(caught.value.__notes__)
        assert ms.append("t", 0, b"d") == 3  # learned again by a hop; "c" was not stored
        ms.flush()
        assert [m.body for m in ms.get("t", 0, 0)] == [b"a", b"b", b"behind", b"d"]


def test_outgoing_messages_through_the_batch_path() -> None:
    with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
        assert ms.append_batch("t", 0, [Outgoing(b"x", keys=("k",))]) == range(1)
        assert ms.append("t", 0, b"y") == 1
        ms.flush()
        assert [m.keys for m in ms.get("t", 0, 0)] == [("k",), ()]


def test_the_loop_thread_is_not_the_caller() -> None:
    """Appends queued from a thread that runs its own loop (a notebook's) work."""

    async def in_a_loop() -> list[int]:
        with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
            offsets = [ms.append("t", 0, b"%d" % i) for i in range(10)]
            ms.flush()
            return offsets

    assert asyncio.run(in_a_loop()) == list(range(10))


def test_threads_mixing_append_and_append_batch_on_one_queue() -> None:
    """Batches and explicit offsets go through the loop while other threads queue
    appends to the same queue: no offset is given out twice or refused."""
    with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
        ms.append("t", 0, b"start")
        taken: list[int] = []
        lock = threading.Lock()

        def singles() -> None:
            for _ in range(3000):
                offset = ms.append("t", 0, b"s")
                with lock:
                    taken.append(offset)

        def batches() -> None:
            for _ in range(600):
                got = ms.append_batch("t", 0, [b"b"] * 5)
                with lock:
                    taken.extend(got)

        threads = [threading.Thread(target=f) for f in (singles, singles, batches)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ms.flush()
        assert sorted(taken) == list(range(1, 9001))
        assert ms.max_offset("t", 0) == 9001


class _HeldPuts(ForwardingObjectStore):
    """A bucket whose puts wait while ``landing`` is clear (uploads that do not land)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.landing = threading.Event()
        self.landing.set()

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        if not self.landing.is_set():
            await asyncio.to_thread(self.landing.wait)
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


def test_appends_wait_once_the_bytes_outside_the_upload_pool_reach_pool_bytes() -> None:
    """The sync facade's appends queue at most pool_bytes beside the pool: while
    no upload lands, a producer stops after about twice pool_bytes (the pool's,
    then the outbox's), as the async store's append waits when the pool is full,
    and goes on once uploads land again; nothing is lost."""
    pool_bytes, size = 256 * KiB, 8 * KiB
    bucket = _HeldPuts(MemoryObjectStore())
    bodies = [b"%06d" % i + os.urandom(size - 6) for i in range(400)]  # 12 x pool_bytes
    returned = 0
    with MessageStore.open(small_config(pool_bytes=pool_bytes), store=bucket) as ms:
        ms.append("t", 0, b"first")  # the first append to a queue hops: after it, none
        ms.flush()
        bucket.landing.clear()

        def produce() -> None:
            nonlocal returned
            for body in bodies:
                ms.append("t", 0, body)
                returned += 1

        producer = threading.Thread(target=produce)
        producer.start()
        try:
            stalled_at, last = -1, time.monotonic()
            while time.monotonic() - last < 0.5 and producer.is_alive():
                if returned != stalled_at:
                    stalled_at, last = returned, time.monotonic()
                time.sleep(0.05)
            assert producer.is_alive(), "every append returned while no upload landed"
            assert returned * size <= 2 * pool_bytes + size
        finally:
            bucket.landing.set()
            producer.join(timeout=60)
        assert not producer.is_alive()
        ms.flush()
        got: list[bytes] = []
        while len(got) < len(bodies) + 1:
            got += [m.body for m in ms.get("t", 0, len(got), max_count=64)]
        assert got == [b"first", *bodies]


def test_the_facade_has_every_public_method_of_the_async_store_with_its_signature() -> None:
    """The sync facade states no signature of its own: each is the async store's."""
    from tieredstore.store import AsyncMessageStore

    internal = {"append_checked", "open_read_only"}  # the outbox's path; async-only reader
    for name, method in vars(AsyncMessageStore).items():
        if name.startswith("_") or name in internal:
            continue
        mine = getattr(MessageStore, name)
        if isinstance(method, property):
            assert isinstance(mine, property), name
            continue
        theirs = inspect.signature(getattr(AsyncMessageStore, name))
        if isinstance(method, classmethod):
            assert inspect.signature(mine) == theirs.replace(return_annotation="MessageStore")
        else:
            assert inspect.signature(mine) == theirs, name
    with MessageStore.open(small_config(write_mode="log"), store=MemoryObjectStore()) as ms:
        ms.append("t", 0, b"x")
        ms.compact_log()
        assert ms.damaged == {} and ms.get("t", 0, 0)[0].body == b"x"
