"""The sync facade's outbox: appends taken in the caller's thread, sent in batches.

A hop to the loop thread costs far more than an append (a thread wake each
way). So :class:`~tieredstore.store.api.facade.MessageStore` hops only for the
first append to a queue, which tells it where the queue's offsets stand.
Later appends are checked in the caller's thread (every check ``append``
makes), given the queue's next offset, and queued here; one wake of the loop
per burst moves what is queued into ``append_batch`` calls, in order.

What the caller can rely on:

- **Offsets** are the ones ``append`` would have returned: the outbox is the
  only way the facade appends, every facade append that hops (the first to a
  queue, one with ``offset=``, ``append_batch``) goes after what is queued,
  while one is in flight the queue's other appends hop too (its next offset
  is not known here until they have all ended), and each batch is appended
  only at the offsets given out.
- **Reads see earlier appends**: every other facade call waits for the
  outbox to be sent first; ``flush`` makes them durable, as before.
- **Failures** (a writer that replaced this one, an outage past the retries)
  are kept: the appends queued with it are dropped (their offsets were never
  stored), every append raises the failure until a ``flush`` has raised it
  too (so no flush returns after a dropped append without saying so), and
  the next append to each queue after that hops again to learn where it
  stands. Reads do not raise it.
- **Back-pressure**, as the async store's: its append waits while the upload
  pool is full, and so does this one once the bodies taken here and not yet
  in the pool (queued, or in the batch being sent) reach ``pool_bytes``, or
  :data:`MAX_QUEUED` appends are queued. It then goes through the loop, after
  what is queued: it returns once all of it and itself are in the pool. So a
  producer holds at most about ``pool_bytes`` beside the pool's own.

Appending through the async core behind the facade's back, to a queue the
facade appends to, makes the offsets disagree: the batch then is not
appended, and fails with an ``OffsetError`` that says so.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from tieredstore.store.api.message_store import AsyncMessageStore
from tieredstore.store.base.errors import OffsetError
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.sync import LoopThread

T = TypeVar("T")
Key = tuple[str, int]
Errors = Literal["ignore", "raise", "report"]  # a kept failure: skip, raise, raise and forget
MAX_QUEUED = 4096  # appends queued before one waits for the loop


class Outbox:
    """Appends predicted in the caller's thread and sent from the loop's."""

    def __init__(self, core: AsyncMessageStore, loop: LoopThread) -> None:
        self._core = core
        self._loop = loop
        self._lock = threading.Lock()
        self._queued: list[tuple[Key, Outgoing, int]] = []
        self._next: dict[Key, int] = {}  # the next offset of each queue, where known
        # Appends to a queue through the loop, in flight: while any is, the queue's
        # next offset is not known here (so its appends go through the loop too).
        self._hops: dict[Key, int] = {}
        # The furthest next offset they left; None once one failed (it may have
        # appended part of its messages: the next offset is learned again).
        self._hop_end: dict[Key, int | None] = {}
        self._error: BaseException | None = None
        # Body bytes queued or being sent, not yet appended to the store (its
        # upload pool): past max_bytes, appends wait (see Back-pressure above).
        self._bytes = 0
        self.max_bytes = core.config.pool_bytes
        self._sending = False
        self._task: asyncio.Task[None] | None = None

    # --- the caller's thread -----------------------------------------------------

    def append(self, key: Key, message: Outgoing) -> int:
        """Queue ``message`` (checked already) and return its offset, or send it
        through the loop when the queue's next offset is not known here."""
        with self._lock:
            self._raise_kept("raise")
            offset = self._next.get(key)
            size = len(message.body)
            if (offset is not None and len(self._queued) < MAX_QUEUED
                    and self._bytes + size <= self.max_bytes):
                self._queued.append((key, message, offset))
                self._next[key] = offset + 1
                self._bytes += size
                if not self._sending:
                    self._sending = True
                    self._loop.loop.call_soon_threadsafe(self._start)
                return offset
        return self.through_loop(
            key, lambda: self._core.append_checked(*key, [message])).start

    def through_loop(self, key: Key, call: Callable[[], Awaitable[range]]) -> range:
        """Run ``call``, which appends to queue ``key`` on the loop and returns the
        offsets it took, after what is queued; the queue's next offset is
        unknown here until every such call in flight for it has ended."""
        with self._lock:
            self._hops[key] = self._hops.get(key, 0) + 1
            self._next.pop(key, None)
        got: range | None = None
        try:
            got = self.run(call, errors="raise")
            return got
        finally:
            with self._lock:
                end = self._hop_end.get(key, 0)
                self._hop_end[key] = None if got is None or end is None else max(end, got.stop)
                self._hops[key] -= 1
                if not self._hops[key]:
                    del self._hops[key]
                    end = self._hop_end.pop(key)
                    if end is not None and self._error is None:
                        self._next[key] = end

    def run(self, call: Callable[[], Awaitable[T]], *, errors: Errors = "ignore") -> T:
        """Run ``call()`` on the loop once everything queued was sent; first
        raise a failure kept from the sending, if ``errors`` says so."""
        return self._loop.run(self._after_queued(call, errors))

    # --- the loop's thread ----------------------------------------------------------

    async def _after_queued(self, call: Callable[[], Awaitable[T]], errors: Errors) -> T:
        await self._sent()
        with self._lock:
            self._raise_kept(errors)
        return await call()

    async def _sent(self) -> None:
        while self._sending:
            task = self._task
            if task is None or task.done():
                await asyncio.sleep(0)  # the wake is on its way: let it start the sending
            else:
                await asyncio.shield(task)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._send_all(),
                                                            name="sync facade outbox")

    async def _send_all(self) -> None:
        try:
            while True:
                with self._lock:
                    batch, self._queued = self._queued, []
                    if not batch:
                        self._sending = False
                        return
                if not await self._send(batch):
                    return
        except BaseException as exc:
            self._fail(exc)
            raise

    async def _send(self, batch: list[tuple[Key, Outgoing, int]]) -> bool:
        """One ``append_batch`` per run of one queue, each checked against the
        offsets given out. False once one failed (the failure is kept)."""
        i = 0
        while i < len(batch):
            key, _, first = batch[i]
            j = i + 1
            while j < len(batch) and batch[j][0] == key:
                j += 1
            run = [m for _, m, _ in batch[i:j]]
            try:
                await self._core.append_checked(*key, run, first)
            except Exception as exc:
                if isinstance(exc, OffsetError):
                    exc.add_note("the sync facade gave out these offsets, and something "
                                 "appended to this queue through the async core behind the "
                                 "facade's back; the batch was not appended")
                self._fail(exc)
                return False
            with self._lock:
                self._bytes -= sum(len(m.body) for m in run)
            i = j
        return True

    def _fail(self, error: BaseException) -> None:
        """Keep ``error`` for the next call; drop what is queued; forget every
        queue's next offset (the next append to each hops and learns it)."""
        with self._lock:
            if self._error is None:
                self._error = error
            self._queued = []
            self._bytes = 0  # what was queued or being sent is dropped
            self._next.clear()
            self._hop_end.clear()
            self._sending = False

    def _raise_kept(self, errors: Errors) -> None:
        """Raise a kept failure as ``errors`` says (the lock is held)."""
        error = self._error
        if error is None or errors == "ignore":
            return
        if errors == "report":
            self._error = None
        raise error

