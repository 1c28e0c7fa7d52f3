"""Background tasks: one supervisor per component, with its periodic loops.

Every component that runs work nobody awaits in line (the store's merges and
periodic passes, the log's group commits, the upload pool's commit workers,
the fetcher's loads and disk writes, a managed ledger's offloads and sweep)
holds one :class:`Background`. Its rules:

- :meth:`~Background.spawn` runs background work: its failure is logged here,
  and whatever retries that work (the next flush, pass or open) resumes it.
  :meth:`~Background.start` runs a task whose result callers await: its
  failure is theirs. :meth:`~Background.every` runs a periodic loop: a failed
  pass is logged and the next one tries again; a pass returning False ends it.
- An expected failure (a ``TieredStoreError``: an outage, a fence) is logged as
  a warning, anything else as a bug, with its traceback. Cancellation passes.
- :meth:`~Background.wait_idle` returns once no spawned or started task is under
  way, including those started meanwhile (loops are not waited for).
- :meth:`~Background.close` cancels the loops and started tasks, then waits for
  the spawned work: a pass is cut short, background work is not.
- Each task runs at a :class:`Priority`: the one its ``priority`` argument
  names, else its creator's. The object store's request governor reads it
  (:func:`current_priority`) and sends the host's requests first. Code the
  host awaits runs at ``HOST`` (the default); the one place that says a task
  is background work is the call that starts it here. An :class:`Urgency`
  given instead is a priority that may rise while the task runs (a read-ahead
  load that a reader comes to wait for).

:func:`gather_bounded` is the one bounded fan-out: work over many items, at
most N at a time, awaited in line. :class:`SingleFlight` is the one way
concurrent identical reads share one request.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tieredstore.errors import TieredStoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Item = TypeVar("Item")
K = TypeVar("K", bound=Hashable)


class Priority(enum.IntEnum):
    """Whose object-store requests go first: lower values first."""

    HOST = 0
    """The host's appends, flushes and reads, and what they wait for (group
    commits, chunk commits)."""
    READ_AHEAD = 1
    COMPACTION = 2
    """Moving bytes from log objects into segments."""
    MERGE = 3
    """Seals and merges of full segments, rolls by time."""
    GC = 4
    """Garbage collection, retention, the ledger's deletion sweep."""
    OFFLOAD = 5
    """A managed ledger's offloads."""


class Urgency:
    """A task's priority that :meth:`rise` can raise while the task runs; with a
    ``parent`` (the urgency of the task it works for), never below the parent's
    as that rises too."""

    __slots__ = ("_priority", "parent")

    def __init__(self, priority: Priority, parent: Urgency | None = None) -> None:
        self._priority = priority
        self.parent = parent

    @property
    def priority(self) -> Priority:
        if self.parent is None:
            return self._priority
        return min(self._priority, self.parent.priority)

    def rise(self, priority: Priority) -> None:
        """From now on at least ``priority`` (a lower value is more urgent)."""
        self._priority = min(self._priority, priority)


_PRIORITY: contextvars.ContextVar[Priority | Urgency] = contextvars.ContextVar(
    "tieredstore_priority", default=Priority.HOST)


def current_priority() -> Priority:
    """The priority the running task's object-store requests go at now."""
    given = _PRIORITY.get()
    return given if isinstance(given, Priority) else given.priority


def current_urgency(floor: Priority = Priority.HOST) -> Urgency:
    """A new :class:`Urgency` for work done for the running task: at its
    priority (or ``floor``, if less urgent), rising as the running task's does
    (when ``floor`` is HOST) and as :meth:`Urgency.rise` raises it."""
    given = _PRIORITY.get()
    priority = max(floor, current_priority())
    parent = given if isinstance(given, Urgency) and floor is Priority.HOST else None
    return Urgency(priority, parent)


class PriorityLock:
    """An asyncio lock with priority inheritance: while a task waits for it, the
    holder's object-store requests go at least at the waiter's priority. A host
    commit waiting for a segment that compaction holds waits for compaction's
    requests, not for the governor's queue of background work before them.

    A holder below ``HOST`` runs under an :class:`Urgency` of its own (its
    children too) until it releases the lock; a host holder needs none, as no
    waiter can raise it.
    """

    __slots__ = ("_holder", "_lock", "_token")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._holder: Urgency | None = None
        self._token: contextvars.Token[Priority | Urgency] | None = None

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        if self._holder is not None:
            self._holder.rise(current_priority())
        await self._lock.acquire()
        if current_priority() is Priority.HOST:
            return  # nothing can rise above the host's: no urgency (the append path)
        self._holder = current_urgency()
        self._token = _PRIORITY.set(self._holder)

    async def __aexit__(self, *exc: object) -> None:
        token, self._token, self._holder = self._token, None, None
        if token is not None:
            _PRIORITY.reset(token)
        self._lock.release()


def _log_failure(what: str, exc: Exception) -> None:
    if isinstance(exc, TieredStoreError):
        log.warning("%s failed: %s", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)


async def gather_bounded(limit: int, work: Callable[[Item], Awaitable[T]],
                         items: Iterable[Item]) -> list[T]:
    """``work(item)`` for every item, at most ``limit`` at a time; the results in
    the items' order. The first failure is raised as it is, once the rest are
    cancelled (none is left running behind the caller)."""
    gate = asyncio.Semaphore(limit)

    async def one(item: Item) -> T:
        async with gate:
            return await work(item)

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Background:
    """The background tasks of one component (see the module's rules)."""

    __slots__ = ("_cancel", "_work")

    def __init__(self) -> None:
        self._work: set[asyncio.Task[Any]] = set()  # spawned and started: waited for
        self._cancel: set[asyncio.Task[Any]] = set()  # started and loops: cancelled

    @property
    def busy(self) -> bool:
        """Whether a spawned or started task is under way."""
        return bool(self._work)

    def _track(self, coro: Coroutine[Any, Any, T], name: str, *into: set[asyncio.Task[Any]],
               priority: Priority | Urgency | None = None) -> asyncio.Task[T]:
        context = None
        if priority is not None and priority is not _PRIORITY.get():
            context = contextvars.copy_context()
            context.run(_PRIORITY.set, priority)
        task = asyncio.get_running_loop().create_task(coro, name=name, context=context)
        for tasks in into:
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return task

    def spawn(self, work: Coroutine[Any, Any, object], name: str, *,
              priority: Priority | None = None) -> asyncio.Task[None]:
        """Run ``work`` in the background, at ``priority`` (else the caller's); a
        failure is logged, naming ``name``."""

        async def logged() -> None:
            try:
                await work
            except Exception as exc:
                _log_failure(f"background {name}", exc)

        return self._track(logged(), name, self._work, priority=priority)

    def start(self, work: Coroutine[Any, Any, T], name: str, *,
              priority: Priority | Urgency | None = None) -> asyncio.Task[T]:
        """Run ``work`` as a task its callers await, at ``priority`` (else the
        caller's); cancelled on close."""
        return self._track(work, name, self._work, self._cancel, priority=priority)

    def every(self, interval: float, name: str, work: Callable[[], Awaitable[object]], *,
              priority: Priority | None = None) -> asyncio.Task[None]:
        """Run ``work()`` every ``interval`` seconds until close, or a pass returns
        False; each pass at ``priority`` (else the caller's)."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    if await work() is False:
                        return
                except Exception as exc:  # the next pass tries again
                    _log_failure(name, exc)

        return self._track(loop(), name, self._cancel, priority=priority)

    async def wait_idle(self) -> bool:
        """Return once no spawned or started task is under way; whether one was."""
        waited = False
        while self._work:  # asyncio.wait: a caller cancelled cancels none of them
            waited = True
            await asyncio.wait(set(self._work))
        return waited

    async def close(self) -> None:
        """Cancel the loops and started tasks, then wait for the spawned work."""
        cancelled = set(self._cancel)
        for task in cancelled:
            task.cancel()
        if cancelled:
            await asyncio.wait(cancelled)
        await self.wait_idle()


@dataclass(slots=True, eq=False)
class _Flight(Generic[T]):
    task: asyncio.Task[T]
    urgency: Urgency
    begun: bool = False  # its work has started: a fresh caller no longer joins it
    waiters: int = 0


class SingleFlight(Generic[K, T]):
    """Concurrent identical reads share one request (Go's singleflight). Its rules:

    - :meth:`run` starts ``work()`` as a task of its own, unless work for the
      same key is under way: then the call awaits that work's result (joins it).
      Every caller gets the result, or the failure, of the work it joined.
    - ``fresh``: the caller joins only work that begins after its call. Work
      already begun is waited out, and the run after it, shared by every fresh
      caller that came meanwhile, is theirs: at most two runs for a herd, and
      nobody is answered with what was read before it asked. A listing that
      must show what was stored before the call (a flush that returned) is
      read fresh; what never changes once written (a merged object's table, a
      metadata page) need not be.
    - Nothing is kept past the run: the next call after it runs the work again.
      A cache, where there is one, is the caller's (fill it in ``work``).
    - A caller that gives up (cancelled) does not cancel the work for the
      others; the work is cancelled once no caller waits for it any more.
    - The work runs at its first caller's priority, and a caller joining it
      raises it to its own (as a read joining a read-ahead load,
      ``fetcher/loads.py``).
    """

    __slots__ = ("_flights", "joined", "runs")

    def __init__(self) -> None:
        # The newest work for each key: under way, or waiting for the work before it.
        self._flights: dict[K, _Flight[T]] = {}
        self.runs = 0  # works started
        self.joined = 0  # calls that joined work another call started

    def __len__(self) -> int:
        """Keys with work under way."""
        return len(self._flights)

    def __contains__(self, key: object) -> bool:
        return key in self._flights

    async def run(self, key: K, work: Callable[[], Awaitable[T]], *, fresh: bool = False
                  ) -> T:
        """``work()``'s result, shared with every concurrent call for ``key`` (see the
        class's rules; ``fresh``: from work that begins after this call)."""
        flight = self._flights.get(key)
        if flight is None or (fresh and flight.begun):
            flight = self._start(key, work, after=flight)
        else:
            self.joined += 1
            flight.urgency.rise(current_priority())
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if not flight.waiters and not flight.task.done():
                flight.task.cancel()  # nobody waits for it any more

    def _start(self, key: K, work: Callable[[], Awaitable[T]], *, after: _Flight[T] | None
               ) -> _Flight[T]:
        async def body() -> T:
            if after is not None:  # begins once the work before it is over
                await asyncio.wait([after.task])
            flight.begun = True
            return await work()

        urgency = current_urgency()
        context = contextvars.copy_context()
        context.run(_PRIORITY.set, urgency)
        task = asyncio.get_running_loop().create_task(body(), name=f"single flight {key!r}",
                                                      context=context)
        flight = _Flight(task, urgency)
        self._flights[key] = flight
        self.runs += 1

        def finished(done: asyncio.Task[T]) -> None:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if not done.cancelled():
                done.exception()  # retrieved here too: its callers may all have left

        task.add_done_callback(finished)
        return flight
