"""The one bridge from sync code to the async library.

Hosts that are not async call through :class:`LoopThread.run`, which submits a
coroutine to the loop thread and waits for it (fsspec's ``sync()`` pattern).
The loop lives as long as the facade object, so aiobotocore clients opened on
it stay valid; there is never an ``asyncio.run`` per call.

One-shot work (a CLI command, a Spark job's planning on the driver) goes
through :func:`run`, and a stream of results (a Spark task's rows) through
:func:`iterate`. Both work where ``asyncio.run`` does not: in a thread that
already runs a loop, such as a notebook's.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from tieredstore.errors import StoreClosed

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread, for sync callers."""

    def __init__(self, name: str = "tieredstore-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._ready = threading.Event()
        self._closed = False
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and return its result (or raise its error)."""
        if self._closed:
            coro.close()
            raise StoreClosed("the sync facade is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop: await instead")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the loop and join the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code and return its result.

    ``asyncio.run`` when this thread runs no loop; otherwise (a notebook) on a
    loop thread of its own, so the caller's loop is neither reused nor blocked
    from within.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    loop = LoopThread("tieredstore-run")
    try:
        return loop.run(coro)
    finally:
        loop.close()


def iterate(make: Callable[[], AsyncIterator[T]], *, ahead: int = 0) -> Iterator[T]:
    """The items of the async iterator ``make()`` returns, for sync code.

    The iterator runs on a loop thread of its own, created here and closed
    (after the iterator's ``aclose``) when the caller stops iterating.
    ``ahead``: items the loop thread reads ahead of the caller (while the
    caller works on one, the next is read), so no item costs the caller a
    wait for the loop; 0: each item read when asked for.
    """
    if ahead > 0:
        yield from _read_ahead(make, ahead)
        return
    loop = LoopThread("tieredstore-iterate")
    try:
        source = make()

        async def step() -> T:
            return await source.__anext__()

        try:
            while True:
                try:
                    item = loop.run(step())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                loop.run(aclose())
    finally:
        loop.close()


_END = object()  # the source is exhausted


def _read_ahead(make: Callable[[], AsyncIterator[T]], ahead: int) -> Iterator[T]:
    """:func:`iterate` with up to ``ahead`` items read before they are asked for."""
    loop = LoopThread("tieredstore-iterate")
    ready: queue.SimpleQueue[Any] = queue.SimpleQueue()  # items, _END, or _Failed
    credits = asyncio.Semaphore(ahead)  # items the pump may read before one is taken
    stopping = threading.Event()  # the caller stopped iterating

    async def pump() -> None:
        source = make()
        try:
            while True:
                await credits.acquire()
                if stopping.is_set():
                    return
                try:
                    item: Any = await source.__anext__()
                except StopAsyncIteration:
                    ready.put(_END)
                    return
                ready.put(item)
        except BaseException as exc:  # handed to the caller, raised there
            ready.put(_Failed(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

    done = asyncio.run_coroutine_threadsafe(pump(), loop.loop)
    try:
        while True:
            item = ready.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            loop.loop.call_soon_threadsafe(credits.release)
            yield item
    finally:
        stopping.set()
        loop.loop.call_soon_threadsafe(credits.release)
        try:
            done.result()  # the pump ends (the source closed) once its read is done
        finally:
            loop.close()


class _Failed:
    """What the source raised, on its way to the caller."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
