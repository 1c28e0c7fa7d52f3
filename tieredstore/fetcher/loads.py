"""LoadRegistry: units on their way in, one load per unit, GETs bounded.

A unit is never loaded twice at once: a read that needs a unit already in
flight joins that load (:meth:`LoadRegistry.demand`), whether a read or
read-ahead started it. Each load runs as a task of its own, shielded from
the readers waiting on it, so a reader that gives up does not cancel the load
for the others. The registry also owns the concurrency limits (all GETs,
and read-ahead GETs at half of them) and the background tasks the fetcher
must cancel or wait for on close: loads are cancelled, disk writes finish.

What a load does (disk lookup, GET, caching) is the fetcher's ``run``
function; the registry only keeps track of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from tieredstore.errors import StoreClosed
from tieredstore.fetcher.keys import UnitKey, unit_key
from tieredstore.fetcher.stats import FetcherMetrics, Source
from tieredstore.segment.layout import ChunkRef
from tieredstore.segment.path import SegmentPath
from tieredstore.tasks import Background, Priority, Urgency, current_priority, current_urgency

log = logging.getLogger(__name__)

T = TypeVar("T")
Loaded = tuple[bytes | memoryview, Source]


@dataclass(slots=True, eq=False)
class Load:
    """One unit on its way in: from disk or the store, shared by its readers."""

    path: SegmentPath
    unit: ChunkRef
    key: UnitKey
    prefetch: bool  # started by read-ahead
    task: asyncio.Task[Loaded] | None = None
    demanded: bool = False  # a read is waiting for it
    keep: bool = True  # False once its segment was forgotten: cache nothing
    urgency: Urgency | None = None  # its priority: a read joining it raises it

    @property
    def speculative(self) -> bool:
        """Started by read-ahead, and no read waits for it (yet)."""
        return self.prefetch and not self.demanded


class LoadRegistry:
    """The loads in flight, keyed by unit, and the fetcher's background tasks.

    ``run`` performs a load; ``concurrency`` bounds GETs taken through
    :meth:`limited` (read-ahead GETs hold at most half the permits, so a
    reader's own GETs never queue behind a crowd of prefetches from other
    segments). Counts joins, read-ahead loads and their failures in
    ``metrics``.
    """

    def __init__(self, run: Callable[[Load], Coroutine[Any, Any, Loaded]], *,
                 concurrency: int, metrics: FetcherMetrics) -> None:
        self._run = run
        self.metrics = metrics
        self._limit = asyncio.Semaphore(concurrency)
        self._prefetch_limit = asyncio.Semaphore(max(1, concurrency // 2))
        self._inflight: dict[UnitKey, Load] = {}
        self.prefetch_bytes = 0  # bytes of read-ahead loads in flight
        # Loads (started: cancelled on close) and disk work (spawned: awaited on close).
        self.background = Background()
        self.closed = False

    def __len__(self) -> int:
        """Loads in flight."""
        return len(self._inflight)

    def get(self, key: UnitKey) -> Load | None:
        return self._inflight.get(key)

    # --- loads ------------------------------------------------------------------------

    def demand(self, path: SegmentPath, unit: ChunkRef) -> Coroutine[Any, Any, Loaded]:
        """A read needs ``unit``: join its load in flight, or start one, now (not
        when awaited: the caller starts its read-ahead beside it); its result.

        Raises :class:`StoreClosed` if the registry is (or gets) closed first.
        """
        if self.closed:
            raise StoreClosed("the fetcher is closed")
        key = unit_key(unit)
        load = self._inflight.get(key)
        if load is None:
            load = self.start(path, unit, prefetch=False)
        else:
            self.metrics.coalesced_waits += 1
            if load.speculative:
                self.metrics.readahead_hits += 1
            if load.urgency is not None:  # its GET goes at the reader's priority now
                load.urgency.rise(current_priority())
        load.demanded = True
        return self._result(load)

    @staticmethod
    async def _result(load: Load) -> Loaded:
        assert load.task is not None
        try:
            # Shielded: a reader that gives up must not cancel the load for others.
            return await asyncio.shield(load.task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if load.task.cancelled() and (current is None or not current.cancelling()):
                raise StoreClosed("the fetcher was closed during the read") from None
            raise

    def start(self, path: SegmentPath, unit: ChunkRef, *, prefetch: bool) -> Load:
        """Start loading ``unit`` (not already in flight) as a task of its own."""
        key = unit_key(unit)
        load = Load(path, unit, key, prefetch)
        self._inflight[key] = load
        if prefetch:
            self.prefetch_bytes += unit.length
            self.metrics.prefetch_units += 1
        # At its starter's priority (read-ahead: no higher than READ_AHEAD), and a
        # read joining it raises it (a merge's load, a read-ahead, a host reads).
        load.urgency = current_urgency(Priority.READ_AHEAD if prefetch else Priority.HOST)
        task = self.background.start(self._run(load), "load", priority=load.urgency)
        load.task = task
        task.add_done_callback(lambda t: self._finished(load, t))
        return load

    async def limited(self, load: Load, fetch: Callable[[], Awaitable[T]]) -> T:
        """``fetch()`` under the GET limits that apply to ``load``."""
        if load.speculative:
            async with self._prefetch_limit, self._limit:
                return await fetch()
        async with self._limit:
            return await fetch()

    def forget(self, path: SegmentPath) -> None:
        """Loads of ``path`` keep nothing; those no read waits for are cancelled."""
        for key, load in list(self._inflight.items()):
            if load.path == path:
                load.keep = False
                del self._inflight[key]
                if not load.demanded and load.task is not None:
                    load.task.cancel()

    def _finished(self, load: Load, task: asyncio.Task[Loaded]) -> None:
        # Here, not in a ``finally`` of the load: a task cancelled before its
        # first step never runs its coroutine.
        if self._inflight.get(load.key) is load:
            del self._inflight[load.key]
        if load.prefetch:
            self.prefetch_bytes -= load.unit.length
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here, whoever else awaits it
        if exc is not None and not load.demanded:
            self.metrics.prefetch_errors += 1
            log.warning("%s: read-ahead of [%d, %d) from %r failed: %s", load.path,
                        load.unit.position, load.unit.end, load.unit.key, exc)

    async def close(self) -> None:
        """Refuse new demands, cancel the loads, wait for background work."""
        self.closed = True
        await self.background.close()
