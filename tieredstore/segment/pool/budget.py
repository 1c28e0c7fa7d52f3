"""Budget: a byte budget that appends wait on, first come, first served.

``in_use`` counts every byte admitted and not yet released: bytes in buffers,
bytes being uploaded, and bytes reserved for a waiting append that has been
admitted but has not yet run. It never exceeds ``limit``. A waiter is admitted
only in arrival order, so a small append cannot overtake a large one forever.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from tieredstore.segment.pool.metrics import PoolMetrics


class Budget:
    """Admission within ``limit`` bytes; ``make_room(need)`` is asked for room
    whenever the first waiter does not fit."""

    def __init__(self, limit: int, metrics: PoolMetrics,
                 make_room: Callable[[int], None]) -> None:
        self.limit = limit
        self.in_use = 0
        self.reserved = 0  # admitted, not yet placed in a buffer
        self._metrics = metrics
        self._make_room = make_room
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for _, fut in self._waiters if not fut.done())

    def must_wait(self, n: int) -> bool:
        """Whether ``n`` bytes must wait: no room, or others are waiting already."""
        waiters = self._waiters
        while waiters and waiters[0][1].done():
            waiters.popleft()
        return bool(waiters) or self.in_use + n > self.limit

    def reserve(self, n: int) -> None:
        self.in_use += n
        self.reserved += n
        self._metrics.in_use(self.in_use)

    def placed(self, n: int) -> None:
        """Reserved bytes are in a buffer now."""
        self.reserved -= n

    def unreserve(self, n: int) -> None:
        """Reserved bytes will not be placed after all."""
        self.reserved -= n
        self.release(n)

    def release(self, n: int) -> None:
        """Bytes left the pool (committed, or handed back): admit who fits now."""
        self.in_use -= n
        self._metrics.in_use(self.in_use)
        self.wake()

    async def wait(self, n: int) -> None:
        """Wait for room for ``n`` bytes; return with them reserved."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((n, fut))
        self._metrics.waits += 1
        started = time.perf_counter()
        self.wake()
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.unreserve(n)  # room was reserved for us: hand it on
            raise
        finally:
            self._metrics.wait_seconds += time.perf_counter() - started

    def wake(self) -> None:
        """Admit waiters in order while they fit; ask for room for the first that
        does not."""
        waiters = self._waiters
        while waiters:
            need, fut = waiters[0]
            if fut.done():
                waiters.popleft()
            elif self.in_use + need <= self.limit:
                waiters.popleft()
                self.reserve(need)
                fut.set_result(None)
            else:
                self._make_room(need)
                return

    def fail_waiters(self, error: Callable[[int], BaseException | None]) -> None:
        """Raise ``error(need)`` in each waiter it returns an error for."""
        for need, fut in self._waiters:
            if not fut.done():
                exc = error(need)
                if exc is not None:
                    fut.set_exception(exc)
