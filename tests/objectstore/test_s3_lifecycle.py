"""The S3 backend across processes and event loops, against moto.

An aiobotocore client belongs to the event loop (and the process) that opened
it. Spark ships stores to executors by pickling them and runs them in forked
workers; hosts may drive one store from a second loop. In each case the store
must build a fresh client rather than use the one it carries.

These tests own their event loops (never ``asyncio.run``, which would reset
the main thread's loop that pytest-asyncio keeps for the session).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import warnings
from collections.abc import Coroutine, Iterator
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import pytest

from tests.conftest import make_s3_store
from tests.servers import S3Server
from tieredstore.errors import ObjectNotFound
from tieredstore.objectstore import Chokepoint, RetryPolicy, S3ObjectStore

T = TypeVar("T")

pytestmark = pytest.mark.s3


class Loop:
    """An event loop of our own, kept open until closed."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


@pytest.fixture
def loops() -> Iterator[list[Loop]]:
    """Two event loops; a store that hops between them leaves clients behind
    on the other (it cannot close them from there), hence the warning filter."""
    made = [Loop(), Loop()]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unclosed", ResourceWarning)
        yield made
        for loop in made:
            loop.close()


def test_store_rebuilds_its_client_after_a_fork_like_reset(
    moto: S3Server, loops: list[Loop]
) -> None:
    first, _ = loops
    store = first.run(make_s3_store(moto))
    first.run(store.put("fork/k", b"before"))
    inherited = store._client
    assert inherited is not None
    # What a forked child sees: a client opened by another process.
    store._pid = -1
    assert first.run(store.get("fork/k")) == b"before"
    assert store._client is not inherited
    assert store._pid == os.getpid()
    first.run(store.put("fork/k2", b"after"))
    assert first.run(store.get("fork/k2")) == b"after"
    first.run(store.close())


def _child(store: S3ObjectStore, conn: Connection) -> None:
    """Runs in a forked process: use the store the parent opened."""

    async def work() -> bytes:
        inherited = store._client
        data = await store.get("fork/parent")
        await store.put("fork/child", b"from the child " + str(os.getpid()).encode())
        fresh = store._client is not inherited and store._pid == os.getpid()
        await store.close()
        return data if fresh else b"the child reused the parent's client"

    try:
        loop = asyncio.new_event_loop()
        conn.send(loop.run_until_complete(work()))
        loop.close()
    except BaseException as exc:  # report, whatever it was
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork(2)"
)
def test_store_works_in_a_forked_child_and_in_the_parent_after(
    moto: S3Server, loops: list[Loop]
) -> None:
    parent, _ = loops
    store = parent.run(make_s3_store(moto))
    parent.run(store.put("fork/parent", b"parent data"))
    client = store._client

    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(store, send))
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a threaded process (moto's server
        # thread) may deadlock; the child touches none of those threads' locks.
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    send.close()
    try:
        assert receive.poll(60), "the forked child did not answer within 60 s"
        assert receive.recv() == b"parent data"
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0

    # The parent's client is untouched by the child's and still works.
    assert store._client is client
    assert parent.run(store.get("fork/child")).startswith(b"from the child ")
    parent.run(store.close())


def test_store_used_from_a_second_event_loop(moto: S3Server, loops: list[Loop]) -> None:
    first, second = loops
    store = first.run(make_s3_store(moto))
    first.run(store.put("loops/a", b"on the first loop"))
    assert second.run(store.get("loops/a")) == b"on the first loop"
    second.run(store.put("loops/b", b"on the second loop"))
    # And back: the store follows whichever loop calls it.
    assert first.run(store.get("loops/b")) == b"on the second loop"
    with pytest.raises(ObjectNotFound):
        second.run(store.head("loops/none"))
    assert [o.key for o in second.run(store.list_all("loops/"))] == ["loops/a", "loops/b"]
    second.run(store.close())


async def test_store_opened_on_another_thread_s_loop_works_here(moto: S3Server) -> None:
    def elsewhere() -> S3ObjectStore:
        loop = Loop()
        try:
            store = loop.run(make_s3_store(moto))
            loop.run(store.put("loops/k", b"value"))
            return store  # its client stays behind on a loop that is then closed
        finally:
            loop.close()

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unclosed", ResourceWarning)
        store = await asyncio.to_thread(elsewhere)
        assert await store.get("loops/k") == b"value"
        await store.put("loops/k2", b"here")
        assert await store.get("loops/k2") == b"here"
        await store.close()


def test_store_pickles_without_its_connections(moto: S3Server, loops: list[Loop]) -> None:
    first, second = loops
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.5, timeout=7.0)
    opened = first.run(make_s3_store(moto))
    store = S3ObjectStore(opened.settings, chokepoint=Chokepoint(policy))
    first.run(store.put("pickle/k", b"pickled"))
    assert store._client is not None

    clone = pickle.loads(pickle.dumps(store))
    assert isinstance(clone, S3ObjectStore)
    assert clone.settings == store.settings
    assert clone.bucket == store.bucket
    assert clone.chokepoint.policy == policy
    assert clone._client is None
    assert clone.metrics.total_requests() == 0  # counters stay with the original
    assert second.run(clone.get("pickle/k")) == b"pickled"
    second.run(clone.put("pickle/from-clone", b"clone"))
    assert first.run(store.get("pickle/from-clone")) == b"clone"
    # A pickled store that was never opened pickles too.
    again = pickle.loads(pickle.dumps(clone))
    assert second.run(again.head("pickle/k")).size == 7

    for loop, s in ((first, store), (second, clone), (second, again), (first, opened)):
        loop.run(s.close())
